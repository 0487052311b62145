//! The `magnetar` client subcommands, run as a user would: output, JSON and
//! exit codes, against the real broker; what they write is checked with
//! librdkafka.

mod common;

use std::time::Duration;

use common::cli::{code, json, magnetar, ok};
use common::{assign_config, BrokerProcess};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::Value;

#[test]
fn topic_commands_and_exit_codes() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let b = broker.bootstrap();
    let out = ok(&magnetar(
        &b,
        &[
            "topic",
            "create",
            "orders",
            "-p",
            "3",
            "-c",
            "retention.ms=60000",
        ],
        None,
    ));
    assert!(
        out.starts_with("created topic orders (3 partitions, id "),
        "{out}"
    );

    let listed = json(&magnetar(&b, &["topic", "list", "--json"], None));
    assert_eq!(listed["topics"][0]["topic"], "orders");
    assert_eq!(listed["topics"][0]["partitions"], 3);
    let table = ok(&magnetar(&b, &["topic", "list"], None));
    assert!(
        table.lines().next().unwrap().starts_with("TOPIC"),
        "{table}"
    );
    assert!(table.contains("orders  3"), "aligned columns: {table}");

    let described = json(&magnetar(
        &b,
        &["topic", "describe", "orders", "--json"],
        None,
    ));
    assert_eq!(described["configs"]["retention.ms"], "60000");
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);

    ok(&magnetar(
        &b,
        &[
            "topic",
            "alter",
            "orders",
            "--set",
            "retention.ms=1000",
            "--partitions",
            "5",
        ],
        None,
    ));
    let described = json(&magnetar(
        &b,
        &["topic", "describe", "orders", "--json"],
        None,
    ));
    assert_eq!(described["configs"]["retention.ms"], "1000");
    assert_eq!(described["partitions"].as_array().unwrap().len(), 5);

    // Lookups never create unless asked *and* allowed.
    let found = json(&magnetar(
        &b,
        &["topic", "partitions", "orders", "--json"],
        None,
    ));
    assert_eq!(found["partitions"], serde_json::json!([0, 1, 2, 3, 4]));
    let missing = magnetar(&b, &["topic", "partitions", "ghost"], None);
    assert_eq!(code(&missing), 3, "not found");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains(&b),
        "names the broker"
    );
    assert_eq!(
        code(&magnetar(
            &b,
            &["topic", "partitions", "ghost", "--create-if-allowed"],
            None
        )),
        3
    );

    assert_eq!(
        code(&magnetar(&b, &["topic", "create", "bad name"], None)),
        1,
        "broker refused"
    );
    assert_eq!(
        code(&magnetar(&b, &["topic", "alter", "orders"], None)),
        2,
        "usage"
    );
    assert_eq!(
        code(&magnetar(&b, &["topic", "delete", "orders", "nope"], None)),
        3
    );
    assert_eq!(
        code(&magnetar(&b, &["topic", "describe", "orders"], None)),
        3,
        "deleted"
    );
    assert_eq!(
        code(&magnetar(
            "127.0.0.1:1",
            &["topic", "list", "--timeout", "2"],
            None
        )),
        4,
        "unreachable"
    );
}

#[test]
fn partitions_lookup_creates_only_when_the_broker_allows() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=true", "num.partitions=2"]);
    let b = broker.bootstrap();
    assert_eq!(
        code(&magnetar(&b, &["topic", "partitions", "lazy"], None)),
        3
    );
    let created = json(&magnetar(
        &b,
        &[
            "topic",
            "partitions",
            "lazy",
            "--create-if-allowed",
            "--json",
        ],
        None,
    ));
    assert_eq!(created["partitions"], serde_json::json!([0, 1]));
}

