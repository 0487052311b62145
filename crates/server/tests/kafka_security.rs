//! TLS and SASL on real listeners, judged by independent clients:
//! librdkafka (Python confluent-kafka, whose wheels carry TLS and SASL) and
//! kafka-python. Certificates are made here with `rcgen`, never checked in.

mod common;

use std::path::Path;

use common::pki::{make_pki, make_tokens};
use common::BrokerProcess;

fn run(phase: &str, broker: &BrokerProcess, pki: &Path) {
    let (bootstrap, http) = (broker.bootstrap(), broker.http_url());
    let listeners = ["SSL", "SASL_PLAINTEXT", "SASL_SSL"].map(|l| broker.listener(l));
    let mut args: Vec<&std::ffi::OsStr> = vec![phase.as_ref(), bootstrap.as_ref()];
    args.extend(listeners.iter().map(std::ffi::OsStr::new));
    args.extend([pki.as_os_str(), http.as_ref()]);
    broker.run_python_script("kafka_security.py", &args);
}

/// PLAINTEXT (for the admin), SSL with client certificates requested,
/// SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and -512: users
/// made with AlterUserScramCredentials, then produce and consume over each
/// protocol with both clients; wrong passwords, unknown users, deleted
/// credentials, a rogue client certificate, plaintext on the TLS port and
/// TLS on the plaintext port all refused; credentials survive a SIGKILL.
#[test]
fn tls_and_sasl_with_librdkafka_and_kafka_python() {
    secured("requested", &["main", "after-restart"]);
}

/// `ssl.client.auth=required`: a certificate of the truststore's CA gets
/// in; one of another CA, or none, is refused in the handshake.
#[test]
fn client_certificates_required() {
    secured("required", &["mtls-required"]);
}

/// `connections.max.reauth.ms` (KIP-368): librdkafka re-authenticates its
/// SASL connections before their sessions end and keeps using them; the
/// broker never has to close one.
#[test]
fn sasl_sessions_are_re_authenticated() {
    let broker = secured_with("none", &["reauth"], &["connections.max.reauth.ms=2000"]);
    assert!(
        !broker.log_text().contains("without re-authentication"),
        "a session expired:\n{}",
        broker.log_text()
    );
}

/// `ssl.principal.mapping.rules`: a client certificate's subject becomes
/// the principal a rule makes of it (here the super user of an authorizer
/// that otherwise denies everything); a subject no rule applies to is
/// refused.
#[test]
fn certificate_subjects_map_to_principals() {
    secured_with(
        "required",
        &["mapped-principal"],
        &[
            "ssl.principal.mapping.rules=RULE:^CN=([a-z0-9-]+)$/$1/U,DEFAULT",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:CLIENT-1",
        ],
    );
    secured_with(
        "required",
        &["unmapped-principal"],
        &["ssl.principal.mapping.rules=RULE:^CN=nobody$/nobody/"],
    );
}

/// SASL/OAUTHBEARER (RFC 7628) with JWTs checked against an HMAC key:
/// librdkafka (through its token callback) and kafka-python get in with a
/// valid token and are the token's subject to the authorizer (alice, a
/// super user, produces; bob, with no ACL, is denied); an expired token
/// and one signed with another key are refused. A session lasts no longer
/// than its token (`session_lifetime_ms`).
#[test]
fn oauthbearer_tokens_are_checked_and_name_their_principal() {
    let broker = secured_with(
        "none",
        &["oauthbearer"],
        &[
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "token.secret.key=file://{pki}/token.secret",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:alice",
        ],
    );
    assert!(broker.log_text().contains("the token has expired"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use kafka_protocol::messages::{
            ApiKey, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
        };
        let exp = common::pki::now_s() + 600;
        let token = common::pki::mint_token(
            common::pki::TOKEN_SECRET,
            &serde_json::json!({"sub": "alice", "exp": exp}),
        );
        let addr = broker.listener("SASL_PLAINTEXT").parse().unwrap();
        let mut c = common::RawConn::connect(addr).await;
        let ResponseKind::SaslHandshake(h) = c
            .call(
                ApiKey::SaslHandshake,
                1,
                SaslHandshakeRequest::default().with_mechanism(
                    kafka_protocol::protocol::StrBytes::from_static_str("OAUTHBEARER"),
                ),
            )
            .await
        else {
            panic!("SaslHandshake")
        };
        assert_eq!(h.error_code, 0);
        let message = format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}");
        let ResponseKind::SaslAuthenticate(a) = c
            .call(
                ApiKey::SaslAuthenticate,
                2,
                SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from(message)),
            )
            .await
        else {
            panic!("SaslAuthenticate")
        };
        assert_eq!(a.error_code, 0, "{:?}", a.error_message);
        let left = exp * 1000 - common::pki::now_s() * 1000;
        assert!(
            a.session_lifetime_ms > 0 && a.session_lifetime_ms <= left + 31_000,
            "session lifetime {} ms, token valid {left} ms more",
            a.session_lifetime_ms
        );
        assert!(a.session_lifetime_ms > 500_000, "{}", a.session_lifetime_ms);
    });
}

