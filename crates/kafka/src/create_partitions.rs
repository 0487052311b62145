//! CreatePartitions (key 37): grow a topic, with or without manual replica
//! assignments (checked as Kafka's controller checks them).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::error::response_error;
use super::{replica_assignment, Versions};
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::{Broker, Error};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 3);

/// Answers CreatePartitions; each topic needs Alter.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    // The request's timeout covers all its topics.
    let deadline = Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let result = access
                .require_topic(Operation::Alter, t.name.as_str())
                .and_then(|()| grow(broker, &t, req.validate_only, deadline));
            let out = CreatePartitionsTopicResult::default().with_name(t.name);
            match result {
                Ok(()) => out,
                Err(e) => out
                    .with_error_code(response_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

/// Kafka's order of checks: the topic, the new count, then the assignments
/// (one per new partition, each valid with the topic's replication factor).
fn grow(
    broker: &Arc<Broker>,
    t: &CreatePartitionsTopic,
    validate_only: bool,
    deadline: Instant,
) -> Result<(), Error> {
    let topic = super::find_topic(broker, t.name.as_str())?;
    let current = topic.partition_count() as i32;
    if let Some(assignments) = t.assignments.as_ref().filter(|_| t.count > current) {
        let additional = (t.count - current) as usize;
        if assignments.len() != additional {
            return Err(Error::InvalidReplicaAssignment(format!(
                "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                assignments.len()
            )));
        }
        // As many replicas as the topic's partitions have.
        let rf = topic.placements.first().map(|s| s.replicas.len());
        for a in assignments {
            replica_assignment::validate(broker, &a.broker_ids, rf)?;
        }
    }
    let assignments: Vec<Vec<i32>> = t
        .assignments
        .iter()
        .flatten()
        .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
        .collect();
    let assignments = if t.count > current {
        assignments
    } else {
        Vec::new()
    };
    broker.create_partitions_within(
        topic.name.as_str(),
        t.count,
        &assignments,
        validate_only,
        deadline.saturating_duration_since(Instant::now()),
    )
}
