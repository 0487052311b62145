//! The broker's quota state: the configured quotas (a snapshot swapped
//! when they change) and one rate sensor per bucket in use, asked on each
//! request how long its client must be throttled.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::sensor::RateSensor;
use super::{resolve, QuotaKind, Quotas};

/// Beyond this many buckets, idle ones are dropped.
const MAX_IDLE_BUCKETS: usize = 10_000;

/// The sampling window (`quota.window.num` × `quota.window.size.seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaWindow {
    /// Samples kept.
    pub count: usize,
    /// Each sample's span.
    pub size: Duration,
}

impl QuotaWindow {
    /// The longest throttle: the whole window, as Kafka caps it.
    pub fn max_throttle(&self) -> Duration {
        self.size * self.count as u32
    }
}

type Bucket = (QuotaKind, String, String);

/// Quotas and their sensors.
#[derive(Debug)]
pub struct QuotaManager {
    window: QuotaWindow,
    quotas: RwLock<Arc<Quotas>>,
    sensors: Mutex<HashMap<Bucket, RateSensor>>,
}

impl QuotaManager {
    /// A manager over `quotas`.
    pub fn new(window: QuotaWindow, quotas: Quotas) -> QuotaManager {
        QuotaManager {
            window,
            quotas: RwLock::new(Arc::new(quotas)),
            sensors: Mutex::new(HashMap::new()),
        }
    }

    /// Replaces the quotas (after a metadata change).
    pub fn refresh(&self, quotas: &Quotas) {
        *self.quotas.write() = Arc::new(quotas.clone());
    }

    /// Whether any quota is set (none: nothing is measured).
    pub fn any(&self) -> bool {
        !self.quotas.read().is_empty()
    }

    /// Records `value` (bytes, or percent-seconds of handling time for
    /// [`QuotaKind::Request`]) for `user` with `client_id` at `now_ms` and
    /// returns how long to throttle them (zero without a quota).
    pub fn record(
        &self,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: i64,
    ) -> Duration {
        let quotas = self.quotas.read().clone();
        if quotas.is_empty() {
            return Duration::ZERO;
        }
        let Some((bound, (u, c))) = resolve(&quotas, kind, user, client_id) else {
            return Duration::ZERO;
        };
        let mut sensors = self.sensors.lock();
        if sensors.len() > MAX_IDLE_BUCKETS {
            sensors.retain(|_, s| s.rate(now_ms) > 0.0);
        }
        sensors
            .entry((kind, u, c))
            .or_insert_with(|| RateSensor::new(self.window.count, self.window.size))
            .record_and_throttle(value, bound, now_ms, self.window.max_throttle())
    }

    /// Takes back a recorded `value` (a throttled fetch answered empty).
    pub fn unrecord(&self, kind: QuotaKind, user: &str, client_id: &str, value: f64, now_ms: i64) {
        let quotas = self.quotas.read().clone();
        let Some((_, (u, c))) = resolve(&quotas, kind, user, client_id) else {
            return;
        };
        if let Some(s) = self.sensors.lock().get_mut(&(kind, u, c)) {
            s.unrecord(value, now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{EntityName, QuotaEntity, PRODUCER_BYTE_RATE};
    use super::*;

    #[test]
    fn a_user_quota_is_shared_by_its_client_ids() {
        let mut q = Quotas::new();
        q.entry(QuotaEntity {
            user: Some(EntityName::Named("alice".into())),
            client_id: None,
        })
        .or_default()
        .insert(PRODUCER_BYTE_RATE.into(), 1000.0);
        let window = QuotaWindow {
            count: 2,
            size: Duration::from_secs(1),
        };
        let m = QuotaManager::new(window, q);
        assert_eq!(
            m.record(QuotaKind::Produce, "alice", "a", 1000.0, 0),
            Duration::ZERO
        );
        assert!(m.record(QuotaKind::Produce, "alice", "b", 1000.0, 0) > Duration::ZERO);
        assert_eq!(
            m.record(QuotaKind::Produce, "bob", "a", 1e9, 0),
            Duration::ZERO
        );
        assert_eq!(
            m.record(QuotaKind::Fetch, "alice", "a", 1e9, 0),
            Duration::ZERO
        );
        m.refresh(&Quotas::new());
        assert_eq!(
            m.record(QuotaKind::Produce, "alice", "b", 1e9, 0),
            Duration::ZERO
        );
    }
}
