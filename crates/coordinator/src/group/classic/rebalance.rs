//! Rebalancing: entering PreparingRebalance, completing the join phase into
//! a new generation, the leader's assignment, and removing members.

use bytes::Bytes;

use super::group::ClassicGroup;
use super::member::Member;
use super::timers::JoinTimer;
use super::types::{Effect, GroupState, SyncResult};
use super::GroupError;

impl ClassicGroup {
    pub(super) fn maybe_prepare_rebalance(&mut self, now: i64, reason: &str) {
        if matches!(
            self.state,
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable
        ) {
            self.prepare_rebalance(now, reason);
        }
    }

    /// Starts a rebalance: members must rejoin within the rebalance timeout
    /// (or, for a group coming out of Empty, the initial delay).
    pub(super) fn prepare_rebalance(&mut self, now: i64, reason: &str) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_and_propagate_assignment_error(GroupError::RebalanceInProgress, now);
        }
        self.sync_deadline = None;
        self.pending_sync.clear();
        let timeout = self.rebalance_timeout_ms();
        self.join_timer = Some(if self.state == GroupState::Empty {
            let delay = self.config.initial_rebalance_delay_ms.max(0);
            JoinTimer::Initial {
                deadline: now.saturating_add(delay),
                delay_ms: delay,
                remaining_ms: (timeout - delay).max(0),
            }
        } else {
            JoinTimer::Rebalance {
                deadline: now.saturating_add(timeout),
            }
        });
        self.new_member_added = false;
        self.transition(GroupState::PreparingRebalance, now);
        tracing::info!(group = %self.group_id, generation = self.generation_id, %reason,
            "preparing to rebalance");
        self.maybe_complete_join(now);
    }

    /// The longest rebalance timeout among the members, at least 1 ms so
    /// timers always move forward.
    pub(super) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
            .max(1)
    }

    /// Completes the join phase early once every member (and every KIP-394
    /// pending member) has rejoined. The initial delay always runs out.
    pub(super) fn maybe_complete_join(&mut self, now: i64) {
        if self.state == GroupState::PreparingRebalance
            && matches!(self.join_timer, Some(JoinTimer::Rebalance { .. }))
            && self.all_members_joined()
        {
            self.complete_join(now);
        }
    }

    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// Ends the join phase: drops dynamic members that did not rejoin, then
    /// starts the next generation and answers every parked JoinGroup.
    pub(super) fn complete_join(&mut self, now: i64) {
        self.join_timer = None;
        // Static members that did not rejoin stay: they keep their place
        // until their session expires (KIP-345).
        let stale: Vec<String> = self
            .ordered_ids()
            .into_iter()
            .filter(|id| {
                let m = &self.members[id];
                m.awaiting_join.is_none() && m.instance_id.is_none()
            })
            .collect();
        if !stale.is_empty() {
            tracing::info!(group = %self.group_id, members = ?stale,
                "removing members that did not rejoin");
        }
        for id in &stale {
            self.detach_member(id);
        }

        if !self.members.is_empty() && !self.elect_joined_leader() {
            // Only static members that have not rejoined remain: wait for
            // them to rejoin or for their sessions to expire.
            tracing::warn!(group = %self.group_id, "no member rejoined; extending the rebalance");
            self.join_timer = Some(JoinTimer::Rebalance {
                deadline: now.saturating_add(self.rebalance_timeout_ms()),
            });
            return;
        }

        self.generation_id = self.generation_id.saturating_add(1);
        self.pending_sync.clear();
        self.new_member_added = false;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.leader = None;
            self.transition(GroupState::Empty, now);
            tracing::info!(group = %self.group_id, generation = self.generation_id,
                "group is now empty");
            self.out.push(Effect::Persist);
            return;
        }

        self.protocol_name = self.select_protocol();
        self.transition(GroupState::CompletingRebalance, now);
        tracing::info!(group = %self.group_id, generation = self.generation_id,
            protocol = ?self.protocol_name, members = self.members.len(), "join phase complete");
        let leader = self.leader.clone();
        let listing = self.joined_members();
        for id in self.ordered_ids() {
            let parked = self.members[&id].awaiting_join;
            if let Some(request) = parked {
                let is_leader = leader.as_deref() == Some(id.as_str());
                let members = if is_leader {
                    listing.clone()
                } else {
                    Vec::new()
                };
                let result = self.join_result(&id, members, leader.clone(), false);
                self.out.push(Effect::JoinDone {
                    request,
                    result: Ok(result),
                });
            }
            let m = self.members.get_mut(&id).expect("listed member");
            m.awaiting_join = None;
            m.is_new = false;
            m.refresh_session(now);
            self.pending_sync.insert(id);
        }
        self.sync_deadline = Some(now.saturating_add(self.rebalance_timeout_ms()));
    }

    /// Keeps the leader if it rejoined, else hands leadership to the first
    /// member that did. False if nobody rejoined.
    fn elect_joined_leader(&mut self) -> bool {
        let current = self.leader.as_ref().and_then(|l| self.members.get(l));
        if current.is_some_and(|m| m.awaiting_join.is_some()) {
            return true;
        }
        let next = self
            .ordered_ids()
            .into_iter()
            .find(|id| self.members[id].awaiting_join.is_some());
        match next {
            Some(id) => {
                tracing::info!(group = %self.group_id, old = ?self.leader, new = %id,
                    "leader did not rejoin; electing a new one");
                self.leader = Some(id);
                true
            }
            None => false,
        }
    }

    /// The protocol every member supports that most members prefer; ties
    /// go to the leader's preference.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let reference = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .or_else(|| self.members.values().min_by_key(|m| m.seq))?;
        let candidates: Vec<&str> = reference
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect();
        let votes = |name: &str| {
            self.members
                .values()
                .filter(|m| m.vote(&candidates) == Some(name))
                .count()
        };
        let mut best: Option<(&str, usize)> = None;
        for name in &candidates {
            let n = votes(name);
            if best.is_none_or(|(_, most)| n > most) {
                best = Some((name, n));
            }
        }
        // No common protocol cannot happen after the join checks; fall back
        // to the reference member's favourite rather than having none.
        best.map(|(name, _)| name.to_string())
            .or_else(|| reference.protocols.first().map(|p| p.name.clone()))
    }

    /// The leader's SyncGroup: store every member's assignment, become
    /// Stable, and answer every parked SyncGroup.
    pub(super) fn complete_sync(&mut self, assignments: Vec<(String, Bytes)>, now: i64) {
        let mut by_member: std::collections::HashMap<String, Bytes> =
            assignments.into_iter().collect();
        for m in self.members.values_mut() {
            m.assignment = by_member.remove(&m.id).unwrap_or_default();
        }
        if !by_member.is_empty() {
            tracing::debug!(group = %self.group_id, ignored = ?by_member.keys().collect::<Vec<_>>(),
                "leader assigned to ids that are not members");
        }
        self.transition(GroupState::Stable, now);
        tracing::info!(group = %self.group_id, generation = self.generation_id, "group is stable");
        self.out.push(Effect::Persist);
        for id in self.ordered_ids() {
            let m = self.members.get_mut(&id).expect("listed member");
            if let Some(request) = m.awaiting_sync.take() {
                m.refresh_session(now);
                let result = SyncResult {
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: m.assignment.clone(),
                };
                self.out.push(Effect::SyncDone {
                    request,
                    result: Ok(result),
                });
            }
        }
    }

    /// Cancels the assignment phase: every parked SyncGroup gets `error`.
    fn reset_and_propagate_assignment_error(&mut self, error: GroupError, now: i64) {
        for id in self.ordered_ids() {
            let m = self.members.get_mut(&id).expect("listed member");
            m.assignment = Bytes::new();
            if let Some(request) = m.awaiting_sync.take() {
                m.refresh_session(now);
                self.out.push(Effect::SyncDone {
                    request,
                    result: Err(error.clone()),
                });
            }
        }
    }

    /// Records that a member sent SyncGroup; the sync timer stops once all
    /// have.
    pub(super) fn mark_synced(&mut self, id: &str) {
        self.pending_sync.remove(id);
        if self.pending_sync.is_empty() {
            self.sync_deadline = None;
        }
    }

    /// Members that never sent SyncGroup within the rebalance timeout are
    /// removed and the group rebalances without them.
    pub(super) fn expire_pending_sync(&mut self, now: i64) {
        self.sync_deadline = None;
        if !matches!(
            self.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) || self.pending_sync.is_empty()
        {
            return;
        }
        let mut late: Vec<String> = self.pending_sync.drain().collect();
        late.sort();
        tracing::info!(group = %self.group_id, members = ?late, "removing members that did not sync");
        for id in &late {
            self.detach_member(id);
        }
        self.prepare_rebalance(now, "members failed to sync in time");
    }

    /// Removes a member and moves the group on: a rebalance if it was
    /// settled, or an earlier end of the join phase if it was waiting.
    pub(super) fn remove_member(&mut self, id: &str, now: i64, reason: &str) {
        if self.detach_member(id).is_none() {
            return;
        }
        tracing::info!(group = %self.group_id, member = %id, %reason, "member removed");
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                let reason = format!("removing member {id}: {reason}");
                self.maybe_prepare_rebalance(now, &reason);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Takes a member out of every structure, answering its parked
    /// requests with UNKNOWN_MEMBER_ID so the client rejoins from scratch.
    pub(super) fn detach_member(&mut self, id: &str) -> Option<Member> {
        self.pending_members.remove(id);
        let mut member = self.members.remove(id)?;
        if let Some(request) = member.awaiting_join.take() {
            self.out.push(Effect::JoinDone {
                request,
                result: Err(GroupError::UnknownMemberId),
            });
        }
        if let Some(request) = member.awaiting_sync.take() {
            self.out.push(Effect::SyncDone {
                request,
                result: Err(GroupError::UnknownMemberId),
            });
        }
        if let Some(instance) = &member.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(id) {
                self.static_members.remove(instance);
            }
        }
        if self.pending_sync.remove(id) && self.pending_sync.is_empty() {
            self.sync_deadline = None;
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = self.ordered_ids().into_iter().next();
        }
        Some(member)
    }
}
