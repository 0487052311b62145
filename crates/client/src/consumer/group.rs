//! Classic group membership on the coordinator lane: coordinator lookup,
//! JoinGroup/SyncGroup/LeaveGroup, committed offsets, and the heartbeat
//! task that keeps the session alive and flags rebalances.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::protocol::PROTOCOL_TYPE;
use crate::client::{Client, Lane};
use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::message::TopicPartition;
use crate::metadata::Node;

/// Membership settings.
#[derive(Debug, Clone)]
pub(crate) struct GroupConfig {
    pub group_id: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub request_timeout: Duration,
}

#[derive(Debug, Clone)]
struct Member {
    member_id: String,
    generation: i32,
    coordinator: Option<Node>,
    /// Joined and synced: heartbeats run.
    stable: bool,
}

/// State shared with the heartbeat task.
pub(crate) struct Shared {
    member: Mutex<Member>,
    rejoin: AtomicBool,
    /// Wakes the consumer when a rebalance is needed.
    pub wake: Notify,
}

impl Shared {
    fn request_rejoin(&self) {
        self.rejoin.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    fn forget_coordinator(&self) {
        self.member.lock().unwrap().coordinator = None;
    }

    /// Reacts to an error from the coordinator: a moved or gone coordinator
    /// is looked up again; a stale membership rejoins.
    fn on_error(&self, e: &Error) {
        match e.kafka_error() {
            Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable) => {
                self.forget_coordinator()
            }
            Some(ResponseError::UnknownMemberId | ResponseError::FencedInstanceId) => {
                let mut m = self.member.lock().unwrap();
                m.member_id.clear();
                m.generation = -1;
                m.stable = false;
                drop(m);
                self.request_rejoin();
            }
            Some(ResponseError::IllegalGeneration | ResponseError::RebalanceInProgress) => {
                self.member.lock().unwrap().stable = false;
                self.request_rejoin();
            }
            None if e.invalidates_metadata() || matches!(e, Error::Timeout(_)) => {
                self.forget_coordinator()
            }
            _ => {}
        }
    }
}

