//! Benchmark results: counts, rates and an HDR latency histogram.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;

use crate::output::print_json;

/// What a benchmark run measured.
#[derive(Debug)]
pub struct Report {
    /// Mode name.
    pub mode: &'static str,
    /// Messages completed (acknowledged, or consumed).
    pub messages: u64,
    /// Payload bytes completed.
    pub bytes: u64,
    /// Messages that failed.
    pub errors: u64,
    /// Wall time measured.
    pub elapsed: Duration,
    /// Latency in microseconds (ack latency, or end-to-end).
    pub latency: Histogram<u64>,
}

impl Report {
    /// An empty report.
    pub fn new(mode: &'static str) -> Report {
        Report {
            mode,
            messages: 0,
            bytes: 0,
            errors: 0,
            elapsed: Duration::ZERO,
            // 1 µs to 1 hour at 3 significant digits.
            latency: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }

    /// Records one completed message.
    pub fn record(&mut self, bytes: usize, latency_us: u64) {
        self.messages += 1;
        self.bytes += bytes as u64;
        let _ = self.latency.record(latency_us.clamp(1, 3_600_000_000));
    }

    fn per_sec(&self, n: u64) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            n as f64 / s
        } else {
            0.0
        }
    }

    fn ms(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "mode": self.mode,
            "messages": self.messages,
            "bytes": self.bytes,
            "errors": self.errors,
            "seconds": self.elapsed.as_secs_f64(),
            "msg_per_sec": self.per_sec(self.messages),
            "mb_per_sec": self.per_sec(self.bytes) / (1024.0 * 1024.0),
            "latency_ms": {
                "p50": self.ms(0.5), "p99": self.ms(0.99), "p99_9": self.ms(0.999),
                "max": self.latency.max() as f64 / 1000.0,
            },
        })
    }

    /// Prints the report (a summary, or JSON).
    pub fn print(&self, json_out: bool) {
        let mb = self.per_sec(self.bytes) / (1024.0 * 1024.0);
        if json_out {
            print_json(&self.to_json());
        } else {
            println!(
                "{}: {} messages in {:.1} s, {:.0} msg/s, {:.2} MB/s, {} errors",
                self.mode,
                self.messages,
                self.elapsed.as_secs_f64(),
                self.per_sec(self.messages),
                mb,
                self.errors
            );
            if self.mode == "consume" {
                // Reading a backlog has no meaningful latency.
                return;
            }
            println!(
                "latency ms: p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
                self.ms(0.5),
                self.ms(0.99),
                self.ms(0.999),
                self.latency.max() as f64 / 1000.0
            );
        }
    }
}
