//! What a new user meets in the first hour with the CLI, run as they would
//! run it: commands that stop when there is nothing more to read, positions
//! that mean what they say, exit codes for what does not exist, and errors
//! that say what to do.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use common::cli::{code, json, magnetar, ok, stderr};
use common::BrokerProcess;
use serde_json::Value;

fn lines_sorted(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn consume_stops_at_the_end_unless_following() {
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=100"]);
    let b = broker.bootstrap();
    ok(&magnetar(
        &b,
        &["topic", "create", "orders", "-p", "3"],
        None,
    ));
    ok(&magnetar(&b, &["produce", "orders"], Some("a\nb\nc\n")));

    // The README's example asks for 10 of 3 messages: it prints the 3 and
    // stops at the end of the log instead of waiting forever.
    let out = ok(&magnetar(
        &b,
        &[
            "consume", "orders", "--group", "billing", "--from", "earliest", "-n", "10",
        ],
        None,
    ));
    assert_eq!(lines_sorted(&out), vec!["a", "b", "c"]);
    // It committed what it read: the next run has nothing and stops too.
    assert_eq!(
        ok(&magnetar(
            &b,
            &["consume", "orders", "--group", "billing"],
            None
        )),
        ""
    );
    // --follow waits for more; --idle-exit bounds the wait.
    ok(&magnetar(&b, &["produce", "orders"], Some("d\n")));
    let out = ok(&magnetar(
        &b,
        &[
            "consume",
            "orders",
            "--group",
            "billing",
            "--follow",
            "--idle-exit",
            "2",
        ],
        None,
    ));
    assert_eq!(out, "d\n");
}

#[test]
fn read_offsets_apply_to_every_partition_or_the_one_named() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    ok(&magnetar(&b, &["topic", "create", "feed", "-p", "3"], None));
    // Five records in each partition: "P-I" is record I of partition P.
    for p in 0..3 {
        let input: String = (0..5).map(|i| format!("{p}-{i}\n")).collect();
        ok(&magnetar(
            &b,
            &["produce", "feed", "--partition", &p.to_string()],
            Some(&input),
        ));
    }

    // A bare offset is that offset in every partition.
    let out = ok(&magnetar(&b, &["read", "feed", "--from", "3"], None));
    assert_eq!(
        lines_sorted(&out),
        vec!["0-3", "0-4", "1-3", "1-4", "2-3", "2-4"]
    );
    // PARTITION:OFFSET reads only that partition.
    let out = ok(&magnetar(&b, &["read", "feed", "--from", "2:3"], None));
    assert_eq!(out, "2-3\n2-4\n");
    // With --partition, a bare offset is in that partition.
    let out = ok(&magnetar(
        &b,
        &["read", "feed", "--from", "4", "--partition", "1"],
        None,
    ));
    assert_eq!(out, "1-4\n");

    // A partition that does not exist is "not found", however it is named.
    let missing = magnetar(&b, &["read", "feed", "--from", "99:1"], None);
    assert_eq!(code(&missing), 3, "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("partition 99"),
        "{}",
        stderr(&missing)
    );
    assert_eq!(
        code(&magnetar(&b, &["read", "feed", "--partition", "7"], None)),
        3
    );
    assert_eq!(
        code(&magnetar(
            &b,
            &["read", "feed", "--from", "1:1", "--partition", "2"],
            None
        )),
        2,
        "contradictory partitions are bad usage"
    );
}

#[test]
fn produce_creates_a_topic_only_as_the_broker_allows() {
    let allows = BrokerProcess::start(&["num.partitions=2"]);
    let out = ok(&magnetar(
        &allows.bootstrap(),
        &["produce", "fresh", "--print-offsets", "--partition", "1"],
        Some("x\n"),
    ));
    assert_eq!(out, "1\t0\n");
    let described = json(&magnetar(
        &allows.bootstrap(),
        &["topic", "describe", "fresh", "--json"],
        None,
    ));
    assert_eq!(described["partitions"].as_array().unwrap().len(), 2);

    let refuses = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let out = magnetar(&refuses.bootstrap(), &["produce", "fresh"], Some("x\n"));
    assert_eq!(code(&out), 3);
    let err = stderr(&out);
    assert!(
        err.contains("does not exist") && err.contains("magnetar topic create fresh"),
        "{err}"
    );
}

