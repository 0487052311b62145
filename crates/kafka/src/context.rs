//! What every API handler shares: the versions it implements
//! ([`Versions`]), what it knows about the request ([`RequestContext`]),
//! what the connection is to do after it ([`Outcome`]), and resolving a
//! topic named on the wire ([`find_topic`]).

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, ResponseKind};

use broker::Broker;

use crate::response;

/// An inclusive range of versions of one API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// Lowest supported version.
    pub min: i16,
    /// Highest supported version.
    pub max: i16,
}

impl Versions {
    /// `min..=max`.
    pub const fn new(min: i16, max: i16) -> Versions {
        Versions { min, max }
    }

    /// Whether `v` is in range.
    pub fn contains(&self, v: i16) -> bool {
        (self.min..=self.max).contains(&v)
    }
}

/// What a handler knows about the request besides its body.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// Which API.
    pub api_key: ApiKey,
    /// Which version of it.
    pub api_version: i16,
    /// Echoed in the response header.
    pub correlation_id: i32,
    /// The client's self-reported id.
    pub client_id: Option<String>,
    /// The client's address as Kafka reports it (`/ip`).
    pub client_host: String,
    /// The key of the listener's endpoints in broker registrations: what
    /// Metadata, FindCoordinator and DescribeCluster answer with.
    pub listener: Arc<str>,
    /// The request's size in bytes (what a produce quota counts).
    pub request_size: usize,
    /// Who the client is on this connection (`User:ANONYMOUS` unless TLS
    /// or SASL said otherwise): what the authorizer is asked about.
    pub principal: Arc<broker::security::Principal>,
}

/// What to do after a request.
// Built once per request and moved once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Outcome {
    /// Send this response.
    Reply(ResponseKind),
    /// Send this response frame, encoded already (Fetch: written from the
    /// segment files in pieces).
    Frame(response::ResponseFrame),
    /// The protocol wants no response (Produce with acks=0).
    NoReply,
    /// Close the connection, logging why.
    Close(String),
}

/// Resolves a topic named on the wire, without ever creating it.
pub(crate) fn find_topic(broker: &Broker, name: &str) -> Result<Arc<broker::Topic>, broker::Error> {
    broker.resolve_topic_name(name)
}
