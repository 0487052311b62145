//! The Kafka wire-protocol front end over Magnetar's protocol-neutral
//! broker core.
//!
//! `frame` turns bytes into requests, one module per API turns a request
//! into a response (handlers never touch sockets), and `server` runs the
//! listener. Kafka's wire types and error codes stay inside this crate.

#![warn(missing_docs)]

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use broker::Broker;

mod acl_wire;
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_replica_log_dirs;
mod alter_user_scram_credentials;
mod api_versions;
mod authz;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_quorum;
mod describe_topic_partitions;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
pub mod error;
mod fetch;
mod fetch_response;
mod find_coordinator;
pub mod frame;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_config_resources;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod metrics;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
pub mod peers;
mod produce;
mod quota_wire;
mod replica_assignment;
pub mod response;
mod sasl_authenticate;
mod sasl_handshake;
pub mod server;
pub mod session;
mod stream;
mod sync_group;
#[cfg(test)]
mod tests;
mod throttle;
mod txn_offset_commit;
mod write_txn_markers;

pub use server::{serve, serve_listener, Server};
pub use session::ListenerSecurity;

/// An inclusive range of versions of one API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// Lowest supported version.
    pub min: i16,
    /// Highest supported version.
    pub max: i16,
}

impl Versions {
    /// `min..=max`.
    pub const fn new(min: i16, max: i16) -> Versions {
        Versions { min, max }
    }

    /// Whether `v` is in range.
    pub fn contains(&self, v: i16) -> bool {
        (self.min..=self.max).contains(&v)
    }
}

/// Every API this broker implements, with the versions it implements. This
/// table is what ApiVersions advertises; nothing outside it is answered.
pub const SUPPORTED_APIS: &[(ApiKey, Versions)] = &[
    (ApiKey::Produce, produce::VERSIONS),
    (ApiKey::Fetch, fetch::VERSIONS),
    (ApiKey::ListOffsets, list_offsets::VERSIONS),
    (ApiKey::Metadata, metadata::VERSIONS),
    (ApiKey::OffsetCommit, offset_commit::VERSIONS),
    (ApiKey::OffsetFetch, offset_fetch::VERSIONS),
    (ApiKey::FindCoordinator, find_coordinator::VERSIONS),
    (ApiKey::JoinGroup, join_group::VERSIONS),
    (ApiKey::Heartbeat, heartbeat::VERSIONS),
    (ApiKey::LeaveGroup, leave_group::VERSIONS),
    (ApiKey::SyncGroup, sync_group::VERSIONS),
    (ApiKey::DescribeGroups, describe_groups::VERSIONS),
    (ApiKey::ListGroups, list_groups::VERSIONS),
    (ApiKey::SaslHandshake, sasl_handshake::VERSIONS),
    (ApiKey::ApiVersions, api_versions::VERSIONS),
    (ApiKey::CreateTopics, create_topics::VERSIONS),
    (ApiKey::DeleteTopics, delete_topics::VERSIONS),
    (ApiKey::DeleteRecords, delete_records::VERSIONS),
    (ApiKey::InitProducerId, init_producer_id::VERSIONS),
    (ApiKey::AddPartitionsToTxn, add_partitions_to_txn::VERSIONS),
    (ApiKey::AddOffsetsToTxn, add_offsets_to_txn::VERSIONS),
    (ApiKey::EndTxn, end_txn::VERSIONS),
    (ApiKey::TxnOffsetCommit, txn_offset_commit::VERSIONS),
    (ApiKey::WriteTxnMarkers, write_txn_markers::VERSIONS),
    (
        ApiKey::OffsetForLeaderEpoch,
        offset_for_leader_epoch::VERSIONS,
    ),
    (ApiKey::DescribeAcls, describe_acls::VERSIONS),
    (ApiKey::CreateAcls, create_acls::VERSIONS),
    (ApiKey::DeleteAcls, delete_acls::VERSIONS),
    (ApiKey::DescribeConfigs, describe_configs::VERSIONS),
    (ApiKey::AlterConfigs, alter_configs::VERSIONS),
    (ApiKey::CreatePartitions, create_partitions::VERSIONS),
    (
        ApiKey::IncrementalAlterConfigs,
        incremental_alter_configs::VERSIONS,
    ),
    (ApiKey::DeleteGroups, delete_groups::VERSIONS),
    (ApiKey::OffsetDelete, offset_delete::VERSIONS),
    (ApiKey::SaslAuthenticate, sasl_authenticate::VERSIONS),
    (
        ApiKey::DescribeClientQuotas,
        describe_client_quotas::VERSIONS,
    ),
    (ApiKey::AlterClientQuotas, alter_client_quotas::VERSIONS),
    (ApiKey::DescribeCluster, describe_cluster::VERSIONS),
    (
        ApiKey::DescribeUserScramCredentials,
        describe_user_scram_credentials::VERSIONS,
    ),
    (
        ApiKey::AlterUserScramCredentials,
        alter_user_scram_credentials::VERSIONS,
    ),
    (
        ApiKey::ConsumerGroupHeartbeat,
        consumer_group_heartbeat::VERSIONS,
    ),
    (
        ApiKey::ConsumerGroupDescribe,
        consumer_group_describe::VERSIONS,
    ),
    (
        ApiKey::AlterReplicaLogDirs,
        alter_replica_log_dirs::VERSIONS,
    ),
    (ApiKey::DescribeLogDirs, describe_log_dirs::VERSIONS),
    (ApiKey::ElectLeaders, elect_leaders::VERSIONS),
    (
        ApiKey::AlterPartitionReassignments,
        alter_partition_reassignments::VERSIONS,
    ),
    (
        ApiKey::ListPartitionReassignments,
        list_partition_reassignments::VERSIONS,
    ),
    (ApiKey::DescribeQuorum, describe_quorum::VERSIONS),
    (ApiKey::DescribeProducers, describe_producers::VERSIONS),
    (
        ApiKey::DescribeTransactions,
        describe_transactions::VERSIONS,
    ),
    (ApiKey::ListTransactions, list_transactions::VERSIONS),
    (ApiKey::ListConfigResources, list_config_resources::VERSIONS),
    (
        ApiKey::DescribeTopicPartitions,
        describe_topic_partitions::VERSIONS,
    ),
];

