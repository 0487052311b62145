//! Kafka's inter-broker requests for transactions that span a cluster:
//! WriteTxnMarkers from a transaction's coordinator to the other brokers
//! it touches, and AddPartitionsToTxn v4 `verify_only` from a partition's
//! leader (or a group's coordinator) to the transaction's coordinator.
//! They go to the other broker's `inter.broker.listener.name` listener
//! through the native client, one connection per broker, kept.

use std::collections::HashMap;
use std::sync::Arc;

use broker::config::BrokerConfig;
use broker::txn::{
    MarkerRequest, PeerFuture, TxnError, TxnPartitionResult, TxnPeers, VerifyRequest,
};
use broker::Error;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

/// WriteTxnMarkers' version (the only one Kafka 4 keeps).
const MARKERS_VERSION: i16 = 1;
/// AddPartitionsToTxn's first brokers' version.
const VERIFY_VERSION: i16 = 4;

/// One peer's client, made on first use.
type PeerSlot = Arc<tokio::sync::Mutex<Option<client::Client>>>;

/// Reaches other brokers with the native client.
#[derive(Clone)]
pub struct KafkaPeers {
    security: client::SecurityConfig,
    /// By address; each connects on its own, so one unreachable broker
    /// never holds up the requests to the others.
    clients: Arc<std::sync::Mutex<HashMap<String, PeerSlot>>>,
}

impl KafkaPeers {
    /// Peers reached the way `config`'s inter-broker listener is secured:
    /// PLAINTEXT, or SSL with this broker's keystore certificate and
    /// truststore. A SASL listener is refused: brokers have no SASL
    /// credentials of their own.
    pub fn new(config: &BrokerConfig) -> Result<Arc<KafkaPeers>, String> {
        let listeners = config.kafka_listeners().map_err(|e| e.to_string())?;
        let named = config.string_value("inter.broker.listener.name");
        let listener = if named.is_empty() {
            listeners.first()
        } else {
            listeners.iter().find(|l| l.name == named)
        }
        .ok_or_else(|| {
            format!("inter.broker.listener.name: no listener is named {named:?} in listeners")
        })?;
        if listener.protocol.sasl() {
            return Err(format!(
                "inter.broker.listener.name: listener {} is {}; brokers reach each other over a PLAINTEXT or SSL listener",
                listener.name, listener.protocol
            ));
        }
        let security = if listener.protocol.tls() {
            let tls = config.tls_settings().ok_or_else(|| {
                format!(
                    "listener {} is {} but ssl.keystore.location is not set",
                    listener.name, listener.protocol
                )
            })?;
            let key = tls.key.clone().unwrap_or_else(|| tls.keystore.clone());
            let mut s = client::SecurityConfig::new(client::SecurityProtocol::Ssl)
                .tls_client_cert_files(tls.keystore.clone(), key);
            if let Some(ca) = &tls.truststore {
                s = s.tls_ca_file(ca.clone());
            }
            s
        } else {
            client::SecurityConfig::new(client::SecurityProtocol::Plaintext)
        };
        Ok(Arc::new(KafkaPeers {
            security,
            clients: Arc::new(std::sync::Mutex::new(HashMap::new())),
        }))
    }

    /// Sends `req` at `version` to the broker at `addr`; its answer.
    pub(crate) async fn call<R: kafka_protocol::protocol::Request>(
        &self,
        addr: &str,
        version: i16,
        req: &R,
    ) -> Result<R::Response, Error> {
        let conn = self.connection(addr).await?;
        conn.send(version, req)
            .map_err(|e| unreachable(addr, &e))?
            .await
            .map_err(|e| unreachable(addr, &e))
    }

    async fn connection(&self, addr: &str) -> Result<client::Connection, Error> {
        let slot = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(addr.to_string())
            .or_default()
            .clone();
        let mut slot = slot.lock().await;
        let c = match &*slot {
            Some(c) => c.clone(),
            None => {
                let config = client::ClientConfig::new([addr])
                    .client_id("magnetar-broker")
                    .security(self.security.clone());
                let c = client::Client::connect(config)
                    .await
                    .map_err(|e| unreachable(addr, &e))?;
                *slot = Some(c.clone());
                c
            }
        };
        drop(slot);
        c.connection_to(addr)
            .await
            .map_err(|e| unreachable(addr, &e))
    }
}

fn unreachable(addr: &str, e: &client::Error) -> Error {
    TxnError::CoordinatorNotAvailable(format!("broker {addr}: {e}")).into()
}

