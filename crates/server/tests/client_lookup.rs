//! `get_partitions_for_topic` under every broker auto-creation policy, and
//! batched `find_coordinators`, with the native client against the real
//! broker.

mod client_support;
mod common;

use client::{Admin, ClientConfig, Error, NewTopic};
use client_support::Proxy;
use common::BrokerProcess;
use kafka_protocol::messages::ApiKey;

async fn admin(addr: &str) -> Admin {
    Admin::connect(ClientConfig::new([addr])).await.unwrap()
}

/// Runs the PIP-344 matrix on one broker; `created` is what a permitted
/// auto-creation gives (`None`: the broker refuses).
async fn matrix(settings: &[&str], created: Option<Vec<i32>>) {
    let broker = BrokerProcess::start(settings);
    let admin = admin(&broker.bootstrap()).await;
    admin
        .create_topic(NewTopic::new("existing", 3))
        .await
        .unwrap();

    // An existing topic: its partitions, whatever the flag.
    for flag in [false, true] {
        assert_eq!(
            admin
                .get_partitions_for_topic("existing", flag)
                .await
                .unwrap(),
            vec![0, 1, 2],
            "{settings:?} flag {flag}"
        );
    }
    // Missing + false: NotFound and nothing created.
    let err = admin
        .get_partitions_for_topic("missing-a", false)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{settings:?}: {err}");
    assert!(!admin
        .list_topics(false)
        .await
        .unwrap()
        .contains(&"missing-a".to_string()));

    // Missing + true: the broker's policy decides.
    let r = admin.get_partitions_for_topic("missing-b", true).await;
    match &created {
        Some(parts) => {
            assert_eq!(r.as_ref().unwrap(), parts, "{settings:?}");
            assert!(admin
                .list_topics(false)
                .await
                .unwrap()
                .contains(&"missing-b".to_string()));
            // Now it exists, so `false` finds it too.
            assert_eq!(
                &admin
                    .get_partitions_for_topic("missing-b", false)
                    .await
                    .unwrap(),
                parts
            );
        }
        None => {
            assert!(matches!(r, Err(Error::NotFound(_))), "{settings:?}: {r:?}");
            assert!(!admin
                .list_topics(false)
                .await
                .unwrap()
                .contains(&"missing-b".to_string()));
        }
    }
}

#[tokio::test]
async fn partitions_lookup_auto_create_partitioned() {
    matrix(
        &[
            "auto.create.topics.enable=true",
            "auto.create.topics.type=partitioned",
            "num.partitions=4",
        ],
        Some(vec![0, 1, 2, 3]),
    )
    .await;
}

#[tokio::test]
async fn partitions_lookup_auto_create_non_partitioned() {
    matrix(
        &[
            "auto.create.topics.enable=true",
            "auto.create.topics.type=non-partitioned",
            "num.partitions=4",
        ],
        Some(vec![0]),
    )
    .await;
}

#[tokio::test]
async fn partitions_lookup_auto_create_disabled() {
    for kind in ["partitioned", "non-partitioned"] {
        matrix(
            &[
                "auto.create.topics.enable=false",
                &format!("auto.create.topics.type={kind}"),
                "num.partitions=4",
            ],
            None,
        )
        .await;
    }
}

#[tokio::test]
async fn find_coordinators_sends_one_request_for_a_hundred_groups() {
    let mut proxy = Proxy::bind().await;
    let broker = BrokerProcess::start(&[&format!("advertised.listeners={}", proxy.addr)]);
    proxy.start(broker.addr);
    let admin = admin(&proxy.addr.to_string()).await;
    let conn = admin.client().any_connection().await.unwrap();
    assert!(
        conn.versions()
            .max_version(ApiKey::FindCoordinator)
            .unwrap()
            >= 4
    );

    let groups: Vec<String> = (0..100).map(|i| format!("group-{i}")).collect();
    let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    let before = proxy.count(ApiKey::FindCoordinator);
    let res = admin.find_coordinators(&refs).await.unwrap();
    assert_eq!(
        proxy.count(ApiKey::FindCoordinator) - before,
        1,
        "one batched request"
    );
    assert_eq!(res.len(), 100);
    for ((g, r), want) in res.iter().zip(&groups) {
        assert_eq!(g, want);
        let node = r.as_ref().unwrap_or_else(|e| panic!("{g}: {e}"));
        assert_eq!(node.id, client::NodeId(1));
        assert_eq!(node.port as u16, proxy.addr.port());
    }
    let one = admin.find_coordinator("solo").await.unwrap();
    assert_eq!(one.id, client::NodeId(1));
}
