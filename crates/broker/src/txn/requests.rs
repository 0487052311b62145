//! What the brokers of a transaction ask of each other (markers,
//! verification) and the trait that carries it ([`TxnPeers`], implemented
//! by the front end that speaks to other brokers), a part of every
//! [`crate::Broker`] of a cluster.

use std::future::Future;
use std::pin::Pin;

use crate::Error;

/// The future of a request to another broker.
pub type PeerFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>;

/// One partition's answer to AddPartitionsToTxn.
pub type TxnPartitionResult = ((String, i32), Result<(), Error>);

/// Markers for one broker (WriteTxnMarkers, one marker entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerRequest {
    /// The transaction's producer.
    pub producer_id: i64,
    /// The epoch its records carry.
    pub producer_epoch: i16,
    /// Commit or abort.
    pub commit: bool,
    /// The coordinator's epoch (slots never move: 0).
    pub coordinator_epoch: i32,
    /// The partitions that broker leads (or group slots it coordinates).
    pub partitions: Vec<(String, i32)>,
}

/// A question to a transaction's coordinator (AddPartitionsToTxn v4
/// `verify_only`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer as the batch names it.
    pub producer_id: i64,
    /// And its epoch.
    pub producer_epoch: i16,
    /// The partitions (or `__consumer_offsets` slots) to check.
    pub partitions: Vec<(String, i32)>,
}

/// Carries requests to other brokers (implemented by the Kafka front end:
/// they are Kafka's inter-broker requests). Each answers per partition.
pub trait TxnPeers: Send + Sync + 'static {
    /// WriteTxnMarkers to the broker at `addr`.
    fn write_markers(
        &self,
        addr: String,
        req: MarkerRequest,
    ) -> PeerFuture<Vec<TxnPartitionResult>>;
    /// AddPartitionsToTxn `verify_only` to the coordinator at `addr`.
    fn verify(&self, addr: String, req: VerifyRequest) -> PeerFuture<Vec<TxnPartitionResult>>;
}
