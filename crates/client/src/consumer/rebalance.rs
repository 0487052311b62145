//! Rebalances of a subscribed consumer (eager): revoke everything, join,
//! assign as leader, sync, take the new assignment; and the periodic
//! metadata check that notices new or deleted topics.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::assignor::{assign, Assignor, MemberSubscription};
use super::protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use super::{AutoOffsetReset, Consumer, Subscription};
use crate::error::{Error, Result};
use crate::fetcher::{Pos, Reset};
use crate::message::TopicPartition;

/// Errors after which the consumer simply joins again right away.
pub(super) fn rejoin_at_once(e: &Error) -> bool {
    matches!(
        e.kafka_error(),
        Some(
            ResponseError::RebalanceInProgress
                | ResponseError::UnknownMemberId
                | ResponseError::IllegalGeneration
                | ResponseError::MemberIdRequired
        )
    )
}

impl Consumer {
    /// One rebalance round; errors leave the consumer wanting to rejoin.
    pub(super) async fn rebalance(&mut self) -> Result<()> {
        self.revoke_all().await;
        let topics = self.subscription();
        let meta = encode_subscription(&topics, &[], -1)?;
        let protocols: Vec<(&str, Bytes)> = self
            .cfg
            .assignors
            .iter()
            .map(|a| (a.name(), meta.clone()))
            .collect();
        let group = self
            .group
            .as_ref()
            .expect("subscribed consumers have a group");
        let joined = group.join(&protocols).await?;
        tracing::debug!(
            member = %joined.member_id,
            generation = joined.generation,
            leader = joined.leader,
            protocol = %joined.protocol,
            "joined group"
        );
        let assignments = if joined.leader && !joined.skip_assignment {
            self.assign_group(&joined.protocol, &joined.members).await?
        } else {
            Vec::new()
        };
        self.leader = joined.leader;
        let group = self
            .group
            .as_ref()
            .expect("subscribed consumers have a group");
        let mine = decode_assignment(&group.sync(&joined, assignments).await?)?;
        let positions = self.initial_positions(&mine).await?;
        for (tp, pos) in positions {
            self.fetcher.add(tp, pos);
        }
        self.assignment = mine;
        self.group.as_ref().expect("group").set_stable();
        tracing::debug!(assignment = ?self.assignment, "assigned");
        if let Some(l) = &self.listener {
            l.on_partitions_assigned(&self.assignment);
        }
        Ok(())
    }

    /// Gives up the whole assignment: commit (with auto-commit), tell the
    /// listener, drop buffered messages.
    pub(super) async fn revoke_all(&mut self) {
        if self.assignment.is_empty() {
            return;
        }
        if self.cfg.enable_auto_commit && self.group.is_some() {
            if let Err(e) = self.commit().await {
                tracing::debug!(error = %e, "commit before revocation failed");
            }
        }
        if let Some(l) = &self.listener {
            l.on_partitions_revoked(&self.assignment);
        }
        if !self.cfg.enable_auto_commit {
            for (tp, off) in self.fetcher.positions() {
                self.carried.insert_carried(tp.clone(), off);
            }
        }
        self.fetcher.retain(|_| false);
        self.assignment.clear();
    }

    /// Where each newly assigned partition starts: its carried position
    /// (restored, or kept when it was revoked) right after a restore; else
    /// the later of that and its committed offset; else
    /// `auto_offset_reset`.
    pub(super) async fn initial_positions(
        &mut self,
        parts: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Pos)>> {
        let fresh = self.fresh_restore;
        let need: Vec<TopicPartition> = parts
            .iter()
            .filter(|tp| !fresh || self.carried.get(tp).is_none())
            .cloned()
            .collect();
        let mut committed = HashMap::new();
        if let (Some(group), false) = (&self.group, need.is_empty()) {
            let mut attempt = 0u32;
            committed = loop {
                attempt += 1;
                match group.committed(&need).await {
                    Ok(c) => break c,
                    Err(e) if e.is_retriable() && attempt < 10 => {
                        tracing::debug!(error = %e, "OffsetFetch failed; retrying");
                        tokio::time::sleep(self.cfg.retry_backoff * attempt.min(5)).await;
                    }
                    Err(e) => return Err(e),
                }
            };
        }
        self.fresh_restore = false;
        let reset = match self.cfg.auto_offset_reset {
            AutoOffsetReset::Earliest => Reset::Earliest,
            AutoOffsetReset::Latest => Reset::Latest,
            AutoOffsetReset::None => Reset::Undefined,
        };
        Ok(parts
            .iter()
            .map(|tp| {
                let carried = self.carried.remove(tp);
                let start = match (carried, committed.get(tp).copied()) {
                    (Some(k), _) if fresh => Some(k),
                    (Some(k), Some(c)) => Some(k.max(c)),
                    (k, c) => k.or(c),
                };
                let pos = match start {
                    Some(o) => Pos::At(o),
                    None => Pos::Pending(reset),
                };
                (tp.clone(), pos)
            })
            .collect())
    }

