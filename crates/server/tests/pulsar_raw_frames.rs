//! The Pulsar front end driven frame by frame by a plain synchronous client
//! (`std::net::TcpStream` + `magnetar_pulsar_wire`), for what the released
//! clients never send:
//!
//! - PIP-344 `CommandPartitionedTopicMetadata` with field 6
//!   (`metadata_auto_creation_enabled`) = false, and from a client that
//!   announced no feature flags, under each auto-creation policy: missing
//!   topics are TopicNotFound and are not created, existing ones give their
//!   partitions, `-partition-N` names give 0;
//! - bad input (oversized, undecodable or unknown frames, commands before
//!   CONNECT, wrong checksums, unknown producer/consumer ids) gets an error
//!   or closes only that connection, while the broker keeps serving new
//!   clients and data produced earlier stays readable;
//! - a proptest of arbitrary and mutated frames: the broker never dies;
//! - a named producer's sequence ids and its schema survive a SIGKILL: it
//!   is told its last sequence id, a resend gets the (-1, -1) id and is not
//!   stored, GetSchema answers the same schema and version, and consumers
//!   see the real producer name and sequence ids.

mod common;

use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::{assign_config, client_config, BrokerProcess};
use magnetar_pulsar_wire::proto::command_ack::AckType;
use magnetar_pulsar_wire::proto::command_partitioned_topic_metadata_response::LookupType;
use magnetar_pulsar_wire::proto::command_subscribe::{InitialPosition, SubType};
use magnetar_pulsar_wire::proto::*;
use magnetar_pulsar_wire::{
    command, decode_payload, encode_command, encode_payload_command, Command, FrameDecoder,
    MessagePayload, Payload,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

/// Generous deadline for any one answer.
const WAIT: Duration = Duration::from_secs(20);
/// Larger than the frame limit (announced max_message_size + 10 KiB, at
/// most `pulsar.max.message.size` (5 MiB) + 10 KiB).
const MAX_FRAME: u32 = 5 * 1024 * 1024 + 10 * 1024;

fn full(name: &str) -> String {
    format!("persistent://public/default/{name}")
}

/// What a read from the broker gave.
#[allow(clippy::large_enum_variant)]
enum Got {
    Frame(Command, Option<Payload>),
    Closed,
    Silent,
}

/// A raw Pulsar connection.
struct Raw {
    stream: TcpStream,
    buf: BytesMut,
    decoder: FrameDecoder,
    next_id: u64,
}

impl Raw {
    /// A TCP connection, no handshake yet.
    fn open(broker: &BrokerProcess) -> Raw {
        let url = broker.pulsar_url();
        let stream = TcpStream::connect(url.strip_prefix("pulsar://").unwrap())
            .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            buf: BytesMut::new(),
            decoder: FrameDecoder::default(),
            next_id: 1,
        }
    }

    /// Connects and completes CONNECT, announcing `flags`.
    fn handshake(broker: &BrokerProcess, flags: Option<FeatureFlags>) -> (Raw, CommandConnected) {
        let mut c = Raw::open(broker);
        c.send(CommandConnect {
            client_version: "raw-frames-test".into(),
            protocol_version: Some(21),
            feature_flags: flags,
            ..Default::default()
        });
        match c.expect() {
            Command::Connected(ok) => (c, ok),
            other => panic!("CONNECT answered with {other:?}"),
        }
    }

    /// A connected client announcing PIP-344 support (as the Java client).
    fn connect(broker: &BrokerProcess) -> Raw {
        let flags = FeatureFlags {
            supports_get_partitioned_metadata_without_auto_creation: Some(true),
            ..Default::default()
        };
        Raw::handshake(broker, Some(flags)).0
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn send(&mut self, cmd: impl Into<Command>) {
        self.send_bytes(&frame(cmd)).expect("write to the broker");
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next frame (a keep-alive PING is answered and skipped).
    fn read(&mut self, wait: Duration) -> Got {
        let deadline = Instant::now() + wait;
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(f)) => {
                    let cmd = Command::try_from(f.command).expect("broker sent a bad command");
                    if let Command::Ping(_) = cmd {
                        let _ = self.send_bytes(&frame(CommandPong {}));
                        continue;
                    }
                    return Got::Frame(cmd, f.payload);
                }
                Ok(None) => {}
                Err(e) => panic!("broker sent an undecodable frame: {e}"),
            }
            let now = Instant::now();
            if now >= deadline {
                return Got::Silent;
            }
            self.stream.set_read_timeout(Some(deadline - now)).unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Got::Closed,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), WouldBlock | TimedOut | Interrupted) => {}
                Err(_) => return Got::Closed, // reset
            }
        }
    }

    /// The next command; panics if the connection closes or stays silent.
    fn expect(&mut self) -> Command {
        match self.read(WAIT) {
            Got::Frame(c, _) => c,
            Got::Closed => panic!("the broker closed the connection"),
            Got::Silent => panic!("no answer within {WAIT:?}"),
        }
    }

    /// True if the broker closes the connection (frames before are skipped).
    fn closed_by_broker(&mut self) -> bool {
        loop {
            match self.read(WAIT) {
                Got::Frame(..) => {}
                Got::Closed => return true,
                Got::Silent => return false,
            }
        }
    }

    /// PING answered by PONG: the connection is still usable.
    fn assert_usable(&mut self, after: &str) {
        self.send(CommandPing {});
        match self.read(WAIT) {
            Got::Frame(Command::Pong(_), _) => {}
            Got::Frame(other, _) => panic!("after {after}: PING answered with {other:?}"),
            Got::Closed => panic!("after {after}: the connection was closed"),
            Got::Silent => panic!("after {after}: no PONG"),
        }
    }

    /// PartitionedTopicMetadata with field 6 as given (`None`: not sent).
    fn metadata(&mut self, topic: &str, auto: Option<bool>) -> MetadataAnswer {
        let request_id = self.id();
        self.send(metadata_cmd(topic, request_id, auto));
        match self.expect() {
            Command::PartitionedMetadataResponse(r) => {
                assert_eq!(r.request_id, request_id);
                MetadataAnswer(r)
            }
            other => panic!("PartitionedMetadata {topic} answered with {other:?}"),
        }
    }

    fn producer(&mut self, topic: &str, producer_id: u64) -> CommandProducerSuccess {
        let request_id = self.id();
        self.send(producer_cmd(topic, producer_id, request_id));
        match self.expect() {
            Command::ProducerSuccess(ok) => ok,
            other => panic!("PRODUCER {topic} answered with {other:?}"),
        }
    }

    /// The next command, which must be a SEND_ERROR.
    fn send_error(&mut self) -> CommandSendError {
        match self.expect() {
            Command::SendError(e) => e,
            other => panic!("expected SEND_ERROR, got {other:?}"),
        }
    }

    /// Sends one message and returns the broker's answer.
    fn publish(&mut self, producer_id: u64, seq: u64, value: &[u8]) -> Command {
        self.send_bytes(&send_frame(producer_id, seq, value))
            .unwrap();
        self.expect()
    }
}

