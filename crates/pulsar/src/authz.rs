//! Who a Pulsar connection is and what it may do: CONNECT's authentication
//! (a JWT token, or the TLS client certificate) mapped to the principals
//! Kafka clients have, and Pulsar's actions mapped to the ACL operations
//! the broker's authorizer decides:
//!
//! | Pulsar | ACL |
//! |---|---|
//! | PartitionedMetadata, Lookup, GetSchema, GetTopicsOfNamespace (each topic listed) | Describe on the topic |
//! | Producer, GetOrCreateSchema | Write on the topic |
//! | Subscribe | Read on the topic; a durable subscription also Read on the group of its name |
//! | a producer or consumer creating its topic, metadata auto-creation | Create on the cluster or the topic |
//!
//! A topic's ACL name is its Kafka name (`persistent://public/default/t`
//! is `t`; other namespaces `tenant.namespace.t`).

use std::sync::Arc;

use broker::config::PulsarAuthProvider;
use broker::security::acl::{Access, Operation, Requester, ResourceType};
use broker::security::token::TokenValidator;
use broker::security::Principal;
use broker::Broker;
use magnetar_pulsar_wire::proto::{CommandConnect, ServerError};

use crate::error::PulsarError;
use crate::topics;

/// The upstream value a broker's AuthChallenge carries to ask a client
/// for fresh credentials (`AuthData.REFRESH_AUTH_DATA`).
pub const REFRESH_AUTH_DATA: &[u8] = b"PulsarAuthRefresh";

/// How Pulsar clients prove who they are.
#[derive(Debug, Default, Clone)]
pub struct PulsarSecurity {
    /// The accepted providers; `None` = no authentication (everyone is
    /// `User:ANONYMOUS`).
    pub authentication: Option<Vec<PulsarAuthProvider>>,
    /// Checks tokens, when token keys are configured.
    pub tokens: Option<Arc<TokenValidator>>,
    /// How long a failed authentication waits before its answer.
    pub failed_delay: std::time::Duration,
}

/// An authenticated connection's identity.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Its principal.
    pub principal: Arc<Principal>,
    /// The client's IP address.
    pub host: String,
    /// The credential's end (a token's `exp`, ms since the epoch).
    pub expires_ms: Option<i64>,
    /// The method it authenticated with (`token`, `tls`), if any.
    pub method: Option<String>,
}

impl Requester for Identity {
    fn principal(&self) -> &Principal {
        &self.principal
    }

    fn client_host(&self) -> &str {
        &self.host
    }
}

/// Why authentication failed: what the client is told, and what is logged.
#[derive(Debug)]
pub struct AuthFailure {
    /// For the client (never tells a bad signature from an unknown key).
    pub message: String,
    /// For the broker's log.
    pub detail: String,
}

fn failure(message: &str, detail: impl Into<String>) -> AuthFailure {
    AuthFailure {
        message: message.to_string(),
        detail: detail.into(),
    }
}

/// Authenticates CONNECT (or an AuthResponse's `method` and `data`):
/// `certificate` is the verified client certificate's principal on a TLS
/// connection (an error when no mapping rule applies).
pub fn authenticate(
    security: &PulsarSecurity,
    method: Option<&str>,
    data: Option<&[u8]>,
    certificate: Option<&Result<Principal, String>>,
    host: &str,
    now_ms: i64,
) -> Result<Identity, AuthFailure> {
    let identity = |principal: Principal, expires_ms, method: &str| Identity {
        principal: Arc::new(principal),
        host: host.to_string(),
        expires_ms,
        method: Some(method.to_string()),
    };
    let Some(providers) = &security.authentication else {
        return Ok(Identity {
            principal: Arc::new(Principal::anonymous()),
            host: host.to_string(),
            expires_ms: None,
            method: None,
        });
    };
    match method.filter(|m| !m.is_empty() && *m != "none") {
        Some("token") if providers.contains(&PulsarAuthProvider::Token) => {
            let Some(tokens) = &security.tokens else {
                return Err(failure(
                    "token authentication is not available",
                    "no token key is configured (token.secret.key, token.public.key, sasl.oauthbearer.jwks.endpoint.url)",
                ));
            };
            let raw = data.unwrap_or_default();
            let text = std::str::from_utf8(raw)
                .map_err(|_| failure("invalid token", "the token is not UTF-8"))?;
            // Some clients send `token:<jwt>`.
            let token = text.strip_prefix("token:").unwrap_or(text).trim();
            let valid = tokens
                .validate(token, now_ms)
                .map_err(|e| failure("invalid token", e.log_detail()))?;
            Ok(identity(valid.principal, valid.expires_ms, "token"))
        }
        Some("tls") if providers.contains(&PulsarAuthProvider::Tls) => match certificate {
            Some(Ok(p)) => Ok(identity(p.clone(), None, "tls")),
            Some(Err(why)) => Err(failure("client certificate refused", why.clone())),
            None => Err(failure(
                "tls authentication needs a client certificate on the TLS listener",
                "tls authentication without a verified client certificate",
            )),
        },
        Some(other) => Err(failure(
            "authentication method not enabled",
            format!("authentication method {other:?} is not in pulsar.authentication.providers"),
        )),
        None => Err(failure(
            "authentication required",
            "a client without credentials (pulsar.authentication.enabled)",
        )),
    }
}

