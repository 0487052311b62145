//! One Pulsar connection's state and its command dispatch: the handshake,
//! keep-alive answers, and the producers and consumers it attached. Each
//! command gets its answer (or the connection is closed for a protocol
//! violation); answers and messages leave through the connection's
//! outbound queue, written by the server's writer task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use broker::metrics::Outcome;
use broker::subscription::{Effect, SubscriptionType};
use bytes::{Bytes, BytesMut};
use magnetar_pulsar_wire::proto::{
    BaseCommand, CommandActiveConsumerChange, CommandCloseConsumer, CommandConnected,
    CommandConsumerStatsResponse, CommandError, CommandGetOrCreateSchemaResponse,
    CommandGetSchemaResponse, CommandPong, CommandSendError, CommandSuccess, FeatureFlags,
    ServerError,
};
use magnetar_pulsar_wire::{command, encode_command, Command, Payload};
use model::TopicName;
use tokio::sync::mpsc;
use tracing::debug;

use crate::authz::{self, Identity};
use crate::consumer::{self, Consumer};
use crate::dispatch::ConsumerOutlet;
use crate::error::PulsarError;
use crate::producer::{self, Producer};
use crate::receipts::{self, Receipt, Receipts};
use crate::shared::Shared;
use crate::{lookup, schema, topics};
use broker::security::acl::Operation;
use broker::security::Principal;
use magnetar_pulsar_core::admin::ClientInfo;

/// Highest protocol version spoken (ProtocolVersion v21).
pub const PROTOCOL_VERSION: i32 = 21;

/// Why a connection is closed.
pub type Close = String;

/// No error answered (`ServerError` codes are never negative).
const NO_ERROR: i32 = -1;
/// How long a message on a replicated partition waits for its in-sync
/// replicas before the producer hears an error (and retries).
const COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// One connection.
pub struct Session {
    conn: u64,
    shared: Arc<Shared>,
    out: mpsc::Sender<Bytes>,
    connected: bool,
    producers: HashMap<u64, Producer>,
    consumers: HashMap<u64, Consumer>,
    /// Where consumers disconnected by a Seek resume (by consumer id).
    sought: HashMap<u64, model::Offset>,
    /// The client, as its CONNECT described itself.
    client: Arc<ClientInfo>,
    /// The `ServerError` the command being handled was answered with, or
    /// [`NO_ERROR`] (metrics; atomic only so that `&Session` is `Sync`).
    answered_error: AtomicI32,
    /// The verified TLS client certificate's principal (TLS listener).
    certificate: Option<Result<Principal, String>>,
    /// Who the client is (anonymous until CONNECT authenticates it).
    identity: Arc<Identity>,
    /// Whether the client answers AuthChallenge (its feature flags).
    supports_refresh: bool,
    /// When the credentials must be refreshed or the connection closed.
    auth_deadline: Option<tokio::time::Instant>,
    /// Whether an AuthChallenge awaits its AuthResponse.
    challenged: bool,
    /// Answers to sends waiting for their partitions' in-sync replicas.
    receipts: Receipts,
}

impl Session {
    /// A fresh connection numbered `conn` from `peer`, answering through
    /// `out`.
    pub fn new(
        conn: u64,
        shared: Arc<Shared>,
        out: mpsc::Sender<Bytes>,
        peer: std::net::SocketAddr,
        certificate: Option<Result<Principal, String>>,
    ) -> Session {
        Session {
            certificate,
            identity: Arc::new(Identity {
                principal: Arc::new(Principal::anonymous()),
                host: peer.ip().to_canonical().to_string(),
                expires_ms: None,
                method: None,
                refusal: None,
            }),
            supports_refresh: false,
            auth_deadline: None,
            challenged: false,
            receipts: Receipts::default(),
            conn,
            shared,
            out,
            connected: false,
            producers: HashMap::new(),
            consumers: HashMap::new(),
            sought: HashMap::new(),
            client: Arc::new(ClientInfo {
                address: peer.to_string(),
                client_version: String::new(),
                connected_since_ms: broker::now_ms().0,
            }),
            answered_error: AtomicI32::new(NO_ERROR),
        }
    }

