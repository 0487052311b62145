//! What the connection's principal may do: the broker's authorizer asked
//! with the request's principal and client address, as Kafka's
//! `AuthHelper`. Without an authorizer everything is allowed.

use broker::security::acl::{Authorizer, Operation, ResourceType, CLUSTER_NAME};
use broker::security::Principal;
use broker::Broker;
use tracing::debug;

use crate::RequestContext;

/// The authorizer as one request sees it.
#[derive(Clone, Copy)]
pub(crate) struct Access<'a> {
    authorizer: Option<&'a Authorizer>,
    principal: &'a Principal,
    host: &'a str,
}

impl<'a> Access<'a> {
    /// The access of `ctx`'s principal on `broker`.
    pub fn of(broker: &'a Broker, ctx: &'a RequestContext) -> Access<'a> {
        Access {
            authorizer: broker.authorizer(),
            principal: &ctx.principal,
            host: ctx.client_host.trim_start_matches('/'),
        }
    }

    /// Whether `operation` on `kind`/`name` is allowed.
    pub fn may(&self, operation: Operation, kind: ResourceType, name: &str) -> bool {
        let Some(a) = self.authorizer else {
            return true;
        };
        let ok = a.authorize(self.principal, self.host, operation, kind, name);
        if !ok {
            debug!(principal = %self.principal, host = self.host, ?operation, ?kind, name, "denied");
        }
        ok
    }

    /// `Ok` if allowed, else the error Kafka answers for the resource type.
    pub fn require(
        &self,
        operation: Operation,
        kind: ResourceType,
        name: &str,
    ) -> Result<(), broker::Error> {
        if self.may(operation, kind, name) {
            Ok(())
        } else {
            Err(broker::Error::Denied {
                kind,
                name: name.to_string(),
                operation,
            })
        }
    }

    /// [`Access::require`] on a topic.
    pub fn require_topic(&self, operation: Operation, name: &str) -> Result<(), broker::Error> {
        self.require(operation, ResourceType::Topic, name)
    }

    /// [`Access::require`] on the cluster.
    pub fn require_cluster(&self, operation: Operation) -> Result<(), broker::Error> {
        self.require(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// On a topic.
    pub fn topic(&self, operation: Operation, name: &str) -> bool {
        self.may(operation, ResourceType::Topic, name)
    }

    /// On a group.
    pub fn group(&self, operation: Operation, id: &str) -> bool {
        self.may(operation, ResourceType::Group, id)
    }

    /// On the cluster.
    pub fn cluster(&self, operation: Operation) -> bool {
        self.may(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// On a transactional id.
    pub fn transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.may(operation, ResourceType::TransactionalId, id)
    }

    /// On at least one resource of `kind` (KIP-679).
    pub fn any_of_type(&self, operation: Operation, kind: ResourceType) -> bool {
        self.authorizer
            .is_none_or(|a| a.authorize_by_type(self.principal, self.host, operation, kind))
    }

    /// Create on the cluster, or else on the topic: what creating a topic
    /// takes.
    pub fn may_create_topic(&self, name: &str) -> bool {
        self.authorizer.is_none()
            || self.cluster(Operation::Create)
            || self.topic(Operation::Create, name)
    }

    /// Kafka's `authorized_operations` bit field for the resource: every
    /// operation of its type when there is no authorizer.
    pub fn operations(&self, kind: ResourceType, name: &str) -> i32 {
        match self.authorizer {
            Some(a) => a.authorized_operations(self.principal, self.host, kind, name),
            None => kind
                .operations()
                .iter()
                .fold(0, |bits, op| bits | (1 << op.code())),
        }
    }
}

/// Kafka's "not asked for" value of `authorized_operations` fields.
pub(crate) const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
