//! DescribeUserScramCredentials (key 50, KIP-554): each user's SCRAM
//! mechanisms and iteration counts (never the credentials themselves).

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::error::response_error;
use crate::Versions;
use broker::Broker;

/// Versions implemented.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Answers the request.
///
/// Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Broker,
    access: &crate::authz::Access,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if let Err(e) = access.require_cluster(broker::security::acl::Operation::Describe) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(response_error(&e).code())
            .with_error_message(Some(StrBytes::from_string(e.to_string())));
    }
    let names: Option<Vec<String>> = req
        .users
        .map(|u| u.into_iter().map(|n| n.name.to_string()).collect());
    let results = broker
        .describe_scram_credentials(names.as_deref())
        .into_iter()
        .map(|(user, r)| {
            let out = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user));
            match r {
                Ok(infos) => out.with_credential_infos(
                    infos
                        .into_iter()
                        .map(|(m, iterations)| {
                            CredentialInfo::default()
                                .with_mechanism(m.code())
                                .with_iterations(iterations)
                        })
                        .collect(),
                ),
                Err(e) => out
                    .with_error_code(response_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
