//! Subscriptions over REST, as upstream Pulsar's admin API manages them
//! (`/admin/v2/persistent/{tenant}/{namespace}/{topic}/...`):
//!
//! - `GET .../subscriptions`: names (Readers included while connected);
//! - `PUT .../subscription/{sub}` (body: a message id, default latest):
//!   create a durable subscription there, on every partition of a
//!   partitioned topic;
//! - `DELETE .../subscription/{sub}?force=`: refused while consumers are
//!   connected unless forced (they are disconnected);
//! - `POST .../subscription/{sub}/resetcursor/{timestamp}` and
//!   `.../resetcursor` (body: a message id; not on a partitioned topic
//!   itself): consumers are disconnected, as upstream, and come back at
//!   the new position;
//! - `POST .../subscription/{sub}/skip_all`, `.../skip/{n}`: acknowledge
//!   the backlog, or its first `n` messages;
//! - `GET .../subscription/{sub}/position/{n}`: the `n`-th entry (1-based)
//!   holding unacknowledged messages, its payload uncompressed in the body
//!   and its metadata in `X-Pulsar-*` headers (what `pulsar-admin topics
//!   peek-messages` reads; not on a partitioned topic itself).
//!
//! Changed cursors are in the group log before the answer.

use std::sync::Arc;

use axum::body::Bytes as Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::Json;
use broker::subscription::{Cursor, LogBounds, StartPosition, SubscriptionKey};
use broker::Partition;
use magnetar_pulsar_core::message_id::{IdSpace, Position};
use magnetar_pulsar_wire::payload::{codec_of, decompress};
use magnetar_pulsar_wire::proto::MessageIdData;
use model::{Offset, PartitionId, Timestamp};
use serde::Deserialize;
use storage::BatchHeader;

use crate::error::ApiError;
use crate::state::{blocking, AppState};
use crate::topic::{Addressed, TopicParts};

/// Most bytes read per step while looking for an entry to peek.
const PEEK_READ: usize = 1 << 20;

/// `{tenant}/{namespace}/{topic}/{subscription}` (and a number).
#[derive(Debug, Deserialize)]
pub struct SubPath {
    #[serde(flatten)]
    topic: TopicParts,
    subscription: String,
}

/// [`SubPath`] with a trailing number (timestamp, count, position).
#[derive(Debug, Deserialize)]
pub struct SubNumberPath {
    #[serde(flatten)]
    topic: TopicParts,
    subscription: String,
    number: String,
}

impl SubNumberPath {
    fn number<T: std::str::FromStr>(&self, what: &str) -> Result<T, ApiError> {
        self.number
            .parse()
            .map_err(|_| ApiError::bad_request(format!("{what} {:?} is not a number", self.number)))
    }
}

/// A message id in a request body (upstream `MessageIdImpl` /
/// `ResetCursorData`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageIdBody {
    ledger_id: i64,
    entry_id: i64,
    #[serde(default = "minus_one")]
    partition_index: i32,
    #[serde(default = "minus_one")]
    batch_index: i32,
    /// Start after the message rather than at it.
    #[serde(default)]
    is_excluded: bool,
}

fn minus_one() -> i32 {
    -1
}

impl MessageIdBody {
    /// The id `MessageId.latest` serialises to.
    fn latest() -> MessageIdBody {
        MessageIdBody {
            ledger_id: i64::MAX,
            entry_id: i64::MAX,
            partition_index: -1,
            batch_index: -1,
            is_excluded: false,
        }
    }

    /// The offset of partition `p` this id points at.
    fn offset(&self, ids: IdSpace, p: &Partition) -> Offset {
        let id = MessageIdData {
            ledger_id: self.ledger_id as u64,
            entry_id: self.entry_id as u64,
            partition: Some(self.partition_index),
            batch_index: Some(self.batch_index),
            ..Default::default()
        };
        let log = p.log();
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        match ids.position(&id) {
            Position::Earliest | Position::OtherLedger => start,
            Position::Latest => end,
            Position::At(o) => Offset(o.0 + i64::from(self.is_excluded)).clamp(start, end),
        }
    }
}

/// Parses an optional JSON body (empty = `default`).
fn body_or<T: serde::de::DeserializeOwned>(body: &[u8], default: T) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(default);
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("bad JSON body: {e}")))
}

