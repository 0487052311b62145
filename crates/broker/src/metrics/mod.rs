//! Prometheus metrics of the broker, shared by every front end.
//!
//! Two kinds:
//! - **Instrumentation** the front ends record into as they work: requests
//!   by protocol, API and outcome with latency histograms, connections per
//!   listener, Fetch long-poll waits, produce waits for flushes. Handles are
//!   resolved once (per listener, per API on its first request), so the hot
//!   path is a few relaxed atomic adds and no lock.
//! - **State** read from the broker at scrape time ([`state`]): traffic
//!   and log figures per partition, consumer-group lag, subscription
//!   backlogs. Nothing is maintained per message for them.
//!
//! [`encode`] renders both in the OpenMetrics text format (which
//! Prometheus scrapes), every name prefixed `magnetar_`.

mod histogram;
mod instruments;
pub mod state;

pub use histogram::{Histogram, HistogramSnapshot, LATENCY_BUCKETS};
pub use instruments::{
    ListenerMetrics, Metrics, OpenConnection, Outcome, RequestTable, WaitGuard, PREFIX,
};

use crate::Broker;

/// The `Content-Type` of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric of `broker` in the OpenMetrics text format: its
/// instrumentation, then its state sampled now. Walks every partition,
/// group and subscription; run it off the async workers.
pub fn encode(broker: &Broker) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    broker.metrics().encode_instrumentation(&mut out)?;
    state::StateSample::collect(broker).encode_into(&mut out)?;
    prometheus_client::encoding::text::encode_eof(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
