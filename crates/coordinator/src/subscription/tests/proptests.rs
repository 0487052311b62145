//! Random event sequences on every subscription type never deliver beyond
//! permits, never deliver an acknowledged or outstanding offset, keep
//! Key_Shared's per-key order, and never lose an unacknowledged offset;
//! afterwards a fresh consumer with permits gets everything unacknowledged.

use std::collections::HashMap;

use model::{Offset, Timestamp};
use proptest::prelude::*;

use super::dispatch::spec;
use crate::subscription::*;

const CONSUMERS: u64 = 4;

#[derive(Debug, Clone)]
enum Op {
    Attach { c: u64, priority: i32 },
    Detach { c: u64 },
    Flow { c: u64, n: u32 },
    Produce { n: i64 },
    Dispatch { read_limit: i64 },
    Ack { c: u64, at: i64, len: i64 },
    AckCumulative { c: u64, at: i64 },
    Redeliver { c: u64, some: Option<Vec<i64>> },
    Seek { at: i64 },
    Retention { n: i64 },
    Skip { n: Option<u64> },
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..CONSUMERS;
    prop_oneof![
        2 => (c.clone(), 0i32..2).prop_map(|(c, priority)| Op::Attach { c, priority }),
        1 => c.clone().prop_map(|c| Op::Detach { c }),
        3 => (c.clone(), 0u32..15).prop_map(|(c, n)| Op::Flow { c, n }),
        3 => (1i64..12).prop_map(|n| Op::Produce { n }),
        6 => (1i64..25).prop_map(|read_limit| Op::Dispatch { read_limit }),
        4 => (c.clone(), 0i64..120, 1i64..6).prop_map(|(c, at, len)| Op::Ack { c, at, len }),
        1 => (c.clone(), 0i64..120).prop_map(|(c, at)| Op::AckCumulative { c, at }),
        1 => (c.clone(), prop::option::of(prop::collection::vec(0i64..120, 0..4)))
            .prop_map(|(c, some)| Op::Redeliver { c, some }),
        1 => (0i64..120).prop_map(|at| Op::Seek { at }),
        1 => (1i64..6).prop_map(|n| Op::Retention { n }),
        1 => prop::option::of(0u64..8).prop_map(|n| Op::Skip { n }),
    ]
}

fn sub_type() -> impl Strategy<Value = SubscriptionType> {
    prop_oneof![
        Just(SubscriptionType::Exclusive),
        Just(SubscriptionType::Shared),
        Just(SubscriptionType::Failover),
        Just(SubscriptionType::KeyShared),
    ]
}

/// Offsets holding no message (transaction markers, say).
fn gap(o: i64) -> bool {
    o % 7 == 5
}

fn hash(o: i64) -> u32 {
    [100, 40_000, 20_000, 60_000, 33_000][(o * 31 % 5) as usize]
}

fn id(c: u64) -> ConsumerId {
    super::dispatch::cid(c)
}

struct World {
    sub: Subscription,
    start: i64,
    end: i64,
    permits: HashMap<ConsumerId, u64>,
}

impl World {
    fn bounds(&self) -> LogBounds {
        LogBounds {
            start: Offset(self.start),
            end: Offset(self.end),
        }
    }

