//! The broker's quota state: the configured quotas (a snapshot swapped
//! when they change) and one rate sensor per bucket in use, asked on each
//! request how long its client must be throttled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::sensor::RateSensor;
use super::{resolve, QuotaKind, Quotas};

/// Most buckets measured apart; beyond it (a client inventing client ids)
/// new ones share one bucket per kind, so memory stays bounded.
const MAX_BUCKETS: usize = 100_000;
/// The bucket new clients share past [`MAX_BUCKETS`].
const OVERFLOW: &str = "<overflow>";

/// The sampling window (`quota.window.num` × `quota.window.size.seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaWindow {
    /// Samples kept.
    pub count: usize,
    /// Each sample's span.
    pub size: Duration,
}

impl QuotaWindow {
    /// The window `quota.window.num` and `quota.window.size.seconds` set.
    pub fn from_config(config: &magnetar_config::BrokerConfig) -> QuotaWindow {
        QuotaWindow {
            count: config.int_value("quota.window.num").max(1) as usize,
            size: Duration::from_secs(config.int_value("quota.window.size.seconds").max(1) as u64),
        }
    }

    /// The longest byte-rate throttle: the whole window, as Kafka caps it.
    pub fn max_throttle(&self) -> Duration {
        self.size * self.count as u32
    }

    fn span_ms(&self) -> i64 {
        (self.max_throttle().as_millis() as i64).max(1)
    }
}

type Bucket = (QuotaKind, String, String);

#[derive(Debug, Default)]
struct Sensors {
    buckets: HashMap<Bucket, (RateSensor, i64)>,
    last_sweep_ms: i64,
}

#[derive(Debug, Default)]
struct Snapshot {
    quotas: Quotas,
    // Which kinds any entity sets: the others are not measured at all.
    kinds: [bool; 3],
}

fn slot(kind: QuotaKind) -> usize {
    match kind {
        QuotaKind::Produce => 0,
        QuotaKind::Fetch => 1,
        QuotaKind::Request => 2,
    }
}

impl Snapshot {
    fn bits(&self) -> u8 {
        self.kinds
            .iter()
            .enumerate()
            .fold(0, |b, (i, k)| if *k { b | (1 << i) } else { b })
    }

    fn of(quotas: &Quotas) -> Snapshot {
        let mut kinds = [false; 3];
        for kind in [QuotaKind::Produce, QuotaKind::Fetch, QuotaKind::Request] {
            kinds[slot(kind)] = quotas.values().any(|v| v.contains_key(kind.key()));
        }
        Snapshot {
            quotas: quotas.clone(),
            kinds,
        }
    }
}

/// Quotas and their sensors.
#[derive(Debug)]
pub struct QuotaManager {
    window: QuotaWindow,
    // One bit per kind some entity sets (the snapshot's `kinds`): what
    // every request checks first, without a lock.
    enforced: AtomicU8,
    snapshot: RwLock<Arc<Snapshot>>,
    sensors: Mutex<Sensors>,
}

impl QuotaManager {
    /// A manager over `quotas`.
    pub fn new(window: QuotaWindow, quotas: Quotas) -> QuotaManager {
        let snapshot = Snapshot::of(&quotas);
        QuotaManager {
            window,
            enforced: AtomicU8::new(snapshot.bits()),
            snapshot: RwLock::new(Arc::new(snapshot)),
            sensors: Mutex::new(Sensors::default()),
        }
    }

    /// Replaces the quotas (after a metadata change).
    pub fn refresh(&self, quotas: &Quotas) {
        let snapshot = Snapshot::of(quotas);
        let mut current = self.snapshot.write();
        self.enforced.store(snapshot.bits(), Ordering::Release);
        *current = Arc::new(snapshot);
    }

    /// Whether any entity has a quota of `kind` (none: it is not measured).
    pub fn enforces(&self, kind: QuotaKind) -> bool {
        self.enforced.load(Ordering::Acquire) & (1 << slot(kind)) != 0
    }

    /// Whether any quota is enforced at all.
    pub fn any(&self) -> bool {
        self.enforced.load(Ordering::Acquire) != 0
    }

    /// The largest fetch response a consumer under a byte-rate quota may
    /// get: what its quota allows over the window but one sample (Kafka's
    /// `getMaxValueInQuotaWindow`), so one response never exceeds what
    /// could ever be let through.
    pub fn fetch_cap(&self, user: &str, client_id: &str) -> Option<usize> {
        if !self.enforces(QuotaKind::Fetch) {
            return None;
        }
        let snapshot = self.snapshot.read().clone();
        let (bound, _) = resolve(&snapshot.quotas, QuotaKind::Fetch, user, client_id)?;
        let samples = self.window.count.saturating_sub(1).max(1) as f64;
        Some((bound * samples * self.window.size.as_secs_f64()).max(1.0) as usize)
    }