/// A broker with every kind of listener; runs the script's phases, a
/// SIGKILL and restart between two phases.
fn secured(client_auth: &str, phases: &[&str]) {
    secured_with(client_auth, phases, &[]);
}

/// [`secured`] with `extra` settings; the broker after the phases.
fn secured_with(client_auth: &str, phases: &[&str], extra: &[&str]) -> BrokerProcess {
    let pki = tempfile::tempdir().unwrap();
    make_pki(pki.path());
    make_tokens(pki.path());
    // `{pki}` in a setting is the certificates' and tokens' directory.
    let extra: Vec<String> = extra
        .iter()
        .map(|e| e.replace("{pki}", &pki.path().display().to_string()))
        .collect();
    let client_auth = format!("ssl.client.auth={client_auth}");
    let [keystore, truststore] = common::pki::store_settings(pki.path());
    let mut settings = vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        keystore.as_str(),
        truststore.as_str(),
        client_auth.as_str(),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms=50",
        "group.initial.rebalance.delay.ms=0",
    ];
    settings.extend(extra.iter().map(String::as_str));
    let mut broker = BrokerProcess::start(&settings);
    for (i, phase) in phases.iter().enumerate() {
        if i > 0 {
            broker.kill();
            broker.restart();
        }
        run(phase, &broker, pki.path());
        if *phase == "main" {
            assert!(
                broker.log_text().contains("SASL authentication failed"),
                "failed authentications are logged"
            );
        }
    }
    broker
}

/// The rdkafka crate (librdkafka built with OpenSSL): produce and consume
/// over SASL_SSL with SCRAM-SHA-512 (hostname verified against the test
/// CA), over SASL_PLAINTEXT with PLAIN, and over SSL with a client
/// certificate; a wrong password is refused.
#[test]
fn the_rdkafka_crate_over_sasl_and_tls() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
    use rdkafka::ClientConfig;
    use std::time::{Duration, Instant};

    let (broker, pki) = common::pki::secure_broker("requested", &[]);
    let file = |f: &str| pki.path().join(f).display().to_string();
    let roundtrip = |addr: String, settings: &[(&str, String)], label: &str| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &addr)
            .set("socket.timeout.ms", "10000")
            .set("message.timeout.ms", "20000");
        for (k, v) in settings {
            c.set(*k, v);
        }
        let topic = format!("rd-{label}");
        let p: ThreadedProducer<DefaultProducerContext> = c.create().unwrap();
        for i in 0..3 {
            let v = format!("{label}-{i}");
            p.send(BaseRecord::to(&topic).key(&v).payload(&v)).unwrap();
        }
        p.flush(Duration::from_secs(30)).unwrap();
        let consumer: BaseConsumer = c
            .clone()
            .set("group.id", format!("g-{label}"))
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        consumer.subscribe(&[&topic]).unwrap();
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(60);
        while got.len() < 3 && Instant::now() < end {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) {
                use rdkafka::Message;
                got.push(String::from_utf8_lossy(m.payload().unwrap()).to_string());
            }
        }
        assert_eq!(
            got,
            (0..3).map(|i| format!("{label}-{i}")).collect::<Vec<_>>(),
            "{label}"
        );
    };
    let sasl = |mechanism: &str, user: &str, password: &str| {
        vec![
            ("sasl.mechanism", mechanism.to_string()),
            ("sasl.username", user.to_string()),
            ("sasl.password", password.to_string()),
            ("ssl.ca.location", file("ca.pem")),
        ]
    };
    let mut scram = sasl("SCRAM-SHA-512", "alice", "alice-secret");
    scram.push(("security.protocol", "SASL_SSL".into()));
    roundtrip(broker.listener("SASL_SSL"), &scram, "scram");
    let mut plain = sasl("PLAIN", "bob", "bob-secret");
    plain.push(("security.protocol", "SASL_PLAINTEXT".into()));
    roundtrip(broker.listener("SASL_PLAINTEXT"), &plain, "plain");
    let mtls = vec![
        ("security.protocol", "SSL".to_string()),
        ("ssl.ca.location", file("ca.pem")),
        ("ssl.certificate.location", file("client.pem")),
        ("ssl.key.location", file("client.key")),
    ];
    roundtrip(broker.listener("SSL"), &mtls, "mtls");
    // A wrong password: metadata is never served.
    let mut wrong = ClientConfig::new();
    wrong
        .set("bootstrap.servers", broker.listener("SASL_PLAINTEXT"))
        .set("security.protocol", "SASL_PLAINTEXT");
    for (k, v) in sasl("SCRAM-SHA-512", "alice", "not-her-password") {
        wrong.set(k, v);
    }
    let c: BaseConsumer = wrong.create().unwrap();
    assert!(c.fetch_metadata(None, Duration::from_secs(5)).is_err());
}
