//! The controller's view of the brokers' liveness: registrations,
//! heartbeats and fencing, as Kafka's `BrokerHeartbeatManager` and
//! `ClusterControlManager` decide them.
//!
//! Sans-IO: events (a registration, a heartbeat, the passing of time) come
//! in with the time, and what must change comes out as [`MetadataRecord`]s
//! for the controller to commit; the answer to a broker is given once they
//! are committed. Heartbeat times live only in the active controller's
//! memory, as in Kafka: a newly active controller starts every broker's
//! session afresh ([`Registry::activate`]).

use std::collections::BTreeMap;

use crate::image::{BrokerRegistration, Metadata};
use crate::records::{MetadataRecord, NodeId};

/// Kafka's `broker.session.timeout.ms` default.
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 9_000;

/// Why the controller refused a broker.
#[derive(Debug, Clone, PartialEq)]
pub enum RegistryError {
    /// Another live process holds this node id (Kafka's
    /// DUPLICATE_BROKER_REGISTRATION).
    Duplicate(NodeId),
    /// A heartbeat of another registration than the current one
    /// (STALE_BROKER_EPOCH): older, when another process registered since
    /// (see [`RegistryError::superseded`]), or newer than the metadata
    /// this controller has applied so far.
    StaleEpoch {
        /// The node.
        node: NodeId,
        /// The epoch the heartbeat carried.
        sent: i64,
        /// The node's registration epoch in the metadata.
        current: i64,
    },
    /// A heartbeat from a broker that never registered.
    NotRegistered(NodeId),
    /// A new process on the data directory of a registration that still
    /// heartbeated moments ago: it may be a copy of a live broker's
    /// directory rather than the crashed broker's successor, so it waits
    /// until the old registration misses its heartbeats.
    PredecessorAlive(NodeId),
    /// A heartbeat of a registration that ended with a controlled
    /// shutdown.
    ShutDown {
        /// The node.
        node: NodeId,
        /// The registration that shut down.
        epoch: i64,
    },
}

impl RegistryError {
    /// Whether the broker that sent the request was replaced by a later
    /// registration of its node id: that process must stop serving.
    pub fn superseded(&self) -> bool {
        matches!(self, RegistryError::StaleEpoch { sent, current, .. } if current > sent)
    }
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryError::Duplicate(n) => {
                write!(f, "broker {n} is registered by another live process")
            }
            RegistryError::StaleEpoch {
                node,
                sent,
                current,
            } => {
                write!(
                    f,
                    "broker {node} epoch {sent} is not its current registration (epoch {current})"
                )
            }
            RegistryError::NotRegistered(n) => write!(f, "broker {n} is not registered"),
            RegistryError::PredecessorAlive(n) => write!(
                f,
                "broker {n} heartbeated from this data directory moments ago (a copied directory, or a process that has not stopped yet)"
            ),
            RegistryError::ShutDown { node, epoch } => {
                write!(f, "broker {node} epoch {epoch} has shut down")
            }
        }
    }
}

/// The data directory a registering process runs from.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectoryClaim<'a> {
    /// Its `directory.id`: the same id is the same directory or a copy.
    pub id: &'a str,
    /// The identity of the directory lock the process holds
    /// (`storage::LogManager::lock_identity`); empty where unknown.
    pub lock: &'a str,
}

impl<'a> From<&'a str> for DirectoryClaim<'a> {
    fn from(id: &'a str) -> Self {
        DirectoryClaim { id, lock: "" }
    }
}

/// What a heartbeat is answered with.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatAnswer {
    /// The records to commit before answering (an unfencing).
    pub records: Vec<MetadataRecord>,
    /// Whether the broker is fenced once they are committed.
    pub fenced: bool,
}

