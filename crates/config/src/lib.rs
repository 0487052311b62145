//! Broker and topic configuration.
//!
//! Keys follow Kafka's broker property names wherever one exists, so that
//! people and scripts that know Kafka know Magnetar. Every key is declared
//! once in [`BROKER_KEYS`] (with [`ACCEPTED_BROKER_KEYS`]) / [`TOPIC_KEYS`], which drive parsing, validation,
//! DescribeConfigs answers and the README's reference table.

mod accepted_keys;
mod authorizer;
mod broker;
mod broker_keys;
mod error;
mod key_spec;
mod keys;
pub mod listeners;
pub mod principal_mapping;
mod security;
mod topic;
mod topic_keys;

pub use authorizer::{AuthorizerConfig, AUTHORIZER_CLASSES};
pub use broker::{
    BrokerConfig, ConfigSource, DEFAULT_DATA_DIR, DEFAULT_HTTP_ADDR, DEFAULT_KAFKA_ADDR,
    DEFAULT_PULSAR_ADDR, KEY_ALIASES,
};
pub use key_spec::{ConfigKey, KafkaType, ValueKind};
pub use keys::{broker_key, broker_keys, ACCEPTED_BROKER_KEYS, BROKER_KEYS, TOPIC_KEYS};
pub use security::{
    file_path, ClientAuth, HttpAuthMethod, PulsarAuthProvider, TlsSettings, TokenSettings,
};
pub use topic::{EffectiveValue, TopicConfig, TopicKind};

pub use error::ConfigError;
