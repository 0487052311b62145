//! Replication throttles (Kafka's replication quotas, used to bound what
//! a reassignment takes): the bytes a leader serves to followers and a
//! follower fetches for the *throttled* replicas (the topic keys
//! `leader.replication.throttled.replicas` and
//! `follower.replication.throttled.replicas`: `*` or `partition:broker`
//! pairs naming this broker) are held to this broker's
//! `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` bytes per second. Over its rate,
//! a leader answers throttled partitions without records and a follower
//! leaves them out of its fetches, until the rate allows again; other
//! partitions replicate at full speed meanwhile.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Which side of replication a throttle bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// What a leader serves to its followers.
    Leader,
    /// What a follower fetches from its leader.
    Follower,
}

impl Side {
    pub(super) fn replicas_key(self) -> &'static str {
        match self {
            Side::Leader => "leader.replication.throttled.replicas",
            Side::Follower => "follower.replication.throttled.replicas",
        }
    }

    pub(super) fn rate_key(self) -> &'static str {
        match self {
            Side::Leader => "leader.replication.throttled.rate",
            Side::Follower => "follower.replication.throttled.rate",
        }
    }
}

/// A byte rate over a one-second bucket: bytes recorded take tokens,
/// which come back at the rate; above the rate the bucket is in debt.
#[derive(Debug)]
pub(crate) struct ByteRate {
    bucket: Mutex<(f64, Option<Instant>)>,
}

impl Default for ByteRate {
    fn default() -> Self {
        ByteRate {
            bucket: Mutex::new((0.0, None)),
        }
    }
}

impl ByteRate {
    /// The tokens at `now` for `rate` bytes a second (a bucket holds at
    /// most one second's worth).
    fn refill(bucket: &mut (f64, Option<Instant>), rate: f64, now: Instant) -> f64 {
        let (tokens, at) = bucket;
        *tokens = match at {
            None => rate,
            Some(at) => (*tokens + rate * now.duration_since(*at).as_secs_f64()).min(rate),
        };
        *at = Some(now);
        *tokens
    }

    /// How long until the rate allows more (zero: now).
    pub(crate) fn delay(&self, rate: i64, now: Instant) -> Duration {
        if rate == i64::MAX {
            return Duration::ZERO;
        }
        let rate = rate.max(1) as f64;
        let tokens = Self::refill(&mut self.bucket.lock(), rate, now);
        if tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / rate)
        }
    }

    /// Counts `bytes` against the rate.
    pub(crate) fn record(&self, rate: i64, bytes: usize, now: Instant) {
        if rate == i64::MAX || bytes == 0 {
            return;
        }
        let mut bucket = self.bucket.lock();
        Self::refill(&mut bucket, rate.max(1) as f64, now);
        bucket.0 -= bytes as f64;
    }
}

/// Whether a throttled-replica list (`*`, or `partition:broker` pairs)
/// names replica `broker` of `partition`.
pub fn lists_replica(list: &str, partition: i32, broker: i32) -> bool {
    let list = list.trim();
    if list == "*" {
        return true;
    }
    list.split(',').any(|pair| {
        let mut it = pair.trim().splitn(2, ':');
        let p = it.next().and_then(|p| p.trim().parse::<i32>().ok());
        let b = it.next().and_then(|b| b.trim().parse::<i32>().ok());
        p == Some(partition) && b == Some(broker)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_lists_name_pairs_or_everything() {
        assert!(lists_replica("*", 3, 7));
        assert!(lists_replica("0:1, 3:7", 3, 7));
        assert!(!lists_replica("0:1,3:6", 3, 7));
        assert!(!lists_replica("", 0, 1));
        assert!(!lists_replica("garbage", 0, 1));
    }

    #[test]
    fn a_byte_rate_goes_into_debt_and_recovers_at_its_rate() {
        let r = ByteRate::default();
        let t0 = Instant::now();
        assert_eq!(r.delay(1000, t0), Duration::ZERO);
        r.record(1000, 1500, t0);
        let d = r.delay(1000, t0);
        assert!(
            d > Duration::from_millis(450) && d <= Duration::from_millis(500),
            "{d:?}"
        );
        assert_eq!(
            r.delay(1000, t0 + Duration::from_millis(500)),
            Duration::ZERO
        );
        // Unlimited: never in debt.
        let u = ByteRate::default();
        u.record(i64::MAX, 1 << 30, t0);
        assert_eq!(u.delay(i64::MAX, t0), Duration::ZERO);
    }
}
