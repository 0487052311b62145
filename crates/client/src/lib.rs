//! A native async client for Kafka-compatible brokers (Magnetar, Apache
//! Kafka, Redpanda, …), built on the `kafka-protocol` crate.
//!
//! - [`Client`]: bootstrap, one pipelined [`Connection`] per broker with
//!   ApiVersions negotiation and reconnect backoff, and a metadata cache.
//! - [`Producer`]: batching, compression, idempotence, ordered retries and a
//!   future per record.
//! - [`Consumer`]: classic consumer groups (interoperating with Java and
//!   librdkafka members; `range` and `roundrobin` assignors), pattern
//!   subscriptions that discover new topics, manual assignment, commits,
//!   and checkpoints for stream processors.
//! - [`Reader`]: Pulsar's Reader API (no group, no committed state) that
//!   resumes exactly after the last message it returned.
//! - [`Admin`]: topics, configs, partitions, records, groups, coordinators,
//!   SCRAM credentials.
//! - [`SecurityConfig`]: TLS (PEM CA, client certificates, hostname
//!   verification) and SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 with
//!   KIP-368 re-authentication, for every connection a [`Client`] opens.
//!
//! ```no_run
//! # async fn f() -> magnetar_client::Result<()> {
//! use magnetar_client::{Admin, ClientConfig, NewTopic, Producer, ProducerRecord};
//! let admin = Admin::connect(ClientConfig::new(["127.0.0.1:9092"])).await?;
//! admin.create_topics(&[NewTopic::new("events", 3)], false).await?;
//! let producer = Producer::builder().client(admin.client().clone()).build().await?;
//! let md = producer.send(ProducerRecord::new("events").key("k").value("v")).await?;
//! println!("{}@{}", md.partition, md.offset);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod admin;
mod client;
mod conn;
mod consumer;
mod error;
mod fetcher;
mod lookup;
mod message;
mod metadata;
mod producer;
mod reader;
mod security;
mod versions;

#[cfg(test)]
mod testing;

pub use crate::admin::*;
pub use crate::client::{Client, ClientConfig, Lane};
pub use crate::conn::Connection;
pub use crate::consumer::{
    Assignor, AutoOffsetReset, Consumer, ConsumerBuilder, Offsets, RebalanceListener,
};
pub use crate::error::{BrokerError, Error, Result};
pub use crate::message::{Headers, Message, MessageId, TopicPartition};
pub use crate::metadata::{
    ClusterMetadata, Node, NodeId, PartitionMetadata, TopicId, TopicMetadata,
};
pub use crate::producer::partitioner::{murmur2, partition_for_key};
pub use crate::producer::{
    Acks, Compression, DeliveryFuture, Producer, ProducerBuilder, ProducerRecord, RecordMetadata,
};
pub use crate::reader::{Reader, ReaderBuilder, StartPosition};
pub use crate::security::{SaslMechanism, SecurityConfig, SecurityProtocol};
pub use crate::versions::{client_range, ApiVersions};
pub use kafka_protocol::ResponseError;
