//! KIP-345 static membership and KIP-814 skip-assignment.

use super::*;

/// A Stable group of static members `s0..sN`; returns their join results.
fn stable_static(h: &mut Harness, n: usize) -> Vec<JoinResult> {
    for i in 0..n {
        assert!(h
            .join(static_join(100 + i as u64, &format!("s{i}"), ""))
            .is_empty());
    }
    let (effects, _) = h.fire_until_joined(100);
    let results: Vec<JoinResult> = (0..n)
        .map(|i| joined(&effects, 100 + i as u64).unwrap().unwrap())
        .collect();
    let assignments = assignment_for(&results);
    for (i, r) in results.iter().enumerate() {
        let a = if i == 0 {
            assignments.clone()
        } else {
            Vec::new()
        };
        let req = SyncRequest {
            group_instance_id: Some(format!("s{i}")),
            ..sync_req(200 + i as u64, &r.member_id, r.generation_id, a)
        };
        let effects = h.sync(req);
        assert!(synced(&effects, 200 + i as u64).unwrap().is_ok());
    }
    assert_eq!(h.group.state(), GroupState::Stable);
    results
}

#[test]
fn static_member_ids_start_with_the_instance_id() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    assert!(results[0].member_id.starts_with("s0-"));
    assert_eq!(
        results[0].members[1].group_instance_id.as_deref(),
        Some("s1")
    );
}

#[test]
fn a_restarted_follower_rejoins_without_a_rebalance_and_fences_its_old_id() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 3);
    let old = results[1].member_id.clone();

    let effects = h.join(static_join(1, "s1", ""));
    assert_eq!(
        effects[0],
        Effect::Persist,
        "the new member id is stored first"
    );
    let r = joined(&effects, 1).unwrap().unwrap();
    assert_ne!(r.member_id, old);
    assert!(r.member_id.starts_with("s1-"));
    assert_eq!(r.generation_id, 1, "same generation");
    assert!(!r.skip_assignment);
    assert!(r.members.is_empty());
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.generation_id(), 1);

    // It syncs and gets its previous assignment back.
    let sync = SyncRequest {
        group_instance_id: Some("s1".to_string()),
        ..sync_req(2, &r.member_id, 1, Vec::new())
    };
    let effects = h.sync(sync);
    assert_eq!(
        synced(&effects, 2).unwrap().unwrap().assignment,
        Bytes::from(format!("a-{old}"))
    );

    // The old incarnation is fenced everywhere.
    let s1 = Some("s1");
    assert_eq!(
        h.group.heartbeat(&old, s1, 1, h.now),
        Err(GroupError::FencedInstanceId)
    );
    let stale_sync = SyncRequest {
        group_instance_id: Some("s1".to_string()),
        ..sync_req(3, &old, 1, Vec::new())
    };
    assert_eq!(
        synced(&h.sync(stale_sync), 3),
        Some(Err(GroupError::FencedInstanceId))
    );
    let effects = h.join(static_join(4, "s1", &old));
    assert_eq!(joined(&effects, 4), Some(Err(GroupError::FencedInstanceId)));
    assert_eq!(
        h.group.validate_offset_commit(&old, s1, 1),
        Err(GroupError::FencedInstanceId)
    );
    let (outcome, _) = h
        .group
        .leave(&[(old.clone(), Some("s1".to_string()))], h.now);
    assert_eq!(outcome, vec![Err(GroupError::FencedInstanceId)]);
    assert_eq!(
        h.group.state(),
        GroupState::Stable,
        "fencing disturbs nobody"
    );
    assert_eq!(h.group.heartbeat(&r.member_id, s1, 1, h.now), Ok(()));
}

#[test]
fn a_restarted_static_leader_is_told_to_skip_assignment() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    let effects = h.join(static_join(1, "s0", ""));
    let r = joined(&effects, 1).unwrap().unwrap();
    assert_eq!(r.leader, r.member_id, "KIP-814: it is the leader");
    assert!(r.skip_assignment);
    assert_eq!(r.members.len(), 2);
    assert_eq!(r.members[1].member_id, results[1].member_id);
    assert_eq!(h.group.leader().as_deref(), Some(r.member_id.as_str()));
    assert_eq!(h.group.state(), GroupState::Stable);
}

#[test]
fn an_old_client_restarting_as_static_leader_sees_the_old_leader_id() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    let req = JoinRequest {
        supports_skip_assignment: false,
        ..static_join(1, "s0", "")
    };
    let r = joined(&h.join(req), 1).unwrap().unwrap();
    assert_eq!(
        r.leader, results[0].member_id,
        "so it does not run the assignor"
    );
    assert!(!r.skip_assignment);
    assert!(r.members.is_empty());
}

#[test]
fn a_restart_that_changes_the_chosen_protocol_rebalances() {
    let mut h = Harness::new();
    let _ = stable_static(&mut h, 1);
    let req = JoinRequest {
        protocols: protocols(&["roundrobin"]),
        ..static_join(1, "s0", "")
    };
    let effects = h.join(req);
    // A lone member: the rebalance completes at once with the new protocol.
    let r = joined(&effects, 1).unwrap().unwrap();
    assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"));
    assert_eq!(r.generation_id, 2);
}

