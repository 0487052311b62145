//! Topic paths of the admin REST API (`/admin/v2/persistent/{tenant}/
//! {namespace}/{topic}/...`) resolved to the broker's topic and the
//! partitions they address.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use broker::config::TopicKind;
use broker::{Broker, Topic};
use model::pulsar_name::PulsarTopic;
use serde::Deserialize;

use crate::error::ApiError;

/// `{tenant}/{namespace}/{topic}` of a persistent topic path.
#[derive(Debug, Clone, Deserialize)]
pub struct TopicParts {
    tenant: String,
    namespace: String,
    topic: String,
}

impl TopicParts {
    /// The path's parts, or 400 for an unparsable path.
    pub fn from_path(path: Result<Path<TopicParts>, PathRejection>) -> Result<Self, ApiError> {
        path.map(|Path(p)| p)
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }

    /// `persistent://tenant/namespace/topic`.
    pub fn full_name(&self) -> String {
        format!(
            "persistent://{}/{}/{}",
            self.tenant, self.namespace, self.topic
        )
    }
}

/// A topic path resolved against the broker.
#[derive(Debug, Clone)]
pub struct Addressed {
    /// The topic the path names, partition suffix removed.
    pub base: PulsarTopic,
    /// The broker topic.
    pub topic: Arc<Topic>,
    /// The partition the path names (`-partition-N`), if it names one.
    pub partition: Option<u32>,
}

impl Addressed {
    /// Resolves a path; 412 for a bad name, 404 for a missing topic or
    /// partition.
    pub fn resolve(broker: &Broker, parts: &TopicParts) -> Result<Addressed, ApiError> {
        let parsed = magnetar_pulsar_core::topics::parse(broker, &parts.full_name())?;
        let topic = broker
            .topic(parsed.kafka_name().as_str())
            .ok_or_else(|| ApiError::not_found("Topic not found"))?;
        if let Some(n) = parsed.partition {
            if topic.kind == TopicKind::NonPartitioned || n as usize >= topic.partition_count() {
                return Err(ApiError::not_found("Topic not found"));
            }
        }
        Ok(Addressed {
            base: parsed.base(),
            partition: parsed.partition,
            topic,
        })
    }

    /// Whether the path names a partitioned topic itself (not one of its
    /// partitions).
    pub fn is_partitioned_base(&self) -> bool {
        self.partition.is_none() && self.topic.kind == TopicKind::Partitioned
    }

    /// The partition indexes the path covers: the one it names, every
    /// partition of a partitioned topic, or 0 of a non-partitioned one.
    pub fn partitions(&self) -> Vec<u32> {
        match self.partition {
            Some(n) => vec![n],
            None => (0..self.topic.partition_count() as u32).collect(),
        }
    }

    /// The Pulsar name of partition `n` (the base name for a
    /// non-partitioned topic).
    pub fn partition_name(&self, n: u32) -> String {
        match self.topic.kind {
            TopicKind::Partitioned => self.base.partition(n).to_string(),
            TopicKind::NonPartitioned => self.base.to_string(),
        }
    }

    /// The partition index message ids carry (−1 for a non-partitioned
    /// topic).
    pub fn id_partition(&self, n: u32) -> i32 {
        match self.topic.kind {
            TopicKind::Partitioned => n as i32,
            TopicKind::NonPartitioned => -1,
        }
    }
}
