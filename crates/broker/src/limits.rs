//! Limits shared by every connection of a listener, whatever its protocol:
//! how many connections (in all and per IP address), and how many request
//! bytes may be held at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// `max.connections` reached.
    #[error("{0} connections open (max.connections)")]
    Total(usize),
    /// `max.connections.per.ip` reached for this address.
    #[error("{0} connections open from this address (max.connections.per.ip)")]
    PerIp(usize),
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Counts open connections against `max.connections` and
/// `max.connections.per.ip`.
#[derive(Debug, Clone)]
pub struct ConnectionTracker {
    max_total: usize,
    max_per_ip: usize,
    counts: Arc<Mutex<Counts>>,
}

impl ConnectionTracker {
    /// A tracker with these limits.
    pub fn new(max_total: usize, max_per_ip: usize) -> ConnectionTracker {
        ConnectionTracker {
            max_total,
            max_per_ip,
            counts: Arc::default(),
        }
    }

    /// Counts a new connection from `ip`, or says which limit it is over.
    /// The connection is counted until the guard is dropped.
    pub fn admit(&self, ip: IpAddr) -> Result<ConnectionGuard, Refused> {
        let mut c = self.counts.lock();
        if c.total >= self.max_total {
            return Err(Refused::Total(c.total));
        }
        let from_ip = c.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err(Refused::PerIp(from_ip));
        }
        c.total += 1;
        *c.per_ip.entry(ip).or_insert(0) += 1;
        Ok(ConnectionGuard {
            ip,
            counts: self.counts.clone(),
        })
    }

    /// Connections open now.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.counts.lock().total
    }
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct ConnectionGuard {
    ip: IpAddr,
    counts: Arc<Mutex<Counts>>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let mut c = self.counts.lock();
        c.total -= 1;
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_ip.remove(&self.ip);
            }
        }
    }
}

/// Requests of at most this many bytes (size prefix excluded) are small:
/// they may draw on the reserve, so large requests, however many and
/// however stalled, never stop them.
pub const SMALL_REQUEST: usize = 64 * 1024;

/// `queued.max.request.bytes`: request bytes held at once (from the size
/// prefix until the request is handled), over all connections of the
/// broker. An eighth of it is a reserve that only small requests
/// ([`SMALL_REQUEST`]) may use, so stalled large requests cannot stop
/// them; of the rest, the large requests of one client address may hold at
/// most half, so one address cannot stop another's.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    pools: Option<Arc<Pools>>,
}

#[derive(Debug)]
struct Pools {
    /// For small requests only.
    reserve: Arc<Semaphore>,
    reserve_size: usize,
    /// For requests of any size.
    shared: Arc<Semaphore>,
    shared_size: usize,
    /// How much of `shared` the large requests of one address may hold.
    per_address: usize,
    /// Each address's share, while a connection from it is open.
    addresses: Mutex<HashMap<IpAddr, Weak<Semaphore>>>,
}

/// Bytes of the budget held by one request; released on drop.
#[derive(Debug, Default)]
pub struct BudgetPermit {
    /// From the reserve, the shared pool and the address's share.
    held: [Option<OwnedSemaphorePermit>; 3],
}

impl BudgetPermit {
    fn of(held: [Option<OwnedSemaphorePermit>; 3]) -> BudgetPermit {
        BudgetPermit { held }
    }

    /// Adds `other`'s bytes to this permit.
    pub fn merge(&mut self, other: BudgetPermit) {
        for (mine, theirs) in self.held.iter_mut().zip(other.held) {
            match (mine, theirs) {
                (Some(p), Some(o)) => p.merge(o),
                (slot @ None, o) => *slot = o,
                (Some(_), None) => {}
            }
        }
    }
}

impl RequestBudget {
    /// A budget of `limit` bytes, or unlimited.
    pub fn new(limit: Option<u64>) -> RequestBudget {
        let pools = limit.map(|l| {
            let l = (l as usize).clamp(2, Semaphore::MAX_PERMITS);
            let reserve_size = (l / 8).max(1);
            let shared_size = l - reserve_size;
            Arc::new(Pools {
                reserve: Arc::new(Semaphore::new(reserve_size)),
                reserve_size,
                shared: Arc::new(Semaphore::new(shared_size)),
                shared_size,
                per_address: (shared_size / 2).max(1),
                addresses: Mutex::default(),
            })
        });
        RequestBudget { pools }
    }

