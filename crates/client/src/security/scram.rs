//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the client side,
//! without I/O: the client's first message out; the server's first message
//! in and the client's final message out; the server's final message in,
//! checked against the signature the server must be able to compute.
//!
//! As Kafka's own client, no SASLprep is applied: user names and passwords
//! are used as the UTF-8 bytes given. No channel binding (`n,,`).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Fewest PBKDF2 iterations accepted from a server (Kafka's minimum).
pub(crate) const MIN_ITERATIONS: u32 = 4096;
/// Most PBKDF2 iterations accepted from a server: more would let a rogue
/// server make the client spin (Kafka's own maximum is 16384).
pub(crate) const MAX_ITERATIONS: u32 = 100_000;

/// The SCRAM hash functions Kafka supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramHash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramHash::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// Output length in bytes.
    fn len(self) -> usize {
        match self {
            ScramHash::Sha256 => 32,
            ScramHash::Sha512 => 64,
        }
    }

    /// `Hi(password, salt, iterations)`: PBKDF2 with this hash's HMAC.
    /// Deliberately slow.
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        match self {
            ScramHash::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            ScramHash::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

/// One client-side SCRAM exchange.
pub(crate) struct ScramClient {
    hash: ScramHash,
    password: String,
    client_nonce: String,
    client_first_bare: String,
    /// The server signature the server's final message must carry; set
    /// once the server's first message has been answered.
    expected_server_signature: Option<Vec<u8>>,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("hash", &self.hash)
            .field("client_first_bare", &self.client_first_bare)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// Starts an exchange with a random nonce; the client's first message.
    pub(crate) fn start(hash: ScramHash, user: &str, password: &str) -> (ScramClient, Vec<u8>) {
        let mut raw = [0u8; 24];
        rand::Rng::fill(&mut rand::rng(), &mut raw[..]);
        Self::start_with_nonce(hash, user, password, &B64.encode(raw))
    }

    /// [`ScramClient::start`] with a given nonce (printable ASCII without
    /// `,`), for test vectors.
    pub(crate) fn start_with_nonce(
        hash: ScramHash,
        user: &str,
        password: &str,
        nonce: &str,
    ) -> (ScramClient, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", escape(user));
        let first = format!("n,,{client_first_bare}").into_bytes();
        (
            ScramClient {
                hash,
                password: password.to_string(),
                client_nonce: nonce.to_string(),
                client_first_bare,
                expected_server_signature: None,
            },
            first,
        )
    }

    /// Reads the server's first message (`r=…,s=…,i=…`) and answers the
    /// client's final message with the proof. Slow (PBKDF2).
    pub(crate) fn server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(message)
            .map_err(|_| "the server's first SCRAM message is not UTF-8".to_string())?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for (i, attr) in text.split(',').enumerate() {
            let (k, v) = attr
                .split_once('=')
                .ok_or_else(|| format!("malformed server-first-message {text:?}"))?;
            match (i, k) {
                (0, "m") => return Err("the server asks for a SCRAM extension".into()),
                (0, "r") => nonce = Some(v),
                (1, "s") => salt = Some(v),
                (2, "i") => iterations = Some(v),
                (0..=2, _) => return Err(format!("malformed server-first-message {text:?}")),
                // Extensions may follow.
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(format!("malformed server-first-message {text:?}"));
        };
        if nonce.len() <= self.client_nonce.len() || !nonce.starts_with(&self.client_nonce) {
            return Err(
                "the server's nonce does not extend the client's (not this exchange)".into(),
            );
        }
        let salt = B64
            .decode(salt)
            .map_err(|_| "the server's salt is not base64".to_string())?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| format!("bad iteration count {iterations:?}"))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "the server asks for {iterations} iterations, outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
            ));
        }
        let h = self.hash;
        let salted = h.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        // c= is base64("n,,"), the GS2 header without channel binding.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(h.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server's final message: its signature proves that the
    /// server knows the credential (not only someone who saw the exchange).
    pub(crate) fn server_final(&self, message: &[u8]) -> Result<(), String> {
        let expected = self
            .expected_server_signature
            .as_ref()
            .ok_or_else(|| "the server's final SCRAM message came too early".to_string())?;
        let text = std::str::from_utf8(message)
            .map_err(|_| "the server's final SCRAM message is not UTF-8".to_string())?;
        let first = text.split(',').next().unwrap_or_default();
        if let Some(err) = first.strip_prefix("e=") {
            return Err(format!("the server refused: {err}"));
        }
        let signature = first
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v).ok())
            .ok_or_else(|| format!("malformed server-final-message {text:?}"))?;
        if bool::from(signature.ct_eq(expected)) {
            Ok(())
        } else {
            Err("the server's signature is wrong: it does not know this user's credential".into())
        }
    }
}

