//! What every connection of the Pulsar listener shares ([`Shared`]): the
//! broker, service URLs, security, limits, producers and dispatchers.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use broker::limits::RequestBudget;
use broker::net::FrameLimits;
use broker::Broker;

use crate::authz::PulsarSecurity;
use crate::dispatch::Dispatchers;
use crate::lookup::ServiceUrls;
use crate::producer::ProducerRegistry;

/// What every connection of the listener shares.
pub struct Shared {
    /// The broker.
    pub broker: Arc<Broker>,
    /// This broker's service URLs, given in Lookup answers.
    pub urls: ServiceUrls,
    /// How clients authenticate.
    pub security: PulsarSecurity,
    /// Largest message accepted (announced in Connected).
    pub max_message_size: usize,
    /// Keep-alive interval.
    pub keep_alive: Duration,
    pub(crate) budget: RequestBudget,
    pub(crate) frame_limits: FrameLimits,
    /// Producers across connections.
    pub producers: Arc<ProducerRegistry>,
    /// Consumers and subscription dispatchers.
    pub dispatchers: Arc<Dispatchers>,
    /// Command counts and latencies by command type.
    pub commands: broker::metrics::RequestTable,
    pub(crate) next_connection: AtomicU64,
}
