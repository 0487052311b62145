//! What the front ends keep in the group log besides groups and offsets:
//! subscription cursors, producer sequences and schemas, each its own
//! record type, restored together when the coordinator replays the log and
//! kept together when it compacts it.

use bytes::Bytes;

use super::store::{GroupLog, RecordKey};
use crate::schema::Schemas;
use crate::sequences::ProducerSequences;
use crate::subscription::{SubscriptionKey, Subscriptions};
use crate::txn::staged_store::StagedOffsets;
use crate::txn::store::Transactions;

/// The front ends' durable state.
#[derive(Debug)]
pub struct FrontEndState {
    /// Subscription cursors (Pulsar-style consumers).
    pub subscriptions: Subscriptions,
    /// Producer sequence ids (deduplication).
    pub sequences: ProducerSequences,
    /// Declared schemas.
    pub schemas: Schemas,
    /// Transactional ids (the transaction coordinator's state).
    pub transactions: Transactions,
    /// Offsets staged for transactions other brokers coordinate.
    pub staged_offsets: StagedOffsets,
}

/// Front-end records collected while the group log is replayed.
#[derive(Debug, Default)]
pub(crate) struct FrontEndRecords {
    subscriptions: Vec<(SubscriptionKey, Option<Bytes>)>,
    sequences: Vec<(String, i32, Option<Bytes>)>,
    schemas: Vec<(String, u64, Option<Bytes>)>,
    transactions: Vec<(String, Option<Bytes>)>,
    staged_offsets: Vec<((String, i64), Option<Bytes>)>,
}

impl FrontEndRecords {
    /// Keeps a front-end record; gives any other back.
    pub(crate) fn take(
        &mut self,
        key: RecordKey,
        value: Option<Bytes>,
    ) -> Option<(RecordKey, Option<Bytes>)> {
        match key {
            RecordKey::Subscription {
                topic,
                partition,
                subscription,
            } => self
                .subscriptions
                .push((SubscriptionKey::new(topic, partition, subscription), value)),
            RecordKey::ProducerSequences { topic, partition } => {
                self.sequences.push((topic, partition, value))
            }
            RecordKey::Schema { topic, version } => self.schemas.push((topic, version, value)),
            RecordKey::Transaction { transactional_id } => {
                self.transactions.push((transactional_id, value))
            }
            RecordKey::StagedTxnOffsets { group, producer_id } => {
                self.staged_offsets.push(((group, producer_id), value))
            }
            other => return Some((other, value)),
        }
        None
    }

    /// The state these records describe.
    pub(crate) fn restore(self, log: &GroupLog) -> FrontEndState {
        FrontEndState {
            subscriptions: Subscriptions::restore(log.clone(), self.subscriptions),
            sequences: ProducerSequences::restore(log.clone(), self.sequences),
            schemas: Schemas::restore(log.clone(), self.schemas),
            transactions: Transactions::restore(log.clone(), self.transactions),
            staged_offsets: StagedOffsets::restore(log.clone(), self.staged_offsets),
        }
    }
}

impl FrontEndState {
    /// Runs `f` with every live front-end record (what a group-log
    /// compaction must keep), holding off their writes meanwhile.
    pub(crate) fn with_persisted<T>(
        &self,
        f: impl FnOnce(Vec<(RecordKey, Option<Vec<u8>>)>) -> T,
    ) -> T {
        self.subscriptions.with_persisted(|mut live| {
            self.sequences.with_persisted(|sequences| {
                self.schemas.with_persisted(|schemas| {
                    self.transactions.with_persisted(|transactions| {
                        self.staged_offsets.with_persisted(|staged| {
                            live.extend(sequences);
                            live.extend(schemas);
                            live.extend(transactions);
                            live.extend(staged);
                            f(live)
                        })
                    })
                })
            })
        })
    }

    /// Every topic some front-end record is about.
    pub fn topics(&self) -> std::collections::BTreeSet<String> {
        self.with_persisted(|records| {
            records
                .iter()
                .filter_map(|(k, _)| k.topic().map(str::to_string))
                .collect()
        })
    }

    /// Drops everything of a deleted topic (tombstones in the group log
    /// before this returns); the first failure is returned after trying all.
    pub fn forget_topic(&self, topic: &str) -> Result<(), crate::error::CoordError> {
        let subs = self.subscriptions.forget_topic(topic);
        let seqs = self.sequences.forget_topic(topic);
        let schemas = self.schemas.forget_topic(topic);
        subs.and(seqs).and(schemas)
    }
}
