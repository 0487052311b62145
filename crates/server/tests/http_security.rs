//! HTTPS and the HTTP admin API's authentication (Bearer JWT, Basic
//! against SCRAM credentials) and authorization (the broker's ACLs),
//! judged by Python's own HTTP and TLS stack.

mod common;

use common::pki::{make_pki, make_tokens};
use common::BrokerProcess;

/// Health checks open; no or bad credentials 401 (with a challenge);
/// a super user's token over HTTPS reaches everything (and lookups give
/// the `pulsar+ssl` and `https` URLs); a password user's Basic
/// credentials; ACLs deciding creation, listing (hidden topics),
/// stats, deletion and metrics with 403; plain HTTP on the HTTPS port
/// refused; new certificate files taken up without a restart.
#[test]
fn https_bearer_and_basic_with_acls() {
    let pki = tempfile::tempdir().unwrap();
    make_pki(pki.path());
    make_tokens(pki.path());
    let keystore = format!(
        "ssl.keystore.location={}",
        pki.path().join("server.pem").display()
    );
    let secret = format!(
        "token.secret.key=file://{}",
        pki.path().join("token.secret").display()
    );
    let broker = BrokerProcess::start(&[
        "http.tls.listen.address=127.0.0.1:0",
        "pulsar.tls.listen.address=127.0.0.1:0",
        keystore.as_str(),
        "http.authentication.enabled=true",
        secret.as_str(),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:alice;User:ANONYMOUS",
        "connection.failed.authentication.delay.ms=50",
        "auto.create.topics.type=non-partitioned",
    ]);
    let https = broker.logged_listener("https");
    let port = https.rsplit_once(':').unwrap().1;
    let https = format!("https://localhost:{port}");
    let args = [
        broker.http_url(),
        https,
        broker.bootstrap(),
        pki.path().display().to_string(),
    ];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    broker.run_python_script("http_security.py", &args);
    assert!(broker.log_text().contains("HTTP authentication failed"));
    // New certificate files are taken up without a restart, by the node's
    // one reloader (no Kafka TLS listener here).
    make_pki(pki.path());
    broker.wait_for_log_line(
        "the certificates reloaded",
        std::time::Duration::from_secs(30),
        |l| l.contains("TLS certificates reloaded"),
    );
}
