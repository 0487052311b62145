//! DeleteTopics (key 20): by name, or from v6 by topic id.

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;
use model::TopicId;

use super::error::response_error;
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::{Broker, Error};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(1, 6);

/// Answers DeleteTopics; each topic needs Delete (TOPIC_AUTHORIZATION_FAILED,
/// whether it exists or not).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<WireTopicName>, TopicId)> = if version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name, TopicId(t.topic_id)))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n), TopicId::ZERO))
            .collect()
    };
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let result = match (&name, id.is_zero()) {
                (Some(_), false) => Err(Error::InvalidRequest(
                    "give a topic name or a topic id, not both".into(),
                )),
                (Some(n), true) => access
                    .require_topic(Operation::Delete, n.as_str())
                    .and_then(|()| super::find_topic(broker, n.as_str()))
                    .and_then(|t| {
                        broker.delete_topic(t.name.as_str())?;
                        Ok((t.name.clone(), t.id))
                    }),
                (None, false) => match broker.topic_by_id(id) {
                    Some(t) => access
                        .require_topic(Operation::Delete, t.name.as_str())
                        .and_then(|()| broker.delete_topic_by_id(id))
                        .map(|name| (name, id)),
                    None => broker.delete_topic_by_id(id).map(|name| (name, id)),
                },
                (None, true) => Err(Error::InvalidRequest(
                    "neither topic name nor topic id given".into(),
                )),
            };
            let out = DeletableTopicResult::default()
                .with_name(name.clone())
                .with_topic_id(id.0);
            match result {
                Ok((n, id)) => out
                    .with_name(Some(WireTopicName(StrBytes::from_string(n.to_string()))))
                    .with_topic_id(id.0),
                Err(e) => out
                    .with_error_code(response_error(&e).code())
                    .with_error_message(
                        (version >= 5).then(|| StrBytes::from_string(e.to_string())),
                    ),
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}
