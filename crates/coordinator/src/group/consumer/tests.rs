use super::*;

fn cfg() -> ConsumerConfig {
    ConsumerConfig {
        session_timeout_ms: 10_000,
        heartbeat_interval_ms: 500,
        assignors: vec![Assignor::Uniform, Assignor::Range],
        max_size: 10,
    }
}

fn topic(n: u8, name: &str, partitions: i32) -> TopicInfo {
    TopicInfo {
        id: TopicId(uuid::Uuid::from_bytes([n; 16])),
        name: name.into(),
        partitions,
    }
}

fn join_regex(member: &str, re: &str) -> Heartbeat {
    Heartbeat {
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 5_000,
        subscribed_topic_names: Some(vec![]),
        subscribed_topic_regex: Some(re.into()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<Assignment>) -> Heartbeat {
    Heartbeat {
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned,
        ..Default::default()
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

#[test]
fn regex_subscription_picks_up_new_topics_without_client_metadata() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g".into());
    let mut topics = vec![
        topic(1, "orders-eu", 2),
        topic(2, "payments", 3),
        topic(3, "__consumer_offsets", 1),
    ];
    let r = g
        .heartbeat(join_regex("m1", "(^orders-.*)"), &topics, &c, 0)
        .unwrap();
    assert_eq!(r.member_epoch, 1);
    let a = r.assignment.unwrap();
    assert_eq!(a.keys().collect::<Vec<_>>(), vec![&topics[0].id]);
    assert_eq!(count(&a), 2);

    // A matching topic appears: the next heartbeat carries it, with a new epoch.
    topics.push(topic(4, "orders-us", 4));
    topics.push(topic(5, "xorders-us", 4));
    let r = g.heartbeat(beat("m1", 1, None), &topics, &c, 100).unwrap();
    assert_eq!(r.member_epoch, 2);
    let a = r.assignment.unwrap();
    assert_eq!(count(&a), 6, "orders-eu + orders-us, not xorders-us: {a:?}");
    assert!(!a.contains_key(&topics[4].id));

    // Unchanged state: no assignment in the reply.
    let r = g.heartbeat(beat("m1", 2, None), &topics, &c, 200).unwrap();
    assert_eq!(r.assignment, None);
    assert_eq!(g.state(), "Stable");

    // Deleted topic: its partitions go away.
    topics.remove(0);
    let r = g.heartbeat(beat("m1", 2, None), &topics, &c, 300).unwrap();
    assert_eq!(count(&r.assignment.unwrap()), 4);
}

#[test]
fn partitions_move_only_after_the_old_owner_releases_them() {
    let c = cfg();
    let topics = vec![topic(1, "t", 4)];
    let mut g = ConsumerGroup::new("g".into());
    let a1 = g
        .heartbeat(join_regex("m1", "t"), &topics, &c, 0)
        .unwrap()
        .assignment
        .unwrap();
    assert_eq!(count(&a1), 4);

    let r2 = g.heartbeat(join_regex("m2", "t"), &topics, &c, 10).unwrap();
    assert_eq!(
        r2.assignment.as_ref().map(count),
        Some(0),
        "m1 still holds everything"
    );
    assert_eq!(g.state(), "Reconciling");

    // m1 is told to keep two.
    let r1 = g.heartbeat(beat("m1", 1, None), &topics, &c, 20).unwrap();
    let keep = r1.assignment.unwrap();
    assert_eq!(count(&keep), 2);
    assert_eq!(r1.member_epoch, 1, "epoch moves only after revocation");

    // Before m1 confirms, m2 still gets nothing.
    let r2 = g
        .heartbeat(beat("m2", r2.member_epoch, None), &topics, &c, 30)
        .unwrap();
    assert!(r2.assignment.is_none() || r2.assignment.as_ref().map(count) == Some(0));

    // m1 reports it released them; m1 moves to the new epoch.
    let r1 = g
        .heartbeat(beat("m1", 1, Some(keep.clone())), &topics, &c, 40)
        .unwrap();
    assert_eq!(r1.member_epoch, 2);
    let r2 = g.heartbeat(beat("m2", 2, None), &topics, &c, 50).unwrap();
    let got = r2.assignment.unwrap();
    assert_eq!(count(&got), 2);
    assert!(difference(&got, &keep) == got, "disjoint");
    assert_eq!(g.state(), "Stable");
}

#[test]
fn leaving_and_expiring_members_give_their_partitions_back() {
    let c = cfg();
    let topics = vec![topic(1, "t", 6)];
    let mut g = ConsumerGroup::new("g".into());
    g.heartbeat(join_regex("a", "t"), &topics, &c, 0).unwrap();
    let e = g
        .heartbeat(join_regex("b", "t"), &topics, &c, 0)
        .unwrap()
        .member_epoch;
    let keep = g
        .heartbeat(beat("a", 1, None), &topics, &c, 1)
        .unwrap()
        .assignment
        .unwrap();
    g.heartbeat(beat("a", 1, Some(keep)), &topics, &c, 2)
        .unwrap();
    let b = g.heartbeat(beat("b", e, None), &topics, &c, 3).unwrap();
    assert_eq!(count(&b.assignment.unwrap()), 3);

    let left = g
        .heartbeat(
            beat("b", b.member_epoch, None).with_epoch(-1),
            &topics,
            &c,
            4,
        )
        .unwrap();
    assert_eq!(left.member_epoch, -1);
    let a = g.heartbeat(beat("a", 2, None), &topics, &c, 5).unwrap();
    assert_eq!(count(&a.assignment.unwrap()), 6);

    // Session expiry.
    g.heartbeat(join_regex("c", "t"), &topics, &c, 6).unwrap();
    assert!(g.next_deadline().is_some());
    assert!(g.tick(&topics, &c, 6 + c.session_timeout_ms + 1));
    assert!(g.is_empty(), "both sessions expired");
    assert_eq!(g.state(), "Empty");
}

#[test]
fn epochs_fence_stale_members_and_commits() {
    let c = cfg();
    let topics = vec![topic(1, "t", 2)];
    let mut g = ConsumerGroup::new("g".into());
    let r = g.heartbeat(join_regex("m", "t"), &topics, &c, 0).unwrap();
    assert_eq!(
        g.heartbeat(beat("m", r.member_epoch + 5, None), &topics, &c, 1),
        Err(ConsumerError::FencedMemberEpoch("m".into()))
    );
    assert_eq!(
        g.heartbeat(beat("ghost", 1, None), &topics, &c, 1),
        Err(ConsumerError::UnknownMemberId("ghost".into()))
    );
    assert_eq!(g.validate_offset_commit("m", r.member_epoch), Ok(()));
    assert_eq!(
        g.validate_offset_commit("m", 99),
        Err(ConsumerError::StaleMemberEpoch("m".into()))
    );
    assert_eq!(
        g.validate_offset_commit("ghost", 1),
        Err(ConsumerError::UnknownMemberId("ghost".into()))
    );
    assert!(
        g.validate_offset_commit("", -1).is_err(),
        "no admin commits while members consume"
    );
}

#[test]
fn bad_subscriptions_are_refused() {
    let c = cfg();
    let mut g = ConsumerGroup::new("g".into());
    assert!(matches!(
        g.heartbeat(join_regex("m", "(unclosed"), &[], &c, 0),
        Err(ConsumerError::InvalidRegex(..))
    ));
    let mut hb = join_regex("m", "t");
    hb.server_assignor = Some("sticky-ish".into());
    assert_eq!(
        g.heartbeat(hb, &[], &c, 0),
        Err(ConsumerError::UnsupportedAssignor("sticky-ish".into()))
    );
    let mut hb = join_regex("m", "t");
    hb.subscribed_topic_names = None;
    hb.subscribed_topic_regex = None;
    assert!(matches!(
        g.heartbeat(hb, &[], &c, 0),
        Err(ConsumerError::InvalidRequest(_))
    ));
}

#[test]
fn assignors_balance_and_cover() {
    let topics = vec![topic(1, "a", 5), topic(2, "b", 3)];
    let subs: BTreeMap<String, BTreeSet<TopicId>> = ["m1", "m2", "m3"]
        .iter()
        .map(|m| (m.to_string(), topics.iter().map(|t| t.id).collect()))
        .collect();
    for assignor in [Assignor::Uniform, Assignor::Range] {
        let out = assignor.assign(&subs, &topics, &BTreeMap::new());
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "{assignor:?} assigned {t}:{p} twice");
                }
            }
        }
        assert_eq!(seen.len(), 8, "{assignor:?} covers every partition");
        if assignor == Assignor::Uniform {
            let counts: Vec<usize> = out.values().map(count).collect();
            assert!(
                counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
                "{counts:?}"
            );
            // Sticky: recomputing from itself changes nothing.
            assert_eq!(assignor.assign(&subs, &topics, &out), out);
        }
    }
}

