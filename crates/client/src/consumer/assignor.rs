//! Leader-side partition assignment for classic groups: Kafka's `range`
//! and `roundrobin` assignors, computed exactly as Java's
//! `RangeAssignor`/`RoundRobinAssignor` do, so a group gets the same
//! assignment whichever member leads.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::message::TopicPartition;

/// A partition assignment strategy, offered to the group in JoinGroup. The
/// group picks the first strategy every member supports; the leader then
/// computes the assignment with it.
///
/// ```
/// use magnetar_client::Assignor;
/// assert_eq!("roundrobin".parse::<Assignor>().unwrap(), Assignor::RoundRobin);
/// assert_eq!(Assignor::Range.name(), "range");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Assignor {
    /// Per topic, consecutive partition ranges to members sorted by id;
    /// the first `partitions % members` members get one more.
    Range,
    /// All partitions (topics sorted) dealt in turn to the members sorted
    /// by id, skipping members not subscribed to the partition's topic.
    RoundRobin,
}

impl Assignor {
    /// The protocol name members use on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => "range",
            Assignor::RoundRobin => "roundrobin",
        }
    }
}

impl std::str::FromStr for Assignor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "range" => Ok(Assignor::Range),
            "roundrobin" => Ok(Assignor::RoundRobin),
            other => Err(Error::InvalidArgument(format!(
                "unknown assignor {other:?} (range, roundrobin)"
            ))),
        }
    }
}

/// One member's subscription, as the leader assigns it.
#[derive(Debug, Clone)]
pub(crate) struct MemberSubscription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: BTreeSet<String>,
}

