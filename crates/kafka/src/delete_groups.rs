//! DeleteGroups (key 42): remove empty groups and their offsets.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::error::{coordinator_error, response_error};
use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// Answers DeleteGroups.
///
/// Each group needs Delete (GROUP_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let results = req
        .groups_names
        .into_iter()
        .map(|g| {
            let code = if !access.group(broker::security::acl::Operation::Delete, g.as_str()) {
                ResponseError::GroupAuthorizationFailed.code()
            } else if g.is_empty() {
                ResponseError::InvalidGroupId.code()
            } else {
                match broker.coordinator(g.as_str()) {
                    Err(e) => response_error(&e).code(),
                    Ok(c) => match c.groups().delete_group(g.as_str()) {
                        Err(e) => coordinator_error(&e).code(),
                        Ok(()) => c
                            .committed_blocking()
                            .err()
                            .map_or(0, |e| response_error(&e).code()),
                    },
                }
            };
            DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