fn sub_key(a: &Addressed, n: u32, name: &str) -> SubscriptionKey {
    SubscriptionKey::new(a.topic.name.as_str(), n as i32, name)
}

fn partition(a: &Addressed, n: u32) -> Result<Arc<Partition>, ApiError> {
    Ok(a.topic.partition(PartitionId(n as i32))?.clone())
}

fn not_found_sub() -> ApiError {
    ApiError::not_found("Subscription not found")
}

/// The addressed partitions that have subscription `name`; 404 if none.
fn with_subscription(state: &AppState, a: &Addressed, name: &str) -> Result<Vec<u32>, ApiError> {
    let subs = state.broker.subscriptions();
    let found: Vec<u32> = a
        .partitions()
        .into_iter()
        .filter(|n| subs.cursor(&sub_key(a, *n, name)).is_some())
        .collect();
    if found.is_empty() {
        return Err(not_found_sub());
    }
    Ok(found)
}

/// Makes changed cursors durable before an answer.
fn flush(state: &AppState) -> Result<(), ApiError> {
    state.broker.subscriptions().flush_cursors()?;
    Ok(())
}

/// `GET .../subscriptions`.
pub async fn list(
    State(state): State<Arc<AppState>>,
    path: Result<Path<TopicParts>, PathRejection>,
) -> Result<Json<Vec<String>>, ApiError> {
    let parts = TopicParts::from_path(path)?;
    let names = blocking(move || {
        let a = Addressed::resolve(&state.broker, &parts)?;
        let mut names: Vec<String> = a
            .partitions()
            .into_iter()
            .flat_map(|n| {
                state
                    .broker
                    .subscriptions()
                    .list(a.topic.name.as_str(), n as i32, Offset(0))
            })
            .map(|s| s.name)
            .collect();
        names.sort();
        names.dedup();
        Ok::<_, ApiError>(names)
    })
    .await??;
    Ok(Json(names))
}

/// `PUT .../subscription/{sub}`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    path: Result<Path<SubPath>, PathRejection>,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let Path(p) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let at = body_or(&body, MessageIdBody::latest())?;
    blocking(move || {
        let a = Addressed::resolve(&state.broker, &p.topic)?;
        let subs = state.broker.subscriptions();
        let partitions = a.partitions();
        if partitions
            .iter()
            .any(|n| subs.cursor(&sub_key(&a, *n, &p.subscription)).is_some())
        {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "Subscription already exists for topic",
            ));
        }
        for n in partitions {
            let part = partition(&a, n)?;
            let log = part.log();
            let bounds = LogBounds {
                start: log.log_start_offset(),
                end: log.log_end_offset(),
            };
            let start = StartPosition::Offset(
                at.offset(IdSpace::new(a.topic.id, a.id_partition(n)), &part),
            );
            subs.create(
                &sub_key(&a, n, &p.subscription),
                start,
                bounds,
                broker::now_ms(),
            )?;
        }
        Ok(())
    })
    .await??;
    Ok(StatusCode::NO_CONTENT)
}

/// Query of the delete endpoint.
#[derive(Debug, Deserialize)]
pub struct ForceQuery {
    #[serde(default)]
    force: bool,
}

/// `DELETE .../subscription/{sub}`.
pub async fn delete(
    State(state): State<Arc<AppState>>,
    path: Result<Path<SubPath>, PathRejection>,
    query: Result<Query<ForceQuery>, QueryRejection>,
) -> Result<StatusCode, ApiError> {
    let Path(p) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (a, found) = {
        let state = state.clone();
        let parts = p.topic.clone();
        let name = p.subscription.clone();
        blocking(move || {
            let a = Addressed::resolve(&state.broker, &parts)?;
            let found = with_subscription(&state, &a, &name)?;
            Ok::<_, ApiError>((a, found))
        })
        .await??
    };
    let subs = state.broker.subscriptions();
    let connected = found.iter().any(|n| {
        subs.stats(&sub_key(&a, *n, &p.subscription), Offset(0))
            .is_some_and(|s| !s.consumers.is_empty())
    });
    if connected && !q.force {
        return Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "Subscription has active connected consumers",
        ));
    }
    for n in &found {
        disconnect(&state, &sub_key(&a, *n, &p.subscription)).await;
    }
    blocking(move || {
        for n in found {
            match state
                .broker
                .subscriptions()
                .unsubscribe(&sub_key(&a, n, &p.subscription), None)
            {
                Ok(()) | Err(broker::coordinator_error::CoordError::SubscriptionNotFound(_)) => {}
                Err(e) => return Err(ApiError::from(e)),
            }
        }
        Ok(())
    })
    .await??;
    Ok(StatusCode::NO_CONTENT)
}

