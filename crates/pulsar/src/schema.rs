//! Schemas producers and consumers declare: GetSchema, GetOrCreateSchema
//! and the schema field of CommandProducer/CommandSubscribe.
//!
//! The registry is the broker's (`broker::schema`): each topic keeps the
//! list of distinct schemas declared for it, durably in the group log (a
//! schema is stored before its version is answered, survives restarts and
//! SIGKILL, and goes with its topic when the topic is deleted). A schema's
//! version is its index, sent as 8 big-endian bytes as upstream does.
//! Compatibility between versions is not checked yet.

use broker::schema::StoredSchema;
use broker::Broker;
use bytes::Bytes;
use magnetar_pulsar_wire::proto::{KeyValue, Schema};
use model::TopicName;

use crate::error::PulsarError;

/// The version of `schema` for `topic`, added (durably) if new. Writes the
/// group log for a new schema: call off the async workers.
pub fn get_or_create(
    broker: &Broker,
    topic: &TopicName,
    schema: &Schema,
) -> Result<Bytes, PulsarError> {
    let version = broker
        .schemas()
        .get_or_create(topic.as_str(), &stored(schema))?;
    Ok(version_bytes(version))
}

/// The schema of `topic` at `version` (the latest when `None`) and its
/// version.
pub fn get(broker: &Broker, topic: &TopicName, version: Option<&[u8]>) -> Option<(Schema, Bytes)> {
    let version = match version {
        Some(v) => Some(u64::try_from(i64::from_be_bytes(v.try_into().ok()?)).ok()?),
        None => None,
    };
    let (s, v) = broker.schemas().get(topic.as_str(), version)?;
    let schema = Schema {
        name: s.name,
        schema_data: s.data,
        r#type: s.schema_type,
        properties: s
            .properties
            .into_iter()
            .map(|(key, value)| KeyValue { key, value })
            .collect(),
    };
    Some((schema, version_bytes(v)))
}

fn stored(s: &Schema) -> StoredSchema {
    StoredSchema {
        name: s.name.clone(),
        schema_type: s.r#type,
        data: s.schema_data.clone(),
        properties: s
            .properties
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect(),
    }
}

fn version_bytes(version: u64) -> Bytes {
    Bytes::copy_from_slice(&(version as i64).to_be_bytes())
}
