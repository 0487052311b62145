//! One transactional id's state and its transitions, as Kafka's
//! `TransactionMetadata` and `TransactionCoordinator` decide them. Pure:
//! each request comes in with the time and gives the next state (to be
//! persisted before it is answered) or the error to answer; the markers
//! the coordinator must write follow from the state.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use crate::error::TxnError;
use crate::group::store::CommittedOffset;

/// The internal topic whose partition numbers are the coordinator slots: a
/// marker for `__consumer_offsets` partition N ends the transaction's
/// offsets of the groups of slot N.
pub const GROUP_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Where a transaction is (Kafka's `TransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    /// No transaction open (after InitProducerId).
    Empty,
    /// Partitions or offsets were added: records may be written.
    Ongoing,
    /// EndTxn(commit) was accepted: commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing: abort markers are being written.
    PrepareAbort,
    /// Every commit marker is written.
    CompleteCommit,
    /// Every abort marker is written.
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name, as DescribeTransactions and ListTransactions report it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// Whether markers are being written.
    pub fn is_prepared(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// Each partition asked about and whether it is in the open transaction.
pub type Verdicts = Vec<((String, i32), Result<(), TxnError>)>;

/// A transactional id's state, as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMetadata {
    /// Its producer id.
    pub producer_id: i64,
    /// Its current producer epoch.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` as the producer asked.
    pub timeout_ms: i32,
    /// Where its transaction is.
    pub state: TxnState,
    /// The partitions of the transaction (topic, partition).
    pub partitions: BTreeSet<(String, i32)>,
    /// The groups of the transaction (AddOffsetsToTxn) and the offsets
    /// committed for them in it (TxnOffsetCommit): they become the groups'
    /// committed offsets when the transaction commits.
    #[serde(with = "staged_offsets")]
    pub groups: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    /// When the transaction started (ms; -1 with none open).
    pub start_ms: i64,
    /// When the state last changed (ms).
    pub last_update_ms: i64,
    /// The epoch the open transaction's records were written with, when
    /// a fencing abort bumped [`TxnMetadata::producer_epoch`] past it:
    /// the abort markers sent to other brokers carry it, since those
    /// brokers never saw the bumped epoch (the fenced producer cannot
    /// write there again: its next append is verified with the
    /// coordinator, which refuses it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_epoch: Option<i16>,
}

/// What EndTxn has to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndPlan {
    /// A retry of an EndTxn already completed: answer success.
    Done,
    /// Persist this prepared state, write its markers, then complete it.
    Write(TxnMetadata),
}

impl TxnMetadata {
    /// A new transactional id's state: `producer_id` at epoch 0.
    pub fn new(producer_id: i64, timeout_ms: i32, now: i64) -> TxnMetadata {
        TxnMetadata {
            producer_id,
            producer_epoch: 0,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeMap::new(),
            start_ms: -1,
            last_update_ms: now,
            records_epoch: None,
        }
    }

    /// The producer epoch of the markers written on other brokers: the
    /// one the transaction's records carry.
    pub fn remote_marker_epoch(&self) -> i16 {
        self.records_epoch.unwrap_or(self.producer_epoch)
    }

