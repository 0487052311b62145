//! Unit tests for the classic group state machine, with a small harness
//! that plays clients against one group.

use bytes::Bytes;

use super::*;

mod join;
mod proptests;
mod static_members;
mod sync_leave;
mod timers;

/// Session timeout used by test members.
pub const SESSION: i32 = 10_000;
/// Rebalance timeout used by test members.
pub const REBALANCE: i32 = 30_000;
/// Initial rebalance delay used by test groups.
pub const INITIAL_DELAY: i64 = 3_000;

pub fn config() -> ClassicConfig {
    ClassicConfig {
        initial_rebalance_delay_ms: INITIAL_DELAY,
        ..ClassicConfig::default()
    }
}

pub fn protocols(names: &[&str]) -> Vec<Protocol> {
    names
        .iter()
        .map(|n| Protocol::new(*n, Bytes::from(format!("meta-{n}"))))
        .collect()
}

/// A dynamic member's JoinGroup with Kafka-ish defaults.
pub fn join_req(request: RequestId, client: &str, member_id: &str) -> JoinRequest {
    JoinRequest {
        request,
        member_id: member_id.to_string(),
        group_instance_id: None,
        client_id: client.to_string(),
        client_host: "/127.0.0.1".to_string(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".to_string(),
        protocols: protocols(&["range"]),
        require_known_member_id: false,
        supports_skip_assignment: false,
        reason: None,
    }
}

pub fn static_join(request: RequestId, instance: &str, member_id: &str) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some(instance.to_string()),
        supports_skip_assignment: true,
        ..join_req(request, instance, member_id)
    }
}

pub fn sync_req(
    request: RequestId,
    member_id: &str,
    generation_id: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        request,
        member_id: member_id.to_string(),
        group_instance_id: None,
        generation_id,
        protocol_type: Some("consumer".to_string()),
        protocol_name: Some("range".to_string()),
        assignments,
    }
}

/// The JoinGroup answer for `request` among `effects`.
pub fn joined(effects: &[Effect], request: RequestId) -> Option<Result<JoinResult, GroupError>> {
    effects.iter().find_map(|e| match e {
        Effect::JoinDone { request: r, result } if *r == request => Some(result.clone()),
        _ => None,
    })
}

/// The SyncGroup answer for `request` among `effects`.
pub fn synced(effects: &[Effect], request: RequestId) -> Option<Result<SyncResult, GroupError>> {
    effects.iter().find_map(|e| match e {
        Effect::SyncDone { request: r, result } if *r == request => Some(result.clone()),
        _ => None,
    })
}

pub fn persisted(effects: &[Effect]) -> bool {
    effects.contains(&Effect::Persist)
}

/// A group and a clock.
pub struct Harness {
    pub group: ClassicGroup,
    pub now: i64,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with_config(config())
    }

    pub fn with_config(config: ClassicConfig) -> Harness {
        Harness {
            group: ClassicGroup::new("g".to_string(), config),
            now: 1_000,
        }
    }

    pub fn join(&mut self, req: JoinRequest) -> Vec<Effect> {
        self.group.join(req, self.now)
    }

    pub fn sync(&mut self, req: SyncRequest) -> Vec<Effect> {
        self.group.sync(req, self.now)
    }

    pub fn heartbeat(&mut self, member: &str, generation: i32) -> Result<(), GroupError> {
        self.group.heartbeat(member, None, generation, self.now)
    }

    pub fn leave(&mut self, member_ids: &[&str]) -> (Vec<Result<String, GroupError>>, Vec<Effect>) {
        let members: Vec<(String, Option<String>)> =
            member_ids.iter().map(|m| (m.to_string(), None)).collect();
        self.group.leave(&members, self.now)
    }

    /// Moves the clock on and ticks.
    pub fn advance(&mut self, ms: i64) -> Vec<Effect> {
        self.now += ms;
        self.group.tick(self.now)
    }

    /// Moves the clock to the next deadline and ticks.
    pub fn fire_next(&mut self) -> Vec<Effect> {
        let at = self.group.next_deadline().expect("a deadline");
        assert!(
            at >= self.now,
            "deadline {at} is in the past (now {})",
            self.now
        );
        self.now = at;
        self.group.tick(self.now)
    }

    /// Ticks until `request` is answered (at most `limit` deadlines).
    pub fn fire_until_joined(&mut self, request: RequestId) -> (Vec<Effect>, JoinResult) {
        let mut all = Vec::new();
        for _ in 0..10 {
            let effects = self.fire_next();
            all.extend(effects);
            if let Some(result) = joined(&all, request) {
                return (all.clone(), result.expect("join succeeds"));
            }
        }
        panic!("join {request} never answered: {all:?}");
    }

    /// Joins `n` dynamic members into an empty group and runs the initial
    /// delay out. Returns the join results in join order.
    pub fn form(&mut self, n: usize) -> Vec<JoinResult> {
        for i in 0..n {
            let effects = self.join(join_req(100 + i as u64, &format!("c{i}"), ""));
            assert!(effects.is_empty(), "join parks: {effects:?}");
        }
        let (effects, _) = self.fire_until_joined(100);
        (0..n)
            .map(|i| {
                joined(&effects, 100 + i as u64)
                    .expect("answered")
                    .expect("joined")
            })
            .collect()
    }

    /// Forms a Stable group of `n` dynamic members; every member gets the
    /// assignment `a-<member id>`. Returns member ids in join order, the
    /// leader first among the results' order as joined.
    pub fn stable(&mut self, n: usize) -> Vec<JoinResult> {
        let results = self.form(n);
        let leader = results[0].leader.clone();
        let generation = results[0].generation_id;
        let assignments = assignment_for(&results);
        for (i, r) in results.iter().enumerate() {
            let a = if r.member_id == leader {
                assignments.clone()
            } else {
                Vec::new()
            };
            let _ = self.sync(sync_req(200 + i as u64, &r.member_id, generation, a));
        }
        assert_eq!(self.group.state(), GroupState::Stable);
        results
    }
}

