//! Topic ids: random per topic, persisted, new on delete+recreate, and a
//! stale id is fenced (UNKNOWN_TOPIC_ID) instead of reading the new topic.
//! Topics are created, deleted and written with librdkafka; ids are read
//! and used with raw v10+/v13 requests, which librdkafka does not expose.

mod common;

use std::time::Duration;

use common::{client_config, fetch_by_id, BrokerProcess, RawConn};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, DeleteTopicsRequest, MetadataRequest, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};
use uuid::Uuid;

const UNKNOWN_TOPIC_ID: i16 = 100;

async fn topic_id(conn: &mut RawConn, name: &str) -> Uuid {
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))]));
    let ResponseKind::Metadata(resp) = conn.call(ApiKey::Metadata, 12, req).await else {
        panic!()
    };
    assert_eq!(resp.topics[0].error_code, 0);
    let id = resp.topics[0].topic_id;
    assert!(!id.is_nil(), "every topic has an id");
    id
}

async fn produce(bootstrap: &str, topic: &str, values: &[&str]) {
    let p: FutureProducer = client_config(bootstrap).create().unwrap();
    for v in values {
        p.send(
            FutureRecord::to(topic).key("k").payload(*v),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn recreated_topic_gets_a_new_id_and_the_old_id_is_fenced() {
    let mut broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let bootstrap = broker.bootstrap();
    let admin: AdminClient<DefaultClientContext> = client_config(&bootstrap).create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let new = [NewTopic::new("ids", 1, TopicReplication::Fixed(1))];
    assert!(admin.create_topics(&new, &opts).await.unwrap()[0].is_ok());
    produce(&bootstrap, "ids", &["old-1", "old-2"]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    let old_id = topic_id(&mut conn, "ids").await;
    assert_eq!(
        fetch_by_id(&mut conn, old_id).await,
        (0, vec!["old-1".into(), "old-2".into()])
    );

    assert!(admin.delete_topics(&["ids"], &opts).await.unwrap()[0].is_ok());
    assert!(admin.create_topics(&new, &opts).await.unwrap()[0].is_ok());
    produce(&bootstrap, "ids", &["new-1"]).await;
    let new_id = topic_id(&mut conn, "ids").await;
    assert_ne!(old_id, new_id, "a recreated topic never reuses an id");

    // The stale id is fenced: an error and none of the new topic's data.
    assert_eq!(
        fetch_by_id(&mut conn, old_id).await,
        (UNKNOWN_TOPIC_ID, vec![])
    );
    assert_eq!(
        fetch_by_id(&mut conn, new_id).await,
        (0, vec!["new-1".into()])
    );

    // Metadata by id.
    let by_id = |id| {
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_topic_id(id)
            .with_name(None)]))
    };
    let ResponseKind::Metadata(resp) = conn.call(ApiKey::Metadata, 12, by_id(old_id)).await else {
        panic!()
    };
    assert_eq!(resp.topics[0].error_code, UNKNOWN_TOPIC_ID);
    let ResponseKind::Metadata(resp) = conn.call(ApiKey::Metadata, 12, by_id(new_id)).await else {
        panic!()
    };
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].name.as_ref().unwrap().as_str(), "ids");

    // Ids survive a restart.
    assert_eq!(broker.terminate(), Some(0));
    broker.restart();
    let mut conn = RawConn::connect(broker.addr).await;
    assert_eq!(topic_id(&mut conn, "ids").await, new_id);
    assert_eq!(
        fetch_by_id(&mut conn, new_id).await,
        (0, vec!["new-1".into()])
    );

    // DeleteTopics v6 by id: the stale id is unknown, the live one deletes.
    let del = |id| {
        DeleteTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![DeleteTopicState::default()
                .with_name(None)
                .with_topic_id(id)])
    };
    let ResponseKind::DeleteTopics(resp) = conn.call(ApiKey::DeleteTopics, 6, del(old_id)).await
    else {
        panic!()
    };
    assert_eq!(resp.responses[0].error_code, UNKNOWN_TOPIC_ID);
    let ResponseKind::DeleteTopics(resp) = conn.call(ApiKey::DeleteTopics, 6, del(new_id)).await
    else {
        panic!()
    };
    assert_eq!(resp.responses[0].error_code, 0);
    assert_eq!(resp.responses[0].name.as_ref().unwrap().as_str(), "ids");
    assert_eq!(fetch_by_id(&mut conn, new_id).await.0, UNKNOWN_TOPIC_ID);
}

