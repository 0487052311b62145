//! The broker's side of the group coordinator: the topics it sees, and the
//! tasks that drive its timers and flush the front ends' durable state.

use std::sync::Arc;

use crate::group::consumer;
use crate::{now_ms, Broker};

/// The cluster's topics as consumer groups see them (internal ones included;
/// regex subscriptions skip them).
pub fn topic_infos(broker: &Broker) -> Vec<consumer::TopicInfo> {
    broker
        .topics()
        .iter()
        .map(|t| consumer::TopicInfo {
            id: t.id,
            name: t.name.to_string(),
            partitions: t.partition_count() as i32,
        })
        .collect()
}

/// Runs the broker's own coordinator's timers until the task is aborted.
pub fn spawn_timers(broker: Arc<Broker>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let topics = topic_infos(&broker);
            let next = broker.groups().tick(&topics);
            broker.groups().wait_for_work(next).await;
        }
    })
}

/// Every `every` until the task is aborted: flushes changed durable
/// cursors (acks reach the group log at most this late; see
/// [`crate::subscription::Subscriptions::flush_cursors`]) and the
/// producer-sequence snapshots that are due
/// ([`crate::sequences::ProducerSequences::flush`]).
pub fn spawn_flusher(
    broker: Arc<Broker>,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let b = broker.clone();
            // A group-log append is disk work: off the async workers.
            let flushed = tokio::task::spawn_blocking(move || {
                let state = b.groups().front_end();
                let cursors = state.subscriptions.flush_cursors();
                let now = now_ms().0;
                state
                    .sequences
                    .expire(now, || b.config().pulsar_dedup_inactivity_ms());
                let sequences = state.sequences.flush(now, false);
                cursors.and(sequences)
            })
            .await;
            match flushed {
                Ok(Err(e)) => tracing::warn!("could not persist front-end state: {e}"),
                Ok(Ok(_)) => {}
                Err(e) => tracing::warn!("front-end state flush task failed: {e}"),
            }
        }
    })
}
