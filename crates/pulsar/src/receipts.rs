//! Send receipts that wait for replication. A message on a replicated
//! partition is acknowledged once the in-sync replicas have it (as Pulsar
//! acknowledges after its write quorum); that wait must not hold the
//! connection's next commands, or a producer's pipelined sends would be
//! answered one replication round trip at a time. The answers still leave
//! in the order the sends came: clients match receipts to their pending
//! messages in order, per producer.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use broker::replica::CommitWait;
use broker::Partition;
use magnetar_pulsar_wire::proto::CommandSendError;
use magnetar_pulsar_wire::Command;
use parking_lot::Mutex;

use crate::error::PulsarError;

/// What a send is answered with once its turn comes.
// Boxing the command would cost an allocation per send; a receipt lives
// on the stack or inside its (boxed) wait.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Receipt {
    /// A command for the client (the receipt, or a send error).
    Reply(Command),
    /// The partition is led elsewhere now: close this producer (the client
    /// looks it up again and resends what was not acknowledged).
    Moved(u64),
}

type Waiting = Pin<Box<dyn Future<Output = Receipt> + Send>>;

/// A connection's answers to sends, in the order the sends came.
#[derive(Default)]
pub(crate) struct Receipts {
    // Only ever reached through `&mut self` (never locked): the mutex just
    // lets a `&Session` cross threads while the waits themselves are not
    // `Sync`.
    queue: Mutex<VecDeque<Waiting>>,
}

impl Receipts {
    /// The most answers a connection keeps waiting; a send beyond them
    /// waits for the oldest first (the connection reads no further).
    pub(crate) const MAX: usize = 1024;

    /// Whether no answer waits.
    pub(crate) fn is_empty(&mut self) -> bool {
        self.queue.get_mut().is_empty()
    }

    /// How many answers wait.
    pub(crate) fn len(&mut self) -> usize {
        self.queue.get_mut().len()
    }

    /// Queues an answer known now, behind the waiting ones.
    pub(crate) fn push_ready(&mut self, receipt: Receipt) {
        self.push(std::future::ready(receipt));
    }

    /// Queues an answer that `waiting` gives.
    pub(crate) fn push(&mut self, waiting: impl Future<Output = Receipt> + Send + 'static) {
        self.queue.get_mut().push_back(Box::pin(waiting));
    }

    /// The oldest answer once it is ready; never completes while none
    /// waits. Cancel-safe: a cancelled wait leaves the answer queued.
    pub(crate) async fn next(&mut self) -> Receipt {
        let queue = self.queue.get_mut();
        let Some(front) = queue.front_mut() else {
            return std::future::pending().await;
        };
        let receipt = front.await;
        queue.pop_front();
        receipt
    }
}

/// The answer to a send of `producer_id` whose commit `wait` (registered
/// when the send was stored, so a later change of leader epoch cannot
/// fail a send already committed) awaits on `partition`: `receipt` once
/// the in-sync replicas have its records (by `deadline`), an error
/// otherwise, or the producer's closing if the partition is led elsewhere
/// now.
pub(crate) async fn committed(
    partition: Arc<Partition>,
    producer_id: u64,
    sequence_id: u64,
    wait: CommitWait,
    deadline: tokio::time::Instant,
    receipt: Command,
) -> Receipt {
    match partition.committed(wait, deadline).await {
        Ok(()) => Receipt::Reply(receipt),
        Err(_) if !partition.leads() => Receipt::Moved(producer_id),
        Err(e) => {
            let e = PulsarError::from(e);
            Receipt::Reply(
                CommandSendError {
                    producer_id,
                    sequence_id,
                    error: e.code as i32,
                    message: e.message,
                }
                .into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use magnetar_pulsar_wire::proto::CommandPong;

    fn pong() -> Receipt {
        Receipt::Reply(CommandPong {}.into())
    }

    #[tokio::test]
    async fn answers_leave_in_order_and_a_cancelled_wait_keeps_its_answer() {
        let mut r = Receipts::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        r.push(async move {
            let _ = rx.await;
            Receipt::Moved(1)
        });
        r.push_ready(pong());
        assert_eq!(r.len(), 2);
        // The first is not ready: the second waits behind it.
        let waited = tokio::time::timeout(std::time::Duration::from_millis(20), r.next()).await;
        assert!(waited.is_err());
        assert_eq!(r.len(), 2, "a cancelled wait keeps its answer");
        tx.send(()).unwrap();
        assert!(matches!(r.next().await, Receipt::Moved(1)));
        assert!(matches!(r.next().await, Receipt::Reply(_)));
        assert!(r.is_empty());
        let none = tokio::time::timeout(std::time::Duration::from_millis(20), r.next()).await;
        assert!(none.is_err(), "nothing waits: no answer");
    }
}
