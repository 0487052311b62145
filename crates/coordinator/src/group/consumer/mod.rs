//! The consumer group protocol (KIP-848) as a pure state machine: members
//! heartbeat with their subscription (topic names and/or a regex the broker
//! evaluates), the broker computes a target assignment, and each member is
//! moved towards it safely — a partition is given to its new owner only
//! after the old owner has reported releasing it.
//!
//! Time and the cluster's topics are passed in, so every transition is
//! unit-testable without I/O.

mod assign;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use model::TopicId;
use regex::Regex;
use serde::{Deserialize, Serialize};

pub use assign::Assignor;

/// Partitions per topic.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// Group-wide settings.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// A member that does not heartbeat for this long is removed.
    pub session_timeout_ms: i64,
    /// Told to members: how often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// Available server-side assignors; the first is the default.
    pub assignors: Vec<Assignor>,
    /// Most members.
    pub max_size: usize,
}

/// A topic as the group sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Id.
    pub id: TopicId,
    /// Name.
    pub name: String,
    /// Partition count.
    pub partitions: i32,
}

/// One ConsumerGroupHeartbeat, in domain terms.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// Member id ("" from a v0 client joining: the broker makes one).
    pub member_id: String,
    /// 0 = join, -1 = leave, -2 = static member leaving temporarily, >0 = current epoch.
    pub member_epoch: i32,
    /// Static membership id.
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// How long the member may take to release partitions (-1 = unchanged).
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names (`None` = unchanged).
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscription regex (`None` = unchanged, `Some("")` = none).
    pub subscribed_topic_regex: Option<String>,
    /// Requested server assignor (`None` = unchanged / default).
    pub server_assignor: Option<String>,
    /// Partitions the member owns now (`None` = unchanged since last time).
    pub owned: Option<Assignment>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatReply {
    /// The member's id.
    pub member_id: String,
    /// Its epoch after this heartbeat (-1 after leaving).
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, when it changed (or on join).
    pub assignment: Option<Assignment>,
}

/// Why a heartbeat or commit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerError {
    /// The member's epoch is not its current one: it must rejoin.
    #[error("member {0} is fenced: its epoch is stale")]
    FencedMemberEpoch(String),
    /// No such member.
    #[error("unknown member {0}")]
    UnknownMemberId(String),
    /// A commit from an older epoch.
    #[error("stale member epoch for {0}")]
    StaleMemberEpoch(String),
    /// Another live member uses this instance id.
    #[error("instance id {0} is still in use by another member")]
    UnreleasedInstanceId(String),
    /// The server assignor is not available.
    #[error("unsupported assignor {0}")]
    UnsupportedAssignor(String),
    /// The group is full.
    #[error("the group has reached its maximum size")]
    GroupMaxSizeReached,
    /// A malformed heartbeat.
    #[error("invalid heartbeat: {0}")]
    InvalidRequest(String),
    /// The subscription regex does not compile.
    #[error("invalid regular expression {0:?}: {1}")]
    InvalidRegex(String, String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Member {
    id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    epoch: i32,
    previous_epoch: i32,
    rebalance_timeout_ms: i32,
    topic_names: Vec<String>,
    regex: Option<String>,
    assignor: Option<String>,
    /// What the member has been given and not yet released.
    assigned: Assignment,
    /// What it was last told (to know when to tell it again).
    #[serde(skip)]
    last_sent: Option<Assignment>,
    #[serde(skip)]
    session_deadline: i64,
    #[serde(skip)]
    revocation_deadline: Option<i64>,
}

/// A consumer-protocol group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConsumerGroup {
    id: String,
    epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    target: BTreeMap<String, Assignment>,
    /// The subscribed topics (id, partitions) the target was computed for.
    fingerprint: Vec<(TopicId, i32)>,
    #[serde(skip)]
    regex_cache: BTreeMap<String, RegexHolder>,
}

#[derive(Debug, Clone)]
struct RegexHolder(Regex);