#[test]
fn produce_keys_headers_and_group_offsets() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    ok(&magnetar(
        &b,
        &["topic", "create", "events", "-p", "1"],
        None,
    ));
    let out = ok(&magnetar(
        &b,
        &[
            "produce",
            "events",
            "--key-sep",
            ":",
            "-H",
            "source=cli",
            "--compression",
            "zstd",
            "--print-offsets",
        ],
        Some("alpha:one\nbeta:two\nno-key-here\n"),
    ));
    assert_eq!(out, "0\t0\n0\t1\n0\t2\n");

    let c: BaseConsumer = assign_config(&b).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("events", 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        if let Some(m) = common::polled(c.poll(Duration::from_millis(200))) {
            let h = m.headers().unwrap().get(0);
            assert_eq!((h.key, h.value), ("source", Some(&b"cli"[..])));
            got.push((
                m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                String::from_utf8_lossy(m.payload().unwrap()).into_owned(),
            ));
        }
    }
    assert_eq!(
        got,
        vec![
            (Some("alpha".into()), "one".into()),
            (Some("beta".into()), "two".into()),
            (None, "no-key-here".into())
        ]
    );
    assert_eq!(
        code(&magnetar(
            &b,
            &["produce", "events", "--acks", "2"],
            Some("x\n")
        )),
        2
    );
    // The broker auto-creates topics (the default policy), so producing to
    // a new topic creates it, as librdkafka producers do.
    ok(&magnetar(&b, &["produce", "brand-new"], Some("x\n")));
    let described = json(&magnetar(
        &b,
        &["topic", "describe", "brand-new", "--json"],
        None,
    ));
    assert_eq!(described["topic"], "brand-new", "{described}");

    // Group offsets: reset, inspect with lag, coordinator lookup.
    let reset = json(&magnetar(
        &b,
        &[
            "group", "reset", "billing", "--topic", "events", "--to", "1", "--json",
        ],
        None,
    ));
    assert_eq!(reset["offsets"][0]["offset"], 1);
    let offsets = json(&magnetar(
        &b,
        &["group", "offsets", "billing", "--json"],
        None,
    ));
    assert_eq!(offsets["offsets"][0]["lag"], 2);
    let latest = json(&magnetar(
        &b,
        &[
            "group", "reset", "billing", "--topic", "events", "--to", "latest", "--json",
        ],
        None,
    ));
    assert_eq!(latest["offsets"][0]["offset"], 3);
    let listed = json(&magnetar(&b, &["group", "list", "--json"], None));
    assert_eq!(listed["groups"][0]["group"], "billing");
    let coords = json(&magnetar(
        &b,
        &["coordinator", "billing", "other", "--json"],
        None,
    ));
    assert_eq!(coords["coordinators"].as_array().unwrap().len(), 2);
    assert_eq!(coords["coordinators"][1]["port"], broker.addr.port());
    assert_eq!(
        code(&magnetar(&b, &["group", "describe", "never-seen"], None)),
        3
    );
}

#[test]
fn consume_and_read_commands() {
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=100"]);
    let b = broker.bootstrap();
    ok(&magnetar(&b, &["topic", "create", "feed", "-p", "2"], None));
    ok(&magnetar(
        &b,
        &["produce", "feed", "--key-sep", ":"],
        Some("a:1\nb:2\nc:3\nd:4\n"),
    ));

    // A reader stops at the end unless --follow.
    let mut all: Vec<String> = ok(&magnetar(&b, &["read", "feed"], None))
        .lines()
        .map(str::to_string)
        .collect();
    all.sort();
    assert_eq!(all, vec!["1", "2", "3", "4"]);
    let one = ok(&magnetar(
        &b,
        &[
            "read",
            "feed",
            "--partition",
            "0",
            "--from",
            "1",
            "--format",
            "json",
            "-n",
            "1",
        ],
        None,
    ));
    let v: Value = serde_json::from_str(one.trim()).unwrap();
    assert_eq!(
        (v["partition"].as_i64(), v["offset"].as_i64()),
        (Some(0), Some(1))
    );
    let after = ok(&magnetar(
        &b,
        &[
            "read",
            "feed",
            "--partition",
            "0",
            "--from",
            "0:1",
            "--exclusive",
        ],
        None,
    ));
    assert_eq!(
        after.lines().count(),
        ok(&magnetar(&b, &["read", "feed", "--partition", "0"], None))
            .lines()
            .count()
            - 2
    );
    assert_eq!(
        ok(&magnetar(
            &b,
            &[
                "read",
                "feed",
                "--from",
                "latest",
                "--follow",
                "--idle-exit",
                "1"
            ],
            None
        )),
        ""
    );
    assert_eq!(
        code(&magnetar(
            &b,
            &["read", "feed", "--from", "yesterday"],
            None
        )),
        2
    );

    // A group consumer commits what it printed; a second run has nothing new.
    let out = ok(&magnetar(
        &b,
        &[
            "consume",
            "feed",
            "--group",
            "cg",
            "--from",
            "earliest",
            "-n",
            "4",
            "--print-key",
        ],
        None,
    ));
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, vec!["a\t1", "b\t2", "c\t3", "d\t4"]);
    let lag = json(&magnetar(&b, &["group", "offsets", "cg", "--json"], None));
    assert!(
        lag["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["lag"] == 0),
        "{lag}"
    );
    assert_eq!(
        ok(&magnetar(
            &b,
            &["consume", "feed", "--group", "cg", "--idle-exit", "2"],
            None
        )),
        ""
    );

    // Pattern subscription.
    let out = ok(&magnetar(
        &b,
        &[
            "consume",
            "--pattern",
            "fe.*",
            "--group",
            "pg",
            "--from",
            "earliest",
            "-n",
            "4",
            "--format",
            "json",
        ],
        None,
    ));
    assert_eq!(out.lines().count(), 4);
    assert_eq!(
        code(&magnetar(&b, &["consume", "missing-topic"], None)),
        3,
        "never creates"
    );
}