/// What JoinGroup answered.
#[derive(Debug, Clone)]
pub(crate) struct Joined {
    pub generation: i32,
    pub member_id: String,
    pub leader: bool,
    pub protocol: String,
    pub skip_assignment: bool,
    /// Every member with its protocol metadata (only for the leader).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

/// A group membership.
pub(crate) struct Group {
    client: Client,
    lane: Lane,
    pub cfg: Arc<GroupConfig>,
    pub shared: Arc<Shared>,
    heartbeat: AbortHandle,
}

impl Drop for Group {
    fn drop(&mut self) {
        self.heartbeat.abort();
        self.client.release_lane(self.lane);
    }
}

fn gid(s: &str) -> GroupId {
    GroupId(StrBytes::from_string(s.to_string()))
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl Group {
    /// Starts the heartbeat task; nothing is sent until the first join.
    pub fn new(client: Client, cfg: GroupConfig) -> Group {
        let lane = client.new_lane();
        let cfg = Arc::new(cfg);
        let shared = Arc::new(Shared {
            member: Mutex::new(Member {
                member_id: String::new(),
                generation: -1,
                coordinator: None,
                stable: false,
            }),
            rejoin: AtomicBool::new(true),
            wake: Notify::new(),
        });
        let heartbeat = tokio::spawn(heartbeat_loop(
            client.clone(),
            lane,
            cfg.clone(),
            Arc::downgrade(&shared),
        ))
        .abort_handle();
        Group {
            client,
            lane,
            cfg,
            shared,
            heartbeat,
        }
    }

    /// Whether the consumer must (re)join before going on.
    pub fn needs_rejoin(&self) -> bool {
        self.shared.rejoin.load(Ordering::Acquire) || !self.shared.member.lock().unwrap().stable
    }

    /// Asks for a rebalance at the next chance.
    pub fn request_rejoin(&self) {
        self.shared.request_rejoin();
    }

    /// Generation and member id (-1 and "" outside the group).
    pub fn generation(&self) -> (i32, String) {
        let m = self.shared.member.lock().unwrap();
        (m.generation, m.member_id.clone())
    }

    /// The coordinator connection, looking the coordinator up if needed.
    pub async fn coordinator(&self) -> Result<Connection> {
        coordinator(&self.client, self.lane, &self.cfg, &self.shared).await
    }

    fn fail<T>(&self, e: Error) -> Result<T> {
        self.shared.on_error(&e);
        Err(e)
    }

    /// JoinGroup with `protocols` (assignor name, subscription metadata),
    /// answering MEMBER_ID_REQUIRED by joining again with the given id.
    pub async fn join(&self, protocols: &[(&str, Bytes)]) -> Result<Joined> {
        {
            let mut m = self.shared.member.lock().unwrap();
            m.stable = false;
        }
        self.shared.rejoin.store(false, Ordering::Release);
        let conn = self.coordinator().await?;
        let v = conn.versions().pick::<JoinGroupRequest>()?;
        let timeout = self.cfg.rebalance_timeout + self.cfg.request_timeout;
        for _ in 0..3 {
            let member_id = self.shared.member.lock().unwrap().member_id.clone();
            let mut req = JoinGroupRequest::default()
                .with_group_id(gid(&self.cfg.group_id))
                .with_session_timeout_ms(millis(self.cfg.session_timeout))
                .with_member_id(s(&member_id))
                .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
                .with_protocols(
                    protocols
                        .iter()
                        .map(|(name, meta)| {
                            JoinGroupRequestProtocol::default()
                                .with_name(s(name))
                                .with_metadata(meta.clone())
                        })
                        .collect(),
                );
            if v >= 1 {
                req = req.with_rebalance_timeout_ms(millis(self.cfg.rebalance_timeout));
            }
            let resp = match conn.send_with_timeout(v, &req, timeout)?.await {
                Ok(r) => r,
                Err(e) => return self.fail(e),
            };
            if resp.error_code == ResponseError::MemberIdRequired.code() {
                self.shared.member.lock().unwrap().member_id = resp.member_id.to_string();
                continue;
            }
            if let Err(e) = Error::check(resp.error_code, None) {
                return self.fail(e);
            }
            let member_id = resp.member_id.to_string();
            {
                let mut m = self.shared.member.lock().unwrap();
                m.member_id = member_id.clone();
                m.generation = resp.generation_id;
            }
            return Ok(Joined {
                generation: resp.generation_id,
                leader: resp.leader.as_str() == member_id,
                member_id,
                protocol: resp
                    .protocol_name
                    .as_ref()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                skip_assignment: resp.skip_assignment,
                members: resp
                    .members
                    .into_iter()
                    .map(|m| {
                        (
                            m.member_id.to_string(),
                            m.group_instance_id.map(|i| i.to_string()),
                            m.metadata,
                        )
                    })
                    .collect(),
            });
        }
        Err(Error::Protocol(
            "JoinGroup kept asking for a member id".into(),
        ))
    }

    /// SyncGroup: hands out `assignments` (leader) and returns our own.
    pub async fn sync(&self, joined: &Joined, assignments: Vec<(String, Bytes)>) -> Result<Bytes> {
        let conn = self.coordinator().await?;
        let v = conn.versions().pick::<SyncGroupRequest>()?;
        let mut req = SyncGroupRequest::default()
            .with_group_id(gid(&self.cfg.group_id))
            .with_generation_id(joined.generation)
            .with_member_id(s(&joined.member_id))
            .with_assignments(
                assignments
                    .into_iter()
                    .map(|(m, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(s(&m))
                            .with_assignment(a)
                    })
                    .collect(),
            );
        if v >= 5 {
            req = req
                .with_protocol_type(Some(StrBytes::from_static_str(PROTOCOL_TYPE)))
                .with_protocol_name(Some(s(&joined.protocol)));
        }
        let timeout = self.cfg.rebalance_timeout + self.cfg.request_timeout;
        let resp = match conn.send_with_timeout(v, &req, timeout)?.await {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        if let Err(e) = Error::check(resp.error_code, None) {
            return self.fail(e);
        }
        Ok(resp.assignment)
    }

    /// Joined and synced: heartbeats may run.
    pub fn set_stable(&self) {
        self.shared.member.lock().unwrap().stable = true;
    }

    /// LeaveGroup (errors ignored: the session expires anyway).
    pub async fn leave(&self) {
        let member_id = {
            let mut m = self.shared.member.lock().unwrap();
            m.stable = false;
            m.generation = -1;
            std::mem::take(&mut m.member_id)
        };
        if member_id.is_empty() {
            return;
        }
        let r = async {
            let conn = self.coordinator().await?;
            let v = conn.versions().pick::<LeaveGroupRequest>()?;
            let mut req = LeaveGroupRequest::default().with_group_id(gid(&self.cfg.group_id));
            req = if v >= 3 {
                req.with_members(vec![MemberIdentity::default().with_member_id(s(&member_id))])
            } else {
                req.with_member_id(s(&member_id))
            };
            let resp = conn.send(v, &req)?.await?;
            Error::check(resp.error_code, None)
        }
        .await;
        if let Err(e) = r {
            tracing::debug!(group = %self.cfg.group_id, error = %e, "LeaveGroup failed");
        }
    }

    /// Sends an OffsetCommit now (queued in order on the coordinator
    /// connection when it is open) and returns a future of the outcome that
    /// runs whether or not it is polled.
    pub fn commit_detached(
        &self,
        offsets: Vec<(TopicPartition, i64)>,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        let shared = self.shared.clone();
        let (generation, member_id) = self.generation();
        let req = commit_request_for(&self.cfg.group_id, generation, &member_id, &offsets);
        let known = shared.member.lock().unwrap().coordinator.clone();
        let sent = known
            .and_then(|n| self.client.open_connection(&n.addr(), self.lane))
            .map(|conn| {
                let v = conn.versions().pick::<OffsetCommitRequest>()?;
                conn.send(v, &req)
            });
        let client = self.client.clone();
        let lane = self.lane;
        let cfg = self.cfg.clone();
        let task = tokio::spawn(async move {
            let resp = match sent {
                Some(fut) => fut?.await,
                None => {
                    let conn = coordinator(&client, lane, &cfg, &shared).await?;
                    let v = conn.versions().pick::<OffsetCommitRequest>()?;
                    conn.send(v, &req)?.await
                }
            };
            let r = resp.and_then(|resp| {
                for t in &resp.topics {
                    for p in &t.partitions {
                        Error::check(
                            p.error_code,
                            Some(&format!("committing {}-{}", t.name.0, p.partition_index)),
                        )?;
                    }
                }
                Ok(())
            });
            if let Err(e) = &r {
                shared.on_error(e);
            }
            r
        });
        async move { task.await.map_err(|_| Error::Closed)? }
    }

    /// The committed offsets of `tps` (partitions without one are absent).
    pub async fn committed(&self, tps: &[TopicPartition]) -> Result<HashMap<TopicPartition, i64>> {
        let conn = self.coordinator().await?;
        let v = conn.versions().pick::<OffsetFetchRequest>()?;
        let mut by_topic: Vec<(&str, Vec<i32>)> = Vec::new();
        for tp in tps {
            match by_topic.iter_mut().find(|(t, _)| *t == tp.topic) {
                Some((_, ps)) => ps.push(tp.partition),
                None => by_topic.push((&tp.topic, vec![tp.partition])),
            }
        }
        let req = if v >= 8 {
            let topics = by_topic
                .iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopics::default()
                        .with_name(TopicName(s(t)))
                        .with_partition_indexes(ps.clone())
                })
                .collect();
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(gid(&self.cfg.group_id))
                .with_topics(Some(topics))])
        } else {
            let topics = by_topic
                .iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partition_indexes(ps.clone())
                })
                .collect();
            OffsetFetchRequest::default()
                .with_group_id(gid(&self.cfg.group_id))
                .with_topics(Some(topics))
        };
        let resp = match conn.send(v, &req)?.await {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let mut out = HashMap::new();
        let mut add = |topic: &str, p: i32, offset: i64, code: i16| -> Result<()> {
            Error::check(code, None)?;
            if offset >= 0 {
                out.insert(TopicPartition::new(topic, p), offset);
            }
            Ok(())
        };
        let r = if v >= 8 {
            resp.groups.iter().try_for_each(|g| {
                Error::check(g.error_code, None)?;
                g.topics.iter().try_for_each(|t| {
                    t.partitions.iter().try_for_each(|p| {
                        add(
                            &t.name.0,
                            p.partition_index,
                            p.committed_offset,
                            p.error_code,
                        )
                    })
                })
            })
        } else {
            Error::check(resp.error_code, None).and_then(|_| {
                resp.topics.iter().try_for_each(|t| {
                    t.partitions.iter().try_for_each(|p| {
                        add(
                            &t.name.0,
                            p.partition_index,
                            p.committed_offset,
                            p.error_code,
                        )
                    })
                })
            })
        };
        match r {
            Ok(()) => Ok(out),
            Err(e) => self.fail(e),
        }
    }
}

