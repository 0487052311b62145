//! Bearer tokens (JWT, RFC 7519) checked offline against configured keys:
//! Kafka's SASL/OAUTHBEARER, Pulsar's token authentication and the HTTP
//! service's `Authorization: Bearer` all use one [`TokenValidator`].
//!
//! Keys come from a JWKS file (`sasl.oauthbearer.jwks.endpoint.url`, a
//! `file:` URL: Magnetar fetches nothing over the network), a shared HMAC
//! secret (`token.secret.key`, Pulsar's `tokenSecretKey`) and a public key
//! (`token.public.key` with `token.public.alg`, Pulsar's `tokenPublicKey`
//! and `tokenPublicAlg`). A token is valid when one key of its algorithm
//! (and, in a JWKS, of its `kid`) verifies its signature, it has not
//! expired and is already valid (`exp`, `nbf`, with the allowed clock
//! skew), and its audience and issuer are the expected ones; its subject
//! claim names the principal (`User:<sub>`). `alg: none` is never valid.

use std::path::Path;

use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};

pub use magnetar_config::{file_path, TokenSettings};

use super::{AuthError, Principal};

/// One verification key.
struct Key {
    /// A JWKS key's id: a token naming another `kid` is not tried with it.
    kid: Option<String>,
    key: DecodingKey,
    family: AlgorithmFamily,
    /// The one algorithm the key is for, when its source says so.
    alg: Option<Algorithm>,
}

/// A token that checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// `User:<subject>`.
    pub principal: Principal,
    /// Until when it is accepted (ms since the epoch): its `exp` plus the
    /// allowed clock skew, if it has an `exp`.
    pub expires_ms: Option<i64>,
}

/// Checks tokens against the configured keys.
pub struct TokenValidator {
    keys: Vec<Key>,
    subject_claim: String,
    audience: Vec<String>,
    issuer: Option<String>,
    clock_skew_s: u64,
}

impl std::fmt::Debug for TokenValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenValidator")
            .field("keys", &self.keys.len())
            .field("subject_claim", &self.subject_claim)
            .finish_non_exhaustive()
    }
}

/// Reads a key source: `file:///path`, `data:;base64,<base64>` (Pulsar's
/// forms) or a plain file path.
pub fn read_key_source(source: &str) -> Result<Vec<u8>, String> {
    if let Some(data) = source.strip_prefix("data:") {
        let (_, b64) = data
            .split_once(";base64,")
            .ok_or_else(|| "a data: key must be data:;base64,<base64>".to_string())?;
        return base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| format!("a data: key is not valid base64: {e}"));
    }
    let path = file_path(source)?;
    std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn parse_alg(name: &str) -> Result<Algorithm, String> {
    name.parse::<Algorithm>()
        .map_err(|_| format!("unknown JWT algorithm {name:?}"))
}

impl TokenValidator {
    /// Reads the keys `settings` names (file work: call it off async
    /// workers); `Ok(None)` when none is configured, a clear error when one
    /// cannot be used.
    pub fn load(settings: &TokenSettings) -> Result<Option<TokenValidator>, String> {
        if !settings.has_keys() {
            return Ok(None);
        }
        let mut keys = Vec::new();
        if let Some(path) = &settings.jwks {
            keys.extend(jwks_keys(path)?);
        }
        if let Some(source) = &settings.secret_key {
            let secret = read_key_source(source).map_err(|e| format!("token.secret.key: {e}"))?;
            if secret.is_empty() {
                return Err("token.secret.key: the secret is empty".into());
            }
            keys.push(Key {
                kid: None,
                key: DecodingKey::from_secret(&secret),
                family: AlgorithmFamily::Hmac,
                alg: None,
            });
        }
        if let Some(source) = &settings.public_key {
            let alg =
                parse_alg(&settings.public_alg).map_err(|e| format!("token.public.alg: {e}"))?;
            let bytes = read_key_source(source).map_err(|e| format!("token.public.key: {e}"))?;
            let key = public_key(&bytes, alg).map_err(|e| format!("token.public.key: {e}"))?;
            keys.push(Key {
                kid: None,
                key,
                family: alg.family(),
                alg: Some(alg),
            });
        }
        Ok(Some(TokenValidator {
            keys,
            subject_claim: settings.subject_claim.clone(),
            audience: settings.audience.clone(),
            issuer: settings.issuer.clone(),
            clock_skew_s: settings.clock_skew_s,
        }))
    }