    async fn reply(&self, cmd: impl Into<Command>) -> Result<(), Close> {
        let cmd = cmd.into();
        if let Some(e) = crate::metrics::answer_error(&cmd) {
            self.answered_error.store(e, Ordering::Relaxed);
        }
        send(&self.out, command(cmd)).await
    }

    async fn error(&self, request_id: u64, e: PulsarError) -> Result<(), Close> {
        debug!(conn = self.conn, request_id, code = ?e.code, "refused: {}", e.message);
        self.reply(CommandError {
            request_id,
            error: e.code as i32,
            message: e.message,
        })
        .await
    }

    async fn answer(&self, request_id: u64, r: Result<(), PulsarError>) -> Result<(), Close> {
        match r {
            Ok(()) => {
                self.reply(CommandSuccess {
                    request_id,
                    schema: None,
                })
                .await
            }
            Err(e) => self.error(request_id, e).await,
        }
    }

    /// Handles one command; `Err` closes the connection. Counts it, with
    /// its outcome and the time until its answer was queued, in the
    /// broker's metrics.
    pub async fn handle(&mut self, cmd: Command, payload: Option<Payload>) -> Result<(), Close> {
        let started = tokio::time::Instant::now();
        let kind = cmd.kind();
        self.answered_error.store(NO_ERROR, Ordering::Relaxed);
        let r = self.handle_command(cmd, payload).await;
        let outcome = match (&r, self.answered_error.load(Ordering::Relaxed)) {
            (Err(_), _) => Outcome::Closed,
            (Ok(()), NO_ERROR) => Outcome::Ok,
            (Ok(()), e) => Outcome::Error(crate::metrics::error_name(e)),
        };
        self.shared.commands.record(
            kind as i32 as usize,
            crate::metrics::command_name(kind),
            outcome,
            started.elapsed(),
        );
        r
    }