/// A PartitionedTopicMetadata response.
struct MetadataAnswer(CommandPartitionedTopicMetadataResponse);

impl MetadataAnswer {
    fn partitions(&self) -> u32 {
        let r = &self.0;
        assert_eq!(r.response, Some(LookupType::Success as i32), "{r:?}");
        r.partitions.unwrap_or(0)
    }

    fn assert_not_found(&self) {
        let r = &self.0;
        assert_eq!(r.response, Some(LookupType::Failed as i32), "{r:?}");
        assert_eq!(r.error, Some(ServerError::TopicNotFound as i32), "{r:?}");
    }
}

fn metadata_cmd(topic: &str, id: u64, auto: Option<bool>) -> CommandPartitionedTopicMetadata {
    CommandPartitionedTopicMetadata {
        topic: full(topic),
        request_id: id,
        metadata_auto_creation_enabled: auto,
        ..Default::default()
    }
}

fn subscribe_cmd(topic: &str, sub: &str, consumer: u64, id: u64) -> CommandSubscribe {
    CommandSubscribe {
        topic: full(topic),
        subscription: sub.into(),
        sub_type: SubType::Exclusive as i32,
        consumer_id: consumer,
        request_id: id,
        initial_position: Some(InitialPosition::Earliest as i32),
        ..Default::default()
    }
}

fn producer_cmd(topic: &str, producer_id: u64, request_id: u64) -> CommandProducer {
    CommandProducer {
        topic: full(topic),
        producer_id,
        request_id,
        ..Default::default()
    }
}

fn frame(cmd: impl Into<Command>) -> Vec<u8> {
    let mut b = BytesMut::new();
    encode_command(&command(cmd), &mut b).unwrap();
    b.to_vec()
}

