//! Rebalance and sync timeouts, pending-member expiry, `next_deadline`, and
//! snapshot/restore.

use super::*;

#[test]
fn the_rebalance_timeout_drops_members_that_did_not_rejoin() {
    let mut h = Harness::new();
    let results = h.stable(3);
    let ids: Vec<String> = results.iter().map(|r| r.member_id.clone()).collect();
    // ids[0] (the leader) and ids[1] rejoin; ids[2] keeps heartbeating but
    // never rejoins.
    assert!(h.join(join_req(1, "c0", &ids[0])).is_empty());
    let deadline = h.now + i64::from(REBALANCE);
    assert!(h.join(join_req(2, "c1", &ids[1])).is_empty());
    let mut effects = Vec::new();
    while h.now + 5_000 < deadline {
        h.now += 5_000;
        assert_eq!(
            h.heartbeat(&ids[2], 1),
            Err(GroupError::RebalanceInProgress)
        );
        effects.extend(h.group.tick(h.now));
    }
    assert!(effects.is_empty());
    assert_eq!(h.group.next_deadline(), Some(deadline));
    let effects = h.fire_next();
    assert_eq!(answered(&effects), vec![1, 2]);
    assert!(!h.group.has_member(&ids[2]));
    let leader = joined(&effects, 1).unwrap().unwrap();
    assert_eq!(leader.members.len(), 2);
    assert_eq!(leader.generation_id, 2);
    assert_eq!(h.heartbeat(&ids[2], 1), Err(GroupError::UnknownMemberId));
}

#[test]
fn the_leader_not_rejoining_hands_leadership_to_a_member_that_did() {
    let mut h = Harness::new();
    let results = h.stable(2);
    assert!(h.join(join_req(1, "new", "")).is_empty());
    assert!(h.join(join_req(2, "c1", &results[1].member_id)).is_empty());
    // The leader heartbeats but does not rejoin.
    let mut effects = Vec::new();
    while effects.is_empty() {
        h.now += 5_000;
        let _ = h.heartbeat(&results[0].member_id, 1);
        effects = h.group.tick(h.now);
    }
    let r = joined(&effects, 2).unwrap().unwrap();
    assert_eq!(r.leader, results[1].member_id);
    assert_eq!(r.members.len(), 2);
}

#[test]
fn members_that_never_sync_are_removed_and_the_group_rebalances() {
    let mut h = Harness::new();
    let results = h.form(3);
    let ids: Vec<String> = results.iter().map(|r| r.member_id.clone()).collect();
    let joined_at = h.now;
    assert_eq!(
        h.group.next_deadline(),
        Some(joined_at + i64::from(SESSION))
    );
    // Leader and one follower sync; the other follower only heartbeats.
    assert!(h.sync(sync_req(1, &ids[1], 1, Vec::new())).is_empty());
    let effects = h.sync(sync_req(2, &ids[0], 1, assignment_for(&results)));
    assert_eq!(answered(&effects), vec![2, 1]);
    assert_eq!(h.group.state(), GroupState::Stable);
    let mut effects = Vec::new();
    while h.group.state() == GroupState::Stable {
        h.now += 5_000;
        for id in &ids {
            let _ = h.heartbeat(id, 1);
        }
        effects.extend(h.group.tick(h.now));
    }
    assert!(h.now >= joined_at + i64::from(REBALANCE));
    assert!(h.now < joined_at + i64::from(REBALANCE) + 5_000);
    assert!(
        !h.group.has_member(&ids[2]),
        "the member that never synced is gone"
    );
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
    assert_eq!(h.group.member_count(), 2);
}

#[test]
fn a_missing_leader_sync_fails_the_parked_followers() {
    let mut h = Harness::new();
    let results = h.form(2);
    assert!(h
        .sync(sync_req(1, &results[1].member_id, 1, Vec::new()))
        .is_empty());
    // The parked follower is excused from heartbeats; the leader is not,
    // but it heartbeats and still never syncs.
    let mut effects = Vec::new();
    while synced(&effects, 1).is_none() {
        h.now += 5_000;
        let _ = h.heartbeat(&results[0].member_id, 1);
        effects.extend(h.group.tick(h.now));
    }
    assert_eq!(
        synced(&effects, 1),
        Some(Err(GroupError::RebalanceInProgress))
    );
    assert!(!h.group.has_member(&results[0].member_id));
    assert_eq!(h.group.state(), GroupState::PreparingRebalance);
}

