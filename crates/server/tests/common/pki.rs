//! Test certificates and tokens, made in the test (`rcgen`,
//! `jsonwebtoken`), never checked in.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A CA, a server certificate for localhost/127.0.0.1 and a client
/// certificate, as PEM files in `dir`; plus a client certificate from
/// another CA, which the broker must refuse.
pub fn make_pki(dir: &Path) {
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

/// The broker settings naming [`make_pki`]'s server keystore and CA
/// truststore in `dir`.
pub fn store_settings(dir: &Path) -> [String; 2] {
    [
        format!("ssl.keystore.location={}", dir.join("server.pem").display()),
        format!("ssl.truststore.location={}", dir.join("ca.pem").display()),
    ]
}

/// The HMAC secret [`make_pki`] writes to `token.secret` (and tokens are
/// signed with).
pub const TOKEN_SECRET: &[u8] = b"magnetar test token secret, 32+ bytes long";

/// An HS256 JWT of `claims` signed with `secret`.
pub fn mint_token(secret: &[u8], claims: &serde_json::Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        claims,
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    .unwrap()
}

/// Now, in seconds since the epoch.
pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Token files in `dir` (`token-<name>`): `alice` and `bob` valid for an
/// hour, `expired` two minutes ago, `forged` signed with another secret;
/// and the secret itself in `token.secret`.
pub fn make_tokens(dir: &Path) {
    std::fs::write(dir.join("token.secret"), TOKEN_SECRET).unwrap();
    let now = now_s();
    let w = |name: &str, secret: &[u8], claims: serde_json::Value| {
        std::fs::write(
            dir.join(format!("token-{name}")),
            mint_token(secret, &claims),
        )
        .unwrap()
    };
    w(
        "alice",
        TOKEN_SECRET,
        serde_json::json!({"sub": "alice", "exp": now + 3600}),
    );
    w(
        "bob",
        TOKEN_SECRET,
        serde_json::json!({"sub": "bob", "exp": now + 3600}),
    );
    w(
        "expired",
        TOKEN_SECRET,
        serde_json::json!({"sub": "alice", "exp": now - 120}),
    );
    w(
        "forged",
        b"some other secret, not the broker's",
        serde_json::json!({"sub": "alice", "exp": now + 3600}),
    );
}

/// A broker with PLAINTEXT (for set-up), SSL, SASL_PLAINTEXT and SASL_SSL
/// listeners, PLAIN and both SCRAMs enabled, `extra` settings; users alice
/// (SCRAM-SHA-512) and bob (SCRAM-SHA-256) made through the native admin
/// client; and the certificates' directory.
pub fn secure_broker(
    client_auth: &str,
    extra: &[&str],
) -> (super::BrokerProcess, tempfile::TempDir) {
    let pki = tempfile::tempdir().unwrap();
    make_pki(pki.path());
    let [keystore, truststore] = store_settings(pki.path());
    let client_auth = format!("ssl.client.auth={client_auth}");
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
    let broker = super::BrokerProcess::start(&settings);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = client::Admin::connect(client::ClientConfig::new([broker.bootstrap()]))
            .await
            .unwrap();
        admin
            .upsert_scram_credential(
                "alice",
                client::SaslMechanism::ScramSha512,
                8192,
                "alice-secret",
            )
            .await
            .unwrap();
        admin
            .upsert_scram_credential(
                "bob",
                client::SaslMechanism::ScramSha256,
                4096,
                "bob-secret",
            )
            .await
            .unwrap();
    });
    (broker, pki)
}