/// A saslname: `=` and `,` escaped as `=3D` and `=2C`.
fn escape(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3.
    #[test]
    fn rfc_7677_sha256_vector() {
        let (mut c, first) = ScramClient::start_with_nonce(
            ScramHash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = c.server_first(server_first).unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        // Any other signature is refused, as is a server error.
        let err = c
            .server_final(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(err.contains("signature is wrong"), "{err}");
        let err = c.server_final(b"e=invalid-proof").unwrap_err();
        assert!(err.contains("invalid-proof"), "{err}");
    }

    /// A SCRAM-SHA-512 server computed independently from the RFC's
    /// formulas (StoredKey and ServerKey, as a broker stores them) accepts
    /// the client's proof, and the client accepts its signature.
    #[test]
    fn sha512_round_trip_with_an_independent_server() {
        let h = ScramHash::Sha512;
        let (salt, iterations) = (b"0123456789abcdef".to_vec(), 4096);
        let salted = h.salted_password(b"alice-secret", &salt, iterations);
        let stored_key = h.hash(&h.hmac(&salted, b"Client Key"));
        let server_key = h.hmac(&salted, b"Server Key");

        let (mut c, first) = ScramClient::start(h, "al,i=ce", "alice-secret");
        let first = String::from_utf8(first).unwrap();
        let bare = first.strip_prefix("n,,").unwrap();
        assert!(bare.starts_with("n=al=2Ci=3Dce,r="), "{bare}");
        let client_nonce = bare.split_once(",r=").unwrap().1;
        let server_first = format!(
            "r={client_nonce}SERVER,s={},i={iterations}",
            B64.encode(&salt)
        );
        let last = String::from_utf8(c.server_first(server_first.as_bytes()).unwrap()).unwrap();
        let (without_proof, proof) = last.rsplit_once(",p=").unwrap();
        assert_eq!(without_proof, format!("c=biws,r={client_nonce}SERVER"));
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let signature = h.hmac(&stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = B64
            .decode(proof)
            .unwrap()
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        assert_eq!(h.hash(&client_key), stored_key, "the proof verifies");
        let server_signature = h.hmac(&server_key, auth_message.as_bytes());
        c.server_final(format!("v={}", B64.encode(server_signature)).as_bytes())
            .unwrap();
    }

    #[test]
    fn a_foreign_nonce_or_bad_iterations_are_refused() {
        let (mut c, _) = ScramClient::start_with_nonce(ScramHash::Sha256, "u", "p", "abc");
        for (msg, want) in [
            ("r=xyzdef,s=c2FsdA==,i=4096", "nonce"),
            ("r=abc,s=c2FsdA==,i=4096", "nonce"),
            ("r=abcdef,s=c2FsdA==,i=10", "iterations"),
            ("r=abcdef,s=c2FsdA==,i=1000000000", "iterations"),
            ("r=abcdef,s=!!,i=4096", "base64"),
            ("m=ext,r=abcdef,s=c2FsdA==,i=4096", "extension"),
            ("r=abcdef,i=4096", "malformed"),
        ] {
            let err = c.server_first(msg.as_bytes()).unwrap_err();
            assert!(err.contains(want), "{msg}: {err}");
        }
        let err = c.server_final(b"v=AAAA").unwrap_err();
        assert!(err.contains("too early"), "{err}");
    }
}
