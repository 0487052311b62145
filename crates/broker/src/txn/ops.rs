//! The transaction coordinator's requests on a broker: each decided by
//! [`super::state`] under the coordinator's lock, persisted, and, to end a
//! transaction, followed by the markers written to its partitions and the
//! group offsets it committed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use model::{PartitionId, ProducerEpoch, ProducerId, Timestamp};
use storage::txn::{ControlType, TxnMarker};

use super::peers::GROUP_OFFSETS_TOPIC;
use super::requests::{MarkerRequest, TxnPartitionResult};
use super::state::{EndPlan, TxnError, TxnMetadata, TxnState};
use crate::group::store::CommittedOffset;
use crate::group_slots::Coordinator;
use crate::metadata_records::NodeId;

/// How long a transaction marker on a replicated partition waits for its
/// in-sync replicas before the ending fails (and is retried).
const MARKER_COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
use crate::{now_ms, Broker, Error, Partition};

/// Partitions (topic, index) grouped by the broker leading them.
type ByLeader = BTreeMap<NodeId, Vec<(String, i32)>>;

/// A transactional id as ListTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionListing {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its state.
    pub state: TxnState,
}

impl Broker {
    /// The coordinator of `id`'s transactions, which must be this broker
    /// (in a cluster, the leader of its slot; NOT_COORDINATOR elsewhere).
    fn coordinator_for(&self, id: &str) -> Result<Coordinator, Error> {
        self.coordinator(id).map_err(|e| match e {
            Error::NotCoordinator(_) => TxnError::NotCoordinator(id.to_string()).into(),
            other => other,
        })
    }

    /// InitProducerId with a transactional id: a new id gets a producer id
    /// at epoch 0; a known one the next epoch, which fences its earlier
    /// producers, and an open transaction is aborted first (Kafka's
    /// zombie fencing). With `current` (KIP-360: the producer id and epoch
    /// the caller had), only that producer's own epoch may be bumped.
    /// Returns the producer id and epoch.
    pub fn init_transactional_producer(
        &self,
        id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
    ) -> Result<(ProducerId, ProducerEpoch), Error> {
        let coordinator = self.coordinator_for(id)?;
        let answer = self.init_transactional_producer_in(&coordinator, id, timeout_ms, current)?;
        // Answered once the slot's in-sync replicas have it: a new
        // coordinator fences with the epoch this producer was given.
        coordinator.committed_blocking()?;
        Ok(answer)
    }

    fn init_transactional_producer_in(
        &self,
        coordinator: &Coordinator,
        id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
    ) -> Result<(ProducerId, ProducerEpoch), Error> {
        let txns = coordinator.transactions();
        let max = self.config().transaction_max_timeout_ms();
        if timeout_ms <= 0 || i64::from(timeout_ms) > max {
            return Err(TxnError::InvalidTimeout(timeout_ms, max).into());
        }
        let mut current = current.filter(|(p, _)| *p >= 0);
        let _ending = txns.ending(id);
        loop {
            let now = now_ms().0;
            // Decided and persisted under one guard: nothing the old
            // producer does can slip in between.
            let mut d = txns.decide();
            let prepared = match d.get(id) {
                None => {
                    if current.is_some() {
                        return Err(TxnError::InvalidProducerIdMapping(id.to_string()).into());
                    }
                    let m = TxnMetadata::new(self.next_producer_id()?.0, timeout_ms, now);
                    let answer = (ProducerId(m.producer_id), ProducerEpoch(m.producer_epoch));
                    d.persist(id, m)?;
                    return Ok(answer);
                }
                Some(m) => {
                    // Checked once: a round after this call's own fencing
                    // sees the epoch it bumped.
                    if let Some((p, e)) = current.take() {
                        m.check_producer(id, p, e)?;
                    }
                    match m.state {
                        // A crash left markers unwritten: finish them first.
                        s if s.is_prepared() => m,
                        TxnState::Ongoing => {
                            let fenced = m.fence_and_abort(now);
                            d.persist(id, fenced.clone())?;
                            fenced
                        }
                        _ => {
                            let next = self.bump(m, timeout_ms, now)?;
                            let answer = (
                                ProducerId(next.producer_id),
                                ProducerEpoch(next.producer_epoch),
                            );
                            d.persist(id, next)?;
                            return Ok(answer);
                        }
                    }
                }
            };
            drop(d);
            // Prepared on the slot's in-sync replicas before any marker
            // (as EndTxn), then completed: the next round bumps the epoch
            // again.
            coordinator.committed_blocking()?;
            self.finish(coordinator, id, &prepared, now)?;
        }
    }