    async fn handle_command(
        &mut self,
        cmd: Command,
        payload: Option<Payload>,
    ) -> Result<(), Close> {
        let broker = self.shared.broker.clone();
        if !self.connected {
            let Command::Connect(c) = cmd else {
                return Err(format!("{:?} before CONNECT", cmd.kind()));
            };
            self.authenticate_connect(&c).await?;
            self.connected = true;
            self.client = Arc::new(ClientInfo {
                address: self.client.address.clone(),
                client_version: c.client_version.clone(),
                connected_since_ms: self.client.connected_since_ms,
            });
            let version = c.protocol_version.unwrap_or(0).min(PROTOCOL_VERSION);
            return self
                .reply(CommandConnected {
                    server_version: format!("Magnetar {}", env!("CARGO_PKG_VERSION")),
                    protocol_version: Some(version),
                    max_message_size: Some(self.shared.max_message_size as i32),
                    feature_flags: Some(FeatureFlags {
                        supports_get_partitioned_metadata_without_auto_creation: Some(true),
                        ..Default::default()
                    }),
                })
                .await;
        }
        match cmd {
            Command::Connect(_) => Err("a second CONNECT".into()),
            Command::Ping(_) => self.reply(CommandPong {}).await,
            Command::Pong(_) => Ok(()),
            Command::PartitionedMetadata(c) => {
                let who = self.identity.clone();
                let r = blocking(move || lookup::partitioned_metadata(&broker, &who, &c)).await?;
                self.reply(r).await
            }
            Command::Lookup(c) => {
                let shared = self.shared.clone();
                let who = self.identity.clone();
                let r = blocking(move || lookup::lookup(&broker, &shared.urls, &who, &c)).await?;
                self.reply(r).await
            }
            Command::GetTopicsOfNamespace(c) => {
                let request_id = c.request_id;
                let who = self.identity.clone();
                match blocking(move || lookup::topics_of_namespace(&broker, &who, &c)).await? {
                    Ok(r) => self.reply(r).await,
                    Err(e) => self.error(request_id, e).await,
                }
            }
            Command::GetSchema(c) => {
                let r = authz::check_topic(
                    &broker,
                    &self.identity,
                    &c.topic,
                    Operation::Describe,
                    false,
                )
                .and_then(|()| schema_of(&self.shared, &c.topic, c.schema_version.as_deref()));
                let resp = match r {
                    Ok((schema, version)) => CommandGetSchemaResponse {
                        request_id: c.request_id,
                        schema: Some(schema),
                        schema_version: Some(version),
                        ..Default::default()
                    },
                    Err(e) => CommandGetSchemaResponse {
                        request_id: c.request_id,
                        error_code: Some(e.code as i32),
                        error_message: Some(e.message),
                        ..Default::default()
                    },
                };
                self.reply(resp).await
            }
            Command::GetOrCreateSchema(c) => {
                let shared = self.shared.clone();
                let request_id = c.request_id;
                let who = self.identity.clone();
                let r = blocking(move || {
                    authz::check_topic(&shared.broker, &who, &c.topic, Operation::Write, false)?;
                    let t = topics::parse(&shared.broker, &c.topic)?;
                    schema::get_or_create(&shared.broker, &t.kafka_name(), &c.schema)
                })
                .await?;
                let resp = match r {
                    Ok(version) => CommandGetOrCreateSchemaResponse {
                        request_id,
                        schema_version: Some(version),
                        ..Default::default()
                    },
                    Err(e) => CommandGetOrCreateSchemaResponse {
                        request_id,
                        error_code: Some(e.code as i32),
                        error_message: Some(e.message),
                        ..Default::default()
                    },
                };
                self.reply(resp).await
            }
            Command::Producer(c) => {
                let request_id = c.request_id;
                if self
                    .producers
                    .get(&c.producer_id)
                    .is_some_and(Producer::is_closed)
                {
                    // Closed by the broker: the client reconnects it.
                    self.producers.remove(&c.producer_id);
                }
                if let Some(p) = self.producers.get(&c.producer_id) {
                    // A client re-creating a producer it has (after a timeout).
                    if p.target.name.to_string()
                        == topics::parse(&self.shared.broker, &c.topic)
                            .map(|t| t.to_string())
                            .unwrap_or_default()
                    {
                        let ok = magnetar_pulsar_wire::proto::CommandProducerSuccess {
                            request_id,
                            producer_name: p.name.clone(),
                            last_sequence_id: Some(p.last_sequence_id()),
                            producer_ready: Some(true),
                            ..Default::default()
                        };
                        return self.reply(ok).await;
                    }
                    return self
                        .error(
                            request_id,
                            PulsarError::new(
                                ServerError::ProducerBusy,
                                "producer id in use on this connection",
                            ),
                        )
                        .await;
                }
                let shared = self.shared.clone();
                let conn = self.conn;
                let client = self.client.clone();
                let who = self.identity.clone();
                let out = self.out.clone();
                let created = blocking(move || {
                    authz::check_topic(&shared.broker, &who, &c.topic, Operation::Write, true)?;
                    producer::create(&shared.broker, &shared.producers, conn, client, out, &c)
                        .map(|(p, ok)| (c.producer_id, p, ok))
                })
                .await?;
                match created {
                    Ok((id, p, ok)) => {
                        self.producers.insert(id, p);
                        self.reply(ok).await
                    }
                    Err(e) => self.error(request_id, e).await,
                }
            }
            Command::Send(c) => {
                let Some(payload) = payload else {
                    return Err("SEND without a message".into());
                };
                let Some(p) = self.producers.get(&c.producer_id) else {
                    return self
                        .reply(CommandSendError {
                            producer_id: c.producer_id,
                            sequence_id: c.sequence_id,
                            error: ServerError::NotAllowedError as i32,
                            message: format!(
                                "producer {} is not open on this connection",
                                c.producer_id
                            ),
                        })
                        .await;
                };
                if p.is_closed() {
                    // Sent before the client heard of the close: it sends
                    // the message again once reconnected.
                    return Ok(());
                }
                match producer::send(
                    p,
                    &c,
                    &payload.metadata,
                    payload.data,
                    self.shared.max_message_size,
                    broker::now_ms(),
                ) {
                    Ok(sent) => {
                        if let Some(work) = sent.work {
                            let work = vec![(p.target.partition.clone(), work)];
                            if let Some(waited) = broker::complete_disk_work(work).await {
                                broker
                                    .metrics()
                                    .produce_flush_wait("pulsar")
                                    .observe(waited);
                            }
                        }
                        // On a replicated partition the message is
                        // persisted once the in-sync replicas have it, as
                        // Pulsar acknowledges after its write quorum; the
                        // connection reads on meanwhile.
                        let Some((next, epoch)) = sent.next else {
                            return self.answer_send(Receipt::Reply(sent.receipt.into())).await;
                        };
                        if self.receipts.len() >= Receipts::MAX {
                            let oldest = self.receipts.next().await;
                            self.deliver(oldest).await?;
                        }
                        let wait = p.target.partition.commit_wait(next, epoch);
                        self.receipts.push(receipts::committed(
                            p.target.partition.clone(),
                            c.producer_id,
                            c.sequence_id,
                            wait,
                            tokio::time::Instant::now() + COMMIT_TIMEOUT,
                            sent.receipt.into(),
                        ));
                        Ok(())
                    }
                    // Refused because another broker leads the partition
                    // now: the client is sent there.
                    Err(_) if !p.target.partition.leads() => {
                        self.answer_send(Receipt::Moved(c.producer_id)).await
                    }
                    Err(e) => {
                        self.answer_send(Receipt::Reply(
                            CommandSendError {
                                producer_id: c.producer_id,
                                sequence_id: c.sequence_id,
                                error: e.code as i32,
                                message: e.message,
                            }
                            .into(),
                        ))
                        .await
                    }
                }
            }
            // Answered after the receipts of the sends before it, as
            // upstream closes a producer once its pending writes are
            // acknowledged.
            Command::CloseProducer(c) => {
                self.producers.remove(&c.producer_id);
                self.answer_send(Receipt::Reply(
                    CommandSuccess {
                        request_id: c.request_id,
                        schema: None,
                    }
                    .into(),
                ))
                .await
            }
            Command::Subscribe(c) => self.subscribe(c).await,
            Command::Flow(c) => {
                if let Some(cons) = self.consumers.get(&c.consumer_id) {
                    // A consumer whose subscription was deleted just gets nothing.
                    let _ = broker
                        .subscriptions()
                        .flow(&cons.key, cons.id, c.message_permits);
                }
                Ok(())
            }
            Command::Ack(c) => {
                let Some(cons) = self.consumers.get(&c.consumer_id).cloned() else {
                    return Ok(());
                };
                let request_id = c.request_id;
                let consumer_id = c.consumer_id;
                let r = blocking(move || consumer::ack(&broker, &cons, &c)).await?;
                if let Err(e) = &r {
                    debug!(conn = self.conn, consumer_id, "ack refused: {e}");
                }
                if let Some(request_id) = request_id {
                    let (error, message) = match r {
                        Ok(()) => (None, None),
                        Err(e) => (Some(e.code as i32), Some(e.message)),
                    };
                    return self
                        .reply(magnetar_pulsar_wire::proto::CommandAckResponse {
                            consumer_id,
                            error,
                            message,
                            request_id: Some(request_id),
                            ..Default::default()
                        })
                        .await;
                }
                Ok(())
            }
            Command::RedeliverUnacknowledgedMessages(c) => {
                if let Some(cons) = self.consumers.get(&c.consumer_id).cloned() {
                    let _ = blocking(move || consumer::redeliver(&broker, &cons, &c.message_ids))
                        .await?;
                }
                Ok(())
            }
            Command::Seek(c) => {
                let request_id = c.request_id;
                let consumer_id = c.consumer_id;
                let Some(cons) = self.consumers.get(&consumer_id).cloned() else {
                    return self.error(request_id, not_found(consumer_id)).await;
                };
                let r = blocking(move || consumer::seek(&broker, &cons, &c)).await?;
                if let Ok(offset) = r {
                    self.sought.insert(consumer_id, offset);
                    // As upstream: the consumer is disconnected before the
                    // answer, so the client completes the seek when it
                    // reconnects (a Reader comes back with the seek target
                    // as its start).
                    self.close_consumer_of_client(consumer_id).await?;
                }
                self.answer(request_id, r.map(|_| ())).await
            }
            Command::GetLastMessageId(c) => {
                let request_id = c.request_id;
                let Some(cons) = self.consumers.get(&c.consumer_id).cloned() else {
                    return self.error(request_id, not_found(c.consumer_id)).await;
                };
                let r = blocking(move || consumer::last_message_id(&broker, &cons, &c)).await?;
                self.reply(r).await
            }
            Command::Unsubscribe(c) => {
                let request_id = c.request_id;
                let Some(cons) = self.consumers.get(&c.consumer_id).cloned() else {
                    return self.error(request_id, not_found(c.consumer_id)).await;
                };
                let force = c.force.unwrap_or(false);
                let r = blocking(move || {
                    broker
                        .subscriptions()
                        .unsubscribe(&cons.key, (!force).then_some(cons.id))
                        .map_err(PulsarError::from)
                })
                .await?;
                if r.is_ok() {
                    if let Some(cons) = self.consumers.remove(&c.consumer_id) {
                        self.shared.dispatchers.remove_outlet(cons.id);
                    }
                }
                self.answer(request_id, r).await
            }
            Command::CloseConsumer(c) => {
                self.detach_consumer(c.consumer_id).await;
                // The client flushed its acks before closing: store them
                // before answering, so a closed consumer's acks survive a
                // crash.
                match blocking(move || broker.subscriptions().flush_cursors()).await? {
                    Ok(n) => debug!(
                        conn = self.conn,
                        cursors = n,
                        "stored cursors at consumer close"
                    ),
                    Err(e) => tracing::warn!("cannot store subscription cursors: {e}"),
                }
                self.reply(CommandSuccess {
                    request_id: c.request_id,
                    schema: None,
                })
                .await
            }
            Command::ConsumerStats(c) => {
                let resp = match self.consumers.get(&c.consumer_id) {
                    Some(cons) => {
                        let end = cons.target.partition.log().log_end_offset();
                        let stats = broker.subscriptions().stats(&cons.key, end);
                        let me = stats
                            .as_ref()
                            .and_then(|s| s.consumers.iter().find(|x| x.id == cons.id).cloned());
                        CommandConsumerStatsResponse {
                            request_id: c.request_id,
                            consumer_name: Some(cons.name.clone()),
                            available_permits: me.as_ref().map(|m| m.permits),
                            unacked_messages: me.as_ref().map(|m| m.unacked as u64),
                            r#type: Some(cons.sub_type.to_string()),
                            msg_backlog: stats.map(|s| s.backlog),
                            ..Default::default()
                        }
                    }
                    None => CommandConsumerStatsResponse {
                        request_id: c.request_id,
                        error_code: Some(ServerError::ConsumerNotFound as i32),
                        error_message: Some(format!("consumer {} not found", c.consumer_id)),
                        ..Default::default()
                    },
                };
                self.reply(resp).await
            }
            Command::AuthResponse(c) => self.refreshed(c).await,
            other => Err(format!("unexpected {:?} from a client", other.kind())),
        }
    }

