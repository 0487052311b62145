//! `magnetar produce TOPIC`: one record per input line.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use client::{Acks, Compression, Producer, ProducerRecord};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;

use crate::error::{CliError, Context};
use crate::output::print_json;
use crate::{key_value, GlobalArgs};

/// `magnetar produce` arguments.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Topic to write to.
    topic: String,
    /// Read lines from this file instead of stdin.
    #[arg(long, short)]
    file: Option<PathBuf>,
    /// Split each line into KEY<SEP>VALUE at the first SEP.
    #[arg(long, value_name = "SEP")]
    key_sep: Option<String>,
    /// A header on every record, KEY=VALUE (repeatable).
    #[arg(long = "header", short = 'H', value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    compression: String,
    /// 0, 1 or all.
    #[arg(long, default_value = "all")]
    acks: String,
    /// Write every record to this partition.
    #[arg(long)]
    partition: Option<i32>,
    /// How long to wait to fill batches.
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// Print each record's partition and offset.
    #[arg(long)]
    print_offsets: bool,
    #[command(flatten)]
    global: GlobalArgs,
}

/// Runs `magnetar produce`.
pub async fn run(args: ProduceArgs) -> Result<(), CliError> {
    let g = &args.global;
    let b = g.bootstrap.as_str();
    let compression: Compression = args
        .compression
        .parse()
        .map_err(|_| CliError::Usage(format!("unknown compression {:?}", args.compression)))?;
    let acks = match args.acks.as_str() {
        "0" => Acks::None,
        "1" => Acks::Leader,
        "all" | "-1" => Acks::All,
        other => {
            return Err(CliError::Usage(format!(
                "--acks must be 0, 1 or all, not {other:?}"
            )))
        }
    };
    let headers: Vec<(String, String)> = args
        .headers
        .iter()
        .map(|h| key_value(h))
        .collect::<Result<_, _>>()?;
    let client = g.connect().await?;
    // A missing topic is created if the broker's auto-creation policy
    // allows it, as other producers do; otherwise fail early and say how.
    match client::Admin::new(client.clone())
        .get_partitions_for_topic(&args.topic, true)
        .await
    {
        Ok(_) => {}
        Err(client::Error::NotFound(_)) => {
            return Err(CliError::Client {
                context: format!("cannot produce to {}", args.topic),
                broker: b.to_string(),
                source: client::Error::NotFound(format!(
                    "topic {t} does not exist and the broker does not create topics \
                     automatically; create it with `magnetar topic create {t}`",
                    t = args.topic
                )),
            })
        }
        Err(e) => return Err(e).context(format!("cannot produce to {}", args.topic), b),
    }
    let producer = Producer::builder()
        .client(client)
        .compression(compression)
        .acks(acks)
        .linger(Duration::from_millis(args.linger_ms))
        .delivery_timeout(Duration::from_secs(g.timeout.max(1) * 3))
        .build()
        .await
        .context("cannot start the producer", b)?;

    let input: Box<dyn BufRead> = match &args.file {
        Some(p) => Box::new(std::io::BufReader::new(std::fs::File::open(p).map_err(
            |e| CliError::Usage(format!("cannot read {}: {e}", p.display())),
        )?)),
        None => Box::new(std::io::stdin().lock()),
    };
    let mut pending = FuturesUnordered::new();
    let mut sent = 0u64;
    let mut first_error: Option<client::Error> = None;
    for line in input.lines() {
        let line = line?;
        let mut rec = ProducerRecord::new(&args.topic);
        match args.key_sep.as_deref().and_then(|sep| line.split_once(sep)) {
            Some((k, v)) => rec = rec.key(k.to_string()).value(v.to_string()),
            None => rec = rec.value(line),
        }
        for (k, v) in &headers {
            rec = rec.header(k.clone(), v.clone());
        }
        if let Some(p) = args.partition {
            rec = rec.partition(p);
        }
        pending.push(producer.send(rec));
        sent += 1;
        // Keep memory bounded on huge inputs while staying pipelined.
        while pending.len() >= 10_000 {
            if let Some(r) = pending.next().await {
                report(r, args.print_offsets, &mut first_error);
            }
        }
    }
    while let Some(r) = pending.next().await {
        report(r, args.print_offsets, &mut first_error);
    }
    let _ = producer.close().await;
    if let Some(e) = first_error {
        return Err(e).context(format!("producing to {} failed", args.topic), b);
    }
    if g.json {
        print_json(&json!({"topic": args.topic, "records": sent}));
    } else {
        eprintln!("produced {sent} records to {}", args.topic);
    }
    Ok(())
}

fn report(
    r: client::Result<client::RecordMetadata>,
    print: bool,
    first_error: &mut Option<client::Error>,
) {
    match r {
        Ok(m) if print => println!("{}\t{}", m.partition, m.offset),
        Ok(_) => {}
        Err(e) => {
            if first_error.is_none() {
                *first_error = Some(e);
            }
        }
    }
}
