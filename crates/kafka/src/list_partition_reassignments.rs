//! ListPartitionReassignments (key 46): the reassignments in progress,
//! from the metadata (replicas, and the ones being added and removed), for
//! the partitions asked for or all of them, as Kafka's controller answers.

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Answers ListPartitionReassignments.
///
/// Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Broker,
    access: &crate::authz::Access,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !access.cluster(broker::security::acl::Operation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(
                kafka_protocol::error::ResponseError::ClusterAuthorizationFailed.code(),
            )
            .with_error_message(None);
    }
    let wanted = |topic: &str, p: i32| match &req.topics {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|t| t.name.as_str() == topic && t.partition_indexes.contains(&p)),
    };
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for (topic, p, s) in broker.partition_reassignments() {
        if !wanted(&topic, p) {
            continue;
        }
        let partition = OngoingPartitionReassignment::default()
            .with_partition_index(p)
            .with_replicas(ids(&s.replicas))
            .with_adding_replicas(ids(&s.adding_replicas))
            .with_removing_replicas(ids(&s.removing_replicas));
        match topics.last_mut().filter(|t| t.name.as_str() == topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    ListPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_topics(topics)
}
