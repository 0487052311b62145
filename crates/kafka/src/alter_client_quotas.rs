//! AlterClientQuotas (key 49, KIP-546): sets and removes quotas of users
//! and client ids (and their defaults). Needs AlterConfigs on the cluster.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use crate::authz::Access;
use crate::error::response_error;
use crate::quota_wire::entity;
use crate::Versions;
use broker::quota::QuotaAlteration;
use broker::security::acl::Operation;
use broker::Broker;

/// Versions implemented.
pub const VERSIONS: Versions = Versions::new(0, 1);

/// Answers the request: one entry per entity, with its own error.
pub(crate) fn handle(
    broker: &Broker,
    access: &Access,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let wire_entity =
        |e: &[kafka_protocol::messages::alter_client_quotas_request::EntityData]| {
            e.iter()
                .map(|d| {
                    EntityData::default()
                        .with_entity_type(d.entity_type.clone())
                        .with_entity_name(d.entity_name.clone())
                })
                .collect::<Vec<_>>()
        };
    let denied = !access.cluster(Operation::AlterConfigs);
    let parsed: Vec<Result<QuotaAlteration, (ResponseError, String)>> = req
        .entries
        .iter()
        .map(|e| {
            if denied {
                return Err((
                    ResponseError::ClusterAuthorizationFailed,
                    "AlterClientQuotas needs AlterConfigs on the cluster".into(),
                ));
            }
            let entity = entity(
                e.entity
                    .iter()
                    .map(|d| (d.entity_type.as_str(), d.entity_name.as_deref())),
            )
            .map_err(|m| (ResponseError::InvalidRequest, m))?;
            let ops = e
                .ops
                .iter()
                .map(|o| (o.key.to_string(), (!o.remove).then_some(o.value)))
                .collect();
            Ok(QuotaAlteration { entity, ops })
        })
        .collect();
    let valid: Vec<QuotaAlteration> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
    let mut applied = broker
        .alter_client_quotas(&valid, req.validate_only)
        .into_iter();
    let entries = req
        .entries
        .iter()
        .zip(parsed)
        .map(|(e, p)| {
            let out = EntryData::default().with_entity(wire_entity(&e.entity));
            let failure = match p {
                Err(f) => Some(f),
                Ok(_) => match applied.next() {
                    Some(Ok(())) => None,
                    Some(Err(err)) => Some((response_error(&err), err.to_string())),
                    None => Some((ResponseError::UnknownServerError, "no result".into())),
                },
            };
            match failure {
                None => out,
                Some((code, message)) => out
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}
