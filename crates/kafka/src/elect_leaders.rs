//! ElectLeaders (key 43): preferred or unclean leader election, answered as
//! Kafka's controller does for partitions of one replica
//! (`ReplicationControlManager.electLeaders`): that replica is the preferred
//! leader and already leads, so no election is needed, unless its broker is
//! fenced, when no replica is eligible.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use model::PartitionId;

use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// Kafka's election types: preferred (0) and unclean (1).
const ELECTION_TYPES: std::ops::RangeInclusive<i8> = 0..=1;

/// Answers ElectLeaders. Named partitions get ELECTION_NOT_NEEDED,
/// ELIGIBLE_LEADERS_NOT_AVAILABLE while their broker is fenced, or
/// UNKNOWN_TOPIC_OR_PARTITION; with `topic_partitions` null every topic is
/// listed without its partitions, as Kafka leaves out those already led by
/// the desired leader. An unknown election type is INVALID_REQUEST.
///
/// Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    version: i16,
    req: ElectLeadersRequest,
) -> ElectLeadersResponse {
    if !access.cluster(broker::security::acl::Operation::Alter) {
        // As Kafka: the request's error, and each partition's.
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let results = req
            .topic_partitions
            .into_iter()
            .flatten()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|&p| {
                        PartitionResult::default()
                            .with_partition_id(p)
                            .with_error_code(denied)
                    })
                    .collect();
                ReplicaElectionResult::default()
                    .with_topic(t.topic)
                    .with_partition_result(partitions)
            })
            .collect();
        let resp = ElectLeadersResponse::default().with_replica_election_results(results);
        return if version >= 1 {
            resp.with_error_code(denied)
        } else {
            resp
        };
    }
    if version >= 1 && !ELECTION_TYPES.contains(&req.election_type) {
        return ElectLeadersResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code());
    }
    let results = match req.topic_partitions {
        None => broker
            .topics()
            .iter()
            .map(|t| {
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(t.name.to_string())))
            })
            .collect(),
        Some(topics) => topics
            .into_iter()
            .map(|t| {
                let topic = broker.topic(t.topic.as_str());
                let partitions = t
                    .partitions
                    .iter()
                    .map(|&p| {
                        let state = topic
                            .as_ref()
                            .filter(|t| t.has_partition(PartitionId(p)))
                            .and_then(|t| t.placements.get(p as usize));
                        let (code, message) = match (&topic, state) {
                            // Its one replica is its leader: elected already
                            // if that broker is live; with it fenced no
                            // replica is left to elect, clean or not.
                            (_, Some(state)) if broker.live_leader(state) < 0 => (
                                ResponseError::EligibleLeadersNotAvailable,
                                Some(format!(
                                    "The only replica of {}-{p}, broker {}, is not available.",
                                    t.topic.as_str(),
                                    state.leader
                                )),
                            ),
                            (_, Some(_)) => (ResponseError::ElectionNotNeeded, None),
                            (None, _) => (
                                ResponseError::UnknownTopicOrPartition,
                                Some(format!("No such topic as {}", t.topic.as_str())),
                            ),
                            (Some(_), None) => (
                                ResponseError::UnknownTopicOrPartition,
                                Some(format!("No such partition as {}-{p}", t.topic.as_str())),
                            ),
                        };
                        PartitionResult::default()
                            .with_partition_id(p)
                            .with_error_code(code.code())
                            .with_error_message(message.map(StrBytes::from_string))
                    })
                    .collect();
                ReplicaElectionResult::default()
                    .with_topic(t.topic)
                    .with_partition_result(partitions)
            })
            .collect(),
    };
    ElectLeadersResponse::default().with_replica_election_results(results)
}
