//! JoinGroup: the full round, KIP-394, protocol checks, group size, the
//! initial delay and rejoins.

use super::*;

#[test]
fn three_members_complete_a_full_join_and_sync_round() {
    let mut h = Harness::new();
    let results = h.form(3);
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);
    assert_eq!(h.group.generation_id(), 1);

    let leader = results[0].leader.clone();
    assert_eq!(leader, results[0].member_id, "the first member leads");
    for r in &results {
        assert_eq!(r.generation_id, 1);
        assert_eq!(r.leader, leader);
        assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        assert!(!r.skip_assignment);
        assert!(r.member_id.starts_with(&format!(
            "c{}-",
            results.iter().position(|x| x == r).unwrap()
        )));
        if r.member_id == leader {
            let ids: Vec<&str> = r.members.iter().map(|m| m.member_id.as_str()).collect();
            let all: Vec<&str> = results.iter().map(|r| r.member_id.as_str()).collect();
            assert_eq!(ids, all, "the leader sees every member in join order");
            assert!(r.members.iter().all(|m| m.metadata == "meta-range"));
        } else {
            assert!(r.members.is_empty(), "followers get no member list");
        }
    }

    // Leader syncs first: it is answered at once, followers when they ask.
    let assignments = assignment_for(&results);
    let effects = h.sync(sync_req(1, &leader, 1, assignments));
    assert!(persisted(&effects));
    let mine = synced(&effects, 1).unwrap().unwrap();
    assert_eq!(mine.assignment, Bytes::from(format!("a-{leader}")));
    assert_eq!(mine.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.group.state(), GroupState::Stable);
    for (i, r) in results.iter().enumerate().skip(1) {
        let effects = h.sync(sync_req(10 + i as u64, &r.member_id, 1, Vec::new()));
        let got = synced(&effects, 10 + i as u64).unwrap().unwrap();
        assert_eq!(got.assignment, Bytes::from(format!("a-{}", r.member_id)));
    }
    assert_eq!(
        h.group.next_deadline(),
        Some(h.now + i64::from(SESSION)),
        "only sessions remain"
    );
    for r in &results {
        assert_eq!(h.heartbeat(&r.member_id, 1), Ok(()));
    }
}

#[test]
fn followers_syncing_before_the_leader_wait_for_its_assignment() {
    let mut h = Harness::new();
    let results = h.form(3);
    let leader = results[0].member_id.clone();
    for (i, r) in results.iter().enumerate().skip(1) {
        let effects = h.sync(sync_req(10 + i as u64, &r.member_id, 1, Vec::new()));
        assert!(effects.is_empty(), "follower parks until the leader syncs");
    }
    // The leader leaves one member out: it gets an empty assignment.
    let partial = vec![
        (leader.clone(), Bytes::from("L")),
        (results[1].member_id.clone(), Bytes::from("F1")),
        ("stranger".to_string(), Bytes::from("X")),
    ];
    let effects = h.sync(sync_req(1, &leader, 1, partial));
    assert_eq!(
        answered(&effects),
        vec![1, 11, 12],
        "everyone answered, in join order"
    );
    assert_eq!(
        effects[0],
        Effect::Persist,
        "persist comes before the answers"
    );
    assert_eq!(
        synced(&effects, 1).unwrap().unwrap().assignment,
        Bytes::from("L")
    );
    assert_eq!(
        synced(&effects, 11).unwrap().unwrap().assignment,
        Bytes::from("F1")
    );
    assert_eq!(
        synced(&effects, 12).unwrap().unwrap().assignment,
        Bytes::new()
    );
    let snap = h.group.snapshot();
    assert!(snap.members.iter().all(|m| m.member_id != "stranger"));
}

#[test]
fn member_id_required_hands_out_an_id_and_the_rejoin_uses_it() {
    let mut h = Harness::new();
    let first = JoinRequest {
        require_known_member_id: true,
        ..join_req(1, "app", "")
    };
    let effects = h.join(first);
    let Some(Err(GroupError::MemberIdRequired(id))) = joined(&effects, 1) else {
        panic!("expected MEMBER_ID_REQUIRED: {effects:?}");
    };
    assert!(id.starts_with("app-"));
    assert_eq!(
        h.group.state(),
        GroupState::Empty,
        "a pending member is not a member"
    );
    assert_eq!(h.group.member_count(), 0);
    assert_eq!(h.group.next_deadline(), Some(h.now + i64::from(SESSION)));

    let rejoin = JoinRequest {
        require_known_member_id: true,
        ..join_req(2, "app", &id)
    };
    assert!(h.join(rejoin).is_empty());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    let (_, result) = h.fire_until_joined(2);
    assert_eq!(result.member_id, id);
    assert_eq!(result.leader, id);
}

