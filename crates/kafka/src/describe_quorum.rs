//! DescribeQuorum (key 55): the controller quorum's state, as its leader
//! describes it (`kafka-metadata-quorum describe --status/--replication`).
//!
//! Any broker of a cluster answers by asking the leader, as Kafka's brokers
//! forward it. The metadata log is partition 0 of `__cluster_metadata`;
//! its offsets are the Raft log's indexes and the leader epoch is the Raft
//! term. A standalone node is a quorum of one inside its process: it
//! reports itself as the only voter, with no controller listener.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use broker::cluster::ReplicaProgress;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// The metadata log's topic name, as Kafka names it.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// The listener name the voters' addresses are reported under.
const CONTROLLER_LISTENER: &str = "CONTROLLER";

fn replica(version: i16, p: &ReplicaProgress) -> ReplicaState {
    let r = ReplicaState::default()
        .with_replica_id(BrokerId(p.node))
        .with_log_end_offset(p.log_end_offset);
    if version < 1 {
        return r;
    }
    r.with_last_fetch_timestamp(p.last_fetch_ms)
        .with_last_caught_up_timestamp(p.last_caught_up_ms)
}

/// Answers DescribeQuorum. Blocking: asks the quorum's leader.
///
/// Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    version: i16,
    req: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let resp = DescribeQuorumResponse::default();
    if !access.cluster(broker::security::acl::Operation::Describe) {
        return resp.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    // Messages exist from v2 on.
    let message = |m: String| (version >= 2).then(|| StrBytes::from_string(m));
    let quorum = match broker.describe_quorum() {
        Ok(q) => q,
        // No leader answered (an election, no quorum): retriable, as a
        // Kafka controller that does not lead answers.
        Err(e) => {
            return resp
                .with_error_code(ResponseError::NotLeaderOrFollower.code())
                .with_error_message(message(e.to_string()));
        }
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let ours = t.topic_name.as_str() == METADATA_TOPIC;
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let d = PartitionData::default().with_partition_index(p.partition_index);
                    if !ours || p.partition_index != 0 {
                        return d
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_leader_id(BrokerId(-1))
                            .with_leader_epoch(-1)
                            .with_high_watermark(-1);
                    }
                    d.with_leader_id(BrokerId(quorum.leader))
                        .with_leader_epoch(quorum.leader_epoch.clamp(0, i32::MAX as i64) as i32)
                        .with_high_watermark(quorum.high_watermark)
                        .with_current_voters(
                            quorum.voters.iter().map(|r| replica(version, r)).collect(),
                        )
                        .with_observers(
                            quorum
                                .observers
                                .iter()
                                .map(|r| replica(version, r))
                                .collect(),
                        )
                })
                .collect();
            TopicData::default()
                .with_topic_name(t.topic_name)
                .with_partitions(partitions)
        })
        .collect();
    if version < 2 {
        return resp.with_topics(topics);
    }
    let nodes = quorum
        .voter_addrs
        .iter()
        .filter_map(|(id, addr)| {
            if addr.is_empty() {
                // In-process (standalone): no controller listener.
                return Some(Node::default().with_node_id(BrokerId(*id)));
            }
            let (host, port) = addr.rsplit_once(':')?;
            Some(Node::default().with_node_id(BrokerId(*id)).with_listeners(
                vec![Listener::default()
                        .with_name(StrBytes::from_static_str(CONTROLLER_LISTENER))
                        .with_host(StrBytes::from_string(
                            host.trim_start_matches('[')
                                .trim_end_matches(']')
                                .to_string(),
                        ))
                        .with_port(port.parse().ok()?)],
            ))
        })
        .collect();
    resp.with_topics(topics).with_nodes(nodes)
}