    /// Writes a prepared transaction's markers and persists it completed.
    /// The caller holds `id`'s ending lock; no decision is held while the markers
    /// are written (the group coordinator's lock is taken to commit
    /// offsets, and its log compaction waits on decisions under its own).
    fn finish(
        &self,
        coordinator: &Coordinator,
        id: &str,
        prepared: &TxnMetadata,
        now: i64,
    ) -> Result<TxnMetadata, Error> {
        let done = self.write_markers(prepared, coordinator.epoch(), now)?;
        coordinator
            .transactions()
            .decide()
            .persist(id, done.clone())?;
        Ok(done)
    }

    fn bump(&self, m: TxnMetadata, timeout_ms: i32, now: i64) -> Result<TxnMetadata, Error> {
        let mut fresh = None;
        if m.producer_epoch >= i16::MAX - 1 {
            fresh = Some(self.next_producer_id()?.0);
        }
        Ok(m.next_epoch(timeout_ms, now, || fresh.unwrap_or(m.producer_id)))
    }

    /// AddPartitionsToTxn: each partition joins the transaction if it
    /// exists; if any does not, none joins (Kafka answers the others
    /// OPERATION_NOT_ATTEMPTED). A refusal of the whole request is `Err`.
    pub fn add_partitions_to_txn(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<TxnPartitionResult>, Error> {
        let coordinator = self.coordinator_for(id)?;
        let txns = coordinator.transactions();
        let results: Vec<TxnPartitionResult> = partitions
            .iter()
            .map(|(t, p)| {
                let r = self.resolve_topic_name(t).and_then(|topic| {
                    // The internal topics are the broker's own.
                    topic.ensure_client_writable()?;
                    exists(&topic, *p)
                });
                ((t.clone(), *p), r)
            })
            .collect();
        if results.iter().any(|(_, r)| r.is_err()) {
            return Ok(results
                .into_iter()
                .map(|(tp, r)| {
                    let r = match r {
                        Ok(()) => Err(Error::OperationNotAttempted),
                        Err(e) => Err(e),
                    };
                    (tp, r)
                })
                .collect());
        }
        let mut d = txns.decide();
        let m = d.known(id)?;
        let next = m.add_partitions(id, producer_id, epoch, partitions, now_ms().0)?;
        if next != m {
            d.persist(id, next)?;
        }
        drop(d);
        coordinator.committed_blocking()?;
        Ok(results)
    }

    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890): whether each of
    /// `partitions` is in `id`'s open transaction, changing nothing. A
    /// refusal of the whole transaction (unknown id, another producer, an
    /// ending in progress) is `Err`.
    pub fn verify_txn_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<TxnPartitionResult>, Error> {
        if id.is_empty() {
            return Err(Error::InvalidRequest("an empty transactional id".into()));
        }
        let coordinator = self.coordinator_for(id)?;
        let txns = coordinator.transactions();
        let m = txns.known(id)?;
        let slot = |g: &str| self.slot_of(g);
        let has_slots = slot("").is_some();
        Ok(
            m.verify_partitions(id, producer_id, epoch, partitions, slot)?
                .into_iter()
                .map(|((t, p), r)| {
                    // A partition that does not exist is unknown, as Kafka
                    // checks the metadata first; a group slot is no topic's.
                    let exists = if t == GROUP_OFFSETS_TOPIC && has_slots {
                        Ok(())
                    } else {
                        self.resolve_topic_name(&t)
                            .and_then(|topic| exists(&topic, p))
                    };
                    let r = exists.and_then(|()| r.map_err(Error::from));
                    ((t, p), r)
                })
                .collect(),
        )
    }

