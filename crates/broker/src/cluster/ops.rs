//! The metadata changes a broker is asked for (by any front end):
//! validated against its applied metadata by pure functions
//! ([`crate::topic_control`]), submitted as one batch
//! through the quorum's leader, and answered once this broker applied the
//! batch, so the client that asked sees the change at once. A batch that
//! lost a race (validated against a state another change overtook) is
//! refused by every node; the request is then validated again to give the
//! client the right error.

use std::sync::Arc;
use std::time::Duration;

use model::pulsar_name::Namespace;
use model::{ProducerId, TopicId};

use crate::config::TopicConfig;
use crate::core::{NewTopic, PRODUCER_ID_BLOCK};
use crate::metadata_machine::MetadataBatch;
use crate::metadata_records::{Expectation, MetadataRecord, NodeId};
use crate::registry::Registry;
use crate::topic::Topic;
use crate::topic_control::{self, Placement};
use crate::{tenancy, Broker, Error};

/// How often a change lost to a concurrent one is validated and tried again.
const ATTEMPTS: usize = 3;

impl Broker {
    /// The brokers new partitions may be placed on: registered and
    /// unfenced.
    pub fn usable_brokers(&self) -> Vec<NodeId> {
        Registry::usable(&self.store.lock().data)
    }

    /// Commits `records` through the controller quorum and waits until
    /// they are applied here. A record that does not fit the current state
    /// is [`Error::MetadataConflict`] and nothing changes.
    pub(crate) fn commit_metadata(&self, records: Vec<MetadataRecord>) -> Result<(), Error> {
        if records.is_empty() {
            return Ok(());
        }
        self.submit_and_apply(records, None)?
            .map_err(Error::MetadataConflict)
    }

    /// Commits `records`, made of the items of `checked` that passed their
    /// checks; if the commit fails, each of those gets its error (the
    /// refused ones keep theirs).
    pub(crate) fn commit_checked(
        &self,
        records: Vec<MetadataRecord>,
        checked: Vec<Result<(), Error>>,
    ) -> Vec<Result<(), Error>> {
        match self.commit_metadata(records) {
            Ok(()) => checked,
            Err(e) => {
                let msg = e.to_string();
                checked
                    .into_iter()
                    .map(|r| r.and_then(|()| Err(Error::ControllerUnavailable(msg.clone()))))
                    .collect()
            }
        }
    }

    /// Submits `records` and waits until this broker applied them. `Ok(Err)`:
    /// the batch conflicted with a newer state and changed nothing.
    ///
    /// The commit is awaited for the link's change timeout; applying it
    /// here for that long or `patience` if longer, the time the client
    /// said it would wait (a Kafka request's `timeout_ms`). A change of
    /// thousands of partitions can take longer to apply (files to create)
    /// than a controller round trip, and once committed it happens whether
    /// or not anyone waits: answering a timeout before the client's own
    /// would only send it to retry a change that is already there.
    fn submit_and_apply(
        &self,
        records: Vec<MetadataRecord>,
        patience: Option<Duration>,
    ) -> Result<Result<(), String>, Error> {
        let c = &self.cluster;
        let link = c.link.clone();
        let timeout = link.change_timeout;
        let apply_timeout = patience.map_or(timeout, |p| p.max(timeout));
        let mut applied = c.applied.subscribe();
        let l = link.clone();
        let (index, response) = link.block_on(async move {
            tokio::time::timeout(timeout, l.submit(MetadataBatch(records)))
                .await
                .unwrap_or_else(|_| {
                    Err(Error::ControllerUnavailable(format!(
                        "no commit within {} ms",
                        timeout.as_millis()
                    )))
                })
        })??;
        link.block_on(async move {
            let got = tokio::time::timeout(apply_timeout, applied.wait_for(|a| *a >= index)).await;
            match got {
                Ok(Ok(_)) => Ok(()),
                _ => Err(Error::ControllerUnavailable(format!(
                    "committed at index {index} but not applied here within {} ms",
                    apply_timeout.as_millis()
                ))),
            }
        })??;
        Ok(response)
    }

    /// Validates with `decide` against the applied metadata and submits
    /// what it answers, again if a concurrent change got there first.
    pub(crate) fn change<T>(
        &self,
        decide: impl FnMut(&Broker) -> Result<(Vec<MetadataRecord>, T), Error>,
    ) -> Result<T, Error> {
        self.change_within(None, decide)
    }

