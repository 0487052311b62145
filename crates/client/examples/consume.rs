//! Consumes a topic (or every topic matching a regex) as a member of a
//! consumer group, printing rebalances and messages and committing every
//! 1000 messages.
//!
//! ```sh
//! cargo run -p magnetar-client --example consume -- 127.0.0.1:9092 my-group my-topic
//! cargo run -p magnetar-client --example consume -- 127.0.0.1:9092 my-group '~orders-.*'
//! ```

use futures::StreamExt;
use magnetar_client::{AutoOffsetReset, Consumer, RebalanceListener, TopicPartition};

/// Prints assignment changes.
struct Print;

impl RebalanceListener for Print {
    fn on_partitions_revoked(&self, partitions: &[TopicPartition]) {
        eprintln!("revoked: {partitions:?}");
    }
    fn on_partitions_assigned(&self, partitions: &[TopicPartition]) {
        eprintln!("assigned: {partitions:?}");
    }
}

#[tokio::main]
async fn main() -> magnetar_client::Result<()> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let group = args.next().unwrap_or_else(|| "example-group".into());
    let topic = args.next().unwrap_or_else(|| "example".into());

    let mut consumer = Consumer::builder()
        .bootstrap(&bootstrap)
        .group_id(group)
        .auto_offset_reset(AutoOffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .await?;
    match topic.strip_prefix('~') {
        Some(pattern) => consumer.subscribe_pattern(pattern, Print)?,
        None => consumer.subscribe_with_listener(&[&topic], Print)?,
    }

    let mut n = 0u64;
    {
        let mut messages = consumer.stream();
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            let m = tokio::select! {
                m = messages.next() => m,
                _ = &mut ctrl_c => break,
            };
            let Some(m) = m else { break };
            let m = m?;
            println!(
                "{}-{}@{} key={:?} value={:?}",
                m.topic(),
                m.partition(),
                m.offset(),
                m.key().map(String::from_utf8_lossy),
                m.value().map(String::from_utf8_lossy),
            );
            n += 1;
            if n % 1000 == 0 {
                eprintln!("{n} messages");
            }
        }
    }
    consumer.commit().await?;
    eprintln!("committed {}", consumer.checkpoint());
    consumer.close().await
}
