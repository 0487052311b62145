//! Tenant and namespace rules against a real broker on a temp dir.

use model::pulsar_name::Namespace;
use model::{PartitionId, TopicName};

use super::{Retention, TenantInfo, CLUSTER_NAME};
use crate::config::{BrokerConfig, ConfigSource, TopicConfig, TopicKind};
use crate::subscription::{
    ConsumerId, ConsumerSpec, LogBounds, StartPosition, SubscribeRequest, SubscriptionKey,
    SubscriptionType,
};
use crate::{now_ms, Error, NewTopic};

fn open(dir: &std::path::Path) -> crate::testing::TestNode {
    let config = BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap());
    crate::testing::TestNode::start(config).unwrap()
}

fn info(clusters: &[&str]) -> TenantInfo {
    TenantInfo {
        admin_roles: ["ops".to_string()].into(),
        allowed_clusters: clusters.iter().map(|c| c.to_string()).collect(),
    }
}

fn ns(t: &str, n: &str) -> Namespace {
    Namespace::new(t, n).unwrap()
}

fn topic(name: &str, partitions: i32) -> NewTopic {
    NewTopic {
        assignments: Vec::new(),
        name: TopicName::new(name).unwrap(),
        partitions: Some(partitions),
        replication_factor: None,
        kind: TopicKind::Partitioned,
        config: TopicConfig::default(),
    }
}

fn retention(time_in_minutes: i64, size_in_mb: i64) -> Retention {
    Retention {
        time_in_minutes,
        size_in_mb,
    }
}

#[test]
fn public_default_always_exists_and_cannot_be_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    assert_eq!(b.tenant_names(), vec!["public".to_string()]);
    assert_eq!(
        b.tenant("public").unwrap().allowed_clusters,
        [CLUSTER_NAME.to_string()].into()
    );
    assert_eq!(
        b.namespaces("public").unwrap(),
        vec![Namespace::default_namespace()]
    );
    assert!(b.namespace_exists(&Namespace::default_namespace()));
    assert!(matches!(
        b.delete_tenant("public", true),
        Err(Error::Undeletable(_))
    ));
    assert!(matches!(
        b.delete_namespace(&Namespace::default_namespace(), true),
        Err(Error::Undeletable(_))
    ));
    b.shutdown().unwrap();
}

#[test]
fn tenant_info_is_checked_as_upstream_does() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    for bad in [info(&[]), info(&[" "]), info(&["elsewhere"])] {
        assert!(matches!(
            b.create_tenant("acme", bad),
            Err(Error::InvalidPolicy(_))
        ));
    }
    let mut spaces = info(&[CLUSTER_NAME]);
    spaces.admin_roles.insert(" admin".into());
    assert!(matches!(
        b.create_tenant("acme", spaces),
        Err(Error::InvalidPolicy(_))
    ));
    assert!(matches!(
        b.create_tenant("a.b", info(&[CLUSTER_NAME])),
        Err(Error::InvalidTopic(_))
    ));
    assert!(b.tenant_names().iter().all(|t| t == "public"));

    b.create_tenant("acme", info(&[CLUSTER_NAME])).unwrap();
    assert!(matches!(
        b.create_tenant("acme", info(&[CLUSTER_NAME])),
        Err(Error::TenantExists(_))
    ));
    let mut updated = info(&[CLUSTER_NAME]);
    updated.admin_roles = ["alice".to_string(), "bob".to_string()].into();
    b.update_tenant("acme", updated.clone()).unwrap();
    assert_eq!(b.tenant("acme").unwrap(), updated);
    assert!(matches!(
        b.update_tenant("nope", updated),
        Err(Error::TenantNotFound(_))
    ));
    assert!(matches!(b.tenant("nope"), Err(Error::TenantNotFound(_))));
    b.shutdown().unwrap();
}

#[test]
fn namespaces_need_their_tenant_and_deletes_need_emptiness_or_force() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let billing = ns("acme", "billing");
    assert!(matches!(
        b.create_namespace(&billing, None),
        Err(Error::TenantNotFound(_))
    ));
    b.create_tenant("acme", info(&[CLUSTER_NAME])).unwrap();
    b.create_namespace(&billing, None).unwrap();
    assert!(matches!(
        b.create_namespace(&billing, None),
        Err(Error::NamespaceExists(_))
    ));
    b.create_namespace(&ns("acme", "empty"), None).unwrap();
    assert_eq!(
        b.namespaces("acme").unwrap(),
        vec![billing.clone(), ns("acme", "empty")]
    );

    b.create_topic_in(&billing, topic("acme.billing.orders", 2))
        .unwrap();
    assert_eq!(
        b.namespace_of(&TopicName::new("acme.billing.orders").unwrap()),
        billing
    );
    assert!(matches!(
        b.delete_namespace(&billing, false),
        Err(Error::NamespaceNotEmpty(_))
    ));
    assert!(matches!(
        b.delete_tenant("acme", false),
        Err(Error::TenantNotEmpty(_))
    ));
    b.delete_namespace(&ns("acme", "empty"), false).unwrap();
    assert!(matches!(
        b.delete_namespace(&ns("acme", "empty"), false),
        Err(Error::NamespaceNotFound(_))
    ));

    // Force deletes the namespaces' topics, then the tenant.
    b.delete_tenant("acme", true).unwrap();
    assert!(b.topic("acme.billing.orders").is_none());
    assert!(!b.namespace_exists(&billing));
    assert!(matches!(b.tenant("acme"), Err(Error::TenantNotFound(_))));
    b.shutdown().unwrap();
}

