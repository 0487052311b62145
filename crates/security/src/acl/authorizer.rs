//! The authorizer: decides whether a principal connecting from a host may
//! perform an operation on a resource, by the ACLs, as Kafka's
//! `StandardAuthorizer` does. A super user may do everything; otherwise a
//! matching DENY wins over any ALLOW, an ALLOW of the operation (or of one
//! implying it) allows it, and a resource without any ACL is allowed only
//! with `allow.everyone.if.no.acl.found`.
//!
//! The ACLs are indexed by resource so a check costs a few hash lookups
//! (one per prefix of the name for PREFIXED ACLs), and the index is an
//! immutable snapshot swapped when the ACLs change: checks on the request
//! path never wait behind a metadata write.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::RwLock;

use super::{AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD};
use crate::Principal;
pub use magnetar_config::AuthorizerConfig;

#[derive(Debug, Clone)]
struct Entry {
    principal: String,
    host: String,
    operation: Operation,
    permission: Permission,
}

/// The ACLs indexed by resource.
#[derive(Debug, Default)]
pub struct AclIndex {
    literal: HashMap<ResourceType, HashMap<String, Vec<Entry>>>,
    prefixed: HashMap<ResourceType, HashMap<String, Vec<Entry>>>,
    // The longest prefix of each type: names are only cut up to it.
    longest_prefix: HashMap<ResourceType, usize>,
}

fn principal_is(acl: &str, p: &Principal) -> bool {
    if acl == "User:*" {
        return true;
    }
    acl.len() == p.kind.len() + 1 + p.name.len()
        && acl.starts_with(p.kind.as_str())
        && acl.as_bytes()[p.kind.len()] == b':'
        && acl.ends_with(p.name.as_str())
}

impl AclIndex {
    /// The index of `acls`.
    pub fn of<'a>(acls: impl IntoIterator<Item = &'a AclBinding>) -> AclIndex {
        let mut index = AclIndex::default();
        for b in acls {
            let entry = Entry {
                principal: b.principal.clone(),
                host: b.host.clone(),
                operation: b.operation,
                permission: b.permission,
            };
            let map = match b.pattern_type {
                PatternType::Literal => &mut index.literal,
                PatternType::Prefixed => {
                    let l = index.longest_prefix.entry(b.resource_type).or_default();
                    *l = (*l).max(b.resource_name.len());
                    &mut index.prefixed
                }
            };
            map.entry(b.resource_type)
                .or_default()
                .entry(b.resource_name.clone())
                .or_default()
                .push(entry);
        }
        index
    }

    /// Every entry list that applies to the resource.
    fn lists<'a>(&'a self, kind: ResourceType, name: &'a str) -> impl Iterator<Item = &'a [Entry]> {
        let literal = self.literal.get(&kind);
        let exact = literal.and_then(|m| m.get(name));
        let wildcard = literal
            .and_then(|m| m.get(WILDCARD))
            .filter(|_| name != WILDCARD);
        let prefixed = self.prefixed.get(&kind);
        let longest = self.longest_prefix.get(&kind).copied().unwrap_or(0);
        let prefixes = prefixed.into_iter().flat_map(move |m| {
            name.char_indices()
                .map(|(i, c)| i + c.len_utf8())
                .take_while(move |end| *end <= longest)
                .filter_map(move |end| m.get(&name[..end]))
        });
        exact
            .into_iter()
            .chain(wildcard)
            .chain(prefixes)
            .map(Vec::as_slice)
    }

    /// Whether the ACLs alone allow it; `None` when no ACL names the
    /// resource at all.
    fn decide(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        kind: ResourceType,
        name: &str,
    ) -> Option<bool> {
        let mut any = false;
        let mut allowed = false;
        for list in self.lists(kind, name) {
            any |= !list.is_empty();
            for e in list {
                if !principal_is(&e.principal, principal) || (e.host != WILDCARD && e.host != host)
                {
                    continue;
                }
                match e.permission {
                    Permission::Deny if e.operation.denies(operation) => return Some(false),
                    Permission::Allow if e.operation.allows(operation) => allowed = true,
                    _ => {}
                }
            }
        }
        any.then_some(allowed)
    }

    /// Whether some resource of type `kind` allows `operation` and is not
    /// denied it (Kafka's `authorizeByResourceType`, KIP-679).
    fn decide_by_type(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        kind: ResourceType,
    ) -> Option<bool> {
        let applies = |e: &Entry| {
            principal_is(&e.principal, principal) && (e.host == WILDCARD || e.host == host)
        };
        let mut any = false;
        let (mut deny_literal, mut deny_prefix) = (BTreeSet::new(), BTreeSet::new());
        let (mut allow_literal, mut allow_prefix) = (BTreeSet::new(), BTreeSet::new());
        for (pattern, map) in [
            (PatternType::Literal, self.literal.get(&kind)),
            (PatternType::Prefixed, self.prefixed.get(&kind)),
        ] {
            for (name, list) in map.into_iter().flatten() {
                any |= !list.is_empty();
                for e in list.iter().filter(|e| applies(e)) {
                    let set = match (e.permission, pattern) {
                        (Permission::Deny, _) if !e.operation.denies(operation) => continue,
                        (Permission::Allow, _) if !e.operation.allows(operation) => continue,
                        (Permission::Deny, PatternType::Literal) => &mut deny_literal,
                        (Permission::Deny, PatternType::Prefixed) => &mut deny_prefix,
                        (Permission::Allow, PatternType::Literal) => &mut allow_literal,
                        (Permission::Allow, PatternType::Prefixed) => &mut allow_prefix,
                    };
                    set.insert(name.as_str());
                }
            }
        }
        if !any {
            return None;
        }
        if deny_literal.contains(WILDCARD) || deny_prefix.contains("") {
            return Some(false);
        }
        let denied_by_prefix = |name: &str| deny_prefix.iter().any(|p| name.starts_with(p));
        let literal_ok = allow_literal
            .iter()
            .any(|n| !deny_literal.contains(n) && !denied_by_prefix(n));
        let prefix_ok = allow_prefix.iter().any(|n| !denied_by_prefix(n));
        Some(literal_ok || prefix_ok)
    }
}

