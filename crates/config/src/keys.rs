//! The declared configuration keys: one row per key, with its default,
//! value type (Kafka's, as DescribeConfigs reports it) and documentation.
//! The rows live in `broker_keys.rs` (and, for Kafka's broker keys accepted
//! but not acted on, `accepted_keys.rs`) and `topic_keys.rs`.

pub use super::accepted_keys::ACCEPTED_BROKER_KEYS;
pub use super::broker_keys::BROKER_KEYS;
pub use super::topic_keys::TOPIC_KEYS;

use super::key_spec::ConfigKey;

/// Every broker key: those Magnetar acts on, then Kafka's it accepts
/// without acting on them.
pub fn broker_keys() -> impl Iterator<Item = &'static ConfigKey> {
    BROKER_KEYS.iter().chain(ACCEPTED_BROKER_KEYS)
}

/// Looks up a broker key.
pub fn broker_key(name: &str) -> Option<&'static ConfigKey> {
    broker_keys().find(|k| k.name == name)
}

/// Looks up a topic key.
pub fn topic_key(name: &str) -> Option<&'static ConfigKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_spec::ValueKind;

    #[test]
    fn int_keys_fit_32_bits_and_names_are_unique() {
        for table in [
            broker_keys().collect::<Vec<_>>(),
            TOPIC_KEYS.iter().collect(),
        ] {
            let mut names = std::collections::HashSet::new();
            for k in table {
                if let ValueKind::Int { min, max }
                | ValueKind::IntOrMinusOne { min, max }
                | ValueKind::OptInt { min, max } = k.kind
                {
                    assert!(
                        min >= i64::from(i32::MIN) && max <= i64::from(i32::MAX),
                        "{}",
                        k.name
                    );
                }
                if let ValueKind::Short { min, max } = k.kind {
                    assert!(
                        min >= i64::from(i16::MIN) && max <= i64::from(i16::MAX),
                        "{}",
                        k.name
                    );
                }
                assert!(
                    k.dynamic || !k.per_broker,
                    "{}: per-broker but static",
                    k.name
                );
                assert!(names.insert(k.name), "{} twice", k.name);
            }
        }
        // Every topic key's broker default has the topic key's type.
        for k in TOPIC_KEYS {
            if let Some(b) = k.broker_default {
                let bk = broker_key(b).unwrap_or_else(|| panic!("{b} is declared"));
                assert_eq!(bk.kind.kafka_type(), k.kind.kafka_type(), "{}", k.name);
            }
        }
    }

    #[test]
    fn every_default_is_valid_for_its_kind() {
        for k in broker_keys().chain(TOPIC_KEYS) {
            assert_eq!(
                k.kind.validate(k.default).as_deref(),
                Ok(k.default),
                "{}",
                k.name
            );
            if let Some(b) = k.broker_default {
                let bk = broker_key(b).unwrap();
                assert_eq!(bk.default, k.default, "{} vs {b}", k.name);
            }
        }
    }
}

#[cfg(test)]
mod readme {
    use super::*;
    use crate::key_spec::ValueKind;