fn send_frame(producer_id: u64, sequence_id: u64, value: &[u8]) -> Vec<u8> {
    let metadata = MessageMetadata {
        producer_name: "raw".into(),
        sequence_id,
        publish_time: 1_700_000_000_000,
        ..Default::default()
    };
    let send = CommandSend {
        producer_id,
        sequence_id,
        num_messages: Some(1),
        ..Default::default()
    };
    let mut b = BytesMut::new();
    encode_payload_command(&command(send), &metadata, &[value], &mut b).unwrap();
    b.to_vec()
}

/// Offset of the `0x0e01` magic in a payload frame.
fn magic_at(frame: &[u8]) -> usize {
    8 + u32::from_be_bytes(frame[4..8].try_into().unwrap()) as usize
}

/// Big-endian u32s.
fn be(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A frame `[totalSize][commandSize][body]` with any body.
fn raw_frame(body: &[u8]) -> Vec<u8> {
    let n = body.len() as u32;
    [be(&[4 + n, n]), body.to_vec()].concat()
}

/// Topics the Kafka side lists, with their partition counts.
fn kafka_topics(broker: &BrokerProcess) -> Vec<(String, usize)> {
    let c: BaseConsumer = client_config(&broker.bootstrap()).create().unwrap();
    let md = c.fetch_metadata(None, WAIT).expect("kafka metadata");
    md.topics()
        .iter()
        .map(|t| (t.name().to_string(), t.partitions().len()))
        .collect()
}

fn assert_no_topic_like(broker: &BrokerProcess, prefix: &str) {
    let topics = kafka_topics(broker);
    assert!(
        topics.iter().all(|(n, _)| !n.starts_with(prefix)),
        "{topics:?}"
    );
}

fn kafka_partitions(broker: &BrokerProcess, topic: &str) -> Option<usize> {
    let topics = kafka_topics(broker);
    topics.into_iter().find(|(n, _)| n == topic).map(|t| t.1)
}

/// Every value in partition 0 of `topic`, read with librdkafka.
fn kafka_values(broker: &BrokerProcess, topic: &str) -> Vec<Vec<u8>> {
    let c: BaseConsumer = assign_config(&broker.bootstrap()).create().unwrap();
    let (_, high) = c.fetch_watermarks(topic, 0, WAIT).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::new();
    while (out.len() as i64) < high {
        assert!(Instant::now() < deadline, "read {} of {high}", out.len());
        if let Some(m) = common::polled(c.poll(Duration::from_millis(200))) {
            out.push(m.payload().unwrap_or_default().to_vec());
        }
    }
    out
}

/// The first `n` values of `topic`, read through a raw SUBSCRIBE + FLOW.
fn pulsar_values(broker: &BrokerProcess, topic: &str, n: usize) -> Vec<Vec<u8>> {
    pulsar_messages(broker, topic, n)
        .into_iter()
        .map(|m| m.2)
        .collect()
}

/// The first `n` messages of `topic` as (producer name, sequence id,
/// value), read through a raw SUBSCRIBE + FLOW.
fn pulsar_messages(broker: &BrokerProcess, topic: &str, n: usize) -> Vec<(String, u64, Vec<u8>)> {
    static SUBS: AtomicU64 = AtomicU64::new(0);
    let mut c = Raw::connect(broker);
    let request_id = c.id();
    let sub = format!("raw-check-{}", SUBS.fetch_add(1, Ordering::Relaxed));
    c.send(subscribe_cmd(topic, &sub, 1, request_id));
    match c.expect() {
        Command::Success(s) => assert_eq!(s.request_id, request_id),
        other => panic!("SUBSCRIBE answered with {other:?}"),
    }
    c.send(CommandFlow {
        consumer_id: 1,
        message_permits: 1000,
    });
    let mut out = Vec::new();
    while out.len() < n {
        let p = match c.read(WAIT) {
            Got::Frame(Command::Message(_), p) => p.expect("MESSAGE without payload"),
            Got::Frame(..) => continue,
            _ => panic!("{topic}: read {} of {n} messages", out.len()),
        };
        let name = p.metadata.producer_name.clone();
        match decode_payload(&p.metadata, p.data, 1 << 20).unwrap() {
            MessagePayload::Single(v) => out.push((name, p.metadata.sequence_id, v.to_vec())),
            MessagePayload::Batch(b) => out.extend(b.map(|m| {
                let (m, v) = m.unwrap();
                (name.clone(), m.sequence_id.unwrap_or_default(), v.to_vec())
            })),
        }
    }
    out
}

// ---- 1. PIP-344 ----

/// Field 6 = false on a partitioned-by-default broker (3 partitions).
#[test]
fn field6_false_never_creates_and_finds_partitioned_topics() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=partitioned", "num.partitions=3"]);
    let mut c = Raw::connect(&broker);

    // Missing: TopicNotFound with no text, asked twice, and not created.
    for _ in 0..2 {
        let r = c.metadata("missing-a", Some(false));
        r.assert_not_found();
        assert_eq!(r.0.message.as_deref().unwrap_or(""), "", "{:?}", r.0);
    }
    assert_eq!(kafka_partitions(&broker, "missing-a"), None);

    // Field 6 true creates it partitioned; then false finds it.
    assert_eq!(c.metadata("parted", Some(true)).partitions(), 3);
    assert_eq!(c.metadata("parted", Some(false)).partitions(), 3);
    assert_eq!(c.metadata("parted", None).partitions(), 3);
    assert_eq!(kafka_partitions(&broker, "parted"), Some(3));

    // Partition names: an existing partition is 0, whatever field 6 says.
    for auto in [Some(false), None, Some(true)] {
        assert_eq!(c.metadata("parted-partition-2", auto).partitions(), 0);
    }
    // A partition of a missing topic: not found, nothing created (even
    // where the base name would be).
    for auto in [Some(false), None, Some(true)] {
        c.metadata("ghost-partition-0", auto).assert_not_found();
    }
    assert_no_topic_like(&broker, "ghost");
    c.metadata("missing-a", Some(false)).assert_not_found();
}

