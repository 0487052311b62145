//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side,
//! without I/O: the client's first message in, the server's first message
//! out; the client's final message in, the principal and the server's final
//! message out. Credentials hold only the salt, the iteration count and the
//! two derived keys, never the password or the salted password.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use subtle::ConstantTimeEq;

pub use magnetar_metadata::credentials::{
    ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS,
};

use super::{AuthError, Principal};

/// A SCRAM exchange after the server's first message.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    user: String,
    credential: ScramCredential,
    /// Whether the credential was made up (the user does not exist).
    unknown: bool,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl ScramServer {
    /// Reads the client's first message and answers the server's first.
    pub fn start(
        mechanism: ScramMechanism,
        client_first: &[u8],
        lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
        secret: &[u8],
    ) -> Result<(ScramServer, Vec<u8>), AuthError> {
        let mut server_nonce = [0u8; 24];
        rand::Rng::fill(&mut rand::rng(), &mut server_nonce[..]);
        Self::start_with(
            mechanism,
            client_first,
            lookup,
            secret,
            &B64.encode(server_nonce),
        )
    }

    fn start_with(
        mechanism: ScramMechanism,
        client_first: &[u8],
        lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
        secret: &[u8],
        server_nonce: &str,
    ) -> Result<(ScramServer, Vec<u8>), AuthError> {
        let text = std::str::from_utf8(client_first)
            .map_err(|_| AuthError::Malformed("the client's first message is not UTF-8".into()))?;
        let malformed = |why: &str| AuthError::Malformed(format!("client-first-message: {why}"));
        // gs2-header: cbind-flag "," [authzid] ","
        let (flag, rest) = text
            .split_once(',')
            .ok_or_else(|| malformed("no GS2 header"))?;
        match flag {
            "n" | "y" => {}
            f if f.starts_with("p=") => {
                return Err(AuthError::Malformed(
                    "channel binding is not supported".into(),
                ))
            }
            _ => return Err(malformed("bad channel binding flag")),
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or_else(|| malformed("no GS2 header"))?;
        let gs2_header = format!("{flag},{authzid},");
        let mut user = None;
        let mut client_nonce = None;
        for (i, attr) in bare.split(',').enumerate() {
            let (k, v) = attr
                .split_once('=')
                .ok_or_else(|| malformed("bad attribute"))?;
            match (i, k) {
                (0, "m") => return Err(malformed("mandatory extensions are not supported")),
                (0, "n") => user = Some(unescape(v).ok_or_else(|| malformed("bad user name"))?),
                (1, "r") => client_nonce = Some(v.to_string()),
                (0 | 1, _) => return Err(malformed("expected n= then r=")),
                // Extensions (Kafka's tokenauth=...) follow; none is honoured.
                _ => {}
            }
        }
        let user = user.ok_or_else(|| malformed("no user name"))?;
        let client_nonce = client_nonce.ok_or_else(|| malformed("no nonce"))?;
        if user.is_empty() || client_nonce.is_empty() {
            return Err(malformed("empty user name or nonce"));
        }
        if !client_nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
        {
            return Err(malformed(
                "the nonce has characters outside printable ASCII",
            ));
        }
        if let Some(z) = authzid.strip_prefix("a=") {
            if unescape(z).as_deref() != Some(user.as_str()) {
                return Err(AuthError::invalid(format!(
                    "user {user:?} asked to act as {z:?}"
                )));
            }
        } else if !authzid.is_empty() {
            return Err(malformed("bad authorization id"));
        }
        let (credential, unknown) = match lookup(&user, mechanism) {
            Some(c) => (c, false),
            None => (ScramCredential::made_up(mechanism, &user, secret), true),
        };
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let out = server_first.clone().into_bytes();
        Ok((
            ScramServer {
                mechanism,
                user,
                credential,
                unknown,
                gs2_header,
                client_first_bare: bare.to_string(),
                server_first,
                nonce,
            },
            out,
        ))
    }

    /// Checks the client's proof; on success, the principal and the
    /// server's final message (its signature, which the client checks).
    pub fn finish(self, client_final: &[u8]) -> Result<(Principal, Vec<u8>), AuthError> {
        let text = std::str::from_utf8(client_final)
            .map_err(|_| AuthError::Malformed("the client's final message is not UTF-8".into()))?;
        let malformed = |why: &str| AuthError::Malformed(format!("client-final-message: {why}"));
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| malformed("no proof"))?;
        let mut attrs = without_proof.split(',');
        let binding = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or_else(|| malformed("no channel binding"))?;
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or_else(|| malformed("no nonce"))?;
        if B64.decode(binding).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(malformed(
                "the channel binding does not match the GS2 header",
            ));
        }
        if nonce != self.nonce {
            // A replayed or forged final message: its nonce is another
            // exchange's.
            return Err(AuthError::invalid(format!(
                "user {:?}: the nonce is not this exchange's",
                self.user
            )));
        }
        let proof = B64.decode(proof).map_err(|_| malformed("bad proof"))?;
        if proof.len() != self.mechanism.hash_len() {
            return Err(malformed("the proof has the wrong length"));
        }
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let m = self.mechanism;
        let signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let matches = bool::from(m.hash(&client_key).ct_eq(&self.credential.stored_key));
        if !matches || self.unknown {
            let why = if self.unknown {
                "no such user"
            } else {
                "wrong password"
            };
            return Err(AuthError::invalid(format!(
                "user {:?} ({}): {why}",
                self.user,
                m.name()
            )));
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok((
            Principal::user(self.user),
            format!("v={}", B64.encode(server_signature)).into_bytes(),
        ))
    }
}

/// A saslname with `=2C` and `=3D` decoded; `None` if another `=` escape
/// or a bare `,` is in it.
fn unescape(v: &str) -> Option<String> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests;
