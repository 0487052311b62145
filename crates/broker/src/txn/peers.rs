//! A transaction that spans the brokers of a cluster: its coordinator is
//! the broker of its transactional id's slot, its partitions' leaders and
//! its groups' coordinators may be others. What they ask of each other,
//! as Kafka's brokers do:
//!
//! - the coordinator ends the transaction on each other leader with
//!   WriteTxnMarkers, and on each other group coordinator with a marker
//!   for the group's `__consumer_offsets` slot, which commits or drops the
//!   offsets the group's coordinator staged;
//! - a leader, before the first transactional append of a producer to a
//!   partition, and a group coordinator, before staging offsets, ask the
//!   coordinator whether the partition (or the group's slot) is in that
//!   producer's open transaction (AddPartitionsToTxn `verify_only`,
//!   KIP-890).
//!
//! The broker core decides and the front end that speaks to other brokers
//! carries the requests ([`TxnPeers`], set at start-up).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use model::{ProducerEpoch, ProducerId};

use super::requests::TxnPartitionResult;
pub use super::requests::{MarkerRequest, PeerFuture, TxnPeers, VerifyRequest};
use super::TxnError;
use crate::metadata_records::NodeId;
use crate::{Broker, Error, Partition};

/// The internal topic whose partition numbers are the coordinator slots
/// (see [`super::state::GROUP_OFFSETS_TOPIC`]).
pub use super::state::GROUP_OFFSETS_TOPIC;

/// How long a request to another broker may take.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(10);

/// A partition whose transactional append waits for the coordinator's
/// word (see [`Broker::verify_transactional_appends`]).
#[derive(Debug, Clone)]
pub struct PendingAppend {
    /// The partition.
    pub partition: Arc<Partition>,
    /// The batches' producer.
    pub producer_id: ProducerId,
    /// Its epoch.
    pub producer_epoch: ProducerEpoch,
}

/// Verification guards' tokens: unique per process.
static NEXT_GUARD: AtomicU64 = AtomicU64::new(1);

/// A fresh verification guard token.
pub(crate) fn next_guard_token() -> u64 {
    NEXT_GUARD.fetch_add(1, Ordering::Relaxed)
}

impl Broker {
    /// Sets how requests reach other brokers (once, at start-up).
    pub fn set_txn_peers(&self, peers: Arc<dyn TxnPeers>) {
        let _ = self.txn_peers.set(peers);
    }

    /// The registration key of the listener other brokers are reached on
    /// (`inter.broker.listener.name`, else the first listener).
    pub fn inter_broker_listener(&self) -> String {
        let config = self.config();
        let named = config.string_value("inter.broker.listener.name");
        let name = if named.is_empty() {
            config
                .kafka_listeners()
                .ok()
                .and_then(|l| l.first().map(|l| l.name.clone()))
                .unwrap_or_else(|| "PLAINTEXT".to_string())
        } else {
            named.to_string()
        };
        crate::security::listeners::registry_key(&name)
    }

    /// Where broker `node` takes inter-broker requests; it must be live.
    pub(crate) fn peer_addr(&self, node: NodeId) -> Result<String, Error> {
        let key = self.inter_broker_listener();
        let view = self.cluster_view();
        match view.brokers.get(&node) {
            Some(b) if !b.fenced => b
                .endpoints
                .get(&key)
                .cloned()
                .ok_or_else(|| unavailable(format!("broker {node} has no {key} listener"))),
            _ => Err(unavailable(format!("broker {node} is not available"))),
        }
    }

    fn peers(&self) -> Result<Arc<dyn TxnPeers>, Error> {
        self.txn_peers
            .get()
            .cloned()
            .ok_or_else(|| unavailable("this broker cannot reach other brokers".into()))
    }

