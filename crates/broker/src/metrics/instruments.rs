//! The instrumentation the front ends record into as they work
//! ([`Metrics`]): requests by protocol, API and outcome with latency
//! histograms, connections per listener, Fetch long-poll waits, produce
//! waits for flushes. A part of every [`crate::Broker`].

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::histogram::Histogram;
use crate::limits::Refused;

/// Prefix of every metric name (`magnetar_…`).
pub const PREFIX: &str = "magnetar";

/// How a request ended, for the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered without an error (`ok`).
    Ok,
    /// Answered with this error, by the protocol's name for it (Kafka's
    /// `UNKNOWN_TOPIC_OR_PARTITION`, Pulsar's `TopicNotFound`).
    Error(&'static str),
    /// The connection was closed instead of answering (`closed`).
    Closed,
}

impl Outcome {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error(name) => name,
            Outcome::Closed => "closed",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    protocol: &'static str,
    api: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    protocol: &'static str,
    api: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    listener: &'static str,
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabels {
    protocol: &'static str,
}

/// The request families, shared by every [`RequestTable`].
#[derive(Debug, Clone, Default)]
struct RequestFamilies {
    requests: Family<RequestLabels, Counter>,
    duration: Family<ApiLabels, Histogram>,
}

/// The broker's instrumentation registry and handles to its metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: RequestFamilies,
    connections_open: Family<ListenerLabels, Gauge>,
    connections_accepted: Family<ListenerLabels, Counter>,
    connections_refused: Family<RefusedLabels, Counter>,
    fetch_waiting: Gauge,
    fetch_wait: Histogram,
    produce_flush_wait: Family<ProtocolLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every instrumentation metric, registered, with no series yet.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix(PREFIX);
        let requests = RequestFamilies::default();
        registry.register(
            "requests",
            "Requests handled, by protocol, API (Kafka API or Pulsar command) and outcome (ok, the protocol's error name, or closed)",
            requests.requests.clone(),
        );
        registry.register_with_unit(
            "request_duration",
            "Time from a request's arrival (decoded) to its answer written or queued, by protocol and API",
            Unit::Seconds,
            requests.duration.clone(),
        );
        let connections_open = Family::default();
        registry.register(
            "connections_open",
            "Client connections open now, by listener",
            connections_open.clone(),
        );
        let connections_accepted = Family::default();
        registry.register(
            "connections_accepted",
            "Client connections accepted, by listener",
            connections_accepted.clone(),
        );
        let connections_refused = Family::default();
        registry.register(
            "connections_refused",
            "Client connections refused on accept, by listener and the limit reached (max_connections, max_connections_per_ip)",
            connections_refused.clone(),
        );
        let fetch_waiting = Gauge::default();
        registry.register(
            "fetch_waiting_requests",
            "Kafka Fetch requests waiting for data now (long-poll on max_wait_ms and min_bytes)",
            fetch_waiting.clone(),
        );
        let fetch_wait = Histogram::default();
        registry.register_with_unit(
            "fetch_wait_duration",
            "Time Kafka Fetch requests that waited for data spent waiting",
            Unit::Seconds,
            fetch_wait.clone(),
        );
        let produce_flush_wait = Family::default();
        registry.register_with_unit(
            "produce_flush_wait_duration",
            "Time appends waited for a flush a flush policy (log.flush.interval.messages, flush.messages) required before being acknowledged, by protocol",
            Unit::Seconds,
            produce_flush_wait.clone(),
        );
        Metrics {
            registry,
            requests,
            connections_open,
            connections_accepted,
            connections_refused,
            fetch_waiting,
            fetch_wait,
            produce_flush_wait,
        }
    }

    /// A table of request handles for `protocol`, for APIs indexed
    /// `0..slots` (a Kafka API key, a Pulsar command type).
    pub fn request_table(&self, protocol: &'static str, slots: usize) -> RequestTable {
        RequestTable {
            families: self.requests.clone(),
            protocol,
            slots: (0..slots).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The connection metrics of one listener (`kafka`, `pulsar`).
    pub fn listener(&self, listener: &'static str) -> ListenerMetrics {
        let labels = ListenerLabels { listener };
        let refused = |reason| {
            self.connections_refused
                .get_or_create_owned(&RefusedLabels { listener, reason })
        };
        ListenerMetrics {
            open: self.connections_open.get_or_create_owned(&labels),
            accepted: self.connections_accepted.get_or_create_owned(&labels),
            refused_total: refused("max_connections"),
            refused_per_ip: refused("max_connections_per_ip"),
        }
    }

    /// Marks a Fetch request as waiting for data until the returned guard
    /// is dropped, which observes the time waited.
    pub fn fetch_wait_started(&self) -> WaitGuard {
        self.fetch_waiting.inc();
        WaitGuard {
            waiting: self.fetch_waiting.clone(),
            histogram: self.fetch_wait.clone(),
            started: Instant::now(),
        }
    }

    /// The histogram of flush waits of `protocol`'s appends.
    pub fn produce_flush_wait(&self, protocol: &'static str) -> Histogram {
        self.produce_flush_wait
            .get_or_create_owned(&ProtocolLabels { protocol })
    }

    /// The instrumentation in the OpenMetrics text format, without the
    /// final `# EOF` (see [`super::encode`]).
    pub fn encode_instrumentation(&self, out: &mut String) -> Result<(), std::fmt::Error> {
        prometheus_client::encoding::text::encode_registry(out, &self.registry)
    }
}

/// Handles of one API's request metrics.
#[derive(Debug)]
struct RequestMetrics {
    api: &'static str,
    ok: Counter,
    duration: Histogram,
}

/// Request metrics of one protocol, by API index, each resolved on its
/// API's first request: recording is then a few atomic adds (an error
/// outcome also looks its series up).
#[derive(Debug)]
pub struct RequestTable {
    families: RequestFamilies,
    protocol: &'static str,
    slots: Box<[OnceLock<RequestMetrics>]>,
}

impl RequestTable {
    /// Counts one request of API `index` (named `api`: the same name for
    /// the same index every time) with its outcome and latency.
    pub fn record(&self, index: usize, api: &'static str, outcome: Outcome, elapsed: Duration) {
        match self.slots.get(index) {
            Some(slot) => self.observe(slot.get_or_init(|| self.resolve(api)), outcome, elapsed),
            None => self.observe(&self.resolve(api), outcome, elapsed),
        }
    }

    fn resolve(&self, api: &'static str) -> RequestMetrics {
        let protocol = self.protocol;
        RequestMetrics {
            api,
            ok: self.families.requests.get_or_create_owned(&RequestLabels {
                protocol,
                api,
                outcome: Outcome::Ok.label(),
            }),
            duration: self
                .families
                .duration
                .get_or_create_owned(&ApiLabels { protocol, api }),
        }
    }

    fn observe(&self, m: &RequestMetrics, outcome: Outcome, elapsed: Duration) {
        match outcome {
            Outcome::Ok => {
                m.ok.inc();
            }
            other => {
                self.families
                    .requests
                    .get_or_create(&RequestLabels {
                        protocol: self.protocol,
                        api: m.api,
                        outcome: other.label(),
                    })
                    .inc();
            }
        }
        m.duration.observe(elapsed);
    }
}

/// Connection metrics of one listener.
#[derive(Debug, Clone)]
pub struct ListenerMetrics {
    open: Gauge,
    accepted: Counter,
    refused_total: Counter,
    refused_per_ip: Counter,
}

impl ListenerMetrics {
    /// Counts an accepted connection, open until the guard is dropped.
    pub fn accepted(&self) -> OpenConnection {
        self.accepted.inc();
        self.open.inc();
        OpenConnection {
            open: self.open.clone(),
        }
    }

    /// Counts a connection refused by a limit.
    pub fn refused(&self, why: &Refused) {
        match why {
            Refused::Total(_) => self.refused_total.inc(),
            Refused::PerIp(_) => self.refused_per_ip.inc(),
        };
    }
}

/// One open connection in `magnetar_connections_open`; dropping it (the
/// connection's task ending, or being stopped) takes it out.
#[derive(Debug)]
pub struct OpenConnection {
    open: Gauge,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// A Fetch waiting for data; dropping it ends the wait and observes it.
#[derive(Debug)]
pub struct WaitGuard {
    waiting: Gauge,
    histogram: Histogram,
    started: Instant,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        self.waiting.dec();
        self.histogram.observe(self.started.elapsed());
    }
}
