//! What the connection's principal may do: the broker's [`Access`], asked
//! with the request's principal and client address.

use broker::security::acl::Requester;
use broker::security::Principal;

use crate::RequestContext;

pub(crate) use broker::security::acl::Access;

impl Requester for RequestContext {
    fn principal(&self) -> &Principal {
        &self.principal
    }

    fn client_host(&self) -> &str {
        &self.client_host
    }
}

/// Kafka's "not asked for" value of `authorized_operations` fields.
pub(crate) const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
