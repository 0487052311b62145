//! Schemas declared for topics (Pulsar's schema registry), kept
//! protocol-neutral: each topic's distinct schemas in declaration order, a
//! schema's version being its index. Each version is a record of the group
//! log ([`RecordKey::Schema`], value [`StoredSchema::encode`]) written
//! before the version is handed out, replayed at start-up and tombstoned
//! when the topic is deleted.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::codec::{
    put_bytes, put_varint, take_bytes, take_string, take_u8, take_varint, unzigzag, zigzag,
};
use crate::error::CoordError;
use crate::group::store::{GroupLog, RecordKey};

const RECORD_VERSION: u8 = 1;

/// One declared schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchema {
    /// The name it was declared with.
    pub name: String,
    /// The front end's type code (Pulsar's `Schema.Type`).
    pub schema_type: i32,
    /// The schema definition.
    pub data: Bytes,
    /// Its properties, in declaration order.
    pub properties: Vec<(String, String)>,
}

impl StoredSchema {
    /// Whether two declarations are the same schema (the name aside).
    pub fn same_as(&self, other: &StoredSchema) -> bool {
        self.schema_type == other.schema_type
            && self.data == other.data
            && self.properties == other.properties
    }

    /// The record's bytes: version (1), type (zigzag varint), name, data,
    /// property count (varint) and each property's key and value, every
    /// string or byte field as a length varint and the bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.name.len() + self.data.len());
        out.push(RECORD_VERSION);
        put_varint(&mut out, zigzag(i64::from(self.schema_type)));
        put_bytes(&mut out, self.name.as_bytes());
        put_bytes(&mut out, &self.data);
        put_varint(&mut out, self.properties.len() as u64);
        for (k, v) in &self.properties {
            put_bytes(&mut out, k.as_bytes());
            put_bytes(&mut out, v.as_bytes());
        }
        out
    }

    /// Parses [`StoredSchema::encode`]'s bytes; `None` if they are not a
    /// valid record.
    pub fn decode(mut buf: &[u8]) -> Option<StoredSchema> {
        let b = &mut buf;
        if take_u8(b)? != RECORD_VERSION {
            return None;
        }
        let schema_type = i32::try_from(unzigzag(take_varint(b)?)).ok()?;
        let name = take_string(b)?;
        let data = Bytes::copy_from_slice(take_bytes(b)?);
        let n = take_varint(b)?;
        let mut properties = Vec::new();
        for _ in 0..n {
            properties.push((take_string(b)?, take_string(b)?));
        }
        b.is_empty().then_some(StoredSchema {
            name,
            schema_type,
            data,
            properties,
        })
    }
}

/// The schemas of every topic.
#[derive(Debug)]
pub struct Schemas {
    /// Topic → version → schema.
    by_topic: Mutex<HashMap<String, BTreeMap<u64, StoredSchema>>>,
    log: GroupLog,
}

impl Schemas {
    /// The schemas stored in these group-log records (in log order; the
    /// last record of a version wins, a tombstone deletes).
    pub fn restore(
        log: GroupLog,
        records: impl IntoIterator<Item = (String, u64, Option<Bytes>)>,
    ) -> Schemas {
        let mut by_topic: HashMap<String, BTreeMap<u64, StoredSchema>> = HashMap::new();
        for (topic, version, value) in records {
            match value.as_deref().map(StoredSchema::decode) {
                Some(Some(s)) => {
                    by_topic.entry(topic).or_default().insert(version, s);
                }
                Some(None) => {
                    tracing::warn!(%topic, version, "skipping unreadable schema record");
                }
                None => {
                    if let Some(versions) = by_topic.get_mut(&topic) {
                        versions.remove(&version);
                        if versions.is_empty() {
                            by_topic.remove(&topic);
                        }
                    }
                }
            }
        }
        Schemas {
            by_topic: Mutex::new(by_topic),
            log,
        }
    }

    /// The version of `schema` for `topic`; a new schema gets the next
    /// version, in the group log before this returns.
    pub fn get_or_create(&self, topic: &str, schema: &StoredSchema) -> Result<u64, CoordError> {
        let mut map = self.by_topic.lock();
        let versions = map.get(topic);
        if let Some((v, _)) = versions
            .into_iter()
            .flatten()
            .find(|(_, s)| s.same_as(schema))
        {
            return Ok(*v);
        }
        let version = versions
            .and_then(|v| v.last_key_value())
            .map_or(0, |(v, _)| v + 1);
        self.log
            .append(&[(record_key(topic, version), Some(schema.encode()))])?;
        map.entry(topic.to_string())
            .or_default()
            .insert(version, schema.clone());
        Ok(version)
    }

    /// The schema of `topic` at `version` (the latest when `None`), with
    /// its version.
    pub fn get(&self, topic: &str, version: Option<u64>) -> Option<(StoredSchema, u64)> {
        let map = self.by_topic.lock();
        let versions = map.get(topic)?;
        let (v, s) = match version {
            Some(v) => (v, versions.get(&v)?),
            None => versions.last_key_value().map(|(v, s)| (*v, s))?,
        };
        Some((s.clone(), v))
    }

    /// Drops a deleted topic's schemas (their tombstones are in the group
    /// log before this returns).
    pub fn forget_topic(&self, topic: &str) -> Result<(), CoordError> {
        let mut map = self.by_topic.lock();
        let Some(versions) = map.get(topic) else {
            return Ok(());
        };
        let tombstones: Vec<(RecordKey, Option<Vec<u8>>)> = versions
            .keys()
            .map(|v| (record_key(topic, *v), None))
            .collect();
        self.log.append(&tombstones)?;
        map.remove(topic);
        Ok(())
    }

    /// Runs `f` with every schema record (live records a group-log
    /// compaction must keep), holding off new schemas meanwhile.
    pub(crate) fn with_persisted<T>(
        &self,
        f: impl FnOnce(Vec<(RecordKey, Option<Vec<u8>>)>) -> T,
    ) -> T {
        let map = self.by_topic.lock();
        f(map
            .iter()
            .flat_map(|(t, versions)| {
                versions
                    .iter()
                    .map(move |(v, s)| (record_key(t, *v), Some(s.encode())))
            })
            .collect())
    }
}

fn record_key(topic: &str, version: u64) -> RecordKey {
    RecordKey::Schema {
        topic: topic.to_string(),
        version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(data: &str) -> StoredSchema {
        StoredSchema {
            name: "orders".into(),
            schema_type: 2,
            data: Bytes::copy_from_slice(data.as_bytes()),
            properties: vec![("k".into(), "v".into()), ("a".into(), "".into())],
        }
    }

    #[test]
    fn record_round_trips_and_rejects_garbage() {
        let mut s = schema("{\"type\":\"record\"}");
        s.schema_type = -1;
        let bytes = s.encode();
        assert_eq!(StoredSchema::decode(&bytes), Some(s));
        assert_eq!(StoredSchema::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(
            StoredSchema::decode(&[bytes.as_slice(), &[0]].concat()),
            None
        );
        assert_eq!(StoredSchema::decode(&[7]), None);
        assert_eq!(StoredSchema::decode(&[]), None);
    }
}