/// A member as DescribeGroups/ConsumerGroupDescribe report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// Id.
    pub member_id: String,
    /// Static id.
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// Epoch.
    pub member_epoch: i32,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Subscribed names.
    pub subscribed_topic_names: Vec<String>,
    /// Subscribed regex.
    pub subscribed_topic_regex: Option<String>,
    /// Current assignment.
    pub assignment: Assignment,
    /// Target assignment.
    pub target_assignment: Assignment,
}

impl ConsumerGroup {
    /// An empty group.
    pub fn new(id: String) -> ConsumerGroup {
        ConsumerGroup {
            id,
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            fingerprint: Vec::new(),
            regex_cache: BTreeMap::new(),
        }
    }

    /// The group id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Group epoch.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Epoch of the current target assignment.
    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    /// Whether no member is left.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's state name: Empty, Assigning, Reconciling or Stable.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.epoch {
            "Assigning"
        } else if self.members.iter().any(|(id, m)| {
            m.epoch != self.assignment_epoch || Some(&m.assigned) != self.target.get(id)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Handles one heartbeat.
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &[TopicInfo],
        config: &ConsumerConfig,
        now: i64,
    ) -> Result<HeartbeatReply, ConsumerError> {
        if hb.member_epoch == -2 {
            if let Some(reply) = self.static_leave(&hb.member_id, hb.instance_id.as_deref()) {
                return Ok(reply);
            }
        }
        if hb.member_epoch == -1 || hb.member_epoch == -2 {
            return self.leave(&hb.member_id, hb.instance_id.as_deref(), topics, config);
        }
        self.validate(&hb, config)?;
        let member_id = if hb.member_epoch == 0 {
            self.join(&hb, config, now)?
        } else {
            let m = self
                .members
                .get(&hb.member_id)
                .ok_or_else(|| ConsumerError::UnknownMemberId(hb.member_id.clone()))?;
            let owned_ok = hb.owned.as_ref().is_none_or(|o| is_subset(o, &m.assigned));
            if hb.member_epoch != m.epoch && !(hb.member_epoch == m.previous_epoch && owned_ok) {
                return Err(ConsumerError::FencedMemberEpoch(hb.member_id.clone()));
            }
            hb.member_id.clone()
        };
        let mut changed = self.update_member(&member_id, &hb, config, now)?;
        changed |= self.refresh_topics(topics);
        if changed {
            self.epoch += 1;
        }
        self.maybe_assign(topics, config);
        let rejoined = hb.member_epoch == 0;
        let owned = hb.owned;
        let reply_assignment = self.reconcile(&member_id, owned.as_ref(), now, rejoined);
        let m = &self.members[&member_id];
        Ok(HeartbeatReply {
            member_id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment: reply_assignment,
        })
    }

    fn join(
        &mut self,
        hb: &Heartbeat,
        config: &ConsumerConfig,
        now: i64,
    ) -> Result<String, ConsumerError> {
        let id = if hb.member_id.is_empty() {
            uuid::Uuid::new_v4().simple().to_string()
        } else {
            hb.member_id.clone()
        };
        if let Some(instance) = &hb.instance_id {
            let holder = self
                .members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(instance) && m.id != id)
                .map(|m| (m.id.clone(), m.epoch));
            if let Some((old, epoch)) = holder {
                // A static member coming back (its old incarnation left with
                // epoch -2) takes over; a live one blocks the instance id.
                if epoch != -2 {
                    return Err(ConsumerError::UnreleasedInstanceId(instance.clone()));
                }
                if let Some(mut m) = self.members.remove(&old) {
                    m.id = id.clone();
                    m.epoch = self.assignment_epoch;
                    self.target
                        .remove(&old)
                        .map(|t| self.target.insert(id.clone(), t));
                    self.members.insert(id.clone(), m);
                }
            }
        }
        if !self.members.contains_key(&id) {
            if self.members.len() >= config.max_size {
                return Err(ConsumerError::GroupMaxSizeReached);
            }
            self.members.insert(
                id.clone(),
                Member {
                    id: id.clone(),
                    instance_id: hb.instance_id.clone(),
                    rack_id: hb.rack_id.clone(),
                    client_id: hb.client_id.clone(),
                    client_host: hb.client_host.clone(),
                    epoch: 0,
                    previous_epoch: 0,
                    rebalance_timeout_ms: hb.rebalance_timeout_ms,
                    topic_names: Vec::new(),
                    regex: None,
                    assignor: None,
                    assigned: Assignment::new(),
                    last_sent: None,
                    session_deadline: now + config.session_timeout_ms,
                    revocation_deadline: None,
                },
            );
        }
        // A member rejoining with epoch 0 has lost its state: whatever it
        // held is considered released.
        if let Some(m) = self.members.get_mut(&id) {
            m.assigned.clear();
            m.last_sent = None;
            m.revocation_deadline = None;
        }
        Ok(id)
    }

    /// Checks a heartbeat before it changes anything.
    fn validate(&mut self, hb: &Heartbeat, config: &ConsumerConfig) -> Result<(), ConsumerError> {
        if let Some(name) = &hb.server_assignor {
            if !name.is_empty()
                && Assignor::parse(name).is_none_or(|a| !config.assignors.contains(&a))
            {
                return Err(ConsumerError::UnsupportedAssignor(name.clone()));
            }
        }
        if let Some(re) = hb
            .subscribed_topic_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            self.compile(re)?;
        }
        if hb.member_epoch == 0 && !self.members.contains_key(&hb.member_id) {
            if hb.rebalance_timeout_ms < 0 {
                return Err(ConsumerError::InvalidRequest(
                    "rebalance_timeout_ms is required to join".into(),
                ));
            }
            if hb.subscribed_topic_names.is_none() && hb.subscribed_topic_regex.is_none() {
                return Err(ConsumerError::InvalidRequest(
                    "a subscription is required to join".into(),
                ));
            }
        }
        Ok(())
    }

    /// Applies subscription changes; true if the group must be reassigned.
    fn update_member(
        &mut self,
        id: &str,
        hb: &Heartbeat,
        config: &ConsumerConfig,
        now: i64,
    ) -> Result<bool, ConsumerError> {
        let Some(m) = self.members.get_mut(id) else {
            return Err(ConsumerError::UnknownMemberId(id.to_string()));
        };
        let mut changed = m.epoch == 0 && hb.member_epoch == 0;
        m.session_deadline = now + config.session_timeout_ms;
        if hb.rebalance_timeout_ms >= 0 {
            m.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if let Some(names) = &hb.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            if names != m.topic_names {
                m.topic_names = names;
                changed = true;
            }
        }
        if let Some(re) = &hb.subscribed_topic_regex {
            let re = (!re.is_empty()).then(|| re.clone());
            if re != m.regex {
                m.regex = re;
                changed = true;
            }
        }
        if let Some(a) = &hb.server_assignor {
            let a = (!a.is_empty()).then(|| a.clone());
            if a != m.assignor {
                m.assignor = a;
                changed = true;
            }
        }
        if changed {
            // Keep compiled regexes only for subscriptions still in use.
            let used: BTreeSet<String> = self
                .members
                .values()
                .filter_map(|m| m.regex.clone())
                .collect();
            self.regex_cache.retain(|k, _| used.contains(k));
        }
        Ok(changed)
    }

    fn compile(&mut self, re: &str) -> Result<&Regex, ConsumerError> {
        if !self.regex_cache.contains_key(re) {
            // Kafka matches the whole topic name (Java's Pattern.matches).
            let compiled = Regex::new(&format!("^(?:{re})$"))
                .map_err(|e| ConsumerError::InvalidRegex(re.to_string(), e.to_string()))?;
            self.regex_cache
                .insert(re.to_string(), RegexHolder(compiled));
        }
        Ok(&self.regex_cache[re].0)
    }

    /// The topics `member` subscribes to, among `topics`.
    fn subscribed(&mut self, member: &str, topics: &[TopicInfo]) -> BTreeSet<TopicId> {
        let (names, regex) = match self.members.get(member) {
            Some(m) => (m.topic_names.clone(), m.regex.clone()),
            None => return BTreeSet::new(),
        };
        let re = regex.and_then(|r| self.compile(&r).ok().cloned());
        topics
            .iter()
            .filter(|t| {
                names.contains(&t.name)
                    || re.as_ref().is_some_and(|re| {
                        !model::is_internal_topic(&t.name) && re.is_match(&t.name)
                    })
            })
            .map(|t| t.id)
            .collect()
    }

    /// True if the subscribed topics changed (created, deleted, grown).
    fn refresh_topics(&mut self, topics: &[TopicInfo]) -> bool {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        let mut all = BTreeSet::new();
        for id in ids {
            all.extend(self.subscribed(&id, topics));
        }
        let fp: Vec<(TopicId, i32)> = topics
            .iter()
            .filter(|t| all.contains(&t.id))
            .map(|t| (t.id, t.partitions))
            .collect();
        if fp != self.fingerprint {
            self.fingerprint = fp;
            true
        } else {
            false
        }
    }

    fn maybe_assign(&mut self, topics: &[TopicInfo], config: &ConsumerConfig) {
        if self.assignment_epoch >= self.epoch {
            return;
        }
        let ids: Vec<String> = self.members.keys().cloned().collect();
        let subs: BTreeMap<String, BTreeSet<TopicId>> = ids
            .iter()
            .map(|id| (id.clone(), self.subscribed(id, topics)))
            .collect();
        let assignor = self
            .members
            .values()
            .filter_map(|m| m.assignor.as_deref().and_then(Assignor::parse))
            .next()
            .or_else(|| config.assignors.first().copied())
            .unwrap_or(Assignor::Uniform);
        self.target = assignor.assign(&subs, topics, &self.target);
        self.assignment_epoch = self.epoch;
    }

    /// Moves `member` towards its target; returns the assignment to send,
    /// if the member must be told something new.
    fn reconcile(
        &mut self,
        member: &str,
        owned: Option<&Assignment>,
        now: i64,
        force: bool,
    ) -> Option<Assignment> {
        let target = self.target.get(member).cloned().unwrap_or_default();
        let others: Assignment = self
            .members
            .iter()
            .filter(|(id, _)| id.as_str() != member)
            .fold(Assignment::new(), |mut acc, (_, m)| {
                for (t, ps) in &m.assigned {
                    acc.entry(*t).or_default().extend(ps.iter().copied());
                }
                acc
            });
        let assignment_epoch = self.assignment_epoch;
        let m = self.members.get_mut(member)?;
        let revoke = difference(&m.assigned, &target);
        if !revoke.is_empty() {
            let released = owned.is_some_and(|o| intersection(o, &revoke).is_empty());
            if released {
                m.assigned = difference(&m.assigned, &revoke);
                m.revocation_deadline = None;
            } else {
                if m.revocation_deadline.is_none() {
                    m.revocation_deadline = Some(now + m.rebalance_timeout_ms.max(0) as i64);
                }
                let keep = intersection(&m.assigned, &target);
                return send_if_new(m, keep, force);
            }
        }
        // Nothing left to revoke: the member moves to the target epoch and
        // gets every target partition that nobody else still holds.
        let free = difference(&difference(&target, &m.assigned), &others);
        for (t, ps) in free {
            m.assigned.entry(t).or_default().extend(ps);
        }
        if m.epoch != assignment_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = assignment_epoch;
        }
        let now_assigned = m.assigned.clone();
        send_if_new(m, now_assigned, force)
    }

    /// A static member leaving temporarily (epoch -2, KIP-848): it keeps
    /// its partitions and the group is not rebalanced; a member rejoining
    /// with the same instance id takes its place, and if none does, the
    /// session timeout removes it. `None` if this is not a static member.
    fn static_leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Option<HeartbeatReply> {
        let instance = instance_id?;
        let m = self
            .members
            .values_mut()
            .find(|m| m.id == member_id && m.instance_id.as_deref() == Some(instance))?;
        m.epoch = -2;
        m.last_sent = None;
        m.revocation_deadline = None;
        Some(HeartbeatReply {
            member_id: m.id.clone(),
            member_epoch: -2,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        topics: &[TopicInfo],
        config: &ConsumerConfig,
    ) -> Result<HeartbeatReply, ConsumerError> {
        let id = if self.members.contains_key(member_id) {
            member_id.to_string()
        } else if let Some(inst) = instance_id {
            self.members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(inst))
                .map(|m| m.id.clone())
                .ok_or_else(|| ConsumerError::UnknownMemberId(member_id.to_string()))?
        } else {
            return Err(ConsumerError::UnknownMemberId(member_id.to_string()));
        };
        self.remove_member(&id, topics, config);
        Ok(HeartbeatReply {
            member_id: id,
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    fn remove_member(&mut self, id: &str, topics: &[TopicInfo], config: &ConsumerConfig) {
        if self.members.remove(id).is_some() {
            self.target.remove(id);
            self.epoch += 1;
            self.refresh_topics(topics);
            self.maybe_assign(topics, config);
        }
    }

    /// Expires members whose session or revocation deadline has passed, and
    /// reassigns if the subscribed topics changed. Returns true if the group
    /// changed (to be persisted).
    pub fn tick(&mut self, topics: &[TopicInfo], config: &ConsumerConfig, now: i64) -> bool {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.id.clone())
            .collect();
        let mut changed = !expired.is_empty();
        for id in expired {
            tracing::info!(group = %self.id, member = %id, "removing consumer group member: session or revocation timeout");
            self.remove_member(&id, topics, config);
        }
        if !self.members.is_empty() && self.refresh_topics(topics) {
            self.epoch += 1;
            self.maybe_assign(topics, config);
            changed = true;
        }
        changed
    }

    /// The earliest session or revocation deadline.
    pub fn next_deadline(&self) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline), m.revocation_deadline])
            .flatten()
            .min()
    }

    /// OffsetCommit from a member: its epoch must be current.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ConsumerError> {
        if member_epoch < 0 && self.members.is_empty() {
            // An admin/simple commit while nobody consumes (any member id,
            // as Kafka's ConsumerGroup.validateOffsetCommit).
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or_else(|| ConsumerError::UnknownMemberId(member_id.to_string()))?;
        if member_epoch != m.epoch && member_epoch != m.previous_epoch {
            return Err(ConsumerError::StaleMemberEpoch(member_id.to_string()));
        }
        Ok(())
    }

    /// Every member's description.
    pub fn members(&self) -> Vec<MemberDescription> {
        self.members
            .values()
            .map(|m| MemberDescription {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                member_epoch: m.epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed_topic_names: m.topic_names.clone(),
                subscribed_topic_regex: m.regex.clone(),
                assignment: m.assigned.clone(),
                target_assignment: self.target.get(&m.id).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The assignor in use.
    pub fn assignor_name(&self, config: &ConsumerConfig) -> &'static str {
        self.members
            .values()
            .filter_map(|m| m.assignor.as_deref().and_then(Assignor::parse))
            .next()
            .or_else(|| config.assignors.first().copied())
            .unwrap_or(Assignor::Uniform)
            .name()
    }

    /// After a restart: members get a fresh session.
    pub fn restored(mut self, config: &ConsumerConfig, now: i64) -> ConsumerGroup {
        for m in self.members.values_mut() {
            m.session_deadline = now + config.session_timeout_ms;
            m.revocation_deadline = None;
            m.last_sent = None;
        }
        self
    }
}

fn send_if_new(m: &mut Member, a: Assignment, force: bool) -> Option<Assignment> {
    if force || m.last_sent.as_ref() != Some(&a) {
        m.last_sent = Some(a.clone());
        Some(a)
    } else {
        None
    }
}

fn difference(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        let rest: BTreeSet<i32> = match b.get(t) {
            Some(bp) => ps.difference(bp).copied().collect(),
            None => ps.clone(),
        };
        if !rest.is_empty() {
            out.insert(*t, rest);
        }
    }
    out
}

fn intersection(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        if let Some(bp) = b.get(t) {
            let both: BTreeSet<i32> = ps.intersection(bp).copied().collect();
            if !both.is_empty() {
                out.insert(*t, both);
            }
        }
    }
    out
}

fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    difference(a, b).is_empty()
}

impl Serialize for RegexHolder {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for RegexHolder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Regex::new(&s)
            .map(RegexHolder)
            .map_err(serde::de::Error::custom)
    }
}