/// Copies directory `from` to `to` (files only, one level: a partition
/// directory).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// KIP-516 Scenario 2 on one broker's disk: the broker holds `a-0` of topic
/// id0 while `a` is deleted and recreated as id1 elsewhere; when it starts
/// with a metadata state naming only id1, the id0 directory is staged under
/// `deleting/{id0}_0` (logged), never served (id0 is fenced, no record of
/// it is read for `a`), the id1 partition starts empty and writable, and
/// the staged directory is removed once `log.dir.delete.delay.ms` passed.
#[tokio::test(flavor = "multi_thread")]
async fn a_stale_partition_of_a_recreated_topic_is_staged_then_removed() {
    let mut broker = BrokerProcess::start(&[
        "auto.create.topics.enable=false",
        "log.dir.delete.delay.ms=1500",
    ]);
    let bootstrap = broker.bootstrap();
    let admin: AdminClient<DefaultClientContext> = client_config(&bootstrap).create().unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let new = [NewTopic::new("a", 1, TopicReplication::Fixed(1))];
    assert!(admin.create_topics(&new, &opts).await.unwrap()[0].is_ok());
    produce(&bootstrap, "a", &["id0-1", "id0-2"]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    let id0 = topic_id(&mut conn, "a").await;
    drop(conn);
    assert_eq!(broker.terminate(), Some(0));
    let saved = tempfile::tempdir().unwrap();
    copy_dir(&broker.dir().join("a-0"), saved.path());

    // Deleted and recreated (id1) while "the broker holding id0" is away:
    // afterwards its disk has the id0 directory where id1's would be.
    broker.restart();
    let admin: AdminClient<DefaultClientContext> = client_config(&bootstrap).create().unwrap();
    assert!(admin.delete_topics(&["a"], &opts).await.unwrap()[0].is_ok());
    assert!(admin.create_topics(&new, &opts).await.unwrap()[0].is_ok());
    let mut conn = RawConn::connect(broker.addr).await;
    let id1 = topic_id(&mut conn, "a").await;
    assert_ne!(id0, id1);
    drop(conn);
    assert_eq!(broker.terminate(), Some(0));
    std::fs::remove_dir_all(broker.dir().join("a-0")).unwrap();
    copy_dir(saved.path(), &broker.dir().join("a-0"));

    broker.restart();
    broker.wait_for_log("staging a stale partition directory");
    let staged = broker.dir().join("deleting").join(format!("{id0}_0"));
    let staging = broker
        .log_text()
        .lines()
        .find(|l| l.contains("staging a stale partition directory"))
        .unwrap()
        .to_string();
    assert!(
        staging.contains(&staged.display().to_string()) && staging.contains("OtherTopicId"),
        "{staging}"
    );
    let mut conn = RawConn::connect(broker.addr).await;
    assert_eq!(topic_id(&mut conn, "a").await, id1);
    assert_eq!(
        fetch_by_id(&mut conn, id0).await,
        (UNKNOWN_TOPIC_ID, vec![])
    );
    assert_eq!(
        fetch_by_id(&mut conn, id1).await,
        (0, vec![]),
        "id1 starts empty"
    );
    produce(&bootstrap, "a", &["id1-1"]).await;
    assert_eq!(fetch_by_id(&mut conn, id1).await, (0, vec!["id1-1".into()]));
    // Removed once the delay has passed (checked by the maintenance loop).
    broker.wait_for_log_line(
        "the staged partition removed",
        Duration::from_secs(30),
        |l| l.contains("removed a staged partition"),
    );
    assert!(!staged.exists(), "{} still there", staged.display());
}
