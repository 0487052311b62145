//! CreateAcls (key 30): adds ACLs. Needs Alter on the cluster; each
//! creation gets its own result, INVALID_REQUEST for one Kafka would refuse.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::acl_wire::binding;
use crate::authz::Access;
use crate::error::response_error;
use crate::Versions;
use broker::security::acl::Operation;
use broker::Broker;

/// Versions implemented (v0 left Kafka in 4.0).
pub const VERSIONS: Versions = Versions::new(1, 3);

fn failed(error: ResponseError, message: String) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// Answers the request.
pub(crate) fn handle(
    broker: &Broker,
    access: &Access,
    req: CreateAclsRequest,
) -> CreateAclsResponse {
    let results = if broker.authorizer().is_some() && !access.cluster(Operation::Alter) {
        req.creations
            .iter()
            .map(|_| {
                failed(
                    ResponseError::ClusterAuthorizationFailed,
                    "Cluster authorization failed: CreateAcls needs Alter on the cluster".into(),
                )
            })
            .collect()
    } else {
        let parsed: Vec<Result<_, String>> = req
            .creations
            .iter()
            .map(|c| {
                binding(
                    c.resource_type,
                    &c.resource_name,
                    c.resource_pattern_type,
                    &c.principal,
                    &c.host,
                    c.operation,
                    c.permission_type,
                )
            })
            .collect();
        let valid: Vec<_> = parsed
            .iter()
            .filter_map(|p| p.as_ref().ok())
            .cloned()
            .collect();
        let mut created = broker.create_acls(&valid).into_iter();
        parsed
            .into_iter()
            .map(|p| match p {
                Err(why) => failed(ResponseError::InvalidRequest, why),
                Ok(_) => match created.next() {
                    Some(Ok(())) => AclCreationResult::default(),
                    Some(Err(e)) => failed(response_error(&e), e.to_string()),
                    None => failed(ResponseError::UnknownServerError, "no result".into()),
                },
            })
            .collect()
    };
    CreateAclsResponse::default().with_results(results)
}