    async fn subscribe(
        &mut self,
        c: magnetar_pulsar_wire::proto::CommandSubscribe,
    ) -> Result<(), Close> {
        let request_id = c.request_id;
        let consumer_id = c.consumer_id;
        if self.consumers.contains_key(&consumer_id) {
            // A client subscribing again under the same id (reconnect
            // logic): start over.
            self.detach_consumer(consumer_id).await;
        }
        debug!(conn = self.conn, topic = %c.topic, subscription = %c.subscription, start = ?c.start_message_id, durable = ?c.durable, "subscribe");
        let shared = self.shared.clone();
        let conn = self.conn;
        let after_seek = self.sought.remove(&consumer_id);
        let who = self.identity.clone();
        let r = blocking(move || {
            let creates = c.force_topic_creation.unwrap_or(true);
            authz::check_topic(&shared.broker, &who, &c.topic, Operation::Read, creates)?;
            if c.durable.unwrap_or(true) {
                authz::check_subscription(&shared.broker, &who, &c.subscription)?;
            }
            if let Some(s) = &c.schema {
                schema::get_or_create(
                    &shared.broker,
                    &topics::parse(&shared.broker, &c.topic)?.kafka_name(),
                    s,
                )?;
            }
            consumer::subscribe(&shared.broker, conn, &c, after_seek)
        })
        .await?;
        let (cons, effects) = match r {
            Ok(x) => x,
            Err(e) => return self.error(request_id, e).await,
        };
        self.shared.dispatchers.add_outlet(
            cons.id,
            ConsumerOutlet {
                out: self.out.clone(),
                consumer_id,
                key: cons.key.clone(),
                client: self.client.clone(),
                traffic: Arc::default(),
                attached_ms: broker::now_ms().0,
                ids: cons.target.ids,
                report_redeliveries: matches!(
                    cons.sub_type,
                    SubscriptionType::Shared | SubscriptionType::KeyShared
                ),
                partition: cons.target.partition.clone(),
            },
        );
        self.shared.dispatchers.ensure_running(
            &self.shared.broker,
            cons.key.clone(),
            cons.target.partition.clone(),
        );
        self.consumers.insert(consumer_id, cons);
        self.reply(CommandSuccess {
            request_id,
            schema: None,
        })
        .await?;
        self.tell(effects).await;
        Ok(())
    }

