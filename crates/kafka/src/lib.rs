//! The Kafka wire-protocol front end over Magnetar's protocol-neutral
//! broker core.
//!
//! `frame` turns bytes into requests, `dispatch` hands each to its API's
//! module, one module per API turns a request into a response (handlers
//! never touch sockets; what they share is in `context`), and `server` runs
//! the listener. The table of APIs and versions answered is
//! `api_versions`'s. Kafka's wire types and error codes stay inside this
//! crate.

#![warn(missing_docs)]

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
mod context;
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
mod dispatch;
mod elect_leaders;
mod end_txn;
pub mod error;
mod fetch;
mod fetch_replica;
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
mod replica_fetcher;
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

pub use api_versions::{supported_versions, SUPPORTED_APIS};
pub(crate) use context::find_topic;
pub use context::{Outcome, RequestContext, Versions};
pub use dispatch::{handle, handle_timed};
pub use server::{serve, serve_listener, Server};
pub use session::ListenerSecurity;