#[test]
fn old_clients_join_directly_without_member_id_required() {
    let mut h = Harness::new();
    assert!(h.join(join_req(1, "old", "")).is_empty());
    assert_eq!(h.group.member_count(), 1);
}

#[test]
fn a_pending_member_holds_up_the_join_phase_until_it_rejoins() {
    let mut h = Harness::new();
    let results = h.stable(2);
    // A new v4 client asks for an id; a rebalance is then started by a rejoin.
    let effects = h.join(JoinRequest {
        require_known_member_id: true,
        ..join_req(1, "late", "")
    });
    let Some(Err(GroupError::MemberIdRequired(pending))) = joined(&effects, 1) else {
        panic!("{effects:?}");
    };
    for (i, r) in results.iter().enumerate() {
        assert!(h
            .join(join_req(10 + i as u64, "c", &r.member_id))
            .is_empty());
    }
    assert_eq!(
        h.group.state(),
        GroupState::PreparingRebalance,
        "waits for the pending member"
    );
    let effects = h.join(join_req(3, "late", &pending));
    assert_eq!(
        answered(&effects),
        vec![10, 11, 3],
        "all joined: completes at once"
    );
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);
    assert_eq!(h.group.member_count(), 3);
}

#[test]
fn inconsistent_protocols_are_refused_and_the_group_is_undisturbed() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let before = h.group.snapshot();

    let no_type = JoinRequest {
        protocol_type: String::new(),
        ..join_req(1, "x", "")
    };
    let no_protocols = JoinRequest {
        protocols: Vec::new(),
        ..join_req(2, "x", "")
    };
    let other_type = JoinRequest {
        protocol_type: "connect".to_string(),
        ..join_req(3, "x", "")
    };
    let disjoint = JoinRequest {
        protocols: protocols(&["roundrobin"]),
        ..join_req(4, "x", "")
    };
    let member_switching = JoinRequest {
        protocols: protocols(&["roundrobin"]),
        ..join_req(5, "c1", &results[1].member_id)
    };
    for req in [
        no_type,
        no_protocols,
        other_type,
        disjoint,
        member_switching,
    ] {
        let r = req.request;
        let effects = h.join(req);
        assert_eq!(
            joined(&effects, r),
            Some(Err(GroupError::InconsistentGroupProtocol))
        );
        assert_eq!(effects.len(), 1);
    }
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.snapshot(), before);
    assert_eq!(h.heartbeat(&results[1].member_id, 1), Ok(()));
}

#[test]
fn an_empty_group_refuses_empty_protocols_too() {
    let mut h = Harness::new();
    let effects = h.join(JoinRequest {
        protocols: Vec::new(),
        ..join_req(1, "x", "")
    });
    assert_eq!(
        joined(&effects, 1),
        Some(Err(GroupError::InconsistentGroupProtocol))
    );
    assert_eq!(h.group.state(), GroupState::Empty);
}

#[test]
fn a_sole_member_may_switch_protocols() {
    let mut h = Harness::new();
    let results = h.stable(1);
    let switch = JoinRequest {
        protocols: protocols(&["roundrobin"]),
        ..join_req(1, "c0", &results[0].member_id)
    };
    let effects = h.join(switch);
    let result = joined(&effects, 1).expect("completes at once").unwrap();
    assert_eq!(result.protocol_name.as_deref(), Some("roundrobin"));
    assert_eq!(result.generation_id, 2);
}

#[test]
fn session_timeouts_outside_the_configured_range_are_refused() {
    let mut h = Harness::new();
    for (request, timeout) in [(1, 5_999), (2, 1_800_001)] {
        let effects = h.join(JoinRequest {
            session_timeout_ms: timeout,
            ..join_req(request, "x", "")
        });
        assert_eq!(
            joined(&effects, request),
            Some(Err(GroupError::InvalidSessionTimeout))
        );
    }
    assert_eq!(h.group.state(), GroupState::Empty);
    assert!(h
        .join(JoinRequest {
            session_timeout_ms: 6_000,
            ..join_req(3, "x", "")
        })
        .is_empty());
}

