//! A minimal Pulsar binary-protocol connection for `bench --protocol
//! pulsar`: CONNECT, request/response by request id, PING/PONG, and the
//! receipts and messages the benchmark's producers and consumers wait for.
//! The frames are built with `magnetar-pulsar-wire` (a codec without I/O);
//! one connection serves one benchmark producer or consumer, so every event
//! goes to its single owner.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use magnetar_pulsar_wire::frame::{encode_command, encode_payload_command, FrameDecoder, Payload};
use magnetar_pulsar_wire::proto::{
    BaseCommand, CommandConnect, CommandPartitionedTopicMetadata, CommandPong, MessageIdData,
    MessageMetadata,
};
use magnetar_pulsar_wire::{command, Command};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::error::CliError;

/// The protocol version announced (the one the broker's codec matches).
const PROTOCOL_VERSION: i32 = 21;
/// How long a request may wait for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the broker sends that is not an answer to a request.
#[derive(Debug)]
pub enum Event {
    /// A SEND was stored (`Ok`) or refused (`Err` with the reason).
    Receipt {
        producer_id: u64,
        sequence_id: u64,
        result: Result<(), String>,
    },
    /// A MESSAGE for one of this connection's consumers.
    Message {
        consumer_id: u64,
        id: MessageIdData,
        /// Set bits: the messages of a batch meant for this consumer
        /// (empty: all of them).
        ack_set: Vec<i64>,
        payload: Box<Payload>,
    },
    /// The broker closed one of this connection's producers or consumers.
    Closed(String),
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Command>>>>;

/// One connection to a Pulsar broker.
pub struct Conn {
    url: String,
    out: mpsc::UnboundedSender<Bytes>,
    pending: Pending,
    next_request: AtomicU64,
}

impl Conn {
    /// Connects to `url` (`pulsar://host:port`) and completes CONNECT.
    pub async fn connect(url: &str) -> Result<(Conn, mpsc::UnboundedReceiver<Event>), CliError> {
        let addr = url.strip_prefix("pulsar://").ok_or_else(|| {
            CliError::Usage(format!(
                "--service-url {url:?} is not pulsar://host:port (pulsar+ssl is not supported)"
            ))
        })?;
        let unreachable = |e: std::io::Error| CliError::Unreachable {
            context: "cannot connect".into(),
            broker: url.to_string(),
            message: e.to_string(),
        };
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| unreachable(std::io::ErrorKind::TimedOut.into()))?
            .map_err(unreachable)?;
        stream.set_nodelay(true).map_err(unreachable)?;
        let (mut read, write) = stream.into_split();
        let mut buf = BytesMut::with_capacity(256 * 1024);
        let mut decoder = FrameDecoder::default();
        let mut hello = BytesMut::new();
        encode_command(
            &command(CommandConnect {
                client_version: "magnetar-bench".into(),
                protocol_version: Some(PROTOCOL_VERSION),
                ..Default::default()
            }),
            &mut hello,
        )
        .map_err(|e| failed(url, "cannot encode CONNECT", e))?;
        let mut w = BufWriter::with_capacity(256 * 1024, write);
        w.write_all(&hello).await.map_err(unreachable)?;
        w.flush().await.map_err(unreachable)?;
        // Until CONNECTED (or the broker's refusal).
        loop {
            if let Some(frame) = decoder
                .decode(&mut buf)
                .map_err(|e| failed(url, "bad frame from the broker", e))?
            {
                match Command::try_from(frame.command) {
                    Ok(Command::Connected(_)) => break,
                    Ok(Command::Error(e)) => {
                        return Err(failed(url, "the broker refused CONNECT", e.message))
                    }
                    other => {
                        return Err(failed(
                            url,
                            "not a Pulsar broker",
                            format!("{other:?} instead of CONNECTED"),
                        ))
                    }
                }
            }
            let n = tokio::time::timeout(REQUEST_TIMEOUT, read.read_buf(&mut buf))
                .await
                .map_err(|_| unreachable(std::io::ErrorKind::TimedOut.into()))?
                .map_err(unreachable)?;
            if n == 0 {
                return Err(unreachable(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
        let (out, mut to_write) = mpsc::unbounded_channel::<Bytes>();
        let (events, received) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        tokio::spawn(async move {
            // Frames queued together go out in one write.
            while let Some(frame) = to_write.recv().await {
                if w.write_all(&frame).await.is_err() {
                    return;
                }
                while let Ok(more) = to_write.try_recv() {
                    if w.write_all(&more).await.is_err() {
                        return;
                    }
                }
                if w.flush().await.is_err() {
                    return;
                }
            }
        });
        {
            let (pending, out) = (pending.clone(), out.clone());
            tokio::spawn(async move {
                let why = read_loop(read, buf, decoder, &pending, &out, &events).await;
                let _ = events.send(Event::Closed(why));
                // Requests still waiting fail: their senders are dropped.
                pending.lock().clear();
            });
        }
        Ok((
            Conn {
                url: url.to_string(),
                out,
                pending,
                next_request: AtomicU64::new(1),
            },
            received,
        ))
    }

    /// The service URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends a request built around a fresh request id; its answer.
    pub async fn request(&self, build: impl FnOnce(u64) -> Command) -> Result<Command, CliError> {
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(id, tx);
        self.send(&command(build(id)))?;
        match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(failed(&self.url, "connection lost", "no answer")),
            Err(_) => {
                self.pending.lock().remove(&id);
                Err(CliError::Unreachable {
                    context: "no answer in time".into(),
                    broker: self.url.clone(),
                    message: format!("{REQUEST_TIMEOUT:?}"),
                })
            }
        }
    }

    /// Sends a command without waiting for anything.
    pub fn send(&self, cmd: &BaseCommand) -> Result<(), CliError> {
        let mut out = BytesMut::new();
        encode_command(cmd, &mut out).map_err(|e| failed(&self.url, "cannot encode", e))?;
        self.send_frame(out.freeze())
    }

    /// Sends a SEND frame: the command, the metadata and the payload.
    pub fn send_payload(
        &self,
        cmd: &BaseCommand,
        metadata: &MessageMetadata,
        payload: &[u8],
        scratch: &mut BytesMut,
    ) -> Result<(), CliError> {
        encode_payload_command(cmd, metadata, &[payload], scratch)
            .map_err(|e| failed(&self.url, "cannot encode", e))?;
        self.send_frame(scratch.split().freeze())
    }

    fn send_frame(&self, frame: Bytes) -> Result<(), CliError> {
        self.out
            .send(frame)
            .map_err(|_| failed(&self.url, "connection lost", "the writer stopped"))
    }

    /// The partitions of `topic` (0: not partitioned); never creates it.
    pub async fn partitions(&self, topic: &str) -> Result<u32, CliError> {
        let answer = self
            .request(|request_id| {
                Command::PartitionedMetadata(CommandPartitionedTopicMetadata {
                    topic: topic.to_string(),
                    request_id,
                    metadata_auto_creation_enabled: Some(false),
                    ..Default::default()
                })
            })
            .await?;
        match answer {
            Command::PartitionedMetadataResponse(r) if r.error.is_none() => {
                Ok(r.partitions.unwrap_or(0))
            }
            Command::PartitionedMetadataResponse(r) => Err(failed(
                &self.url,
                &format!("cannot look up {topic}"),
                r.message.unwrap_or_default(),
            )),
            other => Err(unexpected(&self.url, &other)),
        }
    }
}

async fn read_loop(
    mut read: tokio::net::tcp::OwnedReadHalf,
    mut buf: BytesMut,
    mut decoder: FrameDecoder,
    pending: &Pending,
    out: &mpsc::UnboundedSender<Bytes>,
    events: &mpsc::UnboundedSender<Event>,
) -> String {
    loop {
        loop {
            let frame = match decoder.decode(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return format!("bad frame from the broker: {e}"),
            };
            let payload = frame.payload;
            let cmd = match Command::try_from(frame.command) {
                Ok(c) => c,
                // A command this codec does not know: not for us.
                Err(_) => continue,
            };
            let event = match cmd {
                Command::Ping(_) => {
                    let mut pong = BytesMut::new();
                    if encode_command(&command(CommandPong {}), &mut pong).is_ok() {
                        let _ = out.send(pong.freeze());
                    }
                    continue;
                }
                Command::SendReceipt(r) => Event::Receipt {
                    producer_id: r.producer_id,
                    sequence_id: r.sequence_id,
                    result: Ok(()),
                },
                Command::SendError(e) => Event::Receipt {
                    producer_id: e.producer_id,
                    sequence_id: e.sequence_id,
                    result: Err(e.message),
                },
                Command::Message(m) => match payload {
                    Some(payload) => Event::Message {
                        consumer_id: m.consumer_id,
                        id: m.message_id,
                        ack_set: m.ack_set,
                        payload: Box::new(payload),
                    },
                    None => return "a MESSAGE without payload".into(),
                },
                Command::CloseProducer(c) => {
                    Event::Closed(format!("the broker closed producer {}", c.producer_id))
                }
                Command::CloseConsumer(c) => {
                    Event::Closed(format!("the broker closed consumer {}", c.consumer_id))
                }
                other => {
                    if let Some(id) = request_id(&other) {
                        if let Some(tx) = pending.lock().remove(&id) {
                            let _ = tx.send(other);
                        }
                    }
                    continue;
                }
            };
            if events.send(event).is_err() {
                return "closed".into();
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) => return "the broker closed the connection".into(),
            Ok(_) => {}
            Err(e) => return format!("read failed: {e}"),
        }
    }
}

/// The request id an answer carries.
fn request_id(cmd: &Command) -> Option<u64> {
    Some(match cmd {
        Command::Success(c) => c.request_id,
        Command::Error(c) => c.request_id,
        Command::ProducerSuccess(c) => c.request_id,
        Command::PartitionedMetadataResponse(c) => c.request_id,
        _ => return None,
    })
}

/// A request's answer that is not one the caller can use.
pub fn unexpected(url: &str, answer: &Command) -> CliError {
    match answer {
        Command::Error(e) => failed(url, "the broker refused", &e.message),
        other => failed(url, "unexpected answer", format!("{:?}", other.kind())),
    }
}

/// A failure talking to the Pulsar broker at `url`.
pub fn failed(url: &str, context: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Failed {
        context: context.to_string(),
        broker: url.to_string(),
        message: e.to_string(),
    }
}