/// Field 6 = false on existing non-partitioned topics, and an old client
/// (no flags, no field 6) auto-creating one.
#[test]
fn non_partitioned_topics_answer_zero() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let mut c = Raw::connect(&broker);

    // Created by a producer.
    c.producer("by-producer", 1);
    assert_eq!(c.metadata("by-producer", Some(false)).partitions(), 0);
    // Created by PartitionedMetadata with field 6 true.
    assert_eq!(c.metadata("by-metadata", Some(true)).partitions(), 0);
    assert_eq!(c.metadata("by-metadata", Some(false)).partitions(), 0);
    assert_eq!(kafka_partitions(&broker, "by-metadata"), Some(1));
    // Missing with false: still not created.
    c.metadata("still-missing", Some(false)).assert_not_found();

    // An old client: no flags, no field 6 → created, 0 partitions.
    let (mut old, _) = Raw::handshake(&broker, None);
    assert_eq!(old.metadata("old-np", None).partitions(), 0);
    assert_eq!(kafka_partitions(&broker, "old-np"), Some(1));
    assert_eq!(old.metadata("old-np", Some(false)).partitions(), 0);
    assert_eq!(kafka_partitions(&broker, "still-missing"), None);
}

/// PIP-344 case 6 (upstream PR #22838): no flags, no field 6, broker
/// refusing auto-creation → TopicNotFound, nothing created.
#[test]
fn old_client_without_broker_auto_creation_gets_not_found() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let (mut old, _) = Raw::handshake(&broker, None);
    for auto in [None, Some(true), Some(false)] {
        old.metadata("nope", auto).assert_not_found();
        old.metadata("nope-partition-0", auto).assert_not_found();
    }
    assert_no_topic_like(&broker, "nope");
}

/// No flags, no field 6, partitioned auto-creation with 2 partitions; the
/// broker announces PIP-344 support to every client.
#[test]
fn old_client_auto_creates_partitioned() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=partitioned", "num.partitions=2"]);
    let (mut old, ok) = Raw::handshake(&broker, None);
    let flags = ok.feature_flags.unwrap_or_default();
    assert_eq!(
        flags.supports_get_partitioned_metadata_without_auto_creation,
        Some(true)
    );
    // The smaller of pulsar.max.message.size (5 MiB) and what Kafka's
    // message.max.bytes leaves for one message.
    assert_eq!(ok.max_message_size, Some(1048588 - 16 * 1024));
    assert_eq!(ok.protocol_version, Some(21));
    assert_eq!(old.metadata("old-p", None).partitions(), 2);
    assert_eq!(kafka_partitions(&broker, "old-p"), Some(2));
    assert_eq!(old.metadata("old-p", None).partitions(), 2);
    assert_eq!(old.metadata("old-p-partition-1", None).partitions(), 0);
}

// ---- 2. Bad input ----

const KEPT: &str = "kept";