#[test]
fn pending_members_that_never_rejoin_expire() {
    let mut h = Harness::new();
    let results = h.stable(1);
    let effects = h.join(JoinRequest {
        require_known_member_id: true,
        session_timeout_ms: 6_000,
        ..join_req(1, "app", "")
    });
    assert!(matches!(
        joined(&effects, 1),
        Some(Err(GroupError::MemberIdRequired(_)))
    ));
    // The leader rejoins; the phase waits for the pending member.
    assert!(h.join(join_req(2, "c0", &results[0].member_id)).is_empty());
    assert_eq!(h.group.next_deadline(), Some(h.now + 6_000));
    let effects = h.fire_next();
    assert_eq!(
        answered(&effects),
        vec![2],
        "completes once the pending member expires"
    );
}

#[test]
fn next_deadline_tracks_the_earliest_timer() {
    let mut h = Harness::new();
    assert_eq!(
        h.group.next_deadline(),
        None,
        "an empty group has nothing to do"
    );
    assert!(h.join(join_req(1, "a", "")).is_empty());
    // New member's join timeout (5 min) is later than the initial delay.
    assert_eq!(h.group.next_deadline(), Some(h.now + INITIAL_DELAY));
    let (_, r) = h.fire_until_joined(1);
    // CompletingRebalance: the member's session vs the sync timeout.
    assert_eq!(h.group.next_deadline(), Some(h.now + i64::from(SESSION)));
    // Parked in SyncGroup, its session is excused: only the sync timeout.
    let follower_less = h.sync(sync_req(2, &r.member_id, 1, Vec::new()));
    assert!(
        synced(&follower_less, 2).unwrap().is_ok(),
        "the lone leader completes"
    );
    assert_eq!(h.group.next_deadline(), Some(h.now + i64::from(SESSION)));
    h.now += 1_000;
    assert_eq!(h.heartbeat(&r.member_id, 1), Ok(()));
    assert_eq!(h.group.next_deadline(), Some(h.now + i64::from(SESSION)));
    // Ticking early does nothing; ticking at the deadline expires it.
    let at = h.group.next_deadline().unwrap();
    assert!(h.group.tick(at - 1).is_empty());
    assert_eq!(h.group.member_count(), 1);
    let effects = h.group.tick(at);
    assert_eq!(effects, vec![Effect::Persist]);
    assert_eq!(h.group.state(), GroupState::Empty);
    assert_eq!(h.group.next_deadline(), None);
}

#[test]
fn a_parked_join_excuses_the_members_session() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let synced_at = h.now;
    h.now += 8_000;
    assert_eq!(h.heartbeat(&results[1].member_id, 1), Ok(()));
    assert!(h.join(join_req(1, "c0", &results[0].member_id)).is_empty());
    // Member 0's session (synced_at + 10 s) is not a deadline while it
    // waits in JoinGroup; member 1's is.
    assert_eq!(
        h.group.next_deadline(),
        Some(synced_at + 8_000 + i64::from(SESSION))
    );
    h.now = synced_at + 12_000;
    assert!(h.group.tick(h.now).is_empty());
    assert!(h.group.has_member(&results[0].member_id));
    // Once answered, its session counts again, from the answer.
    let effects = h.join(join_req(2, "c1", &results[1].member_id));
    assert_eq!(answered(&effects), vec![1, 2]);
    assert_eq!(h.group.next_deadline(), Some(h.now + i64::from(SESSION)));
}

#[test]
fn tick_after_a_long_pause_processes_everything_in_order() {
    let mut h = Harness::new();
    let results = h.stable(2);
    let _ = results;
    // Nobody heartbeats for an hour: sessions expire, the rebalance
    // completes with nobody, the group ends up empty.
    let effects = h.advance(3_600_000);
    assert_eq!(effects, vec![Effect::Persist]);
    assert_eq!(h.group.state(), GroupState::Empty);
    assert_eq!(h.group.generation_id(), 2);
    assert_eq!(h.group.next_deadline(), None);
}