    /// Sends Failover activity changes to the consumers concerned, on
    /// whichever connection they are.
    async fn tell(&self, effects: Vec<Effect>) {
        tell(&self.shared, effects).await;
    }

    async fn detach_consumer(&mut self, consumer_id: u64) {
        if let Some(cons) = self.consumers.remove(&consumer_id) {
            self.shared.dispatchers.remove_outlet(cons.id);
            let effects = self
                .shared
                .broker
                .subscriptions()
                .detach(&cons.key, cons.id)
                .unwrap_or_default();
            self.tell(effects).await;
        }
    }

    /// Answers a send now, or behind the answers still waiting (in order).
    async fn answer_send(&mut self, receipt: Receipt) -> Result<(), Close> {
        if self.receipts.is_empty() {
            self.deliver(receipt).await
        } else {
            self.receipts.push_ready(receipt);
            Ok(())
        }
    }

    /// Answers `cmd` (a send's answer) behind the answers still waiting.
    pub(crate) async fn answer_in_order(&mut self, cmd: Command) -> Result<(), Close> {
        self.answer_send(Receipt::Reply(cmd)).await
    }

    /// The oldest waiting answer to a send once it is ready (never, while
    /// none waits); cancel-safe. Give it to [`Session::deliver`].
    pub(crate) async fn next_receipt(&mut self) -> Receipt {
        self.receipts.next().await
    }

