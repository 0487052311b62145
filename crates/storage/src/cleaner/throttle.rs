//! The cleaners' shared I/O budget (`log.cleaner.io.max.bytes.per.second`).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long a measuring window lasts: unused budget does not carry over
/// further than this.
const WINDOW: Duration = Duration::from_secs(1);

/// Rates at or above this are no limit (Kafka's default is `f64::MAX`).
const UNLIMITED: f64 = 1e18;

/// Keeps the bytes read and written by every cleaner thread together at or
/// under a rate, by making the thread that goes over it sleep. The lock is
/// held while sleeping, so the threads are throttled together, as Kafka's
/// throttler does.
#[derive(Debug)]
pub(crate) struct Throttler {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    rate: f64,
    since: Instant,
    bytes: f64,
}

impl Throttler {
    /// A throttler at `bytes_per_second`.
    pub fn new(bytes_per_second: f64) -> Throttler {
        Throttler {
            state: Mutex::new(State {
                rate: bytes_per_second,
                since: Instant::now(),
                bytes: 0.0,
            }),
        }
    }

    /// Changes the rate.
    pub fn set_rate(&self, bytes_per_second: f64) {
        self.state.lock().rate = bytes_per_second;
    }

    /// Counts `bytes` of I/O and sleeps as long as the rate requires.
    pub fn throttle(&self, bytes: u64) {
        let mut s = self.state.lock();
        if !(s.rate > 0.0 && s.rate < UNLIMITED) {
            return;
        }
        s.bytes += bytes as f64;
        let due = Duration::from_secs_f64(s.bytes / s.rate);
        let elapsed = s.since.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        if s.since.elapsed() >= WINDOW {
            s.since = Instant::now();
            s.bytes = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_over_the_rate_takes_at_least_its_time() {
        let t = Throttler::new(1_000_000.0);
        let start = Instant::now();
        for _ in 0..75 {
            t.throttle(4096);
        }
        // 300 KiB at 1 MB/s: at least 0.3 s, whatever the machine.
        assert!(
            start.elapsed() >= Duration::from_millis(300),
            "{:?}",
            start.elapsed()
        );
        let unlimited = Throttler::new(f64::MAX);
        let start = Instant::now();
        unlimited.throttle(1 << 40);
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