#[test]
fn group_max_size_refuses_new_members_but_not_existing_ones() {
    let mut h = Harness::with_config(ClassicConfig {
        max_size: 2,
        ..config()
    });
    let results = h.stable(2);
    let effects = h.join(join_req(1, "third", ""));
    assert_eq!(
        joined(&effects, 1),
        Some(Err(GroupError::GroupMaxSizeReached))
    );
    assert_eq!(
        h.group.state(),
        GroupState::Stable,
        "no rebalance for a refused member"
    );
    // An existing member's rejoin is accepted.
    assert!(h.join(join_req(2, "c0", &results[0].member_id)).is_empty());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    // While preparing, only rejoined members count: room for one more? No,
    // one has rejoined and the other may still come; a newcomer fits.
    assert!(h.join(join_req(3, "fourth", "")).is_empty());
    // Now two are waiting: the slow member is turned away and dropped.
    let effects = h.join(join_req(4, "c1", &results[1].member_id));
    assert_eq!(
        joined(&effects, 4),
        Some(Err(GroupError::GroupMaxSizeReached))
    );
    assert!(!h.group.has_member(&results[1].member_id));
    assert_eq!(
        h.group.state(),
        GroupState::CompletingRebalance,
        "everyone left has rejoined"
    );
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn the_initial_delay_waits_and_is_extended_while_members_keep_arriving() {
    let mut h = Harness::new();
    let start = h.now;
    assert!(h.join(join_req(1, "a", "")).is_empty());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.next_deadline(), Some(start + INITIAL_DELAY));

    // A second member arrives during the delay: completion is pushed back.
    h.now += 1_000;
    assert!(h.join(join_req(2, "b", "")).is_empty());
    assert_eq!(
        h.group.state(),
        GroupState::PreparingRebalance,
        "never completes early"
    );
    let effects = h.fire_next();
    assert!(effects.is_empty());
    assert_eq!(h.now, start + INITIAL_DELAY);
    assert_eq!(h.group.next_deadline(), Some(start + 2 * INITIAL_DELAY));

    // Nobody else came: the join phase completes at the next deadline.
    let effects = h.fire_next();
    assert_eq!(answered(&effects), vec![1, 2]);
    assert_eq!(h.group.generation_id(), 1);
}

#[test]
fn the_initial_delay_is_capped_by_the_rebalance_timeout() {
    let mut h = Harness::new();
    let start = h.now;
    let short = |request, client: &str| JoinRequest {
        rebalance_timeout_ms: 5_000,
        ..join_req(request, client, "")
    };
    assert!(h.join(short(1, "a")).is_empty());
    let mut request = 2;
    // A member arrives before every deadline; the delay still ends.
    while h.group.state() == GroupState::PreparingRebalance {
        assert!(h.join(short(request, "more")).is_empty());
        request += 1;
        let _ = h.fire_next();
        assert!(request < 10, "the delay must end");
    }
    // 3 s, then min(3 s, 2 s left) = 2 s: 5 s in all.
    assert_eq!(h.now, start + 5_000);
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);
}

#[test]
fn a_new_member_joining_a_stable_group_triggers_a_rebalance() {
    let mut h = Harness::new();
    let results = h.stable(2);
    assert!(h.join(join_req(1, "new", "")).is_empty());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    // Members that have not rejoined must keep heartbeating meanwhile.
    assert_eq!(h.group.next_deadline(), Some(h.now + i64::from(SESSION)));
    // Existing members learn of it from their heartbeats, then rejoin.
    for (i, r) in results.iter().enumerate() {
        assert_eq!(
            h.heartbeat(&r.member_id, 1),
            Err(GroupError::RebalanceInProgress)
        );
        let effects = h.join(join_req(10 + i as u64, "c", &r.member_id));
        if i == 0 {
            assert!(effects.is_empty());
        } else {
            // The last rejoin completes the phase at once.
            assert_eq!(answered(&effects), vec![10, 11, 1]);
            let leader = joined(&effects, 10).unwrap().unwrap();
            assert_eq!(
                leader.leader, results[0].member_id,
                "the leader keeps its role"
            );
            assert_eq!(leader.members.len(), 3);
            assert_eq!(leader.generation_id, 2);
        }
    }
}

#[test]
fn a_follower_rejoining_unchanged_while_stable_gets_the_current_generation() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let effects = h.join(join_req(1, "c1", &results[1].member_id));
    let r = joined(&effects, 1).unwrap().unwrap();
    assert_eq!(r.generation_id, 1);
    assert!(r.members.is_empty());
    assert_eq!(h.group.state(), GroupState::Stable, "no rebalance");
}