    /// Sends a send's answer to the client.
    pub(crate) async fn deliver(&self, receipt: Receipt) -> Result<(), Close> {
        match receipt {
            Receipt::Reply(cmd) => self.reply(cmd).await,
            Receipt::Moved(producer_id) => self.close_moved_producer(producer_id).await,
        }
    }

    /// Closes a producer whose partition is led by another broker now: the
    /// client hears CloseProducer, looks the partition up again and resends
    /// what was not acknowledged (deduplicated by its sequence ids).
    async fn close_moved_producer(&self, producer_id: u64) -> Result<(), Close> {
        let Some(p) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if !p.close() {
            return Ok(());
        }
        tracing::info!(conn = self.conn, producer_id, partition = %p.target.partition.tp, "producer closed: its partition is led elsewhere");
        self.reply(close_producer(producer_id)).await
    }

    /// Tells the client its consumer is closed (it reconnects it) and
    /// detaches it here.
    async fn close_consumer_of_client(&mut self, consumer_id: u64) -> Result<(), Close> {
        self.detach_consumer(consumer_id).await;
        self.reply(CommandCloseConsumer {
            consumer_id,
            request_id: u64::MAX,
            ..Default::default()
        })
        .await
    }

    /// Authenticates CONNECT; a refused client is answered
    /// AuthenticationError (after `connection.failed.authentication.delay.ms`)
    /// and closed.
    async fn authenticate_connect(
        &mut self,
        c: &magnetar_pulsar_wire::proto::CommandConnect,
    ) -> Result<(), Close> {
        let (method, data) = authz::connect_credentials(c);
        let r = authz::authenticate(
            &self.shared.security,
            method,
            data,
            self.certificate.as_ref(),
            &self.identity.host,
            broker::now_ms().0,
        );
        match r {
            Ok(identity) => {
                self.supports_refresh = c
                    .feature_flags
                    .as_ref()
                    .and_then(|f| f.supports_auth_refresh)
                    .unwrap_or(false);
                self.set_identity(identity);
                if self.identity.method.is_some() {
                    debug!(conn = self.conn, principal = %self.identity.principal, "pulsar client authenticated");
                }
                Ok(())
            }
            Err(f) => {
                tokio::time::sleep(self.shared.security.failed_delay).await;
                self.reply(CommandError {
                    request_id: u64::MAX,
                    error: ServerError::AuthenticationError as i32,
                    message: f.message,
                })
                .await?;
                Err(format!("authentication failed: {}", f.detail))
            }
        }
    }

