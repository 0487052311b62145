//! DescribeClientQuotas (key 48, KIP-546): the quotas of the entities a
//! filter selects. Needs DescribeConfigs on the cluster.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use crate::authz::Access;
use crate::quota_wire::{pairs, CLIENT_ID, USER};
use crate::Versions;
use broker::quota::ComponentMatch;
use broker::security::acl::Operation;
use broker::Broker;

/// Versions implemented.
pub const VERSIONS: Versions = Versions::new(0, 1);

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

fn failed(code: ResponseError, message: String) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(message)))
        .with_entries(None)
}

/// Answers the request.
pub(crate) fn handle(
    broker: &Broker,
    access: &Access,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    if !access.cluster(Operation::DescribeConfigs) {
        return failed(
            ResponseError::ClusterAuthorizationFailed,
            "DescribeClientQuotas needs DescribeConfigs on the cluster".into(),
        );
    }
    let (mut user, mut client, mut ip) = (None, None, false);
    for c in &req.components {
        let m = match (c.match_type, c._match.as_ref()) {
            (MATCH_EXACT, Some(name)) => ComponentMatch::Exact(name.to_string()),
            (MATCH_EXACT, None) => {
                return failed(
                    ResponseError::InvalidRequest,
                    format!("an exact match of {} needs a name", c.entity_type.as_str()),
                )
            }
            (MATCH_DEFAULT | MATCH_ANY, Some(_)) => {
                return failed(
                    ResponseError::InvalidRequest,
                    "a DEFAULT or ANY component takes no name".into(),
                )
            }
            (MATCH_DEFAULT, None) => ComponentMatch::Default,
            (MATCH_ANY, None) => ComponentMatch::Any,
            (other, _) => {
                return failed(
                    ResponseError::InvalidRequest,
                    format!("unknown match type {other}"),
                )
            }
        };
        let slot = match c.entity_type.as_str() {
            USER => &mut user,
            CLIENT_ID => &mut client,
            // No ip entity can exist here; as Kafka, one filtered on alone
            // matches nothing and is refused with the others.
            crate::quota_wire::IP => {
                ip = true;
                continue;
            }
            other => {
                return failed(
                    ResponseError::InvalidRequest,
                    format!("Custom entity type {other} not supported"),
                )
            }
        };
        if slot.replace(m).is_some() {
            return failed(
                ResponseError::InvalidRequest,
                format!("Duplicate {} filter component", c.entity_type.as_str()),
            );
        }
    }
    if ip {
        if user.is_some() || client.is_some() {
            return failed(
                ResponseError::InvalidRequest,
                "ip components cannot be combined with user or client-id".into(),
            );
        }
        return DescribeClientQuotasResponse::default().with_entries(Some(Vec::new()));
    }
    let entries = broker
        .describe_client_quotas(user.as_ref(), client.as_ref(), req.strict)
        .into_iter()
        .map(|(entity, values)| {
            EntryData::default()
                .with_entity(
                    pairs(&entity)
                        .into_iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(t)
                                .with_entity_name(n)
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .into_iter()
                        .map(|(k, v)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(k))
                                .with_value(v)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}