    /// Appends a transactional Produce's batches to `partition` of `topic`
    /// if every batch's producer is `id`'s current one with this partition
    /// in its open transaction (Kafka's KIP-890 verification). The check
    /// and the append are one step: no transaction is prepared between
    /// them, so no batch can land after its transaction's marker.
    pub fn append_transactional(
        &self,
        id: &str,
        topic: &str,
        partition: &Partition,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<(storage::AppendOutcome, storage::SyncWork), Error> {
        if !self.coordinates(id) {
            return append_verified_elsewhere(partition, batches, now);
        }
        let coordinator = self.coordinator_for(id)?;
        let txns = coordinator.transactions();
        let state = txns.read();
        let m = state
            .get(id)
            .ok_or_else(|| TxnError::InvalidProducerIdMapping(id.to_string()))?;
        let (producer, epoch) = transactional_producer(partition, batches)?;
        // Produce answers an old epoch INVALID_PRODUCER_EPOCH (abortable
        // for the client), never PRODUCER_FENCED.
        m.check_producer(id, producer.0, epoch.0)
            .map_err(|e| match e {
                TxnError::ProducerFenced { sent, current } => {
                    partition.storage_error(storage::Error::InvalidProducerEpoch {
                        producer_id: producer,
                        epoch: ProducerEpoch(sent),
                        current_epoch: ProducerEpoch(current),
                    })
                }
                other => other.into(),
            })?;
        let p = partition.tp.partition.0;
        if m.state != TxnState::Ongoing || !m.partitions.contains(&(topic.to_string(), p)) {
            return Err(TxnError::InvalidTxnState(format!(
                "{topic}-{p} was not added to the transaction of {id:?}"
            ))
            .into());
        }
        // The guard is held across the append.
        let appended = partition.append_transactional_deferred(batches, now);
        drop(state);
        appended
    }

    /// AddOffsetsToTxn: `group`'s offsets will commit with the transaction.
    pub fn add_offsets_to_txn(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), Error> {
        let coordinator = self.coordinator_for(id)?;
        let txns = coordinator.transactions();
        let mut d = txns.decide();
        let m = d.known(id)?;
        let next = m.add_group(id, producer_id, epoch, group, now_ms().0)?;
        if next != m {
            d.persist(id, next)?;
        }
        drop(d);
        coordinator.committed_blocking()
    }

    /// Whether `producer_id` at `epoch` is `id`'s current producer (what
    /// TxnOffsetCommit checks before the group, so a fenced zombie hears
    /// PRODUCER_FENCED rather than a group error).
    /// With the coordinator on another broker, it is asked whether the
    /// group's slot is in that producer's open transaction.
    pub fn check_txn_producer(
        &self,
        id: &str,
        group: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<(), Error> {
        if !self.coordinates(id) {
            return self.check_remote_group(id, group, producer_id, epoch);
        }
        // Here: the producer now, the transaction's state when the offsets
        // are staged (after the group's membership is checked, as before).
        let m = self.coordinator_for(id)?.transactions().known(id)?;
        Ok(m.check_producer(id, producer_id, epoch)?)
    }

    /// TxnOffsetCommit: offsets of `group` committed in the transaction;
    /// they become the group's committed offsets if it commits.
    pub fn txn_offset_commit(
        &self,
        id: &str,
        group: &str,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), Error> {
        // Kept by the group's coordinator until the transaction's marker
        // for the group's slot commits or drops them, wherever the
        // transaction's coordinator is: both may move independently. The
        // group's slot must be in the open transaction: checked here when
        // this broker coordinates it (by `check_txn_producer` otherwise).
        if self.coordinates(id) {
            self.check_remote_group(id, group, producer_id, epoch)?;
        }
        self.stage_txn_offsets(id, group, producer_id, epoch, offsets)
    }

    /// EndTxn: commits or aborts the open transaction: the prepared state
    /// is persisted, the markers written (and, on commit, the staged group
    /// offsets committed), then the completed state persisted.
    pub fn end_txn(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), Error> {
        let coordinator = self.coordinator_for(id)?;
        let txns = coordinator.transactions();
        let now = now_ms().0;
        let _ending = txns.ending(id);
        let prepared = {
            let mut d = txns.decide();
            let m = d.known(id)?;
            let prepared = match m.prepare_end(id, producer_id, epoch, commit, now)? {
                EndPlan::Done => return Ok(()),
                EndPlan::Write(p) => p,
            };
            d.persist(id, prepared.clone())?;
            prepared
        };
        // Prepared on the slot's in-sync replicas before any marker: a new
        // coordinator finishes what this one started.
        coordinator.committed_blocking()?;
        self.finish(&coordinator, id, &prepared, now)?;
        coordinator.committed_blocking()
    }

    /// Writes the markers of a prepared transaction to its partitions (and
    /// commits its staged offsets if it commits); the completed state.
    /// A partition deleted meanwhile needs no marker.
    fn write_markers(
        &self,
        prepared: &TxnMetadata,
        coordinator_epoch: i32,
        now: i64,
    ) -> Result<TxnMetadata, Error> {
        let control = match prepared.state {
            TxnState::PrepareCommit => ControlType::Commit,
            TxnState::PrepareAbort => ControlType::Abort,
            _ => return Ok(prepared.clone()),
        };
        let marker = TxnMarker {
            producer_id: ProducerId(prepared.producer_id),
            producer_epoch: ProducerEpoch(prepared.producer_epoch),
            control,
            // The leader epoch of the id's group-log slot (0 where
            // coordinators never move): a coordinator that lost the slot
            // cannot end the transaction after its successor did
            // (TRANSACTION_COORDINATOR_FENCED).
            coordinator_epoch,
        };
        let mut work = Vec::new();
        let (hosted, mut remote) = self.split_by_leader(&prepared.partitions);
        for partition in hosted {
            // Nothing of the transaction here (never written, or a marker
            // already written by an earlier attempt): no marker, so a
            // retried ending does not pile up control batches.
            if let Some(w) = partition.write_marker_if_open(&marker, Timestamp(now), |_| Ok(()))? {
                work.push((partition, w));
            }
        }
        for (partition, w) in work {
            partition
                .log()
                .complete(w)
                .map_err(|e| partition.storage_error(e))?;
            // Replicated before the transaction is complete: a marker only
            // the old leader had would leave the transaction open on the
            // new one forever (Kafka writes markers with acks=all).
            partition.wait_all_committed_blocking(MARKER_COMMIT_TIMEOUT)?;
        }
        // On disk before the completed state is: after a power loss the
        // coordinator never remembers an ending whose marker is gone, which
        // would leave the partition's transaction open forever.
        self.flush_partitions(prepared)?;
        // Each group's coordinator keeps the offsets staged for it: the
        // marker for the group's slot ends them, written here when this
        // broker leads the slot, sent to its leader otherwise.
        let mut local_slots = BTreeSet::new();
        for group in prepared.groups.keys() {
            let slot = self.group_slot(group)?;
            if self.slot_coordinator(slot).is_ok() {
                local_slots.insert(slot);
                continue;
            }
            // Placed, live or not: one whose broker is down fails on its
            // own below, and the others still get their markers.
            let node = self.placed_coordinator(group)?;
            let entry = remote.entry(node).or_default();
            let key = (GROUP_OFFSETS_TOPIC.to_string(), slot);
            if !entry.contains(&key) {
                entry.push(key);
            }
        }
        // The other brokers flush their markers before they answer.
        let remote_marker = MarkerRequest {
            producer_id: prepared.producer_id,
            producer_epoch: prepared.remote_marker_epoch(),
            commit: control == ControlType::Commit,
            coordinator_epoch,
            partitions: Vec::new(),
        };
        self.write_remote_markers(remote, &remote_marker)?;
        for slot in local_slots {
            self.end_staged_offsets(
                remote_marker.producer_id,
                remote_marker.producer_epoch,
                remote_marker.commit,
                slot,
            )?;
        }
        if control == ControlType::Commit {
            // Offsets an earlier version kept in the transaction itself
            // (its group's coordinator was this broker then).
            for (group, offsets) in &prepared.groups {
                let offsets: Vec<(String, i32, CommittedOffset)> = offsets
                    .iter()
                    .map(|((t, p), o)| (t.clone(), *p, o.clone()))
                    .collect();
                if !offsets.is_empty() {
                    let c = self.coordinator(group)?;
                    c.groups().commit_transactional_offsets(group, offsets)?;
                    c.committed_blocking()?;
                }
            }
        }
        Ok(prepared.complete(now))
    }

    /// WriteTxnMarkers: ends `producer_id`'s transaction on each of
    /// `partitions` (hosted here) with a commit or abort marker, as a
    /// transaction coordinator asks, or an operator ending a hanging
    /// transaction (`kafka-transactions abort`). A partition where that
    /// producer has no open transaction gets no marker and succeeds, so a
    /// retried request changes nothing; storage refuses an older producer
    /// epoch (INVALID_PRODUCER_EPOCH) or coordinator epoch
    /// (TRANSACTION_COORDINATOR_FENCED). Each marker is on disk (as the
    /// log's flush policy has it) before it is answered.
    pub fn write_txn_markers(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        partitions: &[(String, i32)],
    ) -> Vec<TxnPartitionResult> {
        let marker = TxnMarker {
            producer_id: ProducerId(producer_id),
            producer_epoch: ProducerEpoch(producer_epoch),
            control: if commit {
                ControlType::Commit
            } else {
                ControlType::Abort
            },
            coordinator_epoch,
        };
        let now = Timestamp(now_ms().0);
        // What this broker's own coordinator knows of the producer: its
        // live transaction is its to end, and its markers must stay valid.
        let known = self
            .coordinators_here()
            .iter()
            .find_map(|c| c.transactions().of_producer(producer_id));
        let max_coordinator_epoch = self.max_coordinator_epoch();
        partitions
            .iter()
            .map(|(t, p)| {
                if t == GROUP_OFFSETS_TOPIC {
                    // A transaction coordinator on another broker ends the
                    // offsets staged here for the groups of slot `p`.
                    let r = self.end_staged_offsets(producer_id, producer_epoch, commit, *p);
                    return ((t.clone(), *p), r);
                }
                let r = self.resolve_topic_name(t).and_then(|topic| {
                    let partition = topic.partition(PartitionId(*p))?;
                    let check = |epoch| {
                        check_foreign_marker(
                            &marker,
                            Some(epoch),
                            known.as_ref(),
                            max_coordinator_epoch,
                            t,
                            *p,
                        )
                    };
                    let Some(w) = partition.write_marker_if_open(&marker, now, check)? else {
                        return Ok(());
                    };
                    partition
                        .log()
                        .complete(w)
                        .map_err(|e| partition.storage_error(e))?;
                    // On disk and on the in-sync replicas before it is
                    // answered: a coordinator then records the transaction
                    // complete.
                    partition
                        .log()
                        .flush()
                        .map_err(|e| partition.storage_error(e))?;
                    partition.wait_all_committed_blocking(MARKER_COMMIT_TIMEOUT)
                });
                if let Err(e) = &r {
                    tracing::debug!(topic = %t, partition = p, producer_id, "transaction marker refused: {e}");
                }
                ((t.clone(), *p), r)
            })
            .collect()
    }

    /// The partitions of `partitions` hosted here, and the others by the
    /// broker leading them (a partition deleted meanwhile is in neither).
    fn split_by_leader(
        &self,
        partitions: &BTreeSet<(String, i32)>,
    ) -> (Vec<Arc<Partition>>, ByLeader) {
        let mut hosted = Vec::new();
        let mut remote = ByLeader::new();
        for (t, p) in partitions {
            let Some(topic) = self.topic(t) else { continue };
            match topic.partition(PartitionId(*p)) {
                Ok(partition) => hosted.push(partition.clone()),
                Err(Error::PartitionNotHosted { leader, .. }) => {
                    remote.entry(leader).or_default().push((t.clone(), *p))
                }
                Err(_) => {}
            }
        }
        (hosted, remote)
    }

    /// The partitions of `partitions` hosted here (one deleted meanwhile,
    /// or led elsewhere, is skipped).
    fn hosted(&self, partitions: &BTreeSet<(String, i32)>) -> Vec<Arc<Partition>> {
        partitions
            .iter()
            .filter_map(|(t, p)| Some(self.topic(t)?.partition(PartitionId(*p)).ok()?.clone()))
            .collect()
    }

    /// Flushes every partition of `prepared` hosted here, whether or not
    /// this attempt wrote its marker (an earlier one may have, and failed
    /// before its flush).
    fn flush_partitions(&self, prepared: &TxnMetadata) -> Result<(), Error> {
        for partition in self.hosted(&prepared.partitions) {
            partition
                .log()
                .flush()
                .map_err(|e| partition.storage_error(e))?;
        }
        Ok(())
    }

    /// Finishes transactions a crash left prepared (their markers may be
    /// partly written; writing one twice is harmless) and aborts those open
    /// past their timeout, fencing their producers. Returns how many ended.
    pub fn complete_prepared_transactions(&self) -> usize {
        self.complete_prepared_transactions_while(|| true)
    }

    /// [`Broker::complete_prepared_transactions`], stopping before the next
    /// transaction once `go_on` says no (each may wait for another broker,
    /// so a shutdown does not wait for them all).
    pub fn complete_prepared_transactions_while(&self, go_on: impl Fn() -> bool) -> usize {
        self.coordinators_here()
            .iter()
            .map(|c| self.complete_prepared_in(c, &go_on))
            .sum()
    }

    /// [`Broker::complete_prepared_transactions_while`] for the
    /// transactions of one coordinator.
    fn complete_prepared_in(&self, coordinator: &Coordinator, go_on: &impl Fn() -> bool) -> usize {
        let txns = coordinator.transactions();
        let now = now_ms().0;
        let due: Vec<(String, TxnMetadata)> = txns
            .all()
            .into_iter()
            .filter(|(_, m)| m.state.is_prepared() || m.expired(now))
            .collect();
        let mut ended = 0;
        for (id, seen) in due {
            if !go_on() {
                break;
            }
            let _ending = txns.ending(&id);
            let prepared = {
                let mut d = txns.decide();
                // Decided again on the state as it is now: the producer
                // may have ended or moved the transaction meanwhile.
                match d.get(&id) {
                    Some(m) if m.state.is_prepared() => m,
                    Some(m) if m == seen && m.expired(now) => {
                        tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
                        let fenced = m.fence_and_abort(now);
                        if let Err(e) = d.persist(&id, fenced.clone()) {
                            tracing::warn!(transactional_id = %id, "cannot abort: {e}");
                            continue;
                        }
                        fenced
                    }
                    _ => continue,
                }
            };
            let finished = coordinator
                .committed_blocking()
                .and_then(|()| self.finish(coordinator, &id, &prepared, now))
                .and_then(|_| coordinator.committed_blocking());
            match finished {
                Ok(()) => ended += 1,
                Err(e) => {
                    tracing::warn!(transactional_id = %id, "cannot complete the transaction yet: {e}")
                }
            }
        }
        ended
    }

    /// The partitions of `group` with offsets staged by a transaction that
    /// has not ended (KIP-447: OffsetFetch with `require_stable` answers
    /// UNSTABLE_OFFSET_COMMIT for them, and the consumer retries).
    pub fn pending_txn_offsets(&self, group: &str) -> BTreeSet<(String, i32)> {
        let mut staged = self.staged_offsets_of(group);
        for c in self.coordinators_here() {
            let state = c.transactions().read();
            staged.extend(
                state
                    .values()
                    .filter(|m| m.state == TxnState::Ongoing || m.state.is_prepared())
                    .filter_map(|m| m.groups.get(group))
                    .flat_map(|offsets| offsets.keys().cloned()),
            );
        }
        staged
    }

    /// DescribeTransactions: the state of each id (`None`: unknown).
    pub fn describe_transactions(&self, ids: &[String]) -> Result<Vec<Option<TxnMetadata>>, Error> {
        Ok(ids
            .iter()
            .map(|id| {
                self.coordinator(id)
                    .ok()
                    .and_then(|c| c.transactions().get(id))
            })
            .collect())
    }

    /// ListTransactions: the ids in one of `states` (all if empty) whose
    /// producer is one of `producers` (all if empty).
    pub fn list_transactions(
        &self,
        states: &[String],
        producers: &[i64],
    ) -> Result<Vec<TransactionListing>, Error> {
        Ok(self
            .coordinators_here()
            .iter()
            .flat_map(|c| c.transactions().all())
            .filter(|(_, m)| states.is_empty() || states.iter().any(|s| s == m.state.name()))
            .filter(|(_, m)| producers.is_empty() || producers.contains(&m.producer_id))
            .map(|(id, m)| TransactionListing {
                transactional_id: id,
                producer_id: m.producer_id,
                state: m.state,
            })
            .collect())
    }
}

/// Checks a marker from outside (WriteTxnMarkers) against what this
/// broker's coordinator and log know of its producer: a transaction the
/// coordinator still has open or is ending on this partition is its own to
/// end (ending it here would split it); and the marker may not carry a
/// newer producer epoch than the coordinator or the log knows, nor a
/// coordinator epoch above any coordinator's (the highest leader epoch of
/// a group-log slot; 0 where coordinators never move), either of which
/// would fence the coordinator's own markers for good.
fn check_foreign_marker(
    marker: &TxnMarker,
    log_epoch: Option<ProducerEpoch>,
    known: Option<&(String, TxnMetadata)>,
    max_coordinator_epoch: i32,
    topic: &str,
    partition: i32,
) -> Result<(), Error> {
    if marker.coordinator_epoch > max_coordinator_epoch {
        return Err(Error::InvalidRequest(format!(
            "coordinator epoch {} is above any transaction coordinator's epoch ({max_coordinator_epoch})",
            marker.coordinator_epoch
        )));
    }
    let mut newest = log_epoch.map_or(-1, |e| e.0);
    if let Some((id, m)) = known {
        newest = newest.max(m.producer_epoch);
        let here = m.partitions.contains(&(topic.to_string(), partition));
        if m.state.is_prepared() && here {
            return Err(TxnError::ConcurrentTransactions(id.clone()).into());
        }
        if m.state == TxnState::Ongoing && here {
            return Err(TxnError::InvalidTxnState(format!(
                "{topic}-{partition} is in the open transaction of {id:?}, which its producer or its timeout ends"
            ))
            .into());
        }
    }
    if marker.producer_epoch.0 > newest {
        return Err(Error::InvalidRequest(format!(
            "producer epoch {} is newer than any this broker knows for producer {} ({newest})",
            marker.producer_epoch.0, marker.producer_id.0
        )));
    }
    Ok(())
}

/// Whether `topic` has partition `p`, here or on another broker.
fn exists(topic: &crate::Topic, p: i32) -> Result<(), Error> {
    match topic.partition(PartitionId(p)) {
        Ok(_) | Err(Error::PartitionNotHosted { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A transactional append whose coordinator is another broker: every
/// batch of one producer and epoch, let in once that coordinator said the
/// partition is in the producer's open transaction.
fn append_verified_elsewhere(
    partition: &Partition,
    batches: &[u8],
    now: Timestamp,
) -> Result<(storage::AppendOutcome, storage::SyncWork), Error> {
    let (producer, epoch) = transactional_producer(partition, batches)?;
    partition.append_verified_elsewhere(producer, epoch, batches, now)
}

/// The producer and epoch of a transactional Produce's batches (all the
/// same, each transactional).
pub fn transactional_producer(
    partition: &Partition,
    batches: &[u8],
) -> Result<(ProducerId, ProducerEpoch), Error> {
    let mut at = 0;
    let mut producer = None;
    while at < batches.len() {
        let h = storage::BatchHeader::parse(&batches[at..])
            .map_err(|e| partition.storage_error(storage::Error::Batch(e)))?;
        if !h.is_transactional() {
            return Err(Error::InvalidRequest(
                "a transactional Produce with a batch that is not transactional".into(),
            ));
        }
        let this = (h.producer_id, h.producer_epoch);
        if producer.is_some_and(|p| p != this) {
            return Err(Error::InvalidRequest(
                "a transactional Produce with batches of several producers".into(),
            ));
        }
        producer = Some(this);
        at += h.total_size();
    }
    producer.ok_or_else(|| Error::InvalidRequest("a Produce without batches".into()))
}