    fn set_identity(&mut self, identity: Identity) {
        self.auth_deadline = identity.expires_ms.map(|end| {
            let left = end.saturating_sub(broker::now_ms().0).max(0) as u64;
            tokio::time::Instant::now() + std::time::Duration::from_millis(left)
        });
        self.identity = Arc::new(identity);
        self.challenged = false;
    }

    /// Whether CONNECT was accepted.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// When the connection's credentials end (the server wakes it then).
    pub fn auth_deadline(&self) -> Option<tokio::time::Instant> {
        self.auth_deadline
    }

    /// The credentials ended: a client that can refresh them is challenged
    /// (and given a keep-alive interval to answer), else the connection is
    /// closed, as upstream does.
    pub async fn auth_deadline_passed(&mut self) -> Result<(), Close> {
        if self.challenged || !self.supports_refresh {
            return Err(format!(
                "the credentials of {} expired",
                self.identity.principal
            ));
        }
        let method = self.identity.method.clone().unwrap_or_default();
        self.reply(magnetar_pulsar_wire::proto::CommandAuthChallenge {
            server_version: Some(format!("Magnetar {}", env!("CARGO_PKG_VERSION"))),
            challenge: Some(magnetar_pulsar_wire::proto::AuthData {
                auth_method_name: Some(method),
                auth_data: Some(Bytes::from_static(authz::REFRESH_AUTH_DATA)),
            }),
            protocol_version: Some(PROTOCOL_VERSION),
        })
        .await?;
        self.challenged = true;
        self.auth_deadline = Some(tokio::time::Instant::now() + self.shared.keep_alive);
        Ok(())
    }

    /// An AuthResponse: fresh credentials, which must name the same
    /// principal. One nobody asked for is ignored.
    async fn refreshed(
        &mut self,
        c: magnetar_pulsar_wire::proto::CommandAuthResponse,
    ) -> Result<(), Close> {
        if !self.challenged {
            return Ok(());
        }
        let data = c.response.unwrap_or_default();
        let r = authz::authenticate(
            &self.shared.security,
            data.auth_method_name.as_deref(),
            data.auth_data.as_deref(),
            self.certificate.as_ref(),
            &self.identity.host,
            broker::now_ms().0,
        );
        match r {
            Ok(identity) if identity.principal == self.identity.principal => {
                debug!(conn = self.conn, principal = %identity.principal, "pulsar credentials refreshed");
                self.set_identity(identity);
                Ok(())
            }
            Ok(identity) => Err(format!(
                "refreshed credentials name {} on a connection of {}",
                identity.principal, self.identity.principal
            )),
            Err(f) => Err(format!("refreshing credentials failed: {}", f.detail)),
        }
    }

