//! Pulsar message ids over Kafka offsets.
//!
//! One stored Kafka batch is one Pulsar entry. For a partition of a topic:
//!
//! - `ledgerId` = 63 bits of the topic's id: constant for the partition's
//!   whole life, different for a topic deleted and created again under the
//!   same name;
//! - `entryId` = the base offset of the batch;
//! - `batch_index` = the record's position in the batch when the batch holds
//!   more than one record, −1 otherwise;
//! - `partition` = the partition index (−1 for a non-partitioned topic).
//!
//! So the Kafka offset of an id is `entryId + max(batch_index, 0)`, ids
//! order exactly as offsets do, and the id a producer's receipt gives (the
//! client numbers the messages of its batch 0..n−1) is the id consumers see.
//! Ids survive restarts (they are made of stored offsets) and Seek.

use magnetar_pulsar_wire::proto::MessageIdData;
use model::{Offset, TopicId};

/// Ledger id a client sends for `MessageId.earliest` (−1 as uint64).
const EARLIEST: u64 = u64::MAX;
/// Ledger and entry id of `MessageId.latest` (i64::MAX).
const LATEST: u64 = i64::MAX as u64;

/// The id space of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdSpace {
    /// Ledger id of every entry of the partition.
    pub ledger: u64,
    /// Partition index as ids carry it (−1: non-partitioned topic).
    pub partition: i32,
}

/// Where an id a client sent points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// `MessageId.earliest`.
    Earliest,
    /// `MessageId.latest`, or an id past any offset.
    Latest,
    /// The message at this offset.
    At(Offset),
    /// An id of another ledger: a topic of the same name that was deleted
    /// (or one that does not exist yet).
    OtherLedger,
}

impl IdSpace {
    /// The id space of partition `partition` (−1 for a non-partitioned
    /// topic) of the topic with id `topic`.
    pub fn new(topic: TopicId, partition: i32) -> IdSpace {
        let b = topic.0.as_bytes();
        let raw = u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        // Below i64::MAX (the `latest` sentinel) and never −1 (`earliest`).
        let ledger = (raw & (i64::MAX as u64 - 1)).max(1);
        IdSpace { ledger, partition }
    }

    /// The id of the record at `offset` in an entry starting at `base`
    /// holding `count` records.
    pub fn id(&self, base: Offset, count: u32, offset: Offset) -> MessageIdData {
        MessageIdData {
            ledger_id: self.ledger,
            entry_id: base.0 as u64,
            partition: Some(self.partition),
            batch_index: Some(if count > 1 {
                (offset.0 - base.0) as i32
            } else {
                -1
            }),
            ..Default::default()
        }
    }

    /// The id of an entry (no batch index), as a SendReceipt carries it.
    pub fn entry_id(&self, base: Offset) -> MessageIdData {
        MessageIdData {
            ledger_id: self.ledger,
            entry_id: base.0 as u64,
            partition: Some(self.partition),
            batch_index: Some(-1),
            ..Default::default()
        }
    }

    /// Where `id` points.
    pub fn position(&self, id: &MessageIdData) -> Position {
        if id.ledger_id == EARLIEST || (id.ledger_id as i64) < 0 {
            return Position::Earliest;
        }
        if id.ledger_id == LATEST || id.entry_id >= LATEST {
            return Position::Latest;
        }
        if id.ledger_id != self.ledger {
            return Position::OtherLedger;
        }
        let index = id.batch_index.unwrap_or(-1).max(0) as u64;
        match id
            .entry_id
            .checked_add(index)
            .and_then(|o| i64::try_from(o).ok())
        {
            Some(o) => Position::At(Offset(o)),
            None => Position::Latest,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_offsets_map_both_ways_in_order() {
        let space = IdSpace::new(TopicId::random(), 3);
        let mut last = None;
        for (base, count) in [(0i64, 1u32), (1, 5), (6, 1), (7, 2)] {
            for i in 0..count as i64 {
                let id = space.id(Offset(base), count, Offset(base + i));
                assert_eq!(space.position(&id), Position::At(Offset(base + i)));
                let key = (id.ledger_id, id.entry_id, id.batch_index.unwrap());
                if let Some(prev) = last {
                    assert!(key > prev, "ids order like offsets");
                }
                last = Some(key);
            }
        }
    }

    #[test]
    fn sentinels_and_foreign_ledgers() {
        let space = IdSpace::new(TopicId::random(), -1);
        let id = |ledger, entry| MessageIdData {
            ledger_id: ledger,
            entry_id: entry,
            ..Default::default()
        };
        assert_eq!(space.position(&id(u64::MAX, u64::MAX)), Position::Earliest);
        assert_eq!(space.position(&id(LATEST, LATEST)), Position::Latest);
        assert_eq!(space.position(&id(space.ledger, LATEST)), Position::Latest);
        assert_eq!(
            space.position(&id(space.ledger ^ 2, 5)),
            Position::OtherLedger
        );
        assert!(space.ledger < LATEST && space.ledger > 0);
        let other = IdSpace::new(TopicId::random(), -1);
        assert_ne!(
            space.ledger, other.ledger,
            "a recreated topic has other ids"
        );
    }
}
