//! Client quotas on the Kafka listener: after a request is handled, its
//! use is recorded against the client's quotas (produce bytes, fetch
//! bytes, handling time) and the answer carries the throttle time; the
//! server then reads nothing more from the connection for that long, as
//! Kafka mutes a throttled channel (KIP-219). A fetch over its quota is
//! answered empty, its bytes not counted, as Kafka does.

use std::time::Duration;

use broker::quota::QuotaKind;
use broker::Broker;
use kafka_protocol::messages::{ApiKey, ResponseKind};

use crate::fetch_response::{self, FetchAnswer};
use crate::{Outcome, RequestContext};

/// Sets a response's `throttle_time_ms`, where it has one.
fn set_throttle(r: &mut ResponseKind, ms: i32) {
    macro_rules! with_throttle {
        ($($v:ident),* $(,)?) => {
            match r {
                $(ResponseKind::$v(r) => r.throttle_time_ms = ms,)*
                _ => {}
            }
        };
    }
    with_throttle!(
        AddOffsetsToTxn,
        AddPartitionsToTxn,
        AlterClientQuotas,
        AlterConfigs,
        AlterPartitionReassignments,
        AlterReplicaLogDirs,
        AlterUserScramCredentials,
        ApiVersions,
        ConsumerGroupDescribe,
        ConsumerGroupHeartbeat,
        CreateAcls,
        CreatePartitions,
        CreateTopics,
        DeleteAcls,
        DeleteGroups,
        DeleteRecords,
        DeleteTopics,
        DescribeAcls,
        DescribeClientQuotas,
        DescribeCluster,
        DescribeConfigs,
        DescribeGroups,
        DescribeLogDirs,
        DescribeProducers,
        DescribeTopicPartitions,
        DescribeTransactions,
        DescribeUserScramCredentials,
        ElectLeaders,
        EndTxn,
        FindCoordinator,
        Heartbeat,
        IncrementalAlterConfigs,
        InitProducerId,
        JoinGroup,
        LeaveGroup,
        ListConfigResources,
        ListGroups,
        ListOffsets,
        ListPartitionReassignments,
        ListTransactions,
        Metadata,
        OffsetCommit,
        OffsetDelete,
        OffsetFetch,
        OffsetForLeaderEpoch,
        Produce,
        SyncGroup,
        TxnOffsetCommit,
    );
}

/// Whether a request's handling time is mostly waiting by design (a
/// long-polling fetch, a rebalance): not counted against
/// `request_percentage`.
fn waits(api: ApiKey) -> bool {
    matches!(
        api,
        ApiKey::Fetch | ApiKey::JoinGroup | ApiKey::SyncGroup | ApiKey::ApiVersions
    ) || matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)
}

/// Milliseconds on a monotonic clock (a wall-clock jump must not freeze
/// the samples).
fn now_ms() -> i64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as i64
}

/// Records the request against the client's quotas; returns the outcome
/// to send (with its throttle time) and how long to mute the connection.
pub(crate) fn apply(
    broker: &Broker,
    ctx: &RequestContext,
    outcome: Outcome,
    handling: Duration,
) -> (Outcome, Duration) {
    let quotas = broker.quotas();
    if !quotas.any() {
        return (outcome, Duration::ZERO);
    }
    let user = ctx.principal.name.as_str();
    let client = ctx.client_id.as_deref().unwrap_or("");
    let now = now_ms();
    let mut throttle = Duration::ZERO;
    if !waits(ctx.api_key) && quotas.enforces(QuotaKind::Request) {
        let percent_seconds = handling.as_secs_f64() * 100.0;
        throttle = quotas.record(QuotaKind::Request, user, client, percent_seconds, now);
    }
    if ctx.api_key == ApiKey::Produce && quotas.enforces(QuotaKind::Produce) {
        let t = quotas.record(
            QuotaKind::Produce,
            user,
            client,
            ctx.request_size as f64,
            now,
        );
        throttle = throttle.max(t);
    }
    let ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
    match outcome {
        Outcome::Reply(mut r) => {
            if ms > 0 {
                set_throttle(&mut r, ms);
            }
            (Outcome::Reply(r), throttle)
        }
        Outcome::Frame(frame)
            if ctx.api_key == ApiKey::Fetch && quotas.enforces(QuotaKind::Fetch) =>
        {
            let bytes = frame.len() as f64;
            let t = quotas.record(QuotaKind::Fetch, user, client, bytes, now);
            if t.is_zero() {
                return (Outcome::Frame(frame), throttle);
            }
            quotas.unrecord(QuotaKind::Fetch, user, client, bytes, now);
            let throttle = throttle.max(t);
            tracing::debug!(user, client, ?throttle, bytes, "fetch throttled");
            let answer = FetchAnswer {
                throttle_time_ms: i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX),
                ..FetchAnswer::default()
            };
            let empty = fetch_response::encode(&answer, ctx.correlation_id, ctx.api_version);
            (Outcome::Frame(empty), throttle)
        }
        other => (other, throttle),
    }
}
