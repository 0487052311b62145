use super::*;
use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::json;

const NOW_MS: i64 = 1_800_000_000_000;

fn settings() -> TokenSettings {
    TokenSettings {
        public_alg: "RS256".into(),
        subject_claim: "sub".into(),
        clock_skew_s: 30,
        ..Default::default()
    }
}

fn hs256(secret: &[u8], claims: serde_json::Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

fn secret_validator(dir: &Path, secret: &[u8]) -> TokenValidator {
    let path = dir.join("secret.key");
    std::fs::write(&path, secret).unwrap();
    let s = TokenSettings {
        secret_key: Some(format!("file://{}", path.display())),
        ..settings()
    };
    TokenValidator::load(&s).unwrap().unwrap()
}

#[test]
fn no_keys_no_validator() {
    assert!(TokenValidator::load(&settings()).unwrap().is_none());
}

#[test]
fn an_hmac_token_names_its_subject_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let v = secret_validator(dir.path(), b"0123456789abcdef0123456789abcdef");
    let exp = NOW_MS / 1000 + 60;
    let t = hs256(
        b"0123456789abcdef0123456789abcdef",
        json!({"sub": "alice", "exp": exp}),
    );
    let ok = v.validate(&t, NOW_MS).unwrap();
    assert_eq!(ok.principal, Principal::user("alice"));
    // Accepted until exp plus the 30 s clock skew.
    assert_eq!(ok.expires_ms, Some(exp * 1000 + 30_000));
    // No exp: valid without an end (Pulsar's tokens may have none).
    let t = hs256(b"0123456789abcdef0123456789abcdef", json!({"sub": "bob"}));
    assert_eq!(v.validate(&t, NOW_MS).unwrap().expires_ms, None);
}

#[test]
fn bad_tokens_are_refused_with_a_reason_for_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"0123456789abcdef0123456789abcdef";
    let v = secret_validator(dir.path(), secret);
    let why = |t: &str| v.validate(t, NOW_MS).unwrap_err().log_detail();
    let now_s = NOW_MS / 1000;
    assert!(why(&hs256(
        b"another secret entirely!!!!!!!!!",
        json!({"sub": "a"})
    ))
    .contains("rejected"));
    assert!(why(&hs256(secret, json!({"sub": "a", "exp": now_s - 31}))).contains("expired"));
    // Within the clock skew it is still valid.
    assert!(v
        .validate(
            &hs256(secret, json!({"sub": "a", "exp": now_s - 29})),
            NOW_MS
        )
        .is_ok());
    assert!(why(&hs256(secret, json!({"sub": "a", "nbf": now_s + 31}))).contains("nbf"));
    assert!(why(&hs256(secret, json!({"exp": now_s + 60}))).contains("\"sub\""));
    assert!(why(&hs256(secret, json!({"sub": "a", "exp": "soon"}))).contains("number"));
    assert!(why("not.a.jwt").contains("not a JWT"));
    // alg none (an unsigned token) never passes.
    let unsigned = format!(
        "{}.{}.",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"root"}"#)
    );
    assert!(v.validate(&unsigned, NOW_MS).is_err());
    // What the client is told says nothing more.
    let e = v.validate("not.a.jwt", NOW_MS).unwrap_err();
    assert_eq!(e.to_string(), "authentication failed: invalid credentials");
}

