//! SCRAM credentials (RFC 5802, RFC 7677) as the metadata log stores them:
//! a salt, the stored and server keys derived from the password, and the
//! iteration count. The password itself is never stored.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// The SCRAM hash functions Kafka supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256 (Kafka's mechanism type 1).
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    /// SCRAM-SHA-512 (Kafka's mechanism type 2).
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

/// Fewest iterations a credential may have (Kafka's bound).
pub const MIN_ITERATIONS: i32 = 4096;
/// Most iterations a credential may have (Kafka's bound).
pub const MAX_ITERATIONS: i32 = 16384;

impl ScramMechanism {
    /// The IANA name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's `ScramMechanism` type code (1, 2), as the credential APIs
    /// carry it.
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of a type code.
    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Output length of the hash, in bytes.
    pub fn hash_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    /// HMAC of `data` under `key` with this mechanism's hash.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    /// This mechanism's hash of `data`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, iterations)`: PBKDF2 with this hash's HMAC.
    /// Deliberately slow; call it off async workers.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_len()];
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

/// What the broker stores of one user's password for one mechanism
/// (Kafka's `ScramCredential`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    /// The salt, as given when the credential was set.
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    #[serde(with = "b64")]
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    #[serde(with = "b64")]
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations of the salted password.
    pub iterations: i32,
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials
    /// carries: clients never send the password itself).
    pub fn from_salted(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential of a password (tests, tools).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: Vec<u8>,
        iterations: i32,
    ) -> ScramCredential {
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations as u32);
        ScramCredential::from_salted(mechanism, salt, &salted, iterations)
    }

    /// Whether `password` is the one this credential was made of (PLAIN
    /// checks passwords this way; slow, as [`ScramMechanism::salted_password`]).
    pub fn verifies(&self, mechanism: ScramMechanism, password: &[u8]) -> bool {
        let salted = mechanism.salted_password(password, &self.salt, self.iterations.max(1) as u32);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        bool::from(mechanism.hash(&client_key).ct_eq(&self.stored_key))
    }

    /// A credential no password matches, the same for every exchange with
    /// the same `user` and `secret`: unknown users get one, so they look
    /// exactly like known users until the proof fails.
    pub fn made_up(mechanism: ScramMechanism, user: &str, secret: &[u8]) -> ScramCredential {
        let derive = |label: &str| mechanism.hmac(secret, format!("{label}\0{user}").as_bytes());
        ScramCredential {
            salt: derive("salt")[..16].to_vec(),
            stored_key: derive("stored"),
            server_key: derive("server"),
            iterations: MIN_ITERATIONS,
        }
    }
}

mod b64 {
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        B64.decode(s).map_err(serde::de::Error::custom)
    }
}
