//! DeleteAcls (key 31): removes the ACLs each filter selects and reports
//! them per filter. Needs Alter on the cluster.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::acl_wire::{filter, text};
use crate::authz::Access;
use crate::error::response_error;
use crate::Versions;
use broker::security::acl::Operation;
use broker::Broker;

/// Versions implemented (v0 left Kafka in 4.0).
pub const VERSIONS: Versions = Versions::new(1, 3);

fn failed(error: ResponseError, message: &str) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}

/// Answers the request.
pub(crate) fn handle(
    broker: &Broker,
    access: &Access,
    req: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let all_fail = |e: ResponseError, m: &str| {
        DeleteAclsResponse::default()
            .with_filter_results(req.filters.iter().map(|_| failed(e, m)).collect())
    };
    if broker.authorizer().is_some() && !access.cluster(Operation::Alter) {
        return all_fail(
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed: DeleteAcls needs Alter on the cluster",
        );
    }
    let parsed: Vec<Result<_, String>> = req
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<_> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .cloned()
        .collect();
    let deleted = match broker.delete_acls(&valid) {
        Ok(d) => d,
        Err(e) => return all_fail(response_error(&e), &e.to_string()),
    };
    let mut deleted = deleted.into_iter();
    let results = parsed
        .into_iter()
        .map(|p| match p {
            Err(why) => failed(ResponseError::InvalidRequest, &why),
            Ok(_) => DeleteAclsFilterResult::default().with_matching_acls(
                deleted
                    .next()
                    .unwrap_or_default()
                    .iter()
                    .map(|b| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(b.resource_type.code())
                            .with_resource_name(text(&b.resource_name))
                            .with_pattern_type(b.pattern_type.code())
                            .with_principal(text(&b.principal))
                            .with_host(text(&b.host))
                            .with_operation(b.operation.code())
                            .with_permission_type(b.permission.code())
                    })
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
