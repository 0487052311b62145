//! `magnetar consume` (a group consumer) and `magnetar read` (a Reader: no
//! group, no committed state).

use std::time::Duration;

use clap::{Args, ValueEnum};
use client::{
    AutoOffsetReset, Consumer, Message, Reader, RebalanceListener, StartPosition, TopicPartition,
};
use serde_json::json;

use crate::error::{CliError, Context};
use crate::GlobalArgs;

/// How messages are printed.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// The value, one per line (with `--print-key`, KEY<TAB>VALUE).
    Text,
    /// One JSON object per line: topic, partition, offset, timestamp, key, value, headers.
    Json,
}

/// Printing options shared by consume and read.
#[derive(Debug, Args)]
pub struct PrintArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// With the text format, print KEY<TAB>VALUE.
    #[arg(long)]
    print_key: bool,
    /// Stop after this many messages.
    #[arg(long, short = 'n')]
    count: Option<u64>,
    /// Stop after this many seconds without a message.
    #[arg(long, value_name = "SECONDS")]
    idle_exit: Option<u64>,
}

/// `magnetar consume` arguments.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// Topic to consume (or use --pattern).
    #[arg(required_unless_present = "pattern", conflicts_with = "pattern")]
    topic: Option<String>,
    /// Consume every topic whose whole name matches this regex; new matching topics are picked up.
    #[arg(long)]
    pattern: Option<String>,
    /// Consumer group.
    #[arg(long, short, default_value = "magnetar-cli")]
    group: String,
    /// Where to start when the group has no committed offset: earliest or latest.
    #[arg(long, default_value = "latest")]
    from: String,
    /// Do not commit consumed offsets on exit.
    #[arg(long)]
    no_commit: bool,
    /// Keep waiting for new messages instead of stopping once every
    /// assigned partition has been read to its end.
    #[arg(long, short)]
    follow: bool,
    #[command(flatten)]
    print: PrintArgs,
    #[command(flatten)]
    global: GlobalArgs,
}

/// `magnetar read` arguments.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Topic to read.
    topic: String,
    /// earliest, latest, OFFSET (in every partition read), PARTITION:OFFSET
    /// (that partition only) or @TIMESTAMP_MS.
    #[arg(long, default_value = "earliest")]
    from: String,
    /// Read only this partition.
    #[arg(long, short)]
    partition: Option<i32>,
    /// Start after the --from message instead of at it.
    #[arg(long)]
    exclusive: bool,
    /// Keep waiting for new messages instead of stopping at the end.
    #[arg(long, short)]
    follow: bool,
    #[command(flatten)]
    print: PrintArgs,
    #[command(flatten)]
    global: GlobalArgs,
}

struct StderrListener;

impl RebalanceListener for StderrListener {
    fn on_partitions_revoked(&self, p: &[TopicPartition]) {
        if !p.is_empty() {
            eprintln!("revoked: {}", list(p));
        }
    }
    fn on_partitions_assigned(&self, p: &[TopicPartition]) {
        eprintln!("assigned: {}", list(p));
    }
}

