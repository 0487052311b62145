//! The native client's admin calls against the real broker.

mod client_support;
mod common;

use std::time::Duration;

use client::{
    Admin, AlterConfigOp, ClientConfig, ConfigResource, Error, NewTopic, Producer, ProducerRecord,
    ResponseError,
};
use common::{assign_config, BrokerProcess};
use kafka_protocol::messages::ApiKey;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

async fn admin(b: &BrokerProcess) -> Admin {
    Admin::connect(ClientConfig::new([b.bootstrap()]).request_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
}

fn config_value(entries: &[client::ConfigEntry], key: &str) -> Option<String> {
    entries
        .iter()
        .find(|e| e.name == key)
        .and_then(|e| e.value.clone())
}

#[tokio::test]
async fn topic_lifecycle() {
    let broker = BrokerProcess::start(&["num.partitions=2"]);
    let admin = admin(&broker).await;

    // validate_only creates nothing.
    let r = admin
        .create_topics(&[NewTopic::new("checked", 3)], true)
        .await
        .unwrap();
    assert!(r[0].1.is_ok(), "{:?}", r[0].1);
    assert!(!admin
        .list_topics(false)
        .await
        .unwrap()
        .contains(&"checked".to_string()));

    let created = admin
        .create_topics(
            &[
                NewTopic::new("orders", 3).config("retention.ms", "3600000"),
                NewTopic::new("defaults", -1),
            ],
            false,
        )
        .await
        .unwrap();
    let orders = created[0].1.as_ref().unwrap();
    assert!(orders.id.is_some());
    assert_eq!(created[1].1.as_ref().unwrap().partitions, 2);
    let again = admin
        .create_topic(NewTopic::new("orders", 3))
        .await
        .unwrap_err();
    assert_eq!(again.kafka_error(), Some(ResponseError::TopicAlreadyExists));

    let topics = admin.list_topics(false).await.unwrap();
    assert!(topics.contains(&"orders".to_string()) && topics.contains(&"defaults".to_string()));
    let d = admin.describe_topics(&["orders", "ghost"]).await.unwrap();
    let o = d[0].1.as_ref().unwrap();
    assert_eq!(o.partitions.len(), 3);
    assert_eq!(o.id, orders.id);
    assert!(o
        .partitions
        .iter()
        .all(|p| p.leader == Some(client::NodeId(1))));
    assert!(matches!(d[1].1, Err(Error::NotFound(_))));

    // Configs: describe, SET, DELETE.
    let topic = ConfigResource::Topic("orders".into());
    let c = admin
        .describe_configs(std::slice::from_ref(&topic))
        .await
        .unwrap();
    assert_eq!(
        config_value(c[0].1.as_ref().unwrap(), "retention.ms").as_deref(),
        Some("3600000")
    );
    let r = admin
        .incremental_alter_configs(
            &[(
                topic.clone(),
                vec![
                    AlterConfigOp::set("retention.ms", "7200000"),
                    AlterConfigOp::set("segment.ms", "60000"),
                ],
            )],
            false,
        )
        .await
        .unwrap();
    assert!(r[0].1.is_ok(), "{:?}", r[0].1);
    let c = admin
        .describe_configs(std::slice::from_ref(&topic))
        .await
        .unwrap();
    let entries = c[0].1.as_ref().unwrap();
    assert_eq!(
        config_value(entries, "retention.ms").as_deref(),
        Some("7200000")
    );
    assert_eq!(
        config_value(entries, "segment.ms").as_deref(),
        Some("60000")
    );
    admin
        .incremental_alter_configs(
            &[(topic.clone(), vec![AlterConfigOp::delete("segment.ms")])],
            false,
        )
        .await
        .unwrap()[0]
        .1
        .as_ref()
        .unwrap();
    let c = admin
        .describe_configs(std::slice::from_ref(&topic))
        .await
        .unwrap();
    let seg = c[0]
        .1
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.name == "segment.ms")
        .cloned();
    assert!(seg.as_ref().is_none_or(|e| e.is_default()), "{seg:?}");
    let b = admin
        .describe_configs(&[ConfigResource::Broker(1)])
        .await
        .unwrap();
    assert_eq!(
        config_value(b[0].1.as_ref().unwrap(), "num.partitions").as_deref(),
        Some("2")
    );

    // More partitions.
    let r = admin
        .create_partitions(&[("orders", 5)], false)
        .await
        .unwrap();
    assert!(r[0].1.is_ok(), "{:?}", r[0].1);
    assert_eq!(
        admin
            .get_partitions_for_topic("orders", false)
            .await
            .unwrap(),
        vec![0, 1, 2, 3, 4]
    );

    // Delete records.
    let producer = Producer::builder()
        .client(admin.client().clone())
        .build()
        .await
        .unwrap();
    for i in 0..10 {
        drop(
            producer.send(
                ProducerRecord::new("orders")
                    .partition(0)
                    .value(format!("{i}")),
            ),
        );
    }
    producer.flush().await.unwrap();
    let r = admin.delete_records(&[("orders", 0, 4)]).await.unwrap();
    assert_eq!(*r[0].1.as_ref().unwrap(), 4);
    let left = client_support::fetch_all(admin.client(), "orders", 0).await;
    assert_eq!(left.first().map(|r| r.offset), Some(4));

    // Delete topics.
    let r = admin.delete_topics(&["orders", "nope"]).await.unwrap();
    assert!(r[0].1.is_ok());
    assert_eq!(
        r[1].1.as_ref().unwrap_err().kafka_error(),
        Some(ResponseError::UnknownTopicOrPartition)
    );
    assert!(matches!(
        admin.get_partitions_for_topic("orders", false).await,
        Err(Error::NotFound(_))
    ));
}

