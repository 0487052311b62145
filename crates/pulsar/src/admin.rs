//! What the Pulsar front end tells admin paths (topic stats, cursor resets)
//! about its connections: the publishers attached to a partition, the
//! consumers of a subscription with their clients and traffic, and
//! disconnecting a subscription's consumers ([`Connections`], defined in
//! `magnetar-pulsar-core` so the HTTP service need not import this crate).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use broker::subscription::SubscriptionKey;
use magnetar_pulsar_wire::command;
use magnetar_pulsar_wire::proto::CommandCloseConsumer;
use model::TopicPartition;

use crate::shared::Shared;

pub use magnetar_pulsar_core::admin::{ClientInfo, Connections, ConsumerView, Publisher};

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
}

impl Connections for FrontEnd {
    fn publishers(&self, tp: &TopicPartition) -> Vec<Arc<Publisher>> {
        self.shared.producers.publishers(tp)
    }

    fn consumers(&self, key: &SubscriptionKey) -> Vec<ConsumerView> {
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

    fn disconnect<'a>(
        &'a self,
        key: &'a SubscriptionKey,
    ) -> Pin<Box<dyn Future<Output = usize> + Send + 'a>> {
        Box::pin(async move {
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
        })
    }
}
