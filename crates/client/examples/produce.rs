//! Produces records and reports throughput.
//!
//! ```sh
//! cargo run --release -p magnetar-client --example produce -- 127.0.0.1:9092 my-topic 100000 lz4
//! ```

use std::time::Instant;

use magnetar_client::{Compression, Producer, ProducerRecord};

#[tokio::main]
async fn main() -> magnetar_client::Result<()> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let topic = args.next().unwrap_or_else(|| "example".into());
    let count: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let compression: Compression = args.next().unwrap_or_else(|| "none".into()).parse()?;

    let producer = Producer::builder()
        .bootstrap(&bootstrap)
        .compression(compression)
        .batch_size(256 * 1024)
        .build()
        .await?;

    let value = bytes::Bytes::from(vec![b'x'; 100]);
    let start = Instant::now();
    let mut last = None;
    for i in 0..count {
        // Each send is queued at once; keep only the last future, since
        // records of one partition are acknowledged in order.
        let record = ProducerRecord::new(topic.as_str())
            .key(format!("key-{}", i % 1000))
            .value(value.clone());
        last = Some(producer.send(record));
    }
    producer.flush().await?;
    if let Some(f) = last {
        let md = f.await?;
        println!(
            "last record: partition {} offset {}",
            md.partition, md.offset
        );
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{count} records in {secs:.2} s: {:.0} msg/s, {:.1} MB/s",
        count as f64 / secs,
        (count * 100) as f64 / secs / 1e6
    );
    Ok(())
}
