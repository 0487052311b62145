//! SCRAM credentials in the broker metadata (KIP-554): set and removed by
//! records, replicated through the controller quorum; looked up by every
//! SASL exchange.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::metadata_records::MetadataRecord;
use crate::{Broker, Error};

/// One change of AlterUserScramCredentials.
#[derive(Debug, Clone)]
pub enum CredentialChange {
    /// Set `user`'s credential for `mechanism` (code as on the wire).
    Upsert {
        /// The user.
        user: String,
        /// Kafka's mechanism code (1 = SHA-256, 2 = SHA-512).
        mechanism: i8,
        /// PBKDF2 iterations the client used.
        iterations: i32,
        /// The salt.
        salt: Vec<u8>,
        /// `Hi(password, salt, iterations)`, computed by the client.
        salted_password: Vec<u8>,
    },
    /// Remove `user`'s credential for `mechanism`.
    Delete {
        /// The user.
        user: String,
        /// Kafka's mechanism code.
        mechanism: i8,
    },
}

impl CredentialChange {
    fn user(&self) -> &str {
        match self {
            CredentialChange::Upsert { user, .. } | CredentialChange::Delete { user, .. } => user,
        }
    }
}

/// A credential's mechanism and iterations, as DescribeUserScramCredentials
/// reports them.
pub type CredentialInfo = (ScramMechanism, i32);

/// A random key of this process for the made-up credentials of unknown
/// users (see [`super::SaslExchange::step`]).
pub fn unknown_user_secret() -> &'static [u8] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(|| {
        let mut s = [0u8; 32];
        rand::Rng::fill(&mut rand::rng(), &mut s[..]);
        s
    })
}

impl Broker {
    /// `user`'s stored credential for `mechanism`.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<ScramCredential> {
        self.store
            .lock()
            .data
            .scram_credentials
            .get(user)?
            .get(&mechanism)
            .cloned()
    }

    /// The mechanisms and iterations of each user's credentials: of every
    /// user with one (`users` = `None`), or of those named, each with its
    /// own error (RESOURCE_NOT_FOUND for a user without credentials,
    /// DUPLICATE_RESOURCE for a user named twice).
    pub fn describe_scram_credentials(
        &self,
        users: Option<&[String]>,
    ) -> Vec<(String, Result<Vec<CredentialInfo>, Error>)> {
        let store = self.store.lock();
        let all = &store.data.scram_credentials;
        let info = |user: &str| {
            all.get(user).map(|m| {
                m.iter()
                    .map(|(mech, c)| (*mech, c.iterations))
                    .collect::<Vec<_>>()
            })
        };
        match users {
            None => all
                .keys()
                .map(|u| (u.clone(), Ok(info(u).unwrap_or_default())))
                .collect(),
            Some(users) => {
                let mut seen = BTreeSet::new();
                let duplicated: BTreeSet<&String> =
                    users.iter().filter(|u| !seen.insert(*u)).collect();
                let mut reported = BTreeSet::new();
                users
                    .iter()
                    .filter(|u| reported.insert(*u))
                    .map(|u| {
                        let r = if duplicated.contains(u) {
                            Err(Error::DuplicateResource(format!(
                                "user {u} is named more than once"
                            )))
                        } else {
                            info(u).ok_or_else(|| {
                                Error::ResourceNotFound(format!(
                                    "attempt to describe a user credential that does not exist: {u}"
                                ))
                            })
                        };
                        (u.clone(), r)
                    })
                    .collect()
            }
        }
    }

    /// Applies `changes` (AlterUserScramCredentials): one result per user,
    /// in the order users first appear. A user named more than once in
    /// the request gets DUPLICATE_RESOURCE for all of its changes, as in
    /// Kafka; the changes of each other user are committed together.
    pub fn alter_scram_credentials(
        &self,
        changes: &[CredentialChange],
    ) -> Vec<(String, Result<(), Error>)> {
        let mut order: Vec<&str> = Vec::new();
        let mut count = std::collections::BTreeMap::<(&str, i8), usize>::new();
        for c in changes {
            let (user, mech) = match c {
                CredentialChange::Upsert {
                    user, mechanism, ..
                }
                | CredentialChange::Delete { user, mechanism } => (user.as_str(), *mechanism),
            };
            if !order.contains(&user) {
                order.push(user);
            }
            *count.entry((user, mech)).or_default() += 1;
        }
        order
            .into_iter()
            .map(|user| {
                let mine: Vec<&CredentialChange> =
                    changes.iter().filter(|c| c.user() == user).collect();
                let duplicate = count.iter().any(|((u, _), n)| *u == user && *n > 1);
                let r = if duplicate {
                    Err(Error::DuplicateResource(format!(
                        "a user credential cannot be altered twice in the same request: {user}"
                    )))
                } else {
                    self.alter_user_credentials(user, &mine)
                };
                (user.to_string(), r)
            })
            .collect()
    }

    fn alter_user_credentials(
        &self,
        user: &str,
        changes: &[&CredentialChange],
    ) -> Result<(), Error> {
        if user.is_empty() {
            return Err(Error::UnacceptableCredential(
                "username must not be empty".into(),
            ));
        }
        let mut records = Vec::new();
        for c in changes {
            match c {
                CredentialChange::Upsert {
                    mechanism,
                    iterations,
                    salt,
                    salted_password,
                    ..
                } => {
                    let m = known(*mechanism)?;
                    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(iterations) {
                        return Err(Error::UnacceptableCredential(format!(
                            "iterations {iterations} is outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
                        )));
                    }
                    if salt.is_empty() {
                        return Err(Error::UnacceptableCredential(
                            "salt must not be empty".into(),
                        ));
                    }
                    if salted_password.is_empty() {
                        return Err(Error::UnacceptableCredential(
                            "salted password must not be empty".into(),
                        ));
                    }
                    records.push(MetadataRecord::ScramCredentialSet {
                        user: user.to_string(),
                        mechanism: m,
                        credential: ScramCredential::from_salted(
                            m,
                            salt.clone(),
                            salted_password,
                            *iterations,
                        ),
                    });
                }
                CredentialChange::Delete { mechanism, .. } => {
                    let m = known(*mechanism)?;
                    if self.scram_credential(user, m).is_none() {
                        return Err(Error::ResourceNotFound(format!(
                            "attempt to delete a user credential that does not exist: {user} ({})",
                            m.name()
                        )));
                    }
                    records.push(MetadataRecord::ScramCredentialDeleted {
                        user: user.to_string(),
                        mechanism: m,
                    });
                }
            }
        }
        self.commit_metadata(records)
    }
}

fn known(code: i8) -> Result<ScramMechanism, Error> {
    ScramMechanism::from_code(code).ok_or_else(|| {
        Error::UnsupportedSaslMechanism(format!("unknown SCRAM mechanism type {code}"))
    })
}