    /// Detaches everything this connection attached (it is closing).
    pub async fn close(&mut self) {
        self.producers.clear();
        for cons in self.consumers.values() {
            self.shared.dispatchers.remove_outlet(cons.id);
        }
        self.consumers.clear();
        let detached = self
            .shared
            .broker
            .subscriptions()
            .detach_connection(self.conn);
        for (_, effects) in detached {
            tell(&self.shared, effects).await;
        }
    }
}

/// Sends Failover activity changes to the consumers concerned.
pub(crate) async fn tell(shared: &Shared, effects: Vec<Effect>) {
    for Effect::ActiveConsumerChanged { consumer, active } in effects {
        if let Some(outlet) = shared.dispatchers.outlet_of(consumer) {
            let _ = send(
                &outlet.out,
                command(CommandActiveConsumerChange {
                    consumer_id: consumer.consumer,
                    is_active: Some(active),
                }),
            )
            .await;
        }
    }
}

/// A CloseProducer the broker sends of itself (request id -1, as
/// upstream's).
pub(crate) fn close_producer(
    producer_id: u64,
) -> magnetar_pulsar_wire::proto::CommandCloseProducer {
    magnetar_pulsar_wire::proto::CommandCloseProducer {
        producer_id,
        request_id: u64::MAX,
        ..Default::default()
    }
}

/// Closes the producers and consumers of partitions another broker leads
/// now, so their clients look the new leader up: run at each leadership
/// change ([`broker::Broker::watch_leadership`]).
pub(crate) async fn close_moved(shared: &Shared) {
    for m in shared.producers.close_moved() {
        tracing::info!(
            producer_id = m.producer_id,
            "producer closed: its partition is led elsewhere"
        );
        let _ = send(&m.out, command(close_producer(m.producer_id))).await;
    }
    let subs = shared.broker.subscriptions();
    for (id, outlet) in shared.dispatchers.moved_outlets() {
        shared.dispatchers.remove_outlet(id);
        let effects = subs.detach(&outlet.key, id).unwrap_or_default();
        tracing::info!(
            consumer_id = outlet.consumer_id,
            partition = %outlet.partition.tp,
            "consumer closed: its partition is led elsewhere"
        );
        let close = command(CommandCloseConsumer {
            consumer_id: outlet.consumer_id,
            request_id: u64::MAX,
            ..Default::default()
        });
        let _ = send(&outlet.out, close).await;
        tell(shared, effects).await;
    }
}

fn not_found(consumer_id: u64) -> PulsarError {
    PulsarError::new(
        ServerError::ConsumerNotFound,
        format!("consumer {consumer_id} not found"),
    )
}

fn schema_of(
    shared: &Shared,
    topic: &str,
    version: Option<&[u8]>,
) -> Result<(magnetar_pulsar_wire::proto::Schema, Bytes), PulsarError> {
    let t = topics::parse(&shared.broker, topic)?;
    let name: TopicName = t.kafka_name();
    schema::get(&shared.broker, &name, version)
        .ok_or_else(|| PulsarError::new(ServerError::TopicNotFound, format!("no schema for {t}")))
}

/// Encodes and queues a command.
pub async fn send(out: &mpsc::Sender<Bytes>, cmd: BaseCommand) -> Result<(), Close> {
    let mut buf = BytesMut::new();
    encode_command(&cmd, &mut buf).map_err(|e| format!("cannot encode an answer: {e}"))?;
    out.send(buf.freeze())
        .await
        .map_err(|_| "connection writer gone".to_string())
}

/// Runs file work (topic creation, group-log writes, header reads) on the
/// blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Close> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("handler failed: {e}"))
}