/// The method and data of CONNECT.
pub fn connect_credentials(c: &CommandConnect) -> (Option<&str>, Option<&[u8]>) {
    (c.auth_method_name.as_deref(), c.auth_data.as_deref())
}

fn denied(what: &str, name: &str) -> PulsarError {
    PulsarError::new(
        ServerError::AuthorizationError,
        format!("not authorized to {what} {name}"),
    )
}

/// Checks `operation` on the topic `name` (a Pulsar name) and, when the
/// command would create the topic (`creates`) and it does not exist,
/// Create.
pub fn check_topic(
    broker: &Broker,
    who: &dyn Requester,
    name: &str,
    operation: Operation,
    creates: bool,
) -> Result<(), PulsarError> {
    let access = Access::of(broker, who);
    if !access.checks() {
        return Ok(());
    }
    let parsed = topics::parse(broker, name)?;
    let kafka = parsed.kafka_name();
    if !access.topic(operation, kafka.as_str()) {
        let what = match operation {
            Operation::Write => "produce to",
            Operation::Read => "consume from",
            _ => "look up",
        };
        return Err(denied(what, &parsed.to_string()));
    }
    if creates && broker.topic(kafka.as_str()).is_none() && !access.may_create_topic(kafka.as_str())
    {
        return Err(denied("create", &parsed.to_string()));
    }
    Ok(())
}

/// Checks Read on the group named after a durable subscription.
pub fn check_subscription(
    broker: &Broker,
    who: &dyn Requester,
    subscription: &str,
) -> Result<(), PulsarError> {
    if Access::of(broker, who).may(Operation::Read, ResourceType::Group, subscription) {
        Ok(())
    } else {
        Err(denied("use subscription", subscription))
    }
}

/// Whether the topic `kafka` (a Kafka name) may be described.
pub fn may_describe(broker: &Broker, who: &dyn Requester, kafka: &str) -> bool {
    Access::of(broker, who).topic(Operation::Describe, kafka)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(providers: &[PulsarAuthProvider]) -> PulsarSecurity {
        PulsarSecurity {
            authentication: Some(providers.to_vec()),
            ..Default::default()
        }
    }

    #[test]
    fn without_authentication_everyone_is_anonymous() {
        let id = authenticate(
            &PulsarSecurity::default(),
            Some("token"),
            Some(b"x"),
            None,
            "1.2.3.4",
            0,
        )
        .unwrap();
        assert_eq!(*id.principal, Principal::anonymous());
        assert_eq!(id.host, "1.2.3.4");
    }

    #[test]
    fn providers_decide_what_is_accepted() {
        let cert = Ok(Principal::user("CN=c"));
        let tls_only = sec(&[PulsarAuthProvider::Tls]);
        let id = authenticate(&tls_only, Some("tls"), None, Some(&cert), "h", 0).unwrap();
        assert_eq!(id.principal.name, "CN=c");
        assert_eq!(id.method.as_deref(), Some("tls"));
        let no_cert = authenticate(&tls_only, Some("tls"), None, None, "h", 0).unwrap_err();
        assert!(no_cert
            .detail
            .contains("without a verified client certificate"));
        let unmapped = Err("no rule".to_string());
        assert!(authenticate(&tls_only, Some("tls"), None, Some(&unmapped), "h", 0).is_err());
        let e = authenticate(&tls_only, Some("token"), Some(b"t"), None, "h", 0).unwrap_err();
        assert!(e.detail.contains("not in pulsar.authentication.providers"));
        let e = authenticate(&tls_only, None, None, Some(&cert), "h", 0).unwrap_err();
        assert_eq!(e.message, "authentication required");
        let tokens = sec(&[PulsarAuthProvider::Token]);
        let e = authenticate(&tokens, Some("token"), Some(b"t"), None, "h", 0).unwrap_err();
        assert!(e.detail.contains("no token key"));
    }
}