#[test]
fn a_follower_rejoining_with_new_metadata_triggers_a_rebalance() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let changed = JoinRequest {
        protocols: vec![Protocol::new("range", Bytes::from("new-subscription"))],
        ..join_req(1, "c1", &results[1].member_id)
    };
    assert!(h.join(changed).is_empty());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn the_leader_rejoining_while_stable_always_triggers_a_rebalance() {
    let mut h = Harness::new();
    let results = h.stable(2);
    assert!(h.join(join_req(1, "c0", &results[0].member_id)).is_empty());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn rejoining_unchanged_while_completing_repeats_the_join_response() {
    let mut h = Harness::new();
    let results = h.form(2);
    let effects = h.join(join_req(1, "c0", &results[0].member_id));
    let again = joined(&effects, 1).unwrap().unwrap();
    assert_eq!(again, results[0], "the leader gets its member list again");
    let effects = h.join(join_req(2, "c1", &results[1].member_id));
    assert_eq!(joined(&effects, 2).unwrap().unwrap(), results[1]);
    assert_eq!(h.group.state(), GroupState::CompletingRebalance);

    // Changed metadata while completing: parked syncs are told to rejoin.
    let _ = h.sync(sync_req(3, &results[1].member_id, 1, Vec::new()));
    let changed = JoinRequest {
        protocols: vec![Protocol::new("range", Bytes::from("other"))],
        ..join_req(4, "c0", &results[0].member_id)
    };
    let effects = h.join(changed);
    assert_eq!(
        synced(&effects, 3),
        Some(Err(GroupError::RebalanceInProgress))
    );
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn a_retried_join_supersedes_the_parked_one() {
    let mut h = Harness::new();
    let results = h.stable(2);
    assert!(h.join(join_req(1, "c0", &results[0].member_id)).is_empty());
    let effects = h.join(join_req(2, "c0", &results[0].member_id));
    assert_eq!(
        joined(&effects, 1),
        Some(Err(GroupError::RebalanceInProgress))
    );
    let effects = h.join(join_req(3, "c1", &results[1].member_id));
    assert!(joined(&effects, 2).unwrap().is_ok());
}

#[test]
fn an_unknown_member_id_cannot_join() {
    let mut h = Harness::new();
    let effects = h.join(join_req(1, "x", "nobody"));
    assert_eq!(joined(&effects, 1), Some(Err(GroupError::UnknownMemberId)));
    let _ = h.stable(1);
    let effects = h.join(join_req(2, "x", "nobody"));
    assert_eq!(joined(&effects, 2), Some(Err(GroupError::UnknownMemberId)));
}

#[test]
fn the_protocol_most_members_prefer_wins() {
    let mut h = Harness::new();
    let prefs = [
        vec!["range", "roundrobin"],
        vec!["roundrobin", "range"],
        vec!["roundrobin", "range", "sticky"],
    ];
    for (i, p) in prefs.iter().enumerate() {
        let req = JoinRequest {
            protocols: protocols(p),
            ..join_req(i as u64, "c", "")
        };
        assert!(h.join(req).is_empty());
    }
    let (effects, _) = h.fire_until_joined(0);
    let leader = joined(&effects, 0).unwrap().unwrap();
    assert_eq!(leader.protocol_name.as_deref(), Some("roundrobin"));
    assert!(leader
        .members
        .iter()
        .all(|m| m.metadata == "meta-roundrobin"));
}

#[test]
fn a_tied_vote_goes_to_the_leaders_preference() {
    let mut h = Harness::new();
    for (i, p) in [["sticky", "range"], ["range", "sticky"]]
        .iter()
        .enumerate()
    {
        let req = JoinRequest {
            protocols: protocols(p),
            ..join_req(i as u64, "c", "")
        };
        assert!(h.join(req).is_empty());
    }
    let (_, leader) = h.fire_until_joined(0);
    assert_eq!(leader.protocol_name.as_deref(), Some("sticky"));
}

#[test]
fn v0_joins_without_a_rebalance_timeout_use_the_session_timeout() {
    let mut h = Harness::new();
    let req = JoinRequest {
        rebalance_timeout_ms: 0,
        ..join_req(1, "v0", "")
    };
    assert!(h.join(req).is_empty());
    assert_eq!(h.group.snapshot().members[0].rebalance_timeout_ms, SESSION);
    // The initial delay fits in what is left of that timeout.
    let start = h.now;
    assert!(h.join(join_req(2, "v0", "")).is_empty());
    let _ = h.fire_until_joined(1);
    assert_eq!(h.now, start + 2 * INITIAL_DELAY);
}
