//! The metadata as the controller quorum replicates it: a
//! [`MetadataMachine`] is the [`controller::StateMachine`] whose log entries
//! are [`MetadataBatch`]es, each applied all or nothing by the pure
//! [`apply_all`], on every node of a cluster and on a standalone node (a
//! quorum of one) alike.
//!
//! A batch is one decision of the controller (a topic created with all its
//! partitions, a deletion, a config change): it commits whole or not at all,
//! and a batch that conflicts with the state (a topic created twice because
//! two controllers validated against stale states) is answered with the
//! conflict and changes nothing on any node.

use std::fmt;

use controller::StateMachine;
use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::image::Metadata;
use crate::records::{apply_all, MetadataRecord};

/// The records of one controller decision, one Raft log entry.
///
/// Stored as JSON inside the controller's binary log: the records are
/// self-describing (tagged by type, fields by name) so records written by
/// an older version still decode after fields are added, which a
/// positional binary encoding would not allow.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataBatch(pub Vec<MetadataRecord>);

impl Serialize for MetadataBatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let json = serde_json::to_vec(&self.0).map_err(serde::ser::Error::custom)?;
        s.serialize_bytes(&json)
    }
}

impl<'de> Deserialize<'de> for MetadataBatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Json;
        impl<'de> de::Visitor<'de> for Json {
            type Value = MetadataBatch;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("metadata records as JSON bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<MetadataBatch, E> {
                serde_json::from_slice(v)
                    .map(MetadataBatch)
                    .map_err(E::custom)
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<MetadataBatch, E> {
                self.visit_bytes(&v)
            }
            // Self-describing formats may hand bytes over as a sequence.
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<MetadataBatch, A::Error> {
                let mut v = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    v.push(b);
                }
                self.visit_bytes(&v)
            }
        }
        d.deserialize_bytes(Json)
    }
}

/// The replicated metadata: the state every controller node (and, through
/// the committed log, every broker) holds, and the index of the last batch
/// applied to it.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataMachine {
    /// The metadata after every applied batch.
    pub metadata: Metadata,
    /// The log index of the last applied batch (0: none).
    pub applied: u64,
}

impl Default for MetadataMachine {
    fn default() -> Self {
        MetadataMachine::new()
    }
}

impl MetadataMachine {
    /// The state before the first record: no cluster id (the first batch
    /// of a new quorum sets it with `ClusterInitialized`), only the
    /// `public/default` namespace.
    pub fn new() -> MetadataMachine {
        MetadataMachine {
            metadata: Metadata::new(String::new()),
            applied: 0,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    applied: u64,
    metadata: Metadata,
}

impl StateMachine for MetadataMachine {
    type Record = MetadataBatch;
    /// `Err` names the conflict of a refused batch, which changed nothing.
    type Response = Result<(), String>;

    fn apply(&mut self, index: u64, batch: &MetadataBatch) -> Result<(), String> {
        self.applied = index;
        let next = apply_all(&self.metadata, &batch.0).map_err(|e| e.to_string())?;
        self.metadata = next;
        Ok(())
    }

    fn snapshot(&self) -> Vec<u8> {
        let snap = Snapshot {
            applied: self.applied,
            metadata: self.metadata.clone(),
        };
        // Plain data with string keys always serializes; an empty snapshot
        // would let the log be purged, so never hand one out.
        serde_json::to_vec(&snap).expect("metadata serializes")
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        let snap: Snapshot = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        self.applied = snap.applied;
        self.metadata = snap.metadata;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use model::{TopicId, TopicName};

    use super::*;
    use crate::image::TopicRecord;
    use crate::records::PartitionState;
    use magnetar_config::{TopicConfig, TopicKind};

    fn created(name: &str, partitions: i32) -> MetadataRecord {
        MetadataRecord::TopicCreated {
            topic: TopicRecord {
                name: TopicName::new(name).unwrap(),
                id: TopicId::random(),
                kind: TopicKind::Partitioned,
                partitions,
                config: TopicConfig::default(),
                placements: (0..partitions)
                    .map(|p| PartitionState::single(1 + p % 3))
                    .collect(),
            },
        }
    }

    #[test]
    fn batches_survive_the_binary_log_codec() {
        let batch = MetadataBatch(vec![
            MetadataRecord::ClusterInitialized {
                cluster_id: "c1".into(),
            },
            created("orders", 3),
            MetadataRecord::ProducerIdsReserved { limit: 1000 },
        ]);
        let bytes = postcard::to_stdvec(&batch).unwrap();
        assert_eq!(
            postcard::from_bytes::<MetadataBatch>(&bytes).unwrap(),
            batch
        );
        let json = serde_json::to_vec(&batch).unwrap();
        assert_eq!(
            serde_json::from_slice::<MetadataBatch>(&json).unwrap(),
            batch
        );
        assert!(postcard::from_bytes::<MetadataBatch>(&[3, b'{', b'x', b'}']).is_err());
    }

    #[test]
    fn an_imported_metadata_file_survives_the_log_codec_and_applies_once() {
        let mut file = Metadata::new("old-cluster".into());
        file.node_configs
            .entry(1)
            .or_default()
            .insert("log.cleaner.backoff.ms".into(), "20000".into());
        file.producer_id_limit = 3000;
        let MetadataRecord::TopicCreated { topic } = created("orders", 3) else {
            unreachable!()
        };
        file.topics.insert(topic.name.clone(), topic);
        let batch = MetadataBatch(vec![MetadataRecord::Imported {
            metadata: Box::new(file.clone()),
        }]);
        let bytes = postcard::to_stdvec(&batch).unwrap();
        let back = postcard::from_bytes::<MetadataBatch>(&bytes).unwrap();
        assert_eq!(back, batch, "integer map keys and all");

        let mut m = MetadataMachine::new();
        assert_eq!(m.apply(1, &back), Ok(()));
        assert_eq!(m.metadata, file);
        // Never over a cluster that has its metadata.
        let e = m.apply(2, &back).unwrap_err();
        assert!(e.contains("has its metadata already"), "{e}");
        assert_eq!(m.metadata, file);
        let mut fresh = MetadataMachine::new();
        let init = MetadataBatch(vec![MetadataRecord::ClusterInitialized {
            cluster_id: "new".into(),
        }]);
        fresh.apply(1, &init).unwrap();
        assert!(fresh.apply(2, &back).is_err());
    }

    #[test]
    fn a_conflicting_batch_changes_nothing_and_snapshots_restore_the_state() {
        let mut m = MetadataMachine::new();
        let init = MetadataRecord::ClusterInitialized {
            cluster_id: "c1".into(),
        };
        assert_eq!(
            m.apply(1, &MetadataBatch(vec![init, created("a", 2)])),
            Ok(())
        );
        let before = m.metadata.clone();
        // Valid first record, conflicting second: the whole batch is refused.
        let e = m
            .apply(
                2,
                &MetadataBatch(vec![
                    MetadataRecord::ProducerIdsReserved { limit: 5000 },
                    created("a", 1),
                ]),
            )
            .unwrap_err();
        assert!(e.contains("exists"), "{e}");
        assert_eq!(m.metadata, before);
        assert_eq!(m.applied, 2);

        let snap = m.snapshot();
        let mut other = MetadataMachine::new();
        other.restore(&snap).unwrap();
        assert_eq!(other, m);
        // A bad snapshot leaves the state alone.
        assert!(other.restore(b"{").is_err());
        assert_eq!(other, m);
    }
}
