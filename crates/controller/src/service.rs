//! An application service answered by the leader: requests that are not
//! records (a broker's registration and heartbeats) but must reach the
//! active controller, which decides what to commit.

use std::future::Future;
use std::pin::Pin;

use crate::error::Result;

/// A boxed future of a service answer.
pub type ServiceFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send + 'a>>;

/// Requests of the application (opaque bytes, its own encoding) that only
/// the leader answers: the controller refuses them with "not leader" on
/// any other node, so callers reach the leader as submissions do
/// ([`ControllerClient::call_leader`](crate::ControllerClient::call_leader)).
pub trait Service: Send + Sync + 'static {
    /// Answers one request; `Err` is the refusal the caller sees.
    fn call(&self, request: Vec<u8>) -> ServiceFuture<'_>;
}
