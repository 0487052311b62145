//! The group coordinator: owns every group (classic and consumer protocol)
//! and every committed offset, drives the state machines' timers, keeps
//! pending JoinGroup/SyncGroup requests until the state machine answers
//! them, and writes every change to the group log before acknowledging it.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use model::now_ms;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, Notify};

use super::classic::{
    self, ClassicGroup, Effect, GroupError, JoinRequest, JoinResult, RequestId, SyncRequest,
    SyncResult,
};
use super::consumer::{ConsumerError, ConsumerGroup, Heartbeat, HeartbeatReply, TopicInfo};
use super::front_end::{FrontEndRecords, FrontEndState};
use super::slots::{classic_slot, consumer_slot};
use super::store::{CommittedOffset, GroupLog, RecordKey};
pub use super::views::{
    ConsumerGroupView, CoordinatorConfig, CoordinatorError, GroupListing, GroupView,
    ProtocolMismatch, SubscriptionsView,
};
use crate::error::CoordError;
use crate::subscription::Subscriptions;

/// A group of either protocol. Both share one namespace of group ids.
#[derive(Debug)]
pub(crate) enum Group {
    /// JoinGroup/SyncGroup protocol.
    Classic(Box<ClassicGroup>),
    /// ConsumerGroupHeartbeat protocol (KIP-848).
    Consumer(ConsumerGroup),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum GroupRecord {
    Classic(classic::GroupSnapshot),
    Consumer(ConsumerGroup),
}

enum Pending {
    Join(oneshot::Sender<Result<JoinResult, GroupError>>),
    Sync(oneshot::Sender<Result<SyncResult, GroupError>>),
}

#[derive(Default)]
struct Inner {
    groups: HashMap<String, Group>,
    offsets: HashMap<String, HashMap<(String, i32), CommittedOffset>>,
    pending: HashMap<RequestId, Pending>,
    next_request: RequestId,
    // Last persisted record of each group, to skip writing unchanged state.
    persisted: HashMap<String, Vec<u8>>,
    // The topic id the records about each topic name are about.
    topic_ids: HashMap<String, model::TopicId>,
    // Another broker coordinates these groups now: nothing waits here.
    unloaded: bool,
}

/// The coordinator of every group on this broker.
pub struct GroupCoordinator {
    inner: Mutex<Inner>,
    log: GroupLog,
    front_end: FrontEndState,
    config: CoordinatorConfig,
    wake: Notify,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator").finish_non_exhaustive()
    }
}