#[tokio::test]
async fn cluster_and_groups() {
    let broker = BrokerProcess::start(&[]);
    let admin = admin(&broker).await;
    let c = admin.describe_cluster().await.unwrap();
    assert_eq!(c.brokers.len(), 1);
    assert_eq!(c.brokers[0].id, client::NodeId(1));
    assert_eq!(c.brokers[0].port as u16, broker.addr.port());
    assert!(c.cluster_id.is_some());

    let conn = admin.client().any_connection().await.unwrap();
    if conn.versions().max_version(ApiKey::OffsetCommit).is_none()
        || conn.versions().max_version(ApiKey::ListGroups).is_none()
    {
        // A broker without group APIs: the client says so instead of guessing.
        assert!(matches!(
            admin.list_groups().await,
            Err(Error::NotSupported(_))
        ));
        return;
    }
    admin
        .create_topic(NewTopic::new("g-topic", 2))
        .await
        .unwrap();
    // librdkafka commits offsets for a group without joining it.
    let consumer: BaseConsumer = assign_config(&broker.bootstrap())
        .set("group.id", "admin-group")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("g-topic", 0, Offset::Offset(7))
        .unwrap();
    tpl.add_partition_offset("g-topic", 1, Offset::Offset(3))
        .unwrap();
    consumer.commit(&tpl, CommitMode::Sync).unwrap();

    let groups = admin.list_groups().await.unwrap();
    assert!(
        groups.iter().any(|g| g.group_id == "admin-group"),
        "{groups:?}"
    );
    let d = admin
        .describe_groups(&["admin-group", "never-seen"])
        .await
        .unwrap();
    assert_eq!(d[0].0, "admin-group");
    match &d[0].1 {
        Ok(desc) => assert!(desc.members.is_empty(), "{desc:?}"),
        // A group that only holds commits may be reported as not found.
        Err(e) => assert_eq!(e.kafka_error(), Some(ResponseError::GroupIdNotFound), "{e}"),
    }
    match &d[1].1 {
        Ok(desc) => assert_eq!(desc.state, "Dead", "{desc:?}"),
        Err(e) => assert_eq!(e.kafka_error(), Some(ResponseError::GroupIdNotFound), "{e}"),
    }
    let offsets = admin.list_group_offsets("admin-group").await.unwrap();
    let got: Vec<(String, i32, i64)> = offsets
        .into_iter()
        .map(|o| (o.topic, o.partition, o.offset))
        .collect();
    assert_eq!(
        got,
        vec![("g-topic".into(), 0, 7), ("g-topic".into(), 1, 3)]
    );
}
