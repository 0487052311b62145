use super::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

struct Pki {
    ca_pem: String,
    server_pem: String,
    server_key: String,
    client_der: Vec<u8>,
}

fn pki(server_cn: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "Test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, server_cn);
    let server = p.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let ckey = KeyPair::generate().unwrap();
    let mut c = CertificateParams::new(Vec::<String>::new()).unwrap();
    c.distinguished_name
        .push(DnType::OrganizationName, "Example, Inc");
    c.distinguished_name.push(DnType::CommonName, "client-1");
    let client = c.signed_by(&ckey, &ca_cert, &ca_key).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        server_pem: server.pem(),
        server_key: key.serialize_pem(),
        client_der: client.der().to_vec(),
    }
}

fn settings(dir: &Path, auth: ClientAuth) -> TlsSettings {
    TlsSettings {
        keystore: dir.join("server.pem"),
        key: None,
        truststore: Some(dir.join("ca.pem")),
        client_auth: auth,
        tls12: true,
        principal_rules: Default::default(),
    }
}

fn write(dir: &Path, p: &Pki) {
    std::fs::write(
        dir.join("server.pem"),
        format!("{}{}", p.server_pem, p.server_key),
    )
    .unwrap();
    std::fs::write(dir.join("ca.pem"), &p.ca_pem).unwrap();
}

#[test]
fn loads_pem_material_and_reloads_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &pki("one"));
    let ctx = TlsContext::load(settings(dir.path(), ClientAuth::Required)).unwrap();
    let first = ctx.config();
    assert_eq!(ctx.reload_if_changed(), Ok(false));
    // A new certificate (a different length, so the stamp differs even
    // within the file system's timestamp granularity).
    write(
        dir.path(),
        &pki("a-much-longer-common-name-for-the-second-certificate"),
    );
    assert_eq!(ctx.reload_if_changed(), Ok(true));
    assert!(!Arc::ptr_eq(&first, &ctx.config()));
    // Broken material is refused and the last good one kept.
    std::fs::write(dir.path().join("server.pem"), "not pem").unwrap();
    let kept = ctx.config();
    assert!(ctx.reload_if_changed().is_err());
    assert!(Arc::ptr_eq(&kept, &ctx.config()));
}

#[test]
fn unusable_settings_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let missing = TlsContext::load(settings(dir.path(), ClientAuth::None)).unwrap_err();
    assert!(missing.contains("ssl.keystore.location"), "{missing}");
    let p = pki("x");
    std::fs::write(dir.path().join("server.pem"), &p.server_pem).unwrap();
    let no_key = TlsContext::load(settings(dir.path(), ClientAuth::None)).unwrap_err();
    assert!(no_key.contains("private key"), "{no_key}");
    write(dir.path(), &p);
    let mut s = settings(dir.path(), ClientAuth::Required);
    s.truststore = None;
    assert!(TlsContext::load(s)
        .unwrap_err()
        .contains("ssl.truststore.location"));
    // A separate key file works.
    std::fs::write(dir.path().join("cert.pem"), &p.server_pem).unwrap();
    std::fs::write(dir.path().join("key.pem"), &p.server_key).unwrap();
    let mut s = settings(dir.path(), ClientAuth::Requested);
    s.keystore = dir.path().join("cert.pem");
    s.key = Some(dir.path().join("key.pem"));
    TlsContext::load(s).unwrap();
}

#[test]
fn certificate_subjects_become_rfc2253_principals() {
    let p = pki("x");
    assert_eq!(
        principal_of_certificate(&p.client_der).unwrap().to_string(),
        // rcgen writes CN first; RFC 2253 reverses the RDN sequence.
        "User:O=Example\\, Inc,CN=client-1"
    );
    assert!(principal_of_certificate(b"garbage").is_none());
}