#[test]
fn a_restart_during_completing_rebalance_rebalances_and_fences_the_parked_sync() {
    let mut h = Harness::new();
    for i in 0..2 {
        assert!(h.join(static_join(i, &format!("s{i}"), "")).is_empty());
    }
    let (effects, _) = h.fire_until_joined(0);
    let old = joined(&effects, 1).unwrap().unwrap().member_id;
    let parked = SyncRequest {
        group_instance_id: Some("s1".to_string()),
        ..sync_req(5, &old, 1, Vec::new())
    };
    assert!(h.sync(parked).is_empty());
    let effects = h.join(static_join(6, "s1", ""));
    assert_eq!(synced(&effects, 5), Some(Err(GroupError::FencedInstanceId)));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn a_restart_during_preparing_rebalance_takes_over_the_parked_join() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    assert!(h.join(join_req(1, "dynamic", "")).is_empty());
    let old = results[1].member_id.clone();
    assert!(h.join(static_join(2, "s1", &old)).is_empty());
    let effects = h.join(static_join(3, "s1", ""));
    assert_eq!(joined(&effects, 2), Some(Err(GroupError::FencedInstanceId)));
    // s0 rejoins: everyone is in, and the new s1 id is in the generation.
    let effects = h.join(static_join(4, "s0", &results[0].member_id));
    let leader = joined(&effects, 4).unwrap().unwrap();
    let s1 = joined(&effects, 3).unwrap().unwrap();
    assert!(leader.members.iter().any(|m| m.member_id == s1.member_id));
    assert!(leader.members.iter().all(|m| m.member_id != old));
}

#[test]
fn a_full_group_still_takes_back_a_restarting_static_member() {
    let mut h = Harness::with_config(ClassicConfig {
        max_size: 2,
        ..config()
    });
    let _ = stable_static(&mut h, 2);
    let r = joined(&h.join(static_join(1, "s1", "")), 1).unwrap();
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn static_members_that_do_not_rejoin_stay_until_their_session_expires() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    let s0 = results[0].member_id.clone();
    let s1 = results[1].member_id.clone();
    // s0 asks for a rebalance; s1 is down and neither heartbeats nor rejoins.
    assert!(h.join(static_join(1, "s0", &s0)).is_empty());
    let started = h.now;
    let mut effects = Vec::new();
    while joined(&effects, 1).is_none() {
        effects.extend(h.fire_next());
    }
    // s1's session (10 s) ran out before the rebalance timeout (30 s).
    assert_eq!(h.now, started + i64::from(SESSION));
    assert!(!h.group.has_member(&s1));
    let r = joined(&effects, 1).unwrap().unwrap();
    assert_eq!(r.members.len(), 1);

    // Had s1 kept heartbeating without rejoining, it would have stayed.
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    let s1 = results[1].member_id.clone();
    assert!(h
        .join(static_join(1, "s0", &results[0].member_id))
        .is_empty());
    let mut effects = Vec::new();
    while joined(&effects, 1).is_none() {
        let at = h.group.next_deadline().unwrap();
        if at > h.now + 1_000 {
            h.now += 1_000;
            let hb = h.group.heartbeat(&s1, Some("s1"), 1, h.now);
            assert_eq!(hb, Err(GroupError::RebalanceInProgress));
            continue;
        }
        effects.extend(h.fire_next());
    }
    let r = joined(&effects, 1).unwrap().unwrap();
    assert_eq!(r.generation_id, 2);
    assert_eq!(r.members.len(), 2, "the static member keeps its place");
    assert!(h.group.has_member(&s1));
}

#[test]
fn a_join_phase_where_only_absent_static_members_remain_is_extended() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    let s1 = results[1].member_id.clone();
    assert!(h
        .join(static_join(1, "s0", &results[0].member_id))
        .is_empty());
    let first_deadline = h.now + i64::from(REBALANCE);
    let (_, effects) = h.group.leave(
        &[(results[0].member_id.clone(), Some("s0".to_string()))],
        h.now,
    );
    assert_eq!(joined(&effects, 1), Some(Err(GroupError::UnknownMemberId)));
    // s1 stays alive but never rejoins: the phase cannot complete, so it
    // is extended by another rebalance timeout instead of bumping the
    // generation with nobody in it.
    while h.now < first_deadline + 5_000 {
        h.now += 5_000;
        let _ = h.group.heartbeat(&s1, Some("s1"), 1, h.now);
        assert!(h.group.tick(h.now).is_empty());
    }
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.generation_id(), 1);
    assert!(h.group.has_member(&s1));
    // Once s1 falls silent, it expires and the group ends up empty.
    let mut effects = Vec::new();
    while h.group.state() != GroupState::Empty {
        effects.extend(h.fire_next());
    }
    assert!(persisted(&effects));
    assert_eq!(h.group.generation_id(), 2);
}

#[test]
fn leave_by_instance_id_alone_removes_the_static_member() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 2);
    let (outcome, _) = h.group.leave(
        &[
            (String::new(), Some("s1".to_string())),
            (String::new(), Some("ghost".to_string())),
            (String::new(), None),
        ],
        h.now,
    );
    assert_eq!(
        outcome,
        vec![
            Ok(results[1].member_id.clone()),
            Err(GroupError::UnknownMemberId),
            Err(GroupError::UnknownMemberId)
        ]
    );
    assert!(!h.group.has_member(&results[1].member_id));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    // The instance id is free again: a new s1 joins as a new member.
    assert!(h.join(static_join(1, "s1", "")).is_empty());
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn an_unknown_instance_id_is_an_unknown_member() {
    let mut h = Harness::new();
    let results = stable_static(&mut h, 1);
    assert_eq!(
        h.group
            .heartbeat(&results[0].member_id, Some("other"), 1, h.now),
        Err(GroupError::UnknownMemberId)
    );
}
