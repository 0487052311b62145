//! Kafka's listener model: `listeners` names each socket the broker binds
//! (`NAME://host:port`), `listener.security.protocol.map` gives each name
//! its security protocol, and `advertised.listeners` what clients are told
//! to connect to, per name.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// The registry name of the first (default) Kafka listener.
pub const KAFKA_LISTENER: &str = "kafka";

/// How a listener's clients connect and prove who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// TCP, no authentication (principal `User:ANONYMOUS`).
    Plaintext,
    /// TLS; with client certificates the principal is the certificate's
    /// subject, else `User:ANONYMOUS`.
    Ssl,
    /// TCP with SASL authentication.
    SaslPlaintext,
    /// TLS with SASL authentication.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Whether connections are TLS.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients must authenticate with SASL before anything else.
    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One Kafka listener, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaListener {
    /// Its name (`PLAINTEXT`, `SASL_SSL`, or a user's own like `INTERNAL`).
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// Where it binds.
    pub bind: SocketAddr,
    /// What clients are told (host, port), if set; else the bound address.
    pub advertised: Option<(String, u16)>,
}

impl KafkaListener {
    /// The key of this listener's endpoints in broker registrations: every
    /// broker advertises each listener name under the same key, so a client
    /// on one listener is told the others' endpoints on the same one.
    pub fn registry_key(&self) -> String {
        registry_key(&self.name)
    }
}

/// See [`KafkaListener::registry_key`]; `PLAINTEXT` keeps the key brokers
/// registered with before listeners had names.
pub fn registry_key(name: &str) -> String {
    if name == "PLAINTEXT" {
        KAFKA_LISTENER.to_string()
    } else {
        format!("{}:{name}", KAFKA_LISTENER)
    }
}

/// `listener.security.protocol.map`'s default.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// One entry of a listener list: name (if given), host, port.
pub type ListenerEntry = (Option<String>, String, u16);

/// Parses `NAME://host:port,...` (a bare `host:port` has no name). An
/// empty host (`PLAINTEXT://:9092`) means every interface, as in Kafka.
pub fn parse_listener_list(v: &str) -> Result<Vec<ListenerEntry>, String> {
    let mut out: Vec<ListenerEntry> = Vec::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, rest) = match item.split_once("://") {
            Some((n, r)) => {
                if n.is_empty()
                    || !n
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    return Err(format!("bad listener name in {item:?}"));
                }
                (Some(n.to_ascii_uppercase()), r)
            }
            None => (None, item),
        };
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("expected NAME://host:port, got {item:?}"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("invalid port in {item:?}"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if let Some(n) = &name {
            if out.iter().any(|(m, _, _)| m.as_ref() == Some(n)) {
                return Err(format!("listener {n} is named twice"));
            }
        }
        out.push((name, host, port));
    }
    Ok(out)
}

/// Parses `NAME:PROTOCOL,...`.
pub fn parse_protocol_map(v: &str) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    let mut out = BTreeMap::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, proto) = item
            .split_once(':')
            .ok_or_else(|| format!("expected NAME:PROTOCOL, got {item:?}"))?;
        let proto = SecurityProtocol::from_name(proto.trim()).ok_or_else(|| {
            format!(
                "unknown security protocol {proto:?} (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
            )
        })?;
        if out
            .insert(name.trim().to_ascii_uppercase(), proto)
            .is_some()
        {
            return Err(format!("listener {name} is mapped twice"));
        }
    }
    Ok(out)
}

