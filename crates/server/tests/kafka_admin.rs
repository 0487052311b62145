//! Topic administration and configuration through librdkafka's admin
//! client (CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
//! AlterConfigs) and raw requests for what it does not wrap
//! (IncrementalAlterConfigs, DescribeCluster, CreateTopics v7 details).

mod common;

use std::time::Duration;

use common::{client_config, BrokerProcess, RawConn};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, DescribeClusterRequest, IncrementalAlterConfigsRequest,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigSource, NewPartitions, NewTopic,
    ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;

fn admin(b: &BrokerProcess) -> AdminClient<DefaultClientContext> {
    client_config(&b.bootstrap()).create().unwrap()
}

fn partitions(b: &BrokerProcess, topic: &str) -> usize {
    let c: BaseConsumer = client_config(&b.bootstrap()).create().unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    md.topics()[0].partitions().len()
}

async fn topic_config(
    a: &AdminClient<DefaultClientContext>,
    topic: &str,
    key: &str,
) -> (Option<String>, ConfigSource) {
    let r = a
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .unwrap();
    let res = r[0].as_ref().unwrap();
    let e = res.get(key).unwrap_or_else(|| panic!("{key} described"));
    (
        e.value.clone(),
        match e.source {
            ConfigSource::DynamicTopic => ConfigSource::DynamicTopic,
            ConfigSource::Default => ConfigSource::Default,
            ConfigSource::StaticBroker => ConfigSource::StaticBroker,
            ConfigSource::DynamicBroker => ConfigSource::DynamicBroker,
            _ => ConfigSource::Unknown,
        },
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn create_describe_alter_delete_topics() {
    let mut broker = BrokerProcess::start(&["log.retention.bytes=123456"]);
    let a = admin(&broker);
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));

    // validate_only creates nothing.
    let t = NewTopic::new("orders", 3, TopicReplication::Fixed(1)).set("retention.ms", "60000");
    let r = a
        .create_topics(&[t], &AdminOptions::new().validate_only(true))
        .await
        .unwrap();
    assert!(r[0].is_ok());
    let c: BaseConsumer = client_config(&broker.bootstrap()).create().unwrap();
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    assert!(md.topics().iter().all(|t| t.name() != "orders"));

    let t = NewTopic::new("orders", 3, TopicReplication::Fixed(1))
        .set("retention.ms", "60000")
        .set("cleanup.policy", "delete");
    assert!(a.create_topics(&[t], &opts).await.unwrap()[0].is_ok());
    assert_eq!(partitions(&broker, "orders"), 3);

    // Errors: duplicate, bad replication factor, bad config.
    let again = NewTopic::new("orders", 1, TopicReplication::Fixed(1));
    assert_eq!(
        a.create_topics(&[again], &opts).await.unwrap()[0]
            .as_ref()
            .unwrap_err()
            .1,
        RDKafkaErrorCode::TopicAlreadyExists
    );
    let rf3 = NewTopic::new("replicated", 1, TopicReplication::Fixed(3));
    assert_eq!(
        a.create_topics(&[rf3], &opts).await.unwrap()[0]
            .as_ref()
            .unwrap_err()
            .1,
        RDKafkaErrorCode::InvalidReplicationFactor
    );
    let bad = NewTopic::new("badconf", 1, TopicReplication::Fixed(1)).set("retention.ms", "soon");
    assert_eq!(
        a.create_topics(&[bad], &opts).await.unwrap()[0]
            .as_ref()
            .unwrap_err()
            .1,
        RDKafkaErrorCode::InvalidConfig
    );
    let unknown = NewTopic::new("badconf", 1, TopicReplication::Fixed(1)).set("no.such.key", "1");
    assert_eq!(
        a.create_topics(&[unknown], &opts).await.unwrap()[0]
            .as_ref()
            .unwrap_err()
            .1,
        RDKafkaErrorCode::InvalidConfig
    );

    // DescribeConfigs reports values and where they come from.
    assert_eq!(
        topic_config(&a, "orders", "retention.ms").await,
        (Some("60000".into()), ConfigSource::DynamicTopic)
    );
    assert_eq!(
        topic_config(&a, "orders", "retention.bytes").await,
        (Some("123456".into()), ConfigSource::StaticBroker)
    );
    assert_eq!(
        topic_config(&a, "orders", "segment.bytes").await,
        (Some("1073741824".into()), ConfigSource::Default)
    );
    assert_eq!(
        topic_config(&a, "orders", "cleanup.policy")
            .await
            .0
            .as_deref(),
        Some("delete")
    );

    // AlterConfigs replaces the whole set of overrides.
    let alter =
        AlterConfig::new(ResourceSpecifier::Topic("orders")).set("segment.bytes", "1048576");
    let r = a.alter_configs(&[alter], &opts).await.unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    assert_eq!(
        topic_config(&a, "orders", "segment.bytes").await,
        (Some("1048576".into()), ConfigSource::DynamicTopic)
    );
    assert_eq!(
        topic_config(&a, "orders", "retention.ms").await.1,
        ConfigSource::Default
    );

    // CreatePartitions grows, never shrinks.
    let r = a
        .create_partitions(&[NewPartitions::new("orders", 5)], &opts)
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    assert_eq!(partitions(&broker, "orders"), 5);
    let r = a
        .create_partitions(&[NewPartitions::new("orders", 2)], &opts)
        .await
        .unwrap();
    assert_eq!(
        r[0].as_ref().unwrap_err().1,
        RDKafkaErrorCode::InvalidPartitions
    );

    // Everything survives a restart.
    assert_eq!(broker.terminate(), Some(0));
    broker.restart();
    let a = admin(&broker);
    assert_eq!(partitions(&broker, "orders"), 5);
    assert_eq!(
        topic_config(&a, "orders", "segment.bytes")
            .await
            .0
            .as_deref(),
        Some("1048576")
    );

    // DeleteTopics, including a topic that does not exist.
    let r = a
        .delete_topics(&["orders", "never-was"], &opts)
        .await
        .unwrap();
    assert!(r[0].is_ok());
    assert_eq!(
        r[1].as_ref().unwrap_err().1,
        RDKafkaErrorCode::UnknownTopicOrPartition
    );
    let md = c.fetch_metadata(None, Duration::from_secs(10));
    assert!(md
        .map(|m| m.topics().iter().all(|t| t.name() != "orders"))
        .unwrap_or(true));
    assert!(
        !broker.dir().join("orders-0").exists(),
        "partition directories removed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn incremental_alter_configs_and_broker_configs() {
    let mut broker = BrokerProcess::start(&[]);
    let mut conn = RawConn::connect(broker.addr).await;
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("inc")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("5000")))])]);
    let ResponseKind::CreateTopics(resp) = conn.call(ApiKey::CreateTopics, 7, create).await else {
        panic!()
    };
    let t = &resp.topics[0];
    assert_eq!(t.error_code, 0);
    assert!(!t.topic_id.is_nil(), "v7 reports the topic id");
    assert_eq!((t.num_partitions, t.replication_factor), (1, 1));
    let configs = t.configs.as_ref().unwrap();
    let rm = configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!(rm.value.as_ref().unwrap().as_str(), "5000");

    let op = |name: &'static str, op: i8, value: Option<&'static str>| {
        AlterableConfig::default()
            .with_name(StrBytes::from_static_str(name))
            .with_config_operation(op)
            .with_value(value.map(StrBytes::from_static_str))
    };
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("inc"))
            .with_configs(vec![
                op("retention.bytes", 0, Some("999999")),
                op("retention.ms", 1, None),
                op("cleanup.policy", 2, Some("compact")),
            ]),
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(""))
            .with_configs(vec![op("num.partitions", 0, Some("4"))]),
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configs(vec![op("socket.request.max.bytes", 0, Some("2048"))]),
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("inc"))
            .with_configs(vec![op("retention.ms", 0, Some("-7"))]),
    ]);
    let ResponseKind::IncrementalAlterConfigs(resp) =
        conn.call(ApiKey::IncrementalAlterConfigs, 1, req).await
    else {
        panic!()
    };
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 0, 40, 40], "{:?}", resp.responses);

    let a = admin(&broker);
    assert_eq!(
        topic_config(&a, "inc", "retention.bytes").await,
        (Some("999999".into()), ConfigSource::DynamicTopic)
    );
    assert_eq!(
        topic_config(&a, "inc", "retention.ms").await.1,
        ConfigSource::Default
    );
    assert_eq!(
        topic_config(&a, "inc", "cleanup.policy").await.0.as_deref(),
        Some("delete,compact")
    );

    // The dynamic broker default applies to new topics and persists.
    assert_eq!(broker.terminate(), Some(0));
    broker.restart();
    let c: BaseConsumer = client_config(&broker.bootstrap())
        .set("allow.auto.create.topics", "true")
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some("auto-after-alter"), Duration::from_secs(10))
        .unwrap();
    assert_eq!(md.topics()[0].partitions().len(), 4);
    let a = admin(&broker);
    let r = a
        .describe_configs(&[ResourceSpecifier::Broker(1)], &AdminOptions::new())
        .await
        .unwrap();
    let res = r[0].as_ref().unwrap();
    let np = res.get("num.partitions").unwrap();
    assert_eq!(np.value.as_deref(), Some("4"));
    assert_eq!(
        np.source,
        ConfigSource::DynamicDefaultBroker,
        "set on the default resource (the empty name)"
    );
    assert!(res.get("socket.request.max.bytes").unwrap().is_read_only);

    let mut conn = RawConn::connect(broker.addr).await;
    let ResponseKind::DescribeCluster(dc) = conn
        .call(
            ApiKey::DescribeCluster,
            1,
            DescribeClusterRequest::default().with_endpoint_type(1),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(dc.error_code, 0);
    assert_eq!(dc.brokers.len(), 1);
    assert_eq!(dc.brokers[0].port, broker.addr.port() as i32);
    assert_eq!(dc.cluster_id.len(), 22);
}

