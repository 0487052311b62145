//! Transaction state (KIP-98) as pure decisions over records: each
//! transactional id's producer id, epoch and open transaction ([`state`]
//! decides, [`store`] keeps them as records in the group log, one per id,
//! as Kafka keeps them in `__transaction_state`), and the offsets a
//! transaction stages until it ends ([`staged_store`]). The broker persists
//! them, writes the markers and answers (`magnetar_broker::txn`).

pub mod staged_store;
pub mod state;
pub mod store;

pub use state::{EndPlan, TxnError, TxnMetadata, TxnState};
pub use store::{Decider, Transactions};
