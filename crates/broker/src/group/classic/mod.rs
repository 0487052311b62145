//! The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as
//! a pure state machine. Placeholder: being written.
