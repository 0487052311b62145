//! Limits shared by every connection of a listener, whatever its protocol:
//! how many connections (in all and per IP address), and how many request
//! bytes may be held at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

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

/// `queued.max.request.bytes`: request bytes held at once (from the size
/// prefix until the response is written), over all connections.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    bytes: Option<(Arc<Semaphore>, usize)>,
}

/// Bytes of the budget held by one request; released on drop.
#[derive(Debug, Default)]
pub struct BudgetPermit {
    permit: Option<OwnedSemaphorePermit>,
}

impl BudgetPermit {
    /// Adds `other`'s bytes to this permit.
    pub fn merge(&mut self, other: BudgetPermit) {
        match (&mut self.permit, other.permit) {
            (Some(p), Some(o)) => p.merge(o),
            (slot @ None, o) => *slot = o,
            (Some(_), None) => {}
        }
    }
}

impl RequestBudget {
    /// A budget of `limit` bytes, or unlimited.
    pub fn new(limit: Option<u64>) -> RequestBudget {
        let bytes = limit.map(|l| {
            let l = (l as usize).min(Semaphore::MAX_PERMITS);
            (Arc::new(Semaphore::new(l)), l)
        });
        RequestBudget { bytes }
    }

    /// Takes `len` bytes of the budget, waiting while others hold it. More
    /// than the whole budget at once takes all of it.
    pub async fn acquire(&self, len: usize) -> BudgetPermit {
        let Some((sem, limit)) = &self.bytes else {
            return BudgetPermit { permit: None };
        };
        let n = len.clamp(1, *limit).min(u32::MAX as usize) as u32;
        // The semaphore is never closed.
        let permit = sem.clone().acquire_many_owned(n).await.ok();
        BudgetPermit { permit }
    }

    /// Bytes free now (for tests and metrics); `None` when unlimited.
    pub fn available(&self) -> Option<usize> {
        self.bytes.as_ref().map(|(s, _)| s.available_permits())
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

    #[tokio::test]
    async fn the_budget_makes_readers_wait() {
        let budget = RequestBudget::new(Some(100));
        // Larger than the whole budget: takes all of it.
        let huge = budget.acquire(1000).await;
        assert_eq!(budget.available(), Some(0));
        drop(huge);
        let first = budget.acquire(60).await;
        assert_eq!(budget.available(), Some(40));
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.acquire(50).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits while 60 of 100 are held");
        drop(first);
        let p = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        drop(p);
        assert_eq!(budget.available(), Some(100));
        assert_eq!(RequestBudget::new(None).available(), None);
    }
}
