//! What the Pulsar front end tells admin paths (topic stats, cursor resets)
//! about its connections: the publishers attached to a partition, the
//! consumers of a subscription with their clients and traffic, and
//! disconnecting a subscription's consumers.

use std::sync::Arc;

use broker::subscription::{ConsumerId, SubscriptionKey};
use broker::traffic::Traffic;
use magnetar_pulsar_wire::command;
use magnetar_pulsar_wire::proto::CommandCloseConsumer;
use model::TopicPartition;

use crate::producer::Publisher;
use crate::server::Shared;

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

/// A handle on a running Pulsar front end for admin paths.
#[derive(Clone)]
pub struct FrontEnd {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FrontEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontEnd").finish_non_exhaustive()
    }
}

impl FrontEnd {
    pub(crate) fn new(shared: Arc<Shared>) -> FrontEnd {
        FrontEnd { shared }
    }

    /// The producers attached to a partition, in attach order.
    pub fn publishers(&self, tp: &TopicPartition) -> Vec<Arc<Publisher>> {
        self.shared.producers.publishers(tp)
    }

    /// The consumers attached to a subscription on this front end.
    pub fn consumers(&self, key: &SubscriptionKey) -> Vec<ConsumerView> {
        self.shared
            .dispatchers
            .outlets_of(key)
            .into_iter()
            .map(|(id, o)| ConsumerView {
                id,
                client: o.client,
                traffic: o.traffic,
                attached_ms: o.attached_ms,
            })
            .collect()
    }

    /// Disconnects every consumer of the subscription, as upstream does
    /// before resetting a cursor: each is detached (its unacknowledged
    /// messages go back) and its client told with CloseConsumer, so it
    /// reconnects and reads from the subscription's new position. Returns
    /// how many were disconnected.
    pub async fn disconnect(&self, key: &SubscriptionKey) -> usize {
        let outlets = self.shared.dispatchers.outlets_of(key);
        let subs = self.shared.broker.subscriptions();
        for (id, outlet) in &outlets {
            self.shared.dispatchers.remove_outlet(*id);
            let effects = subs.detach(key, *id).unwrap_or_default();
            let close = command(CommandCloseConsumer {
                consumer_id: outlet.consumer_id,
                request_id: u64::MAX,
                ..Default::default()
            });
            let _ = crate::session::send(&outlet.out, close).await;
            crate::session::tell(&self.shared, effects).await;
        }
        outlets.len()
    }
}