/// The versions of `key` this broker implements, if any.
pub fn supported_versions(key: ApiKey) -> Option<Versions> {
    SUPPORTED_APIS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
}

/// What a handler knows about the request besides its body.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// Which API.
    pub api_key: ApiKey,
    /// Which version of it.
    pub api_version: i16,
    /// Echoed in the response header.
    pub correlation_id: i32,
    /// The client's self-reported id.
    pub client_id: Option<String>,
    /// The client's address as Kafka reports it (`/ip`).
    pub client_host: String,
    /// The key of the listener's endpoints in broker registrations: what
    /// Metadata, FindCoordinator and DescribeCluster answer with.
    pub listener: Arc<str>,
    /// The request's size in bytes (what a produce quota counts).
    pub request_size: usize,
    /// Who the client is on this connection (`User:ANONYMOUS` unless TLS
    /// or SASL said otherwise): what the authorizer is asked about.
    pub principal: Arc<broker::security::Principal>,
}

/// What to do after a request.
// Built once per request and moved once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Outcome {
    /// Send this response.
    Reply(ResponseKind),
    /// Send this response frame, encoded already (Fetch: written from the
    /// segment files in pieces).
    Frame(response::ResponseFrame),
    /// The protocol wants no response (Produce with acks=0).
    NoReply,
    /// Close the connection, logging why.
    Close(String),
}

/// Runs one decoded request. Requests that may wait on the disk (topic
/// creation and deletion, offset commits, timestamp lookups, ...) run on
/// the blocking pool, so disk work never stalls other connections; the
/// waiting ones (Fetch long-polls, group joins) stay async, and so does the
/// hot path: Produce appends and Fetch reads touch the page cache only and
/// hand their fsyncs to the blocking pool.
pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, request: RequestKind) -> Outcome {
    handle_timed(broker, ctx, request).await.0
}

