//! AlterUserScramCredentials (key 51, KIP-554): sets and removes users'
//! SCRAM credentials. Clients send the salted password, never the password;
//! the broker stores only the keys derived from it.

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::error::response_error;
use crate::Versions;
use broker::security::credentials::CredentialChange;
use broker::Broker;

/// Versions implemented.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Answers the request.
pub fn handle(
    broker: &Broker,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut changes: Vec<CredentialChange> = req
        .deletions
        .into_iter()
        .map(|d| CredentialChange::Delete {
            user: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    changes.extend(
        req.upsertions
            .into_iter()
            .map(|u| CredentialChange::Upsert {
                user: u.name.to_string(),
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: u.salt.to_vec(),
                salted_password: u.salted_password.to_vec(),
            }),
    );
    let results = broker
        .alter_scram_credentials(&changes)
        .into_iter()
        .map(|(user, r)| {
            let out =
                AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(user));
            match r {
                Ok(()) => out,
                Err(e) => out
                    .with_error_code(response_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}