#[test]
fn snapshot_and_restore_round_trip_a_stable_group() {
    let mut h = Harness::new();
    let mut results = h.stable(2);
    let s = JoinRequest {
        protocols: vec![
            Protocol::new("range", Bytes::from_static(&[0, 1, 0xff])),
            Protocol::new("roundrobin", Bytes::from("rr")),
        ],
        ..static_join(1, "s", "")
    };
    assert!(h.join(s).is_empty());
    let mut effects = Vec::new();
    for (i, r) in results.iter().enumerate() {
        effects.extend(h.join(join_req(10 + i as u64, "c", &r.member_id)));
    }
    results = [10, 11, 1]
        .iter()
        .map(|r| joined(&effects, *r).unwrap().unwrap())
        .collect();
    let effects = h.sync(sync_req(
        20,
        &results[0].member_id,
        2,
        assignment_for(&results),
    ));
    assert!(persisted(&effects));
    let snap = h.group.snapshot();
    assert_eq!(snap.generation_id, 2);
    assert_eq!(snap.protocol_name.as_deref(), Some("range"));
    assert_eq!(snap.leader.as_deref(), Some(results[0].member_id.as_str()));
    assert_eq!(snap.members.len(), 3);
    assert_eq!(snap.members[2].group_instance_id.as_deref(), Some("s"));
    assert_eq!(snap.members[2].metadata, Bytes::from_static(&[0, 1, 0xff]));

    // Through JSON, as the group log stores it.
    let json = serde_json::to_string(&snap).unwrap();
    assert!(json.contains("\"0001ff\""), "bytes are hex: {json}");
    let back: GroupSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snap);

    let later = h.now + 60_000;
    let mut g = ClassicGroup::restore(back, config(), later);
    assert_eq!(g.state(), GroupState::Stable);
    assert_eq!(g.generation_id(), 2);
    assert_eq!(g.snapshot(), snap);
    // Members carry on: heartbeats, syncs and the static mapping work, and
    // sessions were refreshed at restore time.
    assert_eq!(g.next_deadline(), Some(later + i64::from(SESSION)));
    for r in &results[..2] {
        assert_eq!(g.heartbeat(&r.member_id, None, 2, later), Ok(()));
    }
    let s_id = results[2].member_id.clone();
    assert_eq!(g.heartbeat(&s_id, Some("s"), 2, later), Ok(()));
    let effects = g.sync(sync_req(30, &results[1].member_id, 2, Vec::new()), later);
    let got = synced(&effects, 30).unwrap().unwrap();
    assert_eq!(
        got.assignment,
        Bytes::from(format!("a-{}", results[1].member_id))
    );
    // A static restart after the broker restart still avoids a rebalance.
    let effects = g.join(static_join(31, "s", ""), later);
    assert_eq!(joined(&effects, 31).unwrap().unwrap().generation_id, 2);
    assert_eq!(g.state(), GroupState::Stable);
}

#[test]
fn restoring_without_members_or_protocol_gives_an_empty_group() {
    let mut h = Harness::new();
    let results = h.stable(1);
    let _ = h.leave(&[&results[0].member_id]);
    let snap = h.group.snapshot();
    let g = ClassicGroup::restore(snap.clone(), config(), h.now);
    assert_eq!(g.state(), GroupState::Empty);
    assert_eq!(g.generation_id(), 2);
    assert_eq!(g.protocol_type().as_deref(), Some("consumer"));
    assert_eq!(g.snapshot(), snap);
    assert_eq!(g.next_deadline(), None);
}

#[test]
fn restoring_an_over_capacity_group_rebalances_it() {
    let mut h = Harness::new();
    let _ = h.stable(3);
    let snap = h.group.snapshot();
    let small = ClassicConfig {
        max_size: 2,
        ..config()
    };
    let g = ClassicGroup::restore(snap, small, h.now);
    assert_eq!(g.state(), GroupState::PreparingRebalance);
}

#[test]
fn describe_shows_metadata_and_assignments_only_when_stable() {
    let mut h = Harness::new();
    let results = h.form(2);
    let d = h.group.describe();
    assert_eq!(d.state, GroupState::CompletingRebalance);
    assert_eq!(d.state.to_string(), "CompletingRebalance");
    assert_eq!(d.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(d.protocol_name, None);
    assert!(d
        .members
        .iter()
        .all(|m| m.metadata.is_empty() && m.assignment.is_empty()));
    assert_eq!(
        h.group.protocol_metadata().len(),
        2,
        "still available for OffsetDelete"
    );

    let _ = h.sync(sync_req(
        1,
        &results[0].member_id,
        1,
        assignment_for(&results),
    ));
    let d = h.group.describe();
    assert_eq!(d.state, GroupState::Stable);
    assert_eq!(d.protocol_name.as_deref(), Some("range"));
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[0].member_id, results[0].member_id);
    assert_eq!(d.members[0].client_id, "c0");
    assert_eq!(d.members[0].client_host, "/127.0.0.1");
    assert_eq!(d.members[0].metadata, "meta-range");
    assert_eq!(
        d.members[1].assignment,
        Bytes::from(format!("a-{}", results[1].member_id))
    );
}

#[test]
fn group_state_names_parse_case_insensitively() {
    for s in GroupState::ALL {
        assert_eq!(GroupState::from_name(&s.as_str().to_lowercase()), Some(s));
    }
    assert_eq!(GroupState::from_name("Assigning"), None);
}
