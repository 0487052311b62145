//! What the Kafka front end records per request in the broker's metrics:
//! the API by name (`Produce`, `Fetch`, … as Kafka's request metrics name
//! them) and the outcome, the first error code the response carries by
//! Kafka's name for it (`UNKNOWN_TOPIC_OR_PARTITION`), else `ok`.

use std::sync::OnceLock;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, ResponseKind};

use super::Outcome;
use broker::metrics::Outcome as Recorded;

/// API table slots: every API key below this is pre-resolved on its first
/// request (the highest key defined today is in the 90s).
pub const API_SLOTS: usize = 128;

/// Error codes named in the table (Kafka's run from -1 to about 130).
const ERROR_CODES: std::ops::Range<i16> = -1..256;

/// The API's name, e.g. `Produce`.
pub fn api_name(key: ApiKey) -> &'static str {
    static NAMES: OnceLock<Vec<(i16, String)>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        ApiKey::iter()
            .map(|k| (k as i16, format!("{k:?}")))
            .collect()
    });
    names
        .iter()
        .find(|(k, _)| *k == key as i16)
        .map_or("Unknown", |(_, n)| n.as_str())
}

/// Kafka's name of an error code (`NONE` for 0, `UNKNOWN_CODE` for a code
/// it does not define).
pub fn error_name(code: i16) -> &'static str {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        ERROR_CODES
            .map(|c| match ResponseError::try_from_code(c) {
                None => "NONE".to_string(),
                Some(ResponseError::Unknown(_)) => "UNKNOWN_CODE".to_string(),
                Some(e) => screaming_snake(&e.to_string()),
            })
            .collect()
    });
    usize::try_from(code - ERROR_CODES.start)
        .ok()
        .and_then(|i| names.get(i))
        .map_or("UNKNOWN_CODE", String::as_str)
}

/// `UnknownTopicOrPartition` → `UNKNOWN_TOPIC_OR_PARTITION`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The outcome label of a handled request.
pub fn outcome(o: &Outcome) -> Recorded {
    let code = match o {
        Outcome::Reply(r) => first_error(r),
        Outcome::Frame(f) => f.error_code(),
        Outcome::NoReply => 0,
        Outcome::Close(_) => return Recorded::Closed,
    };
    match code {
        0 => Recorded::Ok,
        c => Recorded::Error(error_name(c)),
    }
}

/// The first non-zero error code of a response: its top-level code, else
/// the first per-item (topic, partition, group, resource) code in order.
pub fn first_error(r: &ResponseKind) -> i16 {
    fn first(codes: impl IntoIterator<Item = i16>) -> i16 {
        codes.into_iter().find(|&c| c != 0).unwrap_or(0)
    }
    match r {
        ResponseKind::ApiVersions(r) => r.error_code,
        ResponseKind::Produce(r) => first(
            r.responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code)),
        ),
        ResponseKind::ListOffsets(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::Metadata(r) => first(std::iter::once(r.error_code).chain(
            r.topics.iter().flat_map(|t| {
                std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
            }),
        )),
        ResponseKind::OffsetCommit(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::OffsetFetch(r) => first(
            std::iter::once(r.error_code)
                .chain(
                    r.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                )
                .chain(r.groups.iter().flat_map(|g| {
                    std::iter::once(g.error_code).chain(
                        g.topics
                            .iter()
                            .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                    )
                })),
        ),
        ResponseKind::FindCoordinator(r) => {
            first(std::iter::once(r.error_code).chain(r.coordinators.iter().map(|c| c.error_code)))
        }
        ResponseKind::JoinGroup(r) => r.error_code,
        ResponseKind::Heartbeat(r) => r.error_code,
        ResponseKind::LeaveGroup(r) => {
            first(std::iter::once(r.error_code).chain(r.members.iter().map(|m| m.error_code)))
        }
        ResponseKind::SyncGroup(r) => r.error_code,
        ResponseKind::DescribeGroups(r) => first(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::ListGroups(r) => r.error_code,
        ResponseKind::CreateTopics(r) => first(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::DeleteTopics(r) => first(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::DeleteRecords(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::InitProducerId(r) => r.error_code,
        ResponseKind::OffsetForLeaderEpoch(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::DescribeConfigs(r) => first(r.results.iter().map(|x| x.error_code)),
        ResponseKind::AlterConfigs(r) => first(r.responses.iter().map(|x| x.error_code)),
        ResponseKind::CreatePartitions(r) => first(r.results.iter().map(|x| x.error_code)),
        ResponseKind::DeleteGroups(r) => first(r.results.iter().map(|x| x.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => first(r.responses.iter().map(|x| x.error_code)),
        ResponseKind::OffsetDelete(r) => first(
            std::iter::once(r.error_code).chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::DescribeCluster(r) => r.error_code,
        ResponseKind::ConsumerGroupHeartbeat(r) => r.error_code,
        ResponseKind::ConsumerGroupDescribe(r) => first(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::DescribeLogDirs(r) => {
            first(std::iter::once(r.error_code).chain(r.results.iter().map(|d| d.error_code)))
        }
        ResponseKind::AlterReplicaLogDirs(r) => first(
            r.results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::DescribeTopicPartitions(r) => first(r.topics.iter().flat_map(|t| {
            std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
        })),
        ResponseKind::ListConfigResources(r) => r.error_code,
        ResponseKind::ElectLeaders(r) => first(
            std::iter::once(r.error_code).chain(
                r.replica_election_results
                    .iter()
                    .flat_map(|t| t.partition_result.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::AlterPartitionReassignments(r) => first(
            std::iter::once(r.error_code).chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::ListPartitionReassignments(r) => r.error_code,
        ResponseKind::DescribeProducers(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        // Not answered by this broker (SUPPORTED_APIS); nothing to find.
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::ProduceResponse;

    #[test]
    fn names_follow_kafka() {
        assert_eq!(api_name(ApiKey::Produce), "Produce");
        assert_eq!(
            api_name(ApiKey::ConsumerGroupHeartbeat),
            "ConsumerGroupHeartbeat"
        );
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(56), "KAFKA_STORAGE_ERROR");
        assert_eq!(error_name(100), "UNKNOWN_TOPIC_ID");
        assert_eq!(error_name(-7), "UNKNOWN_CODE");
        assert_eq!(error_name(9999), "UNKNOWN_CODE");
        // Every API served has a name of its own.
        for (key, _) in crate::SUPPORTED_APIS {
            assert_eq!(api_name(*key), format!("{key:?}"));
            assert!((*key as i16 as usize) < API_SLOTS);
        }
    }

    #[test]
    fn the_first_partition_error_is_the_outcome() {
        let partition = |index, error_code| {
            PartitionProduceResponse::default()
                .with_index(index)
                .with_error_code(error_code)
        };
        let resp = |codes: &[i16]| {
            ResponseKind::Produce(ProduceResponse::default().with_responses(vec![
                TopicProduceResponse::default().with_partition_responses(
                    codes
                        .iter()
                        .enumerate()
                        .map(|(i, c)| partition(i as i32, *c))
                        .collect(),
                ),
            ]))
        };
        assert_eq!(outcome(&Outcome::Reply(resp(&[0, 0]))), Recorded::Ok);
        assert_eq!(
            outcome(&Outcome::Reply(resp(&[0, 10, 3]))),
            Recorded::Error("MESSAGE_TOO_LARGE")
        );
        assert_eq!(outcome(&Outcome::NoReply), Recorded::Ok);
        assert_eq!(outcome(&Outcome::Close("x".into())), Recorded::Closed);
    }
}