    /// The budget as seen by one connection from `ip`: its large requests
    /// share the address's part of the budget with the address's other
    /// connections.
    pub fn for_peer(&self, ip: IpAddr) -> PeerBudget {
        // An IPv4 client of a dual-stack socket is the same address as
        // over IPv4.
        let ip = ip.to_canonical();
        let address = self.pools.as_ref().map(|p| {
            let mut addresses = p.addresses.lock();
            if let Some(s) = addresses.get(&ip).and_then(Weak::upgrade) {
                return s;
            }
            let s = Arc::new(Semaphore::new(p.per_address));
            // Shares outlived by a permit are not removed on drop: sweep
            // them now and then (each time the table doubles).
            if addresses.len() >= 64 && addresses.len().is_power_of_two() {
                addresses.retain(|_, w| w.strong_count() > 0);
            }
            addresses.insert(ip, Arc::downgrade(&s));
            s
        });
        PeerBudget {
            budget: self.clone(),
            ip,
            address,
        }
    }

    /// Bytes free now for requests of any size (for tests and metrics);
    /// `None` when unlimited.
    pub fn available(&self) -> Option<usize> {
        self.pools.as_ref().map(|p| p.shared.available_permits())
    }

    /// Bytes of the small requests' reserve free now; `None` when
    /// unlimited.
    pub fn reserve_available(&self) -> Option<usize> {
        self.pools.as_ref().map(|p| p.reserve.available_permits())
    }
}

/// One connection's view of the [`RequestBudget`].
#[derive(Debug)]
pub struct PeerBudget {
    budget: RequestBudget,
    ip: IpAddr,
    /// The address's share (held by all its connections).
    address: Option<Arc<Semaphore>>,
}

impl PeerBudget {
    /// Takes the bytes of a whole request of `len` bytes, at most
    /// [`SMALL_REQUEST`]: from the reserve or the shared pool, whichever
    /// has room first, never waiting behind large requests. More than the
    /// reserve at once takes all of it.
    pub async fn acquire_small(&self, len: usize) -> BudgetPermit {
        debug_assert!(len <= SMALL_REQUEST);
        let Some(p) = &self.budget.pools else {
            return BudgetPermit::default();
        };
        let n = len.clamp(1, p.reserve_size).min(SMALL_REQUEST) as u32;
        if let Ok(r) = p.reserve.clone().try_acquire_many_owned(n) {
            return BudgetPermit::of([Some(r), None, None]);
        }
        let shared_n = len.clamp(1, p.shared_size).min(SMALL_REQUEST) as u32;
        if let Ok(s) = p.shared.clone().try_acquire_many_owned(shared_n) {
            return BudgetPermit::of([None, Some(s), None]);
        }
        // Whichever frees up first; the other wait is given up (a dropped
        // acquisition returns what it had been assigned).
        tokio::select! {
            r = p.reserve.clone().acquire_many_owned(n) => BudgetPermit::of([r.ok(), None, None]),
            s = p.shared.clone().acquire_many_owned(shared_n) => BudgetPermit::of([None, s.ok(), None]),
        }
    }

    /// Takes `len` more bytes of a large request from this address's share
    /// and the shared pool, waiting while they are held. More than the
    /// address's share at once takes all of it.
    pub async fn acquire_large(&self, len: usize) -> BudgetPermit {
        let (Some(p), Some(address)) = (&self.budget.pools, &self.address) else {
            return BudgetPermit::default();
        };
        // The address's share first: connections over it wait there, not
        // in the shared pool's queue ahead of other addresses.
        let n = len.clamp(1, p.per_address).min(u32::MAX as usize) as u32;
        let mine = address.clone().acquire_many_owned(n).await.ok();
        let shared = p.shared.clone().acquire_many_owned(n).await.ok();
        BudgetPermit::of([None, shared, mine])
    }
}