    const EXAMPLE_PATH: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/magnetar.example.toml"
    );

    /// The example configuration file as the key table says it should be.
    fn render_example() -> String {
        let mut out = String::from(
            "# Magnetar broker configuration: every key with its default value.\n\
             # Use it with `magnetar standalone --config FILE`; keys are Kafka's broker\n\
             # property names. Delete the lines you do not change, or edit them.\n\
             # Values can also be set on the command line: --set KEY=VALUE.\n\
             # (Generated from crates/broker/src/config/keys.rs; a test checks it.)\n",
        );
        for k in BROKER_KEYS {
            let value = example_value(k);
            let dynamic = if k.dynamic {
                " (dynamic: can be changed at runtime)"
            } else {
                ""
            };
            out.push_str(&format!(
                "\n# {}{dynamic}\n\"{}\" = {value}\n",
                k.doc, k.name
            ));
        }
        out.push_str(
            "\n# Kafka's other broker keys: accepted (checked, stored and reported by\n\
             # DescribeConfigs) but not acted on, so that a Kafka configuration loads.\n\
             # The README's configuration section says why for each.\n",
        );
        for k in ACCEPTED_BROKER_KEYS {
            out.push_str(&format!("\"{}\" = {}\n", k.name, example_value(k)));
        }
        out
    }

    /// A key's default as a TOML value.
    fn example_value(k: &ConfigKey) -> String {
        match k.kind {
            ValueKind::Bool
            | ValueKind::Int { .. }
            | ValueKind::IntOrMinusOne { .. }
            | ValueKind::Short { .. }
            | ValueKind::Long { .. }
            | ValueKind::Limit { .. }
            | ValueKind::Double { .. } => k.default.to_string(),
            ValueKind::OptInt { .. }
            | ValueKind::Choice(_)
            | ValueKind::List(_)
            | ValueKind::ReplicaList
            | ValueKind::Listener
            | ValueKind::Voters
            | ValueKind::Listeners
            | ValueKind::ProtocolMap
            | ValueKind::Class(_)
            | ValueKind::Principals
            | ValueKind::Principal
            | ValueKind::PrincipalRules
            | ValueKind::AnyList
            | ValueKind::Password
            | ValueKind::Text => format!("{:?}", k.default),
        }
    }

    /// `config/magnetar.example.toml` lists every broker key with its
    /// default and documentation, and is a valid configuration equal to the
    /// defaults. `MAGNETAR_BLESS=1` rewrites it from the table.
    #[test]
    fn example_config_file_matches_the_key_table() {
        let expected = render_example();
        if std::env::var_os("MAGNETAR_BLESS").is_some() {
            std::fs::write(EXAMPLE_PATH, &expected).unwrap();
        }
        let actual = std::fs::read_to_string(EXAMPLE_PATH).unwrap();
        assert_eq!(
            actual, expected,
            "config/magnetar.example.toml is out of date: run MAGNETAR_BLESS=1 cargo test -p magnetar-config example_config"
        );
        let mut config = crate::BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        config
            .apply_toml_file(std::path::Path::new(EXAMPLE_PATH))
            .unwrap();
        for k in broker_keys() {
            assert_eq!(
                config.get(k.name).map(|(v, _)| v),
                Some(k.default),
                "{}",
                k.name
            );
        }
    }

    /// The README's "accepted but not enforced" list names exactly the
    /// topic keys declared `not_enforced`.
    #[test]
    fn the_readme_lists_the_keys_not_enforced() {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("**Accepted but not enforced**")
            .expect("README has the list");
        let section = &readme[start..];
        // The intro paragraph and the list: up to the second blank line.
        let end = section
            .match_indices("\n\n")
            .nth(1)
            .map_or(section.len(), |(i, _)| i);
        let section = &section[..end];
        let listed: std::collections::BTreeSet<&str> = section
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| topic_key(w).is_some())
            .collect();
        let declared: std::collections::BTreeSet<&str> = TOPIC_KEYS
            .iter()
            .filter(|k| k.not_enforced.is_some())
            .map(|k| k.name)
            .collect();
        assert_eq!(listed, declared);
    }

    /// The README's list of Kafka broker keys accepted but not enforced
    /// names exactly those of `accepted_keys.rs`, each marked with why.
    #[test]
    fn the_readme_lists_the_broker_keys_not_enforced() {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("**Kafka broker keys accepted, not enforced**")
            .expect("README has the list");
        let section = &readme[start..];
        let end = section
            .match_indices("\n\n")
            .nth(1)
            .map_or(section.len(), |(i, _)| i);
        let listed: std::collections::BTreeSet<&str> = section[..end]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| broker_key(w).is_some())
            .collect();
        let declared: std::collections::BTreeSet<&str> =
            ACCEPTED_BROKER_KEYS.iter().map(|k| k.name).collect();
        assert_eq!(listed, declared);
        assert!(ACCEPTED_BROKER_KEYS
            .iter()
            .all(|k| k.not_enforced.is_some()));
    }

    /// The README's configuration reference is a contract: every key must
    /// be documented there.
    #[test]
    fn every_key_is_documented_in_the_readme() {
        let readme = include_str!("../../../README.md");
        for k in broker_keys().chain(TOPIC_KEYS) {
            assert!(
                readme.contains(&format!("`{}`", k.name)),
                "README lacks `{}`",
                k.name
            );
        }
    }
}
