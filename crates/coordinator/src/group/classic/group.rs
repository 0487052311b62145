//! The group itself and the JoinGroup path: new members, KIP-394 pending
//! members, rejoins and KIP-345 static member replacement.

use std::collections::{HashMap, HashSet};

use super::member::Member;
use super::timers::JoinTimer;
use super::types::{
    ClassicConfig, Effect, GroupState, JoinRequest, JoinResult, JoinedMember, Protocol, RequestId,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
};
use super::GroupError;

/// One classic consumer group: a pure state machine driven by requests and
/// by [`ClassicGroup::tick`], with time passed in. Parked JoinGroup and
/// SyncGroup requests are answered through the returned [`Effect`]s.
#[derive(Debug, Clone)]
pub struct ClassicGroup {
    pub(super) group_id: String,
    pub(super) config: ClassicConfig,
    pub(super) state: GroupState,
    pub(super) previous_state: GroupState,
    pub(super) state_since_ms: i64,
    pub(super) generation_id: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol_name: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: HashMap<String, Member>,
    /// Instance id to the member id that currently holds it.
    pub(super) static_members: HashMap<String, String>,
    /// KIP-394: ids handed out with MEMBER_ID_REQUIRED, with the deadline by
    /// which the client must rejoin with it.
    pub(super) pending_members: HashMap<String, i64>,
    /// Members of this generation that have not sent SyncGroup yet.
    pub(super) pending_sync: HashSet<String>,
    pub(super) join_timer: Option<JoinTimer>,
    pub(super) sync_deadline: Option<i64>,
    /// A member arrived during an initial (from Empty) rebalance, so the
    /// initial delay is extended once more.
    pub(super) new_member_added: bool,
    pub(super) next_seq: u64,
    pub(super) out: Vec<Effect>,
}

