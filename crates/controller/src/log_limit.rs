//! A per-second budget of log lines a peer can provoke: refusals are
//! logged, but a flood of refused peers cannot flood the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Refusals of peers (handshakes, frames, Raft identities) are logged at
/// most this many times a second, together.
pub(crate) static REFUSED_LOG: LogLimit = LogLimit::new(10);

/// At most `per_second` lines a second.
pub(crate) struct LogLimit {
    per_second: u64,
    /// The second (since the process's first use) and its count, packed.
    state: AtomicU64,
    start: OnceLock<Instant>,
}

impl LogLimit {
    pub(crate) const fn new(per_second: u64) -> Self {
        LogLimit {
            per_second,
            state: AtomicU64::new(0),
            start: OnceLock::new(),
        }
    }

    /// Whether one more line may be logged this second.
    pub(crate) fn allow(&self) -> bool {
        let second = self.start.get_or_init(Instant::now).elapsed().as_secs();
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            let (s, n) = (cur >> 20, cur & 0xF_FFFF);
            let next = if s == second {
                (s << 20) | (n + 1)
            } else {
                (second << 20) | 1
            };
            if s == second && n >= self.per_second {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }
}

/// `tracing::warn!` within [`REFUSED_LOG`]'s budget.
macro_rules! warn_refused {
    ($($t:tt)*) => {
        if $crate::log_limit::REFUSED_LOG.allow() {
            tracing::warn!($($t)*);
        }
    };
}
pub(crate) use warn_refused;

#[cfg(test)]
mod tests {
    #[test]
    fn at_most_the_budget_a_second() {
        let l = super::LogLimit::new(3);
        let allowed = (0..100).filter(|_| l.allow()).count();
        // The loop may straddle a second boundary: then up to twice.
        assert!((3..=6).contains(&allowed), "{allowed}");
    }
}
