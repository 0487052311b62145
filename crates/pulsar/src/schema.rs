//! Schemas producers and consumers declare: GetSchema, GetOrCreateSchema
//! and the schema field of CommandProducer/CommandSubscribe.
//!
//! Each topic keeps the list of distinct schemas declared for it; a schema's
//! version is its index, sent as 8 big-endian bytes as upstream does.
//! Compatibility between versions is not checked yet, and the registry
//! lives in memory: a restart forgets it (producers declare their schema
//! again when they reconnect).

use std::collections::HashMap;

use bytes::Bytes;
use magnetar_pulsar_wire::proto::Schema;
use model::TopicName;
use parking_lot::Mutex;

/// Declared schemas of every topic.
#[derive(Debug, Default)]
pub struct Schemas {
    by_topic: Mutex<HashMap<TopicName, Vec<Schema>>>,
}

impl Schemas {
    /// The version of `schema` for `topic`, added if new.
    pub fn get_or_create(&self, topic: &TopicName, schema: &Schema) -> Bytes {
        let mut map = self.by_topic.lock();
        let list = map.entry(topic.clone()).or_default();
        let index = match list.iter().position(|s| same(s, schema)) {
            Some(i) => i,
            None => {
                list.push(schema.clone());
                list.len() - 1
            }
        };
        Bytes::copy_from_slice(&(index as i64).to_be_bytes())
    }

    /// The schema of `topic` at `version` (the latest when `None`) and its
    /// version.
    pub fn get(&self, topic: &TopicName, version: Option<&[u8]>) -> Option<(Schema, Bytes)> {
        let map = self.by_topic.lock();
        let list = map.get(topic)?;
        let index = match version {
            Some(v) => {
                let bytes: [u8; 8] = v.try_into().ok()?;
                usize::try_from(i64::from_be_bytes(bytes)).ok()?
            }
            None => list.len().checked_sub(1)?,
        };
        let schema = list.get(index)?.clone();
        Some((
            schema,
            Bytes::copy_from_slice(&(index as i64).to_be_bytes()),
        ))
    }

    /// Forgets a deleted topic's schemas.
    pub fn forget(&self, topic: &TopicName) {
        self.by_topic.lock().remove(topic);
    }
}

fn same(a: &Schema, b: &Schema) -> bool {
    a.r#type == b.r#type && a.schema_data == b.schema_data && a.properties == b.properties
}