    /// The leader's job: every member's assignment, encoded in the
    /// version that member speaks.
    async fn assign_group(
        &mut self,
        protocol: &str,
        members: &[(String, Option<String>, Bytes)],
    ) -> Result<Vec<(String, Bytes)>> {
        let assignor: Assignor = protocol
            .parse()
            .map_err(|_| Error::NotSupported(format!("the group chose assignor {protocol:?}")))?;
        let mut subs = Vec::with_capacity(members.len());
        let mut versions = HashMap::new();
        for (id, instance, meta) in members {
            let s = decode_subscription(meta)?;
            versions.insert(id.clone(), s.version);
            subs.push(MemberSubscription {
                member_id: id.clone(),
                group_instance_id: instance.clone(),
                topics: s.topics.into_iter().collect(),
            });
        }
        let topics: BTreeSet<&str> = subs
            .iter()
            .flat_map(|s| s.topics.iter().map(String::as_str))
            .collect();
        let list: Vec<&str> = topics.iter().copied().collect();
        let md = self.client.refresh_metadata(&list).await?;
        let counts: BTreeMap<String, i32> = topics
            .iter()
            .filter_map(|t| {
                let n = md.topics.get(*t).map_or(0, |m| m.partitions.len() as i32);
                (n > 0).then(|| (t.to_string(), n))
            })
            .collect();
        self.group_topics = topics
            .iter()
            .map(|t| (t.to_string(), counts.get(*t).copied().unwrap_or(0)))
            .collect();
        let plan = assign(assignor, &subs, &counts);
        tracing::debug!(?plan, "computed assignment as leader");
        plan.into_iter()
            .map(|(member, parts)| {
                let v = versions.get(&member).copied().unwrap_or(0);
                Ok((member, encode_assignment(&parts, v)?))
            })
            .collect()
    }

    /// The periodic metadata check: a pattern's matches changed, or (as
    /// leader) a group topic's partition count did; either asks for a
    /// rebalance.
    pub(super) async fn check_metadata(&mut self) {
        let mut changed = false;
        if let Subscription::Pattern { regex, matched } = &mut self.sub {
            match self.client.refresh_all_metadata().await {
                Ok(md) => {
                    let mut now: Vec<String> = md
                        .topics
                        .values()
                        .filter(|t| !t.is_internal && regex.is_match(&t.name))
                        .map(|t| t.name.clone())
                        .collect();
                    now.sort();
                    if now != *matched {
                        tracing::debug!(before = ?matched, after = ?now, "pattern matches changed");
                        *matched = now;
                        changed = true;
                    }
                }
                Err(e) => tracing::debug!(error = %e, "metadata refresh failed"),
            }
        } else if self.leader && !self.group_topics.is_empty() {
            let list: Vec<&str> = self.group_topics.keys().map(String::as_str).collect();
            if let Err(e) = self.client.refresh_metadata(&list).await {
                tracing::debug!(error = %e, "metadata refresh failed");
            }
        }
        if self.leader {
            let md = self.client.metadata();
            for (t, n) in &self.group_topics {
                let now = md.topics.get(t).map_or(0, |m| m.partitions.len() as i32);
                if now != *n {
                    tracing::debug!(topic = %t, before = n, now, "partition count changed");
                    changed = true;
                }
            }
        }
        if changed {
            if let Some(g) = &self.group {
                g.request_rejoin();
            }
        }
    }
}
