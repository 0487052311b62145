//! ElectLeaders: preferred and unclean leader elections asked by an
//! administrator, decided by [`magnetar_metadata::leadership::elect`] and
//! committed together as partition-change records.

use magnetar_metadata::leadership::{self, ElectionError, ElectionType};

use crate::{Broker, Error};

impl Broker {
    /// Runs an election of `kind` for each of `partitions` (topic name,
    /// index): the ones that need and allow one are committed in one
    /// change; each partition's outcome, in order. `Err`: the change could
    /// not be committed (no controller).
    pub fn elect_leaders(
        &self,
        partitions: &[(String, i32)],
        kind: ElectionType,
    ) -> Result<Vec<Result<(), ElectionError>>, Error> {
        self.change(|b| {
            let store = b.store.lock();
            let mut records = Vec::new();
            let outcomes = partitions
                .iter()
                .map(|(topic, p)| {
                    leadership::elect(&store.data, topic, *p, kind).map(|r| records.push(r))
                })
                .collect();
            Ok((records, outcomes))
        })
    }
}

impl Broker {
    /// Automatic leader balancing (`auto.leader.rebalance.enable`): preferred
    /// elections for the partitions this broker is the first replica of and
    /// in sync for but does not lead; how many moved here. Blocks on the
    /// controller.
    pub(crate) fn reclaim_preferred_leadership(&self) -> Result<usize, Error> {
        let owed = {
            let store = self.store.lock();
            leadership::led_elsewhere(&store.data, self.node_id())
        };
        if owed.is_empty() {
            return Ok(0);
        }
        let moved = self
            .elect_leaders(&owed, ElectionType::Preferred)?
            .iter()
            .filter(|r| r.is_ok())
            .count();
        if moved > 0 {
            tracing::info!(
                partitions = moved,
                "leadership moved back to this broker, their preferred leader"
            );
        }
        Ok(moved)
    }

    /// Runs automatic leader balancing every
    /// `leader.imbalance.check.interval.seconds` while
    /// `auto.leader.rebalance.enable` is on, until the broker is dropped.
    pub(crate) fn spawn_leader_balancing(self: &std::sync::Arc<Self>) {
        let broker = std::sync::Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let period = {
                    let Some(b) = broker.upgrade() else { return };
                    let secs = b
                        .config()
                        .int_value("leader.imbalance.check.interval.seconds");
                    std::time::Duration::from_secs(secs.max(1) as u64)
                };
                tokio::time::sleep(period).await;
                let Some(b) = broker.upgrade() else { return };
                if b.config().string_value("auto.leader.rebalance.enable") != "true" {
                    continue;
                }
                let balanced =
                    tokio::task::spawn_blocking(move || b.reclaim_preferred_leadership());
                match balanced.await {
                    Ok(Err(e)) => tracing::debug!("automatic leader balancing: {e}"),
                    Err(e) => tracing::warn!("automatic leader balancing failed: {e}"),
                    Ok(Ok(_)) => {}
                }
            }
        });
    }
}