/// Last heartbeat times of the registered brokers.
#[derive(Debug, Clone)]
pub struct Registry {
    session_timeout_ms: u64,
    heartbeat_interval_ms: u64,
    last_seen_ms: BTreeMap<NodeId, u64>,
    /// The broker that shares this controller's process when nothing else
    /// can reach the controller (a quorum of one without a network,
    /// `magnetar standalone`).
    in_process: Option<NodeId>,
}

impl Registry {
    /// A registry that fences a broker `session_timeout_ms` after its last
    /// heartbeat; brokers heartbeat every `heartbeat_interval_ms`.
    pub fn new(session_timeout_ms: u64, heartbeat_interval_ms: u64) -> Registry {
        Registry {
            session_timeout_ms,
            heartbeat_interval_ms,
            last_seen_ms: BTreeMap::new(),
            in_process: None,
        }
    }

    /// The controller has no network and `node` is the broker in its own
    /// process, the only one that can ever reach it. That broker lives
    /// exactly as long as the controller does, so its session never
    /// expires (a stalled process must not fence itself and take its
    /// partitions offline), and an earlier registration of it is always
    /// a process that is gone, so a restart registers at once.
    pub fn in_process(mut self, node: NodeId) -> Registry {
        self.in_process = Some(node);
        self
    }

    /// This controller became active at `now_ms`: every registered broker
    /// gets a full session from now, since earlier heartbeats went to
    /// another controller (except those that shut down).
    pub fn activate(&mut self, m: &Metadata, now_ms: u64) {
        self.last_seen_ms = m
            .brokers
            .iter()
            .filter(|(_, b)| !b.shut_down)
            .map(|(n, _)| (*n, now_ms))
            .collect();
    }

    /// Whether `node` heartbeated within the last two intervals: a process
    /// that has stopped misses them, a live one does not.
    fn heartbeating(&self, node: NodeId, now_ms: u64) -> bool {
        self.last_seen_ms
            .get(&node)
            .is_some_and(|t| now_ms.saturating_sub(*t) < 2 * self.heartbeat_interval_ms)
    }

    fn alive(&self, node: NodeId, now_ms: u64) -> bool {
        self.last_seen_ms
            .get(&node)
            .is_some_and(|t| now_ms.saturating_sub(*t) < self.session_timeout_ms)
    }

