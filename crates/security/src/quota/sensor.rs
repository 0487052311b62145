//! A rate over a sliding window of samples, as Kafka's `Rate` over its
//! `SampledStat`, and the throttle time of a quota violation, as Kafka's
//! `QuotaUtils.throttleTime`: how long the client must wait for its rate
//! over the window to fall back to the quota.

use std::time::Duration;

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: i64,
    value: f64,
}

/// A windowed rate of one quota bucket.
#[derive(Debug, Clone)]
pub struct RateSensor {
    samples: Vec<Sample>,
    current: usize,
    count: usize,
    window_ms: i64,
}

impl RateSensor {
    /// `count` samples of `window` each (`quota.window.num`,
    /// `quota.window.size.seconds`).
    pub fn new(count: usize, window: Duration) -> RateSensor {
        RateSensor {
            samples: Vec::with_capacity(count.max(1)),
            current: 0,
            count: count.max(1),
            window_ms: (window.as_millis() as i64).max(1),
        }
    }

    fn purge(&mut self, now_ms: i64) {
        let span = self.window_ms * self.count as i64;
        for s in &mut self.samples {
            if now_ms - s.start_ms >= span {
                *s = Sample {
                    start_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// Adds `value` at `now_ms`.
    pub fn record(&mut self, value: f64, now_ms: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample {
                start_ms: now_ms,
                value: 0.0,
            });
        } else if now_ms - self.samples[self.current].start_ms >= self.window_ms {
            self.current = (self.current + 1) % self.count;
            let fresh = Sample {
                start_ms: now_ms,
                value: 0.0,
            };
            if self.current >= self.samples.len() {
                self.samples.push(fresh);
            } else {
                self.samples[self.current] = fresh;
            }
        }
        self.samples[self.current].value += value;
    }

    /// The window the rate is over, in ms: at least `count - 1` whole
    /// windows, so a new bucket is not judged on its first burst alone.
    fn window_size_ms(&self, now_ms: i64) -> i64 {
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        let full = elapsed / self.window_ms;
        let min_full = self.count as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * self.window_ms;
        }
        elapsed.max(1)
    }

    /// The rate per second at `now_ms`.
    pub fn rate(&mut self, now_ms: i64) -> f64 {
        self.purge(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (self.window_size_ms(now_ms) as f64 / 1000.0)
    }

    /// Records `value` and returns how long to throttle for the rate to
    /// be back at `bound` per second (zero when within it), at most `max`.
    pub fn record_and_throttle(
        &mut self,
        value: f64,
        bound: f64,
        now_ms: i64,
        max: Duration,
    ) -> Duration {
        self.record(value, now_ms);
        let rate = self.rate(now_ms);
        if rate <= bound || bound <= 0.0 {
            return Duration::ZERO;
        }
        let ms = (rate - bound) / bound * self.window_size_ms(now_ms) as f64;
        Duration::from_millis(ms.round() as u64).min(max)
    }

    /// Takes back `value` recorded at `now_ms` (a fetch answered empty
    /// because it was throttled).
    pub fn unrecord(&mut self, value: f64, now_ms: i64) {
        self.record(-value, now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_bucket_is_judged_over_the_minimum_window() {
        let mut s = RateSensor::new(11, Duration::from_secs(1));
        // 10 s worth of quota at once is within it (10 windows minimum).
        let max = Duration::from_secs(11);
        assert_eq!(
            s.record_and_throttle(10_000.0, 1000.0, 0, max),
            Duration::ZERO
        );
        // One more second's worth is over: throttled until the rate over
        // the window is back at the bound.
        let t = s.record_and_throttle(1000.0, 1000.0, 0, max);
        assert_eq!(t, Duration::from_secs(1));
    }

    #[test]
    fn the_rate_slides_with_time() {
        let mut s = RateSensor::new(2, Duration::from_secs(1));
        s.record(1000.0, 0);
        assert!((s.rate(0) - 1000.0).abs() < 1e-6, "{}", s.rate(0));
        s.record(1000.0, 1000);
        assert!((s.rate(1500) - 2000.0 / 1.5).abs() < 1e-6);
        // Samples older than count windows are gone.
        assert_eq!(s.rate(5000), 0.0);
    }

    #[test]
    fn steady_throttling_holds_the_rate() {
        // A client sending 100 KB per request and waiting what it is told
        // stays near a 1 MB/s quota (within the first window's burst: 10 s
        // worth on top of 60 s).
        let mut s = RateSensor::new(11, Duration::from_secs(1));
        let (bound, mut now, mut sent) = (1_000_000.0, 0i64, 0.0);
        let max = Duration::from_secs(11);
        while now < 60_000 {
            let t = s.record_and_throttle(100_000.0, bound, now, max);
            sent += 100_000.0;
            now += 1 + t.as_millis() as i64;
        }
        let rate = sent / (now as f64 / 1000.0);
        assert!((rate - bound).abs() / bound < 0.2, "rate {rate}");
    }

    #[test]
    fn throttles_are_capped() {
        let mut s = RateSensor::new(2, Duration::from_secs(1));
        let t = s.record_and_throttle(1e12, 1.0, 0, Duration::from_secs(2));
        assert_eq!(t, Duration::from_secs(2));
    }
}
