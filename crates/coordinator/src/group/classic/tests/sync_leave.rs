//! SyncGroup, Heartbeat, LeaveGroup and offset-commit checks.

use super::*;

#[test]
fn sync_checks_membership_generation_state_and_protocol() {
    let mut h = Harness::new();
    let results = h.form(2);
    let leader = results[0].member_id.clone();
    let follower = results[1].member_id.clone();

    let cases = [
        (
            sync_req(1, "nobody", 1, Vec::new()),
            GroupError::UnknownMemberId,
        ),
        (
            sync_req(2, &follower, 0, Vec::new()),
            GroupError::IllegalGeneration,
        ),
        (
            sync_req(3, &follower, 2, Vec::new()),
            GroupError::IllegalGeneration,
        ),
        (
            SyncRequest {
                protocol_type: Some("connect".to_string()),
                ..sync_req(4, &follower, 1, Vec::new())
            },
            GroupError::InconsistentGroupProtocol,
        ),
        (
            SyncRequest {
                protocol_name: Some("roundrobin".to_string()),
                ..sync_req(5, &follower, 1, Vec::new())
            },
            GroupError::InconsistentGroupProtocol,
        ),
    ];
    for (req, error) in cases {
        let r = req.request;
        let effects = h.sync(req);
        assert_eq!(synced(&effects, r), Some(Err(error)));
        assert_eq!(effects.len(), 1);
    }
    assert_eq!(
        h.group.state(),
        GroupState::CompletingRebalance,
        "undisturbed"
    );

    // Pre-v5 syncs carry no protocol: nothing to check.
    let old = SyncRequest {
        protocol_type: None,
        protocol_name: None,
        ..sync_req(6, &follower, 1, Vec::new())
    };
    assert!(h.sync(old).is_empty());
    let effects = h.sync(sync_req(7, &leader, 1, assignment_for(&results)));
    assert!(synced(&effects, 6).unwrap().is_ok());
    assert!(synced(&effects, 7).unwrap().is_ok());
}

#[test]
fn sync_during_a_rebalance_is_told_to_rejoin() {
    let mut h = Harness::new();
    let results = h.stable(2);
    assert!(h.join(join_req(1, "new", "")).is_empty());
    let effects = h.sync(sync_req(2, &results[1].member_id, 1, Vec::new()));
    assert_eq!(
        synced(&effects, 2),
        Some(Err(GroupError::RebalanceInProgress))
    );
}

#[test]
fn sync_while_stable_returns_the_current_assignment() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let effects = h.sync(sync_req(1, &results[1].member_id, 1, Vec::new()));
    let got = synced(&effects, 1).unwrap().unwrap();
    assert_eq!(
        got.assignment,
        Bytes::from(format!("a-{}", results[1].member_id))
    );
}

#[test]
fn a_retried_sync_supersedes_the_parked_one() {
    let mut h = Harness::new();
    let results = h.form(2);
    let follower = &results[1].member_id;
    assert!(h.sync(sync_req(1, follower, 1, Vec::new())).is_empty());
    let effects = h.sync(sync_req(2, follower, 1, Vec::new()));
    assert_eq!(
        synced(&effects, 1),
        Some(Err(GroupError::RebalanceInProgress))
    );
    let effects = h.sync(sync_req(
        3,
        &results[0].member_id,
        1,
        assignment_for(&results),
    ));
    assert!(synced(&effects, 2).unwrap().is_ok());
}

#[test]
fn heartbeats_follow_the_group_state() {
    let mut h = Harness::new();
    let results = h.form(2);
    let m = results[1].member_id.clone();
    assert_eq!(h.heartbeat(&m, 1), Ok(()), "CompletingRebalance: fine");
    assert_eq!(h.heartbeat("nobody", 1), Err(GroupError::UnknownMemberId));
    assert_eq!(h.heartbeat(&m, 0), Err(GroupError::IllegalGeneration));
    let _ = h.sync(sync_req(
        1,
        &results[0].member_id,
        1,
        assignment_for(&results),
    ));
    assert_eq!(h.heartbeat(&m, 1), Ok(()), "Stable: fine");
    assert_eq!(h.heartbeat(&m, 2), Err(GroupError::IllegalGeneration));
    assert!(h.join(join_req(2, "new", "")).is_empty());
    assert_eq!(h.heartbeat(&m, 1), Err(GroupError::RebalanceInProgress));
    assert_eq!(h.heartbeat(&m, 0), Err(GroupError::IllegalGeneration));
}