    /// Checks `token` at `now_ms` (ms since the epoch). The error a client
    /// sees never says more than "invalid token"; [`AuthError::log_detail`]
    /// says why.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, AuthError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthError::invalid(format!("not a JWT: {e}")))?;
        let alg = header.alg;
        let mut validation = Validation::new(alg);
        // Time is checked below against the caller's clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.required_spec_claims.clear();
        if self.audience.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.audience);
            validation.required_spec_claims.insert("aud".into());
        }
        if let Some(iss) = &self.issuer {
            validation.set_issuer(&[iss]);
            validation.required_spec_claims.insert("iss".into());
        }
        let mut last = format!("no configured key is for {alg:?} tokens");
        for key in &self.keys {
            if key.family != alg.family() || key.alg.is_some_and(|a| a != alg) {
                continue;
            }
            if let (Some(want), Some(have)) = (&header.kid, &key.kid) {
                if want != have {
                    continue;
                }
            }
            match jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                token,
                &key.key,
                &validation,
            ) {
                Ok(data) => return self.check_claims(&data.claims, now_ms),
                Err(e) => last = format!("rejected: {e}"),
            }
        }
        Err(AuthError::invalid(last))
    }

    fn check_claims(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
        now_ms: i64,
    ) -> Result<ValidToken, AuthError> {
        let skew_ms = (self.clock_skew_s as i64).saturating_mul(1000);
        let seconds = |name: &str| -> Result<Option<i64>, AuthError> {
            match claims.get(name) {
                None => Ok(None),
                Some(v) => v
                    .as_f64()
                    .map(|s| Some((s * 1000.0) as i64))
                    .ok_or_else(|| AuthError::invalid(format!("the {name} claim is not a number"))),
            }
        };
        // The token is accepted until `exp` plus the skew: that is its end
        // for sessions too, so one accepted is never at once expired.
        let expires_ms = seconds("exp")?.map(|exp| exp.saturating_add(skew_ms));
        if let Some(end) = expires_ms {
            if end <= now_ms {
                return Err(AuthError::invalid("the token has expired"));
            }
        }
        if let Some(nbf) = seconds("nbf")? {
            if nbf.saturating_sub(skew_ms) > now_ms {
                return Err(AuthError::invalid("the token is not valid yet (nbf)"));
            }
        }
        let subject = claims
            .get(&self.subject_claim)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                AuthError::invalid(format!(
                    "the token has no {:?} claim naming its principal",
                    self.subject_claim
                ))
            })?;
        Ok(ValidToken {
            principal: Principal::user(subject),
            expires_ms,
        })
    }
}

fn jwks_keys(path: &Path) -> Result<Vec<Key>, String> {
    let what = "sasl.oauthbearer.jwks.endpoint.url";
    let text =
        std::fs::read(path).map_err(|e| format!("{what}: cannot read {}: {e}", path.display()))?;
    let set: JwkSet = serde_json::from_slice(&text)
        .map_err(|e| format!("{what}: {} is not a JWKS: {e}", path.display()))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        // Keys without `alg` (as some providers publish them) verify every
        // algorithm of their key type; keys of unknown types are skipped.
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        let alg = jwk
            .common
            .key_algorithm
            .and_then(|a| a.to_string().parse::<Algorithm>().ok());
        keys.push(Key {
            kid: jwk.common.key_id.clone(),
            family: key.family(),
            key,
            alg,
        });
    }
    if keys.is_empty() {
        return Err(format!("{what}: {} has no usable key", path.display()));
    }
    Ok(keys)
}

/// A public key from PEM or from DER (X.509 SubjectPublicKeyInfo, the form
/// Pulsar's `tokens create-key-pair` writes).
fn public_key(bytes: &[u8], alg: Algorithm) -> Result<DecodingKey, String> {
    let pem = if bytes.starts_with(b"-----BEGIN") {
        bytes.to_vec()
    } else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        let mut pem = String::from("-----BEGIN PUBLIC KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END PUBLIC KEY-----\n");
        pem.into_bytes()
    };
    let key = match alg.family() {
        AlgorithmFamily::Rsa => DecodingKey::from_rsa_pem(&pem),
        AlgorithmFamily::Ec => DecodingKey::from_ec_pem(&pem),
        AlgorithmFamily::Ed => DecodingKey::from_ed_pem(&pem),
        AlgorithmFamily::Hmac => {
            return Err(format!(
                "{alg:?} is an HMAC algorithm: use token.secret.key"
            ))
        }
    };
    key.map_err(|e| format!("not a {alg:?} public key: {e}"))
}

#[cfg(test)]
mod tests;