#[test]
fn group_commands_report_missing_groups_and_clamp_resets() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    ok(&magnetar(
        &b,
        &["topic", "create", "events", "-p", "1"],
        None,
    ));
    ok(&magnetar(&b, &["produce", "events"], Some("1\n2\n3\n")));

    assert_eq!(
        code(&magnetar(&b, &["group", "offsets", "nobody"], None)),
        3
    );
    assert_eq!(
        code(&magnetar(&b, &["group", "describe", "nobody"], None)),
        3
    );

    // A dry run says so and commits nothing.
    let dry = magnetar(
        &b,
        &[
            "group",
            "reset",
            "billing",
            "--topic",
            "events",
            "--to",
            "1",
            "--dry-run",
        ],
        None,
    );
    assert!(ok(&dry).contains("dry run"), "{}", ok(&dry));
    assert_eq!(
        code(&magnetar(&b, &["group", "offsets", "billing"], None)),
        3,
        "the dry run created nothing"
    );
    let dry_json = json(&magnetar(
        &b,
        &[
            "group",
            "reset",
            "billing",
            "--topic",
            "events",
            "--to",
            "1",
            "--dry-run",
            "--json",
        ],
        None,
    ));
    assert_eq!(dry_json["dry_run"], true);

    // Past the end of the log: clamped to the end, and said.
    let past = magnetar(
        &b,
        &[
            "group", "reset", "billing", "--topic", "events", "--to", "100", "--json",
        ],
        None,
    );
    let v: Value = serde_json::from_str(ok(&past).trim()).unwrap();
    assert_eq!(v["offsets"][0]["offset"], 3);
    assert!(
        stderr(&past).contains("past the latest offset"),
        "{}",
        stderr(&past)
    );
    let offsets = json(&magnetar(
        &b,
        &["group", "offsets", "billing", "--json"],
        None,
    ));
    assert_eq!(offsets["offsets"][0]["offset"], 3);
    assert_eq!(offsets["offsets"][0]["lag"], 0);
}

/// A one-connection HTTP server that answers anything with a 400.
fn http_server() -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut s) = stream else { return };
            let mut buf = [0u8; 512];
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (addr, t)
}

#[test]
fn bad_bootstrap_addresses_are_named_for_what_they_are() {
    let no_port = magnetar("127.0.0.1", &["topic", "list"], None);
    assert_eq!(code(&no_port), 2, "{}", stderr(&no_port));
    assert!(
        stderr(&no_port).contains("host:port"),
        "{}",
        stderr(&no_port)
    );

    let (http, _server) = http_server();
    let out = magnetar(&http, &["topic", "list"], None);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not a Kafka broker (it answered HTTP)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bench_cleans_up_unless_asked_to_keep() {
    let broker = BrokerProcess::start(&["group.initial.rebalance.delay.ms=0"]);
    let b = broker.bootstrap();
    let topics = |b: &str| -> Vec<String> {
        json(&magnetar(b, &["topic", "list", "--json"], None))["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["topic"].as_str().unwrap().to_string())
            .collect()
    };
    let args = [
        "bench",
        "produce",
        "--duration",
        "1",
        "--message-size",
        "100",
        "--partitions",
        "1",
        "--quiet",
        "--json",
    ];
    ok(&magnetar(&b, &args, None));
    assert!(topics(&b).is_empty(), "{:?}", topics(&b));

    let mut keep = args.to_vec();
    keep.push("--keep");
    ok(&magnetar(&b, &keep, None));
    assert_eq!(topics(&b), vec!["bench-0"]);
    // An existing topic is never deleted by a run that did not create it.
    ok(&magnetar(&b, &args, None));
    assert_eq!(topics(&b), vec!["bench-0"]);

    ok(&magnetar(
        &b,
        &[
            "bench",
            "e2e",
            "--duration",
            "1",
            "--rate",
            "200",
            "--partitions",
            "1",
            "--topic-prefix",
            "e2e",
            "--quiet",
            "--json",
        ],
        None,
    ));
    assert_eq!(topics(&b), vec!["bench-0"]);
    let groups = json(&magnetar(&b, &["group", "list", "--json"], None));
    assert_eq!(groups["groups"].as_array().unwrap().len(), 0, "{groups}");
}
