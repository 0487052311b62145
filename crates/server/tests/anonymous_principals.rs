//! Principals per protocol: a Kafka listener without authentication is
//! `User:ANONYMOUS`, as in Kafka, but a Pulsar or HTTP client without
//! credentials does not inherit what an authorizer grants that principal:
//! it is refused unless `pulsar.anonymous.principal` /
//! `http.anonymous.principal` names its principal. Judged by the official
//! Python Pulsar client, confluent-kafka and reqwest, following the
//! README's ACL example literally.

mod common;

use common::pki::{make_pki, store_settings};
use common::BrokerProcess;

/// The README's "Security: ACLs" start: a loopback PLAINTEXT listener and
/// a SASL_SSL one, the authorizer, and the PLAINTEXT listener's
/// `User:ANONYMOUS` as the super user; Pulsar and HTTP on their default
/// loopback listeners, with no authentication.
fn readme_acl_example(pki: &std::path::Path, extra: &[&str]) -> BrokerProcess {
    make_pki(pki);
    let [keystore, _] = store_settings(pki);
    let mut settings = vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        keystore.as_str(),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",
        "connection.failed.authentication.delay.ms=0",
    ];
    settings.extend_from_slice(extra);
    BrokerProcess::start(&settings)
}

fn run(phase: &str, broker: &BrokerProcess) {
    let args = [phase.to_string(), broker.pulsar_url(), broker.bootstrap()];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    broker.run_python_script("anonymous_principals.py", &args);
}

async fn status_and_body(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
) -> (reqwest::StatusCode, String) {
    let r = http.request(method, url).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

/// Following the README's ACL example: the Kafka PLAINTEXT client
/// administers as `User:ANONYMOUS`, while an unauthenticated Pulsar client
/// is answered AuthorizationError for every command and an
/// unauthenticated HTTP request 401 naming the keys to set (the health
/// checks and the OpenAPI document stay open); the log says so once.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_acl_example_refuses_unauthenticated_pulsar_and_http() {
    let pki = tempfile::tempdir().unwrap();
    let broker = readme_acl_example(pki.path(), &[]);
    let (b, phase) = (&broker, "readme");
    tokio::task::block_in_place(|| run(phase, b));
    let http = reqwest::Client::new();
    let base = broker.http_url();
    for (method, path) in [
        (reqwest::Method::GET, "/admin/v2/tenants"),
        (reqwest::Method::PUT, "/admin/v2/tenants/intruder"),
        (reqwest::Method::GET, "/admin/v2/persistent/public/default"),
        (reqwest::Method::GET, "/metrics"),
        (
            reqwest::Method::PUT,
            "/admin/v2/persistent/public/default/http-made",
        ),
    ] {
        let (status, body) = status_and_body(&http, method.clone(), &format!("{base}{path}")).await;
        assert_eq!(
            status,
            reqwest::StatusCode::UNAUTHORIZED,
            "{method} {path}: {body}"
        );
        assert!(
            body.contains("http.anonymous.principal")
                && body.contains("http.authentication.enabled"),
            "{method} {path}: {body}"
        );
    }
    for path in ["/health/live", "/health/ready", "/openapi.json"] {
        let (status, body) =
            status_and_body(&http, reqwest::Method::GET, &format!("{base}{path}")).await;
        assert!(status.is_success(), "{path}: {status} {body}");
    }
    let log = broker.log_text();
    for front_end in ["Pulsar", "HTTP"] {
        assert_eq!(
            log.matches(&format!("every {front_end} client is refused"))
                .count(),
            1,
            "{log}"
        );
    }
}

/// `pulsar.anonymous.principal` and `http.anonymous.principal` name the
/// principal of clients without credentials: `User:guest` is refused until
/// an ACL allows it, like any principal, and is never a super user.
#[tokio::test(flavor = "multi_thread")]
async fn a_named_anonymous_principal_is_authorized_like_any_other() {
    let pki = tempfile::tempdir().unwrap();
    let broker = readme_acl_example(
        pki.path(),
        &[
            "pulsar.anonymous.principal=User:guest",
            "http.anonymous.principal=User:guest",
        ],
    );
    let (b, phase) = (&broker, "named");
    tokio::task::block_in_place(|| run(phase, b));
    let http = reqwest::Client::new();
    let base = broker.http_url();
    let (status, body) = status_and_body(
        &http,
        reqwest::Method::GET,
        &format!("{base}/admin/v2/tenants"),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("User:guest"), "{body}");
    let log = broker.log_text();
    assert!(
        log.contains("Pulsar clients without credentials act as User:guest")
            && log.contains("HTTP clients without credentials act as User:guest"),
        "{log}"
    );
    assert!(!log.contains("client is refused"), "{log}");
}

/// A principal that is not `User:name` stops the start with an error
/// naming the key.
#[test]
fn an_invalid_anonymous_principal_is_refused_at_start() {
    for key in ["pulsar.anonymous.principal", "http.anonymous.principal"] {
        let tmp = tempfile::tempdir().unwrap();
        let setting = format!("{key}=guest");
        let log = match BrokerProcess::try_start_standalone_on(tmp.path().join("data"), &[&setting])
        {
            Ok(b) => panic!("{key}: started\n{}", b.log_text()),
            Err(log) => log,
        };
        assert!(
            log.contains(key) && log.contains("User:name"),
            "{key}: {log}"
        );
    }
}
