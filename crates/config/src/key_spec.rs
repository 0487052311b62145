//! What one configuration key is: its name, default, value type (Kafka's,
//! as DescribeConfigs reports it) and documentation, and how a value of each
//! type is checked and normalized. The declared keys themselves are in
//! `keys.rs` and the tables it gathers.

/// The type of a configuration value, used to validate and normalize it.
/// Each maps to one of Kafka's config types (see [`ValueKind::kafka_type`]).
#[derive(Debug, Clone, Copy)]
pub enum ValueKind {
    /// `true` or `false` (BOOLEAN).
    Bool,
    /// A 32-bit integer in `min..=max` (INT).
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A 32-bit integer: `-1` (the codec's default) or one in `min..=max`
    /// (INT; `compression.gzip.level`).
    IntOrMinusOne {
        /// Smallest accepted value other than -1.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A 16-bit integer in `min..=max` (SHORT).
    Short {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A 32-bit integer in `min..=max`, or empty (unset; Kafka's `null`
    /// default) (INT).
    OptInt {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// A 64-bit integer in `min..=max` (LONG).
    Long {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// `-1` (unlimited / unset) or a 64-bit integer `>= min` (LONG).
    Limit {
        /// Smallest accepted value other than -1.
        min: i64,
    },
    /// A floating-point number in `min..=max` (DOUBLE).
    Double {
        /// Smallest accepted value.
        min: f64,
        /// Largest accepted value.
        max: f64,
    },
    /// One of a fixed set of strings, matched without regard to case and
    /// stored as declared (STRING).
    Choice(&'static [&'static str]),
    /// A non-empty comma-separated list of values from a fixed set, in the
    /// order given, without repeats (LIST).
    List(&'static [&'static str]),
    /// Kafka's throttled-replica list: empty, `*`, or comma-separated
    /// `partition:broker` pairs (LIST).
    ReplicaList,
    /// A Kafka listener, `PLAINTEXT://host:port` or `host:port`; empty = unset
    /// (STRING).
    Listener,
    /// A controller quorum, `id@host:port,...`; empty = unset (STRING).
    Voters,
    /// Kafka listeners, `NAME://host:port,...`; empty = unset (STRING).
    Listeners,
    /// Listener names to security protocols, `NAME:PROTOCOL,...` (STRING).
    ProtocolMap,
    /// Any text, e.g. a file path; empty = unset (STRING).
    Text,
    /// Any comma-separated list, e.g. of class names; empty = none (LIST).
    AnyList,
    /// A secret (PASSWORD): never reported back, as Kafka hides them.
    Password,
    /// A class name Kafka would load: empty (none) or one of these, which
    /// the broker implements itself (CLASS).
    Class(&'static [&'static str]),
    /// Principals separated by `;` (`User:a;User:b`), as `super.users`
    /// (LIST).
    Principals,
    /// One principal, `User:name`; empty = unset (STRING).
    Principal,
    /// `ssl.principal.mapping.rules` (STRING).
    PrincipalRules,
}

/// Kafka's DescribeConfigs type codes (`ConfigEntry.ConfigType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum KafkaType {
    /// BOOLEAN.
    Boolean = 1,
    /// STRING.
    String = 2,
    /// INT.
    Int = 3,
    /// SHORT.
    Short = 4,
    /// LONG.
    Long = 5,
    /// DOUBLE.
    Double = 6,
    /// LIST.
    List = 7,
    /// CLASS.
    Class = 8,
    /// PASSWORD.
    Password = 9,
}

impl ValueKind {
    /// The Kafka config type values of this kind have.
    pub fn kafka_type(&self) -> KafkaType {
        match self {
            ValueKind::Bool => KafkaType::Boolean,
            ValueKind::Int { .. } | ValueKind::IntOrMinusOne { .. } | ValueKind::OptInt { .. } => {
                KafkaType::Int
            }
            ValueKind::Short { .. } => KafkaType::Short,
            ValueKind::Password => KafkaType::Password,
            ValueKind::Long { .. } | ValueKind::Limit { .. } => KafkaType::Long,
            ValueKind::Double { .. } => KafkaType::Double,
            ValueKind::Choice(_)
            | ValueKind::Listener
            | ValueKind::Voters
            | ValueKind::Listeners
            | ValueKind::ProtocolMap
            | ValueKind::PrincipalRules
            | ValueKind::Principal
            | ValueKind::Text => KafkaType::String,
            ValueKind::Class(_) => KafkaType::Class,
            ValueKind::List(_)
            | ValueKind::ReplicaList
            | ValueKind::Principals
            | ValueKind::AnyList => KafkaType::List,
        }
    }

    /// Checks `v` and returns its normalized form, or why it is invalid.
    pub fn validate(&self, v: &str) -> Result<String, String> {
        let v = v.trim();
        let int = |v: &str| -> Result<i64, String> {
            v.parse()
                .map_err(|_| format!("expected an integer, got {v:?}"))
        };
        match *self {
            ValueKind::Bool => match v.to_ascii_lowercase().as_str() {
                "true" => Ok("true".into()),
                "false" => Ok("false".into()),
                _ => Err(format!("expected true or false, got {v:?}")),
            },
            ValueKind::OptInt { .. } if v.is_empty() => Ok(String::new()),
            ValueKind::Int { min, max }
            | ValueKind::Long { min, max }
            | ValueKind::Short { min, max }
            | ValueKind::OptInt { min, max } => {
                let n = int(v)?;
                if n < min || n > max {
                    return Err(format!("{n} is outside {min}..={max}"));
                }
                Ok(n.to_string())
            }
            ValueKind::IntOrMinusOne { min, max } => {
                let n = int(v)?;
                if n != -1 && (n < min || n > max) {
                    return Err(format!("expected -1 or a value in {min}..={max}, got {n}"));
                }
                Ok(n.to_string())
            }
            ValueKind::Limit { min } => {
                let n = int(v)?;
                if n != -1 && n < min {
                    return Err(format!("expected -1 or a value >= {min}, got {n}"));
                }
                Ok(n.to_string())
            }
            ValueKind::Double { min, max } => {
                let n: f64 = v
                    .parse()
                    .map_err(|_| format!("expected a number, got {v:?}"))?;
                if !(min..=max).contains(&n) {
                    return Err(format!("{v} is outside {min}..={max}"));
                }
                Ok(java_double(n))
            }
            ValueKind::Choice(options) => options
                .iter()
                .find(|o| o.eq_ignore_ascii_case(v))
                .map(|o| o.to_string())
                .ok_or_else(|| format!("expected one of {}, got {v:?}", options.join(" | "))),
            ValueKind::List(options) => {
                let mut items: Vec<&str> = Vec::new();
                for item in v.split(',').map(str::trim) {
                    let found = options
                        .iter()
                        .find(|o| o.eq_ignore_ascii_case(item))
                        .ok_or_else(|| {
                            format!(
                                "expected a comma-separated list of {}, got {v:?}",
                                options.join(", ")
                            )
                        })?;
                    if !items.contains(found) {
                        items.push(found);
                    }
                }
                Ok(items.join(","))
            }
            ValueKind::ReplicaList => {
                if v.is_empty() || v == "*" {
                    return Ok(v.to_string());
                }
                let pair = |item: &str| {
                    let (p, b) = item.split_once(':')?;
                    let p: u32 = p.trim().parse().ok()?;
                    let b: u32 = b.trim().parse().ok()?;
                    Some(format!("{p}:{b}"))
                };
                v.split(',')
                    .map(|item| {
                        pair(item.trim()).ok_or_else(|| {
                            format!("expected * or partition:broker pairs separated by commas, got {v:?}")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(|items| items.join(","))
            }
            ValueKind::Listener => {
                if v.is_empty() {
                    return Ok(String::new());
                }
                parse_listener(v)?;
                Ok(v.to_string())
            }
            ValueKind::Listeners => {
                crate::listeners::parse_listener_list(v)?;
                Ok(v.to_string())
            }
            ValueKind::ProtocolMap => {
                crate::listeners::parse_protocol_map(v)?;
                Ok(v.to_string())
            }
            ValueKind::Text | ValueKind::Password => Ok(v.to_string()),
            ValueKind::AnyList => Ok(v
                .split(',')
                .map(str::trim)
                .filter(|i| !i.is_empty())
                .collect::<Vec<_>>()
                .join(",")),
            ValueKind::Class(classes) => {
                if v.is_empty() || classes.contains(&v) {
                    Ok(v.to_string())
                } else if classes.is_empty() {
                    Err(format!(
                        "unknown class {v:?}: this broker loads no Java class; leave the key empty"
                    ))
                } else {
                    Err(format!(
                        "unknown class {v:?}: this broker implements only {}",
                        classes.join(" and ")
                    ))
                }
            }
            ValueKind::PrincipalRules => {
                crate::principal_mapping::PrincipalMapper::parse(v)?;
                Ok(v.to_string())
            }
            ValueKind::Principal => {
                if v.is_empty() {
                    return Ok(String::new());
                }
                parse_user_principal(v)?;
                Ok(v.to_string())
            }
            ValueKind::Principals => {
                let users = crate::authorizer::AuthorizerConfig::parse_super_users(v)?;
                Ok(users.into_iter().collect::<Vec<_>>().join(";"))
            }
            ValueKind::Voters => {
                if v.is_empty() {
                    return Ok(String::new());
                }
                v.parse::<controller::Voters>()
                    .map(|voters| voters.to_string())
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// `n` as Java's `Double.toString` writes it, which is how Kafka reports a
/// DOUBLE config: decimal from 10^-3 up to 10^7 (`0.5`, `1000000.0`),
/// scientific notation otherwise (`1.0E7`, `1.7976931348623157E308`, the
/// default of `log.cleaner.io.max.bytes.per.second`), always with a
/// fraction digit and the shortest digits that read back as `n`.
fn java_double(n: f64) -> String {
    if n == 0.0 {
        return if n.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let with_fraction = |m: String| if m.contains('.') { m } else { format!("{m}.0") };
    if (1e-3..1e7).contains(&n.abs()) {
        return with_fraction(n.to_string());
    }
    let sci = format!("{n:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    format!("{}E{exp}", with_fraction(mantissa.to_string()))
}

/// Parses a single principal, `User:name` (the only type principals have
/// here).
pub fn parse_user_principal(v: &str) -> Result<model::Principal, String> {
    match v.trim().split_once(':') {
        Some(("User", name)) if !name.is_empty() => Ok(model::Principal::user(name)),
        _ => Err(format!(
            "invalid principal {v:?}: expected User:name, e.g. User:guest"
        )),
    }
}

/// Parses `PLAINTEXT://host:port` or `host:port`.
pub fn parse_listener(v: &str) -> Result<(String, u16), String> {
    let rest = match v.split_once("://") {
        Some((scheme, rest))
            if scheme.eq_ignore_ascii_case("PLAINTEXT")
                || scheme.eq_ignore_ascii_case("pulsar")
                || scheme.eq_ignore_ascii_case("pulsar+ssl")
                || scheme.eq_ignore_ascii_case("https") =>
        {
            rest
        }
        Some((scheme, _)) => return Err(format!("unsupported listener scheme {scheme:?}")),
        None => v,
    };
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("expected host:port, got {v:?}"))?;
    let port: u16 = port.parse().map_err(|_| format!("invalid port in {v:?}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("missing host in {v:?}"));
    }
    Ok((host.to_string(), port))
}

/// One declared configuration key.
#[derive(Debug, Clone, Copy)]
pub struct ConfigKey {
    /// The key, as users write it.
    pub name: &'static str,
    /// Default value, normalized.
    pub default: &'static str,
    /// Value type.
    pub kind: ValueKind,
    /// Whether IncrementalAlterConfigs may change it at runtime.
    pub dynamic: bool,
    /// For topic keys: the broker key that provides the default.
    pub broker_default: Option<&'static str>,
    /// One-line documentation (README and DescribeConfigs).
    pub doc: &'static str,
    /// Why Magnetar accepts and reports this key but does not act on it;
    /// `None` when it is enforced. The README lists every such key.
    pub not_enforced: Option<&'static str>,
    /// For a dynamic broker key: whether it may be changed for one broker
    /// only, not as the cluster-wide default (Kafka's per-broker keys).
    pub per_broker: bool,
}

impl ConfigKey {
    /// A broker key.
    pub const fn broker(
        name: &'static str,
        default: &'static str,
        kind: ValueKind,
        dynamic: bool,
        doc: &'static str,
    ) -> ConfigKey {
        ConfigKey {
            name,
            default,
            kind,
            dynamic,
            broker_default: None,
            doc,
            not_enforced: None,
            per_broker: false,
        }
    }

    /// A topic key (always alterable) whose default is broker key
    /// `broker_default`, if any.
    pub const fn topic(
        name: &'static str,
        default: &'static str,
        kind: ValueKind,
        broker_default: Option<&'static str>,
        doc: &'static str,
    ) -> ConfigKey {
        ConfigKey {
            name,
            default,
            kind,
            dynamic: true,
            broker_default,
            doc,
            not_enforced: None,
            per_broker: false,
        }
    }

    /// Marks a dynamic broker key as changeable for one broker only.
    pub const fn per_broker(mut self) -> ConfigKey {
        self.per_broker = true;
        self
    }

    /// Marks the key as accepted and reported but not acted on, and why.
    pub const fn not_enforced(mut self, why: &'static str) -> ConfigKey {
        self.not_enforced = Some(why);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_validate_as_kafka_does() {
        let list = ValueKind::List(&["delete", "compact"]);
        assert_eq!(list.validate("compact, Delete").unwrap(), "compact,delete");
        assert_eq!(list.validate("delete,delete").unwrap(), "delete");
        assert!(list.validate("").is_err());
        assert!(list.validate("compact,forever").is_err());
        let choice = ValueKind::Choice(&["CreateTime", "LogAppendTime"]);
        assert_eq!(choice.validate("logappendtime").unwrap(), "LogAppendTime");
        assert!(choice.validate("Now").is_err());
        let level = ValueKind::IntOrMinusOne { min: 1, max: 9 };
        assert!(level.validate("-1").is_ok() && level.validate("9").is_ok());
        assert!(level.validate("0").is_err() && level.validate("10").is_err());
        let ratio = ValueKind::Double { min: 0.0, max: 1.0 };
        assert_eq!(ratio.validate("0.25").unwrap(), "0.25");
        assert_eq!(ratio.validate(" .50 ").unwrap(), "0.5");
        assert_eq!(ratio.validate("1").unwrap(), "1.0");
        assert!(ratio.validate("1.5").is_err() && ratio.validate("half").is_err());
        assert!(ratio.validate("NaN").is_err() && ratio.validate("inf").is_err());
        let rate = ValueKind::Double {
            min: 1.0,
            max: f64::MAX,
        };
        assert_eq!(rate.validate("1e6").unwrap(), "1000000.0");
        assert_eq!(rate.validate("10000000").unwrap(), "1.0E7");
        assert_eq!(
            rate.validate(&f64::MAX.to_string()).unwrap(),
            "1.7976931348623157E308"
        );
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(0.001), "0.001");
        assert_eq!(java_double(-2.5), "-2.5");
        let replicas = ValueKind::ReplicaList;
        assert_eq!(replicas.validate("0:1, 1:1").unwrap(), "0:1,1:1");
        assert_eq!(replicas.validate("*").unwrap(), "*");
        assert_eq!(replicas.validate("").unwrap(), "");
        assert!(replicas.validate("0-1").is_err());
    }
}