#[test]
fn bench_modes_report_throughput_and_latency() {
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]);
    let b = broker.bootstrap();
    let produced = json(&magnetar(
        &b,
        &[
            "bench",
            "produce",
            "--duration",
            "1",
            "--message-size",
            "100",
            "--partitions",
            "2",
            "--keep",
            "--json",
        ],
        None,
    ));
    assert!(produced["messages"].as_u64().unwrap() > 0, "{produced}");
    assert_eq!(produced["errors"], 0);
    assert!(produced["latency_ms"]["p99"].as_f64().unwrap() > 0.0);

    let consumed = json(&magnetar(
        &b,
        &[
            "bench",
            "consume",
            // It stops once the backlog is read, well before this.
            "--duration",
            "30",
            "--partitions",
            "2",
            "--json",
        ],
        None,
    ));
    assert_eq!(
        consumed["messages"], produced["messages"],
        "the consumers read the whole backlog"
    );

    let both = json(&magnetar(
        &b,
        &[
            "bench",
            "e2e",
            "--duration",
            "2",
            "--rate",
            "500",
            "--partitions",
            "2",
            "--topic-prefix",
            "e2e",
            "--json",
        ],
        None,
    ));
    assert!(
        both["produce"]["messages"].as_u64().unwrap() >= 800,
        "{both}"
    );
    assert_eq!(
        both["e2e"]["messages"], both["produce"]["messages"],
        "every message arrived"
    );
    assert!(both["e2e"]["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert_eq!(
        code(&magnetar(
            &b,
            &["bench", "produce", "--message-size", "4"],
            None
        )),
        2
    );
}

#[test]
fn bench_over_pulsar_counts_every_message_once() {
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]);
    let b = broker.bootstrap();
    let url = broker.pulsar_url();
    let pulsar = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--protocol", "pulsar", "--service-url", &url, "--json"]);
        json(&magnetar(&b, &all, None))
    };
    let produced = pulsar(&[
        "bench",
        "produce",
        "--duration",
        "1",
        "--message-size",
        "100",
        "--partitions",
        "2",
        "--compression",
        "lz4",
        "--keep",
    ]);
    let n = produced["messages"].as_u64().unwrap();
    assert!(n > 0, "{produced}");
    assert_eq!(produced["errors"], 0);
    assert!(produced["latency_ms"]["p99"].as_f64().unwrap() > 0.0);

    // Two consumers on one Shared subscription split the backlog between
    // them: every message once.
    let consumed = pulsar(&[
        "bench",
        "consume",
        "--duration",
        "30",
        "--partitions",
        "2",
        "--consumers",
        "2",
        "--keep",
    ]);
    assert_eq!(consumed["messages"].as_u64(), Some(n), "{consumed}");
    // The same batches, read by the Kafka path.
    let kafka = json(&magnetar(
        &b,
        &[
            "bench",
            "consume",
            "--duration",
            "30",
            "--partitions",
            "2",
            "--json",
        ],
        None,
    ));
    assert_eq!(kafka["messages"].as_u64(), Some(n), "{kafka}");

    let both = pulsar(&[
        "bench",
        "e2e",
        "--duration",
        "2",
        "--rate",
        "500",
        "--partitions",
        "2",
        "--consumers",
        "2",
        "--topic-prefix",
        "pe2e",
    ]);
    assert!(
        both["produce"]["messages"].as_u64().unwrap() >= 800,
        "{both}"
    );
    assert_eq!(
        both["e2e"]["messages"], both["produce"]["messages"],
        "every message arrived once"
    );
    assert!(both["e2e"]["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    // The run's topic was deleted at the end.
    let topics = ok(&magnetar(&b, &["topic", "list"], None));
    assert!(!topics.contains("pe2e-0"), "{topics}");

    let unreachable = magnetar(
        &b,
        &[
            "bench",
            "produce",
            "--protocol",
            "pulsar",
            "--service-url",
            "pulsar://127.0.0.1:1",
            "--duration",
            "1",
        ],
        None,
    );
    assert_eq!(code(&unreachable), 4, "unreachable broker: exit 4");
}

/// Output piped into a reader that stops early (`| head`) ends the command
/// quietly, as other Unix tools do, instead of a panic on the broken pipe.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let b = broker.bootstrap();
    ok(&magnetar(
        &b,
        // Creating 5,000 partitions' files can take longer than the
        // default 10 s on a busy machine's file system.
        &["topic", "create", "wide", "-p", "5000", "--timeout", "120"],
        None,
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_magnetar"))
        .args(["topic", "describe", "wide", "--bootstrap", &b])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is closed here, with most of the table unwritten.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    // Ended by SIGPIPE, as `cat` would be (the table is far larger than
    // a pipe's buffer, so the write did meet the closed end).
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(13), "{:?}", out.status);
    assert!(String::from_utf8_lossy(&first).starts_with("topic wide"));
}
