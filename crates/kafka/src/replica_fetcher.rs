//! The follower's side of replication: a broker's replica fetchers reach
//! their leaders with Kafka's Fetch (v15: `ReplicaState`, topic ids,
//! `last_fetched_epoch`, diverging-epoch answers) over the inter-broker
//! listener, through the same kept connections as the other inter-broker
//! requests ([`KafkaPeers`]).

use broker::replica::{Fetched, FetchedPartition, LeaderLink, ReplicaFetch};
use broker::txn::PeerFuture;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{BrokerId, FetchRequest};
use model::{LeaderEpoch, Offset, TopicId};

use crate::peers::KafkaPeers;

/// Fetch's version for replica fetches (ReplicaState, topic ids).
const REPLICA_FETCH_VERSION: i16 = 15;

impl LeaderLink for KafkaPeers {
    fn fetch(&self, addr: String, fetch: ReplicaFetch) -> PeerFuture<Vec<FetchedPartition>> {
        let me = self.clone();
        Box::pin(async move {
            let mut topics: Vec<FetchTopic> = Vec::new();
            for p in &fetch.partitions {
                let part = FetchPartition::default()
                    .with_partition(p.partition)
                    .with_current_leader_epoch(p.request.leader_epoch.0)
                    .with_fetch_offset(p.request.fetch_offset.0)
                    .with_last_fetched_epoch(p.request.last_fetched_epoch.map_or(-1, |e| e.0))
                    .with_log_start_offset(p.log_start_offset.0)
                    .with_partition_max_bytes(p.max_bytes);
                match topics.iter_mut().find(|t| t.topic_id == p.topic_id.0) {
                    Some(t) => t.partitions.push(part),
                    None => topics.push(
                        FetchTopic::default()
                            .with_topic_id(p.topic_id.0)
                            .with_partitions(vec![part]),
                    ),
                }
            }
            let req = FetchRequest::default()
                .with_replica_state(
                    ReplicaState::default()
                        .with_replica_id(BrokerId(fetch.replica.0))
                        .with_replica_epoch(fetch.broker_epoch),
                )
                .with_max_wait_ms(fetch.max_wait_ms)
                .with_min_bytes(fetch.min_bytes)
                .with_max_bytes(fetch.max_bytes)
                .with_isolation_level(0)
                .with_topics(topics);
            let resp = me.call(&addr, REPLICA_FETCH_VERSION, &req).await?;
            if resp.error_code != 0 {
                return Err(broker::Error::InvalidRequest(format!(
                    "replica fetch refused by {addr}: {}",
                    describe(resp.error_code)
                )));
            }
            let mut out = Vec::new();
            for t in resp.responses {
                for p in t.partitions {
                    let outcome = if p.error_code == ResponseError::OffsetOutOfRange.code() {
                        Fetched::OutOfRange {
                            log_start_offset: Offset(p.log_start_offset),
                        }
                    } else if p.error_code != 0 {
                        Fetched::Error(describe(p.error_code))
                    } else if p.diverging_epoch.epoch >= 0 && p.diverging_epoch.end_offset >= 0 {
                        Fetched::Diverging {
                            epoch: LeaderEpoch(p.diverging_epoch.epoch),
                            end_offset: Offset(p.diverging_epoch.end_offset),
                        }
                    } else {
                        Fetched::Records {
                            records: p.records.unwrap_or_default(),
                            high_watermark: Offset(p.high_watermark),
                            log_start_offset: Offset(p.log_start_offset),
                        }
                    };
                    out.push(FetchedPartition {
                        topic_id: TopicId(t.topic_id),
                        partition: p.partition_index,
                        outcome,
                    });
                }
            }
            Ok(out)
        })
    }
}

fn describe(code: i16) -> String {
    ResponseError::try_from_code(code).map_or_else(|| format!("error {code}"), |e| format!("{e:?}"))
}