    /// The producer (id, epoch) must be this id's current one.
    pub fn check_producer(&self, id: &str, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping(id.to_string()));
        }
        if epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced {
                sent: epoch,
                current: self.producer_epoch,
            });
        }
        Ok(())
    }

    fn begin(&self, id: &str, now: i64) -> Result<TxnMetadata, TxnError> {
        if self.state.is_prepared() {
            return Err(TxnError::ConcurrentTransactions(id.to_string()));
        }
        let mut next = self.clone();
        if next.state != TxnState::Ongoing {
            next.state = TxnState::Ongoing;
            next.start_ms = now;
            next.partitions.clear();
            next.groups.clear();
        }
        next.last_update_ms = now;
        Ok(next)
    }

    /// AddPartitionsToTxn: the partitions join the transaction (opening it).
    pub fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now: i64,
    ) -> Result<TxnMetadata, TxnError> {
        self.check_producer(id, producer_id, epoch)?;
        let mut next = self.begin(id, now)?;
        next.partitions.extend(partitions.iter().cloned());
        Ok(next)
    }

    /// KIP-890's verification (AddPartitionsToTxn v4+ with `verify_only`,
    /// what a partition leader asks before it appends a transactional
    /// batch): whether each partition is in this producer's open
    /// transaction (INVALID_TXN_STATE if not). The producer must be the
    /// current one, and a transaction still being ended answers
    /// CONCURRENT_TRANSACTIONS (retriable), as Kafka's coordinator does.
    pub fn verify_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        group_slot: impl Fn(&str) -> Option<i32>,
    ) -> Result<Verdicts, TxnError> {
        self.check_producer(id, producer_id, epoch)?;
        if self.state.is_prepared() {
            return Err(TxnError::ConcurrentTransactions(id.to_string()));
        }
        // `__consumer_offsets` partition N stands for the groups of slot N
        // (a group coordinator checking before it stages offsets).
        let added = |tp: &(String, i32)| {
            if tp.0 == GROUP_OFFSETS_TOPIC {
                self.groups.keys().any(|g| group_slot(g) == Some(tp.1))
            } else {
                self.partitions.contains(tp)
            }
        };
        Ok(partitions
            .iter()
            .map(|tp| {
                let r = if self.state == TxnState::Ongoing && added(tp) {
                    Ok(())
                } else {
                    Err(TxnError::InvalidTxnState(format!(
                        "{}-{} is not in the open transaction of {id:?}",
                        tp.0, tp.1
                    )))
                };
                (tp.clone(), r)
            })
            .collect())
    }

    /// AddOffsetsToTxn: the group's offsets will be committed with the
    /// transaction.
    pub fn add_group(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        now: i64,
    ) -> Result<TxnMetadata, TxnError> {
        self.check_producer(id, producer_id, epoch)?;
        let mut next = self.begin(id, now)?;
        next.groups.entry(group.to_string()).or_default();
        Ok(next)
    }

    /// TxnOffsetCommit: offsets of a group added to the transaction.
    pub fn stage_offsets(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now: i64,
    ) -> Result<TxnMetadata, TxnError> {
        self.check_producer(id, producer_id, epoch)?;
        if self.state != TxnState::Ongoing || !self.groups.contains_key(group) {
            return Err(TxnError::InvalidTxnState(format!(
                "group {group:?} was not added to the transaction (AddOffsetsToTxn)"
            )));
        }
        let mut next = self.clone();
        let staged = next.groups.entry(group.to_string()).or_default();
        for (t, p, o) in offsets {
            staged.insert((t, p), o);
        }
        next.last_update_ms = now;
        Ok(next)
    }

    /// EndTxn: commit or abort the ongoing transaction.
    pub fn prepare_end(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now: i64,
    ) -> Result<EndPlan, TxnError> {
        // A retry after a timeout aborted the transaction (and bumped the
        // epoch) is fenced like any older epoch.
        self.check_producer(id, producer_id, epoch)?;
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = self.clone();
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.last_update_ms = now;
                Ok(EndPlan::Write(next))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndPlan::Done)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions(id.to_string()))
            }
            (state, _) => Err(TxnError::InvalidTxnState(format!(
                "cannot {} a transaction in state {}",
                if commit { "commit" } else { "abort" },
                state.name()
            ))),
        }
    }

    /// The markers are written: the transaction is complete.
    pub fn complete(&self, now: i64) -> TxnMetadata {
        let mut next = self.clone();
        next.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => other,
        };
        next.partitions.clear();
        next.groups.clear();
        next.start_ms = -1;
        next.last_update_ms = now;
        next.records_epoch = None;
        next
    }

    /// Fences the current producer and aborts its transaction (a timeout,
    /// or InitProducerId while one is open): the epoch goes up, so the old
    /// producer's requests and markers are refused from here on.
    pub fn fence_and_abort(&self, now: i64) -> TxnMetadata {
        let mut next = self.clone();
        next.records_epoch = Some(self.remote_marker_epoch());
        next.producer_epoch = self.producer_epoch.saturating_add(1);
        next.state = TxnState::PrepareAbort;
        next.last_update_ms = now;
        next
    }

    /// Whether its open transaction has outlived its timeout at `now`.
    pub fn expired(&self, now: i64) -> bool {
        self.state == TxnState::Ongoing && self.start_ms + i64::from(self.timeout_ms) < now
    }

    /// InitProducerId once no transaction is open: the next epoch, or a new
    /// producer id from `new_id` once the epoch is exhausted.
    pub fn next_epoch(
        &self,
        timeout_ms: i32,
        now: i64,
        new_id: impl FnOnce() -> i64,
    ) -> TxnMetadata {
        let mut next = self.complete(now);
        next.state = TxnState::Empty;
        next.timeout_ms = timeout_ms;
        if self.producer_epoch >= i16::MAX - 1 {
            next.producer_id = new_id();
            next.producer_epoch = 0;
        } else {
            next.producer_epoch = self.producer_epoch + 1;
        }
        next
    }
}

/// The staged offsets as JSON: per group a list of `[topic, partition,
/// offset]` entries (JSON object keys cannot be pairs).
mod staged_offsets {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::group::store::CommittedOffset;

    type Staged = BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>;

