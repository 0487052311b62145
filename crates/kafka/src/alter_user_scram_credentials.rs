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

/// Answers the request. Needs Alter on the cluster: otherwise every user
/// gets CLUSTER_AUTHORIZATION_FAILED.
pub(crate) fn handle(
    broker: &Broker,
    access: &crate::authz::Access,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if let Err(e) = access.require_cluster(broker::security::acl::Operation::Alter) {
        let mut users: Vec<String> = Vec::new();
        for n in req
            .deletions
            .iter()
            .map(|d| d.name.to_string())
            .chain(req.upsertions.iter().map(|u| u.name.to_string()))
        {
            if !users.contains(&n) {
                users.push(n);
            }
        }
        let results = users
            .into_iter()
            .map(|u| {
                AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(u))
                    .with_error_code(response_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string())))
            })
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
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
