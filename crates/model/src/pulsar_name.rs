//! Pulsar topic names and how they map onto Magnetar's one namespace of
//! (Kafka-named) topics.
//!
//! The rule, reversible as long as the namespaces it depends on exist:
//!
//! | Pulsar | Kafka topic |
//! |---|---|
//! | `persistent://public/default/orders` | `orders` |
//! | `persistent://public/default/orders-partition-3` | partition 3 of `orders` |
//! | `persistent://acme/billing/orders` | `acme.billing.orders` |
//!
//! A Kafka topic `T.N.rest` belongs to namespace `T/N` when that namespace
//! exists (other than `public/default`), and to `public/default` otherwise.
//! To keep the mapping one-to-one, tenant and namespace names use Kafka's
//! characters except `.` (`[a-zA-Z0-9_-]`), and a `public/default` topic may
//! not be named like a topic of an existing namespace. Topic names must be
//! legal Kafka names (`[a-zA-Z0-9._-]`, at most 249 characters with the
//! namespace prefix); `non-persistent://` topics do not exist here.

use std::fmt;

use crate::{Error, TopicName};

/// The tenant every deployment has.
pub const DEFAULT_TENANT: &str = "public";
/// The namespace every deployment has.
pub const DEFAULT_NAMESPACE: &str = "default";
/// What separates a partitioned topic's name from its partition index.
pub const PARTITION_SUFFIX: &str = "-partition-";

/// A tenant/namespace pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace {
    /// Tenant.
    pub tenant: String,
    /// Namespace within the tenant.
    pub namespace: String,
}

impl Namespace {
    /// A namespace, its names checked.
    pub fn new(tenant: &str, namespace: &str) -> Result<Namespace, Error> {
        check_segment(tenant, "tenant")?;
        check_segment(namespace, "namespace")?;
        Ok(Namespace {
            tenant: tenant.to_string(),
            namespace: namespace.to_string(),
        })
    }

    /// Checks a tenant name on its own (the same rule as in [`Namespace::new`]).
    pub fn check_tenant(tenant: &str) -> Result<(), Error> {
        check_segment(tenant, "tenant")
    }

    /// `public/default`.
    pub fn default_namespace() -> Namespace {
        Namespace {
            tenant: DEFAULT_TENANT.into(),
            namespace: DEFAULT_NAMESPACE.into(),
        }
    }

    /// Whether this is `public/default`.
    pub fn is_default(&self) -> bool {
        self.tenant == DEFAULT_TENANT && self.namespace == DEFAULT_NAMESPACE
    }

    /// The Kafka-name prefix of this namespace's topics (`tenant.namespace.`,
    /// empty for `public/default`).
    pub fn kafka_prefix(&self) -> String {
        if self.is_default() {
            String::new()
        } else {
            format!("{}.{}.", self.tenant, self.namespace)
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.namespace)
    }
}

fn check_segment(s: &str, what: &'static str) -> Result<(), Error> {
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidPulsarName {
            name: s.to_string(),
            reason: match what {
                "tenant" => "a tenant name is 1 or more of [a-zA-Z0-9_-]",
                _ => "a namespace name is 1 or more of [a-zA-Z0-9_-]",
            },
        })
    }
}

/// A persistent Pulsar topic, possibly one partition of a partitioned
/// topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PulsarTopic {
    /// Where it lives.
    pub namespace: Namespace,
    /// The local name, without any `-partition-N` suffix.
    pub local: String,
    /// `Some(n)` for `…-partition-n`.
    pub partition: Option<u32>,
}

impl PulsarTopic {
    /// Parses `persistent://tenant/namespace/topic`, `tenant/namespace/topic`
    /// or a bare `topic` (in `public/default`). A `-partition-N` suffix
    /// names one partition. `non-persistent://` and malformed names are
    /// errors saying why.
    pub fn parse(name: &str) -> Result<PulsarTopic, Error> {
        let bad = |reason: &'static str| Error::InvalidPulsarName {
            name: name.to_string(),
            reason,
        };
        let rest = if let Some(r) = name.strip_prefix("persistent://") {
            r
        } else if name.starts_with("non-persistent://") {
            return Err(bad(
                "non-persistent topics are not supported; use persistent://",
            ));
        } else if name.contains("://") {
            return Err(bad("the domain must be persistent://"));
        } else {
            name
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let (namespace, local) = match parts.as_slice() {
            [topic] if !name.contains("://") => (Namespace::default_namespace(), *topic),
            [tenant, ns, topic] => (Namespace::new(tenant, ns)?, *topic),
            [_, _, _, _] => return Err(bad("v1 names with a cluster are not supported")),
            _ => return Err(bad("expected persistent://tenant/namespace/topic")),
        };
        let (local, partition) = match local.rsplit_once(PARTITION_SUFFIX) {
            Some((base, n))
                if !base.is_empty()
                    && !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && (n == "0" || !n.starts_with('0')) =>
            {
                let n: u32 = n.parse().map_err(|_| bad("partition index too large"))?;
                (base, Some(n))
            }
            _ => (local, None),
        };
        let topic = PulsarTopic {
            namespace,
            local: local.to_string(),
            partition,
        };
        // The Kafka name must be legal, with the namespace prefix.
        TopicName::new(&topic.kafka_name_unchecked()).map_err(|e| match e {
            Error::InvalidTopicName { reason, .. } => bad(reason),
            other => other,
        })?;
        Ok(topic)
    }

    fn kafka_name_unchecked(&self) -> String {
        format!("{}{}", self.namespace.kafka_prefix(), self.local)
    }