    /// Runs requests to other brokers from a blocking thread, each within
    /// [`PEER_TIMEOUT`], all at once; their answers in order.
    fn call_peers<T: Send + 'static>(
        &self,
        calls: Vec<(NodeId, PeerFuture<T>)>,
    ) -> Result<Vec<Result<T, Error>>, Error> {
        let link = self.cluster.link.clone();
        link.block_on(async move {
            let tasks: Vec<_> = calls
                .into_iter()
                .map(|(node, f)| {
                    tokio::spawn(async move {
                        match tokio::time::timeout(PEER_TIMEOUT, f).await {
                            Ok(r) => r,
                            Err(_) => Err(unavailable(format!(
                                "broker {node} did not answer within {} s",
                                PEER_TIMEOUT.as_secs()
                            ))),
                        }
                    })
                })
                .collect();
            let mut out = Vec::with_capacity(tasks.len());
            for t in tasks {
                out.push(t.await.unwrap_or_else(|e| Err(unavailable(e.to_string()))));
            }
            out
        })
    }

    /// Sends each broker of `remote` its markers, every reachable one
    /// even when another is down; the first refusal is the error (the
    /// transaction stays prepared and is ended again later). A partition
    /// deleted meanwhile needs no marker.
    pub(crate) fn write_remote_markers(
        &self,
        remote: BTreeMap<NodeId, Vec<(String, i32)>>,
        marker: &MarkerRequest,
    ) -> Result<(), Error> {
        if remote.is_empty() {
            return Ok(());
        }
        let peers = self.peers()?;
        let mut first_error = None;
        let mut calls = Vec::new();
        for (node, partitions) in remote {
            match self.peer_addr(node) {
                Ok(addr) => {
                    let req = MarkerRequest {
                        partitions,
                        ..marker.clone()
                    };
                    calls.push((node, peers.write_markers(addr, req)));
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for answer in self.call_peers(calls)? {
            let answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            for ((t, p), r) in answer {
                match r {
                    Ok(()) | Err(Error::UnknownTopic(_) | Error::UnknownPartition { .. }) => {}
                    Err(e) => {
                        first_error.get_or_insert(unavailable(format!(
                            "the transaction marker for {t}-{p} was refused: {e}"
                        )));
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The broker coordinating the group or transactional id `key`, from
    /// the slots as they are (nothing is placed or created here).
    pub(crate) fn placed_coordinator(&self, key: &str) -> Result<NodeId, Error> {
        self.coordinator_node(key)
            .ok_or_else(|| unavailable(format!("no coordinator is placed for {key:?}")))
    }

    /// The request asking `id`'s coordinator (another broker) whether
    /// each of `partitions` is in the open transaction of this producer.
    fn verify_call(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    ) -> Result<(NodeId, PeerFuture<Vec<TxnPartitionResult>>), Error> {
        let node = self.placed_coordinator(id)?;
        let addr = self.peer_addr(node)?;
        let req = VerifyRequest {
            transactional_id: id.to_string(),
            producer_id,
            producer_epoch,
            partitions,
        };
        Ok((node, self.peers()?.verify(addr, req)))
    }

    async fn verify_remotely(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<TxnPartitionResult>, Error> {
        let (node, call) = self.verify_call(id, producer_id, producer_epoch, partitions)?;
        match tokio::time::timeout(PEER_TIMEOUT, call).await {
            Ok(r) => r,
            Err(_) => Err(unavailable(format!(
                "the coordinator of {id:?}, broker {node}, did not answer within {} s",
                PEER_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Whether a transactional append of this producer to `partition`
    /// must first be checked with the transaction's coordinator: it is on
    /// another broker and the producer has no transaction open on the
    /// partition at this epoch (a later append of the same transaction
    /// needs no check: the marker that ends it closes it here).
    pub fn needs_txn_verification(
        &self,
        id: &str,
        partition: &Partition,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
    ) -> bool {
        !self.coordinates(id) && !partition.txn_open(producer_id, producer_epoch)
    }

    /// Checks with `id`'s coordinator, on another broker, that each
    /// partition of `pending` is in the producer's open transaction, so
    /// that its batches may be appended (KIP-890): a guard is set on the
    /// partition first and a marker written meanwhile clears it, so a
    /// verdict that a marker overtook lets nothing in. Each partition's
    /// verdict, in order (an `Ok` partition may now append).
    pub async fn verify_transactional_appends(
        &self,
        id: &str,
        pending: &[PendingAppend],
    ) -> Vec<Result<(), Error>> {
        let Some(first) = pending.first() else {
            return Vec::new();
        };
        let guards: Vec<u64> = pending
            .iter()
            .map(|p| {
                let token = next_guard_token();
                p.partition
                    .begin_txn_verification(p.producer_id, p.producer_epoch, token);
                token
            })
            .collect();
        let partitions = pending
            .iter()
            .map(|p| (p.partition.tp.topic.to_string(), p.partition.tp.partition.0))
            .collect();
        let answer = if pending
            .iter()
            .any(|p| p.producer_id != first.producer_id || p.producer_epoch != first.producer_epoch)
        {
            Err(Error::InvalidRequest(
                "a transactional Produce with batches of several producers".into(),
            ))
        } else {
            self.verify_remotely(id, first.producer_id.0, first.producer_epoch.0, partitions)
                .await
        };
        let verdicts = match answer {
            Ok(v) if v.len() == pending.len() => v,
            Ok(_) => {
                let e = unavailable("the coordinator answered another list".into());
                return abandon(pending, &guards, e);
            }
            Err(e) => return abandon(pending, &guards, e),
        };
        pending
            .iter()
            .zip(guards)
            .zip(verdicts)
            .map(|((p, token), (_, r))| {
                if let Err(e) = r {
                    p.partition.abandon_txn_verification(p.producer_id, token);
                    return Err(e);
                }
                if p.partition.finish_txn_verification(p.producer_id, token) {
                    Ok(())
                } else {
                    // A marker ended the transaction while it was checked.
                    Err(TxnError::ConcurrentTransactions(id.to_string()).into())
                }
            })
            .collect()
    }

    /// Asks `id`'s coordinator (this broker or another) whether `group`'s
    /// slot is in the producer's open transaction; the guarded form is
    /// [`Broker::check_remote_group`]. Blocking.
    pub(crate) fn verify_remote_group(
        &self,
        id: &str,
        group: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), Error> {
        let slot = self.group_slot(group)?;
        let partitions = vec![(GROUP_OFFSETS_TOPIC.to_string(), slot)];
        if self.coordinates(id) {
            // This broker coordinates the transaction too: asked here.
            let answer =
                self.verify_txn_partitions(id, producer_id, producer_epoch, &partitions)?;
            return match answer.into_iter().next() {
                Some((_, r)) => r,
                None => Err(unavailable("the coordinator answered nothing".into())),
            };
        }
        let call = self.verify_call(id, producer_id, producer_epoch, partitions)?;
        let answer = self.call_peers(vec![call])?.pop();
        let answer = answer.unwrap_or_else(|| Err(unavailable("no answer".into())))?;
        match answer.into_iter().next() {
            Some((_, r)) => r,
            None => Err(unavailable("the coordinator answered nothing".into())),
        }
    }

    /// The coordinator slot of `group` (its `__consumer_offsets` partition).
    pub(crate) fn group_slot(&self, group: &str) -> Result<i32, Error> {
        self.slot_of(group)
            .ok_or_else(|| unavailable(format!("no coordinator is placed for {group:?}")))
    }
}

/// COORDINATOR_NOT_AVAILABLE with why.
pub(crate) fn unavailable(why: String) -> Error {
    TxnError::CoordinatorNotAvailable(why).into()
}

/// Every check of `pending` failed with `e`: their guards go, and each
/// partition gets the error.
fn abandon(pending: &[PendingAppend], guards: &[u64], e: Error) -> Vec<Result<(), Error>> {
    let msg = e.to_string();
    pending
        .iter()
        .zip(guards)
        .map(|(p, token)| {
            p.partition.abandon_txn_verification(p.producer_id, *token);
            Err(copy_error(&e, &msg))
        })
        .collect()
}

/// The same refusal for each partition of a request refused as a whole.
fn copy_error(e: &Error, msg: &str) -> Error {
    match e {
        Error::Transaction(t) => Error::Transaction(t.clone()),
        Error::InvalidRequest(m) => Error::InvalidRequest(m.clone()),
        _ => unavailable(msg.to_string()),
    }
}
