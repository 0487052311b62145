//! Random client behaviour never breaks the group's invariants, and once
//! clients stop, ticking through the deadlines answers every parked request
//! and empties the group.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::*;

const CLIENTS: usize = 5;
/// Clients below this index are static members (`s0`, `s1`).
const STATIC_CLIENTS: usize = 2;

#[derive(Debug, Clone)]
enum Op {
    Join {
        client: usize,
        restart: bool,
        require_known: bool,
        protocols: u8,
    },
    Sync {
        client: usize,
        stale: bool,
    },
    Heartbeat {
        client: usize,
    },
    Leave {
        client: usize,
        by_instance: bool,
    },
    Commit {
        client: usize,
    },
    Advance {
        ms: i64,
    },
    /// The broker restarts: the group is unloaded and restored from the
    /// last persisted snapshot.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let client = 0..CLIENTS;
    prop_oneof![
        4 => (client.clone(), any::<bool>(), any::<bool>(), 0u8..4).prop_map(
            |(client, restart, require_known, protocols)| Op::Join {
                client,
                restart,
                require_known,
                protocols
            }
        ),
        6 => (client.clone(), prop::bool::weighted(0.1))
            .prop_map(|(client, stale)| Op::Sync { client, stale }),
        3 => client.clone().prop_map(|client| Op::Heartbeat { client }),
        1 => (client.clone(), any::<bool>())
            .prop_map(|(client, by_instance)| Op::Leave { client, by_instance }),
        1 => client.prop_map(|client| Op::Commit { client }),
        4 => (0i64..6_000).prop_map(|ms| Op::Advance { ms }),
        1 => (0i64..40_000).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Restart),
    ]
}

#[derive(Debug, Default, Clone)]
struct Client {
    member_id: String,
    generation: i32,
    /// The member list from its last JoinGroup, if it was told to lead.
    led: Vec<String>,
}

struct World {
    group: ClassicGroup,
    now: i64,
    next_request: RequestId,
    clients: Vec<Client>,
    owner: HashMap<RequestId, usize>,
    outstanding: HashSet<RequestId>,
    last_generation: i32,
    persisted: Option<GroupSnapshot>,
}

impl World {
    fn new() -> World {
        World {
            group: ClassicGroup::new("p".to_string(), config()),
            now: 0,
            next_request: 0,
            clients: vec![Client::default(); CLIENTS],
            owner: HashMap::new(),
            outstanding: HashSet::new(),
            last_generation: 0,
            persisted: None,
        }
    }

    fn instance(client: usize) -> Option<String> {
        (client < STATIC_CLIENTS).then(|| format!("s{client}"))
    }

