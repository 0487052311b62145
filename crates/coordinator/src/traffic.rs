//! Per-partition traffic counters: what came in (appends) and went out
//! (deliveries by any front end), read by topic stats and metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Counters since the partition was opened in this process, plus the last
/// sample taken for rates. Increments are relaxed atomics: a reader may see
/// one counter ahead of another, never a torn value.
#[derive(Debug)]
pub struct Traffic {
    records_in: AtomicU64,
    bytes_in: AtomicU64,
    records_out: AtomicU64,
    bytes_out: AtomicU64,
    samples: Mutex<Samples>,
}

/// A point-in-time copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficCounts {
    /// Records appended.
    pub records_in: u64,
    /// Bytes appended (record batches as stored).
    pub bytes_in: u64,
    /// Records delivered to consumers, Readers and fetchers.
    pub records_out: u64,
    /// Bytes delivered.
    pub bytes_out: u64,
}

/// Per-second rates over the last sampling window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TrafficRates {
    /// Records in per second.
    pub records_in: f64,
    /// Bytes in per second.
    pub bytes_in: f64,
    /// Records out per second.
    pub records_out: f64,
    /// Bytes out per second.
    pub bytes_out: f64,
}

#[derive(Debug)]
struct Samples {
    previous: (Instant, TrafficCounts),
    latest: (Instant, TrafficCounts),
}

/// Rates are measured between two samples at least this far apart, so a
/// burst of stats requests does not shrink the window to nothing.
pub const RATE_WINDOW: Duration = Duration::from_secs(5);

impl Default for Traffic {
    fn default() -> Self {
        let now = Instant::now();
        Traffic {
            records_in: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            samples: Mutex::new(Samples {
                previous: (now, TrafficCounts::default()),
                latest: (now, TrafficCounts::default()),
            }),
        }
    }
}

impl Traffic {
    /// Counts an append.
    pub fn record_in(&self, records: u64, bytes: u64) {
        self.records_in.fetch_add(records, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts a delivery.
    pub fn record_out(&self, records: u64, bytes: u64) {
        self.records_out.fetch_add(records, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn counts(&self) -> TrafficCounts {
        TrafficCounts {
            records_in: self.records_in.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            records_out: self.records_out.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
        }
    }

    /// Rates per second between the latest sample at least
    /// [`RATE_WINDOW`] old and now (or since the partition opened).
    pub fn rates(&self, now: Instant) -> TrafficRates {
        let current = self.counts();
        let mut s = self.samples.lock();
        if now.saturating_duration_since(s.latest.0) >= RATE_WINDOW {
            s.previous = s.latest;
            s.latest = (now, current);
        }
        // From the sample before the latest: a window of RATE_WINDOW to
        // 2 x RATE_WINDOW (shorter only in a partition's first seconds).
        let (since, base) = s.previous;
        let secs = now.saturating_duration_since(since).as_secs_f64();
        if secs <= 0.0 {
            return TrafficRates::default();
        }
        let per_sec = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
        TrafficRates {
            records_in: per_sec(current.records_in, base.records_in),
            bytes_in: per_sec(current.bytes_in, base.bytes_in),
            records_out: per_sec(current.records_out, base.records_out),
            bytes_out: per_sec(current.bytes_out, base.bytes_out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_rates_use_the_window() {
        let t = Traffic::default();
        let start = t.samples.lock().latest.0;
        t.record_in(10, 1000);
        t.record_out(4, 400);
        assert_eq!(
            t.counts(),
            TrafficCounts {
                records_in: 10,
                bytes_in: 1000,
                records_out: 4,
                bytes_out: 400
            }
        );
        // 10 records over 10 s since the start.
        let r = t.rates(start + Duration::from_secs(10));
        assert!((r.records_in - 1.0).abs() < 1e-9, "{r:?}");
        assert!((r.bytes_out - 40.0).abs() < 1e-9, "{r:?}");
        // The next window: 20 more records in 5 s.
        t.record_in(20, 0);
        let r = t.rates(start + Duration::from_secs(15));
        assert!((r.records_in - 4.0).abs() < 1e-9, "{r:?}");
        assert_eq!(
            t.rates(start).records_in,
            0.0,
            "time going back is harmless"
        );
    }
}