/// The listeners of `listeners` (or, when it is empty, one `PLAINTEXT`
/// listener on `default_bind`), with their protocols and advertised
/// addresses.
pub fn resolve(
    listeners: &str,
    advertised: &str,
    protocol_map: &str,
    default_bind: SocketAddr,
) -> Result<Vec<KafkaListener>, String> {
    let map = parse_protocol_map(protocol_map)?;
    let mut out = Vec::new();
    if listeners.trim().is_empty() {
        out.push(KafkaListener {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            bind: default_bind,
            advertised: None,
        });
    } else {
        for (name, host, port) in parse_listener_list(listeners)? {
            let name = name.ok_or_else(|| {
                format!("listeners: {host}:{port} needs a name (PLAINTEXT://{host}:{port})")
            })?;
            let protocol = *map.get(&name).ok_or_else(|| {
                format!("listener {name} is not in listener.security.protocol.map")
            })?;
            let host = if host.is_empty() {
                "0.0.0.0".to_string()
            } else {
                host
            };
            let bind = (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| format!("listener {name}: cannot resolve {host}: {e}"))?
                .next()
                .ok_or_else(|| format!("listener {name}: {host} resolves to no address"))?;
            out.push(KafkaListener {
                name,
                protocol,
                bind,
                advertised: None,
            });
        }
        if out.is_empty() {
            return Err("listeners names no listener".into());
        }
    }
    for (name, host, port) in parse_listener_list(advertised)? {
        let target = match &name {
            Some(n) => out.iter_mut().find(|l| l.name == *n).ok_or_else(|| {
                format!("advertised.listeners names {n}, which is not in listeners")
            })?,
            // The old single-address form advertises the first listener.
            None => &mut out[0],
        };
        if host.is_empty() {
            return Err(format!(
                "advertised.listeners: {} needs a host",
                target.name
            ));
        }
        if host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified())
        {
            return Err(format!(
                "advertised.listeners: {host} is not an address clients can reach"
            ));
        }
        target.advertised = Some((host, port));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> SocketAddr {
        "127.0.0.1:9092".parse().unwrap()
    }

    #[test]
    fn no_listeners_is_one_plaintext_on_the_default_address() {
        let l = resolve("", "", DEFAULT_PROTOCOL_MAP, local()).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(l[0].bind, local());
        assert_eq!(l[0].registry_key(), "kafka");
        let l = resolve(
            "",
            "PLAINTEXT://broker1:19092",
            DEFAULT_PROTOCOL_MAP,
            local(),
        )
        .unwrap();
        assert_eq!(l[0].advertised, Some(("broker1".into(), 19092)));
        let l = resolve("", "10.0.0.1:9093", DEFAULT_PROTOCOL_MAP, local()).unwrap();
        assert_eq!(l[0].advertised, Some(("10.0.0.1".into(), 9093)));
    }

    #[test]
    fn several_named_listeners() {
        let l = resolve(
            "PLAINTEXT://127.0.0.1:9092, SASL_SSL://:9093,internal://127.0.0.1:9094",
            "SASL_SSL://kafka.example.com:9093",
            "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT",
            local(),
        )
        .unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].name, "SASL_SSL");
        assert_eq!(l[1].bind, "0.0.0.0:9093".parse().unwrap());
        assert_eq!(l[1].advertised, Some(("kafka.example.com".into(), 9093)));
        assert_eq!(l[1].registry_key(), "kafka:SASL_SSL");
        assert_eq!(l[2].protocol, SecurityProtocol::SaslPlaintext);
        assert!(l[2].protocol.sasl() && !l[2].protocol.tls());
    }

    #[test]
    fn bad_listener_settings_say_why() {
        let err = |l: &str, a: &str, m: &str| resolve(l, a, m, local()).unwrap_err();
        assert!(err("FOO://:1", "", DEFAULT_PROTOCOL_MAP)
            .contains("not in listener.security.protocol.map"));
        assert!(err("127.0.0.1:1", "", DEFAULT_PROTOCOL_MAP).contains("needs a name"));
        assert!(err("SSL://:1,SSL://:2", "", DEFAULT_PROTOCOL_MAP).contains("twice"));
        assert!(
            err("SSL://:1", "SASL_SSL://h:1", DEFAULT_PROTOCOL_MAP).contains("not in listeners")
        );
        assert!(err("SSL://:1", "SSL://0.0.0.0:1", DEFAULT_PROTOCOL_MAP).contains("reach"));
        assert!(err("A://:1", "", "A:TLS").contains("unknown security protocol"));
        assert!(err("SSL://:x", "", DEFAULT_PROTOCOL_MAP).contains("port"));
    }
}