impl GroupCoordinator {
    /// Replays the group log into memory.
    pub fn open(log: GroupLog, config: CoordinatorConfig) -> Result<GroupCoordinator, CoordError> {
        let mut inner = Inner::default();
        let mut group_records: HashMap<String, Bytes> = HashMap::new();
        let mut front_end = FrontEndRecords::default();
        let records = log.replay()?;
        let count = records.len();
        for r in records {
            let Some(record) = front_end.take(r.key, r.value) else {
                continue;
            };
            match record {
                (
                    RecordKey::Offset {
                        group,
                        topic,
                        partition,
                    },
                    Some(v),
                ) => {
                    if let Ok(o) = serde_json::from_slice::<CommittedOffset>(&v) {
                        inner
                            .offsets
                            .entry(group)
                            .or_default()
                            .insert((topic, partition), o);
                    }
                }
                (
                    RecordKey::Offset {
                        group,
                        topic,
                        partition,
                    },
                    None,
                ) => {
                    if let Some(g) = inner.offsets.get_mut(&group) {
                        g.remove(&(topic, partition));
                        if g.is_empty() {
                            inner.offsets.remove(&group);
                        }
                    }
                }
                (RecordKey::Group { group }, Some(v)) => {
                    group_records.insert(group, v);
                }
                (RecordKey::TopicId { topic }, Some(v)) => {
                    if let Ok(id) = serde_json::from_slice(&v) {
                        inner.topic_ids.insert(topic, id);
                    }
                }
                (RecordKey::TopicId { topic }, None) => {
                    inner.topic_ids.remove(&topic);
                }
                (RecordKey::Group { group }, None) => {
                    group_records.remove(&group);
                }
                // Front-end records were taken above.
                _ => {}
            }
        }
        let now = now_ms().0;
        for (id, bytes) in group_records {
            match serde_json::from_slice::<GroupRecord>(&bytes) {
                Ok(GroupRecord::Classic(s)) => {
                    inner.groups.insert(
                        id.clone(),
                        Group::Classic(Box::new(ClassicGroup::restore(
                            s,
                            config.classic.clone(),
                            now,
                        ))),
                    );
                }
                Ok(GroupRecord::Consumer(g)) => {
                    inner.groups.insert(
                        id.clone(),
                        Group::Consumer(g.restored(&config.consumer, now)),
                    );
                }
                Err(e) => tracing::warn!(group = %id, "skipping unreadable group record: {e}"),
            }
            inner.persisted.insert(id, bytes.to_vec());
        }
        tracing::info!(
            records = count,
            groups = inner.groups.len(),
            "group log replayed"
        );
        let front_end = front_end.restore(&log);
        Ok(GroupCoordinator {
            inner: Mutex::new(inner),
            log,
            front_end,
            config,
            wake: Notify::new(),
        })
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// Subscriptions (Pulsar-style cursors), persisted in the same log.
    pub fn subscriptions(&self) -> &Subscriptions {
        &self.front_end.subscriptions
    }

    /// Every front end's state kept in the same log.
    pub fn front_end(&self) -> &FrontEndState {
        &self.front_end
    }

    /// JoinGroup: waits until the rebalance it joins completes.
    pub async fn join(
        &self,
        group_id: &str,
        mut req: JoinRequest,
    ) -> Result<JoinResult, CoordinatorError> {
        let rx = {
            let mut inner = self.inner.lock();
            if inner.unloaded {
                return Err(GroupError::CoordinatorNotAvailable.into());
            }
            let id = inner.next_id();
            req.request = id;
            let (tx, rx) = oneshot::channel();
            inner.pending.insert(id, Pending::Join(tx));
            let group = match classic_slot(&mut inner.groups, group_id, &self.config.classic) {
                Ok(g) => g,
                Err(e) => {
                    inner.pending.remove(&id);
                    return Err(e);
                }
            };
            let effects = group.join(req, now_ms().0);
            self.apply(&mut inner, group_id, effects)?;
            rx
        };
        self.wake.notify_one();
        rx.await
            .unwrap_or(Err(GroupError::CoordinatorNotAvailable))
            .map_err(Into::into)
    }

    /// SyncGroup: waits for the leader's assignment.
    pub async fn sync(
        &self,
        group_id: &str,
        mut req: SyncRequest,
    ) -> Result<SyncResult, CoordinatorError> {
        let rx = {
            let mut inner = self.inner.lock();
            if inner.unloaded {
                return Err(GroupError::CoordinatorNotAvailable.into());
            }
            let id = inner.next_id();
            req.request = id;
            let (tx, rx) = oneshot::channel();
            let group = match inner.groups.get_mut(group_id) {
                Some(Group::Classic(g)) => g,
                Some(Group::Consumer(_)) => {
                    return Err(CoordinatorError::WrongProtocol(
                        group_id.to_string(),
                        ProtocolMismatch::ClassicOnConsumer,
                    ))
                }
                None => return Err(GroupError::UnknownMemberId.into()),
            };
            let effects = group.sync(req, now_ms().0);
            inner.pending.insert(id, Pending::Sync(tx));
            self.apply(&mut inner, group_id, effects)?;
            rx
        };
        self.wake.notify_one();
        rx.await
            .unwrap_or(Err(GroupError::CoordinatorNotAvailable))
            .map_err(Into::into)
    }

    /// Heartbeat (classic).
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), CoordinatorError> {
        let mut inner = self.inner.lock();
        match inner.groups.get_mut(group_id) {
            Some(Group::Classic(g)) => {
                Ok(g.heartbeat(member_id, instance_id, generation, now_ms().0)?)
            }
            Some(Group::Consumer(_)) => Err(CoordinatorError::WrongProtocol(
                group_id.to_string(),
                ProtocolMismatch::ClassicOnConsumer,
            )),
            None => Err(GroupError::UnknownMemberId.into()),
        }
    }

