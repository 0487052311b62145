//! TLS and SASL on real listeners, judged by independent clients:
//! librdkafka (Python confluent-kafka, whose wheels carry TLS and SASL) and
//! kafka-python. Certificates are made here with `rcgen`, never checked in.

mod common;

use std::path::Path;

use common::BrokerProcess;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A CA, a server certificate for localhost/127.0.0.1 and a client
/// certificate, as PEM files in `dir`; plus a client certificate from
/// another CA, which the broker must refuse.
fn make_pki(dir: &Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Magnetar test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut server =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let server_cert = server.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let client_key = KeyPair::generate().unwrap();
    let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
    client
        .distinguished_name
        .push(DnType::CommonName, "client-1");
    let client_cert = client.signed_by(&client_key, &ca_cert, &ca_key).unwrap();
    let rogue_ca_key = KeyPair::generate().unwrap();
    let mut rogue_ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    rogue_ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    rogue_ca
        .distinguished_name
        .push(DnType::CommonName, "Rogue CA");
    let rogue_ca_cert = rogue_ca.self_signed(&rogue_ca_key).unwrap();
    let rogue_key = KeyPair::generate().unwrap();
    let rogue = CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .signed_by(&rogue_key, &rogue_ca_cert, &rogue_ca_key)
        .unwrap();
    let w = |name: &str, text: String| std::fs::write(dir.join(name), text).unwrap();
    w("ca.pem", ca_cert.pem());
    w(
        "server.pem",
        format!("{}{}", server_cert.pem(), key.serialize_pem()),
    );
    w("client.pem", client_cert.pem());
    w("client.key", client_key.serialize_pem());
    w("rogue.pem", rogue.pem());
    w("rogue.key", rogue_key.serialize_pem());
}

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

/// A broker with every kind of listener; runs the script's phases, a
/// SIGKILL and restart between two phases.
fn secured(client_auth: &str, phases: &[&str]) {
    secured_with(client_auth, phases, &[]);
}

/// [`secured`] with `extra` settings; the broker after the phases.
fn secured_with(client_auth: &str, phases: &[&str], extra: &[&str]) -> BrokerProcess {
    let pki = tempfile::tempdir().unwrap();
    make_pki(pki.path());
    let client_auth = format!("ssl.client.auth={client_auth}");
    let keystore = format!(
        "ssl.keystore.location={}",
        pki.path().join("server.pem").display()
    );
    let truststore = format!(
        "ssl.truststore.location={}",
        pki.path().join("ca.pem").display()
    );
    let mut settings = vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        keystore.as_str(),
        truststore.as_str(),
        client_auth.as_str(),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms=50",
        "group.initial.rebalance.delay.ms=0",
    ];
    settings.extend_from_slice(extra);
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