/// [`handle`], and how long the broker worked on the request: a request
/// run on the blocking pool counts from when it starts there, not while it
/// queued for it (what `request_percentage` quotas count).
pub async fn handle_timed(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: RequestKind,
) -> (Outcome, std::time::Duration) {
    let started = std::time::Instant::now();
    let mut work = None;
    let outcome = handle_inner(broker, ctx, request, &mut work).await;
    (outcome, work.unwrap_or_else(|| started.elapsed()))
}

async fn handle_inner(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: RequestKind,
    work: &mut Option<std::time::Duration>,
) -> Outcome {
    let v = ctx.api_version;
    let access = authz::Access::of(broker, ctx);
    let reply =
        match request {
            RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(v, r)),
            RequestKind::Produce(r) => return produce::handle(broker, &access, v, r).await,
            RequestKind::Fetch(r) => {
                // Under a consumer quota no answer may exceed what its window
                // lets through (Kafka's getMaxValueInQuotaWindow).
                let cap = broker
                    .quotas()
                    .fetch_cap(&ctx.principal.name, ctx.client_id.as_deref().unwrap_or(""));
                return Outcome::Frame(
                    fetch::handle(broker, &access, ctx.correlation_id, v, r, cap).await,
                );
            }
            RequestKind::JoinGroup(r) => {
                ResponseKind::JoinGroup(join_group::handle(broker, ctx, r).await)
            }
            RequestKind::SyncGroup(r) => {
                ResponseKind::SyncGroup(sync_group::handle(broker, ctx, r).await)
            }
            RequestKind::ListGroups(r) => {
                ResponseKind::ListGroups(list_groups::handle(broker, &access, v, r))
            }
            RequestKind::DescribeGroups(r) => {
                ResponseKind::DescribeGroups(describe_groups::handle(broker, &access, v, r))
            }
            RequestKind::ConsumerGroupDescribe(r) => ResponseKind::ConsumerGroupDescribe(
                consumer_group_describe::handle(broker, &access, v, r),
            ),
            RequestKind::OffsetFetch(r) => {
                ResponseKind::OffsetFetch(offset_fetch::handle(broker, &access, v, r))
            }
            RequestKind::DescribeConfigs(r) => {
                ResponseKind::DescribeConfigs(describe_configs::handle(broker, &access, v, r))
            }
            RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(
                describe_cluster::handle(broker, &access, &ctx.listener, v, r),
            ),
            RequestKind::DescribeTopicPartitions(r) => ResponseKind::DescribeTopicPartitions(
                describe_topic_partitions::handle(broker, &access, r),
            ),
            RequestKind::ListConfigResources(r) => ResponseKind::ListConfigResources(
                list_config_resources::handle(broker, &access, v, r),
            ),
            RequestKind::ElectLeaders(r) => {
                ResponseKind::ElectLeaders(elect_leaders::handle(broker, &access, v, r))
            }
            RequestKind::AlterPartitionReassignments(r) => {
                ResponseKind::AlterPartitionReassignments(alter_partition_reassignments::handle(
                    broker, &access, v, r,
                ))
            }
            RequestKind::ListPartitionReassignments(r) => ResponseKind::ListPartitionReassignments(
                list_partition_reassignments::handle(&access, r),
            ),
            RequestKind::DescribeProducers(r) => {
                ResponseKind::DescribeProducers(describe_producers::handle(broker, &access, r))
            }
            // The server answers these from the connection's session; without
            // one (no SASL on the connection) they are out of place.
            RequestKind::SaslHandshake(r) => {
                let mut session =
                    session::Session::new(broker::security::SecurityProtocol::Plaintext, None);
                let listener = session::ListenerSecurity::plaintext();
                ResponseKind::SaslHandshake(sasl_handshake::handle(&mut session, &listener, r).0)
            }
            RequestKind::SaslAuthenticate(_) => ResponseKind::SaslAuthenticate(
                kafka_protocol::messages::SaslAuthenticateResponse::default()
                    .with_error_code(kafka_protocol::error::ResponseError::IllegalSaslState.code()),
            ),
            other => {
                let broker = broker.clone();
                let ctx = ctx.clone();
                let run = move || {
                    let started = std::time::Instant::now();
                    let outcome = handle_blocking(&broker, &ctx, other);
                    (outcome, started.elapsed())
                };
                return match tokio::task::spawn_blocking(run).await {
                    Ok((outcome, took)) => {
                        *work = Some(took);
                        outcome
                    }
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                };
            }
        };
    Outcome::Reply(reply)
}

