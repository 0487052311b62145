//! DescribeAcls (key 29): the ACLs a filter selects, grouped by resource
//! pattern. Needs Describe on the cluster.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::acl_wire::{filter, text};
use crate::authz::Access;
use crate::error::response_error;
use crate::Versions;
use broker::security::acl::Operation;
use broker::Broker;

/// Versions implemented (v0 left Kafka in 4.0).
pub const VERSIONS: Versions = Versions::new(1, 3);

fn failed(error: ResponseError, message: String) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// Answers the request.
pub(crate) fn handle(
    broker: &Broker,
    access: &Access,
    req: DescribeAclsRequest,
) -> DescribeAclsResponse {
    if broker.authorizer().is_some() && !access.cluster(Operation::Describe) {
        return failed(
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed: DescribeAcls needs Describe on the cluster".into(),
        );
    }
    let f = match filter(
        req.resource_type_filter,
        req.resource_name_filter.as_ref(),
        req.pattern_type_filter,
        req.principal_filter.as_ref(),
        req.host_filter.as_ref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => return failed(ResponseError::InvalidRequest, why),
    };
    let bindings = match broker.describe_acls(&f) {
        Ok(b) => b,
        Err(e) => return failed(response_error(&e), e.to_string()),
    };
    let mut by_resource: BTreeMap<_, Vec<AclDescription>> = BTreeMap::new();
    for b in &bindings {
        by_resource
            .entry((b.resource_type, b.resource_name.as_str(), b.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(text(&b.principal))
                    .with_host(text(&b.host))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission.code()),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((kind, name, pattern), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(kind.code())
                .with_resource_name(text(name))
                .with_pattern_type(pattern.code())
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}
