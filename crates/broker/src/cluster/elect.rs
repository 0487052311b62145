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
