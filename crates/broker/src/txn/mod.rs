//! The transaction coordinator (KIP-98): each transactional id's producer
//! id, epoch and open transaction, kept as records in the group log (one
//! record per id, as Kafka keeps them in `__transaction_state`), and the
//! requests that move them ([`state`] decides, [`ops`] persists, writes the
//! markers and answers).
//!
//! Every change is persisted before it is answered. Ending a transaction
//! persists the prepared state first, then writes the markers, then the
//! completed state, so a crash in between is finished at the next start
//! ([`crate::Broker::complete_prepared_transactions`]): the transaction
//! ends as it was asked to, never half committed.

mod ops;
pub mod peers;
mod requests;
pub mod staged;

pub use magnetar_coordinator::txn::{staged_store, state, store};

pub use ops::{transactional_producer, TransactionListing};
pub use peers::PendingAppend;
pub use requests::{MarkerRequest, PeerFuture, TxnPartitionResult, TxnPeers, VerifyRequest};
pub use state::{EndPlan, TxnError, TxnMetadata, TxnState};
pub use store::{Decider, Transactions};