#[test]
fn topics_are_created_only_in_namespaces_that_exist() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let billing = ns("acme", "billing");
    assert!(matches!(
        b.create_topic_in(&billing, topic("acme.billing.orders", 1)),
        Err(Error::NamespaceNotFound(_))
    ));
    let auto = b.lookup_topic_in(
        &TopicName::new("acme.billing.x").unwrap(),
        true,
        Some(&billing),
    );
    assert!(matches!(auto, Err(Error::NamespaceNotFound(_))));
    assert!(b.topic("acme.billing.x").is_none());

    b.create_tenant("acme", info(&[CLUSTER_NAME])).unwrap();
    b.create_namespace(&billing, None).unwrap();
    // A public/default topic may not take a name of acme/billing's.
    let shadow = b.create_topic_in(&Namespace::default_namespace(), topic("acme.billing.y", 1));
    assert!(matches!(shadow, Err(Error::InvalidTopic(_))));
    b.create_topic_in(&billing, topic("acme.billing.orders", 1))
        .unwrap();
    assert_eq!(b.namespace_topics(&billing).len(), 1);
    assert!(b
        .namespace_topics(&Namespace::default_namespace())
        .is_empty());
    b.shutdown().unwrap();
}

#[test]
fn kafka_topics_named_like_a_namespace_join_it_when_it_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    b.create_topic(topic("acme.billing.old", 1), false).unwrap();
    let billing = ns("acme", "billing");
    assert_eq!(
        b.namespace_of(&TopicName::new("acme.billing.old").unwrap()),
        Namespace::default_namespace()
    );
    b.create_tenant("acme", info(&[CLUSTER_NAME])).unwrap();
    b.create_namespace(&billing, Some(retention(10, 5)))
        .unwrap();
    let old = b.topic("acme.billing.old").unwrap();
    assert_eq!(b.namespace_topics(&billing)[0].name, old.name);
    // It inherits the namespace's retention at once.
    let c = old.partitions[0].log().config();
    assert_eq!(
        (c.retention_ms, c.retention_bytes),
        (Some(600_000), Some(5 << 20))
    );
    b.shutdown().unwrap();
}

#[test]
fn retention_rules_and_mapping_follow_upstream() {
    for bad in [
        retention(0, 10),
        retention(10, 0),
        retention(-2, 1),
        retention(1, -2),
        retention(1, i64::MAX),
    ] {
        assert!(
            matches!(
                bad.validate(),
                Err(magnetar_metadata::MetadataError::InvalidPolicy(_))
            ),
            "{bad:?}"
        );
    }
    for (r, ms, bytes) in [
        (retention(-1, -1), "-1", "-1"),
        (retention(0, 0), "1", "0"),
        (retention(60, -1), "3600000", "-1"),
        (retention(-1, 100), "-1", "104857600"),
    ] {
        r.validate().unwrap();
        let mut c = TopicConfig::default();
        r.apply(&mut c).unwrap();
        assert_eq!(c.overrides()["retention.ms"], ms, "{r:?}");
        assert_eq!(c.overrides()["retention.bytes"], bytes, "{r:?}");
        assert_eq!(Retention::of(&c), Some(r), "read back as set");
    }
    assert_eq!(Retention::of(&TopicConfig::default()), None);
}

