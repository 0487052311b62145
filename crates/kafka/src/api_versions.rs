//! ApiVersions (key 18): the versions of every API this broker implements.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::Versions;
use crate::{
    add_offsets_to_txn, add_partitions_to_txn, alter_client_quotas, alter_configs,
    alter_partition_reassignments, alter_replica_log_dirs, alter_user_scram_credentials,
    consumer_group_describe, consumer_group_heartbeat, create_acls, create_partitions,
    create_topics, delete_acls, delete_groups, delete_records, delete_topics, describe_acls,
    describe_client_quotas, describe_cluster, describe_configs, describe_groups, describe_log_dirs,
    describe_producers, describe_quorum, describe_topic_partitions, describe_transactions,
    describe_user_scram_credentials, elect_leaders, end_txn, fetch, find_coordinator, heartbeat,
    incremental_alter_configs, init_producer_id, join_group, leave_group, list_config_resources,
    list_groups, list_offsets, list_partition_reassignments, list_transactions, metadata,
    offset_commit, offset_delete, offset_fetch, offset_for_leader_epoch, produce,
    sasl_authenticate, sasl_handshake, sync_group, txn_offset_commit, write_txn_markers,
};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 3);

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
    (ApiKey::ApiVersions, VERSIONS),
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

fn api_list() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|(k, v)| {
            ApiVersion::default()
                .with_api_key(*k as i16)
                .with_min_version(v.min)
                .with_max_version(v.max)
        })
        .collect()
}

/// Kafka's rule for client software names and versions (KIP-511).
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// Answers ApiVersions.
pub fn handle(version: i16, req: ApiVersionsRequest) -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default().with_api_keys(api_list());
    if version >= 3
        && !(valid_software_field(&req.client_software_name)
            && valid_software_field(&req.client_software_version))
    {
        resp.error_code = ResponseError::InvalidRequest.code();
    }
    resp
}

/// The answer to an ApiVersions version above ours (sent in the v0 format).
pub fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_list())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn lists_every_supported_api_and_validates_software_names() {
        let ok = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("librdkafka"))
            .with_client_software_version(StrBytes::from_static_str("2.12.1"));
        let r = handle(3, ok);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.api_keys.len(), SUPPORTED_APIS.len());
        let bad = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("-bad name"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        assert_eq!(
            handle(3, bad).error_code,
            ResponseError::InvalidRequest.code()
        );
        // Before v3 there are no such fields to check.
        assert_eq!(handle(2, ApiVersionsRequest::default()).error_code, 0);
    }
}
