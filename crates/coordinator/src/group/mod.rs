//! Consumer groups: the classic protocol's state machine, the consumer
//! (KIP-848) protocol, committed offsets and their durable log, and the
//! coordinator that ties them together.

pub mod classic;
pub mod consumer;
pub mod coordinator;
pub mod front_end;
pub mod log;
mod slots;
pub mod store;
pub mod views;

use magnetar_config::BrokerConfig;

/// The coordinator's settings from broker configuration.
pub fn coordinator_config(c: &BrokerConfig) -> coordinator::CoordinatorConfig {
    let assignors = c
        .get("group.consumer.assignors")
        .map(|(v, _)| v.split(',').filter_map(consumer::Assignor::parse).collect())
        .unwrap_or_else(|| vec![consumer::Assignor::Uniform, consumer::Assignor::Range]);
    coordinator::CoordinatorConfig {
        classic: classic::ClassicConfig {
            min_session_timeout_ms: c.int_value("group.min.session.timeout.ms") as i32,
            max_session_timeout_ms: c.int_value("group.max.session.timeout.ms") as i32,
            initial_rebalance_delay_ms: c.int_value("group.initial.rebalance.delay.ms"),
            max_size: c.int_value("group.max.size") as usize,
        },
        consumer: consumer::ConsumerConfig {
            session_timeout_ms: c.int_value("group.consumer.session.timeout.ms"),
            heartbeat_interval_ms: c.int_value("group.consumer.heartbeat.interval.ms") as i32,
            assignors,
            max_size: c.int_value("group.max.size") as usize,
        },
        offsets_retention_ms: c.int_value("offsets.retention.minutes") * 60_000,
    }
}