/// The authorizer of a broker with `authorizer.class.name` set.
#[derive(Debug)]
pub struct Authorizer {
    config: AuthorizerConfig,
    index: RwLock<Arc<AclIndex>>,
}

impl Authorizer {
    /// An authorizer over `acls`.
    pub fn new<'a>(
        config: AuthorizerConfig,
        acls: impl IntoIterator<Item = &'a AclBinding>,
    ) -> Authorizer {
        Authorizer {
            config,
            index: RwLock::new(Arc::new(AclIndex::of(acls))),
        }
    }

    /// Its settings.
    pub fn config(&self) -> &AuthorizerConfig {
        &self.config
    }

    /// Replaces the ACLs (after a metadata change).
    pub fn refresh<'a>(&self, acls: impl IntoIterator<Item = &'a AclBinding>) {
        *self.index.write() = Arc::new(AclIndex::of(acls));
    }

    // Exact, as Kafka: `User:*` in `super.users` names no one.
    fn is_super(&self, principal: &Principal) -> bool {
        self.config.super_users.iter().any(|s| {
            s.len() == principal.kind.len() + 1 + principal.name.len()
                && s.starts_with(principal.kind.as_str())
                && s.ends_with(principal.name.as_str())
                && s.as_bytes()[principal.kind.len()] == b':'
        })
    }

    /// Whether `principal` connecting from `host` (an IP address) may
    /// perform `operation` on the resource `kind`/`name`.
    pub fn authorize(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        kind: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super(principal) {
            return true;
        }
        let index = self.index.read().clone();
        index
            .decide(principal, host, operation, kind, name)
            .unwrap_or(self.config.allow_if_no_acl)
    }

    /// Whether `principal` may perform `operation` on at least one
    /// resource of type `kind` (idempotent producers: Write on any topic
    /// stands for IdempotentWrite on the cluster, KIP-679).
    pub fn authorize_by_type(
        &self,
        principal: &Principal,
        host: &str,
        operation: Operation,
        kind: ResourceType,
    ) -> bool {
        // As Kafka's default implementation: a made-up literal name first,
        // which wildcard and prefix ACLs (and the no-ACL rule) decide.
        if self.authorize(principal, host, operation, kind, "hardcode") {
            return true;
        }
        let index = self.index.read().clone();
        index
            .decide_by_type(principal, host, operation, kind)
            .unwrap_or(false)
    }

    /// The operations `principal` may perform on the resource, as Kafka's
    /// `authorized_operations` bit field (bit `1 << code` per operation).
    pub fn authorized_operations(
        &self,
        principal: &Principal,
        host: &str,
        kind: ResourceType,
        name: &str,
    ) -> i32 {
        kind.operations()
            .iter()
            .filter(|op| self.authorize(principal, host, **op, kind, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        kind: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: kind,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission,
        }
    }

    fn topic(
        name: &str,
        pattern: PatternType,
        who: &str,
        op: Operation,
        p: Permission,
    ) -> AclBinding {
        acl(ResourceType::Topic, name, pattern, who, op, p)
    }

    fn authz(acls: &[AclBinding], allow_if_no_acl: bool) -> Authorizer {
        let config = AuthorizerConfig {
            super_users: ["User:admin".to_string()].into(),
            allow_if_no_acl,
        };
        Authorizer::new(config, acls)
    }

    const H: &str = "127.0.0.1";

    #[test]
    fn deny_beats_allow_and_implications_hold() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        let a = authz(
            &[
                topic("*", Literal, "User:bob", All, Allow),
                topic("secret", Literal, "User:bob", Read, Deny),
                topic("alice-", Prefixed, "User:alice", Write, Allow),
            ],
            false,
        );
        let bob = Principal::user("bob");
        let alice = Principal::user("alice");
        let t = ResourceType::Topic;
        assert!(a.authorize(&bob, H, Read, t, "public"));
        assert!(!a.authorize(&bob, H, Read, t, "secret"));
        assert!(a.authorize(&bob, H, Write, t, "secret"));
        assert!(
            a.authorize(&bob, H, Describe, t, "secret"),
            "deny read leaves describe"
        );
        assert!(a.authorize(&alice, H, Write, t, "alice-orders"));
        assert!(
            a.authorize(&alice, H, Describe, t, "alice-orders"),
            "write implies describe"
        );
        assert!(!a.authorize(&alice, H, Read, t, "alice-orders"));
        assert!(
            !a.authorize(&alice, H, Write, t, "alice"),
            "shorter than the prefix"
        );
        assert!(!a.authorize(&alice, H, Write, t, "public"));
        // A topic with ACLs (the wildcard) does not fall back to the
        // no-ACL rule; a group without any does.
        assert!(a.authorize(&Principal::user("admin"), H, Delete, t, "public"));
        assert!(!a.authorize(&alice, H, Read, ResourceType::Group, "g"));
        let open = authz(&[topic("x", Literal, "User:bob", Read, Allow)], true);
        assert!(open.authorize(&alice, H, Read, ResourceType::Group, "g"));
        assert!(open.authorize(&alice, H, Read, t, "y"));
        assert!(
            !open.authorize(&alice, H, Read, t, "x"),
            "x has ACLs, none for alice"
        );
    }

    #[test]
    fn hosts_and_wildcard_principals_match() {
        use Operation::*;
        let mut b = topic("t", PatternType::Literal, "User:*", Read, Permission::Allow);
        b.host = "10.0.0.1".into();
        let a = authz(&[b], false);
        let carol = Principal::user("carol");
        assert!(a.authorize(&carol, "10.0.0.1", Read, ResourceType::Topic, "t"));
        assert!(!a.authorize(&carol, H, Read, ResourceType::Topic, "t"));
    }

    #[test]
    fn by_type_needs_an_undenied_allow() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        let alice = Principal::user("alice");
        let t = ResourceType::Topic;
        let a = authz(&[topic("a-", Prefixed, "User:alice", Write, Allow)], false);
        assert!(a.authorize_by_type(&alice, H, Write, t));
        assert!(!a.authorize_by_type(&Principal::user("bob"), H, Write, t));
        let denied = authz(
            &[
                topic("a-", Prefixed, "User:alice", Write, Allow),
                topic("a", Prefixed, "User:alice", Write, Deny),
            ],
            false,
        );
        assert!(!denied.authorize_by_type(&alice, H, Write, t));
        let lit = authz(
            &[
                topic("x", Literal, "User:alice", Write, Allow),
                topic("y", Literal, "User:alice", Write, Deny),
            ],
            false,
        );
        assert!(lit.authorize_by_type(&alice, H, Write, t));
    }

    #[test]
    fn authorized_operations_is_a_bit_field() {
        use Operation::*;
        let a = authz(
            &[acl(
                ResourceType::Group,
                "g",
                PatternType::Literal,
                "User:alice",
                Read,
                Permission::Allow,
            )],
            false,
        );
        let bits = a.authorized_operations(&Principal::user("alice"), H, ResourceType::Group, "g");
        assert_eq!(bits, (1 << Read.code()) | (1 << Describe.code()));
        let all = a.authorized_operations(&Principal::user("admin"), H, ResourceType::Group, "g");
        assert_eq!(all, (1 << 3) | (1 << 8) | (1 << 6));
    }

    #[test]
    fn by_type_follows_the_no_acl_rule_and_super_users_are_exact() {
        use Operation::*;
        let alice = Principal::user("alice");
        // ACLs on other topics only: the no-ACL rule opens the type.
        let open = authz(
            &[topic(
                "x",
                PatternType::Literal,
                "User:bob",
                Read,
                Permission::Allow,
            )],
            true,
        );
        assert!(open.authorize_by_type(&alice, H, Write, ResourceType::Topic));
        let wildcard = Authorizer::new(
            AuthorizerConfig {
                super_users: ["User:*".to_string()].into(),
                allow_if_no_acl: false,
            },
            &[],
        );
        assert!(!wildcard.authorize(&alice, H, Read, ResourceType::Topic, "t"));
    }

    #[test]
    fn super_users_parse() {
        let s = AuthorizerConfig::parse_super_users("User:a; User:b;").unwrap();
        assert_eq!(s.len(), 2);
        assert!(AuthorizerConfig::parse_super_users("a").is_err());
    }
}
