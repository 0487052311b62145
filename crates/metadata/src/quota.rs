//! Client quotas (Kafka's KIP-13 and KIP-546): produce and fetch byte rates
//! and a request-time percentage per user, per client id, or per user and
//! client id, with defaults at each level. The quotas are metadata records
//! (so a cluster replicates them); each request's use is measured by
//! [`sensor::RateSensor`]s and a client over its quota is throttled, never
//! refused: the front end reports the delay (`throttle_time_ms`) and holds
//! the connection's next request back that long, as Kafka does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Produced bytes per second (`producer_byte_rate`).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Fetched bytes per second (`consumer_byte_rate`).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Percentage of one request-handling thread's time (`request_percentage`).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Partition mutations per second (`controller_mutation_rate`): stored and
/// described, not enforced.
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";

/// The quota keys of user and client-id entities.
pub const KEYS: &[&str] = &[
    PRODUCER_BYTE_RATE,
    CONSUMER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    CONTROLLER_MUTATION_RATE,
];

/// What a quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Bytes produced.
    Produce,
    /// Bytes fetched.
    Fetch,
    /// Request-handling time.
    Request,
}

impl QuotaKind {
    /// The quota key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Request => REQUEST_PERCENTAGE,
        }
    }
}

/// One level of an entity: a name, or the default of its type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityName {
    /// Every user (client id) without its own quota.
    Default,
    /// This user (client id).
    Named(String),
}

/// Whom a quota is for: a user, a client id, or both (Kafka's
/// `ClientQuotaEntity`); at least one is set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QuotaEntity {
    /// The user level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<EntityName>,
    /// The client-id level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<EntityName>,
}

/// The quotas of every entity, key → value.
pub type Quotas = BTreeMap<QuotaEntity, BTreeMap<String, f64>>;

/// Checks a quota value as Kafka's `ClientQuotaControlManager` does: a
/// known key, a positive value, whole for the byte rates.
pub fn validate(key: &str, value: f64) -> Result<(), String> {
    if !KEYS.contains(&key) {
        return Err(format!(
            "Invalid configuration key {key}: expected one of {}",
            KEYS.join(", ")
        ));
    }
    if !value.is_finite() || value <= 0.0 {
        return Err(format!("{key} must be positive, got {value}"));
    }
    if (key == PRODUCER_BYTE_RATE || key == CONSUMER_BYTE_RATE) && value.fract() != 0.0 {
        return Err(format!("{key} must be a whole number, got {value}"));
    }
    Ok(())
}

/// Where `entity` stands in Kafka's precedence for `user` with
/// `client_id` (0 first), if it applies to them at all.
fn rank(entity: &QuotaEntity, user: &str, client_id: &str) -> Option<usize> {
    use EntityName::{Default, Named};
    match (&entity.user, &entity.client_id) {
        (Some(Named(u)), Some(Named(c))) if u == user && c == client_id => Some(0),
        (Some(Named(u)), Some(Default)) if u == user => Some(1),
        (Some(Named(u)), None) if u == user => Some(2),
        (Some(Default), Some(Named(c))) if c == client_id => Some(3),
        (Some(Default), Some(Default)) => Some(4),
        (Some(Default), None) => Some(5),
        (None, Some(Named(c))) if c == client_id => Some(6),
        (None, Some(Default)) => Some(7),
        _ => None,
    }
}

/// The quota `kind` that applies to `user` with `client_id`, and the key of
/// the bucket it is measured in, by Kafka's precedence: user and client id,
/// user and default client id, user, default user and client id, default
/// user and default client id, default user, client id, default client id.
/// A quota matched through a default is measured per actual user (client
/// id), as Kafka's metric tags are.
pub fn resolve(
    quotas: &Quotas,
    kind: QuotaKind,
    user: &str,
    client_id: &str,
) -> Option<(f64, (String, String))> {
    let (r, value) = quotas
        .iter()
        .filter_map(|(e, values)| Some((rank(e, user, client_id)?, *values.get(kind.key())?)))
        .min_by_key(|(r, _)| *r)?;
    let with_user = r <= 5;
    let with_client = !matches!(r, 2 | 5);
    let bucket = (
        if with_user { user } else { "" }.to_string(),
        if with_client { client_id } else { "" }.to_string(),
    );
    Some((value, bucket))
}

/// How a DescribeClientQuotas component matches one entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentMatch {
    /// The named entity only.
    Exact(String),
    /// The default entity only.
    Default,
    /// Any entity of the type (named or default).
    Any,
}