/// A well-behaved raw producer's messages, written before the attacks.
fn produce_kept(broker: &BrokerProcess) -> Vec<Vec<u8>> {
    let mut p = Raw::connect(broker);
    p.producer(KEPT, 1);
    let values: Vec<Vec<u8>> = (0..3).map(|i| format!("before-{i}").into_bytes()).collect();
    for (seq, v) in values.iter().enumerate() {
        match p.publish(1, seq as u64, v) {
            Command::SendReceipt(r) => assert_eq!(r.sequence_id, seq as u64),
            other => panic!("SEND answered with {other:?}"),
        }
    }
    values
}

/// A fresh client completes CONNECT + PartitionedMetadata, and the data
/// written before is intact.
fn still_serving(broker: &BrokerProcess, kept: &[Vec<u8>], after: &str) {
    let answer = Raw::connect(broker).metadata(KEPT, Some(false));
    assert_eq!(answer.partitions(), 0, "after {after}");
    let values = kafka_values(broker, KEPT);
    assert!(values.starts_with(kept), "after {after}: {values:?}");
    assert_no_panic(broker);
}

/// A panic in a connection task would not stop the broker; it shows here.
fn assert_no_panic(broker: &BrokerProcess) {
    let log = broker.log_text();
    assert!(!log.contains("panicked"), "the broker panicked:\n{log}");
}

/// Sends `bytes` (after CONNECT when `connect`) and expects the broker to
/// close that connection.
fn expect_closed(broker: &BrokerProcess, connect: bool, bytes: &[u8], what: &str) {
    let mut c = if connect {
        Raw::connect(broker)
    } else {
        Raw::open(broker)
    };
    // The broker may close before reading everything: a failed write is fine.
    let _ = c.send_bytes(bytes);
    assert!(c.closed_by_broker(), "{what}: the connection stayed open");
}

#[test]
fn bad_frames_close_only_their_connection() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let kept = produce_kept(&broker);
    // A bystander connection opened before the attacks keeps working.
    let mut bystander = Raw::connect(&broker);

    let good_send = send_frame(1, 0, b"x");
    let mut wrong_magic = good_send.clone();
    let at = magic_at(&wrong_magic);
    wrong_magic[at..at + 2].copy_from_slice(&0x0e07u16.to_be_bytes());
    // BaseCommand{type: 999}: field 1 as a varint.
    let unknown_type = raw_frame(&[0x08, 0xe7, 0x07]);
    let connected = frame(CommandConnected {
        server_version: "x".into(),
        ..Default::default()
    });
    let connect = frame(CommandConnect {
        client_version: "again".into(),
        ..Default::default()
    });
    let empty_send = frame(CommandSend {
        producer_id: 1,
        sequence_id: 1,
        ..Default::default()
    });
    let attacks: Vec<(&str, bool, Vec<u8>)> = vec![
        ("a frame over the size limit", true, be(&[MAX_FRAME + 1, 8])),
        ("a negative frame size", true, be(&[u32::MAX])),
        ("a command size past the frame", true, be(&[8, 1000, 0])),
        ("a totalSize below 4", true, be(&[2, 0])),
        ("a wrong payload magic", true, wrong_magic),
        ("undecodable protobuf", true, raw_frame(&[0xff; 7])),
        ("a command missing its body", true, raw_frame(&[0x08, 0x05])),
        ("an unknown command type", true, unknown_type),
        ("a broker-only command (CONNECTED)", true, connected),
        ("a second CONNECT", true, connect),
        ("a SEND without a message", true, empty_send),
        ("SEND before CONNECT", false, good_send),
        (
            "metadata before CONNECT",
            false,
            frame(metadata_cmd(KEPT, 1, None)),
        ),
    ];
    for (what, connect, bytes) in &attacks {
        expect_closed(&broker, *connect, bytes, what);
        still_serving(&broker, &kept, what);
    }
    bystander.assert_usable("the attacks");
    assert_eq!(bystander.metadata(KEPT, Some(false)).partitions(), 0);
}