#[test]
fn audience_issuer_and_subject_claim_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"0123456789abcdef0123456789abcdef";
    let path = dir.path().join("k");
    std::fs::write(&path, secret).unwrap();
    let s = TokenSettings {
        secret_key: Some(path.display().to_string()),
        audience: vec!["magnetar".into()],
        issuer: Some("https://idp.example".into()),
        subject_claim: "client_id".into(),
        ..settings()
    };
    let v = TokenValidator::load(&s).unwrap().unwrap();
    let good = json!({"client_id": "svc", "aud": "magnetar", "iss": "https://idp.example"});
    assert_eq!(
        v.validate(&hs256(secret, good), NOW_MS).unwrap().principal,
        Principal::user("svc")
    );
    for bad in [
        json!({"client_id": "svc", "aud": "other", "iss": "https://idp.example"}),
        json!({"client_id": "svc", "aud": "magnetar", "iss": "https://evil.example"}),
        json!({"client_id": "svc", "iss": "https://idp.example"}),
        json!({"sub": "svc", "aud": "magnetar", "iss": "https://idp.example"}),
    ] {
        assert!(
            v.validate(&hs256(secret, bad.clone()), NOW_MS).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn public_keys_in_der_pem_and_jwks() {
    let dir = tempfile::tempdir().unwrap();
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let signing = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap();
    let token = |kid: Option<&str>, claims: serde_json::Value| {
        let mut h = Header::new(Algorithm::ES256);
        h.kid = kid.map(str::to_string);
        encode(&h, &claims, &signing).unwrap()
    };
    // DER, as Pulsar's create-key-pair writes it.
    let der = dir.path().join("public.der");
    std::fs::write(&der, pair.public_key_der()).unwrap();
    let v = TokenValidator::load(&TokenSettings {
        public_key: Some(der.display().to_string()),
        public_alg: "ES256".into(),
        ..settings()
    })
    .unwrap()
    .unwrap();
    assert!(v
        .validate(&token(None, json!({"sub": "ec"})), NOW_MS)
        .is_ok());
    // An HS256 token signed with the public key bytes as a secret (the
    // classic algorithm confusion) is refused: no HMAC key is configured.
    let confused = hs256(&pair.public_key_der(), json!({"sub": "root"}));
    assert!(v.validate(&confused, NOW_MS).is_err());
    // PEM in a data: source.
    let pem = pair.public_key_pem();
    let data = format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(pem.as_bytes())
    );
    let v = TokenValidator::load(&TokenSettings {
        public_key: Some(data),
        public_alg: "ES256".into(),
        ..settings()
    })
    .unwrap()
    .unwrap();
    assert!(v
        .validate(&token(None, json!({"sub": "ec"})), NOW_MS)
        .is_ok());
    // A JWKS with two keys: the kid picks one.
    let jwk = |kid: &str, pair: &rcgen::KeyPair| {
        let k = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap();
        let mut j = jsonwebtoken::jwk::Jwk::from_encoding_key(&k, Algorithm::ES256).unwrap();
        j.common.key_id = Some(kid.into());
        j
    };
    let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let set = JwkSet {
        keys: vec![jwk("a", &other), jwk("b", &pair)],
    };
    let path = dir.path().join("keys.jwks");
    std::fs::write(&path, serde_json::to_vec(&set).unwrap()).unwrap();
    let v = TokenValidator::load(&TokenSettings {
        jwks: Some(path.clone()),
        ..settings()
    })
    .unwrap()
    .unwrap();
    assert!(v
        .validate(&token(Some("b"), json!({"sub": "j"})), NOW_MS)
        .is_ok());
    assert!(v
        .validate(&token(None, json!({"sub": "j"})), NOW_MS)
        .is_ok());
    assert!(v
        .validate(&token(Some("a"), json!({"sub": "j"})), NOW_MS)
        .is_err());
    // A key published without `alg` still verifies tokens of its type.
    let mut bare = jwk("c", &pair);
    bare.common.key_algorithm = None;
    std::fs::write(
        &path,
        serde_json::to_vec(&JwkSet { keys: vec![bare] }).unwrap(),
    )
    .unwrap();
    let v = TokenValidator::load(&TokenSettings {
        jwks: Some(path.clone()),
        ..settings()
    })
    .unwrap()
    .unwrap();
    assert!(v
        .validate(&token(Some("c"), json!({"sub": "j"})), NOW_MS)
        .is_ok());
    // Unusable sources say which key and why.
    let err = TokenValidator::load(&TokenSettings {
        public_key: Some(path.display().to_string()),
        public_alg: "ES256".into(),
        ..settings()
    })
    .unwrap_err();
    assert!(err.contains("token.public.key"), "{err}");
    let err = TokenValidator::load(&TokenSettings {
        jwks: Some(dir.path().join("missing")),
        ..settings()
    })
    .unwrap_err();
    assert!(err.contains("cannot read"), "{err}");
    assert!(file_path("https://idp/keys")
        .unwrap_err()
        .contains("network"));
}
