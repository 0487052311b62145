//! The invariants checked after every step of the simulation: no
//! acknowledged record lost or reordered, ISR members agreeing with the
//! leader up to the high watermark, a leader's high watermark never going
//! back, one leader per epoch, no follower exposing records past it.

use super::*;

impl Sim {
    pub(super) fn check(&mut self) {
        // The high watermark of each leader epoch never goes backwards.
        for b in self.brokers.values() {
            let Role::Leader(l) = &b.role else { continue };
            if l.log_end().0 as usize != b.log.len() {
                self.fail(format!(
                    "leader {} log end {} but disk {}",
                    b.id,
                    l.log_end(),
                    b.log.len()
                ));
            }
            let hw = l.high_watermark();
            let e = l.leader_epoch();
            if let Some(prev) = self.hw_of_epoch.get(&e) {
                if hw < *prev {
                    self.fail(format!("HW of epoch {e} went back from {prev} to {hw}"));
                }
            }
            self.hw_of_epoch.insert(e, hw);
            self.committed = self.committed.max(hw);
        }
        let state = &self.controller.state;
        let Some(leader_id) = state.leader else {
            return;
        };
        let leader = &self.brokers[&leader_id];
        // No committed record is beyond the current leader's log end.
        if (leader.log.len() as i64) < self.committed.0 {
            self.fail(format!(
                "leader {leader_id} ends at {} below committed {}",
                leader.log.len(),
                self.committed
            ));
        }
        // Every acknowledged record stays at its offset, on the leader and
        // on every ISR member. Logs only lose records by truncation, so the
        // full check runs after a truncation, an ack or a controller change.
        let members = (state.leader, state.isr.clone());
        if !self.acked_dirty && self.acked_checked_for.as_ref() == Some(&members) {
            return self.check_prefixes(leader_id);
        }
        self.acked_dirty = false;
        self.acked_checked_for = Some(members);
        let state = &self.controller.state;
        for m in state.isr.iter().chain([&leader_id]) {
            let log = &self.brokers[m].log;
            for (&offset, &payload) in &self.acked {
                if log.get(offset).map(|r| r.1) != Some(payload) {
                    self.fail(format!("acknowledged payload {payload} at {offset} missing on broker {m} (has {:?})", log.get(offset)));
                }
            }
        }
        self.check_prefixes(leader_id);
    }

    fn check_prefixes(&self, leader_id: NodeId) {
        let state = &self.controller.state;
        let leader = &self.brokers[&leader_id];
        // ISR members agree with the leader up to its high watermark.
        if let Role::Leader(l) = &leader.role {
            if l.leader_epoch() == state.leader_epoch {
                let hw = l.high_watermark().0 as usize;
                for m in &state.isr {
                    let log = &self.brokers[m].log;
                    if log.len() < hw || log[..hw] != leader.log[..hw] {
                        self.fail(format!(
                            "ISR member {m} disagrees with leader {leader_id} below HW {hw}"
                        ));
                    }
                }
            }
        }
        // Followers expose only committed records.
        for b in self.brokers.values() {
            let Role::Follower(f) = &b.role else { continue };
            let readable = f.readable_end();
            if readable > f.high_watermark() || readable > self.committed {
                self.fail(format!(
                    "follower {} exposes up to {readable} (hw {}, committed {})",
                    b.id,
                    f.high_watermark(),
                    self.committed
                ));
            }
            let r = readable.0 as usize;
            if b.log.len() < r || leader.log.len() < r || b.log[..r] != leader.log[..r] {
                self.fail(format!(
                    "follower {} exposes records not on leader {leader_id}",
                    b.id
                ));
            }
        }
    }
}
