//! Manual replica assignments (CreateTopics, CreatePartitions,
//! AlterPartitionReassignments) checked as Kafka's controller checks them
//! (`ReplicationControlManager.validateManualPartitionAssignment`), against
//! the brokers registered in this cluster (a standalone node: itself).

use kafka_protocol::messages::BrokerId;

use broker::{Broker, Error};

/// Checks one partition's replica list: not empty, only registered brokers,
/// none twice, and `replication_factor` replicas if given (the topic's
/// existing partitions'). [`Error::InvalidReplicaAssignment`] with Kafka's
/// wording otherwise.
pub fn validate(
    broker: &Broker,
    replicas: &[BrokerId],
    replication_factor: Option<usize>,
) -> Result<(), Error> {
    if replicas.is_empty() {
        return Err(Error::InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let registered = broker.registered_brokers();
    let mut sorted: Vec<i32> = replicas.iter().map(|b| b.0).collect();
    sorted.sort_unstable();
    let mut previous = None;
    for id in sorted.iter().copied() {
        if !registered.contains(&id) {
            return Err(Error::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            )));
        }
        if previous == Some(id) {
            return Err(Error::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )));
        }
        previous = Some(id);
    }
    if let Some(rf) = replication_factor.filter(|rf| *rf != sorted.len()) {
        return Err(Error::InvalidReplicaAssignment(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
            sorted.len()
        )));
    }
    Ok(())
}