fn commit_request_for(
    group_id: &str,
    generation: i32,
    member_id: &str,
    offsets: &[(TopicPartition, i64)],
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (tp, offset) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition)
            .with_committed_offset(*offset)
            .with_committed_metadata(Some(StrBytes::default()));
        match topics.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(&tp.topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    OffsetCommitRequest::default()
        .with_group_id(gid(group_id))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(topics)
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

async fn coordinator(
    client: &Client,
    lane: Lane,
    cfg: &GroupConfig,
    shared: &Shared,
) -> Result<Connection> {
    let known = shared.member.lock().unwrap().coordinator.clone();
    let node = match known {
        Some(n) => n,
        None => {
            let n = client.find_coordinator(&cfg.group_id).await?;
            tracing::debug!(group = %cfg.group_id, coordinator = %n.addr(), "found coordinator");
            shared.member.lock().unwrap().coordinator = Some(n.clone());
            n
        }
    };
    match client.connection_to_lane(&node.addr(), lane).await {
        Ok(c) => Ok(c),
        Err(e) => {
            shared.forget_coordinator();
            Err(e)
        }
    }
}

/// Heartbeats while the member is stable; flags rebalances and stale
/// memberships for the consumer. Ends when the group is dropped.
async fn heartbeat_loop(
    client: Client,
    lane: Lane,
    cfg: Arc<GroupConfig>,
    shared: std::sync::Weak<Shared>,
) {
    loop {
        tokio::time::sleep(cfg.heartbeat_interval).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let (generation, member_id, stable) = {
            let m = shared.member.lock().unwrap();
            (m.generation, m.member_id.clone(), m.stable)
        };
        if !stable {
            continue;
        }
        let r = async {
            let conn = coordinator(&client, lane, &cfg, &shared).await?;
            let v = conn.versions().pick::<HeartbeatRequest>()?;
            let req = HeartbeatRequest::default()
                .with_group_id(gid(&cfg.group_id))
                .with_generation_id(generation)
                .with_member_id(s(&member_id));
            let resp = conn.send(v, &req)?.await?;
            Error::check(resp.error_code, None)
        }
        .await;
        if let Err(e) = r {
            tracing::debug!(group = %cfg.group_id, error = %e, "heartbeat");
            // The answer may be about a generation we have since left, or
            // the consumer may be rejoining already.
            let current = {
                let m = shared.member.lock().unwrap();
                m.stable && m.generation == generation
            };
            if current {
                shared.on_error(&e);
            }
        }
    }
}