/// A partition's answer from another broker, as the broker core's error.
fn answer(code: i16, addr: &str, id: &str, epoch: i16, tp: &(String, i32)) -> Result<(), Error> {
    if code == 0 {
        return Ok(());
    }
    let e = ResponseError::try_from_code(code);
    Err(match e {
        Some(ResponseError::UnknownTopicOrPartition) => Error::UnknownTopic(tp.0.clone()),
        Some(ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch) => {
            TxnError::ProducerFenced {
                sent: epoch,
                current: -1,
            }
            .into()
        }
        Some(ResponseError::InvalidProducerIdMapping) => {
            TxnError::InvalidProducerIdMapping(id.to_string()).into()
        }
        Some(ResponseError::InvalidTxnState) => TxnError::InvalidTxnState(format!(
            "{}-{} is not in the open transaction of {id:?} (its coordinator, broker {addr}, says)",
            tp.0, tp.1
        ))
        .into(),
        Some(ResponseError::ConcurrentTransactions) => {
            TxnError::ConcurrentTransactions(id.to_string()).into()
        }
        Some(ResponseError::NotCoordinator) => TxnError::NotCoordinator(id.to_string()).into(),
        other => TxnError::CoordinatorNotAvailable(format!(
            "broker {addr} answered {}-{} with {}",
            tp.0,
            tp.1,
            other.map_or_else(|| format!("error {code}"), |e| format!("{e:?}"))
        ))
        .into(),
    })
}

/// The request's partitions by topic, in the wire's shape.
fn by_topic(partitions: &[(String, i32)]) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for (t, p) in partitions {
        match out.iter_mut().find(|(n, _)| n == t) {
            Some((_, ps)) => ps.push(*p),
            None => out.push((t.clone(), vec![*p])),
        }
    }
    out
}

/// Each partition asked about with its answer (UNKNOWN_SERVER_ERROR for
/// one the other broker left out).
fn per_partition(
    partitions: &[(String, i32)],
    codes: &HashMap<(String, i32), i16>,
    addr: &str,
    id: &str,
    epoch: i16,
) -> Vec<TxnPartitionResult> {
    partitions
        .iter()
        .map(|tp| {
            let code = codes
                .get(tp)
                .copied()
                .unwrap_or(ResponseError::UnknownServerError.code());
            (tp.clone(), answer(code, addr, id, epoch, tp))
        })
        .collect()
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

impl TxnPeers for KafkaPeers {
    fn write_markers(
        &self,
        addr: String,
        req: MarkerRequest,
    ) -> PeerFuture<Vec<TxnPartitionResult>> {
        let me = self.clone();
        Box::pin(async move {
            let topics = by_topic(&req.partitions)
                .into_iter()
                .map(|(t, ps)| {
                    WritableTxnMarkerTopic::default()
                        .with_name(topic_name(&t))
                        .with_partition_indexes(ps)
                })
                .collect();
            let marker = WritableTxnMarker::default()
                .with_producer_id(ProducerId(req.producer_id))
                .with_producer_epoch(req.producer_epoch)
                .with_transaction_result(req.commit)
                .with_coordinator_epoch(req.coordinator_epoch)
                .with_topics(topics);
            let wire = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
            let resp = me.call(&addr, MARKERS_VERSION, &wire).await?;
            let mut codes = HashMap::new();
            for m in &resp.markers {
                for t in &m.topics {
                    for p in &t.partitions {
                        codes.insert((t.name.to_string(), p.partition_index), p.error_code);
                    }
                }
            }
            let id = format!("producer {}", req.producer_id);
            Ok(per_partition(
                &req.partitions,
                &codes,
                &addr,
                &id,
                req.producer_epoch,
            ))
        })
    }

    fn verify(&self, addr: String, req: VerifyRequest) -> PeerFuture<Vec<TxnPartitionResult>> {
        let me = self.clone();
        Box::pin(async move {
            let topics = by_topic(&req.partitions)
                .into_iter()
                .map(|(t, ps)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(topic_name(&t))
                        .with_partitions(ps)
                })
                .collect();
            let txn = AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(
                    req.transactional_id.clone(),
                )))
                .with_producer_id(ProducerId(req.producer_id))
                .with_producer_epoch(req.producer_epoch)
                .with_verify_only(true)
                .with_topics(topics);
            let wire = AddPartitionsToTxnRequest::default().with_transactions(vec![txn]);
            let resp = me.call(&addr, VERIFY_VERSION, &wire).await?;
            let id = req.transactional_id.as_str();
            let epoch = req.producer_epoch;
            if resp.error_code != 0 {
                let first = req.partitions.first().cloned().unwrap_or_default();
                let e = answer(resp.error_code, &addr, id, epoch, &first);
                return Err(e.err().unwrap_or_else(|| {
                    TxnError::CoordinatorNotAvailable(format!("broker {addr}: no answer")).into()
                }));
            }
            let mut codes = HashMap::new();
            for r in &resp.results_by_transaction {
                for t in &r.topic_results {
                    for p in &t.results_by_partition {
                        codes.insert(
                            (t.name.to_string(), p.partition_index),
                            p.partition_error_code,
                        );
                    }
                }
            }
            Ok(per_partition(&req.partitions, &codes, &addr, id, epoch))
        })
    }
}
