//! Rate-limited logging: a hostile client can provoke a warning per
//! connection, so such warnings go through a [`RateLimiter`] that lets a few
//! lines through per period and counts the rest, reported with the next line
//! that gets through.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Lets at most `burst` events per `period` through and counts the others.
#[derive(Debug)]
pub struct RateLimiter {
    burst: u32,
    period: Duration,
    state: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    started: Option<Instant>,
    passed: u32,
    suppressed: u64,
}

impl RateLimiter {
    /// A limiter letting `burst` events through per `period`.
    pub const fn new(burst: u32, period: Duration) -> RateLimiter {
        RateLimiter {
            burst,
            period,
            state: Mutex::new(Window {
                started: None,
                passed: 0,
                suppressed: 0,
            }),
        }
    }

    /// `Some(n)` if an event may be logged now, `n` being how many were
    /// suppressed since the last one logged; `None` to stay quiet.
    pub fn check(&self) -> Option<u64> {
        self.check_at(Instant::now())
    }

    /// [`RateLimiter::check`] at a given time.
    pub fn check_at(&self, now: Instant) -> Option<u64> {
        let mut w = self.state.lock();
        let expired = w
            .started
            .is_none_or(|s| now.saturating_duration_since(s) >= self.period);
        if expired {
            w.started = Some(now);
            w.passed = 0;
        }
        if w.passed < self.burst {
            w.passed += 1;
            Some(std::mem::take(&mut w.suppressed))
        } else {
            w.suppressed += 1;
            None
        }
    }
}

/// `tracing::warn!` through a [`RateLimiter`], adding `suppressed = N` when
/// earlier lines were held back.
#[macro_export]
macro_rules! warn_limited {
    ($limiter:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limiter.check() {
            if suppressed > 0 {
                tracing::warn!(suppressed, $($arg)+);
            } else {
                tracing::warn!($($arg)+);
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lets_a_burst_through_then_counts() {
        let l = RateLimiter::new(2, Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(l.check_at(t0), Some(0));
        assert_eq!(l.check_at(t0), Some(0));
        for _ in 0..5 {
            assert_eq!(l.check_at(t0 + Duration::from_secs(1)), None);
        }
        // A new period: the count of what was held back comes with it.
        assert_eq!(l.check_at(t0 + Duration::from_secs(10)), Some(5));
        assert_eq!(l.check_at(t0 + Duration::from_secs(11)), Some(0));
        assert_eq!(l.check_at(t0 + Duration::from_secs(12)), None);
        assert_eq!(l.check_at(t0 + Duration::from_secs(25)), Some(1));
    }
}
