//! SaslAuthenticate (key 36): one step of the SASL exchange the handshake
//! chose. The step runs on the blocking pool (PLAIN derives a key from the
//! password, deliberately slowly). A failed authentication is answered
//! SASL_AUTHENTICATION_FAILED after `connection.failed.authentication.delay.ms`
//! and the connection is closed; the message never tells a wrong password
//! from an unknown user.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::session::{AuthState, ListenerSecurity, Session};
use crate::Versions;
use broker::security::{credentials, SaslContext, SaslStep};
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
    let tokens = listener.tokens.clone();
    let step = tokio::task::spawn_blocking(move || {
        let lookup = |user: &str, m| b.scram_credential(user, m);
        let cx = SaslContext {
            lookup: &lookup,
            secret: credentials::unknown_user_secret(),
            tokens: tokens.as_deref(),
            now_ms: broker::now_ms().0,
        };
        exchange.step(&message, &cx)
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
        Ok(SaslStep::Done(principal, bytes, credential_ends_ms)) => {
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
            // A token's own end bounds the session too (KIP-368), as
            // Kafka bounds it by the credential's expiration.
            let token_left = credential_ends_ms.map(|end| {
                Duration::from_millis(end.saturating_sub(broker::now_ms().0).max(1) as u64)
            });
            let lifetime = match (listener.reauth, token_left) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
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
