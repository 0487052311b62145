//! Kafka ACLs: bindings of a principal and host to an operation on a
//! resource pattern, allowed or denied (Kafka's `AclBinding`), filters
//! that select them (`AclBindingFilter`), and the authorizer that decides
//! each request by them (Kafka's `StandardAuthorizer` semantics).
//!
//! The bindings are metadata records, replicated through the controller
//! quorum. Protocol-neutral: the wire codes below are Kafka's, because
//! Kafka's admin tools define the model, but other front ends map their own
//! actions to the same operations.

use serde::{Deserialize, Serialize};

/// The name of the one cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The wildcard: every principal (`User:*`), host (`*`) or resource name
/// (a LITERAL `*`).
pub const WILDCARD: &str = "*";

/// What an ACL protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceType {
    /// A topic, by name.
    Topic,
    /// A consumer group, by id.
    Group,
    /// The cluster (named [`CLUSTER_NAME`]).
    Cluster,
    /// A transactional id.
    TransactionalId,
    /// A delegation token (this broker has none; ACLs on them are refused).
    DelegationToken,
    /// A user (delegation-token owners; refused as well).
    User,
}

impl ResourceType {
    /// Kafka's code (`ResourceType.code()`).
    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
            ResourceType::DelegationToken => 6,
            ResourceType::User => 7,
        }
    }

    /// The type of Kafka's code `code`; `None` for ANY (1) and unknown codes.
    pub fn from_code(code: i8) -> Option<ResourceType> {
        Some(match code {
            2 => ResourceType::Topic,
            3 => ResourceType::Group,
            4 => ResourceType::Cluster,
            5 => ResourceType::TransactionalId,
            6 => ResourceType::DelegationToken,
            7 => ResourceType::User,
            _ => return None,
        })
    }

    /// The operations that mean something on this type, as Kafka lists
    /// them for `authorized_operations`.
    pub fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }
}

/// How an ACL's resource name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternType {
    /// The name itself; `*` matches every name.
    Literal,
    /// Every name starting with it.
    Prefixed,
}

impl PatternType {
    /// Kafka's code (`PatternType.code()`).
    pub fn code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }
}

/// An operation on a resource (Kafka's `AclOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Every operation.
    All,
    /// Consume (topics), join and commit (groups).
    Read,
    /// Produce (topics), transactions (transactional ids).
    Write,
    /// Create topics.
    Create,
    /// Delete topics, records, groups.
    Delete,
    /// Change partitions, ACLs, credentials.
    Alter,
    /// See that it exists and how it is.
    Describe,
    /// Broker-to-broker requests.
    ClusterAction,
    /// Read configs.
    DescribeConfigs,
    /// Change configs.
    AlterConfigs,
    /// Idempotent producers.
    IdempotentWrite,
    /// Create delegation tokens.
    CreateTokens,
    /// Describe delegation tokens.
    DescribeTokens,
    /// Two-phase commit of transactions (KIP-939).
    TwoPhaseCommit,
}

impl Operation {
    const CODES: [(Operation, i8); 14] = [
        (Operation::All, 2),
        (Operation::Read, 3),
        (Operation::Write, 4),
        (Operation::Create, 5),
        (Operation::Delete, 6),
        (Operation::Alter, 7),
        (Operation::Describe, 8),
        (Operation::ClusterAction, 9),
        (Operation::DescribeConfigs, 10),
        (Operation::AlterConfigs, 11),
        (Operation::IdempotentWrite, 12),
        (Operation::CreateTokens, 13),
        (Operation::DescribeTokens, 14),
        (Operation::TwoPhaseCommit, 15),
    ];

    /// Kafka's code (`AclOperation.code()`).
    pub fn code(self) -> i8 {
        Operation::CODES
            .iter()
            .find(|(o, _)| *o == self)
            .map_or(0, |(_, c)| *c)
    }

    /// The operation of Kafka's code; `None` for ANY (1) and unknown codes.
    pub fn from_code(code: i8) -> Option<Operation> {
        Operation::CODES
            .iter()
            .find(|(_, c)| *c == code)
            .map(|(o, _)| *o)
    }

    /// Whether an ALLOW of `self` allows `wanted`: ALL allows everything,
    /// and as in Kafka, Read, Write, Delete and Alter imply Describe, and
    /// AlterConfigs implies DescribeConfigs.
    pub fn allows(self, wanted: Operation) -> bool {
        use Operation::*;
        self == All
            || self == wanted
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }

    /// Whether a DENY of `self` denies `wanted` (no implication: denying
    /// Read leaves Describe alone).
    pub fn denies(self, wanted: Operation) -> bool {
        self == Operation::All || self == wanted
    }
}

/// Allowed or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Denied, whatever else allows it.
    Deny,
    /// Allowed, unless denied.
    Allow,
}

impl Permission {
    /// Kafka's code (`AclPermissionType.code()`).
    pub fn code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    /// The permission of Kafka's code; `None` for ANY and unknown codes.
    pub fn from_code(code: i8) -> Option<Permission> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }
}

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// What kind of resource.
    pub resource_type: ResourceType,
    /// The resource name or prefix.
    pub resource_name: String,
    /// How the name matches.
    pub pattern_type: PatternType,
    /// `Type:name` (`User:alice`, `User:*`).
    pub principal: String,
    /// The client's IP address, or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// Allowed or denied.
    pub permission: Permission,
}

