//! The version number of a partition's controller record.

use std::fmt;

/// The version of a partition's controller record (ISR, leader, replicas):
/// bumped by the controller on every change, and carried by AlterPartition
/// so that a leader's request built on an older record is refused
/// (Kafka's `partitionEpoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PartitionEpoch(pub i32);

impl fmt::Display for PartitionEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
