//! Creates a topic, looks it up, changes a config, finds group
//! coordinators and lists what the cluster holds.
//!
//! ```sh
//! cargo run -p magnetar-client --example admin -- 127.0.0.1:9092
//! ```

use magnetar_client::{Admin, AlterConfigOp, ClientConfig, ConfigResource, Error, NewTopic};

#[tokio::main]
async fn main() -> magnetar_client::Result<()> {
    let bootstrap = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let admin = Admin::connect(ClientConfig::from_bootstrap_list(&bootstrap)).await?;

    let cluster = admin.describe_cluster().await?;
    println!(
        "cluster {:?}, controller {:?}",
        cluster.cluster_id, cluster.controller
    );
    for b in &cluster.brokers {
        println!("  broker {} at {}", b.id, b.addr());
    }

    match admin
        .create_topic(NewTopic::new("admin-example", 3).config("retention.ms", "3600000"))
        .await
    {
        Ok(t) => println!("created admin-example, id {:?}", t.id),
        Err(e) if e.kafka_error() == Some(magnetar_client::ResponseError::TopicAlreadyExists) => {
            println!("admin-example exists")
        }
        Err(e) => return Err(e),
    }

    // PIP-344 lookups: `false` never creates.
    println!(
        "partitions: {:?}",
        admin
            .get_partitions_for_topic("admin-example", false)
            .await?
    );
    match admin.get_partitions_for_topic("no-such-topic", false).await {
        Err(Error::NotFound(what)) => println!("not found: {what}"),
        other => println!("lookup of a missing topic: {other:?}"),
    }

    let topic = ConfigResource::Topic("admin-example".into());
    admin
        .incremental_alter_configs(
            &[(
                topic.clone(),
                vec![AlterConfigOp::set("retention.ms", "7200000")],
            )],
            false,
        )
        .await?;
    for (_, entries) in admin.describe_configs(&[topic]).await? {
        for e in entries?.iter().filter(|e| !e.is_default()) {
            println!("  {} = {:?}", e.name, e.value);
        }
    }

    for (group, node) in admin
        .find_coordinators(&["orders-app", "billing-app"])
        .await?
    {
        match node {
            Ok(n) => println!("coordinator of {group}: {} at {}", n.id, n.addr()),
            Err(e) => println!("coordinator of {group}: {e}"),
        }
    }

    println!("topics: {:?}", admin.list_topics(false).await?);
    Ok(())
}
