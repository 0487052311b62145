//! One SASL authentication of a connection, without I/O: the SaslHandshake
//! request, then SaslAuthenticate requests for the mechanism's messages
//! until the broker accepts (or refuses), and the session lifetime the
//! broker granted (KIP-368).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::scram::ScramClient;
use super::{SaslCredentials, SaslMechanism};
use crate::error::{Error, Result};

/// The SaslHandshake version used: v1, whose exchange travels in
/// SaslAuthenticate requests (v0's raw frames are not implemented).
pub(crate) const HANDSHAKE_VERSION: i16 = 1;

/// PLAIN's one message: `authzid NUL authcid NUL password`, with no
/// authorization id (the broker's principal is the user).
pub(crate) fn plain_message(username: &str, password: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(username.len() + password.len() + 2);
    m.push(0);
    m.extend_from_slice(username.as_bytes());
    m.push(0);
    m.extend_from_slice(password.as_bytes());
    m
}

enum State {
    /// Waiting for the handshake's answer.
    Handshake,
    /// PLAIN's message sent.
    PlainSent,
    /// SCRAM's first message sent.
    ScramFirst(ScramClient),
    /// SCRAM's final message sent.
    ScramFinal(ScramClient),
    /// Accepted.
    Done,
}

/// One authentication exchange with one broker.
pub(crate) struct Authenticator {
    credentials: Arc<SaslCredentials>,
    broker: String,
    state: State,
    lifetime: Option<Duration>,
}

impl Authenticator {
    /// An exchange with `broker` (`host:port`, for errors).
    pub(crate) fn new(credentials: Arc<SaslCredentials>, broker: &str) -> Authenticator {
        Authenticator {
            credentials,
            broker: broker.to_string(),
            state: State::Handshake,
            lifetime: None,
        }
    }

    fn failed(&self, why: impl std::fmt::Display) -> Error {
        Error::Authentication {
            broker: self.broker.clone(),
            message: format!(
                "{} as {:?}: {why}",
                self.credentials.mechanism, self.credentials.username
            ),
        }
    }

    /// The first request: SaslHandshake naming the mechanism.
    pub(crate) fn handshake(&self) -> SaslHandshakeRequest {
        SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(self.credentials.mechanism.name()))
    }

    /// Reads the handshake's answer; the first SaslAuthenticate request.
    pub(crate) fn on_handshake(
        &mut self,
        resp: &SaslHandshakeResponse,
    ) -> Result<SaslAuthenticateRequest> {
        if !matches!(self.state, State::Handshake) {
            return Err(Error::Protocol("unexpected SaslHandshake response".into()));
        }
        match ResponseError::try_from_code(resp.error_code) {
            None => {}
            Some(ResponseError::UnsupportedSaslMechanism) => {
                let offered: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
                return Err(self.failed(format!(
                    "the broker does not offer this mechanism (it offers: {})",
                    if offered.is_empty() {
                        "none".to_string()
                    } else {
                        offered.join(", ")
                    }
                )));
            }
            Some(ResponseError::IllegalSaslState) => {
                return Err(
                    self.failed("the listener does not use SASL (is the security protocol right?)")
                )
            }
            Some(_) => return Err(Error::from_code(resp.error_code, None).expect("an error")),
        }
        let c = &self.credentials;
        let first = match c.mechanism.scram_hash() {
            None => {
                self.state = State::PlainSent;
                plain_message(&c.username, &c.password)
            }
            Some(hash) => {
                let (scram, first) = ScramClient::start(hash, &c.username, &c.password);
                self.state = State::ScramFirst(scram);
                first
            }
        };
        Ok(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(first)))
    }

    /// Reads a SaslAuthenticate answer: the next request, or `None` once
    /// the broker has accepted. Slow for SCRAM's first answer (PBKDF2):
    /// call it off the async workers.
    pub(crate) fn on_authenticate(
        &mut self,
        resp: &SaslAuthenticateResponse,
    ) -> Result<Option<SaslAuthenticateRequest>> {
        if resp.error_code != 0 {
            let kind = ResponseError::try_from_code(resp.error_code)
                .map_or_else(|| "unknown error".to_string(), |k| k.to_string());
            let message = resp
                .error_message
                .as_deref()
                .filter(|m| !m.is_empty())
                .map_or(kind.clone(), |m| format!("{m} ({kind})"));
            self.state = State::Done;
            return Err(self.failed(message));
        }
        let next = match std::mem::replace(&mut self.state, State::Done) {
            State::PlainSent => None,
            State::ScramFirst(mut scram) => {
                let last = scram
                    .server_first(&resp.auth_bytes)
                    .map_err(|e| self.failed(e))?;
                self.state = State::ScramFinal(scram);
                Some(last)
            }
            State::ScramFinal(scram) => {
                scram
                    .server_final(&resp.auth_bytes)
                    .map_err(|e| self.failed(e))?;
                None
            }
            State::Handshake | State::Done => {
                return Err(Error::Protocol(
                    "unexpected SaslAuthenticate response".into(),
                ))
            }
        };
        match next {
            Some(bytes) => Ok(Some(
                SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes)),
            )),
            None => {
                self.lifetime = (resp.session_lifetime_ms > 0)
                    .then(|| Duration::from_millis(resp.session_lifetime_ms as u64));
                Ok(None)
            }
        }
    }

    /// How long the broker lets the session last (SaslAuthenticate v1+),
    /// once accepted; `None` for no limit.
    pub(crate) fn session_lifetime(&self) -> Option<Duration> {
        self.lifetime
    }

    /// The mechanism of this exchange.
    pub(crate) fn mechanism(&self) -> SaslMechanism {
        self.credentials.mechanism
    }
}

