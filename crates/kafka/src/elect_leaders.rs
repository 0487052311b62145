//! ElectLeaders (key 43): preferred or unclean leader elections, decided
//! by the controller's rules (`magnetar_metadata::leadership::elect`) and
//! committed as partition changes: preferred moves leadership to a
//! partition's first replica when it is live and in sync; unclean gives an
//! offline partition a leader, out of sync if need be.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use broker::leadership::{ElectionError, ElectionType};
use broker::Broker;

use super::error::response_error;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// Kafka's election types: preferred (0) and unclean (1).
const ELECTION_TYPES: std::ops::RangeInclusive<i8> = 0..=1;

/// Answers ElectLeaders. Each named partition is elected (no error) or
/// gets ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
/// ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION; with
/// `topic_partitions` null every partition is elected where needed and
/// those already led by the desired leader are left out, as Kafka does.
/// An unknown election type is INVALID_REQUEST.
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
    let kind = if version >= 1 && req.election_type == 1 {
        ElectionType::Unclean
    } else {
        ElectionType::Preferred
    };
    // With no partitions named, every partition of every topic, and only
    // those an election was made for (or failed for) are listed.
    let everything = req.topic_partitions.is_none();
    let asked: Vec<(TopicName, Vec<i32>)> = match req.topic_partitions {
        None => broker
            .topics()
            .iter()
            .map(|t| {
                (
                    TopicName(StrBytes::from_string(t.name.to_string())),
                    (0..t.partition_count() as i32).collect(),
                )
            })
            .collect(),
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.topic, t.partitions))
            .collect(),
    };
    let flat: Vec<(String, i32)> = asked
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.to_string(), *p)))
        .collect();
    let outcomes: Vec<(i16, Option<String>)> = match broker.elect_leaders(&flat, kind) {
        Ok(o) => o.into_iter().map(election_error).collect(),
        Err(e) => flat
            .iter()
            .map(|_| (response_error(&e).code(), Some(e.to_string())))
            .collect(),
    };
    let mut outcomes = outcomes.into_iter();
    let results = asked
        .into_iter()
        .map(|(topic, partitions)| {
            let partition_result = partitions
                .into_iter()
                .zip(outcomes.by_ref())
                .filter(|(_, (code, _))| {
                    !(everything && *code == ResponseError::ElectionNotNeeded.code())
                })
                .map(|(p, (code, message))| {
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(topic)
                .with_partition_result(partition_result)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(results)
}

/// An election's outcome as ElectLeaders answers it.
fn election_error(r: Result<(), ElectionError>) -> (i16, Option<String>) {
    let code = match &r {
        Ok(()) => return (0, None),
        Err(ElectionError::UnknownPartition { .. }) => ResponseError::UnknownTopicOrPartition,
        Err(ElectionError::NotNeeded(_)) => return (ResponseError::ElectionNotNeeded.code(), None),
        Err(ElectionError::PreferredNotAvailable(_)) => ResponseError::PreferredLeaderNotAvailable,
        Err(ElectionError::NoneEligible) => ResponseError::EligibleLeadersNotAvailable,
    };
    (code.code(), r.err().map(|e| e.to_string()))
}
