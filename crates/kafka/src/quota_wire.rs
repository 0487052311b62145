//! Client-quota entities as AlterClientQuotas and DescribeClientQuotas
//! carry them: `(entity_type, entity_name)` pairs, a null name meaning the
//! type's default.

use broker::quota::{EntityName, QuotaEntity};
use kafka_protocol::protocol::StrBytes;

/// Kafka's user entity type.
pub(crate) const USER: &str = "user";
/// Kafka's client-id entity type.
pub(crate) const CLIENT_ID: &str = "client-id";
/// Kafka's IP entity type (connection quotas; not supported here).
pub(crate) const IP: &str = "ip";

/// An entity from its wire pairs; the error says what is wrong.
pub(crate) fn entity<'a>(
    pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<QuotaEntity, String> {
    let mut e = QuotaEntity {
        user: None,
        client_id: None,
    };
    for (kind, name) in pairs {
        let name = match name {
            None => EntityName::Default,
            Some(n) => EntityName::Named(n.to_string()),
        };
        let slot = match kind {
            USER => &mut e.user,
            CLIENT_ID => &mut e.client_id,
            IP => {
                return Err(
                    "ip entities (connection_creation_rate) are not supported by this broker"
                        .into(),
                )
            }
            other => return Err(format!("Unhandled client quota entity type: {other}")),
        };
        if slot.replace(name).is_some() {
            return Err(format!("Duplicate {kind} entity in the request"));
        }
    }
    if e.user.is_none() && e.client_id.is_none() {
        return Err("an entity needs a user or a client-id".into());
    }
    Ok(e)
}

/// An entity's wire pairs, user first.
pub(crate) fn pairs(e: &QuotaEntity) -> Vec<(StrBytes, Option<StrBytes>)> {
    let name = |n: &EntityName| match n {
        EntityName::Default => None,
        EntityName::Named(n) => Some(StrBytes::from_string(n.clone())),
    };
    let mut out = Vec::new();
    if let Some(u) = &e.user {
        out.push((StrBytes::from_static_str(USER), name(u)));
    }
    if let Some(c) = &e.client_id {
        out.push((StrBytes::from_static_str(CLIENT_ID), name(c)));
    }
    out
}
