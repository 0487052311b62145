//! What admin paths (topic stats, cursor resets) may ask of a running Pulsar
//! front end about its live connections: the publishers attached to a
//! partition, the consumers of a subscription with their clients and
//! traffic, and disconnecting a subscription's consumers.
//!
//! The front end implements [`Connections`]; the HTTP service holds it as a
//! trait object and never sees a connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use broker::subscription::{ConsumerId, SubscriptionKey};
use broker::traffic::Traffic;
use magnetar_pulsar_wire::proto::ProducerAccessMode;
use model::TopicPartition;

/// The client on one connection.
#[derive(Debug)]
pub struct ClientInfo {
    /// Peer `host:port`.
    pub address: String,
    /// What its CONNECT called itself (`client_version`).
    pub client_version: String,
    /// When it connected (ms since the epoch).
    pub connected_since_ms: i64,
}

/// A consumer as admin paths see it.
#[derive(Debug, Clone)]
pub struct ConsumerView {
    /// The broker's id of it.
    pub id: ConsumerId,
    /// Its client.
    pub client: Arc<ClientInfo>,
    /// What was delivered to it.
    pub traffic: Arc<Traffic>,
    /// When it attached (ms since the epoch).
    pub attached_ms: i64,
}

/// An attached producer as topic stats report it.
#[derive(Debug)]
pub struct Publisher {
    /// The producer id its client chose.
    pub producer_id: u64,
    /// Its name.
    pub name: String,
    /// Shared or Exclusive.
    pub access_mode: ProducerAccessMode,
    /// Its client.
    pub client: Arc<ClientInfo>,
    /// When it attached (ms since the epoch).
    pub attached_ms: i64,
    /// What it stored.
    pub traffic: Traffic,
}

/// A running Pulsar front end's connections, as admin paths see them.
pub trait Connections: Send + Sync + std::fmt::Debug {
    /// The producers attached to a partition, in attach order.
    fn publishers(&self, tp: &TopicPartition) -> Vec<Arc<Publisher>>;

    /// The consumers attached to a subscription on this front end.
    fn consumers(&self, key: &SubscriptionKey) -> Vec<ConsumerView>;

    /// Disconnects every consumer of the subscription, as upstream does
    /// before resetting a cursor: each is detached (its unacknowledged
    /// messages go back) and its client told with CloseConsumer, so it
    /// reconnects and reads from the subscription's new position. Returns
    /// how many were disconnected.
    fn disconnect<'a>(
        &'a self,
        key: &'a SubscriptionKey,
    ) -> Pin<Box<dyn Future<Output = usize> + Send + 'a>>;
}
