//! ListPartitionReassignments (key 46): the reassignments in progress.
//! On a single node a reassignment completes as it is made (see
//! AlterPartitionReassignments), so there are never any: the answer lists
//! no topic, whatever is asked, as Kafka's controller answers for
//! partitions with none in progress.

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::Versions;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Answers ListPartitionReassignments.
///
/// Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    access: &crate::authz::Access,
    _req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !access.cluster(broker::security::acl::Operation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(
                kafka_protocol::error::ResponseError::ClusterAuthorizationFailed.code(),
            )
            .with_error_message(None);
    }
    ListPartitionReassignmentsResponse::default().with_error_message(None)
}