async fn disconnect(state: &AppState, key: &SubscriptionKey) {
    if let Some(f) = &state.config.pulsar {
        f.disconnect(key).await;
    }
}

/// Disconnects the subscription's consumers on the addressed partitions,
/// then moves each cursor to `to(partition)` and persists it.
async fn reset(
    state: Arc<AppState>,
    a: Addressed,
    name: String,
    to: impl Fn(&Addressed, u32) -> Result<Offset, ApiError> + Send + 'static,
) -> Result<StatusCode, ApiError> {
    let found = {
        let (state, a, name) = (state.clone(), a.clone(), name.clone());
        blocking(move || with_subscription(&state, &a, &name)).await??
    };
    for n in &found {
        disconnect(&state, &sub_key(&a, *n, &name)).await;
    }
    blocking(move || {
        for n in found {
            let offset = to(&a, n)?;
            state
                .broker
                .subscriptions()
                .seek(&sub_key(&a, n, &name), offset)?;
        }
        flush(&state)
    })
    .await??;
    Ok(StatusCode::NO_CONTENT)
}

async fn addressed(state: &Arc<AppState>, parts: &TopicParts) -> Result<Addressed, ApiError> {
    let (state, parts) = (state.clone(), parts.clone());
    blocking(move || Addressed::resolve(&state.broker, &parts)).await?
}

/// `POST .../subscription/{sub}/resetcursor/{timestamp}`.
pub async fn reset_to_time(
    State(state): State<Arc<AppState>>,
    path: Result<Path<SubNumberPath>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path(p) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let ts: i64 = p.number("timestamp")?;
    let a = addressed(&state, &p.topic).await?;
    reset(state, a, p.subscription, move |a, n| {
        let part = partition(a, n)?;
        Ok(magnetar_pulsar_core::seek::offset_at_time(
            &part,
            Timestamp(ts),
        )?)
    })
    .await
}

/// `POST .../subscription/{sub}/resetcursor` (body: a message id).
pub async fn reset_to_id(
    State(state): State<Arc<AppState>>,
    path: Result<Path<SubPath>, PathRejection>,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let Path(p) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let id: MessageIdBody = body_or(&body, MessageIdBody::latest())?;
    let a = addressed(&state, &p.topic).await?;
    if a.is_partitioned_base() {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "Reset-cursor at position is not allowed for partitioned-topic",
        ));
    }
    reset(state, a, p.subscription, move |a, n| {
        let part = partition(a, n)?;
        Ok(id.offset(IdSpace::new(a.topic.id, a.id_partition(n)), &part))
    })
    .await
}