/// Whether `entity` passes the filter: each component's type must be
/// present and match; with `strict`, no other type may be present.
pub fn filter_matches(
    entity: &QuotaEntity,
    user: Option<&ComponentMatch>,
    client_id: Option<&ComponentMatch>,
    strict: bool,
) -> bool {
    let level = |have: &Option<EntityName>, want: Option<&ComponentMatch>| match (have, want) {
        (_, None) => !strict || have.is_none(),
        (None, Some(_)) => false,
        (Some(_), Some(ComponentMatch::Any)) => true,
        (Some(EntityName::Default), Some(ComponentMatch::Default)) => true,
        (Some(EntityName::Named(n)), Some(ComponentMatch::Exact(w))) => n == w,
        _ => false,
    };
    level(&entity.user, user) && level(&entity.client_id, client_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client: Option<&str>) -> QuotaEntity {
        let name = |s: &str| {
            if s == "<default>" {
                EntityName::Default
            } else {
                EntityName::Named(s.to_string())
            }
        };
        QuotaEntity {
            user: user.map(name),
            client_id: client.map(name),
        }
    }

    #[test]
    fn precedence_is_kafkas() {
        let mut q = Quotas::new();
        let mut set = |u, c, v: f64| {
            q.entry(entity(u, c))
                .or_default()
                .insert(PRODUCER_BYTE_RATE.to_string(), v);
        };
        set(None, Some("<default>"), 8.0);
        set(None, Some("app"), 7.0);
        set(Some("<default>"), None, 6.0);
        set(Some("<default>"), Some("<default>"), 5.0);
        set(Some("<default>"), Some("app"), 4.0);
        set(Some("alice"), None, 3.0);
        set(Some("alice"), Some("<default>"), 2.0);
        set(Some("alice"), Some("app"), 1.0);
        let r = |u, c| resolve(&q, QuotaKind::Produce, u, c).unwrap();
        assert_eq!(r("alice", "app"), (1.0, ("alice".into(), "app".into())));
        assert_eq!(r("alice", "other").0, 2.0);
        assert_eq!(r("bob", "app").0, 4.0);
        assert_eq!(r("bob", "other"), (5.0, ("bob".into(), "other".into())));
        q.remove(&entity(Some("<default>"), Some("<default>")));
        q.remove(&entity(Some("<default>"), Some("app")));
        let r = |u, c| resolve(&q, QuotaKind::Produce, u, c).unwrap();
        assert_eq!(r("bob", "app"), (6.0, ("bob".into(), String::new())));
        assert!(resolve(&q, QuotaKind::Fetch, "bob", "app").is_none());
        q.remove(&entity(Some("<default>"), None));
        let r = |u, c| resolve(&q, QuotaKind::Produce, u, c).unwrap();
        assert_eq!(r("bob", "app"), (7.0, (String::new(), "app".into())));
        assert_eq!(r("bob", "x"), (8.0, (String::new(), "x".into())));
    }

    #[test]
    fn values_are_checked() {
        assert!(validate(PRODUCER_BYTE_RATE, 1024.0).is_ok());
        assert!(validate(PRODUCER_BYTE_RATE, 10.5).is_err());
        assert!(validate(REQUEST_PERCENTAGE, 12.5).is_ok());
        assert!(validate(CONSUMER_BYTE_RATE, 0.0).is_err());
        assert!(validate("bytes_per_fortnight", 1.0).is_err());
    }

    #[test]
    fn filters_follow_strictness() {
        let both = entity(Some("alice"), Some("app"));
        let user = entity(Some("alice"), None);
        let any = ComponentMatch::Any;
        let alice = ComponentMatch::Exact("alice".into());
        assert!(filter_matches(&both, Some(&alice), None, false));
        assert!(!filter_matches(&both, Some(&alice), None, true));
        assert!(filter_matches(&user, Some(&alice), None, true));
        assert!(filter_matches(&both, Some(&any), Some(&any), true));
        assert!(!filter_matches(&user, Some(&any), Some(&any), false));
        let d = entity(Some("<default>"), None);
        assert!(filter_matches(
            &d,
            Some(&ComponentMatch::Default),
            None,
            true
        ));
        assert!(!filter_matches(&d, Some(&alice), None, true));
    }
}

/// [`Quotas`] as a list of entries: their keys are structs, which JSON
/// maps cannot have.
pub mod serde_quotas {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{QuotaEntity, Quotas};

    #[derive(Serialize, Deserialize)]
    struct Entry {
        entity: QuotaEntity,
        values: BTreeMap<String, f64>,
    }

    /// Writes the entries in entity order.
    pub fn serialize<S: Serializer>(q: &Quotas, s: S) -> Result<S::Ok, S::Error> {
        let entries: Vec<Entry> = q
            .iter()
            .map(|(e, v)| Entry {
                entity: e.clone(),
                values: v.clone(),
            })
            .collect();
        entries.serialize(s)
    }

    /// Reads the entries back.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Quotas, D::Error> {
        Ok(Vec::<Entry>::deserialize(d)?
            .into_iter()
            .map(|e| (e.entity, e.values))
            .collect())
    }
}