    /// [`Broker::change`], waiting for the local apply as
    /// [`Broker::submit_and_apply`] does with `patience`.
    fn change_within<T>(
        &self,
        patience: Option<Duration>,
        mut decide: impl FnMut(&Broker) -> Result<(Vec<MetadataRecord>, T), Error>,
    ) -> Result<T, Error> {
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let (records, out) = decide(self)?;
            if records.is_empty() {
                return Ok(out);
            }
            match self.submit_and_apply(records, patience)? {
                Ok(()) => return Ok(out),
                Err(conflict) => last = conflict,
            }
        }
        Err(Error::MetadataConflict(last))
    }

    pub(crate) fn cluster_create_topic(
        &self,
        req: NewTopic,
        validate_only: bool,
        namespace: Option<&Namespace>,
        patience: Option<Duration>,
    ) -> Result<Arc<Topic>, Error> {
        let name = req.name.clone();
        if name.is_internal() {
            // Only the broker makes them: a standalone node publishes its
            // group log as __consumer_offsets (it exists, as on a single
            // Kafka broker); a cluster keeps each broker's own.
            if self.topic(name.as_str()).is_some() {
                return Err(Error::TopicExists(name.to_string()));
            }
            return Err(Error::InternalTopic(name.to_string()));
        }
        let created = self.change_within(patience, |b| {
            let brokers = b.usable_brokers();
            let config = b.config();
            let rec = topic_control::create_topic(
                &b.store.lock().data,
                &config,
                &req,
                namespace,
                Placement {
                    brokers: &brokers,
                    seed: uuid::Uuid::new_v4().as_u64_pair().0,
                },
                TopicId::random(),
            )?;
            if validate_only {
                return Ok((Vec::new(), None));
            }
            let id = rec.id;
            Ok((vec![MetadataRecord::TopicCreated { topic: rec }], Some(id)))
        })?;
        match created {
            None => Ok(crate::topic::validated_only(req)),
            Some(id) => self
                .topic_by_id(id)
                .ok_or_else(|| Error::UnknownTopic(name.to_string())),
        }
    }

    pub(crate) fn cluster_delete_topic(
        &self,
        name: &str,
        expected_id: Option<TopicId>,
    ) -> Result<TopicId, Error> {
        self.change(|b| {
            let rec = topic_control::delete_topic(&b.store.lock().data, name, expected_id)?;
            let MetadataRecord::TopicDeleted { id, .. } = &rec else {
                unreachable!("delete_topic answers TopicDeleted")
            };
            let id = id.to_owned();
            Ok((vec![rec], id))
        })
    }

    pub(crate) fn cluster_create_partitions(
        &self,
        name: &str,
        total: i32,
        assignments: &[Vec<NodeId>],
        validate_only: bool,
        patience: Option<Duration>,
    ) -> Result<(), Error> {
        self.change_within(patience, |b| {
            let brokers = b.usable_brokers();
            let data = b.store.lock().data.clone();
            let rec = topic_control::create_partitions(
                &data,
                name,
                total,
                Placement {
                    brokers: &brokers,
                    seed: uuid::Uuid::new_v4().as_u64_pair().0,
                },
                assignments,
            )?;
            if validate_only {
                return Ok((Vec::new(), ()));
            }
            let MetadataRecord::PartitionsAdded { id, name, .. } = &rec else {
                unreachable!("create_partitions answers PartitionsAdded")
            };
            // Two growths decided from the same count: only one applies.
            let count = data.topics.get(name).map_or(0, |t| t.partitions);
            let expect = Expectation::PartitionCount { id: *id, count };
            Ok((vec![MetadataRecord::Expect { expect }, rec], ()))
        })
    }

    pub(crate) fn cluster_update_topic_config(
        &self,
        name: &str,
        validate_only: bool,
        change: impl Fn(&TopicConfig) -> Result<TopicConfig, Error>,
    ) -> Result<(), Error> {
        self.change(|b| {
            let topic = b.configurable_topic(name)?;
            // Computed from the overrides it replaces, which must still be
            // those when it applies (a retry computes it again).
            let config = change(&topic.config)?;
            let data = b.store.lock().data.tenants.clone();
            tenancy::validate_topic_config(&data, &b.config(), &topic.name, &config)?;
            if validate_only {
                return Ok((Vec::new(), ()));
            }
            let expect = Expectation::TopicConfig {
                id: topic.id,
                config: topic.config.clone(),
            };
            Ok((
                vec![
                    MetadataRecord::Expect { expect },
                    MetadataRecord::TopicConfigSet {
                        id: topic.id,
                        name: topic.name.clone(),
                        config,
                    },
                ],
                (),
            ))
        })
    }

    /// Commits a layer of dynamic broker keys (`record`), decided from
    /// `previous` (refused if it changed meanwhile).
    pub(crate) fn cluster_set_broker_configs(
        &self,
        previous: Expectation,
        record: MetadataRecord,
    ) -> Result<(), Error> {
        let batch = vec![MetadataRecord::Expect { expect: previous }, record];
        match self.submit_and_apply(batch, None)? {
            Ok(()) => Ok(()),
            Err(conflict) => Err(Error::MetadataConflict(conflict)),
        }
    }

    /// Commits the tenants `change` makes of the current ones.
    pub(crate) fn cluster_change_tenants<T>(
        &self,
        mut change: impl FnMut(&mut tenancy::Tenants) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.change(|b| {
            let current = b.store.lock().data.tenants.clone();
            let mut next = current.clone();
            let out = change(&mut next)?;
            let expect = Expectation::Tenants { tenants: current };
            Ok((
                vec![
                    MetadataRecord::Expect { expect },
                    MetadataRecord::TenantsSet { tenants: next },
                ],
                out,
            ))
        })
    }

    /// Reserves the next block of producer ids for this broker: the limit
    /// rises by a block through the quorum, strictly, so two brokers never
    /// get the same block.
    pub(crate) fn cluster_reserve_producer_ids(&self) -> Result<(i64, i64), Error> {
        self.change(|b| {
            let current = b.store.lock().data.producer_id_limit;
            let limit = current + PRODUCER_ID_BLOCK;
            Ok((
                vec![MetadataRecord::ProducerIdsReserved { limit }],
                (current, limit),
            ))
        })
    }

    /// The controller quorum as its leader describes it (Kafka's
    /// DescribeQuorum). Blocking: asks the leader.
    pub fn describe_quorum(&self) -> Result<super::QuorumDescription, Error> {
        let link = self.cluster.link.clone();
        let timeout = link.change_timeout;
        let request = serde_json::to_vec(&super::ServiceRequest::DescribeQuorum)
            .map_err(|e| Error::ControllerUnavailable(e.to_string()))?;
        let l = link.clone();
        let answer = link.block_on(async move {
            tokio::time::timeout(timeout, l.call(request))
                .await
                .map_err(|_| Error::ControllerUnavailable("no controller answered".into()))?
                .map_err(super::link::unavailable)
        })??;
        match serde_json::from_slice(&answer) {
            Ok(super::ServiceResponse::Quorum(q)) => Ok(q),
            Ok(other) => Err(Error::ControllerUnavailable(format!(
                "the controller answered {other:?}"
            ))),
            Err(e) => Err(Error::ControllerUnavailable(format!(
                "unreadable controller answer: {e}"
            ))),
        }
    }

    /// Creates the replicated group log, `__consumer_offsets`, unless it
    /// exists (the first FindCoordinator of a cluster, as Kafka creates
    /// it): `offsets.topic.num.partitions` partitions of
    /// `offsets.topic.replication.factor` replicas each, or as many as
    /// there are usable brokers if fewer (logged, as Kafka does).
    pub(crate) fn ensure_group_log(&self) -> Result<(), Error> {
        use crate::group::store::{offsets_topic_record, OFFSETS_TOPIC};
        if self.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let config = self.config();
        let slots = config.int_value("offsets.topic.num.partitions").max(1) as i32;
        let wanted = config.int_value("offsets.topic.replication.factor").max(1) as usize;
        self.change(|b| {
            let exists = b
                .store
                .lock()
                .data
                .topics
                .keys()
                .any(|t| t.as_str() == OFFSETS_TOPIC);
            if exists {
                return Ok((Vec::new(), ()));
            }
            let brokers = b.usable_brokers();
            if brokers.is_empty() {
                return Err(Error::CoordinatorUnavailable(
                    "no unfenced broker to keep the group log".into(),
                ));
            }
            let rf = wanted.min(brokers.len());
            if rf < wanted {
                tracing::warn!(
                    wanted,
                    brokers = brokers.len(),
                    "creating {OFFSETS_TOPIC} with replication factor {rf}: \
                     offsets.topic.replication.factor is more than the live brokers"
                );
            }
            let seed = uuid::Uuid::new_v4().as_u64_pair().0;
            let mut rec = offsets_topic_record(brokers[0], TopicId::random());
            rec.partitions = slots;
            rec.placements = crate::placement::place(&brokers, 0, slots, rf, seed)
                .map_err(|e| Error::InvalidReplicationFactor(e.to_string()))?;
            Ok((vec![MetadataRecord::TopicCreated { topic: rec }], ()))
        })
    }

    /// Places the coordinator slots over the usable brokers if no one has
    /// yet (the first FindCoordinator of a cluster, as Kafka creates
    /// `__consumer_offsets` then); the slots.
    pub fn coordinator_slots(&self) -> Result<Vec<NodeId>, Error> {
        let c = &self.cluster;
        let placed = c.view.read().coordinators.clone();
        if !placed.is_empty() {
            return Ok(placed);
        }
        let slots = self
            .config()
            .int_value("offsets.topic.num.partitions")
            .max(1) as usize;
        let brokers = self.usable_brokers();
        if brokers.is_empty() {
            return Err(Error::CoordinatorUnavailable(
                "no unfenced broker to coordinate groups".into(),
            ));
        }
        let start = (uuid::Uuid::new_v4().as_u64_pair().0 % brokers.len() as u64) as usize;
        let nodes: Vec<NodeId> = (0..slots)
            .map(|i| brokers[(start + i) % brokers.len()])
            .collect();
        // Another broker may place them first: theirs stand.
        let _ = self.submit_and_apply(vec![MetadataRecord::CoordinatorsPlaced { nodes }], None)?;
        Ok(c.view.read().coordinators.clone())
    }
}

/// A producer id from this broker's reserved block.
pub(crate) fn next_cluster_producer_id(b: &Broker) -> Result<ProducerId, Error> {
    let mut ids = b.producer_ids.lock();
    if ids.next >= ids.limit {
        let (start, limit) = b.cluster_reserve_producer_ids()?;
        ids.next = start;
        ids.limit = limit;
    }
    let id = ids.next;
    ids.next += 1;
    Ok(ProducerId(id))
}
