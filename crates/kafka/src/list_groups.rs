//! ListGroups (key 16): every group, filtered by state (v4+) and type (v5+).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 5);

/// Answers ListGroups: every group for a principal with Describe on the
/// cluster, else those it may Describe, as Kafka.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let everything = access.cluster(Operation::Describe);
    let groups = broker
        .coordinators_here()
        .iter()
        .flat_map(|c| c.groups().list())
        .filter(|g| everything || access.group(Operation::Describe, &g.group_id))
        .filter(|g| {
            version < 4
                || req.states_filter.is_empty()
                || req
                    .states_filter
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(&g.state))
        })
        .filter(|g| {
            version < 5
                || req.types_filter.is_empty()
                || req
                    .types_filter
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(g.group_type))
        })
        .map(|g| {
            let mut l = ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(g.group_id)))
                .with_protocol_type(StrBytes::from_string(g.protocol_type));
            if version >= 4 {
                l = l.with_group_state(StrBytes::from_string(g.state));
            }
            if version >= 5 {
                l = l.with_group_type(StrBytes::from_static_str(g.group_type));
            }
            l
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
