//! The "consumer" embedded protocol of classic groups: what members put in
//! JoinGroup's protocol metadata (ConsumerProtocolSubscription) and what
//! the leader hands out through SyncGroup (ConsumerProtocolAssignment).
//! Both are a 2-byte version followed by the struct, exactly as Java and
//! librdkafka members write them, so mixed groups work.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::error::{Error, Result};
use crate::message::TopicPartition;

/// JoinGroup's protocol type for consumers.
pub(crate) const PROTOCOL_TYPE: &str = "consumer";

/// The newest version of either struct this client writes and reads.
const HIGHEST: i16 = 3;

/// One member's subscription as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Subscription {
    /// The version the member wrote (assignments go back at most in it).
    pub version: i16,
    /// Subscribed topic names (a pattern subscription sends what it matched).
    pub topics: Vec<String>,
    /// Partitions the member owned before this rebalance (v1+).
    pub owned: Vec<TopicPartition>,
    /// The generation it owned them in (v2+), -1 if none.
    pub generation: i32,
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Groups partitions by topic, sorted, for the wire.
fn by_topic(parts: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut m: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in parts {
        m.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

fn versioned(version: i16, body: &impl Encodable) -> Result<Bytes> {
    let size = body
        .compute_size(version)
        .map_err(|e| Error::protocol("sizing consumer protocol", e))?;
    let mut buf = BytesMut::with_capacity(2 + size);
    buf.put_i16(version);
    body.encode(&mut buf, version)
        .map_err(|e| Error::protocol("encoding consumer protocol", e))?;
    Ok(buf.freeze())
}

/// The version prefix, and the version to decode the rest with: a newer
/// member's struct is read as our newest (later versions only append).
fn split_version(data: &mut Bytes, what: &str) -> Result<i16> {
    if data.remaining() < 2 {
        return Err(Error::Protocol(format!("{what}: missing version")));
    }
    let v = data.get_i16();
    if v < 0 {
        return Err(Error::Protocol(format!("{what}: version {v}")));
    }
    Ok(v)
}

/// Our JoinGroup metadata: `topics` (sorted), the partitions we owned and
/// the generation we owned them in.
pub(crate) fn encode_subscription(
    topics: &[String],
    owned: &[TopicPartition],
    generation: i32,
) -> Result<Bytes> {
    let mut names: Vec<&String> = topics.iter().collect();
    names.sort();
    names.dedup();
    let s = ConsumerProtocolSubscription::default()
        .with_topics(
            names
                .into_iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_user_data(Some(Bytes::new()))
        .with_owned_partitions(
            by_topic(owned)
                .into_iter()
                .map(|(t, ps)| {
                    OwnedTopic::default()
                        .with_topic(topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_generation_id(generation);
    versioned(HIGHEST, &s)
}

/// A member's JoinGroup metadata.
pub(crate) fn decode_subscription(data: &Bytes) -> Result<Subscription> {
    let mut data = data.clone();
    let version = split_version(&mut data, "subscription")?;
    let s = ConsumerProtocolSubscription::decode(&mut data, version.min(HIGHEST))
        .map_err(|e| Error::protocol("decoding a member's subscription", e))?;
    Ok(Subscription {
        version,
        topics: s.topics.iter().map(|t| t.to_string()).collect(),
        owned: s
            .owned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.topic.as_str(), *p))
            })
            .collect(),
        generation: if version >= 2 { s.generation_id } else { -1 },
    })
}

/// A SyncGroup assignment, written at `version` (the member's
/// subscription version, capped at ours).
pub(crate) fn encode_assignment(parts: &[TopicPartition], version: i16) -> Result<Bytes> {
    let a = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            by_topic(parts)
                .into_iter()
                .map(|(t, ps)| {
                    AssignedTopic::default()
                        .with_topic(topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_user_data(Some(Bytes::new()));
    versioned(version.clamp(0, HIGHEST), &a)
}

/// Our assignment from SyncGroup; empty bytes mean no partitions.
pub(crate) fn decode_assignment(data: &Bytes) -> Result<Vec<TopicPartition>> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let mut data = data.clone();
    let version = split_version(&mut data, "assignment")?;
    let a = ConsumerProtocolAssignment::decode(&mut data, version.min(HIGHEST))
        .map_err(|e| Error::protocol("decoding the assignment", e))?;
    let mut out: Vec<TopicPartition> = a
        .assigned_partitions
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.topic.as_str(), *p))
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    #[test]
    fn subscription_round_trips() {
        let topics = vec!["b".to_string(), "a".to_string(), "b".to_string()];
        let owned = vec![tp("b", 1), tp("a", 0), tp("b", 0)];
        let bytes = encode_subscription(&topics, &owned, 7).unwrap();
        assert_eq!(&bytes[..2], &[0, 3]);
        let s = decode_subscription(&bytes).unwrap();
        assert_eq!(s.version, 3);
        assert_eq!(s.topics, ["a", "b"]);
        assert_eq!(s.owned, [tp("a", 0), tp("b", 0), tp("b", 1)]);
        assert_eq!(s.generation, 7);
    }

    /// The exact bytes librdkafka 2.12 writes for a subscription to "t"
    /// (version 3, empty user data, no owned partitions, generation -1,
    /// null rack), from `rd_kafka_consumer_protocol_member_metadata_new`.
    #[test]
    fn decodes_librdkafka_subscription() {
        let mut b = BytesMut::new();
        b.put_i16(3);
        b.put_i32(1);
        b.put_i16(1);
        b.put_slice(b"t");
        b.put_i32(0); // user data: empty
        b.put_i32(0); // owned partitions: none
        b.put_i32(-1); // generation
        b.put_i16(-1); // rack: null
        let s = decode_subscription(&b.freeze()).unwrap();
        assert_eq!(s.topics, ["t"]);
        assert!(s.owned.is_empty());
        assert_eq!(s.generation, -1);
    }

    /// A v0 subscription (old Java clients) and one from a newer version
    /// with fields we do not know appended.
    #[test]
    fn decodes_older_and_newer_versions() {
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(2);
        b.put_i16(1);
        b.put_slice(b"x");
        b.put_i16(1);
        b.put_slice(b"y");
        b.put_i32(-1); // null user data
        let s = decode_subscription(&b.freeze()).unwrap();
        assert_eq!((s.version, s.topics.len(), s.generation), (0, 2, -1));

        let mut newer = BytesMut::from(&encode_subscription(&["z".into()], &[], 3).unwrap()[..]);
        newer[1] = 9;
        newer.put_slice(b"future fields");
        let s = decode_subscription(&newer.freeze()).unwrap();
        assert_eq!(
            (s.version, s.topics.as_slice()),
            (9, &["z".to_string()][..])
        );
    }

    #[test]
    fn assignment_round_trips_at_each_version() {
        let parts = vec![tp("b", 2), tp("a", 1), tp("b", 0)];
        for v in 0..=5 {
            let bytes = encode_assignment(&parts, v).unwrap();
            assert_eq!(bytes[1] as i16, v.min(3));
            assert_eq!(
                decode_assignment(&bytes).unwrap(),
                [tp("a", 1), tp("b", 0), tp("b", 2)]
            );
        }
        assert!(decode_assignment(&Bytes::new()).unwrap().is_empty());
        assert!(decode_assignment(&Bytes::from_static(&[0])).is_err());
    }

    /// librdkafka's SyncGroup assignment bytes (version 0, one topic).
    #[test]
    fn decodes_a_v0_assignment() {
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(1);
        b.put_i16(3);
        b.put_slice(b"six");
        b.put_i32(2);
        b.put_i32(4);
        b.put_i32(1);
        b.put_i32(-1); // null user data
        assert_eq!(
            decode_assignment(&b.freeze()).unwrap(),
            [tp("six", 1), tp("six", 4)]
        );
    }
}