/// Java's member order: static members first by instance id, then by
/// member id.
fn member_order(a: &MemberSubscription, b: &MemberSubscription) -> std::cmp::Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// The assignment of every member (members with nothing get an empty
/// list). `partitions` gives each existing topic's partition count;
/// subscribed topics missing from it are skipped.
pub(crate) fn assign(
    assignor: Assignor,
    members: &[MemberSubscription],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| member_order(a, b));
    let mut out: BTreeMap<String, Vec<TopicPartition>> = members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect();
    match assignor {
        Assignor::Range => {
            for (topic, &n) in partitions {
                let subs: Vec<&&MemberSubscription> =
                    sorted.iter().filter(|m| m.topics.contains(topic)).collect();
                if subs.is_empty() || n <= 0 {
                    continue;
                }
                let c = subs.len() as i32;
                let (per, extra) = (n / c, n % c);
                for (i, m) in subs.iter().enumerate() {
                    let i = i as i32;
                    let start = per * i + i.min(extra);
                    let len = per + i32::from(i < extra);
                    let list = out.get_mut(&m.member_id).expect("every member has a list");
                    list.extend((start..start + len).map(|p| TopicPartition::new(topic, p)));
                }
            }
        }
        Assignor::RoundRobin => {
            let topics: BTreeSet<&String> = sorted
                .iter()
                .flat_map(|m| m.topics.iter())
                .filter(|t| partitions.contains_key(*t))
                .collect();
            let mut next = 0usize;
            for topic in topics {
                for p in 0..partitions[topic] {
                    // Some member is subscribed, since the topic came from
                    // a subscription; skip those that are not.
                    while !sorted[next % sorted.len()].topics.contains(topic) {
                        next += 1;
                    }
                    let m = sorted[next % sorted.len()];
                    next += 1;
                    out.get_mut(&m.member_id)
                        .expect("every member has a list")
                        .push(TopicPartition::new(topic.as_str(), p));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            group_instance_id: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
        }
    }

    fn counts(t: &[(&str, i32)]) -> BTreeMap<String, i32> {
        t.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    }

    fn names(v: &[TopicPartition]) -> Vec<String> {
        v.iter().map(|tp| tp.to_string()).collect()
    }

    /// RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions in Kafka.
    #[test]
    fn range_matches_java() {
        let members = [member("c1", &["t1", "t2"]), member("c2", &["t1", "t2"])];
        let a = assign(Assignor::Range, &members, &counts(&[("t1", 3), ("t2", 3)]));
        assert_eq!(names(&a["c1"]), ["t1-0", "t1-1", "t2-0", "t2-1"]);
        assert_eq!(names(&a["c2"]), ["t1-2", "t2-2"]);
    }

    #[test]
    fn range_only_counts_subscribers_of_each_topic() {
        let members = [
            member("a", &["x"]),
            member("b", &["x", "y"]),
            member("c", &["y"]),
        ];
        let a = assign(Assignor::Range, &members, &counts(&[("x", 5), ("y", 1)]));
        assert_eq!(names(&a["a"]), ["x-0", "x-1", "x-2"]);
        assert_eq!(names(&a["b"]), ["x-3", "x-4", "y-0"]);
        assert!(a["c"].is_empty());
    }

    /// RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions.
    #[test]
    fn roundrobin_matches_java() {
        let members = [member("c2", &["t1", "t2"]), member("c1", &["t1", "t2"])];
        let a = assign(
            Assignor::RoundRobin,
            &members,
            &counts(&[("t1", 3), ("t2", 3)]),
        );
        assert_eq!(names(&a["c1"]), ["t1-0", "t1-2", "t2-1"]);
        assert_eq!(names(&a["c2"]), ["t1-1", "t2-0", "t2-2"]);
    }

    /// RoundRobinAssignorTest.testMultipleConsumersMixedTopics.
    #[test]
    fn roundrobin_skips_members_not_subscribed() {
        let members = [
            member("c0", &["t1"]),
            member("c1", &["t1", "t2"]),
            member("c2", &["t1"]),
        ];
        let a = assign(
            Assignor::RoundRobin,
            &members,
            &counts(&[("t1", 3), ("t2", 2)]),
        );
        assert_eq!(names(&a["c0"]), ["t1-0"]);
        assert_eq!(names(&a["c1"]), ["t1-1", "t2-0", "t2-1"]);
        assert_eq!(names(&a["c2"]), ["t1-2"]);
    }

    #[test]
    fn static_members_sort_first_by_instance_id() {
        let mut a = member("zz", &["t"]);
        a.group_instance_id = Some("i-2".into());
        let mut b = member("aa", &["t"]);
        b.group_instance_id = Some("i-1".into());
        let c = member("00", &["t"]);
        let out = assign(Assignor::Range, &[a, b, c], &counts(&[("t", 3)]));
        assert_eq!(names(&out["aa"]), ["t-0"]);
        assert_eq!(names(&out["zz"]), ["t-1"]);
        assert_eq!(names(&out["00"]), ["t-2"]);
    }

    #[test]
    fn every_partition_once_for_random_groups() {
        // A small deterministic generator keeps the test reproducible.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..200 {
            let topics: Vec<String> = (0..1 + rnd(4)).map(|i| format!("t{i}")).collect();
            let parts: BTreeMap<String, i32> =
                topics.iter().map(|t| (t.clone(), rnd(9) as i32)).collect();
            let members: Vec<MemberSubscription> = (0..1 + rnd(5))
                .map(|i| MemberSubscription {
                    member_id: format!("m{i}"),
                    group_instance_id: None,
                    topics: topics.iter().filter(|_| rnd(3) > 0).cloned().collect(),
                })
                .collect();
            for assignor in [Assignor::Range, Assignor::RoundRobin] {
                let a = assign(assignor, &members, &parts);
                let mut seen = BTreeSet::new();
                for (m, list) in &a {
                    let sub = &members.iter().find(|x| &x.member_id == m).unwrap().topics;
                    for tp in list {
                        assert!(sub.contains(&tp.topic), "{assignor:?}: unsubscribed {tp}");
                        assert!(seen.insert(tp.clone()), "{assignor:?}: {tp} twice");
                    }
                }
                let subscribed: BTreeSet<&String> =
                    members.iter().flat_map(|m| m.topics.iter()).collect();
                let want: usize = subscribed.iter().map(|t| parts[*t] as usize).sum();
                assert_eq!(seen.len(), want, "{assignor:?}");
                // Balanced per topic for range, overall for roundrobin when
                // every member subscribes to everything.
                let sizes: Vec<usize> = a.values().map(Vec::len).collect();
                if members.iter().all(|m| m.topics.len() == topics.len())
                    && assignor == Assignor::RoundRobin
                {
                    let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
                    assert!(hi.unwrap() - lo.unwrap() <= 1, "{sizes:?}");
                }
            }
        }
    }
}