#[test]
fn namespace_retention_is_inherited_unless_a_topic_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let billing = ns("acme", "billing");
    b.create_tenant("acme", info(&[CLUSTER_NAME])).unwrap();
    b.create_namespace(&billing, None).unwrap();
    assert_eq!(b.namespace_retention(&billing).unwrap(), None);
    let plain = b
        .create_topic_in(&billing, topic("acme.billing.plain", 2))
        .unwrap();
    let mut own = topic("acme.billing.own", 1);
    own.config.set("retention.ms", "1000").unwrap();
    let own = b.create_topic_in(&billing, own).unwrap();
    let default_topic = b.create_topic(topic("elsewhere", 1), false).unwrap();

    b.set_namespace_retention(&billing, Some(retention(60, 10)))
        .unwrap();
    assert_eq!(
        b.namespace_retention(&billing).unwrap(),
        Some(retention(60, 10))
    );
    for p in &plain.partitions {
        let c = p.log().config();
        assert_eq!(
            (c.retention_ms, c.retention_bytes),
            (Some(3_600_000), Some(10 << 20))
        );
    }
    let c = own.partitions[0].log().config();
    assert_eq!(
        (c.retention_ms, c.retention_bytes),
        (Some(1000), Some(10 << 20))
    );
    let c = default_topic.partitions[0].log().config();
    assert_eq!(c.retention_bytes, None, "other namespaces are untouched");

    // What DescribeConfigs reports, with the namespace as the source.
    let own = b.topic("acme.billing.own").unwrap();
    let eff = b.effective_topic_config(&own.name, &own.config);
    let get = |name: &str| {
        eff.iter()
            .find(|e| e.name == name)
            .map(|e| (e.value.clone(), e.source))
            .unwrap()
    };
    assert_eq!(get("retention.ms"), ("1000".into(), ConfigSource::Topic));
    assert_eq!(
        get("retention.bytes"),
        ((10 << 20).to_string(), ConfigSource::Namespace)
    );

    // Topics created later and partitions added later inherit it too.
    let later = b
        .create_topic_in(&billing, topic("acme.billing.later", 1))
        .unwrap();
    assert_eq!(
        later.partitions[0].log().config().retention_ms,
        Some(3_600_000)
    );
    b.create_partitions("acme.billing.plain", 3, false).unwrap();
    let grown = b.topic("acme.billing.plain").unwrap();
    assert_eq!(
        grown.partitions[2].log().config().retention_ms,
        Some(3_600_000)
    );

    // Removing the policy falls back to the broker's keys.
    b.set_namespace_retention(&billing, None).unwrap();
    assert_eq!(b.namespace_retention(&billing).unwrap(), None);
    let c = grown.partitions[0].log().config();
    assert_eq!(
        (c.retention_ms, c.retention_bytes),
        (Some(604_800_000), None)
    );
    assert!(matches!(
        b.set_namespace_retention(&ns("acme", "nope"), None),
        Err(Error::NamespaceNotFound(_))
    ));
    b.shutdown().unwrap();
}

#[test]
fn tenants_namespaces_and_policies_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let billing = ns("acme", "billing");
    {
        let b = open(dir.path());
        b.create_tenant("acme", info(&[CLUSTER_NAME])).unwrap();
        b.create_namespace(&billing, Some(retention(-1, 7)))
            .unwrap();
        b.create_topic_in(&billing, topic("acme.billing.orders", 1))
            .unwrap();
        b.shutdown().unwrap();
    }
    let b = open(dir.path());
    assert_eq!(
        b.tenant("acme").unwrap().admin_roles,
        ["ops".to_string()].into()
    );
    assert!(b.namespace_exists(&billing));
    assert_eq!(
        b.namespace_retention(&billing).unwrap(),
        Some(retention(-1, 7))
    );
    let t = b.topic("acme.billing.orders").unwrap();
    let c = t.partitions[0].log().config();
    assert_eq!(
        (c.retention_ms, c.retention_bytes),
        (None, Some(7 << 20)),
        "applied when the logs open"
    );
    b.shutdown().unwrap();
}

#[test]
fn a_topic_in_use_is_deleted_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let t = b.create_topic(topic("busy", 2), false).unwrap();
    let attached = t.partition(PartitionId(1)).unwrap().attach_producer();
    assert!(matches!(
        b.delete_topic_unless_busy("busy", false),
        Err(Error::TopicBusy(_))
    ));
    drop(attached);
    assert!(!b.topic_in_use(&t));

    // A consumer on a subscription counts too.
    let p = t.partition(PartitionId(0)).unwrap();
    let key = SubscriptionKey::new("busy", 0, "sub");
    let consumer = ConsumerId {
        connection: 1,
        consumer: 1,
    };
    b.subscriptions()
        .subscribe(
            &key,
            SubscribeRequest {
                consumer: ConsumerSpec {
                    id: consumer,
                    name: String::new(),
                    priority_level: 0,
                },
                sub_type: SubscriptionType::Shared,
                durable: true,
                partitioned: true,
                start: StartPosition::Earliest,
            },
            LogBounds {
                start: p.log().log_start_offset(),
                end: p.log().log_end_offset(),
            },
            now_ms(),
        )
        .unwrap();
    assert!(matches!(
        b.delete_topic_unless_busy("busy", false),
        Err(Error::TopicBusy(_))
    ));
    b.delete_topic_unless_busy("busy", true).unwrap();
    assert!(b.topic("busy").is_none());
    assert!(matches!(
        b.delete_topic_unless_busy("busy", true),
        Err(Error::UnknownTopic(_))
    ));
    b.shutdown().unwrap();
}