#[test]
fn heartbeats_keep_a_member_alive_and_silence_expires_it() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let (a, b) = (results[0].member_id.clone(), results[1].member_id.clone());
    for _ in 0..5 {
        assert!(h.advance(i64::from(SESSION) / 2).is_empty());
        assert_eq!(h.heartbeat(&a, 1), Ok(()));
        if h.group.state() == GroupState::Stable {
            let _ = h.heartbeat(&b, 1);
        }
    }
    assert_eq!(h.group.member_count(), 2);

    // b falls silent: it is removed at its deadline and a rebalance starts.
    let silent_since = h.now;
    assert!(h.advance(i64::from(SESSION) / 2).is_empty());
    assert_eq!(h.heartbeat(&a, 1), Ok(()));
    let _ = h.fire_next();
    assert_eq!(h.now, silent_since + i64::from(SESSION));
    assert!(!h.group.has_member(&b));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.heartbeat(&a, 1), Err(GroupError::RebalanceInProgress));
    assert_eq!(h.heartbeat(&b, 1), Err(GroupError::UnknownMemberId));
    // a rejoins alone: the join phase completes at once.
    let effects = h.join(join_req(1, "c0", &a));
    let r = joined(&effects, 1).unwrap().unwrap();
    assert_eq!((r.generation_id, r.members.len()), (2, 1));
}

#[test]
fn an_expiring_member_with_a_parked_join_is_answered_unknown_member() {
    let mut h = Harness::new();
    // A brand-new member parked in a long rebalance is dropped after the
    // new-member join timeout.
    let results = h.stable(1);
    let ping = |h: &mut Harness| {
        let _ = h.group.heartbeat(&results[0].member_id, None, 1, h.now);
    };
    let long = JoinRequest {
        rebalance_timeout_ms: 600_000,
        ..join_req(1, "new", "")
    };
    assert!(h.join(long).is_empty());
    let joined_at = h.now;
    let mut effects = Vec::new();
    while h.now < joined_at + NEW_MEMBER_JOIN_TIMEOUT_MS {
        ping(&mut h);
        effects.extend(h.advance(5_000));
    }
    assert_eq!(joined(&effects, 1), Some(Err(GroupError::UnknownMemberId)));
    assert_eq!(h.group.member_count(), 1);
}

#[test]
fn leaving_triggers_a_rebalance_and_reports_per_member() {
    let mut h = Harness::new();
    let results = h.stable(3);
    let ids: Vec<String> = results.iter().map(|r| r.member_id.clone()).collect();
    let (outcome, effects) = h.leave(&[&ids[1], "nobody"]);
    assert_eq!(
        outcome,
        vec![Ok(ids[1].clone()), Err(GroupError::UnknownMemberId)]
    );
    assert!(effects.is_empty());
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.member_count(), 2);

    // The leader leaves mid-rebalance: leadership passes on.
    assert!(h.join(join_req(1, "c2", &ids[2])).is_empty());
    let (outcome, effects) = h.leave(&[&ids[0]]);
    assert_eq!(outcome, vec![Ok(ids[0].clone())]);
    let r = joined(&effects, 1)
        .expect("everyone left has rejoined")
        .unwrap();
    assert_eq!(r.leader, ids[2]);
    assert_eq!(r.generation_id, 2);
}

#[test]
fn a_leaving_member_with_a_parked_join_is_answered() {
    let mut h = Harness::new();
    let results = h.stable(2);
    assert!(h.join(join_req(1, "c0", &results[0].member_id)).is_empty());
    let (_, effects) = h.leave(&[&results[0].member_id]);
    assert_eq!(joined(&effects, 1), Some(Err(GroupError::UnknownMemberId)));
}

#[test]
fn when_everyone_leaves_the_group_becomes_empty_with_a_new_generation() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let ids: Vec<&str> = results.iter().map(|r| r.member_id.as_str()).collect();
    let (outcome, effects) = h.leave(&ids);
    assert!(outcome.iter().all(Result::is_ok));
    assert_eq!(effects, vec![Effect::Persist]);
    assert_eq!(h.group.state(), GroupState::Empty);
    assert_eq!(h.group.generation_id(), 2);
    assert_eq!(h.group.protocol_name(), None);
    assert_eq!(
        h.group.protocol_type().as_deref(),
        Some("consumer"),
        "kept for ListGroups"
    );
    assert_eq!(h.group.leader(), None);
    assert_eq!(h.group.next_deadline(), None);
    let snap = h.group.snapshot();
    assert!(snap.members.is_empty());

    // The group is reusable: the next member starts generation 3.
    assert!(h.join(join_req(1, "again", "")).is_empty());
    let (_, r) = h.fire_until_joined(1);
    assert_eq!(r.generation_id, 3);
}

