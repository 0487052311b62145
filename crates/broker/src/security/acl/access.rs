//! What a request's principal may do: the broker's authorizer asked with
//! the principal and the client's address, as Kafka's `AuthHelper`. Every
//! front end (Kafka, Pulsar, HTTP) asks through [`Access`]; without an
//! authorizer everything is allowed.

use tracing::debug;

use super::{Authorizer, Operation, ResourceType, CLUSTER_NAME};
use crate::security::Principal;
use crate::Broker;

/// Who is asking, as a front end's request knows it.
pub trait Requester {
    /// The authenticated principal.
    fn principal(&self) -> &Principal;
    /// The client's IP address (a leading `/` is ignored).
    fn client_host(&self) -> &str;
    /// Why this requester may do nothing at all, whatever its principal
    /// and the ACLs (a client that did not authenticate where it has to);
    /// `None` for every other.
    fn refusal(&self) -> Option<&str> {
        None
    }
}

/// The authorizer as one request sees it.
#[derive(Clone, Copy)]
pub struct Access<'a> {
    authorizer: Option<&'a Authorizer>,
    principal: &'a Principal,
    host: &'a str,
    /// Everything is denied (see [`Requester::refusal`]).
    refused: bool,
}

impl<'a> Access<'a> {
    /// The access of `requester`'s principal on `broker`.
    pub fn of<R: Requester + ?Sized>(broker: &'a Broker, requester: &'a R) -> Access<'a> {
        Access {
            refused: requester.refusal().is_some(),
            ..Access::new(
                broker.authorizer(),
                requester.principal(),
                requester.client_host(),
            )
        }
    }

    /// The access of `principal` from `host` (an IP address) by
    /// `authorizer` (`None`: everything is allowed).
    pub fn new(
        authorizer: Option<&'a Authorizer>,
        principal: &'a Principal,
        host: &'a str,
    ) -> Access<'a> {
        Access {
            authorizer,
            principal,
            host: host.trim_start_matches('/'),
            refused: false,
        }
    }

    /// Whether requests are checked: an authorizer is configured (or the
    /// requester may do nothing).
    pub fn checks(&self) -> bool {
        self.authorizer.is_some() || self.refused
    }

    /// The principal asking.
    pub fn principal(&self) -> &Principal {
        self.principal
    }

    /// Whether `operation` on `kind`/`name` is allowed.
    pub fn may(&self, operation: Operation, kind: ResourceType, name: &str) -> bool {
        if self.refused {
            return false;
        }
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
    ) -> Result<(), crate::Error> {
        if self.may(operation, kind, name) {
            Ok(())
        } else {
            Err(crate::Error::Denied {
                kind,
                name: name.to_string(),
                operation,
            })
        }
    }

    /// [`Access::require`] on a topic.
    pub fn require_topic(&self, operation: Operation, name: &str) -> Result<(), crate::Error> {
        self.require(operation, ResourceType::Topic, name)
    }

    /// [`Access::require`] on the cluster.
    pub fn require_cluster(&self, operation: Operation) -> Result<(), crate::Error> {
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
        !self.refused
            && self
                .authorizer
                .is_none_or(|a| a.authorize_by_type(self.principal, self.host, operation, kind))
    }

    /// Create on the cluster, or else on the topic: what creating a topic
    /// takes.
    pub fn may_create_topic(&self, name: &str) -> bool {
        (self.authorizer.is_none() && !self.refused)
            || self.cluster(Operation::Create)
            || self.topic(Operation::Create, name)
    }

    /// Kafka's `authorized_operations` bit field for the resource: every
    /// operation of its type when there is no authorizer.
    pub fn operations(&self, kind: ResourceType, name: &str) -> i32 {
        match self.authorizer {
            _ if self.refused => 0,
            Some(a) => a.authorized_operations(self.principal, self.host, kind, name),
            None => kind
                .operations()
                .iter()
                .fold(0, |bits, op| bits | (1 << op.code())),
        }
    }
}

impl<T: Requester + ?Sized> Requester for std::sync::Arc<T> {
    fn principal(&self) -> &Principal {
        (**self).principal()
    }

    fn client_host(&self) -> &str {
        (**self).client_host()
    }

    fn refusal(&self) -> Option<&str> {
        (**self).refusal()
    }
}