    fn dispatch(&mut self, read_limit: i64) -> Result<usize, TestCaseError> {
        let Some(plan) = self.sub.next_read(self.bounds()) else {
            return Ok(0);
        };
        prop_assert!(plan.from.0 >= self.start && plan.max_messages > 0);
        let to = (plan.from.0 + read_limit.min(plan.max_messages as i64)).min(self.end);
        let entries: Vec<Entry> = (plan.from.0..to)
            .filter(|&o| !gap(o))
            .map(|o| Entry {
                offset: Offset(o),
                batch: Offset(o),
                key_hash: hash(o),
            })
            .collect();
        let before = self.sub.clone();
        let out = self.sub.dispatch(
            &Read {
                plan,
                entries: &entries,
                end: Offset(to),
            },
            Offset(self.start),
        );
        let mut sent = 0;
        for d in &out {
            let permits = self.permits.get_mut(&d.consumer);
            let Some(permits) = permits else {
                return Err(TestCaseError::fail(format!(
                    "{:?} is not attached",
                    d.consumer
                )));
            };
            prop_assert!(d.messages.len() as u64 <= *permits, "beyond permits");
            *permits -= d.messages.len() as u64;
            sent += d.messages.len();
            for m in &d.messages {
                let o = m.offset;
                prop_assert!(!gap(o.0) && o.0 >= self.start && o.0 < to);
                prop_assert!(!before.cursor().is_acked(o), "{} was acked", o);
                prop_assert!(before.pending_owner(o).is_none(), "{} was out", o);
                if self.sub.sub_type() == SubscriptionType::KeyShared {
                    for earlier in self.start..o.0 {
                        if gap(earlier) || hash(earlier) != hash(o.0) {
                            continue;
                        }
                        let ok = self.sub.cursor().is_acked(Offset(earlier))
                            || self.sub.pending_owner(Offset(earlier)) == Some(d.consumer);
                        prop_assert!(
                            ok,
                            "{} sent to {:?} before {} of its key",
                            o,
                            d.consumer,
                            earlier
                        );
                    }
                }
            }
        }
        Ok(sent)
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        let t = self.sub.sub_type();
        match op {
            Op::Attach { c, priority } => {
                let name = ["b", "a", "c", "a"][c as usize];
                if self.sub.attach(spec(c, name, priority), t).is_ok() {
                    self.permits.insert(id(c), 0);
                }
            }
            Op::Detach { c } => {
                if self.sub.detach(id(c)).is_ok() {
                    self.permits.remove(&id(c));
                }
            }
            Op::Flow { c, n } => {
                if self.sub.flow(id(c), n).is_ok() {
                    *self.permits.get_mut(&id(c)).unwrap() += u64::from(n);
                }
            }
            Op::Produce { n } => self.end += n,
            Op::Dispatch { read_limit } => {
                self.dispatch(read_limit)?;
            }
            Op::Ack { c, at, len } => {
                let _ = self
                    .sub
                    .ack(id(c), Ack::Individual(vec![Offset(at)..Offset(at + len)]));
            }
            Op::AckCumulative { c, at } => {
                let _ = self.sub.ack(id(c), Ack::Cumulative(Offset(at)));
            }
            Op::Redeliver { c, some } => {
                let offsets: Option<Vec<Offset>> =
                    some.map(|v| v.into_iter().map(Offset).collect());
                let _ = self.sub.redeliver(id(c), offsets.as_deref());
            }
            Op::Seek { at } => self.sub.seek(Offset(at.clamp(self.start, self.end))),
            Op::Retention { n } => {
                self.start = (self.start + n).min(self.end);
                self.sub.next_read(self.bounds());
            }
            Op::Skip { n } => {
                let before = self.sub.cursor().backlog(Offset(self.end));
                let skipped = self.sub.skip(n, Offset(self.end));
                prop_assert_eq!(skipped, n.map_or(before, |n| n.min(before)));
                prop_assert_eq!(
                    self.sub.cursor().backlog(Offset(self.end)),
                    before - skipped
                );
            }
        }
        self.sub
            .check_invariants(Offset(self.end))
            .map_err(TestCaseError::fail)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_events_keep_the_subscription_sound(
        t in sub_type(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut w = World {
            sub: Subscription::new(
                "s".into(),
                t,
                true,
                Some(1),
                StartPosition::Earliest,
                LogBounds { start: Offset(0), end: Offset(0) },
                Timestamp(0),
            ),
            start: 0,
            end: 0,
            permits: HashMap::new(),
        };
        for op in ops {
            w.apply(op)?;
        }
        // Everyone leaves; a fresh consumer with plenty of permits gets every
        // unacknowledged message.
        for c in 0..CONSUMERS {
            w.apply(Op::Detach { c })?;
        }
        let fresh = spec(99, "fresh", 0);
        w.sub.attach(fresh, t).unwrap();
        w.permits.insert(id(99), 1_000_000);
        w.sub.flow(id(99), 1_000_000).unwrap();
        for _ in 0..10_000 {
            if w.dispatch(50)? == 0 && w.sub.next_read(w.bounds()).is_none() {
                break;
            }
        }
        prop_assert_eq!(w.sub.read_position(), Offset(w.end));
        for o in w.start..w.end {
            let o = Offset(o);
            prop_assert!(
                w.sub.cursor().is_acked(o) || w.sub.pending_owner(o) == Some(id(99)),
                "{} lost", o
            );
        }
        w.sub.check_invariants(Offset(w.end)).map_err(TestCaseError::fail)?;
    }
}