/// When to re-authenticate a session of `lifetime`: at a random point
/// between 85 % and 95 % of it, as Kafka's Java client does, so that the
/// connections of one client do not all re-authenticate at once.
pub(crate) fn reauthenticate_after(lifetime: Duration) -> Duration {
    let jitter = crate::producer::partitioner::random_u32() % 1001; // 0..=1000
    lifetime.mul_f64(0.85 + jitter as f64 / 10_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(m: SaslMechanism) -> Arc<SaslCredentials> {
        Arc::new(SaslCredentials {
            mechanism: m,
            username: "alice".into(),
            password: "alice-secret".into(),
        })
    }

    #[test]
    fn plain_message_layout() {
        assert_eq!(plain_message("alice", "pw"), b"\0alice\0pw");
        let mut a = Authenticator::new(creds(SaslMechanism::Plain), "b:1");
        assert_eq!(a.handshake().mechanism.as_str(), "PLAIN");
        let req = a.on_handshake(&SaslHandshakeResponse::default()).unwrap();
        assert_eq!(&req.auth_bytes[..], b"\0alice\0alice-secret");
        let done = a
            .on_authenticate(&SaslAuthenticateResponse::default().with_session_lifetime_ms(2000))
            .unwrap();
        assert!(done.is_none());
        assert_eq!(a.session_lifetime(), Some(Duration::from_millis(2000)));
    }

    #[test]
    fn refusals_name_the_mechanism_user_and_broker_message() {
        let mut a = Authenticator::new(creds(SaslMechanism::ScramSha512), "b:1");
        let err = a
            .on_handshake(
                &SaslHandshakeResponse::default()
                    .with_error_code(ResponseError::UnsupportedSaslMechanism.code())
                    .with_mechanisms(vec![StrBytes::from_static_str("PLAIN")]),
            )
            .unwrap_err();
        assert!(
            matches!(&err, Error::Authentication { message, .. } if message.contains("it offers: PLAIN")),
            "{err}"
        );
        assert!(!err.is_retriable());

        let mut a = Authenticator::new(creds(SaslMechanism::ScramSha256), "b:1");
        let first = a.on_handshake(&SaslHandshakeResponse::default()).unwrap();
        assert!(first.auth_bytes.starts_with(b"n,,n=alice,r="));
        let err = a
            .on_authenticate(
                &SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str("Invalid credentials"))),
            )
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("b:1")
                && text.contains("SCRAM-SHA-256 as \"alice\"")
                && text.contains("Invalid credentials"),
            "{text}"
        );
    }

    #[test]
    fn a_server_that_cannot_sign_is_refused() {
        let mut a = Authenticator::new(creds(SaslMechanism::ScramSha256), "b:1");
        let first = a.on_handshake(&SaslHandshakeResponse::default()).unwrap();
        let text = String::from_utf8(first.auth_bytes.to_vec()).unwrap();
        let nonce = text.split_once(",r=").unwrap().1;
        let server_first = format!("r={nonce}xyz,s=c2FsdHNhbHQ=,i=4096");
        let last = a
            .on_authenticate(
                &SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(server_first)),
            )
            .unwrap()
            .unwrap();
        assert!(last.auth_bytes.starts_with(b"c=biws,r="));
        let err = a
            .on_authenticate(&SaslAuthenticateResponse::default().with_auth_bytes(
                Bytes::from_static(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
            ))
            .unwrap_err();
        assert!(err.to_string().contains("signature is wrong"), "{err}");
    }

    #[test]
    fn reauthentication_falls_between_85_and_95_percent() {
        for _ in 0..100 {
            let d = reauthenticate_after(Duration::from_secs(10));
            assert!(
                d >= Duration::from_millis(8500) && d <= Duration::from_millis(9500),
                "{d:?}"
            );
        }
    }
}