    /// The Kafka topic holding it (the partitioned topic for a partition).
    pub fn kafka_name(&self) -> TopicName {
        // Checked by `parse`, the only constructor.
        TopicName::new(&self.kafka_name_unchecked()).expect("checked at parse")
    }

    /// The whole topic, without the partition.
    pub fn base(&self) -> PulsarTopic {
        PulsarTopic {
            partition: None,
            ..self.clone()
        }
    }

    /// The same topic's partition `n`.
    pub fn partition(&self, n: u32) -> PulsarTopic {
        PulsarTopic {
            partition: Some(n),
            ..self.clone()
        }
    }

    /// The Pulsar topic of Kafka topic `name`: in namespace `T/N` if `name`
    /// is `T.N.rest` and `namespace_exists(T/N)`, else in `public/default`.
    pub fn from_kafka(
        name: &TopicName,
        namespace_exists: impl Fn(&Namespace) -> bool,
    ) -> PulsarTopic {
        let s = name.as_str();
        let mut it = s.splitn(3, '.');
        if let (Some(t), Some(n), Some(rest)) = (it.next(), it.next(), it.next()) {
            if let Ok(ns) = Namespace::new(t, n) {
                if !ns.is_default() && !rest.is_empty() && namespace_exists(&ns) {
                    return PulsarTopic {
                        namespace: ns,
                        local: rest.to_string(),
                        partition: None,
                    };
                }
            }
        }
        PulsarTopic {
            namespace: Namespace::default_namespace(),
            local: s.to_string(),
            partition: None,
        }
    }

    /// Whether this name, as a `public/default` topic, would be read back
    /// as a topic of another existing namespace (and so may not be created).
    pub fn shadows_a_namespace(&self, namespace_exists: impl Fn(&Namespace) -> bool) -> bool {
        self.namespace.is_default()
            && PulsarTopic::from_kafka(&self.kafka_name(), namespace_exists).namespace
                != self.namespace
    }
}

impl fmt::Display for PulsarTopic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "persistent://{}/{}", self.namespace, self.local)?;
        if let Some(n) = self.partition {
            write!(f, "{PARTITION_SUFFIX}{n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_namespace_topics_are_plain_kafka_topics() {
        let t = PulsarTopic::parse("persistent://public/default/orders").unwrap();
        assert_eq!(t.kafka_name().as_str(), "orders");
        assert_eq!(t.partition, None);
        assert_eq!(PulsarTopic::parse("orders").unwrap(), t);
        assert_eq!(PulsarTopic::parse("public/default/orders").unwrap(), t);
        let p = PulsarTopic::parse("persistent://public/default/orders-partition-3").unwrap();
        assert_eq!((p.kafka_name().as_str(), p.partition), ("orders", Some(3)));
        assert_eq!(
            p.to_string(),
            "persistent://public/default/orders-partition-3"
        );
        assert_eq!(p.base(), t);
        // Not partition suffixes.
        for local in [
            "a-partition-",
            "a-partition-x",
            "a-partition-01",
            "-partition-1",
        ] {
            let x = PulsarTopic::parse(&format!("persistent://public/default/{local}")).unwrap();
            assert_eq!(x.partition, None, "{local}");
        }
    }

    #[test]
    fn other_namespaces_get_a_prefix_and_come_back() {
        let t = PulsarTopic::parse("persistent://acme/billing/orders-partition-0").unwrap();
        assert_eq!(t.kafka_name().as_str(), "acme.billing.orders");
        let exists = |ns: &Namespace| ns.tenant == "acme" && ns.namespace == "billing";
        assert_eq!(PulsarTopic::from_kafka(&t.kafka_name(), exists), t.base());
        // Without the namespace, the same Kafka name is a public/default topic.
        let plain = PulsarTopic::from_kafka(&t.kafka_name(), |_| false);
        assert!(plain.namespace.is_default());
        assert_eq!(plain.local, "acme.billing.orders");
        assert!(plain.shadows_a_namespace(exists));
        assert!(!plain.shadows_a_namespace(|_| false));
    }

    #[test]
    fn bad_names_say_why() {
        for bad in [
            "non-persistent://public/default/t",
            "http://public/default/t",
            "persistent://public/default",
            "persistent://a.b/c/t",
            "persistent://a/b/c/d",
            "persistent://public/default/has space",
            "persistent://public/default/colon:s",
            "persistent://public//t",
        ] {
            assert!(
                matches!(
                    PulsarTopic::parse(bad),
                    Err(Error::InvalidPulsarName { .. })
                ),
                "{bad}"
            );
        }
    }

    proptest! {
        /// Every valid name maps to a Kafka topic and back (with its
        /// namespace existing), and prints as it parsed.
        #[test]
        fn mapping_is_reversible(
            tenant in "[a-z][a-z0-9_-]{0,8}",
            ns in "[a-z][a-z0-9_-]{0,8}",
            local in "[a-zA-Z0-9][a-zA-Z0-9._-]{0,30}",
            partition in proptest::option::of(0u32..10_000),
        ) {
            let name = match partition {
                Some(p) => format!("persistent://{tenant}/{ns}/{local}-partition-{p}"),
                None => format!("persistent://{tenant}/{ns}/{local}"),
            };
            let t = PulsarTopic::parse(&name).unwrap();
            prop_assert_eq!(t.to_string(), name);
            let ns_of = t.namespace.clone();
            let back = PulsarTopic::from_kafka(&t.kafka_name(), |n| *n == ns_of);
            prop_assert_eq!(back, t.base());
        }
    }
}