pub fn assignment_for(results: &[JoinResult]) -> Vec<(String, Bytes)> {
    results
        .iter()
        .map(|r| {
            (
                r.member_id.clone(),
                Bytes::from(format!("a-{}", r.member_id)),
            )
        })
        .collect()
}

/// Every request answered in `effects`, in order.
pub fn answered(effects: &[Effect]) -> Vec<RequestId> {
    effects.iter().filter_map(Effect::request).collect()
}

/// Checks the group's internal consistency; the property test runs it after
/// every step.
pub fn check_invariants(g: &ClassicGroup) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{what} (state {})", g.state));
    let preparing = g.state == GroupState::PreparingRebalance;
    let settled = matches!(
        g.state,
        GroupState::CompletingRebalance | GroupState::Stable
    );
    if g.join_timer.is_some() != preparing {
        return fail("a join timer runs exactly while preparing a rebalance");
    }
    if g.pending_sync.is_empty() != g.sync_deadline.is_none() {
        return fail("the sync timer runs exactly while members owe a SyncGroup");
    }
    if !settled && !g.pending_sync.is_empty() {
        return fail("only a settled generation has members owing a SyncGroup");
    }
    if g.pending_sync.iter().any(|id| !g.members.contains_key(id)) {
        return fail("members owing a SyncGroup are members");
    }
    if g.pending_members
        .keys()
        .any(|id| g.members.contains_key(id))
    {
        return fail("a pending member is not yet a member");
    }
    if g.static_members.len()
        != g.members
            .values()
            .filter(|m| m.instance_id.is_some())
            .count()
    {
        return fail("one instance-id entry per static member");
    }
    for (instance, id) in &g.static_members {
        match g.members.get(id) {
            Some(m) if m.instance_id.as_deref() == Some(instance.as_str()) => {}
            _ => return fail("the instance map points at the member holding it"),
        }
    }
    if g.members.is_empty() != g.leader.is_none() {
        return fail("a group has a leader exactly when it has members");
    }
    if g.leader
        .as_ref()
        .is_some_and(|l| !g.members.contains_key(l))
    {
        return fail("the leader is a member");
    }
    for m in g.members.values() {
        if m.awaiting_join.is_some() && !preparing {
            return fail("joins are parked only while preparing");
        }
        if m.awaiting_sync.is_some() && g.state != GroupState::CompletingRebalance {
            return fail("syncs are parked only while completing");
        }
        if m.is_new && !preparing {
            return fail("members are new only until their first join phase ends");
        }
        if settled && !g.protocol_name.as_deref().is_some_and(|p| m.supports(p)) {
            return fail("every member supports the generation's protocol");
        }
    }
    if matches!(g.state, GroupState::Empty | GroupState::Dead) && !g.members.is_empty() {
        return fail("an empty or dead group has no members");
    }
    Ok(())
}