async fn skip(
    state: Arc<AppState>,
    parts: TopicParts,
    name: String,
    n: Option<u64>,
) -> Result<StatusCode, ApiError> {
    blocking(move || {
        let a = Addressed::resolve(&state.broker, &parts)?;
        for p in with_subscription(&state, &a, &name)? {
            let end = partition(&a, p)?.log().log_end_offset();
            state
                .broker
                .subscriptions()
                .skip(&sub_key(&a, p, &name), n, end)?;
        }
        flush(&state)
    })
    .await??;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST .../subscription/{sub}/skip_all`.
pub async fn skip_all(
    State(state): State<Arc<AppState>>,
    path: Result<Path<SubPath>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path(p) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    skip(state, p.topic, p.subscription, None).await
}

/// `POST .../subscription/{sub}/skip/{n}`: `n` messages (upstream counts
/// entries; here every message counts, batched or not).
pub async fn skip_n(
    State(state): State<Arc<AppState>>,
    path: Result<Path<SubNumberPath>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path(p) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let n: u64 = p.number("number of messages")?;
    skip(state, p.topic, p.subscription, Some(n)).await
}

/// `GET .../subscription/{sub}/position/{n}`.
pub async fn peek(
    State(state): State<Arc<AppState>>,
    path: Result<Path<SubNumberPath>, PathRejection>,
) -> Result<(HeaderMap, Vec<u8>), ApiError> {
    let Path(p) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let position: u64 = p.number("message position")?;
    if position == 0 {
        return Err(ApiError::bad_request("message positions start at 1"));
    }
    blocking(move || {
        let a = Addressed::resolve(&state.broker, &p.topic)?;
        if a.is_partitioned_base() {
            return Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "Peek messages on a partitioned topic is not allowed",
            ));
        }
        let n = a.partitions()[0];
        let cursor = state
            .broker
            .subscriptions()
            .cursor(&sub_key(&a, n, &p.subscription))
            .ok_or_else(not_found_sub)?;
        let part = partition(&a, n)?;
        let max = part.log().config().max_decompressed_bytes();
        let batch = nth_unacked_entry(&part, &cursor, position)?
            .ok_or_else(|| ApiError::not_found(format!("No message at position {position}")))?;
        let entry = magnetar_pulsar_core::convert::to_pulsar_entry(batch, max)
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let ids = IdSpace::new(a.topic.id, a.id_partition(n));
        let m = &entry.metadata;
        let codec = codec_of(m).map_err(internal)?;
        let body = decompress(
            codec,
            entry.payload.clone(),
            m.uncompressed_size.unwrap_or(0),
            max as usize,
        )
        .map_err(internal)?;
        let mut h = HeaderMap::new();
        let mut put = |name: &str, value: String| {
            if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
                h.insert(n, v);
            }
        };
        put(
            "X-Pulsar-Message-ID",
            format!("{}:{}", ids.ledger, entry.base_offset.0),
        );
        put("X-Pulsar-publish-time", date_of(m.publish_time));
        put("X-Pulsar-producer-name", m.producer_name.clone());
        put("X-Pulsar-sequence-id", m.sequence_id.to_string());
        if let Some(t) = m.event_time {
            put("X-Pulsar-event-time", date_of(t));
        }
        if let Some(k) = &m.partition_key {
            put("X-Pulsar-partition-key", k.clone());
        }
        if let Some(count) = m.num_messages_in_batch {
            put("X-Pulsar-num-batch-message", count.to_string());
            put("X-Pulsar-batch-size", body.len().to_string());
        }
        if !m.properties.is_empty() {
            let props: serde_json::Map<String, serde_json::Value> = m
                .properties
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone().into()))
                .collect();
            put(
                "X-Pulsar-Property",
                serde_json::Value::Object(props).to_string(),
            );
            for kv in &m.properties {
                put(&format!("X-Pulsar-PROPERTY-{}", kv.key), kv.value.clone());
            }
        }
        Ok((h, body.to_vec()))
    })
    .await?
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

fn date_of(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

/// The `n`-th stored batch (1-based) from the cursor's mark-delete position
/// that holds a message the cursor has not acknowledged; control batches
/// are skipped.
fn nth_unacked_entry(
    partition: &Partition,
    cursor: &Cursor,
    n: u64,
) -> Result<Option<bytes::Bytes>, ApiError> {
    let log = partition.log();
    let mut next = cursor.mark_delete().max(log.log_start_offset());
    let end = log.log_end_offset();
    let mut seen = 0u64;
    while next < end {
        let chunk = match partition.read(next, PEEK_READ, true) {
            Ok(c) => c,
            Err(broker::Error::Storage {
                source: storage::Error::OffsetOutOfRange { .. },
                ..
            }) => {
                // Retention moved the start meanwhile.
                next = log.log_start_offset();
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if chunk.records.is_empty() {
            break;
        }
        let mut rest = chunk.records;
        while rest.len() >= storage::batch::HEADER_LEN {
            let header = BatchHeader::parse(&rest).map_err(internal)?;
            let len = header.total_size();
            if len > rest.len() {
                break;
            }
            let batch = rest.split_to(len);
            let (base, after) = (header.base_offset, header.next_offset());
            next = after;
            if header.is_control() {
                continue;
            }
            if (base.0..after.0).any(|o| !cursor.is_acked(Offset(o))) {
                seen += 1;
                if seen == n {
                    return Ok(Some(batch));
                }
            }
        }
    }
    Ok(None)
}