fn list(p: &[TopicPartition]) -> String {
    p.iter()
        .map(|tp| format!("{}-{}", tp.topic, tp.partition))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print(m: &Message, args: &PrintArgs) {
    let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    match args.format {
        Format::Text if args.print_key => {
            println!(
                "{}\t{}",
                text(m.key()).unwrap_or_default(),
                text(m.value()).unwrap_or_default()
            )
        }
        Format::Text => println!("{}", text(m.value()).unwrap_or_default()),
        Format::Json => {
            let headers: serde_json::Map<String, serde_json::Value> = m
                .headers()
                .iter()
                .map(|(k, v)| (k.to_string(), json!(text(v))))
                .collect();
            println!(
                "{}",
                json!({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
                    "timestamp": m.timestamp(), "key": text(m.key()), "value": text(m.value()), "headers": headers})
            );
        }
    }
}

/// Runs `magnetar consume`.
pub async fn consume(args: ConsumeArgs) -> Result<(), CliError> {
    let g = &args.global;
    let b = g.bootstrap.as_str();
    let reset: AutoOffsetReset = match args.from.as_str() {
        "earliest" => AutoOffsetReset::Earliest,
        "latest" => AutoOffsetReset::Latest,
        other => {
            return Err(CliError::Usage(format!(
                "--from must be earliest or latest, not {other:?}"
            )))
        }
    };
    let client = g.connect().await?;
    let mut consumer = Consumer::builder()
        .client(client.clone())
        .group_id(&args.group)
        .auto_offset_reset(reset)
        .enable_auto_commit(false)
        .metadata_refresh_interval(Duration::from_secs(5))
        .build()
        .await
        .context("cannot start the consumer", b)?;
    match (&args.topic, &args.pattern) {
        (Some(t), _) => {
            // Never create the topic by subscribing to it.
            client::Admin::new(client)
                .get_partitions_for_topic(t, false)
                .await
                .context(format!("cannot consume {t}"), b)?;
            consumer
                .subscribe_with_listener(&[t.as_str()], StderrListener)
                .context("cannot subscribe", b)?;
        }
        (None, Some(p)) => consumer
            .subscribe_pattern(p, StderrListener)
            .map_err(|e| match e {
                client::Error::InvalidArgument(m) => CliError::Usage(m),
                e => CliError::Client {
                    context: "cannot subscribe".into(),
                    broker: b.to_string(),
                    source: e,
                },
            })?,
        (None, None) => return Err(CliError::Usage("give a topic or --pattern".into())),
    }
    let mut source = Source::Consumer {
        admin: client::Admin::new(consumer.client().clone()),
        consumer: Box::new(consumer),
        follow: args.follow,
        assignment_deadline: tokio::time::Instant::now() + Duration::from_secs(g.timeout.max(1)),
        timeout: Duration::from_secs(g.timeout.max(1)),
        end_unknown_since: None,
    };
    let result = pump(&args.print, &mut source).await;
    let Source::Consumer { mut consumer, .. } = source else {
        unreachable!("built as a consumer above")
    };
    if !args.no_commit {
        let _ = consumer.commit().await;
    }
    let _ = consumer.close().await;
    result.context("consuming failed", b)
}

/// Runs `magnetar read`.
pub async fn read(args: ReadArgs) -> Result<(), CliError> {
    let g = &args.global;
    let b = g.bootstrap.as_str();
    let start = parse_position(&args.from, args.partition)?;
    // PARTITION:OFFSET reads that partition only.
    let partition = match start {
        StartPosition::Offset(p, _) => Some(p),
        _ => args.partition,
    };
    let client = g.connect().await?;
    let reader = Reader::builder(&args.topic)
        .client(client)
        .start(start)
        // "latest" means messages written from now on; Pulsar's inclusive
        // latest (the last message already written) is not what people
        // expect from a command line.
        .start_inclusive(!args.exclusive && start != StartPosition::Latest)
        .partition(partition)
        // A partition whose leader is down is waited for this long once
        // the others are read, then its error ends the command.
        .request_timeout(Duration::from_secs(g.timeout.max(1)))
        .build()
        .await
        .context(format!("cannot read {}", args.topic), b)?;
    let mut source = Source::Reader {
        reader: Box::new(reader),
        follow: args.follow,
    };
    pump(&args.print, &mut source)
        .await
        .context(format!("reading {} failed", args.topic), b)
}

/// Parses a read start position.
fn parse_position(from: &str, partition: Option<i32>) -> Result<StartPosition, CliError> {
    let bad = || {
        CliError::Usage(format!("--from must be earliest, latest, OFFSET, PARTITION:OFFSET or @TIMESTAMP_MS, not {from:?}"))
    };
    Ok(match from {
        "earliest" => StartPosition::Earliest,
        "latest" => StartPosition::Latest,
        s if s.starts_with('@') => StartPosition::Timestamp(s[1..].parse().map_err(|_| bad())?),
        s => match s.split_once(':') {
            Some((p, o)) => {
                let p: i32 = p.parse().map_err(|_| bad())?;
                if partition.is_some_and(|only| only != p) {
                    return Err(CliError::Usage(format!(
                        "--from {from} names partition {p} but --partition is {}",
                        partition.unwrap_or_default()
                    )));
                }
                StartPosition::Offset(p, o.parse().map_err(|_| bad())?)
            }
            None => {
                let o: i64 = s.parse().map_err(|_| bad())?;
                match partition {
                    Some(p) => StartPosition::Offset(p, o),
                    None => StartPosition::OffsetInEach(o),
                }
            }
        },
    })
}

/// Where messages come from.
enum Source {
    Consumer {
        consumer: Box<Consumer>,
        /// For the log end offsets of the assigned partitions.
        admin: client::Admin,
        follow: bool,
        /// A consumer that does not follow and has no partitions assigned
        /// by then stops.
        assignment_deadline: tokio::time::Instant,
        /// `--timeout`: how long the end of an assigned partition may stay
        /// unknown (no leader) before a consumer that does not follow
        /// fails.
        timeout: Duration,
        /// Since when some assigned partition's end has been unknown.
        end_unknown_since: Option<tokio::time::Instant>,
    },
    Reader {
        reader: Box<Reader>,
        follow: bool,
    },
}

/// What one poll found.
enum Polled {
    Message(Message),
    Nothing,
    /// A reader that does not follow reached the end.
    End,
}

impl Source {
    async fn next(&mut self, wait: Duration) -> client::Result<Polled> {
        match self {
            Source::Consumer {
                consumer,
                admin,
                follow,
                assignment_deadline,
                timeout,
                end_unknown_since,
            } => {
                if let Some(m) = consumer.poll(wait).await? {
                    return Ok(Polled::Message(m));
                }
                if *follow {
                    return Ok(Polled::Nothing);
                }
                let assigned = consumer.assignment().to_vec();
                if assigned.is_empty() {
                    if tokio::time::Instant::now() >= *assignment_deadline {
                        // Nothing assigned because the group cannot be
                        // joined (its coordinator is down) is a failure,
                        // not an empty result.
                        if let Some(group) = consumer.group_id() {
                            admin.find_coordinator(group).await?;
                        }
                        eprintln!("no partitions were assigned to this consumer");
                        return Ok(Polled::End);
                    }
                    return Ok(Polled::Nothing);
                }
                let parts: Vec<(&str, i32)> = assigned
                    .iter()
                    .map(|tp| (tp.topic.as_str(), tp.partition))
                    .collect();
                let ends = admin
                    .list_offsets(&parts, client::OffsetSpec::Latest)
                    .await?;
                // A partition whose end cannot be read (no leader) for
                // longer than --timeout ends the wait with its error.
                match ends.iter().find_map(|(_, r)| r.as_ref().err()) {
                    Some(e) => {
                        let since =
                            *end_unknown_since.get_or_insert_with(tokio::time::Instant::now);
                        if since.elapsed() >= *timeout {
                            return Err(e.clone());
                        }
                    }
                    None => *end_unknown_since = None,
                }
                let caught_up = assigned.iter().all(|tp| {
                    let end = ends
                        .iter()
                        .find(|((t, p), _)| *t == tp.topic && *p == tp.partition)
                        .and_then(|(_, r)| r.as_ref().ok());
                    match (end, consumer.position(tp)) {
                        (Some(end), Some(pos)) => pos >= end.offset,
                        _ => false,
                    }
                });
                Ok(if caught_up {
                    Polled::End
                } else {
                    Polled::Nothing
                })
            }
            Source::Reader { reader, follow } => {
                if !*follow && !reader.has_message_available().await? {
                    return Ok(Polled::End);
                }
                Ok(reader
                    .read_next_timeout(wait)
                    .await?
                    .map_or(Polled::Nothing, Polled::Message))
            }
        }
    }
}

/// Polls and prints until the count, the end (readers that do not follow),
/// the idle limit, Ctrl-C, or an error.
async fn pump(args: &PrintArgs, source: &mut Source) -> client::Result<()> {
    let mut printed = 0u64;
    let mut idle_since = tokio::time::Instant::now();
    loop {
        if args.count.is_some_and(|n| printed >= n) {
            return Ok(());
        }
        let polled = tokio::select! {
            r = source.next(Duration::from_millis(500)) => r?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        match polled {
            Polled::End => return Ok(()),
            Polled::Message(m) => {
                print(&m, args);
                printed += 1;
                idle_since = tokio::time::Instant::now();
            }
            Polled::Nothing => {
                if args
                    .idle_exit
                    .is_some_and(|s| idle_since.elapsed() >= Duration::from_secs(s))
                {
                    return Ok(());
                }
            }
        }
    }
}