    pub fn serialize<S: Serializer>(v: &Staged, s: S) -> Result<S::Ok, S::Error> {
        let flat: BTreeMap<&String, Vec<(&String, i32, &CommittedOffset)>> = v
            .iter()
            .map(|(g, m)| (g, m.iter().map(|((t, p), o)| (t, *p, o)).collect()))
            .collect();
        flat.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Staged, D::Error> {
        let flat: BTreeMap<String, Vec<(String, i32, CommittedOffset)>> = BTreeMap::deserialize(d)?;
        Ok(flat
            .into_iter()
            .map(|(g, l)| (g, l.into_iter().map(|(t, p, o)| ((t, p), o)).collect()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_answers_per_partition_and_checks_the_producer() {
        let p = vec![("t".to_string(), 0)];
        let asked = vec![("t".to_string(), 0), ("t".to_string(), 1)];
        let empty = TxnMetadata::new(5, 60_000, 0);
        let r = empty
            .verify_partitions("x", 5, 0, &asked, |_| None)
            .unwrap();
        assert!(r.iter().all(|(_, r)| r.is_err()), "no transaction open");
        let open = empty.add_partitions("x", 5, 0, &p, 10).unwrap();
        let r = open.verify_partitions("x", 5, 0, &asked, |_| None).unwrap();
        assert_eq!(r[0], (asked[0].clone(), Ok(())));
        assert!(matches!(r[1].1, Err(TxnError::InvalidTxnState(_))));
        assert!(matches!(
            open.verify_partitions("x", 6, 0, &asked, |_| None),
            Err(TxnError::InvalidProducerIdMapping(_))
        ));
        assert!(matches!(
            open.verify_partitions("x", 5, 1, &asked, |_| None),
            Err(TxnError::ProducerFenced {
                sent: 1,
                current: 0
            })
        ));
        let EndPlan::Write(prepared) = open.prepare_end("x", 5, 0, false, 11).unwrap() else {
            panic!()
        };
        assert!(matches!(
            prepared.verify_partitions("x", 5, 0, &asked, |_| None),
            Err(TxnError::ConcurrentTransactions(_))
        ));
    }

    fn offset(o: i64) -> CommittedOffset {
        CommittedOffset {
            offset: o,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: 0,
        }
    }

    #[test]
    fn a_transaction_opens_commits_and_a_retry_is_answered() {
        let t = TxnMetadata::new(5, 60_000, 0);
        let p = vec![("t".to_string(), 0)];
        let t = t.add_partitions("x", 5, 0, &p, 10).unwrap();
        assert_eq!(t.state, TxnState::Ongoing);
        assert_eq!(t.start_ms, 10);
        let t = t.add_group("x", 5, 0, "g", 11).unwrap();
        let t = t
            .stage_offsets("x", 5, 0, "g", vec![("t".into(), 0, offset(7))], 12)
            .unwrap();
        assert_eq!(t.groups["g"][&("t".to_string(), 0)].offset, 7);
        // Persisted as JSON and read back the same.
        let json = serde_json::to_vec(&t).unwrap();
        assert_eq!(serde_json::from_slice::<TxnMetadata>(&json).unwrap(), t);
        let EndPlan::Write(prepared) = t.prepare_end("x", 5, 0, true, 13).unwrap() else {
            panic!()
        };
        assert_eq!(prepared.state, TxnState::PrepareCommit);
        assert_eq!(prepared.partitions.len(), 1, "the markers' partitions");
        assert_eq!(
            prepared.prepare_end("x", 5, 0, true, 14),
            Err(TxnError::ConcurrentTransactions("x".into()))
        );
        let done = prepared.complete(15);
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty() && done.groups.is_empty());
        assert_eq!(done.prepare_end("x", 5, 0, true, 16), Ok(EndPlan::Done));
        assert!(matches!(
            done.prepare_end("x", 5, 0, false, 16),
            Err(TxnError::InvalidTxnState(_))
        ));
        // A new transaction starts afresh.
        let again = done.add_partitions("x", 5, 0, &p, 20).unwrap();
        assert_eq!(again.start_ms, 20);
    }

    #[test]
    fn older_epochs_and_other_producers_are_refused() {
        let t = TxnMetadata::new(5, 60_000, 0);
        let p = vec![("t".to_string(), 0)];
        assert_eq!(
            t.add_partitions("x", 6, 0, &p, 1),
            Err(TxnError::InvalidProducerIdMapping("x".into()))
        );
        let t = t.add_partitions("x", 5, 0, &p, 1).unwrap();
        // A timeout fences the producer and aborts.
        assert!(!t.expired(60_001));
        assert!(t.expired(60_002));
        let fenced = t.fence_and_abort(60_002);
        assert_eq!(fenced.producer_epoch, 1);
        assert_eq!(fenced.state, TxnState::PrepareAbort);
        let done = fenced.complete(60_003);
        assert_eq!(
            done.prepare_end("x", 5, 0, true, 60_004),
            Err(TxnError::ProducerFenced {
                sent: 0,
                current: 1
            })
        );
        assert!(matches!(
            done.stage_offsets("x", 5, 1, "g", vec![], 60_005),
            Err(TxnError::InvalidTxnState(_))
        ));
        // InitProducerId bumps the epoch; an exhausted epoch gets a new id.
        let next = done.next_epoch(1_000, 70_000, || 99);
        assert_eq!((next.producer_id, next.producer_epoch), (5, 2));
        assert_eq!(next.state, TxnState::Empty);
        let mut old = next.clone();
        old.producer_epoch = i16::MAX - 1;
        let renewed = old.next_epoch(1_000, 70_001, || 99);
        assert_eq!((renewed.producer_id, renewed.producer_epoch), (99, 0));
    }
}
