//! SaslAuthenticate (key 36): one step of the SASL exchange the handshake
//! chose. The step runs on the blocking pool (PLAIN derives a key from the
//! password, deliberately slowly). A failed authentication is answered
//! SASL_AUTHENTICATION_FAILED after `connection.failed.authentication.delay.ms`
//! and the connection is closed; the message never tells a wrong password
//! from an unknown user.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::session::{AuthState, ListenerSecurity, Session};
use crate::Versions;
use broker::security::{credentials, SaslStep};
use broker::Broker;

/// Versions implemented.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// How a step ended, for the connection: keep going, or close after the
/// answer (with why, for the log).
pub(crate) struct Answer {
    pub response: SaslAuthenticateResponse,
    pub close: Option<String>,
    /// Whether the answer is a failed authentication (delayed before it is
    /// sent).
    pub failed: bool,
}

/// Runs one step.
pub(crate) async fn handle(
    broker: &Arc<Broker>,
    session: &mut Session,
    listener: &ListenerSecurity,
    version: i16,
    req: SaslAuthenticateRequest,
) -> Answer {
    let illegal = |why: &str| Answer {
        response: SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_error_message(Some(StrBytes::from_string(why.to_string()))),
        close: Some(why.to_string()),
        failed: false,
    };
    if !listener.protocol.sasl() {
        return illegal("SaslAuthenticate on a listener without SASL");
    }
    let AuthState::Authenticating {
        exchange,
        reauth_of,
    } = &mut session.state
    else {
        return illegal("SaslAuthenticate before SaslHandshake");
    };
    let Some(exchange) = exchange.take() else {
        return illegal("SaslAuthenticate after a failed step");
    };
    let reauth_of = reauth_of.clone();
    let b = broker.clone();
    let message = req.auth_bytes;
    let step = tokio::task::spawn_blocking(move || {
        let lookup = |user: &str, m| b.scram_credential(user, m);
        exchange.step(&message, &lookup, credentials::unknown_user_secret())
    })
    .await;
    let step = match step {
        Ok(s) => s,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    match step {
        Ok(SaslStep::Continue(bytes, next)) => {
            session.state = AuthState::Authenticating {
                exchange: Some(next),
                reauth_of,
            };
            Answer {
                response: SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(bytes)),
                close: None,
                failed: false,
            }
        }
        Ok(SaslStep::Done(principal, bytes)) => {
            if let Some((before, _)) = &reauth_of {
                if *before != principal {
                    return Answer {
                        response: failed_response(
                            "re-authentication must keep the session's principal",
                        ),
                        close: Some(format!(
                            "re-authentication as {principal} on a session of {before}"
                        )),
                        failed: true,
                    };
                }
            }
            let lifetime = listener.reauth;
            session.principal = std::sync::Arc::new(principal);
            session.state = AuthState::Authenticated {
                expires: lifetime.map(|d| Instant::now() + d),
            };
            let mut response =
                SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(bytes));
            if version >= 1 {
                response.session_lifetime_ms = lifetime.map_or(0, |d| d.as_millis() as i64);
            }
            Answer {
                response,
                close: None,
                failed: false,
            }
        }
        Err(e) => Answer {
            response: failed_response(&e.to_string()),
            close: Some(format!("SASL authentication failed: {}", e.log_detail())),
            failed: true,
        },
    }
}

fn failed_response(message: &str) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}