    /// A broker process starts and registers from its data directory
    /// `directory`. The same incarnation again (a retried request), a node
    /// whose session expired or ended (a clean shutdown), or a new process
    /// on the same data directory holding the lock its predecessor held
    /// (the predecessor is gone), or on the same data directory once the
    /// old registration has missed two heartbeats (where the locks cannot
    /// be compared: one still heartbeating runs on a copy of the
    /// directory) registers anew with a higher epoch, fenced; another incarnation
    /// while the current one still has a session (fenced or not, as Kafka
    /// checks) is refused.
    pub fn register<'d>(
        &mut self,
        m: &Metadata,
        node: NodeId,
        incarnation: &str,
        directory: impl Into<DirectoryClaim<'d>>,
        endpoints: BTreeMap<String, String>,
        now_ms: u64,
    ) -> Result<MetadataRecord, RegistryError> {
        let directory = directory.into();
        let old = m
            .brokers
            .get(&node)
            .filter(|_| self.in_process != Some(node));
        if let Some(old) = old {
            let same_directory = !directory.id.is_empty() && old.directory == directory.id;
            let same_lock = !directory.lock.is_empty() && old.lock == directory.lock;
            if old.incarnation != incarnation && !old.shut_down && self.alive(node, now_ms) {
                if !same_directory {
                    return Err(RegistryError::Duplicate(node));
                }
                if !same_lock && self.heartbeating(node, now_ms) {
                    return Err(RegistryError::PredecessorAlive(node));
                }
            }
        }
        self.last_seen_ms.insert(node, now_ms);
        Ok(MetadataRecord::BrokerRegistered {
            node,
            registration: BrokerRegistration {
                epoch: m.last_broker_epoch + 1,
                incarnation: incarnation.to_string(),
                directory: directory.id.to_string(),
                lock: directory.lock.to_string(),
                endpoints,
                fenced: true,
                shut_down: false,
            },
        })
    }

    /// A heartbeat of `node`'s registration `epoch`; `caught_up` says the
    /// broker has applied the metadata up to the controller's last commit
    /// it knew of (only then is it unfenced).
    pub fn heartbeat(
        &mut self,
        m: &Metadata,
        node: NodeId,
        epoch: i64,
        caught_up: bool,
        now_ms: u64,
    ) -> Result<HeartbeatAnswer, RegistryError> {
        let reg = m
            .brokers
            .get(&node)
            .ok_or(RegistryError::NotRegistered(node))?;
        if reg.epoch != epoch {
            return Err(RegistryError::StaleEpoch {
                node,
                sent: epoch,
                current: reg.epoch,
            });
        }
        if reg.shut_down {
            // A heartbeat sent before the shutdown, arriving after it.
            return Err(RegistryError::ShutDown { node, epoch });
        }
        self.last_seen_ms.insert(node, now_ms);
        if reg.fenced && caught_up {
            return Ok(HeartbeatAnswer {
                records: vec![MetadataRecord::BrokerFencing {
                    node,
                    epoch,
                    fenced: false,
                    shutdown: false,
                }],
                fenced: false,
            });
        }
        Ok(HeartbeatAnswer {
            records: Vec::new(),
            fenced: reg.fenced,
        })
    }

    /// `node`'s registration `epoch` shuts down cleanly (Kafka's controlled
    /// shutdown): its session ends now, so it is fenced at once (its
    /// partitions are reported offline instead of pointing clients at a
    /// closed port) and its next process registers without waiting. The
    /// registration stays fenced for good: an unfencing decided before
    /// and committed after the shutdown, or a late heartbeat, cannot undo
    /// it (see [`MetadataRecord::BrokerFencing`]).
    pub fn shutdown(
        &mut self,
        m: &Metadata,
        node: NodeId,
        epoch: i64,
    ) -> Result<Vec<MetadataRecord>, RegistryError> {
        let reg = m
            .brokers
            .get(&node)
            .ok_or(RegistryError::NotRegistered(node))?;
        if reg.epoch != epoch {
            return Err(RegistryError::StaleEpoch {
                node,
                sent: epoch,
                current: reg.epoch,
            });
        }
        self.last_seen_ms.remove(&node);
        if reg.shut_down {
            return Ok(Vec::new());
        }
        Ok(vec![MetadataRecord::BrokerFencing {
            node,
            epoch,
            fenced: true,
            shutdown: true,
        }])
    }

    /// Time passed: fence every unfenced broker whose session expired.
    pub fn tick(&self, m: &Metadata, now_ms: u64) -> Vec<MetadataRecord> {
        m.brokers
            .iter()
            .filter(|(n, b)| !b.fenced && !self.alive(**n, now_ms) && self.in_process != Some(**n))
            .map(|(n, b)| MetadataRecord::BrokerFencing {
                node: *n,
                epoch: b.epoch,
                fenced: true,
                shutdown: false,
            })
            .collect()
    }

    /// The brokers new partitions may be placed on: registered and unfenced.
    pub fn usable(m: &Metadata) -> Vec<NodeId> {
        m.brokers
            .iter()
            .filter(|(_, b)| !b.fenced)
            .map(|(n, _)| *n)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::apply;

    fn commit(m: &mut Metadata, records: &[MetadataRecord]) {
        for r in records {
            apply(m, r).unwrap();
        }
    }

    fn endpoints(port: u16) -> BTreeMap<String, String> {
        [("kafka".to_string(), format!("127.0.0.1:{port}"))].into()
    }

    #[test]
    fn register_catch_up_unfence_expire_and_come_back() {
        let mut m = Metadata::new("c".into());
        let mut r = Registry::new(9_000, 1_000);
        let rec = r.register(&m, 1, "a", "", endpoints(9092), 0).unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].epoch, 1);
        assert!(m.brokers[&1].fenced, "a broker starts fenced");
        assert!(Registry::usable(&m).is_empty());

        // Not caught up yet: stays fenced; then unfenced.
        let a = r.heartbeat(&m, 1, 1, false, 1_000).unwrap();
        assert_eq!(
            a,
            HeartbeatAnswer {
                records: vec![],
                fenced: true
            }
        );
        let a = r.heartbeat(&m, 1, 1, true, 2_000).unwrap();
        assert!(!a.fenced);
        commit(&mut m, &a.records);
        assert_eq!(Registry::usable(&m), vec![1]);

        // Another process with the same id is refused while this one lives.
        let mut fresh = Metadata::new("c".into());
        let mut r2 = Registry::new(9_000, 1_000);
        let first = r2.register(&fresh, 5, "a", "", endpoints(1), 0).unwrap();
        commit(&mut fresh, &[first]);
        assert_eq!(
            r2.register(&fresh, 5, "b", "", endpoints(2), 100),
            Err(RegistryError::Duplicate(5)),
            "even while the first is still fenced"
        );
        assert_eq!(
            r.register(&m, 1, "b", "", endpoints(9093), 5_000),
            Err(RegistryError::Duplicate(1))
        );
        // Heartbeats stop: fenced once the session has expired, not before.
        assert!(r.tick(&m, 10_999).is_empty());
        let fence = r.tick(&m, 11_000);
        assert_eq!(
            fence,
            vec![MetadataRecord::BrokerFencing {
                node: 1,
                epoch: 1,
                fenced: true,
                shutdown: false,
            }]
        );
        commit(&mut m, &fence);
        assert!(Registry::usable(&m).is_empty());

        // The new process registers with a higher epoch; the old one's
        // heartbeats are stale from then on.
        let rec = r.register(&m, 1, "b", "", endpoints(9093), 12_000).unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].epoch, 2);
        assert_eq!(
            r.heartbeat(&m, 1, 1, true, 12_500),
            Err(RegistryError::StaleEpoch {
                node: 1,
                sent: 1,
                current: 2
            })
        );
        assert_eq!(
            r.heartbeat(&m, 2, 1, true, 12_500),
            Err(RegistryError::NotRegistered(2))
        );
        // Unregistered and back: a higher epoch still; the old one stays stale.
        let gone = MetadataRecord::BrokerUnregistered { node: 1, epoch: 1 };
        assert!(
            apply(&mut m.clone(), &gone).is_err(),
            "epoch 1 is not the registration"
        );
        commit(
            &mut m,
            &[MetadataRecord::BrokerUnregistered { node: 1, epoch: 2 }],
        );
        let rec = r.register(&m, 1, "c", "", endpoints(9094), 30_000).unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].epoch, 3);
        assert_eq!(
            r.heartbeat(&m, 1, 2, true, 30_100),
            Err(RegistryError::StaleEpoch {
                node: 1,
                sent: 2,
                current: 3
            })
        );
        // A stale registration record cannot overwrite a newer one.
        let mut older = m.brokers[&1].clone();
        older.epoch = 1;
        assert!(apply(
            &mut m.clone(),
            &MetadataRecord::BrokerRegistered {
                node: 1,
                registration: older
            }
        )
        .is_err());
    }

    #[test]
    fn the_in_process_broker_registers_at_once_and_never_expires() {
        let mut m = Metadata::new("c".into());
        let mut r = Registry::new(9_000, 1_000).in_process(1);
        let rec = r.register(&m, 1, "a", "d", endpoints(9092), 0).unwrap();
        commit(&mut m, &[rec]);
        let a = r.heartbeat(&m, 1, 1, true, 500).unwrap();
        commit(&mut m, &a.records);
        // A stall far past the session: still unfenced.
        assert!(r.tick(&m, 60_000).is_empty());
        // A restarted process (the controller restarted with it) registers
        // at once, although the old registration has a session.
        let mut fresh = Registry::new(9_000, 1_000).in_process(1);
        fresh.activate(&m, 70_000);
        let rec = fresh
            .register(&m, 1, "b", "d", endpoints(9092), 70_001)
            .unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].epoch, 2);
        // Without the rule, the same registration waits for the old one
        // to miss its heartbeats, and another directory is refused.
        let mut plain = Registry::new(9_000, 1_000);
        plain.activate(&m, 80_000);
        assert_eq!(
            plain.register(&m, 1, "c", "d", endpoints(9092), 80_001),
            Err(RegistryError::PredecessorAlive(1))
        );
        assert_eq!(
            plain.register(&m, 1, "c", "other", endpoints(9092), 80_001),
            Err(RegistryError::Duplicate(1))
        );
        // Other brokers keep the usual rules.
        let mut r = Registry::new(9_000, 1_000).in_process(1);
        let rec = r.register(&m, 2, "x", "e", endpoints(9093), 0).unwrap();
        commit(&mut m, &[rec]);
        let a = r.heartbeat(&m, 2, 3, true, 1).unwrap();
        commit(&mut m, &a.records);
        assert_eq!(r.tick(&m, 60_000).len(), 1);
    }

    #[test]
    fn a_new_controller_gives_every_broker_a_full_session() {
        let mut m = Metadata::new("c".into());
        let mut r = Registry::new(9_000, 1_000);
        for node in 1..=3 {
            let rec = r
                .register(&m, node, "x", "", endpoints(9000 + node as u16), 0)
                .unwrap();
            commit(&mut m, &[rec]);
            let epoch = m.brokers[&node].epoch;
            let a = r.heartbeat(&m, node, epoch, true, 0).unwrap();
            commit(&mut m, &a.records);
        }
        assert_eq!(Registry::usable(&m), vec![1, 2, 3]);
        // The controller fails over at t=60s; the new one knows no heartbeat.
        let mut next = Registry::new(9_000, 1_000);
        assert_eq!(
            next.tick(&m, 60_000).len(),
            3,
            "without activate, all would be fenced"
        );
        next.activate(&m, 60_000);
        assert!(next.tick(&m, 68_999).is_empty());
        next.heartbeat(&m, 2, m.brokers[&2].epoch, true, 65_000)
            .unwrap();
        let fenced: Vec<NodeId> = next
            .tick(&m, 70_000)
            .into_iter()
            .map(|r| match r {
                MetadataRecord::BrokerFencing { node, .. } => node,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(fenced, vec![1, 3]);
    }

    #[test]
    fn the_same_directory_lock_replaces_a_predecessor_at_once() {
        let mut m = Metadata::new("c".into());
        let mut r = Registry::new(9_000, 500);
        let claim = |lock| DirectoryClaim { id: "dir-1", lock };
        let rec = r
            .register(&m, 1, "a", claim("boot:8:42"), endpoints(1), 0)
            .unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].lock, "boot:8:42");
        let a = r.heartbeat(&m, 1, 1, true, 100).unwrap();
        commit(&mut m, &a.records);
        // Another lock (a copy of the directory, another boot) or none
        // proves nothing: the old registration still heartbeats.
        for other in ["boot:8:43", "other-boot:8:42", ""] {
            assert_eq!(
                r.register(&m, 1, "b", claim(other), endpoints(1), 200),
                Err(RegistryError::PredecessorAlive(1)),
                "{other}"
            );
        }
        // The same lock: the predecessor is gone, no wait.
        let rec = r
            .register(&m, 1, "b", claim("boot:8:42"), endpoints(1), 200)
            .unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].epoch, 2);
        assert_eq!(m.brokers[&1].incarnation, "b");
        // Another directory id with that lock is still another broker.
        let other = DirectoryClaim {
            id: "dir-2",
            lock: "boot:8:42",
        };
        assert_eq!(
            r.register(&m, 1, "c", other, endpoints(1), 300),
            Err(RegistryError::Duplicate(1))
        );
    }

    #[test]
    fn the_same_data_directory_or_a_clean_shutdown_registers_at_once() {
        let mut m = Metadata::new("c".into());
        let mut r = Registry::new(9_000, 500);
        let rec = r.register(&m, 1, "a", "dir-1", endpoints(1), 0).unwrap();
        commit(&mut m, &[rec]);
        let a = r.heartbeat(&m, 1, 1, true, 100).unwrap();
        commit(&mut m, &a.records);
        // Another directory is another process: refused while alive.
        assert_eq!(
            r.register(&m, 1, "b", "dir-2", endpoints(1), 200),
            Err(RegistryError::Duplicate(1))
        );
        assert_eq!(
            r.register(&m, 1, "b", "", endpoints(1), 200),
            Err(RegistryError::Duplicate(1)),
            "no directory id proves nothing"
        );
        // The same directory while the old registration still heartbeats
        // is a copy of a live broker's directory: it waits.
        assert_eq!(
            r.register(&m, 1, "b", "dir-1", endpoints(1), 1_099),
            Err(RegistryError::PredecessorAlive(1))
        );
        // A crashed process's successor on the same directory: once two
        // heartbeats are missed, long before the session expires.
        let rec = r
            .register(&m, 1, "b", "dir-1", endpoints(1), 1_100)
            .unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].epoch, 2);
        assert!(m.brokers[&1].fenced);
        // The old process, if it still runs, learns it was replaced.
        let stale = r.heartbeat(&m, 1, 1, true, 1_150).unwrap_err();
        assert!(stale.superseded(), "{stale}");
        let a = r.heartbeat(&m, 1, 2, true, 1_200).unwrap();
        commit(&mut m, &a.records);
        assert_eq!(Registry::usable(&m), vec![1]);
        // A newer epoch than the metadata knows is not a replacement (a
        // controller that has not applied the registration yet).
        let ahead = r.heartbeat(&m, 1, 3, true, 1_250).unwrap_err();
        assert!(!ahead.superseded(), "{ahead}");

        // A clean shutdown fences at once and ends the session, so even a
        // process on another directory registers without waiting.
        assert_eq!(
            r.shutdown(&m, 1, 1),
            Err(RegistryError::StaleEpoch {
                node: 1,
                sent: 1,
                current: 2
            })
        );
        // An unfencing decided before the shutdown, committed after it.
        let late_unfence = MetadataRecord::BrokerFencing {
            node: 1,
            epoch: 2,
            fenced: false,
            shutdown: false,
        };
        let down = r.shutdown(&m, 1, 2).unwrap();
        assert_eq!(
            down,
            vec![MetadataRecord::BrokerFencing {
                node: 1,
                epoch: 2,
                fenced: true,
                shutdown: true,
            }]
        );
        commit(&mut m, &down);
        assert!(Registry::usable(&m).is_empty());
        commit(&mut m, &[late_unfence]);
        assert!(Registry::usable(&m).is_empty(), "the shutdown holds");
        // A heartbeat sent before the shutdown, arriving after it.
        assert_eq!(
            r.heartbeat(&m, 1, 2, true, 1_300),
            Err(RegistryError::ShutDown { node: 1, epoch: 2 })
        );
        assert!(
            r.shutdown(&m, 1, 2).unwrap().is_empty(),
            "already shut down"
        );
        assert!(r.tick(&m, 1_500).is_empty());
        // A new controller gives it no session either.
        let mut next = Registry::new(9_000, 500);
        next.activate(&m, 1_600);
        let rec = next
            .register(&m, 1, "c", "dir-3", endpoints(1), 1_700)
            .unwrap();
        commit(&mut m, &[rec]);
        assert_eq!(m.brokers[&1].epoch, 3);
        assert!(!m.brokers[&1].shut_down, "a new registration serves again");
    }
}
