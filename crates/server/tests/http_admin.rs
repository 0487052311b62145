//! Upstream Pulsar's admin REST API against the real broker: clusters,
//! tenants, namespaces (with retention) and topics, every endpoint with its
//! error cases; namespace retention as Kafka DescribeConfigs reports it; a
//! namespace surviving SIGKILL; and the cross-checks: a topic created over
//! REST is seen by Kafka Metadata (rdkafka) and by a Pulsar
//! PartitionedTopicMetadata (raw frames) with the same partition count,
//! deleting it over REST fences its id for Kafka Fetch, and the Python
//! Pulsar client produces and consumes in a namespace made over REST.

mod common;
#[path = "http_admin/support.rs"]
mod support;

use std::process::Command as Process;

use common::{BrokerProcess, RawConn};
use magnetar_pulsar_wire::proto::ServerError;
use rdkafka::admin::{AdminOptions, ConfigSource, NewTopic, TopicReplication};
use reqwest::Method;
use serde_json::{json, Value};
use support::{
    admin, fetch_error_by_id, kafka_config, kafka_partitions, namespace, topic_id, Http, Pulsar,
    TENANT, UNKNOWN_TOPIC_ID,
};

#[tokio::test(flavor = "multi_thread")]
async fn clusters_and_tenants() {
    let broker = BrokerProcess::start(&[]);
    let http = Http::of(&broker);
    assert_eq!(
        http.get("/admin/v2/clusters").await,
        (200, json!(["standalone"]))
    );
    let (status, body) = http.get("/admin/v2/clusters/standalone").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["brokerServiceUrl"], Value::from(broker.pulsar_url()));
    assert_eq!(body["serviceUrl"], Value::from(broker.http_url()));
    http.refused(
        Method::GET,
        "/admin/v2/clusters/elsewhere",
        None,
        404,
        "Cluster does not exist",
    )
    .await;

    // public always exists, with this cluster.
    assert_eq!(
        http.get("/admin/v2/tenants").await,
        (200, json!(["public"]))
    );
    assert_eq!(
        http.get("/admin/v2/tenants/public").await,
        (
            200,
            json!({"adminRoles": [], "allowedClusters": ["standalone"]})
        )
    );

    // Create: upstream's checks first.
    let t = "/admin/v2/tenants/acme";
    http.refused(Method::PUT, t, None, 412, "TenantInfo is null")
        .await;
    http.refused(Method::PUT, t, Some("{}"), 412, "Clusters cannot be empty")
        .await;
    http.refused(
        Method::PUT,
        t,
        Some(r#"{"allowedClusters": [" "]}"#),
        412,
        "Clusters cannot be empty",
    )
    .await;
    http.refused(
        Method::PUT,
        t,
        Some(r#"{"allowedClusters": ["us-west"]}"#),
        412,
        "Clusters do not exist",
    )
    .await;
    let padded = r#"{"adminRoles": [" ops"], "allowedClusters": ["standalone"]}"#;
    http.refused(
        Method::PUT,
        t,
        Some(padded),
        412,
        "AdminRoles contains whitespace",
    )
    .await;
    http.refused(Method::PUT, t, Some("{not json"), 400, "invalid JSON")
        .await;
    http.refused(
        Method::PUT,
        t,
        Some(r#"{"adminRoles": 7}"#),
        400,
        "invalid JSON",
    )
    .await;
    http.refused(
        Method::PUT,
        "/admin/v2/tenants/a.b",
        Some(TENANT),
        412,
        "Tenant name is not valid",
    )
    .await;
    http.refused(
        Method::PUT,
        "/admin/v2/tenants/a%20b",
        Some(TENANT),
        412,
        "Tenant name is not valid",
    )
    .await;
    assert_eq!(
        http.get("/admin/v2/tenants").await.1,
        json!(["public"]),
        "nothing created"
    );

    http.ok(Method::PUT, t, Some(TENANT)).await;
    http.refused(Method::PUT, t, Some(TENANT), 409, "Tenant already exists")
        .await;
    assert_eq!(
        http.get("/admin/v2/tenants").await.1,
        json!(["acme", "public"])
    );
    assert_eq!(
        http.get(t).await,
        (
            200,
            json!({"adminRoles": ["ops"], "allowedClusters": ["standalone"]})
        )
    );

    // Update.
    let roles = r#"{"adminRoles": ["alice", "bob"], "allowedClusters": ["standalone"]}"#;
    http.ok(Method::POST, t, Some(roles)).await;
    assert_eq!(http.get(t).await.1["adminRoles"], json!(["alice", "bob"]));
    http.refused(
        Method::POST,
        t,
        Some(r#"{"allowedClusters": []}"#),
        412,
        "Clusters cannot be empty",
    )
    .await;
    http.refused(
        Method::POST,
        "/admin/v2/tenants/nobody",
        Some(TENANT),
        404,
        "Tenant does not exist",
    )
    .await;
    http.refused(
        Method::GET,
        "/admin/v2/tenants/nobody",
        None,
        404,
        "Tenant does not exist",
    )
    .await;

    // Delete: not while it has namespaces, unless forced; public never.
    http.ok(Method::PUT, "/admin/v2/namespaces/acme/ns", None)
        .await;
    http.refused(
        Method::DELETE,
        t,
        None,
        409,
        "The tenant still has active namespaces",
    )
    .await;
    http.refused(
        Method::DELETE,
        &format!("{t}?force=maybe"),
        None,
        400,
        "force",
    )
    .await;
    http.ok(Method::DELETE, &format!("{t}?force=true"), None)
        .await;
    http.refused(Method::GET, t, None, 404, "Tenant does not exist")
        .await;
    http.refused(Method::DELETE, t, None, 404, "Tenant does not exist")
        .await;
    http.refused(
        Method::DELETE,
        "/admin/v2/tenants/public?force=true",
        None,
        409,
        "cannot be deleted",
    )
    .await;
    http.ok(Method::PUT, "/admin/v2/tenants/empty", Some(TENANT))
        .await;
    http.ok(Method::DELETE, "/admin/v2/tenants/empty", None)
        .await;

    // Wrong methods, unknown paths, oversized bodies.
    http.refused(Method::PATCH, t, None, 405, "method not allowed")
        .await;
    http.refused(
        Method::POST,
        "/admin/v2/tenants",
        Some(TENANT),
        405,
        "method not allowed",
    )
    .await;
    http.refused(
        Method::GET,
        "/admin/v2/tenants/a/b/c/d/e/f",
        None,
        404,
        "no such path",
    )
    .await;
    assert_eq!(
        support::status_of_announced_body(&broker, "/admin/v2/tenants/big", 2 << 20),
        413,
        "bodies are limited to 1 MiB"
    );
    assert_eq!(http.get("/health/ready").await.0, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaces_and_their_retention_as_kafka_sees_it() {
    let mut broker = BrokerProcess::start(&[]);
    let http = Http::of(&broker);
    let a = admin(&broker);

    // Listing and creating need the tenant.
    assert_eq!(
        http.get("/admin/v2/namespaces/public").await,
        (200, json!(["public/default"]))
    );
    http.refused(
        Method::GET,
        "/admin/v2/namespaces/acme",
        None,
        404,
        "Tenant does not exist",
    )
    .await;
    http.refused(
        Method::GET,
        "/admin/v2/namespaces/a.b",
        None,
        412,
        "Tenant name is not valid",
    )
    .await;
    let billing = "/admin/v2/namespaces/acme/billing";
    http.refused(Method::PUT, billing, None, 404, "Tenant does not exist")
        .await;
    http.ok(Method::PUT, "/admin/v2/tenants/acme", Some(TENANT))
        .await;
    http.refused(
        Method::PUT,
        "/admin/v2/namespaces/acme/bil.ling",
        None,
        412,
        "Namespace name is not valid",
    )
    .await;
    http.refused(Method::PUT, billing, Some("[1"), 400, "invalid JSON")
        .await;
    http.ok(Method::PUT, billing, None).await;
    http.refused(Method::PUT, billing, None, 409, "Namespace already exists")
        .await;
    // Created with upstream's Policies body (other fields ignored).
    let policies = r#"{"bundles": {"numBundles": 4}, "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}"#;
    http.ok(
        Method::PUT,
        "/admin/v2/namespaces/acme/logs",
        Some(policies),
    )
    .await;
    assert_eq!(
        http.get("/admin/v2/namespaces/acme").await,
        (200, json!(["acme/billing", "acme/logs"]))
    );

    // Retention: none set, then set, refused when upstream refuses it.
    let retention = format!("{billing}/retention");
    assert_eq!(http.get(&retention).await, (204, Value::Null));
    assert_eq!(
        http.get("/admin/v2/namespaces/acme/logs/retention").await,
        (
            200,
            json!({"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
        )
    );
    http.ok(
        Method::PUT,
        "/admin/v2/persistent/acme/billing/before/partitions",
        Some("2"),
    )
    .await;
    for bad in [
        r#"{"retentionTimeInMinutes": 60, "retentionSizeInMB": 0}"#,
        r#"{"retentionTimeInMinutes": 0, "retentionSizeInMB": 5}"#,
        r#"{"retentionTimeInMinutes": -2, "retentionSizeInMB": 5}"#,
        r#"{"retentionTimeInMinutes": 5, "retentionSizeInMB": 9223372036854775807}"#,
    ] {
        http.refused(
            Method::POST,
            &retention,
            Some(bad),
            412,
            "Invalid retention policy",
        )
        .await;
    }
    http.refused(Method::POST, &retention, None, 400, "RetentionPolicies")
        .await;
    http.refused(
        Method::POST,
        &retention,
        Some(r#"{"retentionTimeInMinutes": "soon"}"#),
        400,
        "invalid JSON",
    )
    .await;
    http.refused(
        Method::GET,
        "/admin/v2/namespaces/acme/nope/retention",
        None,
        404,
        "Namespace does not exist",
    )
    .await;
    http.refused(
        Method::POST,
        "/admin/v2/namespaces/acme/nope/retention",
        Some("{}"),
        404,
        "Namespace does not exist",
    )
    .await;
    let policy = r#"{"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}"#;
    http.ok(Method::POST, &retention, Some(policy)).await;
    assert_eq!(
        http.get(&retention).await,
        (200, serde_json::from_str(policy).unwrap())
    );

    // Kafka sees it on the namespace's topics: existing, created later
    // (over REST or by Kafka), unless the topic overrides the key.
    let inherited = |v: &str| (v.to_string(), ConfigSource::DynamicDefaultBroker);
    assert_eq!(
        kafka_config(&broker, "acme.billing.before", "retention.ms").await,
        inherited("3600000")
    );
    assert_eq!(
        kafka_config(&broker, "acme.billing.before", "retention.bytes").await,
        inherited("10485760")
    );
    http.ok(Method::PUT, "/admin/v2/persistent/acme/billing/after", None)
        .await;
    assert_eq!(
        kafka_config(&broker, "acme.billing.after", "retention.ms").await,
        inherited("3600000")
    );
    let own = NewTopic::new("acme.billing.own", 1, TopicReplication::Fixed(1))
        .set("retention.ms", "1000");
    assert!(a.create_topics(&[own], &AdminOptions::new()).await.unwrap()[0].is_ok());
    assert_eq!(
        kafka_config(&broker, "acme.billing.own", "retention.ms").await,
        ("1000".to_string(), ConfigSource::DynamicTopic)
    );
    assert_eq!(
        kafka_config(&broker, "acme.billing.own", "retention.bytes").await,
        inherited("10485760")
    );
    let plain = NewTopic::new("plain", 1, TopicReplication::Fixed(1));
    assert!(a
        .create_topics(&[plain], &AdminOptions::new())
        .await
        .unwrap()[0]
        .is_ok());
    assert_eq!(
        kafka_config(&broker, "plain", "retention.ms").await,
        ("604800000".to_string(), ConfigSource::Default),
        "other namespaces are untouched"
    );
    http.ok(Method::PUT, "/admin/v2/persistent/acme/logs/kept", None)
        .await;
    assert_eq!(
        kafka_config(&broker, "acme.logs.kept", "retention.ms").await,
        inherited("-1")
    );

    // SIGKILL: the namespaces and the policy are durable once answered.
    broker.kill();
    broker.restart();
    assert_eq!(
        http.get("/admin/v2/namespaces/acme").await,
        (200, json!(["acme/billing", "acme/logs"]))
    );
    assert_eq!(
        http.get(&retention).await,
        (200, serde_json::from_str(policy).unwrap())
    );
    assert_eq!(
        kafka_config(&broker, "acme.billing.before", "retention.ms").await,
        inherited("3600000")
    );
    assert_eq!(
        http.get("/admin/v2/persistent/acme/billing/partitioned")
            .await,
        (
            200,
            json!([
                "persistent://acme/billing/before",
                "persistent://acme/billing/own"
            ])
        )
    );

    // Removing the policy: back to the broker's keys.
    http.ok(Method::DELETE, &retention, None).await;
    assert_eq!(http.get(&retention).await, (204, Value::Null));
    assert_eq!(
        kafka_config(&broker, "acme.billing.before", "retention.ms").await,
        ("604800000".to_string(), ConfigSource::Default)
    );

    // Deleting: not while it has topics, unless forced; public/default never.
    http.refused(
        Method::DELETE,
        billing,
        None,
        409,
        "Cannot delete non empty namespace",
    )
    .await;
    http.ok(Method::DELETE, &format!("{billing}?force=true"), None)
        .await;
    assert_eq!(
        kafka_partitions(&broker, "acme.billing.before"),
        None,
        "its topics went with it"
    );
    assert_eq!(kafka_partitions(&broker, "acme.billing.own"), None);
    http.refused(
        Method::DELETE,
        billing,
        None,
        404,
        "Namespace does not exist",
    )
    .await;
    http.refused(
        Method::GET,
        "/admin/v2/persistent/acme/billing",
        None,
        404,
        "Namespace does not exist",
    )
    .await;
    http.refused(
        Method::DELETE,
        "/admin/v2/namespaces/public/default?force=true",
        None,
        409,
        "cannot be deleted",
    )
    .await;
    http.refused(
        Method::DELETE,
        "/admin/v2/namespaces/acme/bil.ling",
        None,
        412,
        "Namespace name is not valid",
    )
    .await;
    assert_eq!(
        kafka_partitions(&broker, "plain"),
        Some(1),
        "public/default kept its topic"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn topics_create_list_grow_and_delete() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let http = Http::of(&broker);
    namespace(&http, "acme", "billing").await;
    let base = "/admin/v2/persistent/acme/billing";

    // Create.
    http.ok(Method::PUT, &format!("{base}/orders/partitions"), Some("3"))
        .await;
    http.ok(Method::PUT, &format!("{base}/single"), None).await;
    for path in [
        format!("{base}/orders/partitions"),
        format!("{base}/single/partitions"),
    ] {
        http.refused(
            Method::PUT,
            &path,
            Some("2"),
            409,
            "This topic already exists",
        )
        .await;
    }
    for path in [format!("{base}/orders"), format!("{base}/single")] {
        http.refused(Method::PUT, &path, None, 409, "This topic already exists")
            .await;
    }
    let p = format!("{base}/new/partitions");
    http.refused(
        Method::PUT,
        &p,
        Some("0"),
        406,
        "Number of partitions should be more than 0",
    )
    .await;
    http.refused(
        Method::PUT,
        &p,
        Some("10001"),
        406,
        "less than or equal to 10000",
    )
    .await;
    http.refused(Method::PUT, &p, None, 400, "number of partitions")
        .await;
    http.refused(Method::PUT, &p, Some(r#""3""#), 400, "invalid JSON")
        .await;
    http.refused(
        Method::PUT,
        &format!("{base}/x-partition-1/partitions"),
        Some("2"),
        412,
        "should not contain '-partition-'",
    )
    .await;
    http.refused(
        Method::PUT,
        &format!("{base}/x-partition-1"),
        None,
        412,
        "names a partition",
    )
    .await;
    http.refused(
        Method::PUT,
        &format!("{base}/bad%20name"),
        None,
        412,
        "Topic name is not valid",
    )
    .await;
    http.refused(
        Method::PUT,
        "/admin/v2/persistent/acme/nope/t",
        None,
        404,
        "Namespace does not exist",
    )
    .await;
    http.refused(
        Method::PUT,
        "/admin/v2/persistent/acme/bad.ns/t",
        None,
        412,
        "Namespace name is not valid",
    )
    .await;
    http.refused(
        Method::PUT,
        "/admin/v2/non-persistent/acme/billing/t",
        None,
        406,
        "persistent",
    )
    .await;
    http.refused(
        Method::PUT,
        "/admin/v2/elsewhere/acme/billing/t",
        None,
        404,
        "unknown topic domain",
    )
    .await;
    // A public/default name that is another namespace's Kafka topic.
    http.refused(
        Method::PUT,
        "/admin/v2/persistent/public/default/acme.billing.x",
        None,
        412,
        "another namespace",
    )
    .await;

    // List: every topic with partitions by name; partitioned ones alone.
    assert_eq!(
        http.get(base).await,
        (
            200,
            json!([
                "persistent://acme/billing/orders-partition-0",
                "persistent://acme/billing/orders-partition-1",
                "persistent://acme/billing/orders-partition-2",
                "persistent://acme/billing/single"
            ])
        )
    );
    assert_eq!(
        http.get(&format!("{base}/partitioned")).await,
        (200, json!(["persistent://acme/billing/orders"]))
    );
    assert_eq!(
        http.get("/admin/v2/non-persistent/acme/billing").await,
        (200, json!([]))
    );
    assert_eq!(
        http.get("/admin/v2/persistent/public/default").await,
        (200, json!([]))
    );
    http.refused(
        Method::GET,
        "/admin/v2/persistent/acme/nope",
        None,
        404,
        "Namespace does not exist",
    )
    .await;
    http.refused(
        Method::GET,
        "/admin/v2/persistent/acme/nope/partitioned",
        None,
        404,
        "Namespace does not exist",
    )
    .await;
    // The PIP-344 metadata path beside them keeps its behaviour.
    assert_eq!(
        http.get(&format!("{base}/orders/partitions")).await,
        (200, json!({"partitions": 3}))
    );
    assert_eq!(
        http.get(&format!("{base}/single/partitions")).await,
        (200, json!({"partitions": 0}))
    );

    // Grow; never shrink.
    let orders = format!("{base}/orders/partitions");
    http.ok(Method::POST, &orders, Some("5")).await;
    assert_eq!(http.get(&orders).await.1, json!({"partitions": 5}));
    assert_eq!(kafka_partitions(&broker, "acme.billing.orders"), Some(5));
    for n in ["5", "2"] {
        http.refused(
            Method::POST,
            &orders,
            Some(n),
            409,
            "must be greater than existing",
        )
        .await;
    }
    http.refused(Method::POST, &orders, Some("-1"), 406, "more than 0")
        .await;
    http.refused(
        Method::POST,
        &format!("{base}/single/partitions"),
        Some("4"),
        409,
        "not partitioned",
    )
    .await;
    http.refused(
        Method::POST,
        &format!("{base}/missing/partitions"),
        Some("4"),
        404,
        "not found",
    )
    .await;

    // Delete with the wrong endpoint, missing topics, partitions.
    http.refused(
        Method::DELETE,
        &format!("{base}/orders"),
        None,
        409,
        "delete-partitioned-topic",
    )
    .await;
    http.refused(
        Method::DELETE,
        &format!("{base}/single/partitions"),
        None,
        409,
        "please call delete",
    )
    .await;
    http.refused(
        Method::DELETE,
        &format!("{base}/orders-partition-1"),
        None,
        409,
        "partition",
    )
    .await;
    http.refused(
        Method::DELETE,
        &format!("{base}/missing"),
        None,
        404,
        "not found",
    )
    .await;
    http.refused(
        Method::DELETE,
        &format!("{base}/missing/partitions"),
        None,
        404,
        "not found",
    )
    .await;
    http.refused(
        Method::DELETE,
        &format!("{base}/single?force=sometimes"),
        None,
        400,
        "force",
    )
    .await;

    // Attached producers and consumers keep a topic unless forced.
    let mut pulsar = Pulsar::connect(&broker);
    pulsar.producer("persistent://acme/billing/orders-partition-4", 1);
    http.refused(
        Method::DELETE,
        &orders,
        None,
        412,
        "Topic has active producers/subscriptions",
    )
    .await;
    pulsar.subscribe("persistent://acme/billing/single", 1);
    http.refused(
        Method::DELETE,
        &format!("{base}/single"),
        None,
        412,
        "Topic has active producers/subscriptions",
    )
    .await;
    http.ok(Method::DELETE, &format!("{orders}?force=true"), None)
        .await;
    http.ok(Method::DELETE, &format!("{base}/single?force=true"), None)
        .await;
    assert_eq!(kafka_partitions(&broker, "acme.billing.orders"), None);
    assert_eq!(kafka_partitions(&broker, "acme.billing.single"), None);
    assert_eq!(http.get(base).await, (200, json!([])));

    // An idle topic deletes without force.
    http.ok(Method::PUT, &format!("{base}/idle"), None).await;
    http.ok(Method::DELETE, &format!("{base}/idle"), None).await;
    http.ok(Method::PUT, &format!("{base}/idle/partitions"), Some("2"))
        .await;
    http.ok(Method::DELETE, &format!("{base}/idle/partitions"), None)
        .await;
    assert_eq!(http.get(base).await, (200, json!([])));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rest_topic_is_the_same_topic_for_kafka_and_pulsar() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let http = Http::of(&broker);
    namespace(&http, "acme", "billing").await;
    let pulsar_name = "persistent://acme/billing/orders";
    let path = "/admin/v2/persistent/acme/billing/orders/partitions";
    let mut pulsar = Pulsar::connect(&broker);
    assert_eq!(
        pulsar.partitions(pulsar_name),
        Err(ServerError::TopicNotFound)
    );

    http.ok(Method::PUT, path, Some("4")).await;
    assert_eq!(
        kafka_partitions(&broker, "acme.billing.orders"),
        Some(4),
        "Kafka Metadata"
    );
    assert_eq!(
        pulsar.partitions(pulsar_name),
        Ok(4),
        "Pulsar PartitionedTopicMetadata"
    );
    http.ok(Method::POST, path, Some("6")).await;
    assert_eq!(kafka_partitions(&broker, "acme.billing.orders"), Some(6));
    assert_eq!(pulsar.partitions(pulsar_name), Ok(6));
    // A non-partitioned topic: one Kafka partition, 0 for Pulsar.
    http.ok(
        Method::PUT,
        "/admin/v2/persistent/acme/billing/single",
        None,
    )
    .await;
    assert_eq!(kafka_partitions(&broker, "acme.billing.single"), Some(1));
    assert_eq!(pulsar.partitions("persistent://acme/billing/single"), Ok(0));
    // A namespace that does not exist is a clear error.
    assert_eq!(
        pulsar.partitions("persistent://acme/nope/orders"),
        Err(ServerError::TopicNotFound)
    );

    // Deleting over REST fences the old topic id for Kafka fetches, also
    // once a topic of the same name exists again.
    let mut conn = RawConn::connect(broker.addr).await;
    let old_id = topic_id(&mut conn, "acme.billing.orders").await;
    assert_eq!(fetch_error_by_id(&mut conn, old_id).await, 0);
    http.ok(Method::DELETE, path, None).await;
    assert_eq!(fetch_error_by_id(&mut conn, old_id).await, UNKNOWN_TOPIC_ID);
    assert_eq!(
        pulsar.partitions(pulsar_name),
        Err(ServerError::TopicNotFound)
    );
    http.ok(Method::PUT, path, Some("1")).await;
    let new_id = topic_id(&mut conn, "acme.billing.orders").await;
    assert_ne!(new_id, old_id);
    assert_eq!(fetch_error_by_id(&mut conn, old_id).await, UNKNOWN_TOPIC_ID);
    assert_eq!(fetch_error_by_id(&mut conn, new_id).await, 0);
}

/// The Python client in a namespace made over REST: a partitioned topic
/// made over REST and a topic its producer auto-creates; a namespace that
/// does not exist fails to produce.
const PYTHON_NAMESPACE_CHECK: &str = r#"
import sys
import pulsar

url = sys.argv[1]
client = pulsar.Client(url, operation_timeout_seconds=15,
                       logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
for topic, n in [("persistent://acme/billing/py-orders", 6), ("persistent://acme/billing/py-auto", 3)]:
    producer = client.create_producer(topic)
    sent = ["%s-%d" % (topic, i) for i in range(n)]
    for i, v in enumerate(sent):
        producer.send(v.encode(), partition_key="key-%d" % i)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    got = []
    for _ in range(n):
        m = consumer.receive(10000)
        got.append(m.data().decode())
        consumer.acknowledge(m)
    if sorted(got) != sorted(sent):
        print("FAIL: %s: got %r, sent %r" % (topic, got, sent))
        sys.exit(1)
    producer.close()
    consumer.close()
try:
    client.create_producer("persistent://acme/nope/t")
    print("FAIL: produced to a namespace that does not exist")
    sys.exit(1)
except Exception as e:
    print("missing namespace refused:", type(e).__name__, e)
client.close()
print("OK")
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_python_client_produces_and_consumes_in_a_rest_namespace() {
    let broker = BrokerProcess::start(&[]);
    let http = Http::of(&broker);
    namespace(&http, "acme", "billing").await;
    http.ok(
        Method::PUT,
        "/admin/v2/persistent/acme/billing/py-orders/partitions",
        Some("2"),
    )
    .await;
    let out = Process::new("python3")
        .arg("-c")
        .arg(PYTHON_NAMESPACE_CHECK)
        .arg(broker.pulsar_url())
        .output()
        .expect("python3 is needed for the Pulsar client tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK"),
        "python check failed ({}).\nIf `pulsar` is missing: pip install -r tests/python/requirements.txt\nstdout:\n{stdout}\nstderr:\n{}\nbroker log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        broker.log_text()
    );
    // The auto-created topic is the namespace's, for REST and Kafka alike.
    let (status, topics) = http.get("/admin/v2/persistent/acme/billing").await;
    assert_eq!(status, 200, "{topics}");
    assert!(
        topics.as_array().unwrap().iter().any(|t| t
            .as_str()
            .unwrap()
            .starts_with("persistent://acme/billing/py-auto")),
        "{topics}"
    );
    assert!(kafka_partitions(&broker, "acme.billing.py-auto").is_some());
    assert_eq!(kafka_partitions(&broker, "acme.billing.py-orders"), Some(2));
    assert!(
        kafka_partitions(&broker, "acme.nope.t").is_none(),
        "nothing created for the missing namespace"
    );
}