#[test]
fn bad_sends_and_unknown_ids_get_errors_on_a_usable_connection() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let mut kept = produce_kept(&broker);
    let mut c = Raw::connect(&broker);
    c.producer(KEPT, 7);

    // A wrong CRC32C: ChecksumError for that SEND, then a good SEND works.
    let mut bad = send_frame(7, 10, b"corrupted");
    let at = magic_at(&bad) + 2;
    bad[at] ^= 0x5a;
    c.send_bytes(&bad).unwrap();
    let e = c.send_error();
    let checksum_error = ServerError::ChecksumError as i32;
    assert_eq!(
        (e.producer_id, e.sequence_id, e.error),
        (7, 10, checksum_error)
    );
    match c.publish(7, 11, b"after-crc") {
        Command::SendReceipt(r) => assert_eq!((r.producer_id, r.sequence_id), (7, 11)),
        other => panic!("the SEND after a bad checksum got {other:?}"),
    }
    kept.push(b"after-crc".to_vec());

    // A corrupted message body (not the CRC) is a checksum error too.
    let mut bad = send_frame(7, 12, b"flipped");
    let last = bad.len() - 1;
    bad[last] ^= 1;
    c.send_bytes(&bad).unwrap();
    assert_eq!(c.send_error().error, checksum_error);

    // SEND for a producer never created: SendError, connection kept.
    c.send_bytes(&send_frame(99, 1, b"orphan")).unwrap();
    let e = c.send_error();
    assert_eq!((e.producer_id, e.sequence_id), (99, 1));
    c.assert_usable("SEND for an unknown producer");

    // Consumer commands for ids never created: FLOW, ACK and REDELIVER get
    // no answer (as upstream), requests get an error or Success; no close.
    c.send(CommandFlow {
        consumer_id: 55,
        message_permits: 100,
    });
    c.send(CommandAck {
        consumer_id: 55,
        ack_type: AckType::Individual as i32,
        message_id: vec![MessageIdData::default()],
        ..Default::default()
    });
    c.send(CommandRedeliverUnacknowledgedMessages {
        consumer_id: 55,
        ..Default::default()
    });
    c.assert_usable("FLOW/ACK/REDELIVER for an unknown consumer");
    c.send(CommandGetLastMessageId {
        consumer_id: 55,
        request_id: 900,
    });
    c.send(CommandSeek {
        consumer_id: 55,
        request_id: 901,
        ..Default::default()
    });
    for request_id in 900..902 {
        match c.expect() {
            Command::Error(e) => assert_eq!(e.request_id, request_id, "{e:?}"),
            other => panic!("request {request_id} on an unknown consumer got {other:?}"),
        }
    }
    c.send(CommandCloseConsumer {
        consumer_id: 55,
        request_id: 902,
        ..Default::default()
    });
    c.send(CommandCloseProducer {
        producer_id: 56,
        request_id: 903,
        ..Default::default()
    });
    for request_id in 902..904 {
        match c.expect() {
            Command::Success(s) => assert_eq!(s.request_id, request_id),
            other => panic!("closing an unknown id got {other:?}"),
        }
    }
    // SUBSCRIBE to a partition a non-partitioned topic does not have.
    let request_id = c.id();
    c.send(subscribe_cmd("kept-partition-5", "s", 56, request_id));
    match c.expect() {
        Command::Error(e) => assert_eq!(e.request_id, request_id),
        other => panic!("SUBSCRIBE to a missing partition got {other:?}"),
    }
    c.assert_usable("the unknown ids");

    // Everything well-formed is still there, by Kafka and by Pulsar.
    assert_eq!(kafka_values(&broker, KEPT), kept);
    assert_eq!(pulsar_values(&broker, KEPT, kept.len()), kept);
    still_serving(&broker, &kept, "the bad sends");
}

// ---- 3. The front end never dies ----

/// Valid frames a client sends, to be mutated.
fn valid_frames() -> Vec<Vec<u8>> {
    vec![
        frame(metadata_cmd("fuzz", 1, Some(false))),
        frame(CommandLookupTopic {
            topic: full("fuzz"),
            request_id: 2,
            ..Default::default()
        }),
        frame(producer_cmd("fuzz", 1, 3)),
        send_frame(1, 0, b"fuzz-value"),
        frame(subscribe_cmd("fuzz", "fz", 1, 4)),
        frame(CommandFlow {
            consumer_id: 1,
            message_permits: 10,
        }),
        frame(CommandAck {
            consumer_id: 1,
            ack_type: AckType::Individual as i32,
            message_id: vec![MessageIdData {
                ledger_id: 1,
                entry_id: 0,
                ack_set: vec![-1],
                ..Default::default()
            }],
            ..Default::default()
        }),
        frame(CommandSeek {
            consumer_id: 1,
            request_id: 6,
            message_publish_time: Some(0),
            ..Default::default()
        }),
        frame(CommandPing {}),
    ]
}