#[test]
fn snapshot_round_trip_keeps_members_and_assignments() {
    let c = cfg();
    let topics = vec![topic(1, "t", 3)];
    let mut g = ConsumerGroup::new("g".into());
    let r = g.heartbeat(join_regex("m", "t"), &topics, &c, 0).unwrap();
    let json = serde_json::to_string(&g).unwrap();
    let back: ConsumerGroup = serde_json::from_str(&json).unwrap();
    let mut back = back.restored(&c, 1_000);
    assert_eq!(back.members(), g.members());
    let r2 = back
        .heartbeat(beat("m", r.member_epoch, None), &topics, &c, 1_001)
        .unwrap();
    assert_eq!(r2.member_epoch, r.member_epoch);
    assert_eq!(
        r2.assignment.map(|a| count(&a)),
        Some(3),
        "told again after a restart"
    );
}

impl Heartbeat {
    fn with_epoch(mut self, e: i32) -> Heartbeat {
        self.member_epoch = e;
        self
    }
}

#[test]
fn static_member_leaving_temporarily_keeps_its_partitions() {
    let c = cfg();
    let topics = vec![topic(1, "t", 4)];
    let mut g = ConsumerGroup::new("g".into());
    let join_static = |id: &str, instance: &str, g: &mut ConsumerGroup, now| {
        let mut hb = join_regex(id, "t");
        hb.instance_id = Some(instance.into());
        g.heartbeat(hb, &topics, &c, now).unwrap()
    };
    let a = join_static("a1", "inst-a", &mut g, 0);
    let b = join_static("b1", "inst-b", &mut g, 0);
    // Settle: a releases half to b.
    let keep = g
        .heartbeat(beat("a1", a.member_epoch, None), &topics, &c, 1)
        .unwrap()
        .assignment
        .unwrap();
    let a = g
        .heartbeat(
            beat("a1", a.member_epoch, Some(keep.clone())),
            &topics,
            &c,
            2,
        )
        .unwrap();
    let b = g
        .heartbeat(beat("b1", b.member_epoch, None), &topics, &c, 3)
        .unwrap();
    let b_parts = b.assignment.unwrap();
    assert_eq!(count(&b_parts), 2);
    let epoch = g.epoch();

    // b leaves temporarily: no rebalance, a keeps its two.
    let mut leave = beat("b1", -2, None);
    leave.instance_id = Some("inst-b".into());
    assert_eq!(g.heartbeat(leave, &topics, &c, 4).unwrap().member_epoch, -2);
    assert_eq!(g.epoch(), epoch, "no new group epoch");
    assert_eq!(
        g.heartbeat(beat("a1", a.member_epoch, None), &topics, &c, 5)
            .unwrap()
            .assignment,
        None
    );

    // b's replacement (new member id, same instance) gets b's partitions back.
    let back = join_static("b2", "inst-b", &mut g, 6);
    assert_eq!(back.assignment.unwrap(), b_parts);
    assert_eq!(g.epoch(), epoch);

    // Without a replacement, the session timeout removes the member.
    let mut leave = beat("b2", back.member_epoch, None);
    leave.member_epoch = -2;
    leave.instance_id = Some("inst-b".into());
    g.heartbeat(leave, &topics, &c, 7).unwrap();
    g.heartbeat(
        beat("a1", a.member_epoch, None),
        &topics,
        &c,
        7 + c.session_timeout_ms / 2,
    )
    .unwrap();
    assert!(g.tick(&topics, &c, 8 + c.session_timeout_ms));
    assert_eq!(g.members().len(), 1);
}
