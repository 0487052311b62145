//! SASL OAUTHBEARER (RFC 7628), the server side: the client's one message
//! is `n,[a=authzid],` then `auth=Bearer <token>` and any extensions, each
//! ended by `\x01`, and a final `\x01`. The token is checked by the
//! [`TokenValidator`]; an authzid, if given, must be the token's subject
//! (as Kafka's `OAuthBearerSaslServer` requires), and the token must
//! expire (`exp`), as Kafka requires.

use super::token::{TokenValidator, ValidToken};
use super::AuthError;

/// Longest OAUTHBEARER message accepted (a token with room).
pub const MAX_MESSAGE: usize = 64 * 1024;

/// Checks an OAUTHBEARER client message at `now_ms`.
pub fn authenticate(
    message: &[u8],
    tokens: Option<&TokenValidator>,
    now_ms: i64,
) -> Result<ValidToken, AuthError> {
    if message.len() > MAX_MESSAGE {
        return Err(AuthError::Malformed("OAUTHBEARER message too long".into()));
    }
    let text = std::str::from_utf8(message)
        .map_err(|_| AuthError::Malformed("OAUTHBEARER message is not UTF-8".into()))?;
    let malformed = || {
        AuthError::Malformed(
            "OAUTHBEARER message is not n,[a=authzid],\\x01auth=Bearer <token>\\x01\\x01".into(),
        )
    };
    let (gs2, rest) = text.split_once('\u{1}').ok_or_else(malformed)?;
    let mut gs2 = gs2.splitn(3, ',');
    let (Some(flag), Some(authzid), Some("")) = (gs2.next(), gs2.next(), gs2.next()) else {
        return Err(malformed());
    };
    if flag != "n" && flag != "y" {
        return Err(malformed());
    }
    let authzid = match authzid {
        "" => None,
        a => Some(a.strip_prefix("a=").ok_or_else(malformed)?),
    };
    let body = rest.strip_suffix("\u{1}\u{1}").ok_or_else(malformed)?;
    let mut token = None;
    for kv in body.split('\u{1}') {
        let (k, v) = kv.split_once('=').ok_or_else(malformed)?;
        if k == "auth" {
            let t = v
                .strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
                .ok_or_else(malformed)?;
            token = Some(t.trim());
        }
    }
    let token = token.ok_or_else(malformed)?;
    let Some(tokens) = tokens else {
        return Err(AuthError::invalid(
            "OAUTHBEARER: no token key is configured (sasl.oauthbearer.jwks.endpoint.url, token.secret.key, token.public.key)",
        ));
    };
    let valid = tokens.validate(token, now_ms)?;
    // Kafka's OAUTHBEARER tokens always expire; one that never does would
    // make a session without end.
    if valid.expires_ms.is_none() {
        return Err(AuthError::invalid(
            "OAUTHBEARER: the token has no exp claim",
        ));
    }
    if let Some(a) = authzid {
        if a != valid.principal.name {
            return Err(AuthError::invalid(format!(
                "OAUTHBEARER: authzid {a:?} is not the token's subject {:?}",
                valid.principal.name
            )));
        }
    }
    Ok(valid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::TokenSettings;
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};

    const SECRET: &[u8] = b"an OAUTHBEARER test secret, 32b.";

    fn validator(dir: &std::path::Path) -> TokenValidator {
        let path = dir.join("secret");
        std::fs::write(&path, SECRET).unwrap();
        TokenValidator::load(&TokenSettings {
            secret_key: Some(path.display().to_string()),
            subject_claim: "sub".into(),
            public_alg: "RS256".into(),
            ..Default::default()
        })
        .unwrap()
        .unwrap()
    }

    fn token(sub: &str) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            &serde_json::json!({"sub": sub, "exp": 2_000_000_000}),
            &EncodingKey::from_secret(SECRET),
        )
        .unwrap()
    }

    #[test]
    fn messages_as_clients_send_them() {
        let dir = tempfile::tempdir().unwrap();
        let v = validator(dir.path());
        let t = token("alice");
        let now = 1_900_000_000_000;
        for m in [
            format!("n,,\u{1}auth=Bearer {t}\u{1}\u{1}"),
            format!("n,a=alice,\u{1}auth=Bearer {t}\u{1}\u{1}"),
            format!("n,,\u{1}traceId=42\u{1}auth=Bearer {t}\u{1}\u{1}"),
        ] {
            let ok = authenticate(m.as_bytes(), Some(&v), now).unwrap();
            assert_eq!(ok.principal.name, "alice");
            assert_eq!(ok.expires_ms, Some(2_000_000_000_000));
        }
        let refused = |m: String| authenticate(m.as_bytes(), Some(&v), now).unwrap_err();
        assert!(matches!(
            refused(format!("n,a=bob,\u{1}auth=Bearer {t}\u{1}\u{1}")),
            AuthError::InvalidCredentials { .. }
        ));
        for bad in [
            format!("auth=Bearer {t}"),
            format!("n,,\u{1}auth=Bearer {t}\u{1}"),
            format!("n,,\u{1}auth=Basic {t}\u{1}\u{1}"),
            "n,,\u{1}\u{1}".to_string(),
            format!("p=x,,\u{1}auth=Bearer {t}\u{1}\u{1}"),
        ] {
            assert!(matches!(refused(bad), AuthError::Malformed(_)));
        }
        // Expired at `now`.
        assert!(authenticate(
            format!("n,,\u{1}auth=Bearer {t}\u{1}\u{1}").as_bytes(),
            Some(&v),
            2_100_000_000_000
        )
        .is_err());
        // A token without exp is refused here (Pulsar accepts it).
        let forever = encode(
            &Header::new(Algorithm::HS256),
            &serde_json::json!({"sub": "alice"}),
            &EncodingKey::from_secret(SECRET),
        )
        .unwrap();
        let e = refused(format!("n,,\u{1}auth=Bearer {forever}\u{1}\u{1}"));
        assert!(e.log_detail().contains("no exp"));
        // No keys: refused, with why in the log.
        let e = authenticate(
            format!("n,,\u{1}auth=Bearer {t}\u{1}\u{1}").as_bytes(),
            None,
            now,
        )
        .unwrap_err();
        assert!(e.log_detail().contains("no token key"));
    }
}
