//! AlterUserScramCredentials: SCRAM users for brokers that authenticate
//! with SASL SCRAM (or PLAIN checked against SCRAM credentials, as
//! Magnetar does).

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::AlterUserScramCredentialsRequest;
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::error::{Error, Result};
use crate::security::SaslMechanism;

impl Admin {
    /// Creates or replaces `user`'s credential for a SCRAM `mechanism`,
    /// derived from `password` with `iterations` PBKDF2 rounds and a random
    /// salt (the password itself never leaves the client). Kafka accepts
    /// 4096 to 16384 iterations.
    ///
    /// ```no_run
    /// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
    /// admin.upsert_scram_credential("alice", magnetar_client::SaslMechanism::ScramSha512, 8192, "alice-secret").await?;
    /// # Ok(()) }
    /// ```
    pub async fn upsert_scram_credential(
        &self,
        user: &str,
        mechanism: SaslMechanism,
        iterations: i32,
        password: &str,
    ) -> Result<()> {
        let (code, hash) = scram(mechanism)?;
        let mut salt = [0u8; 32];
        rand::Rng::fill(&mut rand::rng(), &mut salt[..]);
        let salted = hash.salted_password(password.as_bytes(), &salt, iterations.max(1) as u32);
        let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_string(user.to_string()))
                .with_mechanism(code)
                .with_iterations(iterations)
                .with_salt(Bytes::copy_from_slice(&salt))
                .with_salted_password(Bytes::from(salted)),
        ]);
        self.alter_scram(user, req).await
    }

    /// Removes `user`'s credential for a SCRAM `mechanism`.
    pub async fn delete_scram_credential(
        &self,
        user: &str,
        mechanism: SaslMechanism,
    ) -> Result<()> {
        let (code, _) = scram(mechanism)?;
        let req = AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(StrBytes::from_string(user.to_string()))
                .with_mechanism(code),
        ]);
        self.alter_scram(user, req).await
    }

    async fn alter_scram(&self, user: &str, req: AlterUserScramCredentialsRequest) -> Result<()> {
        let conn = self.controller_connection().await?;
        let v = conn.versions().pick::<AlterUserScramCredentialsRequest>()?;
        let resp = conn.send(v, &req)?.await?;
        let result = resp
            .results
            .iter()
            .find(|r| r.user.as_str() == user)
            .ok_or_else(|| Error::Protocol(format!("no result for user {user:?}")))?;
        Error::check(result.error_code, result.error_message.as_deref())
    }
}

fn scram(mechanism: SaslMechanism) -> Result<(i8, crate::security::scram::ScramHash)> {
    mechanism
        .scram_code()
        .zip(mechanism.scram_hash())
        .ok_or_else(|| Error::InvalidArgument(format!("{mechanism} is not a SCRAM mechanism")))
}
