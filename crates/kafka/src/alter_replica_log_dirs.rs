//! AlterReplicaLogDirs (key 34): move replicas between log directories.
//! There is one log directory (the data directory): asking for it is
//! answered NONE (the replica is there already), any other path
//! LOG_DIR_NOT_FOUND, a partition this broker does not have
//! REPLICA_NOT_AVAILABLE, as Kafka's `ReplicaManager.alterReplicaLogDirs`.

use std::path::Path;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};
use model::PartitionId;

use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(1, 2);

/// Whether `path` names the log directory `dir` (compared canonically, so
/// a relative or symlinked spelling of it counts).
fn is_log_dir(path: &str, dir: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    !path.is_empty() && Path::new(path).is_absolute() && {
        let asked = canonical(Path::new(path));
        asked.is_some() && asked == canonical(dir)
    }
}

/// Answers AlterReplicaLogDirs (on the blocking pool: paths are resolved).
///
/// Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED per partition).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let allowed = access.cluster(broker::security::acl::Operation::Alter);
    let dir = broker.log_dir();
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for d in req.dirs {
        let ours = is_log_dir(d.path.as_str(), &dir);
        for t in d.topics {
            let topic = broker.topic(t.name.as_str());
            let partitions = t.partitions.iter().map(|&p| {
                let exists = topic
                    .as_ref()
                    .is_some_and(|t| t.hosted_partition(PartitionId(p)).is_some());
                let code = if !allowed {
                    ResponseError::ClusterAuthorizationFailed.code()
                } else if !ours {
                    ResponseError::LogDirNotFound.code()
                } else if !exists {
                    ResponseError::ReplicaNotAvailable.code()
                } else {
                    0
                };
                AlterReplicaLogDirPartitionResult::default()
                    .with_partition_index(p)
                    .with_error_code(code)
            });
            match results.iter_mut().find(|r| r.topic_name == t.name) {
                Some(r) => r.partitions.extend(partitions),
                None => {
                    let partitions = partitions.collect();
                    results.push(
                        AlterReplicaLogDirTopicResult::default()
                            .with_topic_name(t.name)
                            .with_partitions(partitions),
                    )
                }
            }
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}
