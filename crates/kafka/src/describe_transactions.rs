//! DescribeTransactions (key 65): each transactional id's state, producer,
//! timeout, start time and partitions (`kafka-transactions describe`).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::error::response_error;
use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Answers DescribeTransactions.
///
/// Each transactional id needs Describe
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the
/// principal may not Describe are left out, as Kafka does.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let ids: Vec<String> = req
        .transactional_ids
        .iter()
        .map(|t| t.to_string())
        .collect();
    let found = broker.describe_transactions(&ids);
    let states = req
        .transactional_ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let s = TransactionState::default().with_transactional_id(id.clone());
            if !access.transactional_id(broker::security::acl::Operation::Describe, id.as_str()) {
                return s.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            match &found {
                Err(e) => s.with_error_code(response_error(e).code()),
                // In a cluster each id is its coordinator's to describe.
                Ok(_) if !broker.coordinates(id.as_str()) => {
                    s.with_error_code(ResponseError::NotCoordinator.code())
                }
                Ok(list) => match &list[i] {
                    None => s.with_error_code(ResponseError::TransactionalIdNotFound.code()),
                    Some(m) => {
                        let mut topics: Vec<TopicData> = Vec::new();
                        for (t, p) in m.partitions.iter().filter(|(t, _)| {
                            access.topic(broker::security::acl::Operation::Describe, t)
                        }) {
                            match topics.last_mut() {
                                Some(d) if d.topic.as_str() == t => d.partitions.push(*p),
                                _ => topics.push(
                                    TopicData::default()
                                        .with_topic(TopicName(StrBytes::from_string(t.clone())))
                                        .with_partitions(vec![*p]),
                                ),
                            }
                        }
                        s.with_transaction_state(StrBytes::from_static_str(m.state.name()))
                            .with_transaction_timeout_ms(m.timeout_ms)
                            .with_transaction_start_time_ms(m.start_ms)
                            .with_producer_id(ProducerId(m.producer_id))
                            .with_producer_epoch(m.producer_epoch)
                            .with_topics(topics)
                    }
                },
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