impl Drop for PeerBudget {
    fn drop(&mut self) {
        let (Some(p), Some(address)) = (&self.budget.pools, self.address.take()) else {
            return;
        };
        drop(address);
        let mut addresses = p.addresses.lock();
        // Permits still held keep the share alive; it is forgotten once
        // nothing from the address holds it.
        if addresses
            .get(&self.ip)
            .is_some_and(|w| w.strong_count() == 0)
        {
            addresses.remove(&self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_counted_in_all_and_per_address() {
        let t = ConnectionTracker::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = t.admit(a).unwrap();
        let _a2 = t.admit(a).unwrap();
        assert_eq!(t.admit(a).unwrap_err(), Refused::PerIp(2));
        let _b1 = t.admit(b).unwrap();
        assert_eq!(t.admit(b).unwrap_err(), Refused::Total(3));
        drop(a1);
        assert_eq!(t.open(), 2);
        let _a3 = t.admit(a).unwrap();
    }

    fn a() -> IpAddr {
        "10.0.0.1".parse().unwrap()
    }

    fn b() -> IpAddr {
        "10.0.0.2".parse().unwrap()
    }

    /// Whether `f` finishes at once (without anything else running).
    async fn at_once<T>(f: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::time::timeout(std::time::Duration::from_millis(50), f)
            .await
            .ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_makes_readers_wait() {
        // 800 bytes: a reserve of 100, 700 shared, 350 per address.
        let budget = RequestBudget::new(Some(800));
        let (from_a, other_a) = (budget.for_peer(a()), budget.for_peer(a()));
        // More than the address's share at once takes all of it.
        let huge = from_a.acquire_large(1000).await;
        assert_eq!(budget.available(), Some(350));
        drop(huge);
        let first = from_a.acquire_large(300).await;
        let waiting = tokio::spawn(async move { other_a.acquire_large(100).await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits while 300 of 350 are held");
        drop(first);
        let p = at_once(waiting).await.unwrap().unwrap();
        drop(p);
        assert_eq!(budget.available(), Some(700));
        assert_eq!(budget.reserve_available(), Some(100));
        assert_eq!(RequestBudget::new(None).available(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn large_requests_never_stop_small_ones() {
        let budget = RequestBudget::new(Some(800));
        let (from_a, from_b) = (budget.for_peer(a()), budget.for_peer(b()));
        // Two addresses hold all of the shared pool; more large bytes wait.
        let held = [
            from_a.acquire_large(350).await,
            from_b.acquire_large(350).await,
        ];
        assert_eq!(budget.available(), Some(0));
        assert!(at_once(from_b.acquire_large(1)).await.is_none());
        // Small requests of either address come from the reserve.
        let small = at_once(from_a.acquire_small(60)).await.expect("served");
        let more = at_once(from_a.acquire_small(40)).await.expect("served");
        assert_eq!(budget.reserve_available(), Some(0));
        // The reserve spent too: a small request waits for whichever frees
        // up first.
        let third = budget.for_peer(a());
        let waiting = tokio::spawn(async move { third.acquire_small(30).await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(held);
        let p = at_once(waiting).await.unwrap().unwrap();
        drop((p, small, more));
        assert_eq!(budget.available(), Some(700));
        assert_eq!(budget.reserve_available(), Some(100));
    }

    #[tokio::test(start_paused = true)]
    async fn one_address_cannot_take_another_addresss_share() {
        let budget = RequestBudget::new(Some(800));
        let attacker: Vec<_> = (0..10).map(|_| budget.for_peer(a())).collect();
        let mut held = Vec::new();
        for c in &attacker[..7] {
            held.push(
                at_once(c.acquire_large(50))
                    .await
                    .expect("within the share"),
            );
        }
        // The address's share is spent: its next bytes wait ...
        assert!(at_once(attacker[7].acquire_large(50)).await.is_none());
        // ... while another address still gets the rest.
        let other = budget.for_peer(b());
        let p = at_once(other.acquire_large(350)).await.expect("b's share");
        drop((p, held));
        assert_eq!(budget.available(), Some(700));
    }

    #[test]
    fn an_address_is_forgotten_with_its_last_connection() {
        let budget = RequestBudget::new(Some(800));
        let count = || budget.pools.as_ref().unwrap().addresses.lock().len();
        let (one, two) = (budget.for_peer(a()), budget.for_peer(a()));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let three = budget.for_peer(mapped);
        assert_eq!(count(), 1, "an IPv4-mapped address is the same address");
        drop((one, two));
        assert_eq!(count(), 1);
        drop(three);
        assert_eq!(count(), 0);
    }
}
