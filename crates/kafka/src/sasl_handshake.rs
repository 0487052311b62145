//! SaslHandshake (key 17): the client names the SASL mechanism it will use;
//! the answer lists the listener's mechanisms. v0's raw SASL frames are
//! not implemented (Kafka 4 removed them too): clients send the exchange in
//! SaslAuthenticate requests.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use crate::session::{AuthState, ListenerSecurity, Session};
use crate::Versions;
use broker::security::{Mechanism, SaslExchange};

/// Versions implemented.
pub const VERSIONS: Versions = Versions::new(1, 1);

/// The answer, and why to close the connection after it, if so.
pub(crate) fn handle(
    session: &mut Session,
    listener: &ListenerSecurity,
    req: SaslHandshakeRequest,
) -> (SaslHandshakeResponse, Option<String>) {
    let names = listener
        .mechanism_names()
        .into_iter()
        .map(StrBytes::from_static_str)
        .collect();
    let resp = SaslHandshakeResponse::default().with_mechanisms(names);
    if !listener.protocol.sasl() {
        let resp = resp.with_error_code(ResponseError::IllegalSaslState.code());
        return (resp, None);
    }
    let wanted = req.mechanism.as_str();
    let reauth_of = match &session.state {
        AuthState::AwaitingHandshake => None,
        AuthState::Authenticated { expires } => Some(((*session.principal).clone(), *expires)),
        _ => {
            return (
                resp.with_error_code(ResponseError::IllegalSaslState.code()),
                Some("a SaslHandshake in the middle of a SASL exchange".into()),
            )
        }
    };
    let Some(mechanism) = Mechanism::from_name(wanted).filter(|m| listener.mechanisms.contains(m))
    else {
        return (
            resp.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
            Some(format!(
                "the client asked for SASL mechanism {wanted:?}, which listener {} does not offer",
                listener.name
            )),
        );
    };
    session.state = AuthState::Authenticating {
        exchange: Some(SaslExchange::start(mechanism)),
        reauth_of,
    };
    (resp, None)
}
