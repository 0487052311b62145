//! The producing side of a benchmark.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use client::{Acks, Client, Compression, Producer, ProducerRecord};
use futures::stream::{FuturesUnordered, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};

use super::{now_micros, Report, Workload};
use crate::error::{CliError, Context};

/// Most unacknowledged messages per producer.
const WINDOW: usize = 50_000;
/// Payloads are cut from buffers of this many messages, so building a
/// message does not allocate on its own.
const SLAB_MESSAGES: usize = 4096;

/// Runs the producers for the workload's duration and reports.
pub async fn run(w: &Workload, client: Client) -> Result<Report, CliError> {
    let b = w.global.bootstrap.as_str();
    let compression: Compression = w
        .compression
        .parse()
        .map_err(|_| CliError::Usage(format!("unknown compression {:?}", w.compression)))?;
    let acks = match w.acks.as_str() {
        "0" => Acks::None,
        "1" => Acks::Leader,
        "all" | "-1" => Acks::All,
        other => {
            return Err(CliError::Usage(format!(
                "--acks must be 0, 1 or all, not {other:?}"
            )))
        }
    };
    let done = Arc::new(AtomicU64::new(0));
    let progress = progress_bar(w, done.clone());
    let deadline = Instant::now() + Duration::from_secs(w.duration);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..w.producers {
        let producer = Producer::builder()
            .client(client.clone())
            .compression(compression)
            .acks(acks)
            .linger(Duration::from_millis(w.linger_ms))
            .build()
            .await
            .context("cannot start a producer", b)?;
        let topics = w.topic_names();
        let size = w.message_size;
        let per_producer_rate = (w.rate as f64 / w.producers as f64).max(0.0);
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            produce_loop(producer, topics, size, per_producer_rate, deadline, done, i).await
        }));
    }
    let mut report = Report::new("produce");
    for t in tasks {
        let r = t
            .await
            .map_err(|e| CliError::Usage(format!("producer task failed: {e}")))?;
        report.messages += r.messages;
        report.bytes += r.bytes;
        report.errors += r.errors;
        let _ = report.latency.add(&r.latency);
    }
    report.elapsed = started.elapsed();
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    Ok(report)
}

async fn produce_loop(
    producer: Producer,
    topics: Vec<String>,
    size: usize,
    rate: f64,
    deadline: Instant,
    done: Arc<AtomicU64>,
    seed: usize,
) -> Report {
    let mut report = Report::new("produce");
    let mut in_flight = FuturesUnordered::new();
    let mut slab = BytesMut::new();
    let start = Instant::now();
    let mut sent: u64 = 0;
    let mut topic = seed % topics.len();
    while Instant::now() < deadline {
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64(sent as f64 / rate);
            if due > Instant::now() {
                // Drain acknowledgements while waiting for the next slot.
                tokio::select! {
                    _ = tokio::time::sleep_until(due.into()) => {}
                    Some(r) = in_flight.next(), if !in_flight.is_empty() => complete(&mut report, r, size, &done),
                }
                continue;
            }
        }
        if slab.capacity() < size {
            slab = BytesMut::with_capacity(size * SLAB_MESSAGES);
        }
        let sent_at = now_micros();
        slab.put_u64(sent_at);
        slab.put_bytes(b'x', size - 8);
        let value = slab.split_to(size).freeze();
        let f = producer.send(ProducerRecord::new(&topics[topic]).value(value));
        in_flight.push(async move { (f.await, sent_at) });
        topic = (topic + 1) % topics.len();
        sent += 1;
        while in_flight.len() >= WINDOW {
            if let Some(r) = in_flight.next().await {
                complete(&mut report, r, size, &done);
            }
        }
    }
    while let Some(r) = in_flight.next().await {
        complete(&mut report, r, size, &done);
    }
    let _ = producer.close().await;
    report
}

fn complete(
    report: &mut Report,
    (result, sent_at): (client::Result<client::RecordMetadata>, u64),
    size: usize,
    done: &AtomicU64,
) {
    match result {
        Ok(_) => {
            report.record(size, now_micros().saturating_sub(sent_at));
            done.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => report.errors += 1,
    }
}

/// A live progress bar showing messages and rate, unless quiet or JSON.
pub fn progress_bar(w: &Workload, done: Arc<AtomicU64>) -> Option<ProgressBar> {
    if w.quiet || w.global.json {
        return None;
    }
    let bar = ProgressBar::new(w.duration);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len}s {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let b = bar.clone();
    tokio::spawn(async move {
        let start = Instant::now();
        let mut last = 0u64;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        while !b.is_finished() {
            tick.tick().await;
            let now = done.load(Ordering::Relaxed);
            b.set_position(start.elapsed().as_secs());
            b.set_message(format!("{now} msgs, {} msg/s", now - last));
            last = now;
        }
    });
    Some(bar)
}
