//! The authorizer's settings (`authorizer.class.name`, `super.users`,
//! `allow.everyone.if.no.acl.found`), which key validation also reads.

use std::collections::BTreeSet;

/// The `authorizer.class.name` values this broker implements: Kafka's
/// KRaft authorizer and its ZooKeeper-era one, which decide alike.
pub const AUTHORIZER_CLASSES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

/// The authorizer's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals (`User:admin`) allowed everything.
    pub super_users: BTreeSet<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

impl AuthorizerConfig {
    /// Parses `super.users` (`User:a;User:b`, Kafka's separator).
    pub fn parse_super_users(v: &str) -> Result<BTreeSet<String>, String> {
        v.split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|p| match p.split_once(':') {
                Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(p.to_string()),
                _ => Err(format!(
                    "invalid principal {p:?}: expected Type:name, e.g. User:admin"
                )),
            })
            .collect()
    }
}
