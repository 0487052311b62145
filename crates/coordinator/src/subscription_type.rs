//! How a subscription hands messages to its consumers: Pulsar's
//! subscription types, below both the subscriptions and the errors that
//! name them.

use std::fmt;

/// How a subscription hands messages to its consumers (Pulsar's SubType;
/// the codes are Pulsar's enum values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubscriptionType {
    /// One consumer; a second one is refused.
    Exclusive,
    /// Round-robin over the consumers with permits.
    Shared,
    /// Many consumers, one active (per partition).
    Failover,
    /// Each key hash range goes to one consumer (AUTO_SPLIT).
    KeyShared,
}

impl SubscriptionType {
    /// Pulsar's SubType number.
    pub fn code(self) -> u8 {
        match self {
            SubscriptionType::Exclusive => 0,
            SubscriptionType::Shared => 1,
            SubscriptionType::Failover => 2,
            SubscriptionType::KeyShared => 3,
        }
    }

    /// The type with this Pulsar SubType number.
    pub fn from_code(code: u8) -> Option<SubscriptionType> {
        Some(match code {
            0 => SubscriptionType::Exclusive,
            1 => SubscriptionType::Shared,
            2 => SubscriptionType::Failover,
            3 => SubscriptionType::KeyShared,
            _ => return None,
        })
    }

    /// Whether only one consumer at a time receives messages.
    pub fn single_active(self) -> bool {
        matches!(
            self,
            SubscriptionType::Exclusive | SubscriptionType::Failover
        )
    }
}

impl fmt::Display for SubscriptionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubscriptionType::Exclusive => "Exclusive",
            SubscriptionType::Shared => "Shared",
            SubscriptionType::Failover => "Failover",
            SubscriptionType::KeyShared => "Key_Shared",
        })
    }
}
