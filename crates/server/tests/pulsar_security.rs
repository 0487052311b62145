//! Pulsar authentication (JWT tokens, TLS client certificates) and
//! authorization (the broker's ACLs) on the plain and `pulsar+ssl`
//! listeners, judged by the official Python client and the Rust `pulsar`
//! crate. Certificates and tokens are made here, never checked in.

mod common;

use common::pki::{make_pki, make_tokens, mint_token, now_s, TOKEN_SECRET};
use common::BrokerProcess;

/// A broker with Pulsar authentication (token and tls providers) on both
/// Pulsar listeners and an authorizer whose super users are alice and the
/// loopback Kafka admin.
fn secured(pki: &std::path::Path, extra: &[&str]) -> BrokerProcess {
    make_pki(pki);
    make_tokens(pki);
    let [keystore, truststore] = common::pki::store_settings(pki);
    let secret = format!(
        "token.secret.key=file://{}",
        pki.join("token.secret").display()
    );
    let mut settings = vec![
        "pulsar.tls.listen.address=127.0.0.1:0",
        keystore.as_str(),
        truststore.as_str(),
        "ssl.client.auth=requested",
        "pulsar.authentication.enabled=true",
        secret.as_str(),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:alice;User:ANONYMOUS",
        // The metrics the script reads over plain HTTP.
        "http.anonymous.principal=User:ANONYMOUS",
        "connection.failed.authentication.delay.ms=50",
        "auto.create.topics.type=non-partitioned",
    ];
    settings.extend_from_slice(extra);
    BrokerProcess::start(&settings)
}

fn run(phase: &str, broker: &BrokerProcess, pki: &std::path::Path) {
    let tls = format!(
        "pulsar+ssl://localhost:{}",
        port(&broker.logged_listener("pulsar+ssl"))
    );
    let args: Vec<std::ffi::OsString> = vec![
        phase.into(),
        broker.pulsar_url().into(),
        tls.into(),
        broker.bootstrap().into(),
        broker.http_url().into(),
        pki.as_os_str().into(),
    ];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    broker.run_python_script("pulsar_security.py", &args);
}

fn port(addr: &str) -> u16 {
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Tokens over `pulsar://` and `pulsar+ssl://` (hostname verified against
/// the test CA), a client certificate as `User:CN=client-1`; no
/// credentials, an expired and a forged token refused at connect; ACLs
/// decide produce (Write), subscribe (Read on the topic and on the
/// subscription's group; a Reader needs no group) and lookups (Describe);
/// a plaintext client on the TLS port gets nowhere.
#[test]
fn pulsar_clients_authenticate_and_are_authorized() {
    let pki = tempfile::tempdir().unwrap();
    let broker = secured(pki.path(), &[]);
    run("main", &broker, pki.path());
    let log = broker.log_text();
    assert!(
        log.contains("authentication failed: the token has expired"),
        "{log}"
    );
    assert!(log.contains("TLS handshake failed"), "{log}");
}

/// Short-lived tokens: at expiry the broker sends AuthChallenge and the
/// client answers with a fresh token on the same connection, which keeps
/// serving.
#[test]
fn pulsar_tokens_are_refreshed_on_the_connection() {
    let pki = tempfile::tempdir().unwrap();
    let broker = secured(pki.path(), &["sasl.oauthbearer.clock.skew.seconds=0"]);
    let start = now_s();
    let lines: String = (1..=12)
        .map(|i| {
            let exp = start + 3 * i;
            let t = mint_token(
                TOKEN_SECRET,
                &serde_json::json!({"sub": "alice", "exp": exp}),
            );
            format!("{exp} {t}\n")
        })
        .collect();
    std::fs::write(pki.path().join("short-tokens"), lines).unwrap();
    run("refresh", &broker, pki.path());
    assert!(
        !broker.log_text().contains("expired"),
        "a connection was closed:\n{}",
        broker.log_text()
    );
}

/// The Rust `pulsar` crate's token authentication: a valid token
/// produces, a forged one is refused.
#[tokio::test(flavor = "multi_thread")]
async fn the_rust_pulsar_crate_authenticates_with_a_token() {
    let pki = tempfile::tempdir().unwrap();
    let broker = secured(pki.path(), &[]);
    let auth = |name: &str| pulsar::Authentication {
        name: "token".into(),
        data: std::fs::read(pki.path().join(format!("token-{name}"))).unwrap(),
    };
    let client: pulsar::Pulsar<pulsar::TokioExecutor> =
        pulsar::Pulsar::builder(broker.pulsar_url(), pulsar::TokioExecutor)
            .with_auth(auth("alice"))
            .build()
            .await
            .expect("alice connects");
    let mut producer = client
        .producer()
        .with_topic("persistent://public/default/rust-token")
        .build()
        .await
        .unwrap();
    producer
        .send_non_blocking(b"by token".to_vec())
        .await
        .unwrap()
        .await
        .unwrap();
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        pulsar::Pulsar::builder(broker.pulsar_url(), pulsar::TokioExecutor)
            .with_auth(auth("forged"))
            .with_connection_retry_options(pulsar::ConnectionRetryOptions {
                max_retries: 0,
                ..Default::default()
            })
            .build(),
    )
    .await
    .expect("refused in time");
    assert!(refused.is_err(), "a forged token connected");
}