    fn issue(&mut self, client: usize) -> RequestId {
        self.next_request += 1;
        self.owner.insert(self.next_request, client);
        self.outstanding.insert(self.next_request);
        self.next_request
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Join {
                client,
                restart,
                require_known,
                protocols: variant,
            } => {
                let request = self.issue(client);
                let c = &self.clients[client];
                let member_id = if restart {
                    String::new()
                } else {
                    c.member_id.clone()
                };
                let protocols = match variant {
                    0 => protocols(&["range"]),
                    1 => protocols(&["range", "roundrobin"]),
                    2 => protocols(&["roundrobin"]),
                    _ => vec![Protocol::new(
                        "range",
                        Bytes::from(format!("v{}", self.now)),
                    )],
                };
                let req = JoinRequest {
                    group_instance_id: Self::instance(client),
                    require_known_member_id: require_known,
                    supports_skip_assignment: true,
                    protocols,
                    ..join_req(request, &format!("c{client}"), &member_id)
                };
                let effects = self.group.join(req, self.now);
                self.absorb(effects)?;
            }
            Op::Sync { client, stale } => {
                let request = self.issue(client);
                let c = &self.clients[client];
                let assignments = c
                    .led
                    .iter()
                    .map(|m| (m.clone(), Bytes::from(format!("to-{m}"))))
                    .collect();
                let req = SyncRequest {
                    group_instance_id: Self::instance(client),
                    protocol_name: None,
                    ..sync_req(
                        request,
                        &c.member_id,
                        c.generation - i32::from(stale),
                        assignments,
                    )
                };
                let effects = self.group.sync(req, self.now);
                self.absorb(effects)?;
            }
            Op::Heartbeat { client } => {
                let c = &self.clients[client];
                let instance = Self::instance(client);
                let _ =
                    self.group
                        .heartbeat(&c.member_id, instance.as_deref(), c.generation, self.now);
            }
            Op::Leave {
                client,
                by_instance,
            } => {
                let c = &self.clients[client];
                let instance = Self::instance(client);
                let member_id = if by_instance && instance.is_some() {
                    String::new()
                } else {
                    c.member_id.clone()
                };
                let (results, effects) = self.group.leave(&[(member_id, instance)], self.now);
                prop_assert_eq!(results.len(), 1);
                self.absorb(effects)?;
            }
            Op::Commit { client } => {
                let c = &self.clients[client];
                let instance = Self::instance(client);
                if self
                    .group
                    .validate_offset_commit(&c.member_id, instance.as_deref(), c.generation)
                    .is_ok()
                {
                    self.group.record_offset_commit(&c.member_id, self.now);
                }
            }
            Op::Advance { ms } => {
                self.now += ms;
                let effects = self.group.tick(self.now);
                self.absorb(effects)?;
                let next = self.group.next_deadline();
                prop_assert!(next.is_none_or(|d| d > self.now), "tick left {next:?} due");
            }
            Op::Restart => {
                let effects = self.group.unload(self.now);
                self.absorb(effects)?;
                self.group = match self.persisted.clone() {
                    Some(s) => ClassicGroup::restore(s, config(), self.now),
                    None => ClassicGroup::new("p".to_string(), config()),
                };
                self.last_generation = self.group.generation_id();
                self.check_group()?;
            }
        }
        Ok(())
    }

    fn absorb(&mut self, effects: Vec<Effect>) -> Result<(), TestCaseError> {
        if effects.contains(&Effect::Persist) {
            self.persisted = Some(self.group.snapshot());
        }
        for effect in effects {
            let Some(request) = effect.request() else {
                continue;
            };
            prop_assert!(
                self.outstanding.remove(&request),
                "request {request} answered twice"
            );
            let client = self.owner[&request];
            match effect {
                Effect::JoinDone { result, .. } => self.joined(client, result)?,
                Effect::SyncDone { result, .. } => {
                    if let Ok(r) = result {
                        prop_assert_eq!(self.group.state(), GroupState::Stable);
                        prop_assert_eq!(r.protocol_name, self.group.protocol_name());
                    }
                }
                Effect::Persist => {}
            }
        }
        self.check_group()
    }

    fn joined(
        &mut self,
        client: usize,
        result: Result<JoinResult, GroupError>,
    ) -> Result<(), TestCaseError> {
        let c = &mut self.clients[client];
        match result {
            Ok(r) => {
                prop_assert_eq!(r.generation_id, self.group.generation_id());
                prop_assert!(self.group.has_member(&r.member_id));
                prop_assert!(
                    r.members.is_empty() || r.leader == r.member_id,
                    "only the leader gets the member list"
                );
                if r.leader == r.member_id && !r.skip_assignment {
                    prop_assert!(r.members.iter().any(|m| m.member_id == r.member_id));
                }
                c.member_id = r.member_id;
                c.generation = r.generation_id;
                c.led = r.members.into_iter().map(|m| m.member_id).collect();
            }
            Err(GroupError::MemberIdRequired(id)) => c.member_id = id,
            Err(GroupError::UnknownMemberId | GroupError::FencedInstanceId) => {
                *c = Client::default();
            }
            Err(_) => {}
        }
        Ok(())
    }

    fn check_group(&mut self) -> Result<(), TestCaseError> {
        let g = &self.group;
        if let Err(broken) = check_invariants(g) {
            return Err(TestCaseError::fail(broken));
        }
        prop_assert!(
            g.generation_id() >= self.last_generation,
            "generation went back"
        );
        self.last_generation = g.generation_id();
        let d = g.describe();
        match g.leader() {
            Some(leader) => prop_assert!(g.has_member(&leader), "leader {leader} is no member"),
            None => prop_assert_eq!(g.member_count(), 0),
        }
        match g.state() {
            GroupState::Empty => {
                prop_assert_eq!(g.member_count(), 0);
                prop_assert_eq!(g.protocol_name(), None);
            }
            GroupState::Dead => prop_assert_eq!(g.member_count(), 0),
            GroupState::CompletingRebalance | GroupState::Stable => {
                prop_assert!(g.member_count() > 0);
                prop_assert!(g.protocol_name().is_some());
            }
            GroupState::PreparingRebalance => {}
        }
        let instances: Vec<&String> = d
            .members
            .iter()
            .filter_map(|m| m.group_instance_id.as_ref())
            .collect();
        let unique: HashSet<&&String> = instances.iter().collect();
        prop_assert_eq!(
            unique.len(),
            instances.len(),
            "an instance id is held twice"
        );
        Ok(())
    }

    /// Clients stop; time runs through every deadline.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..200 {
            let Some(at) = self.group.next_deadline() else {
                break;
            };
            self.now = self.now.max(at);
            let effects = self.group.tick(self.now);
            self.absorb(effects)?;
        }
        prop_assert_eq!(self.group.next_deadline(), None, "deadlines never ran out");
        prop_assert!(
            self.outstanding.is_empty(),
            "never answered: {:?}",
            self.outstanding
        );
        prop_assert_eq!(self.group.state(), GroupState::Empty);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_clients_never_break_the_group(ops in prop::collection::vec(op(), 1..100)) {
        let mut world = World::new();
        for op in ops {
            world.step(op)?;
        }
        world.drain()?;
    }
}