    /// Records `value` (bytes, or percent-seconds of handling time for
    /// [`QuotaKind::Request`]) for `user` with `client_id` at `now_ms` (a
    /// monotonic clock) and returns how long to throttle them (zero
    /// without a quota).
    pub fn record(
        &self,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: i64,
    ) -> Duration {
        if !self.enforces(kind) {
            return Duration::ZERO;
        }
        let snapshot = self.snapshot.read().clone();
        let Some((bound, (u, c))) = resolve(&snapshot.quotas, kind, user, client_id) else {
            return Duration::ZERO;
        };
        // Kafka caps a request-time throttle at one sample, byte rates at
        // the whole window.
        let max = match kind {
            QuotaKind::Request => self.window.size,
            _ => self.window.max_throttle(),
        };
        let span = self.window.span_ms();
        let mut sensors = self.sensors.lock();
        if now_ms - sensors.last_sweep_ms >= span {
            // Buckets idle for a whole window hold nothing any more.
            sensors.buckets.retain(|_, (_, last)| now_ms - *last < span);
            sensors.last_sweep_ms = now_ms;
        }
        let mut key = (kind, u, c);
        if sensors.buckets.len() >= MAX_BUCKETS && !sensors.buckets.contains_key(&key) {
            key = (kind, OVERFLOW.to_string(), OVERFLOW.to_string());
        }
        let (count, size) = (self.window.count, self.window.size);
        let (sensor, last) = sensors
            .buckets
            .entry(key)
            .or_insert_with(|| (RateSensor::new(count, size), now_ms));
        *last = now_ms;
        sensor.record_and_throttle(value, bound, now_ms, max)
    }

    /// Takes back a recorded `value` (a throttled fetch answered empty).
    pub fn unrecord(&self, kind: QuotaKind, user: &str, client_id: &str, value: f64, now_ms: i64) {
        let snapshot = self.snapshot.read().clone();
        let Some((_, (u, c))) = resolve(&snapshot.quotas, kind, user, client_id) else {
            return;
        };
        if let Some((s, _)) = self.sensors.lock().buckets.get_mut(&(kind, u, c)) {
            s.unrecord(value, now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{EntityName, QuotaEntity, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE};
    use super::*;

    fn window() -> QuotaWindow {
        QuotaWindow {
            count: 2,
            size: Duration::from_secs(1),
        }
    }

    fn user_quota(user: &str, key: &str, v: f64) -> Quotas {
        let mut q = Quotas::new();
        q.entry(QuotaEntity {
            user: Some(EntityName::Named(user.into())),
            client_id: None,
        })
        .or_default()
        .insert(key.into(), v);
        q
    }

    #[test]
    fn a_user_quota_is_shared_by_its_client_ids() {
        let m = QuotaManager::new(window(), user_quota("alice", PRODUCER_BYTE_RATE, 1000.0));
        assert!(m.enforces(QuotaKind::Produce) && !m.enforces(QuotaKind::Fetch));
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
        assert!(!m.any());
        assert_eq!(
            m.record(QuotaKind::Produce, "alice", "b", 1e9, 0),
            Duration::ZERO
        );
    }

    #[test]
    fn fetches_are_capped_to_what_the_window_lets_through() {
        let m = QuotaManager::new(window(), user_quota("alice", CONSUMER_BYTE_RATE, 1000.0));
        assert_eq!(m.fetch_cap("alice", "x"), Some(1000));
        assert_eq!(m.fetch_cap("bob", "x"), None);
    }

    #[test]
    fn idle_buckets_are_swept() {
        let mut q = Quotas::new();
        q.entry(QuotaEntity {
            user: None,
            client_id: Some(EntityName::Default),
        })
        .or_default()
        .insert(PRODUCER_BYTE_RATE.into(), 1e9);
        let m = QuotaManager::new(window(), q);
        for i in 0..100 {
            m.record(QuotaKind::Produce, "u", &format!("c{i}"), 1.0, 0);
        }
        assert_eq!(m.sensors.lock().buckets.len(), 100);
        m.record(QuotaKind::Produce, "u", "late", 1.0, 10_000);
        assert_eq!(
            m.sensors.lock().buckets.len(),
            1,
            "only the active bucket is left"
        );
    }
}
