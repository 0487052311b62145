//! librdkafka's transactional producer as the transaction tests use it.

use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use super::client_config;

/// A transactional producer of `id` on `bootstrap`, initialized (its
/// producer id and epoch fetched from the coordinator) within `timeout`.
pub fn transactional(bootstrap: &str, id: &str, timeout: Duration) -> BaseProducer {
    let p: BaseProducer = client_config(bootstrap)
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "60000")
        .create()
        .unwrap();
    p.init_transactions(timeout).unwrap();
    p
}

/// Sends `tag`-0, -1 and -2 to partitions 0, 1 and 2 of `topic` and waits
/// until they are acknowledged.
pub fn send_each(p: &BaseProducer, topic: &str, tag: &str, timeout: Duration) {
    for partition in 0..3 {
        let v = format!("{tag}-{partition}");
        p.send(
            BaseRecord::to(topic)
                .partition(partition)
                .key(v.as_bytes())
                .payload(v.as_bytes()),
        )
        .unwrap();
    }
    p.flush(timeout).unwrap();
}