impl ClassicGroup {
    /// A new, empty group at generation 0.
    pub fn new(group_id: String, config: ClassicConfig) -> Self {
        ClassicGroup {
            group_id,
            config,
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_since_ms: 0,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: HashMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            pending_sync: HashSet::new(),
            join_timer: None,
            sync_deadline: None,
            new_member_added: false,
            next_seq: 0,
            out: Vec::new(),
        }
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The current state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// When the group entered its current state (ms), as far as this
    /// process has seen.
    pub fn state_since_ms(&self) -> i64 {
        self.state_since_ms
    }

    /// The current generation.
    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    /// The group's protocol type (kept while Empty, as Kafka does, so
    /// ListGroups still reports `consumer`).
    pub fn protocol_type(&self) -> Option<String> {
        self.protocol_type.clone()
    }

    /// The protocol chosen for the current generation.
    pub fn protocol_name(&self) -> Option<String> {
        self.protocol_name.clone()
    }

    /// The leader's member id.
    pub fn leader(&self) -> Option<String> {
        self.leader.clone()
    }

    /// Every member's metadata for the current generation's protocol (for
    /// consumers: the subscriptions), whatever the state; empty when the
    /// group has no protocol. OffsetDelete uses it to tell which topics the
    /// group consumes, which DescribeGroups hides outside Stable.
    pub fn protocol_metadata(&self) -> Vec<bytes::Bytes> {
        if self.protocol_name.is_none() {
            return Vec::new();
        }
        self.joined_members()
            .into_iter()
            .map(|m| m.metadata)
            .collect()
    }

    /// How many members the group has.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// Whether `member_id` is a member.
    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// The settings this group obeys.
    pub fn config(&self) -> &ClassicConfig {
        &self.config
    }

    /// Replaces the settings (a dynamic broker config change). Parked
    /// requests and running timers keep the values they started with.
    pub fn set_config(&mut self, config: ClassicConfig) {
        self.config = config;
    }

    /// Handles a JoinGroup request. The request is either answered in the
    /// returned effects or parked until a later call answers it.
    pub fn join(&mut self, req: JoinRequest, now_ms: i64) -> Vec<Effect> {
        self.join_inner(req, now_ms);
        self.take_effects()
    }

    pub(super) fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.out)
    }

    fn join_inner(&mut self, req: JoinRequest, now: i64) {
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return self.fail_join(&req, GroupError::InvalidSessionTimeout);
        }
        if self.state == GroupState::Dead {
            return self.fail_join(&req, GroupError::CoordinatorNotAvailable);
        }
        let target = self.joining_member_id(&req);
        if !self.accept_joining_member(target.as_deref()) {
            // Over capacity: the joiner is turned away, and an existing
            // member that had not rejoined yet is dropped (Kafka kicks the
            // last rejoiners out when group.max.size shrank).
            if let Some(id) = target {
                if self.members.contains_key(&id) {
                    self.remove_member(&id, now, "group is over capacity");
                } else {
                    self.pending_members.remove(&id);
                }
            }
            self.fail_join(&req, GroupError::GroupMaxSizeReached);
        } else if req.member_id.is_empty() {
            self.join_new_member(req, now);
        } else {
            self.join_existing_member(req, now);
        }
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(now);
        }
    }

    pub(super) fn fail_join(&mut self, req: &JoinRequest, error: GroupError) {
        self.out.push(Effect::JoinDone {
            request: req.request,
            result: Err(error),
        });
    }

    /// The member id a join concerns: the given one, or the current holder
    /// of the static instance id. Counting a restarting static member as
    /// the member it replaces keeps a full group from refusing it.
    fn joining_member_id(&self, req: &JoinRequest) -> Option<String> {
        if !req.member_id.is_empty() {
            return Some(req.member_id.clone());
        }
        req.group_instance_id
            .as_ref()
            .and_then(|i| self.static_members.get(i).cloned())
    }

    fn accept_joining_member(&self, member_id: Option<&str>) -> bool {
        let max = self.config.max_size;
        let existing = member_id.and_then(|id| self.members.get(id));
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            // Awaiting joins, not the member count: the count may already
            // exceed a lowered limit, and this lets the last rejoiners go.
            GroupState::PreparingRebalance => {
                existing.is_some_and(|m| m.awaiting_join.is_some())
                    || self.num_awaiting_join() < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                existing.is_some() || self.members.len() < max
            }
        }
    }

    pub(super) fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    fn join_new_member(&mut self, req: JoinRequest, now: i64) {
        let replaced = req
            .group_instance_id
            .as_ref()
            .and_then(|i| self.static_members.get(i).cloned());
        if !self.supports_protocols(&req.protocol_type, &req.protocols, replaced.as_deref()) {
            return self.fail_join(&req, GroupError::InconsistentGroupProtocol);
        }
        let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
        let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        match (&req.group_instance_id, replaced) {
            (Some(_), Some(old_id)) => self.replace_static_member(old_id, new_id, req, now),
            (Some(_), None) => self.add_member(new_id, req, now),
            (None, _) if req.require_known_member_id => {
                let deadline = now.saturating_add(i64::from(req.session_timeout_ms));
                self.pending_members.insert(new_id.clone(), deadline);
                self.fail_join(&req, GroupError::MemberIdRequired(new_id));
            }
            (None, _) => self.add_member(new_id, req, now),
        }
    }

    fn join_existing_member(&mut self, req: JoinRequest, now: i64) {
        let id = req.member_id.clone();
        if !self.supports_protocols(&req.protocol_type, &req.protocols, Some(&id)) {
            return self.fail_join(&req, GroupError::InconsistentGroupProtocol);
        }
        if req.group_instance_id.is_none() && self.pending_members.contains_key(&id) {
            return self.add_member(id, req, now);
        }
        if let Err(e) = self.validate_member(&id, req.group_instance_id.as_deref()) {
            return self.fail_join(&req, e);
        }
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let unchanged = self.members[&id].matches(&req.protocols);
        match self.state {
            GroupState::PreparingRebalance => self.update_member_and_rebalance(&id, req, now),
            // The member probably lost its JoinGroup response: repeat it.
            GroupState::CompletingRebalance if unchanged => {
                self.answer_join_now(&id, &req, is_leader, now)
            }
            GroupState::CompletingRebalance => self.update_member_and_rebalance(&id, req, now),
            // A leader rejoining a stable group asks for a rebalance: that
            // is how it reacts to changes the metadata does not show (e.g.
            // new topics matching a pattern subscription).
            GroupState::Stable if is_leader || !unchanged => {
                self.update_member_and_rebalance(&id, req, now)
            }
            GroupState::Stable => self.answer_join_now(&id, &req, false, now),
            GroupState::Empty | GroupState::Dead => {
                self.fail_join(&req, GroupError::UnknownMemberId)
            }
        }
    }

    /// Answers a join with the current generation, without a rebalance.
    fn answer_join_now(&mut self, id: &str, req: &JoinRequest, with_members: bool, now: i64) {
        let members = if with_members {
            self.joined_members()
        } else {
            Vec::new()
        };
        let result = self.join_result(id, members, self.leader.clone(), false);
        if let Some(m) = self.members.get_mut(id) {
            m.refresh_session(now);
        }
        self.out.push(Effect::JoinDone {
            request: req.request,
            result: Ok(result),
        });
    }

    fn update_member_and_rebalance(&mut self, id: &str, req: JoinRequest, now: i64) {
        let member = self.members.get_mut(id).expect("validated member");
        member.update_from_join(&req);
        if let Some(old) = member.awaiting_join.replace(req.request) {
            // A retried JoinGroup supersedes the parked one; the client
            // stopped waiting for that, but answer it so nothing leaks.
            self.out.push(Effect::JoinDone {
                request: old,
                result: Err(GroupError::RebalanceInProgress),
            });
        }
        let reason = format!("member {id} rejoined in state {}", self.state);
        self.maybe_prepare_rebalance(now, &reason);
    }

    pub(super) fn add_member(&mut self, id: String, req: JoinRequest, now: i64) {
        let mut member = Member::from_join(id.clone(), &req, self.next_seq);
        self.next_seq += 1;
        member.is_new = true;
        member.awaiting_join = Some(req.request);
        member.session_deadline = now.saturating_add(NEW_MEMBER_JOIN_TIMEOUT_MS);
        if self.state == GroupState::PreparingRebalance && self.previous_state == GroupState::Empty
        {
            self.new_member_added = true;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        if let Some(instance) = &req.group_instance_id {
            self.static_members.insert(instance.clone(), id.clone());
        }
        self.pending_members.remove(&id);
        self.members.insert(id.clone(), member);
        tracing::debug!(group = %self.group_id, member = %id, reason = ?req.reason, "member joined");
        let reason = format!("adding member {id}");
        self.maybe_prepare_rebalance(now, &reason);
    }

    /// KIP-345: a static member restarted (empty member id, known instance
    /// id). The new id takes over the instance; the old id is fenced.
    fn replace_static_member(
        &mut self,
        old_id: String,
        new_id: String,
        req: JoinRequest,
        now: i64,
    ) {
        let previous_leader = self.leader.clone();
        let mut member = self.members.remove(&old_id).expect("static member exists");
        if let Some(r) = member.awaiting_join.take() {
            self.out.push(Effect::JoinDone {
                request: r,
                result: Err(GroupError::FencedInstanceId),
            });
        }
        if let Some(r) = member.awaiting_sync.take() {
            self.out.push(Effect::SyncDone {
                request: r,
                result: Err(GroupError::FencedInstanceId),
            });
        }
        member.id = new_id.clone();
        member.update_from_join(&req);
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.refresh_session(now);
        if previous_leader.as_deref() == Some(old_id.as_str()) {
            self.leader = Some(new_id.clone());
        }
        if let Some(instance) = &member.instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        // The new incarnation still owes the SyncGroup the old one owed.
        if self.pending_sync.remove(&old_id) {
            self.pending_sync.insert(new_id.clone());
        }
        self.members.insert(new_id.clone(), member);
        tracing::info!(group = %self.group_id, old = %old_id, new = %new_id, state = %self.state,
            "static member replaced");

        match self.state {
            GroupState::Stable
                if self.select_protocol().as_deref() == self.protocol_name.as_deref() =>
            {
                // Nothing the assignment depends on changed: keep the
                // generation and the member's assignment.
                self.out.push(Effect::Persist);
                let result = if req.supports_skip_assignment {
                    let is_leader = self.leader.as_deref() == Some(new_id.as_str());
                    let members = if is_leader {
                        self.joined_members()
                    } else {
                        Vec::new()
                    };
                    self.join_result(&new_id, members, self.leader.clone(), is_leader)
                } else {
                    // Older clients would run the assignor if told they
                    // lead, and a stable group ignores that assignment; the
                    // old leader id keeps them from trying.
                    self.join_result(&new_id, Vec::new(), previous_leader, false)
                };
                self.out.push(Effect::JoinDone {
                    request: req.request,
                    result: Ok(result),
                });
            }
            GroupState::Stable => {
                self.park_join(&new_id, req.request);
                let reason = format!("static member {new_id} changes the group protocol");
                self.maybe_prepare_rebalance(now, &reason);
            }
            // The leader may already be assigning to the old id, which
            // would leave the new one without an assignment.
            GroupState::CompletingRebalance => {
                self.park_join(&new_id, req.request);
                let reason = format!("static member {new_id} replaced during CompletingRebalance");
                self.prepare_rebalance(now, &reason);
            }
            GroupState::PreparingRebalance => self.park_join(&new_id, req.request),
            GroupState::Empty | GroupState::Dead => {
                self.fail_join(&req, GroupError::UnknownMemberId)
            }
        }
    }

    fn park_join(&mut self, id: &str, request: RequestId) {
        if let Some(m) = self.members.get_mut(id) {
            m.awaiting_join = Some(request);
        }
    }

    /// Checks that the member exists and, for a static member, that it
    /// still holds its instance id.
    pub(super) fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                None => return Err(GroupError::UnknownMemberId),
                Some(holder) if holder != member_id => return Err(GroupError::FencedInstanceId),
                Some(_) => {}
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    /// Whether a member with these protocols fits: same protocol type, and
    /// one protocol every other member supports. `rejoining` is left out
    /// of the count so a member may drop protocols it used to offer.
    pub(super) fn supports_protocols(
        &self,
        protocol_type: &str,
        protocols: &[Protocol],
        rejoining: Option<&str>,
    ) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|p| {
            self.members
                .values()
                .filter(|m| Some(m.id.as_str()) != rejoining)
                .all(|m| m.supports(&p.name))
        })
    }

    /// Member ids in join order.
    pub(super) fn ordered_ids(&self) -> Vec<String> {
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|m| m.seq);
        members.into_iter().map(|m| m.id.clone()).collect()
    }

    /// Every member with its metadata for the chosen protocol: the leader's
    /// JoinGroup payload.
    pub(super) fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref();
        self.ordered_ids()
            .into_iter()
            .map(|id| {
                let m = &self.members[&id];
                JoinedMember {
                    member_id: id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    metadata: m.metadata(protocol),
                }
            })
            .collect()
    }

    pub(super) fn join_result(
        &self,
        member_id: &str,
        members: Vec<JoinedMember>,
        leader: Option<String>,
        skip_assignment: bool,
    ) -> JoinResult {
        JoinResult {
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: leader.unwrap_or_default(),
            member_id: member_id.to_string(),
            skip_assignment,
            members,
        }
    }

    pub(super) fn transition(&mut self, to: GroupState, now: i64) {
        self.previous_state = self.state;
        self.state = to;
        self.state_since_ms = now;
    }
}
