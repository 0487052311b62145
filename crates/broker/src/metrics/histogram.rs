//! A lock-free latency histogram: fixed bucket bounds, one relaxed atomic
//! add per bucket, count and sum on each observation, encoded as an
//! OpenMetrics histogram. (`prometheus-client`'s own histogram takes a
//! mutex per observation; this one is observed once per request on every
//! connection.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds, in seconds, of every latency histogram's buckets (an
/// implicit `+Inf` bucket follows): 50 µs to 30 s, roughly ×2–2.5 apart.
pub const LATENCY_BUCKETS: [f64; 18] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
];

const BUCKETS: usize = LATENCY_BUCKETS.len() + 1;

/// A histogram of durations over [`LATENCY_BUCKETS`]. Clones share the
/// same counts.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    buckets: [AtomicU64; BUCKETS],
    /// Sum of the observations, in nanoseconds.
    sum_nanos: AtomicU64,
}

/// What a histogram holds at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
    /// `(upper bound, observations in this bucket)`, not cumulative; the
    /// last bound is `+Inf`.
    pub buckets: Vec<(f64, u64)>,
}

impl Histogram {
    /// Counts one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        // The first bucket whose bound is >= the value (`le` semantics).
        let i = LATENCY_BUCKETS.partition_point(|&bound| bound < secs);
        self.inner.buckets[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.inner.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counts now. The count is the sum of the buckets read, so the
    /// `+Inf` bucket always equals it, even while observations race.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(&self.inner.buckets)
            .map(|(bound, n)| (bound, n.load(Ordering::Relaxed)))
            .collect();
        HistogramSnapshot {
            count: buckets.iter().map(|(_, n)| n).sum(),
            sum_seconds: self.inner.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            buckets,
        }
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let s = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(s.sum_seconds, s.count, &s.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_at_or_above_them() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(10)); // <= 50 µs
        h.observe(Duration::from_micros(50)); // exactly a bound: that bucket
        h.observe(Duration::from_millis(3)); // <= 5 ms
        h.observe(Duration::from_secs(60)); // +Inf
        let s = h.clone().snapshot();
        assert_eq!(s.count, 4);
        assert!(
            (s.sum_seconds - (0.00006 + 0.003 + 60.0)).abs() < 1e-9,
            "{s:?}"
        );
        let at = |bound: f64| s.buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
        assert_eq!(at(0.000_05), 2);
        assert_eq!(at(0.005), 1);
        assert_eq!(at(f64::INFINITY), 1);
        assert_eq!(s.buckets.len(), LATENCY_BUCKETS.len() + 1);
    }
}
