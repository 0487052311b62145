//! SyncGroup, Heartbeat, LeaveGroup, offset-commit checks, DeleteGroups and
//! unloading.

use super::group::ClassicGroup;
use super::types::{Effect, GroupState, SyncRequest, SyncResult};
use super::GroupError;

impl ClassicGroup {
    /// Handles a SyncGroup request. A follower that arrives before the
    /// leader is parked until the leader's assignment comes in.
    pub fn sync(&mut self, req: SyncRequest, now_ms: i64) -> Vec<Effect> {
        if let Err(error) = self.sync_inner(&req, now_ms) {
            self.out.push(Effect::SyncDone {
                request: req.request,
                result: Err(error),
            });
        }
        self.take_effects()
    }

    fn sync_inner(&mut self, req: &SyncRequest, now: i64) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        let type_ok = req.protocol_type.is_none() || req.protocol_type == self.protocol_type;
        let name_ok = req.protocol_name.is_none() || req.protocol_name == self.protocol_name;
        if !type_ok || !name_ok {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let id = req.member_id.as_str();
        match self.state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::CompletingRebalance => {
                let member = self.members.get_mut(id).expect("validated member");
                if let Some(old) = member.awaiting_sync.replace(req.request) {
                    // A retried SyncGroup supersedes the parked one.
                    self.out.push(Effect::SyncDone {
                        request: old,
                        result: Err(GroupError::RebalanceInProgress),
                    });
                }
                self.mark_synced(id);
                if self.leader.as_deref() == Some(id) {
                    self.complete_sync(req.assignments.clone(), now);
                }
                Ok(())
            }
            GroupState::Stable => {
                self.mark_synced(id);
                let member = self.members.get_mut(id).expect("validated member");
                member.refresh_session(now);
                let result = SyncResult {
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: member.assignment.clone(),
                };
                self.out.push(Effect::SyncDone {
                    request: req.request,
                    result: Ok(result),
                });
                Ok(())
            }
        }
    }

    /// Handles a Heartbeat: refreshes the member's session, and tells it to
    /// rejoin (REBALANCE_IN_PROGRESS) while the group is preparing a
    /// rebalance.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now_ms: i64,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(member_id, group_instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        let state = self.state;
        let member = self.members.get_mut(member_id).expect("validated member");
        match state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => {
                member.refresh_session(now_ms);
                Err(GroupError::RebalanceInProgress)
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.refresh_session(now_ms);
                Ok(())
            }
        }
    }

    /// Handles a LeaveGroup (v3+ batches several members). Each entry is a
    /// member id and instance id; the member id may be empty when a static
    /// member is removed by instance id alone (the admin client's
    /// `removeMembersFromConsumerGroup`). Returns, per entry in order, the id
    /// of the member removed or why not.
    pub fn leave(
        &mut self,
        members: &[(String, Option<String>)],
        now_ms: i64,
    ) -> (Vec<Result<String, GroupError>>, Vec<Effect>) {
        let results = members
            .iter()
            .map(|(member_id, instance_id)| {
                self.leave_one(member_id, instance_id.as_deref(), now_ms)
            })
            .collect();
        (results, self.take_effects())
    }

    fn leave_one(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: i64,
    ) -> Result<String, GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let id = if member_id.is_empty() {
            instance_id
                .and_then(|i| self.static_members.get(i).cloned())
                .ok_or(GroupError::UnknownMemberId)?
        } else if self.pending_members.remove(member_id).is_some() {
            self.maybe_complete_join(now);
            return Ok(member_id.to_string());
        } else {
            self.validate_member(member_id, instance_id)?;
            member_id.to_string()
        };
        self.remove_member(&id, now, "left the group");
        Ok(id)
    }

    /// Checks an OffsetCommit against the group, as Kafka does: generation
    /// -1 is a "simple" commit, allowed while the group is Empty; otherwise
    /// the member must exist in this generation, and commits wait out
    /// CompletingRebalance (REBALANCE_IN_PROGRESS). Call
    /// [`ClassicGroup::record_offset_commit`] once the commit is accepted.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        self.check_commit(member_id, group_instance_id, generation_id, false)
    }

    /// A member's accepted OffsetCommit is a sign of life: in Stable and
    /// PreparingRebalance it refreshes the session, as in Kafka.
    pub fn record_offset_commit(&mut self, member_id: &str, now_ms: i64) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::PreparingRebalance
        ) {
            if let Some(m) = self.members.get_mut(member_id) {
                m.refresh_session(now_ms);
            }
        }
    }

    /// Checks a TxnOffsetCommit: like [`ClassicGroup::validate_offset_commit`]
    /// but older transactional producers carry no member or generation, so
    /// those commit whatever the group's state.
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        self.check_commit(member_id, group_instance_id, generation_id, true)
    }

    fn check_commit(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        transactional: bool,
    ) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
            self.validate_member(member_id, group_instance_id)?;
            if generation_id != self.generation_id {
                return Err(GroupError::IllegalGeneration);
            }
        } else if !transactional && self.state != GroupState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        if !transactional && self.state == GroupState::CompletingRebalance {
            // The member has its new generation but not its assignment yet.
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Whether the group is Empty (no members); only then may it be deleted
    /// or taken over by the consumer (KIP-848) protocol.
    pub fn is_empty(&self) -> bool {
        self.state == GroupState::Empty
    }

    /// The coordinator is giving the group up (DeleteGroups, shutdown, or a
    /// move): the group becomes Dead and every parked JoinGroup and
    /// SyncGroup is answered COORDINATOR_NOT_AVAILABLE, so clients look the
    /// coordinator up again and rejoin. Later calls are refused the same way.
    pub fn unload(&mut self, now_ms: i64) -> Vec<Effect> {
        for id in self.ordered_ids() {
            let m = self.members.get_mut(&id).expect("listed member");
            if let Some(request) = m.awaiting_join.take() {
                self.out.push(Effect::JoinDone {
                    request,
                    result: Err(GroupError::CoordinatorNotAvailable),
                });
            }
            if let Some(request) = m.awaiting_sync.take() {
                self.out.push(Effect::SyncDone {
                    request,
                    result: Err(GroupError::CoordinatorNotAvailable),
                });
            }
        }
        self.members.clear();
        self.static_members.clear();
        self.pending_members.clear();
        self.pending_sync.clear();
        self.join_timer = None;
        self.sync_deadline = None;
        self.leader = None;
        self.transition(GroupState::Dead, now_ms);
        self.take_effects()
    }
}
