//! CreatePartitions (key 37): grow a topic.

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::error::response_error;
use super::Versions;
use broker::{Broker, Error};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 3);

/// Answers CreatePartitions.
pub fn handle(broker: &Arc<Broker>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let node = broker.node_id();
    let results =
        req.topics
            .into_iter()
            .map(|t| {
                let bad_assignment =
                    t.assignments.iter().flatten().any(|a| {
                        a.broker_ids.is_empty() || a.broker_ids.iter().any(|b| b.0 != node)
                    });
                let result = if bad_assignment {
                    Err(Error::InvalidReplicationFactor(format!(
                        "replica assignments must be [{node}] on this single-node broker"
                    )))
                } else {
                    super::find_topic(broker, t.name.as_str()).and_then(|topic| {
                        broker.create_partitions(topic.name.as_str(), t.count, req.validate_only)
                    })
                };
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