#[derive(Debug, Clone)]
struct Mutation {
    frames: Vec<usize>,
    edits: Vec<(usize, u8)>,
    /// Flip one low bit per edit in the command protobuf only and fix the
    /// size fields, so the frame is cut right and its command (strings
    /// stay ASCII) decodes more often; else XOR bytes anywhere.
    in_command: bool,
    cut: Option<usize>,
}

fn flip(b: &mut [u8], edits: &[(usize, u8)], bit: bool) {
    for &(at, x) in edits {
        let len = b.len();
        b[at % len] ^= if bit { 1 << (x % 7) } else { x.max(1) };
    }
}

/// A valid PRODUCER and SUBSCRIBE (so ids exist), then the mutated frames.
fn mutate(valid: &[Vec<u8>], m: &Mutation) -> Vec<u8> {
    let mut b = [valid[2].clone(), valid[4].clone()].concat();
    for &i in &m.frames {
        let f = &valid[i % valid.len()];
        if m.in_command {
            let end = magic_at(f);
            let mut cmd = f[8..end].to_vec();
            flip(&mut cmd, &m.edits, true);
            let total = 4 + cmd.len() + f.len() - end;
            b.extend(be(&[total as u32, cmd.len() as u32]));
            b.extend(cmd);
            b.extend(&f[end..]);
        } else {
            let start = b.len();
            b.extend(f);
            flip(&mut b[start..], &m.edits, false);
        }
    }
    if let Some(cut) = m.cut {
        b.truncate(cut % (b.len() + 1));
    }
    b
}

/// Sends `bytes` after a CONNECT, half-closes, and waits for the broker to
/// close the connection (so it has handled everything); then a new client
/// must still be served.
fn survives(broker: &BrokerProcess, bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut c = Raw::connect(broker);
    let _ = c.send_bytes(bytes);
    let _ = c.stream.shutdown(Shutdown::Write);
    prop_assert!(
        c.closed_by_broker(),
        "the broker kept a half-closed connection open"
    );
    let mut fresh = Raw::connect(broker);
    prop_assert!(fresh.metadata(KEPT, Some(false)).partitions() == 0);
    Ok(())
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: 192,
        rng_seed: RngSeed::Fixed(0x5eed_4a11),
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    })
}

#[test]
fn the_front_end_never_dies() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let kept = produce_kept(&broker);
    let valid = valid_frames();

    let bytes = || proptest::collection::vec(any::<u8>(), 0..600);
    let mutations = (
        proptest::collection::vec(0..valid.len(), 1..4),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        any::<bool>(),
        proptest::option::weighted(0.2, any::<usize>()),
    );
    let inputs = prop_oneof![
        // Arbitrary bytes.
        bytes(),
        // Arbitrary protobuf in a well-formed frame.
        bytes().prop_map(|body| raw_frame(&body)),
        // Mutated valid frames.
        mutations.prop_map(move |(frames, edits, in_command, cut)| {
            let m = Mutation {
                frames,
                edits,
                in_command,
                cut,
            };
            mutate(&valid, &m)
        }),
    ];
    runner()
        .run(&inputs, |input| survives(&broker, &input))
        .unwrap();

    still_serving(&broker, &kept, "the fuzzing");
    assert_eq!(
        pulsar_values(&broker, KEPT, kept.len())[..kept.len()],
        kept[..]
    );
}

/// CONNECTED announces the largest message the broker stores (the smaller
/// of `pulsar.max.message.size` and what `message.max.bytes` leaves after
/// the Kafka batch framing), so a client never sends one that is refused:
/// a message of exactly that size is stored.
#[test]
fn a_message_up_to_the_announced_size_is_stored() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let (mut c, connected) = Raw::handshake(&broker, None);
    let max = connected
        .max_message_size
        .expect("max_message_size announced") as usize;
    assert!(max >= 1_000_000, "announced {max}");
    c.producer("big", 1);
    let value = vec![b'v'; max];
    match c.publish(1, 0, &value) {
        Command::SendReceipt(r) => assert_eq!(r.sequence_id, 0),
        other => panic!("a message of the announced {max} bytes got {other:?}"),
    }
}

// ---- 5. Durable producer state and schemas ----

fn test_schema() -> Schema {
    Schema {
        name: "orders".into(),
        schema_data: br#"{"type":"record","name":"Order","fields":[]}"#.to_vec().into(),
        r#type: schema::Type::Json as i32,
        properties: vec![KeyValue {
            key: "k".into(),
            value: "v".into(),
        }],
    }
}