#[test]
fn a_pending_member_can_leave() {
    let mut h = Harness::new();
    let effects = h.join(JoinRequest {
        require_known_member_id: true,
        ..join_req(1, "app", "")
    });
    let Some(Err(GroupError::MemberIdRequired(id))) = joined(&effects, 1) else {
        panic!("{effects:?}");
    };
    let (outcome, _) = h.leave(&[&id]);
    assert_eq!(outcome, vec![Ok(id)]);
    assert_eq!(h.group.next_deadline(), None);
}

#[test]
fn a_member_leaving_while_others_wait_to_sync_tells_them_to_rejoin() {
    let mut h = Harness::new();
    let results = h.form(3);
    assert!(h
        .sync(sync_req(1, &results[1].member_id, 1, Vec::new()))
        .is_empty());
    let (_, effects) = h.leave(&[&results[2].member_id]);
    assert_eq!(
        synced(&effects, 1),
        Some(Err(GroupError::RebalanceInProgress))
    );
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn simple_offset_commits_need_an_empty_group() {
    let mut h = Harness::new();
    assert_eq!(h.group.validate_offset_commit("", None, -1), Ok(()));
    let results = h.form(2);
    let m = results[1].member_id.clone();
    assert_eq!(
        h.group.validate_offset_commit("", None, -1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.group.validate_offset_commit(&m, None, 1),
        Err(GroupError::RebalanceInProgress),
        "no commits before the assignment arrives"
    );
    let _ = h.sync(sync_req(
        1,
        &results[0].member_id,
        1,
        assignment_for(&results),
    ));
    assert_eq!(h.group.validate_offset_commit(&m, None, 1), Ok(()));
    assert_eq!(
        h.group.validate_offset_commit(&m, None, 0),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        h.group.validate_offset_commit("nobody", None, 1),
        Err(GroupError::UnknownMemberId)
    );
    // While preparing a rebalance, members of the current generation may
    // still commit what they consumed.
    assert!(h.join(join_req(2, "new", "")).is_empty());
    assert_eq!(h.group.validate_offset_commit(&m, None, 1), Ok(()));
    // Transactional commits from producers without group metadata pass.
    assert_eq!(h.group.validate_txn_offset_commit("", None, -1), Ok(()));
}

#[test]
fn an_accepted_commit_refreshes_the_session() {
    let mut h = Harness::new();
    let results = h.stable(1);
    let m = results[0].member_id.clone();
    h.now += i64::from(SESSION) - 1;
    assert_eq!(h.group.validate_offset_commit(&m, None, 1), Ok(()));
    h.group.record_offset_commit(&m, h.now);
    assert_eq!(h.group.next_deadline(), Some(h.now + i64::from(SESSION)));
}

#[test]
fn an_unloaded_group_answers_everything_coordinator_not_available() {
    let mut h = Harness::new();
    let results = h.form(2);
    assert!(h
        .sync(sync_req(1, &results[1].member_id, 1, Vec::new()))
        .is_empty());
    let effects = h.group.unload(h.now);
    assert_eq!(
        synced(&effects, 1),
        Some(Err(GroupError::CoordinatorNotAvailable))
    );
    assert_eq!(h.group.state(), GroupState::Dead);
    assert_eq!(h.group.next_deadline(), None);
    let effects = h.join(join_req(2, "x", ""));
    assert_eq!(
        joined(&effects, 2),
        Some(Err(GroupError::CoordinatorNotAvailable))
    );
    assert_eq!(
        h.heartbeat(&results[0].member_id, 1),
        Err(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(
        h.group.validate_offset_commit("", None, -1),
        Err(GroupError::CoordinatorNotAvailable)
    );
    let (outcome, _) = h.leave(&[&results[0].member_id]);
    assert_eq!(outcome, vec![Err(GroupError::CoordinatorNotAvailable)]);
}

#[test]
fn an_unloaded_group_answers_parked_joins() {
    let mut h = Harness::new();
    assert!(h.join(join_req(1, "x", "")).is_empty());
    let effects = h.group.unload(h.now);
    assert_eq!(
        joined(&effects, 1),
        Some(Err(GroupError::CoordinatorNotAvailable))
    );
}
