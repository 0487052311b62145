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
pub fn handle(_req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default().with_error_message(None)
}
