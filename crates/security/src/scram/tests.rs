use super::*;

const SECRET: &[u8] = b"test secret";

fn lookup_of(
    user: &'static str,
    cred: ScramCredential,
    mech: ScramMechanism,
) -> impl Fn(&str, ScramMechanism) -> Option<ScramCredential> {
    move |u, m| (u == user && m == mech).then(|| cred.clone())
}

/// The client side, written from RFC 5802 §3 (not from the server code).
fn client_final(
    m: ScramMechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
) -> (String, Vec<u8>) {
    let mut nonce = "";
    let mut salt = Vec::new();
    let mut iterations = 0;
    for attr in server_first.split(',') {
        let (k, v) = attr.split_once('=').unwrap();
        match k {
            "r" => nonce = v,
            "s" => salt = B64.decode(v).unwrap(),
            "i" => iterations = v.parse().unwrap(),
            _ => {}
        }
    }
    let salted = m.salted_password(password.as_bytes(), &salt, iterations);
    let client_key = m.hmac(&salted, b"Client Key");
    let stored_key = m.hash(&client_key);
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let sig = m.hmac(&stored_key, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
    let server_key = m.hmac(&salted, b"Server Key");
    let expected_server_sig = m.hmac(&server_key, auth.as_bytes());
    (
        format!("{without_proof},p={}", B64.encode(proof)),
        expected_server_sig,
    )
}

#[test]
fn rfc7677_test_vector() {
    let m = ScramMechanism::Sha256;
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let cred = ScramCredential::from_password(m, "pencil", salt, 4096);
    let lookup = lookup_of("user", cred, m);
    let (server, first) = ScramServer::start_with(
        m,
        b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        &lookup,
        SECRET,
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(first).unwrap(),
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let (p, last) = server
        .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        .unwrap();
    assert_eq!(p, Principal::user("user"));
    assert_eq!(
        String::from_utf8(last).unwrap(),
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
}

#[test]
fn both_mechanisms_authenticate_and_sign() {
    for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let cred = ScramCredential::from_password(m, "s3cret", b"salty".to_vec(), 4096);
        let lookup = lookup_of("alice", cred, m);
        let bare = "n=alice,r=abcdefgh";
        let (server, first) =
            ScramServer::start(m, format!("n,,{bare}").as_bytes(), &lookup, SECRET).unwrap();
        let first = String::from_utf8(first).unwrap();
        assert!(first.starts_with("r=abcdefgh"));
        let (fin, sig) = client_final(m, "s3cret", bare, &first);
        let (p, last) = server.finish(fin.as_bytes()).unwrap();
        assert_eq!(p.to_string(), "User:alice");
        assert_eq!(last, format!("v={}", B64.encode(sig)).into_bytes());
    }
}

#[test]
fn wrong_password_unknown_user_and_replay_fail_alike() {
    let m = ScramMechanism::Sha512;
    let cred = ScramCredential::from_password(m, "right", b"salt".to_vec(), 4096);
    let lookup = lookup_of("alice", cred, m);
    let bare = "n=alice,r=nonce1";
    let (server, first) =
        ScramServer::start(m, format!("n,,{bare}").as_bytes(), &lookup, SECRET).unwrap();
    let first = String::from_utf8(first).unwrap();
    let (wrong, _) = client_final(m, "wrong", bare, &first);
    let err = server.finish(wrong.as_bytes()).unwrap_err();
    assert!(matches!(err, AuthError::InvalidCredentials { .. }));

    // A final message that was right for one exchange fails in the next:
    // the server's nonce differs.
    let (server, first) =
        ScramServer::start(m, format!("n,,{bare}").as_bytes(), &lookup, SECRET).unwrap();
    let (good, _) = client_final(m, "right", bare, &String::from_utf8(first).unwrap());
    let (server2, _) =
        ScramServer::start(m, format!("n,,{bare}").as_bytes(), &lookup, SECRET).unwrap();
    assert!(matches!(
        server2.finish(good.as_bytes()).unwrap_err(),
        AuthError::InvalidCredentials { .. }
    ));
    assert!(server.finish(good.as_bytes()).is_ok());

    // An unknown user gets a stable made-up salt and fails only at the end,
    // with the same error as a wrong password.
    let a = ScramServer::start(m, b"n,,n=mallory,r=x1", &lookup, SECRET).unwrap();
    let b = ScramServer::start(m, b"n,,n=mallory,r=x1", &lookup, SECRET).unwrap();
    let salt_of = |f: &[u8]| {
        String::from_utf8(f.to_vec())
            .unwrap()
            .split(',')
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(salt_of(&a.1), salt_of(&b.1));
    let (fin, _) = client_final(
        m,
        "anything",
        "n=mallory,r=x1",
        &String::from_utf8(a.1).unwrap(),
    );
    assert_eq!(
        a.0.finish(fin.as_bytes()).unwrap_err().to_string(),
        err.to_string()
    );
}

#[test]
fn malformed_messages_are_refused() {
    let m = ScramMechanism::Sha256;
    let lookup = |_: &str, _: ScramMechanism| None;
    for bad in [
        &b""[..],
        b"n,,",
        b"n,,r=abc",
        b"n,,n=,r=abc",
        b"p=tls-unique,,n=a,r=b",
        b"n,,m=ext,n=a,r=b",
        b"n,,n=a=2X,r=b",
        b"n,a=bob,n=alice,r=b",
        b"\xff\xfe",
    ] {
        assert!(
            ScramServer::start(m, bad, &lookup, SECRET).is_err(),
            "{bad:?}"
        );
    }
    let (server, _) = ScramServer::start(m, b"n,,n=a,r=b", &lookup, SECRET).unwrap();
    assert!(matches!(
        server.finish(b"c=biws,r=b").unwrap_err(),
        AuthError::Malformed(_)
    ));
}

#[test]
fn names_are_unescaped() {
    assert_eq!(unescape("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
    assert_eq!(unescape("plain").as_deref(), Some("plain"));
    assert_eq!(unescape("bad=").as_deref(), None);
}

#[test]
fn credentials_verify_passwords_and_serialize() {
    let m = ScramMechanism::Sha256;
    let c = ScramCredential::from_password(m, "pw", b"s".to_vec(), 4096);
    assert!(c.verifies(m, b"pw"));
    assert!(!c.verifies(m, b"pW"));
    let json = serde_json::to_string(&c).unwrap();
    assert!(!json.contains("pw"));
    assert_eq!(serde_json::from_str::<ScramCredential>(&json).unwrap(), c);
}
