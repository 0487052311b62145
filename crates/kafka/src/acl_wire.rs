//! ACL bindings and filters as the ACL requests carry them (Kafka's codes).

use broker::security::acl::{
    AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, ResourceType,
};
use kafka_protocol::protocol::StrBytes;

/// Kafka's ANY code (resource type, pattern type, operation, permission).
const ANY: i8 = 1;
/// Kafka's MATCH pattern type.
const MATCH: i8 = 2;

/// A binding from its wire fields; the error says which field is wrong.
pub(crate) fn binding(
    resource_type: i8,
    resource_name: &str,
    pattern_type: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<AclBinding, String> {
    let resource_type = ResourceType::from_code(resource_type)
        .ok_or_else(|| format!("invalid resource type {resource_type}"))?;
    let pattern_type = match pattern_type {
        3 => PatternType::Literal,
        4 => PatternType::Prefixed,
        p => {
            return Err(format!(
                "invalid pattern type {p}: expected LITERAL or PREFIXED"
            ))
        }
    };
    let operation =
        Operation::from_code(operation).ok_or_else(|| format!("invalid operation {operation}"))?;
    let permission = Permission::from_code(permission)
        .ok_or_else(|| format!("invalid permission type {permission}"))?;
    Ok(AclBinding {
        resource_type,
        resource_name: resource_name.to_string(),
        pattern_type,
        principal: principal.to_string(),
        host: host.to_string(),
        operation,
        permission,
    })
}

/// A filter from its wire fields (ANY and null match anything).
pub(crate) fn filter(
    resource_type: i8,
    resource_name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    let any_or = |code: i8, what: &str, known: Option<()>| {
        if code == ANY || known.is_some() {
            Ok(())
        } else {
            Err(format!("invalid {what} {code} in the filter"))
        }
    };
    any_or(
        resource_type,
        "resource type",
        ResourceType::from_code(resource_type).map(|_| ()),
    )?;
    any_or(
        operation,
        "operation",
        Operation::from_code(operation).map(|_| ()),
    )?;
    any_or(
        permission,
        "permission type",
        Permission::from_code(permission).map(|_| ()),
    )?;
    let pattern = match pattern_type {
        ANY => PatternFilter::Any,
        MATCH => PatternFilter::Match,
        3 => PatternFilter::Exactly(PatternType::Literal),
        4 => PatternFilter::Exactly(PatternType::Prefixed),
        p => return Err(format!("invalid pattern type {p} in the filter")),
    };
    let text = |s: Option<&StrBytes>| s.map(|s| s.to_string());
    Ok(AclFilter {
        resource_type: ResourceType::from_code(resource_type),
        resource_name: text(resource_name),
        pattern,
        principal: text(principal),
        host: text(host),
        operation: Operation::from_code(operation),
        permission: Permission::from_code(permission),
    })
}

/// A string field of a response.
pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}
