//! Time: the join-phase timer (initial delay or rebalance timeout), the
//! pending-sync timer, member sessions and KIP-394 pending members.

use super::group::ClassicGroup;
use super::types::{Effect, GroupState};

/// The timer that ends a join phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JoinTimer {
    /// A group coming out of Empty waits for more members (Kafka's
    /// InitialDelayedJoin): when it fires and members arrived meanwhile, it
    /// waits `min(delay, remaining)` again, within the rebalance timeout.
    Initial {
        deadline: i64,
        delay_ms: i64,
        remaining_ms: i64,
    },
    /// Ends when every member has rejoined, or at the deadline.
    Rebalance { deadline: i64 },
}

impl JoinTimer {
    fn deadline(&self) -> i64 {
        match *self {
            JoinTimer::Initial { deadline, .. } | JoinTimer::Rebalance { deadline } => deadline,
        }
    }
}

/// What falls due next; ties resolve in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Due {
    Join,
    Sync,
    Session(String),
    PendingMember(String),
}

impl ClassicGroup {
    /// Fires everything due at or before `now`, in deadline order: the end
    /// of a join phase, the sync timeout, member session expiry and
    /// KIP-394 pending member expiry.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Effect> {
        while let Some((at, due)) = self.earliest_due() {
            if at > now_ms {
                break;
            }
            self.fire(due, now_ms);
        }
        self.take_effects()
    }

    /// When [`ClassicGroup::tick`] next has work to do, if ever. Members
    /// parked in JoinGroup or SyncGroup are excused from heartbeating, so
    /// their sessions do not count until they are answered.
    pub fn next_deadline(&self) -> Option<i64> {
        self.earliest_due().map(|(at, _)| at)
    }

    fn earliest_due(&self) -> Option<(i64, Due)> {
        if self.state == GroupState::Dead {
            return None;
        }
        // Borrowed keys; only the winner's id is copied.
        let join = self.join_timer.map(|t| (t.deadline(), 0u8, ""));
        let sync = self.sync_deadline.map(|d| (d, 1u8, ""));
        let sessions = self
            .members
            .values()
            .filter(|m| !m.heartbeat_excused())
            .map(|m| (m.session_deadline, 2u8, m.id.as_str()));
        let pending = self
            .pending_members
            .iter()
            .map(|(id, d)| (*d, 3u8, id.as_str()));
        let (at, kind, id) = join
            .into_iter()
            .chain(sync)
            .chain(sessions)
            .chain(pending)
            .min()?;
        let due = match kind {
            0 => Due::Join,
            1 => Due::Sync,
            2 => Due::Session(id.to_string()),
            _ => Due::PendingMember(id.to_string()),
        };
        Some((at, due))
    }

    fn fire(&mut self, due: Due, now: i64) {
        match due {
            Due::Join => self.fire_join_timer(now),
            Due::Sync => self.expire_pending_sync(now),
            Due::Session(id) => {
                tracing::info!(group = %self.group_id, member = %id, "session expired");
                self.remove_member(&id, now, "session expired");
            }
            Due::PendingMember(id) => {
                tracing::info!(group = %self.group_id, member = %id,
                    "pending member did not rejoin in time");
                self.pending_members.remove(&id);
                self.maybe_complete_join(now);
            }
        }
    }

    fn fire_join_timer(&mut self, now: i64) {
        match self.join_timer {
            Some(JoinTimer::Initial {
                delay_ms,
                remaining_ms,
                ..
            }) if self.new_member_added && remaining_ms != 0 => {
                self.new_member_added = false;
                let delay = self
                    .config
                    .initial_rebalance_delay_ms
                    .max(0)
                    .min(remaining_ms);
                self.join_timer = Some(JoinTimer::Initial {
                    deadline: now.saturating_add(delay),
                    delay_ms: delay,
                    remaining_ms: (remaining_ms - delay_ms).max(0),
                });
            }
            Some(_) => self.complete_join(now),
            None => {}
        }
    }
}
