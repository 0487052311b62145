//! Where a group's or transactional id's state lives (Kafka's group and
//! transaction coordinators over `__consumer_offsets`).
//!
//! A cluster keeps that state in the replicated `__consumer_offsets`
//! topic: an id's slot is one of its partitions, and the id's coordinator
//! is that partition's leader. A broker loads a slot's state (groups,
//! committed offsets, transactions, offsets staged for transactions)
//! from the partition's log when it becomes its leader, serves it while
//! it leads in that leader epoch, and drops it when it stops; each write
//! is answered once the in-sync replicas have it, so a new leader loads
//! every acknowledged commit.
//!
//! A standalone node, and a cluster that placed its coordinators on
//! brokers before the group log was replicated, keep everything in the
//! broker's own group log ([`Broker::groups`]), as before.

mod slots;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use model::LeaderEpoch;
use tracing::{info, warn};

use crate::group::coordinator::GroupCoordinator;
use crate::group::store::{GroupLog, OFFSETS_TOPIC};
use crate::metadata_records::NodeId;
use crate::state_log::SlotLog;
use crate::{Broker, Error, Partition};
pub(crate) use slots::slot_write_error;
pub use slots::Coordinator;
pub(crate) use slots::GroupSlots;
use slots::{Loaded, Slot};

impl Broker {
    /// Whether groups and transactions live in the replicated group log
    /// (a cluster whose coordinators were never placed on brokers).
    pub fn replicated_groups(&self) -> bool {
        self.cluster_view().coordinators.is_empty()
    }

    /// How many slots the replicated group log has (0 before it exists).
    fn slot_count(&self) -> usize {
        self.topic(OFFSETS_TOPIC).map_or(0, |t| t.partition_count())
    }

    /// The slot (`__consumer_offsets` partition) of a group or
    /// transactional id.
    pub(crate) fn slot_of(&self, key: &str) -> Option<i32> {
        if self.replicated_groups() {
            let n = self.slot_count();
            return (n > 0).then(|| crate::cluster::coordinator_slot(key, n) as i32);
        }
        let view = self.cluster_view();
        (!view.coordinators.is_empty())
            .then(|| crate::cluster::coordinator_slot(key, view.coordinators.len()) as i32)
    }

    /// The broker coordinating `key`, live or not: its slot's leader, or
    /// the broker its slot was placed on.
    pub(crate) fn coordinator_node(&self, key: &str) -> Option<NodeId> {
        if !self.replicated_groups() {
            let view = self.cluster_view();
            return (!view.coordinators.is_empty()).then(|| {
                view.coordinators[crate::cluster::coordinator_slot(key, view.coordinators.len())]
            });
        }
        let slot = self.slot_of(key)?;
        let topic = self.topic(OFFSETS_TOPIC)?;
        topic
            .placements
            .get(slot as usize)
            .map(|s| s.leader)
            .filter(|l| *l >= 0)
    }

    /// The highest coordinator epoch a transaction marker may carry: the
    /// highest leader epoch of a group-log slot (0 where coordinators
    /// never move).
    pub(crate) fn max_coordinator_epoch(&self) -> i32 {
        if !self.replicated_groups() {
            return 0;
        }
        self.topic(OFFSETS_TOPIC)
            .and_then(|t| t.placements.iter().map(|s| s.leader_epoch).max())
            .unwrap_or(0)
    }

    /// The coordinator of group or transactional id `key` on this broker:
    /// [`Error::NotCoordinator`] if another broker coordinates it,
    /// [`Error::CoordinatorLoadInProgress`] while its state is loading.
    pub fn coordinator(&self, key: &str) -> Result<Coordinator, Error> {
        if !self.replicated_groups() {
            if !self.coordinates(key) {
                return Err(Error::NotCoordinator(format!(
                    "this broker does not coordinate {key:?}"
                )));
            }
            return Ok(Coordinator::home(self.home_groups()));
        }
        let Some(slot) = self.slot_of(key) else {
            return Err(Error::NotCoordinator(format!(
                "no coordinator is placed for {key:?} yet"
            )));
        };
        self.slot_coordinator(slot)
    }

    /// The coordinator of slot `slot` on this broker (as
    /// [`Broker::coordinator`] for the ids of that slot).
    pub(crate) fn slot_coordinator(&self, slot: i32) -> Result<Coordinator, Error> {
        if !self.replicated_groups() {
            return Ok(Coordinator::home(self.home_groups()));
        }
        match self.group_slots.slots.read().get(&slot) {
            Some(Slot::Loaded(l)) => l.coordinator().ok_or_else(|| {
                Error::NotCoordinator(format!(
                    "this broker no longer leads {OFFSETS_TOPIC}-{slot}"
                ))
            }),
            Some(Slot::Loading(_)) => Err(Error::CoordinatorLoadInProgress(format!(
                "the state of {OFFSETS_TOPIC}-{slot} is loading"
            ))),
            None => Err(Error::NotCoordinator(format!(
                "this broker does not lead {OFFSETS_TOPIC}-{slot}"
            ))),
        }
    }

