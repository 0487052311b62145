//! kcat (Debian's, built on librdkafka 2.0.2): an older client that breaks
//! on brokers which fill optional tagged fields with default values. It
//! must list metadata, produce and consume.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::BrokerProcess;

fn kcat(args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is needed for this test (apt-get install kcat; scripts/test installs it)");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kcat {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn kcat_lists_produces_and_consumes() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    kcat(
        &["-b", &b, "-P", "-t", "kc", "-K", ":"],
        Some("a:one\nb:two\nc:three\n"),
    );
    let consumed = kcat(
        &["-b", &b, "-C", "-t", "kc", "-e", "-f", "%k=%s@%o\n"],
        None,
    );
    assert_eq!(consumed, "a=one@0\nb=two@1\nc=three@2\n");
    let listing = kcat(&["-b", &b, "-L"], None);
    assert!(
        listing.contains("topic \"kc\" with 1 partitions"),
        "{listing}"
    );
    assert!(listing.contains(&format!("broker 1 at {b}")), "{listing}");
}
