//! Server-side assignors for consumer-protocol groups.

use std::collections::{BTreeMap, BTreeSet};

use model::TopicId;

use super::{Assignment, TopicInfo};

/// A server-side assignor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    /// Spreads every subscribed partition evenly, keeping partitions where
    /// they are when that stays balanced.
    Uniform,
    /// Per topic, contiguous ranges of partitions to members in id order.
    Range,
}

impl Assignor {
    /// Parses Kafka's assignor names.
    pub fn parse(name: &str) -> Option<Assignor> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    /// Kafka's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// Computes every member's target. `subs` maps member → subscribed topic
    /// ids; `previous` is the last target (for stickiness).
    pub fn assign(
        &self,
        subs: &BTreeMap<String, BTreeSet<TopicId>>,
        topics: &[TopicInfo],
        previous: &BTreeMap<String, Assignment>,
    ) -> BTreeMap<String, Assignment> {
        let mut out: BTreeMap<String, Assignment> = subs
            .keys()
            .map(|m| (m.clone(), Assignment::new()))
            .collect();
        match self {
            Assignor::Range => {
                for t in topics {
                    let members: Vec<&String> = subs
                        .iter()
                        .filter(|(_, s)| s.contains(&t.id))
                        .map(|(m, _)| m)
                        .collect();
                    if members.is_empty() {
                        continue;
                    }
                    let n = members.len() as i32;
                    let (per, extra) = (t.partitions / n, t.partitions % n);
                    let mut next = 0;
                    for (i, m) in members.iter().enumerate() {
                        let count = per + i32::from((i as i32) < extra);
                        let parts = out
                            .entry((*m).clone())
                            .or_default()
                            .entry(t.id)
                            .or_default();
                        parts.extend(next..next + count);
                        next += count;
                    }
                }
            }
            Assignor::Uniform => {
                let mut load: BTreeMap<&String, usize> = subs.keys().map(|m| (m, 0)).collect();
                let mut pending = Vec::new();
                let total_members = subs.len().max(1);
                let total_partitions: usize = topics
                    .iter()
                    .filter(|t| subs.values().any(|s| s.contains(&t.id)))
                    .map(|t| t.partitions as usize)
                    .sum();
                let quota = total_partitions.div_ceil(total_members);
                // Keep partitions with their previous owner up to the quota.
                for t in topics {
                    for p in 0..t.partitions {
                        let owner = previous
                            .iter()
                            .find(|(m, a)| {
                                a.get(&t.id).is_some_and(|ps| ps.contains(&p))
                                    && subs.get(*m).is_some_and(|s| s.contains(&t.id))
                            })
                            .map(|(m, _)| m);
                        match owner.and_then(|o| load.get_key_value(o).map(|(k, _)| *k)) {
                            Some(o) if load[o] < quota => {
                                *load.get_mut(o).unwrap_or(&mut 0) += 1;
                                out.entry(o.clone())
                                    .or_default()
                                    .entry(t.id)
                                    .or_default()
                                    .insert(p);
                            }
                            _ if subs.values().any(|s| s.contains(&t.id)) => {
                                pending.push((t.id, p))
                            }
                            _ => {}
                        }
                    }
                }
                // Then give the rest to the least-loaded eligible member.
                for (t, p) in pending {
                    let best = subs
                        .iter()
                        .filter(|(_, s)| s.contains(&t))
                        .map(|(m, _)| m)
                        .min_by_key(|m| (load[m], (*m).clone()));
                    if let Some(m) = best {
                        *load.get_mut(m).unwrap_or(&mut 0) += 1;
                        out.entry(m.clone())
                            .or_default()
                            .entry(t)
                            .or_default()
                            .insert(p);
                    }
                }
            }
        }
        for a in out.values_mut() {
            a.retain(|_, ps| !ps.is_empty());
        }
        out
    }
}
