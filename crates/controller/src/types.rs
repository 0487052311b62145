//! openraft's type configuration for a [`StateMachine`], and the async
//! runtime binding (tokio, with a seedable election-timeout RNG).

use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use openraft::async_runtime::{AsyncOneshotSendExt, AsyncRuntime};
use openraft::{OptionalSend, RaftTypeConfig, TokioInstant};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use crate::StateMachine;

/// A controller node's id (Kafka's `node.id`).
pub type NodeId = u64;

/// A node as openraft knows it: its controller address.
pub type Node = openraft::BasicNode;

/// openraft's type configuration for the state machine `S`: records are
/// `S::Record`, responses `Option<S::Response>` (`None` for openraft's own
/// blank and membership entries), snapshots whole byte vectors.
pub struct TypeConfig<S>(PhantomData<fn() -> S>);

impl<S> fmt::Debug for TypeConfig<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TypeConfig")
    }
}
impl<S> Clone for TypeConfig<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for TypeConfig<S> {}
impl<S> Default for TypeConfig<S> {
    fn default() -> Self {
        TypeConfig(PhantomData)
    }
}
impl<S> PartialEq for TypeConfig<S> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<S> Eq for TypeConfig<S> {}
impl<S> PartialOrd for TypeConfig<S> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<S> Ord for TypeConfig<S> {
    fn cmp(&self, _: &Self) -> Ordering {
        Ordering::Equal
    }
}

impl<S: StateMachine> RaftTypeConfig for TypeConfig<S> {
    type D = S::Record;
    type R = Option<S::Response>;
    type NodeId = NodeId;
    type Node = Node;
    type Entry = openraft::Entry<Self>;
    type SnapshotData = Vec<u8>;
    type AsyncRuntime = ControllerRuntime;
    type Responder = openraft::impls::OneshotResponder<Self>;
}

/// A log entry of the controller for `S`.
pub type Entry<S> = openraft::Entry<TypeConfig<S>>;
/// The openraft handle for `S`.
pub type Raft<S> = openraft::Raft<TypeConfig<S>>;
/// A log id (leader term and node, index).
pub type LogId = openraft::LogId<NodeId>;
/// A vote (term, candidate, committed).
pub type Vote = openraft::Vote<NodeId>;
/// Snapshot metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// A membership with the log id it was stored at.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// openraft's storage error.
pub type StorageError = openraft::StorageError<NodeId>;

thread_local! {
    static ELECTION_RNG: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Seeds the election-timeout random generator of the current thread, for
/// reproducible simulations (all simulated nodes run on one thread). Without
/// it each thread seeds itself from the OS.
pub fn seed_election_rng(seed: u64) {
    ELECTION_RNG.with(|r| *r.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
}

/// The thread's election-timeout random generator (see [`seed_election_rng`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ElectionRng;

impl ElectionRng {
    fn with<R>(f: impl FnOnce(&mut StdRng) -> R) -> R {
        ELECTION_RNG.with(|r| {
            let mut r = r.borrow_mut();
            let rng = r.get_or_insert_with(StdRng::from_entropy);
            f(rng)
        })
    }
}

impl RngCore for ElectionRng {
    fn next_u32(&mut self) -> u32 {
        Self::with(|r| r.next_u32())
    }
    fn next_u64(&mut self) -> u64 {
        Self::with(|r| r.next_u64())
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        Self::with(|r| r.fill_bytes(dest))
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        Self::with(|r| r.try_fill_bytes(dest))
    }
}

/// openraft's runtime: tokio, as openraft's own `TokioRuntime`, except that
/// election timeouts come from [`ElectionRng`] so simulations can seed them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ControllerRuntime;

/// The one-shot sender of [`ControllerRuntime`].
pub struct OneshotSender<T>(tokio::sync::oneshot::Sender<T>);

impl<T> fmt::Debug for OneshotSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OneshotSender")
    }
}

impl<T: OptionalSend> AsyncOneshotSendExt<T> for OneshotSender<T> {
    fn send(self, t: T) -> Result<(), T> {
        self.0.send(t)
    }
}

impl AsyncRuntime for ControllerRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = tokio::task::JoinHandle<T>;
    type Sleep = tokio::time::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = tokio::time::error::Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = tokio::time::Timeout<T>;
    type ThreadLocalRng = ElectionRng;
    type OneshotSender<T: OptionalSend> = OneshotSender<T>;
    type OneshotReceiverError = tokio::sync::oneshot::error::RecvError;
    type OneshotReceiver<T: OptionalSend> = tokio::sync::oneshot::Receiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        tokio::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        tokio::time::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        tokio::time::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        tokio::time::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        tokio::time::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        join_error.is_panic()
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        ElectionRng
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (OneshotSender(tx), rx)
    }
}