/// Producer `name` with [`test_schema`] on `topic`.
fn named_producer(
    c: &mut Raw,
    topic: &str,
    producer_id: u64,
    name: &str,
) -> CommandProducerSuccess {
    let request_id = c.id();
    c.send(CommandProducer {
        producer_name: Some(name.into()),
        schema: Some(test_schema()),
        ..producer_cmd(topic, producer_id, request_id)
    });
    match c.expect() {
        Command::ProducerSuccess(ok) => ok,
        other => panic!("PRODUCER {name} answered with {other:?}"),
    }
}

/// The message id a SEND was answered with.
fn receipt_id(answer: Command) -> (u64, u64) {
    match answer {
        Command::SendReceipt(r) => {
            let id = r.message_id.expect("receipt with an id");
            (id.ledger_id, id.entry_id)
        }
        other => panic!("SEND answered with {other:?}"),
    }
}

#[test]
fn producer_sequences_and_schemas_survive_a_sigkill() {
    let mut broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let topic = "durable-raw";
    let mut c = Raw::connect(&broker);
    let ok = named_producer(&mut c, topic, 1, "fixed");
    assert_eq!(ok.last_sequence_id, Some(-1));
    let version = ok.schema_version.expect("a schema version");
    for seq in 0..3 {
        let (ledger, _) = receipt_id(c.publish(1, seq, format!("m-{seq}").as_bytes()));
        assert_ne!(ledger, u64::MAX, "stored");
    }
    // Acknowledged, not yet in any snapshot: only the log knows.
    broker.kill();
    broker.restart();

    let mut c = Raw::connect(&broker);
    let request_id = c.id();
    c.send(CommandGetSchema {
        request_id,
        topic: full(topic),
        schema_version: None,
    });
    match c.expect() {
        Command::GetSchemaResponse(r) => {
            assert_eq!(r.error_code, None, "{r:?}");
            assert_eq!(r.schema, Some(test_schema()));
            assert_eq!(r.schema_version.as_ref(), Some(&version));
        }
        other => panic!("GET_SCHEMA answered with {other:?}"),
    }
    let ok = named_producer(&mut c, topic, 1, "fixed");
    assert_eq!(ok.last_sequence_id, Some(2), "the last acknowledged id");
    assert_eq!(ok.schema_version, Some(version), "the same schema version");
    assert_eq!(
        receipt_id(c.publish(1, 2, b"again")),
        (u64::MAX, u64::MAX),
        "a resend is answered with (-1, -1)"
    );
    assert_ne!(receipt_id(c.publish(1, 3, b"m-3")).0, u64::MAX);

    let expected: Vec<(String, u64, Vec<u8>)> = (0..4)
        .map(|i| ("fixed".to_string(), i, format!("m-{i}").into_bytes()))
        .collect();
    assert_eq!(pulsar_messages(&broker, topic, 4), expected);
    assert_eq!(
        kafka_values(&broker, topic).len(),
        4,
        "nothing stored twice"
    );
}

/// A topic's own `max.message.bytes` (smaller than the broker's) is
/// enforced on SEND: the message is refused with NotAllowedError, as
/// upstream refuses a message over the topic's maximum, nothing is stored,
/// and the producer can go on with smaller messages.
#[test]
fn a_message_over_the_topic_max_message_bytes_is_refused() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let broker = BrokerProcess::start(&[]);
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap()).create().unwrap();
    let created = tokio::runtime::Runtime::new().unwrap().block_on(async {
        admin
            .create_topics(
                &[NewTopic::new("small-max", 1, TopicReplication::Fixed(1))
                    .set("max.message.bytes", "4096")],
                &AdminOptions::new(),
            )
            .await
            .unwrap()
    });
    assert!(created[0].is_ok(), "{created:?}");
    let mut c = Raw::connect(&broker);
    c.producer("small-max-partition-0", 1);
    match c.publish(1, 0, &vec![b'x'; 8192]) {
        Command::SendError(e) => {
            assert_eq!(e.error, ServerError::NotAllowedError as i32, "{e:?}");
            assert!(e.message.contains("maximum message size"), "{e:?}");
        }
        other => panic!("an 8 KiB message on a 4 KiB topic got {other:?}"),
    }
    match c.publish(1, 1, b"small") {
        Command::SendReceipt(r) => assert_eq!(r.sequence_id, 1),
        other => panic!("a small message after the refusal got {other:?}"),
    }
    assert_eq!(kafka_values(&broker, "small-max"), vec![b"small".to_vec()]);
}