    /// LeaveGroup: per-member results.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<String, GroupError>>, CoordinatorError> {
        let mut inner = self.inner.lock();
        let (results, effects) = match inner.groups.get_mut(group_id) {
            Some(Group::Classic(g)) => g.leave(members, now_ms().0),
            Some(Group::Consumer(_)) => {
                return Err(CoordinatorError::WrongProtocol(
                    group_id.to_string(),
                    ProtocolMismatch::ClassicOnConsumer,
                ))
            }
            None => return Err(GroupError::UnknownMemberId.into()),
        };
        self.apply(&mut inner, group_id, effects)?;
        drop(inner);
        self.wake.notify_one();
        Ok(results)
    }

    /// ConsumerGroupHeartbeat (KIP-848).
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        hb: Heartbeat,
        topics: &[TopicInfo],
    ) -> Result<HeartbeatReply, CoordinatorError> {
        let mut inner = self.inner.lock();
        if hb.member_epoch != 0 && !inner.groups.contains_key(group_id) {
            return Err(ConsumerError::UnknownMemberId(hb.member_id.clone()).into());
        }
        let group = consumer_slot(&mut inner.groups, group_id)?;
        let reply = group.heartbeat(hb, topics, &self.config.consumer, now_ms().0)?;
        self.persist_group(&mut inner, group_id)?;
        drop(inner);
        self.wake.notify_one();
        Ok(reply)
    }

    /// Commits offsets after checking the committer's membership. A
    /// generation/epoch of -1 with an empty member id is a "simple" commit,
    /// allowed only for groups nobody is consuming in.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_or_epoch: i32,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), CoordinatorError> {
        let mut inner = self.inner.lock();
        match inner.groups.get_mut(group_id) {
            Some(Group::Classic(g)) => {
                g.validate_offset_commit(member_id, instance_id, generation_or_epoch)?;
                // Kafka counts an accepted commit as a sign of life.
                g.record_offset_commit(member_id, now_ms().0);
            }
            Some(Group::Consumer(g)) => g.validate_offset_commit(member_id, generation_or_epoch)?,
            None if generation_or_epoch < 0 => {}
            // The edge answers this by version (ILLEGAL_GENERATION before v9).
            None => return Err(CoordinatorError::GroupNotFound(group_id.to_string())),
        }
        Ok(self.write_offsets(&mut inner, group_id, offsets)?)
    }

    /// Checks the group metadata a TxnOffsetCommit carries (KIP-447, v3+):
    /// a member of the group with its current generation (classic) or
    /// member epoch (consumer protocol), so a producer whose consumer was
    /// rebalanced out cannot commit offsets for partitions it lost. No
    /// member and generation -1 (older producers, or offsets outside group
    /// management) may commit for a classic group in any state, for a
    /// consumer-protocol group only while it has no members; a group that
    /// does not exist only with generation -1 (else ILLEGAL_GENERATION).
    pub fn validate_txn_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_or_epoch: i32,
    ) -> Result<(), CoordinatorError> {
        let inner = self.inner.lock();
        match inner.groups.get(group_id) {
            Some(Group::Classic(g)) => {
                Ok(g.validate_txn_offset_commit(member_id, instance_id, generation_or_epoch)?)
            }
            Some(Group::Consumer(g)) => {
                Ok(g.validate_offset_commit(member_id, generation_or_epoch)?)
            }
            None if generation_or_epoch < 0 => Ok(()),
            None => Err(GroupError::IllegalGeneration.into()),
        }
    }

    /// Commits the offsets a committed transaction staged for `group_id`
    /// (TxnOffsetCommit), checked when they were staged.
    pub fn commit_transactional_offsets(
        &self,
        group_id: &str,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), CoordError> {
        let mut inner = self.inner.lock();
        self.write_offsets(&mut inner, group_id, offsets)
    }

    /// Persists `offsets` as `group_id`'s committed ones, then applies them.
    fn write_offsets(
        &self,
        inner: &mut Inner,
        group_id: &str,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), CoordError> {
        let records: Vec<(RecordKey, Option<Vec<u8>>)> = offsets
            .iter()
            .map(|(t, p, o)| {
                (
                    RecordKey::Offset {
                        group: group_id.to_string(),
                        topic: t.clone(),
                        partition: *p,
                    },
                    serde_json::to_vec(o).ok(),
                )
            })
            .collect();
        self.log.append(&records)?;
        let entry = inner.offsets.entry(group_id.to_string()).or_default();
        for (t, p, o) in offsets {
            entry.insert((t, p), o);
        }
        Ok(())
    }

    /// Committed offsets of a group: the given partitions, or all of them.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        let inner = self.inner.lock();
        let committed = inner.offsets.get(group_id);
        match partitions {
            Some(list) => list
                .iter()
                .map(|(t, p)| {
                    (
                        t.clone(),
                        *p,
                        committed.and_then(|c| c.get(&(t.clone(), *p)).cloned()),
                    )
                })
                .collect(),
            None => {
                let mut all: Vec<_> = committed
                    .map(|c| {
                        c.iter()
                            .map(|((t, p), o)| (t.clone(), *p, Some(o.clone())))
                            .collect()
                    })
                    .unwrap_or_default();
                all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
                all
            }
        }
    }

    /// OffsetFetch v9 member check for consumer-protocol groups.
    pub fn validate_fetch_member(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        epoch: i32,
    ) -> Result<(), CoordinatorError> {
        let Some(member) = member_id else {
            return Ok(());
        };
        let inner = self.inner.lock();
        match inner.groups.get(group_id) {
            Some(Group::Consumer(g)) => Ok(g.validate_offset_commit(member, epoch)?),
            _ => Ok(()),
        }
    }

    /// Deletes committed offsets, except for topics the group (if it has
    /// members) is still subscribed to.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
        subscribed: &[String],
    ) -> Result<Vec<Result<(), CoordinatorError>>, CoordinatorError> {
        let mut inner = self.inner.lock();
        let active = match inner.groups.get(group_id) {
            Some(Group::Classic(g)) => !g.is_empty(),
            Some(Group::Consumer(g)) => !g.is_empty(),
            None => false,
        };
        let subscribed: &[String] = if active { subscribed } else { &[] };
        if !inner.groups.contains_key(group_id) && !inner.offsets.contains_key(group_id) {
            return Err(CoordinatorError::GroupNotFound(group_id.to_string()));
        }
        let mut results = Vec::with_capacity(partitions.len());
        let mut tombstones = Vec::new();
        for (t, p) in partitions {
            if subscribed.contains(t) {
                results.push(Err(CoordinatorError::SubscribedToTopic(
                    group_id.to_string(),
                )));
            } else {
                tombstones.push((
                    RecordKey::Offset {
                        group: group_id.to_string(),
                        topic: t.clone(),
                        partition: *p,
                    },
                    None,
                ));
                results.push(Ok(()));
            }
        }
        self.log.append(&tombstones)?;
        if let Some(c) = inner.offsets.get_mut(group_id) {
            for (k, _) in &tombstones {
                if let RecordKey::Offset {
                    topic, partition, ..
                } = k
                {
                    c.remove(&(topic.clone(), *partition));
                }
            }
        }
        Ok(results)
    }

    /// Every group's committed offset for one partition, by group id.
    pub fn committed_on(&self, topic: &str, partition: i32) -> Vec<(String, CommittedOffset)> {
        let inner = self.inner.lock();
        let key = (topic.to_string(), partition);
        let mut out: Vec<(String, CommittedOffset)> = inner
            .offsets
            .iter()
            .filter_map(|(g, o)| o.get(&key).map(|c| (g.clone(), c.clone())))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Every topic some group has committed offsets for.
    pub fn offset_topics(&self) -> std::collections::BTreeSet<String> {
        let inner = self.inner.lock();
        inner
            .offsets
            .values()
            .flat_map(|o| o.keys().map(|(t, _)| t.clone()))
            .collect()
    }

    /// Removes every group's committed offsets of a deleted topic, as Kafka
    /// does, so a topic recreated with the same name starts with none.
    pub fn forget_topic(&self, topic: &str) -> Result<(), CoordError> {
        let mut inner = self.inner.lock();
        let tombstones: Vec<(RecordKey, Option<Vec<u8>>)> = inner
            .offsets
            .iter()
            .flat_map(|(group, offsets)| {
                offsets
                    .keys()
                    .filter(|(t, _)| t == topic)
                    .map(move |(t, p)| {
                        (
                            RecordKey::Offset {
                                group: group.clone(),
                                topic: t.clone(),
                                partition: *p,
                            },
                            None,
                        )
                    })
            })
            .collect();
        let mut tombstones = tombstones;
        if inner.topic_ids.contains_key(topic) {
            tombstones.push((
                RecordKey::TopicId {
                    topic: topic.to_string(),
                },
                None,
            ));
        }
        self.log.append(&tombstones)?;
        for offsets in inner.offsets.values_mut() {
            offsets.retain(|(t, _), _| t != topic);
        }
        inner.offsets.retain(|_, o| !o.is_empty());
        inner.topic_ids.remove(topic);
        Ok(())
    }

    /// The topic id the records about each topic name are about, as
    /// recorded.
    pub fn topic_ids(&self) -> HashMap<String, model::TopicId> {
        self.inner.lock().topic_ids.clone()
    }

    /// Records that the records about these topics are about these ids
    /// (the topics as they are now: created, or found at start-up); only
    /// what changed is written.
    pub fn note_topic_ids(&self, ids: &[(String, model::TopicId)]) -> Result<(), CoordError> {
        let mut inner = self.inner.lock();
        let changed: Vec<(RecordKey, Option<Vec<u8>>)> = ids
            .iter()
            .filter(|(t, id)| inner.topic_ids.get(t) != Some(id))
            .map(|(t, id)| {
                (
                    RecordKey::TopicId { topic: t.clone() },
                    serde_json::to_vec(id).ok(),
                )
            })
            .collect();
        for chunk in changed.chunks(1000) {
            self.log.append(chunk)?;
        }
        for (t, id) in ids {
            inner.topic_ids.insert(t.clone(), *id);
        }
        Ok(())
    }

    /// Deletes empty groups and their offsets.
    pub fn delete_group(&self, group_id: &str) -> Result<(), CoordinatorError> {
        let mut inner = self.inner.lock();
        let exists = inner.groups.contains_key(group_id) || inner.offsets.contains_key(group_id);
        if !exists {
            return Err(CoordinatorError::GroupNotFound(group_id.to_string()));
        }
        let empty = match inner.groups.get(group_id) {
            Some(Group::Classic(g)) => g.is_empty(),
            Some(Group::Consumer(g)) => g.is_empty(),
            None => true,
        };
        if !empty {
            return Err(CoordinatorError::NonEmptyGroup(group_id.to_string()));
        }
        let mut records: Vec<(RecordKey, Option<Vec<u8>>)> = inner
            .offsets
            .get(group_id)
            .map(|c| {
                c.keys()
                    .map(|(t, p)| {
                        (
                            RecordKey::Offset {
                                group: group_id.to_string(),
                                topic: t.clone(),
                                partition: *p,
                            },
                            None,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        records.push((
            RecordKey::Group {
                group: group_id.to_string(),
            },
            None,
        ));
        self.log.append(&records)?;
        inner.offsets.remove(group_id);
        inner.groups.remove(group_id);
        inner.persisted.remove(group_id);
        Ok(())
    }

    /// Every group, for ListGroups.
    pub fn list(&self) -> Vec<GroupListing> {
        let inner = self.inner.lock();
        let mut out: Vec<GroupListing> = inner
            .groups
            .iter()
            .map(|(id, g)| match g {
                Group::Classic(g) => GroupListing {
                    group_id: id.clone(),
                    protocol_type: g.protocol_type().unwrap_or_default(),
                    state: g.state().to_string(),
                    group_type: "classic",
                },
                Group::Consumer(g) => GroupListing {
                    group_id: id.clone(),
                    protocol_type: "consumer".into(),
                    state: g.state().to_string(),
                    group_type: "consumer",
                },
            })
            .collect();
        // Groups known only by their committed offsets are listed as Empty.
        for id in inner.offsets.keys() {
            if !inner.groups.contains_key(id) {
                out.push(GroupListing {
                    group_id: id.clone(),
                    protocol_type: String::new(),
                    state: "Empty".into(),
                    group_type: "classic",
                });
            }
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Whether the group has committed offsets (it may have no members).
    pub fn has_offsets(&self, group_id: &str) -> bool {
        self.inner.lock().offsets.contains_key(group_id)
    }

    /// What a group's members subscribe to, for OffsetDelete's check:
    /// `None` if the group does not exist.
    pub fn group_subscriptions(&self, group_id: &str) -> Option<SubscriptionsView> {
        self.inner.lock().groups.get(group_id).map(|g| match g {
            Group::Classic(g) => SubscriptionsView::Classic {
                protocol_type: g.protocol_type(),
                metadata: g.protocol_metadata(),
            },
            Group::Consumer(g) => SubscriptionsView::Consumer {
                topics: g
                    .members()
                    .into_iter()
                    .flat_map(|m| m.subscribed_topic_names)
                    .collect(),
            },
        })
    }

    /// What a group looks like now, for describe APIs: `None` if the group
    /// has neither members nor state (it may still have committed offsets,
    /// see [`GroupCoordinator::has_offsets`]).
    pub fn describe(&self, group_id: &str) -> Option<GroupView> {
        let config = self.config().consumer.clone();
        self.inner.lock().groups.get(group_id).map(|g| match g {
            Group::Classic(g) => GroupView::Classic(g.describe()),
            Group::Consumer(g) => GroupView::Consumer(ConsumerGroupView {
                state: g.state(),
                epoch: g.epoch(),
                assignment_epoch: g.assignment_epoch(),
                assignor: g.assignor_name(&config),
                members: g.members(),
            }),
        })
    }

    /// Fires due timers; returns the next deadline.
    pub fn tick(&self, topics: &[TopicInfo]) -> Option<i64> {
        let now = now_ms().0;
        let mut inner = self.inner.lock();
        let ids: Vec<String> = inner.groups.keys().cloned().collect();
        let mut next: Option<i64> = None;
        for id in ids {
            let mut effects = Vec::new();
            let mut consumer_changed = false;
            match inner.groups.get_mut(&id) {
                Some(Group::Classic(g)) if g.next_deadline().is_some_and(|d| d <= now) => {
                    effects = g.tick(now);
                }
                Some(Group::Classic(_)) => {}
                Some(Group::Consumer(g)) => {
                    consumer_changed = g.tick(topics, &self.config.consumer, now);
                }
                None => {}
            }
            if let Err(e) = self.apply(&mut inner, &id, effects) {
                tracing::warn!(group = %id, "could not persist group state: {e}");
            }
            if consumer_changed {
                if let Err(e) = self.persist_group(&mut inner, &id) {
                    tracing::warn!(group = %id, "could not persist group state: {e}");
                }
            }
            let d = match inner.groups.get(&id) {
                Some(Group::Classic(g)) => g.next_deadline(),
                Some(Group::Consumer(g)) => g.next_deadline(),
                None => None,
            };
            next = match (next, d) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        next
    }

    /// Stops serving: another broker coordinates these groups now. Waiting
    /// JoinGroup and SyncGroup requests are answered
    /// COORDINATOR_NOT_AVAILABLE (the client looks the coordinator up
    /// again).
    pub fn unload(&self) {
        let mut inner = self.inner.lock();
        inner.unloaded = true;
        inner.pending.clear();
        drop(inner);
        self.wake.notify_one();
    }

    /// Waits until a tick is due or something changed.
    pub async fn wait_for_work(&self, next_deadline: Option<i64>) {
        let sleep_ms = next_deadline
            .map(|d| (d - now_ms().0).clamp(1, 1000))
            .unwrap_or(1000);
        tokio::select! {
            _ = self.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(sleep_ms as u64)) => {}
        }
    }

    /// Removes offsets of memberless groups older than the retention, and
    /// compacts the group log when it has grown well past its live size.
    pub fn expire_and_compact(&self, now: i64) -> Result<usize, CoordError> {
        let mut inner = self.inner.lock();
        let mut tombstones = Vec::new();
        for (group, offsets) in &inner.offsets {
            let active = match inner.groups.get(group) {
                Some(Group::Classic(g)) => !g.is_empty(),
                Some(Group::Consumer(g)) => !g.is_empty(),
                None => false,
            };
            if active {
                continue;
            }
            for ((t, p), o) in offsets {
                if o.commit_timestamp + self.config.offsets_retention_ms < now {
                    tombstones.push((
                        RecordKey::Offset {
                            group: group.clone(),
                            topic: t.clone(),
                            partition: *p,
                        },
                        None,
                    ));
                }
            }
        }
        let expired = tombstones.len();
        self.log.append(&tombstones)?;
        for (k, _) in &tombstones {
            if let RecordKey::Offset {
                group,
                topic,
                partition,
            } = k
            {
                if let Some(c) = inner.offsets.get_mut(group) {
                    c.remove(&(topic.clone(), *partition));
                    if c.is_empty() {
                        inner.offsets.remove(group);
                    }
                }
            }
        }
        // Groups left with no members, no offsets and nothing pending (for
        // instance from a JoinGroup that failed validation) are dropped, as
        // Kafka's cleanup does.
        let idle: Vec<String> = inner
            .groups
            .iter()
            .filter(|(id, g)| {
                !inner.offsets.contains_key(*id)
                    && match g {
                        Group::Classic(g) => g.is_empty() && g.next_deadline().is_none(),
                        Group::Consumer(g) => g.is_empty(),
                    }
            })
            .map(|(id, _)| id.clone())
            .collect();
        let gone: Vec<(RecordKey, Option<Vec<u8>>)> = idle
            .iter()
            .filter(|id| inner.persisted.contains_key(*id))
            .map(|id| (RecordKey::Group { group: id.clone() }, None))
            .collect();
        self.log.append(&gone)?;
        for id in &idle {
            inner.groups.remove(id);
            inner.persisted.remove(id);
        }
        let mut live = self.live_records(&inner);
        // Front-end writes wait while the snapshot is taken, so none of them
        // lands before an older copy of itself.
        let mut snapshot_at = None;
        self.front_end.with_persisted(|records| {
            live.extend(records);
            let live_bytes: usize = live
                .iter()
                .map(|(_, v)| v.as_ref().map_or(0, Vec::len) + 64)
                .sum();
            if self.log.size_bytes() as usize > (16 << 20).max(live_bytes * 4) {
                snapshot_at = Some(self.log.append_snapshot(&live)?);
                tracing::info!(records = live.len(), "compacted the group log");
            }
            Ok::<_, CoordError>(())
        })?;
        drop(inner);
        if let Some(start) = snapshot_at {
            self.log.finish_snapshot(start)?;
        }
        Ok(expired)
    }

    fn live_records(&self, inner: &Inner) -> Vec<(RecordKey, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        for (g, bytes) in &inner.persisted {
            out.push((RecordKey::Group { group: g.clone() }, Some(bytes.clone())));
        }
        for (group, offsets) in &inner.offsets {
            for ((t, p), o) in offsets {
                out.push((
                    RecordKey::Offset {
                        group: group.clone(),
                        topic: t.clone(),
                        partition: *p,
                    },
                    serde_json::to_vec(o).ok(),
                ));
            }
        }
        for (topic, id) in &inner.topic_ids {
            out.push((
                RecordKey::TopicId {
                    topic: topic.clone(),
                },
                serde_json::to_vec(id).ok(),
            ));
        }
        out
    }

    /// Delivers effects to waiting requests and persists group changes.
    fn apply(
        &self,
        inner: &mut Inner,
        group_id: &str,
        effects: Vec<Effect>,
    ) -> Result<(), CoordError> {
        // Effects are handled in order: answers that follow a Persist go out
        // only once the group's state is in the log. If the write fails,
        // those answers become errors (clients rejoin), as Kafka does.
        let mut failed: Option<CoordError> = None;
        for e in effects {
            match e {
                Effect::Persist => {
                    if failed.is_none() {
                        if let Err(err) = self.persist_group(inner, group_id) {
                            tracing::warn!(group = %group_id, "could not persist group state: {err}");
                            failed = Some(err);
                        }
                    }
                }
                Effect::JoinDone { request, result } => {
                    if let Some(Pending::Join(tx)) = inner.pending.remove(&request) {
                        let result = if failed.is_some() {
                            Err(GroupError::CoordinatorNotAvailable)
                        } else {
                            result
                        };
                        let _ = tx.send(result);
                    }
                }
                Effect::SyncDone { request, result } => {
                    if let Some(Pending::Sync(tx)) = inner.pending.remove(&request) {
                        let result = if failed.is_some() {
                            Err(GroupError::CoordinatorNotAvailable)
                        } else {
                            result
                        };
                        let _ = tx.send(result);
                    }
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn persist_group(&self, inner: &mut Inner, group_id: &str) -> Result<(), CoordError> {
        let record = match inner.groups.get(group_id) {
            Some(Group::Classic(g)) => GroupRecord::Classic(g.snapshot()),
            Some(Group::Consumer(g)) => GroupRecord::Consumer(g.clone()),
            None => return Ok(()),
        };
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        if inner.persisted.get(group_id) == Some(&bytes) {
            return Ok(());
        }
        self.log.append(&[(
            RecordKey::Group {
                group: group_id.to_string(),
            },
            Some(bytes.clone()),
        )])?;
        inner.persisted.insert(group_id.to_string(), bytes);
        Ok(())
    }
}

impl Inner {
    fn next_id(&mut self) -> RequestId {
        self.next_request += 1;
        self.next_request
    }
}
