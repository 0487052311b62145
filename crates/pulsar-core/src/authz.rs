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
#[derive(Debug, Clone)]
pub struct PulsarSecurity {
    /// The accepted providers; `None` = no authentication (every client is
    /// `anonymous`).
    pub authentication: Option<Vec<PulsarAuthProvider>>,
    /// The principal of a client that sends no credentials (of every client
    /// without authentication); `None` = such clients are refused
    /// (`pulsar.anonymous.principal`).
    pub anonymous: Option<Arc<Principal>>,
    /// Checks tokens, when token keys are configured.
    pub tokens: Option<Arc<TokenValidator>>,
    /// How long a failed authentication waits before its answer.
    pub failed_delay: std::time::Duration,
}

impl Default for PulsarSecurity {
    /// No authentication, and every client `User:ANONYMOUS`.
    fn default() -> Self {
        PulsarSecurity {
            authentication: None,
            anonymous: Some(Arc::new(Principal::anonymous())),
            tokens: None,
            failed_delay: std::time::Duration::ZERO,
        }
    }
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
    /// Why this connection may do nothing: it did not authenticate, and
    /// the authorizer gives such clients no principal.
    pub refusal: Option<Arc<str>>,
}

impl Requester for Identity {
    fn principal(&self) -> &Principal {
        &self.principal
    }

    fn client_host(&self) -> &str {
        &self.host
    }

    fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
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
        refusal: None,
    };
    let anonymous = |principal: &Arc<Principal>| Identity {
        principal: principal.clone(),
        host: host.to_string(),
        expires_ms: None,
        method: None,
        refusal: None,
    };
    let Some(providers) = &security.authentication else {
        // CONNECT is accepted so that every command can say why it is
        // refused: the official clients report an AuthorizationError at
        // once, where a refused CONNECT leaves them retrying until they
        // time out. The principal is one no ACL or super user names.
        return Ok(match &security.anonymous {
            Some(p) => anonymous(p),
            None => Identity {
                refusal: Some(Arc::from(UNAUTHENTICATED_REFUSED)),
                ..anonymous(&Arc::new(Principal {
                    kind: "Unauthenticated".into(),
                    name: "pulsar-client".into(),
                }))
            },
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
        None => match &security.anonymous {
            Some(p) => Ok(anonymous(p)),
            None => Err(failure(
                "authentication required",
                "a client without credentials (pulsar.authentication.enabled)",
            )),
        },
    }
}

/// What every command of a client without a principal is answered (an
/// authorizer is set, Pulsar authentication is off and no
/// `pulsar.anonymous.principal` is named).
pub const UNAUTHENTICATED_REFUSED: &str = "this broker has an authorizer and Pulsar clients must authenticate: the broker needs pulsar.authentication.enabled=true (clients then send a token or a TLS certificate) or pulsar.anonymous.principal naming the principal of clients without credentials";

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
    if let Some(why) = who.refusal() {
        return Err(PulsarError::new(ServerError::AuthorizationError, why));
    }
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
    if let Some(why) = who.refusal() {
        return Err(PulsarError::new(ServerError::AuthorizationError, why));
    }
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
            anonymous: None,
            ..Default::default()
        }
    }

    /// Without authentication and with no principal for anonymous clients
    /// (an authorizer is set), every client is connected but may do
    /// nothing, whatever it sends, and is told which keys decide; `pulsar.anonymous.principal` names them,
    /// with or without authentication.
    #[test]
    fn clients_without_credentials_get_only_the_named_principal() {
        let closed = PulsarSecurity {
            anonymous: None,
            ..Default::default()
        };
        for (method, data) in [(None, None), (Some("token"), Some(&b"x"[..]))] {
            let id = authenticate(&closed, method, data, None, "h", 0).unwrap();
            let why = id.refusal().expect("refused");
            assert!(why.contains("pulsar.anonymous.principal"), "{why}");
            assert!(why.contains("pulsar.authentication.enabled"), "{why}");
            assert_ne!(*id.principal, Principal::anonymous());
        }
        let guest = Arc::new(Principal::user("guest"));
        let named = PulsarSecurity {
            anonymous: Some(guest.clone()),
            ..Default::default()
        };
        let id = authenticate(&named, None, None, None, "h", 0).unwrap();
        assert_eq!(id.principal, guest);
        let with_tokens = PulsarSecurity {
            anonymous: Some(guest.clone()),
            ..sec(&[PulsarAuthProvider::Token])
        };
        let id = authenticate(&with_tokens, Some("none"), None, None, "h", 0).unwrap();
        assert_eq!(id.principal, guest);
        assert!(id.method.is_none());
        // Credentials that fail are still refused: no fallback to anonymous.
        assert!(authenticate(&with_tokens, Some("tls"), None, None, "h", 0).is_err());
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
