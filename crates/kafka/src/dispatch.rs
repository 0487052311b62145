//! Runs one decoded request: hands it to its API's handler, on the
//! blocking pool when it may do file work ([`handle`], [`handle_timed`]).

use std::sync::Arc;

use kafka_protocol::messages::{RequestKind, ResponseKind};

use broker::Broker;

use crate::context::{Outcome, RequestContext};
use crate::{
    add_offsets_to_txn, add_partitions_to_txn, alter_client_quotas, alter_configs,
    alter_partition_reassignments, alter_replica_log_dirs, alter_user_scram_credentials,
    api_versions, authz, consumer_group_describe, consumer_group_heartbeat, create_acls,
    create_partitions, create_topics, delete_acls, delete_groups, delete_records, delete_topics,
    describe_acls, describe_client_quotas, describe_cluster, describe_configs, describe_groups,
    describe_log_dirs, describe_producers, describe_quorum, describe_topic_partitions,
    describe_transactions, describe_user_scram_credentials, elect_leaders, end_txn, fetch,
    find_coordinator, heartbeat, incremental_alter_configs, init_producer_id, join_group,
    leave_group, list_config_resources, list_groups, list_offsets, list_partition_reassignments,
    list_transactions, metadata, offset_commit, offset_delete, offset_fetch,
    offset_for_leader_epoch, produce, sasl_handshake, session, sync_group, txn_offset_commit,
    write_txn_markers,
};

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
            RequestKind::ListPartitionReassignments(r) => ResponseKind::ListPartitionReassignments(
                list_partition_reassignments::handle(broker, &access, r),
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
        // Committed through the controller.
        RequestKind::AlterPartitionReassignments(r) => ResponseKind::AlterPartitionReassignments(
            alter_partition_reassignments::handle(broker, &access, v, r),
        ),
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
        // Elections are committed to the metadata.
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(broker, &access, v, r))
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