    /// Every coordinator this broker serves: its loaded slots, or its
    /// own group log.
    pub fn coordinators_here(&self) -> Vec<Coordinator> {
        if !self.replicated_groups() {
            return vec![Coordinator::home(self.home_groups())];
        }
        self.group_slots
            .slots
            .read()
            .values()
            .filter_map(|s| match s {
                Slot::Loaded(l) => l.coordinator(),
                Slot::Loading(_) => None,
            })
            .collect()
    }

    /// The broker's own group coordinator and every loaded slot's (each
    /// once): what keeps state about topics.
    pub(crate) fn coordinators_with_home(&self) -> Vec<Arc<GroupCoordinator>> {
        let mut all = vec![self.home_groups()];
        if self.replicated_groups() {
            all.extend(self.coordinators_here().into_iter().map(|c| c.groups));
        }
        all
    }

    /// Loads the slots this broker now leads (in their current leader
    /// epoch) and drops the others. Cheap when nothing changed.
    pub fn reconcile_group_slots(self: &Arc<Self>) {
        if !self.replicated_groups() {
            return;
        }
        let Some(topic) = self.topic(OFFSETS_TOPIC) else {
            return;
        };
        let mut wanted: HashMap<i32, (Arc<Partition>, LeaderEpoch)> = HashMap::new();
        for p in &topic.partitions {
            let epoch = match p.replica() {
                Some(r) => r.leading_epoch().filter(|e| *e == p.leader_epoch()),
                None => p.leads().then(|| p.leader_epoch()),
            };
            if let Some(e) = epoch {
                wanted.insert(p.tp.partition.0, (p.clone(), e));
            }
        }
        let mut to_load = Vec::new();
        {
            let mut slots = self.group_slots.slots.write();
            slots.retain(|slot, s| {
                let keep = match (&*s, wanted.get(slot)) {
                    (Slot::Loading(e), Some((_, w))) => e == w,
                    (Slot::Loaded(l), Some((_, w))) => l.epoch == *w,
                    (_, None) => false,
                };
                if !keep {
                    if let Slot::Loaded(l) = s {
                        info!(slot, epoch = l.epoch.0, "unloading group coordinator state");
                        l.groups.unload();
                    }
                }
                keep
            });
            for (slot, (p, e)) in wanted {
                if let std::collections::hash_map::Entry::Vacant(v) = slots.entry(slot) {
                    v.insert(Slot::Loading(e));
                    to_load.push((slot, p, e));
                }
            }
        }
        for (slot, p, e) in to_load {
            let b = Arc::downgrade(self);
            tokio::task::spawn_blocking(move || load_slot(b, slot, p, e));
        }
    }

    /// Keeps the loaded slots in step with leadership until the broker is
    /// dropped: after each leadership change and metadata commit, and
    /// every second (a failed load is retried).
    pub fn spawn_group_slot_keeper(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let mut leadership = self.watch_leadership();
        let mut applied = self.cluster.applied.subscribe();
        tokio::spawn(async move {
            loop {
                match weak.upgrade() {
                    Some(b) => b.reconcile_group_slots(),
                    None => return,
                }
                tokio::select! {
                    _ = leadership.changed() => {}
                    _ = applied.changed() => {}
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
        })
    }
}

/// Reads slot `slot`'s state from its partition as leader in `epoch` and
/// serves it, unless leadership moved on meanwhile. Blocking.
fn load_slot(broker: Weak<Broker>, slot: i32, partition: Arc<Partition>, epoch: LeaderEpoch) {
    let Some(b) = broker.upgrade() else {
        return;
    };
    let started = std::time::Instant::now();
    let config = crate::group::coordinator_config(&b.config());
    let commit_timeout = std::time::Duration::from_millis(
        b.config().int_value("offsets.commit.timeout.ms").max(1) as u64,
    );
    let log = GroupLog::new(Arc::new(SlotLog::new(
        partition.clone(),
        epoch,
        commit_timeout,
    )));
    let opened = GroupCoordinator::open(log, config).inspect(|g| {
        // Offsets of topics deleted while another broker led the slot.
        b.forget_state_of_deleted_topics(g);
    });
    let mut slots = b.group_slots.slots.write();
    if !matches!(slots.get(&slot), Some(Slot::Loading(e)) if *e == epoch) {
        return;
    }
    match opened {
        Ok(groups) => {
            let groups = Arc::new(groups);
            let timers = spawn_slot_timers(broker.clone(), groups.clone());
            info!(
                slot,
                epoch = epoch.0,
                ms = started.elapsed().as_millis() as u64,
                "loaded group coordinator state"
            );
            slots.insert(
                slot,
                Slot::Loaded(Arc::new(Loaded {
                    partition,
                    epoch,
                    groups,
                    timers,
                    commit_timeout,
                })),
            );
        }
        Err(e) => {
            warn!(
                slot,
                "could not load group coordinator state (retried): {e}"
            );
            slots.remove(&slot);
        }
    }
}

/// Runs the timers of a slot's coordinator until the task is aborted (the
/// slot is unloaded) or the broker is gone.
fn spawn_slot_timers(
    broker: Weak<Broker>,
    groups: Arc<GroupCoordinator>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Some(b) = broker.upgrade() else {
                return;
            };
            let topics = crate::groups::topic_infos(&b);
            drop(b);
            let next = groups.tick(&topics);
            groups.wait_for_work(next).await;
        }
    })
}
