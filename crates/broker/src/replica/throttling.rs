//! The broker's side of the replication throttles (see
//! [`super::throttle`]): which of its replicas are throttled, and their
//! byte rates against the broker keys.

use std::time::{Duration, Instant};

use super::throttle::{lists_replica, ByteRate, Side};
use crate::topic::Partition;
use crate::Broker;

impl Broker {
    /// Whether this broker's replica of `partition` is throttled on `side`.
    pub fn replication_throttled(&self, partition: &Partition, side: Side) -> bool {
        let Some(topic) = self.topic_by_id(partition.topic_id) else {
            return false;
        };
        topic
            .config
            .overrides()
            .get(side.replicas_key())
            .is_some_and(|list| lists_replica(list, partition.tp.partition.0, self.node_id()))
    }

    fn throttle_rate(&self, side: Side) -> i64 {
        self.config().int_value(side.rate_key())
    }

    fn byte_rate(&self, side: Side) -> &ByteRate {
        match side {
            Side::Leader => &self.replication.leader_rate,
            Side::Follower => &self.replication.follower_rate,
        }
    }

    /// How long `side`'s throttled replicas must wait before they may move
    /// more bytes (zero: they may now).
    pub fn replication_throttle_delay(&self, side: Side) -> Duration {
        self.byte_rate(side)
            .delay(self.throttle_rate(side), Instant::now())
    }

    /// Counts `bytes` moved for throttled replicas on `side`.
    pub fn record_throttled_replication(&self, side: Side, bytes: usize) {
        self.byte_rate(side)
            .record(self.throttle_rate(side), bytes, Instant::now());
    }
}
