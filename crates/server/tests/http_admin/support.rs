//! Helpers of the admin REST tests: an HTTP client that checks refusals,
//! Kafka-side views (Metadata, DescribeConfigs, topic ids and Fetch by id)
//! and a minimal raw-frame Pulsar connection.

use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, FetchRequest, MetadataRequest, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use magnetar_pulsar_wire::proto::command_partitioned_topic_metadata_response::LookupType;
use magnetar_pulsar_wire::proto::command_subscribe::{InitialPosition, SubType};
use magnetar_pulsar_wire::proto::{
    CommandConnect, CommandPartitionedTopicMetadata, CommandPong, CommandProducer,
    CommandSubscribe, ServerError,
};
use magnetar_pulsar_wire::{command, encode_command, Command, FrameDecoder};
use rdkafka::admin::{AdminClient, AdminOptions, ConfigSource, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use reqwest::Method;
use serde_json::Value;
use uuid::Uuid;

use crate::common::{client_config, BrokerProcess, RawConn};

pub const UNKNOWN_TOPIC_ID: i16 = 100;
pub const WAIT: Duration = Duration::from_secs(20);

/// The broker's HTTP service.
pub struct Http {
    base: String,
    client: reqwest::Client,
}

impl Http {
    pub fn of(broker: &BrokerProcess) -> Http {
        Http {
            base: broker.http_url(),
            client: reqwest::Client::new(),
        }
    }

    /// Sends `body` (as curl would: no JSON content type) and returns the
    /// status and the answer (JSON, or the text, `Null` if empty).
    pub async fn call(&self, method: Method, path: &str, body: Option<&str>) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.body(b.to_string());
        }
        let r = req.send().await.expect("http request");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, body)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None).await
    }

    /// Asserts a refusal: `status` and a non-empty reason containing `text`.
    pub async fn refused(
        &self,
        method: Method,
        path: &str,
        body: Option<&str>,
        status: u16,
        text: &str,
    ) {
        let (got, answer) = self.call(method.clone(), path, body).await;
        let reason = answer["reason"].as_str().unwrap_or_default();
        assert!(
            got == status && !reason.is_empty() && reason.contains(text),
            "{method} {path}: want {status} with {text:?}, got {got} {answer}"
        );
    }

    pub async fn ok(&self, method: Method, path: &str, body: Option<&str>) {
        let (got, answer) = self.call(method.clone(), path, body).await;
        assert_eq!(got, 204, "{method} {path}: {answer}");
    }
}

pub const TENANT: &str = r#"{"adminRoles": ["ops"], "allowedClusters": ["standalone"]}"#;

/// The status of a PUT announcing a body of `len` bytes, read before any
/// of the body is sent (a refusal by size comes at once; sending nothing
/// more keeps the broker's close of the connection clean).
pub fn status_of_announced_body(broker: &BrokerProcess, path: &str, len: usize) -> u16 {
    let url = broker.http_url();
    let mut s = TcpStream::connect(url.strip_prefix("http://").unwrap()).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
    .unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        let n = s.read(&mut byte).expect("a status line");
        assert_eq!(n, 1, "closed before a status line: {head:?}");
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head);
    line.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line {line:?}"))
}

/// Creates tenant `t` and namespace `t/ns` over REST.
pub async fn namespace(http: &Http, t: &str, ns: &str) {
    let (status, _) = http.get(&format!("/admin/v2/tenants/{t}")).await;
    if status == 404 {
        http.ok(Method::PUT, &format!("/admin/v2/tenants/{t}"), Some(TENANT))
            .await;
    }
    http.ok(Method::PUT, &format!("/admin/v2/namespaces/{t}/{ns}"), None)
        .await;
}

pub fn admin(b: &BrokerProcess) -> AdminClient<DefaultClientContext> {
    client_config(&b.bootstrap()).create().unwrap()
}

/// The partition count Kafka Metadata reports, or None if the topic does
/// not exist.
pub fn kafka_partitions(b: &BrokerProcess, topic: &str) -> Option<usize> {
    let c: BaseConsumer = client_config(&b.bootstrap()).create().unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let t = &md.topics()[0];
    t.error().is_none().then(|| t.partitions().len())
}