impl AclBinding {
    /// Checks a binding CreateAcls is asked for, as Kafka's
    /// `AclControlManager` does; the error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        match self.resource_type {
            ResourceType::DelegationToken | ResourceType::User => {
                return Err(format!(
                "ACLs on {:?} resources are not supported: this broker has no delegation tokens",
                self.resource_type
            ))
            }
            ResourceType::Cluster
                if self.pattern_type != PatternType::Literal
                    || self.resource_name != CLUSTER_NAME =>
            {
                return Err(format!(
                    "the only valid name for the CLUSTER resource is the LITERAL {CLUSTER_NAME}"
                ))
            }
            _ => {}
        }
        if self.resource_name.is_empty() {
            return Err("resource name should not be empty".into());
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Err(format!(
                    "invalid principal {:?}: expected Type:name, e.g. User:alice",
                    self.principal
                ))
            }
        }
        if self.host.is_empty() {
            return Err("host should not be empty (use * for any host)".into());
        }
        Ok(())
    }
}

/// How a filter matches pattern types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type, the name compared as is.
    Any,
    /// Every binding that would apply to the named resource: the LITERAL
    /// name, the LITERAL `*`, and every PREFIXED prefix of it.
    Match,
    /// This pattern type, the name compared as is.
    Exactly(PatternType),
}

/// Selects bindings (DescribeAcls, DeleteAcls): `None` fields match
/// anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// The resource type.
    pub resource_type: Option<ResourceType>,
    /// The resource name.
    pub resource_name: Option<String>,
    /// The pattern types.
    pub pattern: PatternFilter,
    /// The principal, compared as is (`User:*` matches only `User:*`).
    pub principal: Option<String>,
    /// The host, compared as is.
    pub host: Option<String>,
    /// The operation.
    pub operation: Option<Operation>,
    /// The permission.
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// A filter matching every binding.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Whether `b` is selected.
    pub fn matches(&self, b: &AclBinding) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        if self.resource_type.is_some_and(|t| t != b.resource_type)
            || !eq(&self.principal, &b.principal)
            || !eq(&self.host, &b.host)
            || self.operation.is_some_and(|o| o != b.operation)
            || self.permission.is_some_and(|p| p != b.permission)
        {
            return false;
        }
        match self.pattern {
            PatternFilter::Any => eq(&self.resource_name, &b.resource_name),
            PatternFilter::Exactly(p) => {
                p == b.pattern_type && eq(&self.resource_name, &b.resource_name)
            }
            PatternFilter::Match => match &self.resource_name {
                None => true,
                Some(name) => pattern_covers(b.pattern_type, &b.resource_name, name),
            },
        }
    }
}

/// Whether a pattern applies to the resource named `name`.
pub fn pattern_covers(pattern: PatternType, pattern_name: &str, name: &str) -> bool {
    match pattern {
        PatternType::Literal => pattern_name == name || pattern_name == WILDCARD,
        PatternType::Prefixed => name.starts_with(pattern_name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(name: &str, pattern: PatternType) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn codes_round_trip() {
        for (op, code) in Operation::CODES {
            assert_eq!(Operation::from_code(code), Some(op));
            assert_eq!(op.code(), code);
        }
        assert_eq!(Operation::from_code(1), None);
        for t in [
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Cluster,
            ResourceType::TransactionalId,
            ResourceType::DelegationToken,
            ResourceType::User,
        ] {
            assert_eq!(ResourceType::from_code(t.code()), Some(t));
        }
        assert_eq!(Permission::from_code(1), None);
    }

    #[test]
    fn implications_follow_kafka() {
        assert!(Operation::Read.allows(Operation::Describe));
        assert!(Operation::Write.allows(Operation::Describe));
        assert!(Operation::AlterConfigs.allows(Operation::DescribeConfigs));
        assert!(!Operation::Describe.allows(Operation::Read));
        assert!(Operation::All.allows(Operation::IdempotentWrite));
        assert!(!Operation::Read.denies(Operation::Describe));
        assert!(Operation::All.denies(Operation::Describe));
    }

    #[test]
    fn validation_refuses_what_kafka_refuses() {
        assert!(binding("t", PatternType::Literal).validate().is_ok());
        let mut b = binding("", PatternType::Literal);
        assert!(b.validate().is_err());
        b.resource_name = "t".into();
        b.principal = "alice".into();
        assert!(b.validate().unwrap_err().contains("principal"));
        b.principal = "User:alice".into();
        b.resource_type = ResourceType::Cluster;
        assert!(b.validate().is_err());
        b.resource_name = CLUSTER_NAME.into();
        assert!(b.validate().is_ok());
        b.resource_type = ResourceType::DelegationToken;
        assert!(b.validate().is_err());
    }

    #[test]
    fn filters_select_by_field_and_by_match() {
        let lit = binding("orders", PatternType::Literal);
        let star = binding("*", PatternType::Literal);
        let pre = binding("ord", PatternType::Prefixed);
        let other = binding("x", PatternType::Prefixed);
        let mut f = AclFilter::any();
        assert!([&lit, &star, &pre, &other].iter().all(|b| f.matches(b)));
        f.resource_name = Some("orders".into());
        f.pattern = PatternFilter::Match;
        assert!(f.matches(&lit) && f.matches(&star) && f.matches(&pre));
        assert!(!f.matches(&other));
        f.pattern = PatternFilter::Any;
        assert!(f.matches(&lit) && !f.matches(&star) && !f.matches(&pre));
        f.pattern = PatternFilter::Exactly(PatternType::Prefixed);
        f.resource_name = Some("ord".into());
        assert!(f.matches(&pre) && !f.matches(&lit));
        f.principal = Some("User:bob".into());
        assert!(!f.matches(&pre));
    }
}