/// The requests that may do file work; run on the blocking pool.
fn handle_blocking(broker: &Arc<Broker>, ctx: &RequestContext, request: RequestKind) -> Outcome {
    let v = ctx.api_version;
    let access = authz::Access::of(broker, ctx);
    Outcome::Reply(match request {
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(metadata::handle(broker, &access, &ctx.listener, v, r))
        }
        // In a cluster the first lookup places the coordinators.
        RequestKind::FindCoordinator(r) => ResponseKind::FindCoordinator(find_coordinator::handle(
            broker,
            &access,
            &ctx.listener,
            v,
            r,
        )),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(heartbeat::handle(broker, &access, r)),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(leave_group::handle(broker, &access, v, r))
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offset_commit::handle(broker, &access, v, r))
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offset_delete::handle(broker, &access, r))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(delete_groups::handle(broker, &access, r))
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            ResponseKind::ConsumerGroupHeartbeat(consumer_group_heartbeat::handle(broker, ctx, r))
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker, &access, v, r))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(broker, &access, v, r))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(broker, &access, v, r))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(broker, &access, r))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(broker, &access, r))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(broker, &access, v, r))
        }
        // The transaction coordinator persists, and EndTxn writes markers.
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(add_partitions_to_txn::handle(broker, &access, v, r))
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(add_offsets_to_txn::handle(broker, &access, v, r))
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(end_txn::handle(broker, &access, v, r)),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(txn_offset_commit::handle(broker, &access, v, r))
        }
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers::handle(broker, &access, r))
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(describe_transactions::handle(broker, &access, r))
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(list_transactions::handle(broker, &access, v, r))
        }
        // Asks the quorum's leader.
        RequestKind::DescribeQuorum(r) => {
            ResponseKind::DescribeQuorum(describe_quorum::handle(broker, &access, v, r))
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(broker, &access, r))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle(broker, &access, r))
        }
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            incremental_alter_configs::handle(broker, &access, r),
        ),
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(broker, &access, v, r))
        }
        RequestKind::AlterReplicaLogDirs(r) => {
            ResponseKind::AlterReplicaLogDirs(alter_replica_log_dirs::handle(broker, &access, r))
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(describe_client_quotas::handle(broker, &access, r))
        }
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(alter_client_quotas::handle(broker, &access, r))
        }
        RequestKind::DescribeAcls(r) => {
            ResponseKind::DescribeAcls(describe_acls::handle(broker, &access, r))
        }
        // Commit to the metadata.
        RequestKind::CreateAcls(r) => {
            ResponseKind::CreateAcls(create_acls::handle(broker, &access, r))
        }
        RequestKind::DeleteAcls(r) => {
            ResponseKind::DeleteAcls(delete_acls::handle(broker, &access, r))
        }
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            describe_user_scram_credentials::handle(broker, &access, r),
        ),
        // Commits to the metadata.
        RequestKind::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
            alter_user_scram_credentials::handle(broker, &access, r),
        ),
        // The frame layer only decodes APIs listed in SUPPORTED_APIS, so
        // anything else is a table/dispatch mismatch: close rather than
        // answer something wrong.
        _ => return Outcome::Close(format!("no handler for {:?}", ctx.api_key)),
    })
}

/// Resolves a topic named on the wire, without ever creating it.
pub(crate) fn find_topic(broker: &Broker, name: &str) -> Result<Arc<broker::Topic>, broker::Error> {
    broker.resolve_topic_name(name)
}