/// A topic key's value and source as Kafka DescribeConfigs reports it.
pub async fn kafka_config(b: &BrokerProcess, topic: &str, key: &str) -> (String, ConfigSource) {
    let r = admin(b)
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .unwrap();
    let res = r[0].as_ref().unwrap();
    let e = res.get(key).unwrap_or_else(|| panic!("{key} described"));
    let source = match e.source {
        ConfigSource::DynamicTopic => ConfigSource::DynamicTopic,
        ConfigSource::DynamicDefaultBroker => ConfigSource::DynamicDefaultBroker,
        ConfigSource::Default => ConfigSource::Default,
        _ => ConfigSource::Unknown,
    };
    (e.value.clone().unwrap_or_default(), source)
}

/// A minimal synchronous Pulsar connection (raw frames).
pub struct Pulsar {
    stream: TcpStream,
    buf: BytesMut,
    decoder: FrameDecoder,
    next_id: u64,
}

impl Pulsar {
    pub fn connect(broker: &BrokerProcess) -> Pulsar {
        let url = broker.pulsar_url();
        let stream = TcpStream::connect(url.strip_prefix("pulsar://").unwrap()).unwrap();
        let mut c = Pulsar {
            stream,
            buf: BytesMut::new(),
            decoder: FrameDecoder::default(),
            next_id: 1,
        };
        c.send(CommandConnect {
            client_version: "http-admin-test".into(),
            protocol_version: Some(21),
            ..Default::default()
        });
        assert!(matches!(c.expect(), Command::Connected(_)));
        c
    }

    pub fn send(&mut self, cmd: impl Into<Command>) {
        let mut b = BytesMut::new();
        encode_command(&command(cmd), &mut b).unwrap();
        self.stream.write_all(&b).unwrap();
    }

    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The next command (keep-alive pings answered and skipped).
    pub fn expect(&mut self) -> Command {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(f) = self.decoder.decode(&mut self.buf).expect("a good frame") {
                match Command::try_from(f.command).expect("a known command") {
                    Command::Ping(_) => self.send(CommandPong {}),
                    cmd => return cmd,
                }
                continue;
            }
            let now = Instant::now();
            assert!(now < deadline, "no answer within {WAIT:?}");
            self.stream.set_read_timeout(Some(deadline - now)).unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("the broker closed the connection"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), WouldBlock | TimedOut | Interrupted) => {}
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// PartitionedTopicMetadata without auto-creation: `Ok(partitions)` or
    /// the error code.
    pub fn partitions(&mut self, topic: &str) -> Result<u32, ServerError> {
        let request_id = self.id();
        self.send(CommandPartitionedTopicMetadata {
            topic: topic.into(),
            request_id,
            metadata_auto_creation_enabled: Some(false),
            ..Default::default()
        });
        match self.expect() {
            Command::PartitionedMetadataResponse(r)
                if r.response == Some(LookupType::Success as i32) =>
            {
                Ok(r.partitions.unwrap_or(0))
            }
            Command::PartitionedMetadataResponse(r) => {
                Err(ServerError::try_from(r.error.unwrap()).unwrap())
            }
            other => panic!("PartitionedTopicMetadata answered with {other:?}"),
        }
    }

    /// Attaches a producer; panics if refused.
    pub fn producer(&mut self, topic: &str, producer_id: u64) {
        let request_id = self.id();
        self.send(CommandProducer {
            topic: topic.into(),
            producer_id,
            request_id,
            ..Default::default()
        });
        match self.expect() {
            Command::ProducerSuccess(_) => {}
            other => panic!("PRODUCER {topic} answered with {other:?}"),
        }
    }

    /// Subscribes a consumer; panics if refused.
    pub fn subscribe(&mut self, topic: &str, consumer_id: u64) {
        let request_id = self.id();
        self.send(CommandSubscribe {
            topic: topic.into(),
            subscription: "busy".into(),
            sub_type: SubType::Shared as i32,
            consumer_id,
            request_id,
            initial_position: Some(InitialPosition::Earliest as i32),
            ..Default::default()
        });
        match self.expect() {
            Command::Success(_) => {}
            other => panic!("SUBSCRIBE {topic} answered with {other:?}"),
        }
    }
}

pub async fn topic_id(conn: &mut RawConn, name: &str) -> Uuid {
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))]));
    let ResponseKind::Metadata(resp) = conn.call(ApiKey::Metadata, 12, req).await else {
        panic!()
    };
    assert_eq!(resp.topics[0].error_code, 0, "{name}");
    resp.topics[0].topic_id
}

/// The error code of a Fetch v13 naming the topic by id.
pub async fn fetch_error_by_id(conn: &mut RawConn, id: Uuid) -> i16 {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let ResponseKind::Fetch(resp) = conn.call(ApiKey::Fetch, 13, req).await else {
        panic!()
    };
    resp.responses[0].partitions[0].error_code
}
