//! Magnetar's controller quorum: a Raft-replicated log of records, applied
//! in order to a deterministic [`StateMachine`] on every controller node
//! (issue 10 §2). It knows nothing of the broker: the broker plugs its
//! metadata records and their `apply` in as a `StateMachine`.
//!
//! # Pieces
//!
//! - [`Controller`]: one node. [`Controller::start`] opens its storage under
//!   `data_dir`, starts openraft and the TCP server, and initializes a new
//!   cluster (the lowest voter id does, once; see [`Bootstrap`]). It
//!   submits records when it leads ([`Controller::submit`]), serves the
//!   committed log ([`Controller::fetch`], [`Controller::fetch_snapshot`]),
//!   and waits for an index to be applied ([`Controller::wait_applied`]).
//! - [`ControllerClient`]: the same over the network from anywhere, e.g. a
//!   broker-only node pulling the metadata log, or a node forwarding a
//!   submission to the leader (it follows "not leader, leader is N at
//!   addr" answers).
//! - Storage: [`log_store::LogStore`] (CRC32C-checked segment files, the vote
//!   and committed index in a two-slot metadata file, every write synced
//!   before it is acknowledged, a torn tail cut off on open) and
//!   [`sm_store::SmStore`] (the state in memory, snapshots written to a
//!   temporary file, synced and renamed). Both pass openraft's storage test
//!   suite. File work runs on a writer thread or `spawn_blocking`
//!   ([`IoMode`]).
//! - Network: length-prefixed postcard frames over TCP or TLS
//!   ([`transport`], [`tls`]), size-limited, with timeouts; a bad frame
//!   closes the connection. Every connection starts with a handshake
//!   ([`PeerAuth`]): with the cluster secret, a mutual challenge-response
//!   and then an HMAC on every frame; without it the transport must
//!   authenticate peers (mutual TLS) or everything must be on loopback.
//!   Raft RPCs are served only from the voter they name. The port holds
//!   at most `queued_max_request_bytes` of requests at once, taken as
//!   they arrive; a peer holds 1 KiB until it is authenticated.
//! - [`probe`]: a peer for testing a running quorum, misbehaving ones
//!   included.
//!
//! # Why openraft 0.9
//!
//! openraft 0.9.x is its stable line; 0.10 has only alpha releases with a
//! changing API. 0.9 already has what this crate needs: the split log /
//! state machine storage API (`storage-v2`), whole-snapshot transfer with
//! application-defined snapshot data (`generic-snapshot-data`), a pluggable
//! async runtime (used to seed election timeouts in simulations) and the
//! storage test suite. Moving to 0.10 once it is stable is a contained
//! change in `types`, `log_store`, `sm_store` and `network`.
//!
//! openraft is built with `single-term-leader`: standard Raft terms, at most
//! one leader per term, so the term can serve as the controller epoch that
//! fences a deposed controller (openraft's default allows several leaders
//! in one term, ordered by node id).
//!
//! # Testing
//!
//! `tests/storage_suite.rs` runs openraft's storage suite on both I/O
//! modes; `tests/cluster.rs` runs 3-node clusters on loopback (failover,
//! minority, restart with snapshot install, fetch after compaction,
//! start-up errors); `tests/sim.rs` runs a seeded turmoil simulation with
//! partitions, message loss and crash/restarts and checks one leader per
//! term, no committed entry lost or changed, and convergence.
//!
//! # Limits
//!
//! The voter set is static (no membership changes yet). A snapshot travels
//! in one frame, so it must fit `max_frame_bytes` (64 MiB by default).

#![warn(missing_docs)]

mod auth;
mod client;
mod codec;
mod config;
mod error;
mod frame_mac;
mod handle;
mod inner;
mod io;
mod log_file;
mod log_limit;
pub mod log_store;
mod network;
mod node;
pub mod probe;
mod rpc;
mod server;
mod service;
pub mod sm_store;
mod state_machine;
pub mod tls;
pub mod transport;
pub mod types;

pub use auth::{ClusterSecret, PeerAuth, MIN_SECRET_BYTES, PROTOCOL_VERSION};
pub use client::{ClientOptions, ControllerClient};
pub use codec::HANDSHAKE_MAX_FRAME;
pub use config::{is_loopback, Bootstrap, ControllerConfig, Voters};
pub use error::{ControllerError, Result};
pub use handle::ControllerHandle;
pub use inner::Status;
pub use io::IoMode;
pub use node::{identity_of, Controller};
pub use openraft::ServerState;
pub use rpc::{Fetched, SnapshotData, Submitted};
pub use service::{Service, ServiceFuture};
pub use state_machine::{KvMap, KvRecord, StateMachine};
pub use types::seed_election_rng;