/// Every Kafka 4 broker key is accepted, even one Magnetar does not act
/// on: AlterConfigs and IncrementalAlterConfigs of the per-broker
/// `sasl.kerberos.min.time.before.relogin` on the broker's own resource
/// succeed and are described back (and kept across a restart), as in
/// Kafka; on the cluster-wide default resource Kafka refuses a per-broker
/// key (INVALID_REQUEST), and a read-only key is refused (INVALID_CONFIG).
/// DescribeConfigs lists the accepted keys with Kafka's types and hides
/// passwords.
/// A key of broker 1: its value, source, and read-only and sensitive flags.
async fn broker_value(
    a: &AdminClient<DefaultClientContext>,
    key: &str,
) -> (Option<String>, ConfigSource, bool, bool) {
    let r = a
        .describe_configs(&[ResourceSpecifier::Broker(1)], &AdminOptions::new())
        .await
        .unwrap();
    let e = r[0]
        .as_ref()
        .unwrap()
        .get(key)
        .unwrap_or_else(|| panic!("{key} described"));
    let source = match e.source {
        ConfigSource::Default => ConfigSource::Default,
        ConfigSource::DynamicBroker => ConfigSource::DynamicBroker,
        ConfigSource::DynamicDefaultBroker => ConfigSource::DynamicDefaultBroker,
        ConfigSource::StaticBroker => ConfigSource::StaticBroker,
        _ => ConfigSource::Unknown,
    };
    (e.value.clone(), source, e.is_read_only, e.is_sensitive)
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_broker_keys_magnetar_does_not_act_on_are_accepted() {
    const KEY: &str = "sasl.kerberos.min.time.before.relogin";
    let mut broker = BrokerProcess::start(&[]);
    let a = admin(&broker);
    let (value, source, read_only, _) = broker_value(&a, KEY).await;
    assert_eq!(
        (value.as_deref(), source, read_only),
        (Some("60000"), ConfigSource::Default, false)
    );

    // Legacy AlterConfigs (librdkafka's alter_configs).
    let r = a
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Broker(1)).set(KEY, "120000")],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let (value, source, _, _) = broker_value(&a, KEY).await;
    assert_eq!(
        (value.as_deref(), source),
        (Some("120000"), ConfigSource::DynamicBroker)
    );

    // IncrementalAlterConfigs: the broker's own resource, the cluster-wide
    // default (refused for a per-broker key), a read-only key, a bad value.
    let op = |name: &'static str, value: &'static str| {
        AlterableConfig::default()
            .with_name(StrBytes::from_static_str(name))
            .with_config_operation(0)
            .with_value(Some(StrBytes::from_static_str(value)))
    };
    let resource = |name: &'static str, config: AlterableConfig| {
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(name))
            .with_configs(vec![config])
    };
    let mut conn = RawConn::connect(broker.addr).await;
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        resource("1", op(KEY, "90000")),
        resource("", op(KEY, "90000")),
        resource("1", op("broker.rack", "rack-1")),
        resource("1", op("sasl.kerberos.ticket.renew.jitter", "a lot")),
    ]);
    let ResponseKind::IncrementalAlterConfigs(resp) =
        conn.call(ApiKey::IncrementalAlterConfigs, 1, req).await
    else {
        panic!()
    };
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 42, 40, 40], "{:?}", resp.responses);
    let (value, source, _, _) = broker_value(&a, KEY).await;
    assert_eq!(
        (value.as_deref(), source),
        (Some("90000"), ConfigSource::DynamicBroker)
    );
    let (value, _, read_only, sensitive) = broker_value(&a, "ssl.keystore.password").await;
    assert_eq!((value, read_only, sensitive), (None, true, true));
    let (value, _, read_only, _) = broker_value(&a, "num.io.threads").await;
    assert_eq!((value.as_deref(), read_only), (Some("8"), false));

    // Persisted like every dynamic key.
    assert_eq!(broker.terminate(), Some(0));
    broker.restart();
    let a = admin(&broker);
    let (value, source, _, _) = broker_value(&a, KEY).await;
    assert_eq!(
        (value.as_deref(), source),
        (Some("90000"), ConfigSource::DynamicBroker)
    );
}
