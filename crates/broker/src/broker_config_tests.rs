//! Dynamic broker keys in layers, as Kafka layers them: this broker's own
//! over the cluster-wide defaults over the start-up values over the
//! built-in defaults; removing a key brings back the layer below.

use crate::config::{BrokerConfig, ConfigSource};
use crate::{Broker, BrokerScope};

fn open(dir: &std::path::Path) -> crate::testing::TestNode {
    let mut c = BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap());
    c.apply_assignment("log.retention.ms=3600000").unwrap();
    crate::testing::TestNode::start(c).unwrap()
}

fn value(b: &Broker, key: &str) -> (String, ConfigSource) {
    let c = b.config();
    let (v, s) = c.get(key).unwrap();
    (v.to_string(), s)
}

fn set(b: &Broker, scope: BrokerScope, key: &str, v: Option<&str>) {
    b.alter_broker_config(scope, &[(key.to_string(), v.map(str::to_string))], false)
        .unwrap();
}

#[test]
fn layers_override_in_order_and_removal_brings_back_the_one_below() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let key = "log.retention.ms";
    assert_eq!(value(&b, key), ("3600000".into(), ConfigSource::Static));

    set(&b, BrokerScope::ClusterDefault, key, Some("2000"));
    assert_eq!(
        value(&b, key),
        ("2000".into(), ConfigSource::DynamicDefault)
    );
    set(&b, BrokerScope::ThisBroker, key, Some("1000"));
    assert_eq!(value(&b, key), ("1000".into(), ConfigSource::Dynamic));
    assert_eq!(
        b.broker_config_synonyms(key),
        vec![
            ("1000".into(), ConfigSource::Dynamic),
            ("2000".into(), ConfigSource::DynamicDefault),
            ("3600000".into(), ConfigSource::Static),
            ("604800000".into(), ConfigSource::Default),
        ]
    );
    // Removing this broker's key: the cluster-wide default again.
    set(&b, BrokerScope::ThisBroker, key, None);
    assert_eq!(
        value(&b, key),
        ("2000".into(), ConfigSource::DynamicDefault)
    );
    // Removing that: the start-up value, not the built-in default.
    set(&b, BrokerScope::ClusterDefault, key, None);
    assert_eq!(value(&b, key), ("3600000".into(), ConfigSource::Static));

    // Stored normalized, as the configuration reads it back.
    set(
        &b,
        BrokerScope::ThisBroker,
        "auto.create.topics.enable",
        Some("FALSE"),
    );
    set(&b, BrokerScope::ThisBroker, key, Some("7200000"));
    assert_eq!(
        b.dynamic_broker_configs(BrokerScope::ThisBroker)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![
            ("auto.create.topics.enable".to_string(), "false".to_string()),
            ("log.retention.ms".to_string(), "7200000".to_string())
        ]
    );
    set(&b, BrokerScope::ClusterDefault, "num.partitions", Some("5"));
    assert!(b
        .alter_broker_config(
            BrokerScope::ThisBroker,
            &[("num.partitions".into(), Some("zero".into()))],
            false
        )
        .is_err());
    assert!(
        b.alter_broker_config(
            BrokerScope::ThisBroker,
            &[("socket.request.max.bytes".into(), Some("2048".into()))],
            false
        )
        .is_err(),
        "not a dynamic key"
    );
    b.shutdown().unwrap();
    drop(b);

    // Both layers persist; the start-up value still sits below them.
    let b = open(dir.path());
    assert_eq!(value(&b, key), ("7200000".into(), ConfigSource::Dynamic));
    assert_eq!(
        value(&b, "num.partitions"),
        ("5".into(), ConfigSource::DynamicDefault)
    );
    set(&b, BrokerScope::ThisBroker, key, None);
    assert_eq!(value(&b, key), ("3600000".into(), ConfigSource::Static));
    b.shutdown().unwrap();
}
