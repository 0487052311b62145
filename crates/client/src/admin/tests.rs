//! Partition lookups and coordinator lookups against the fake broker.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::Admin;
use crate::client::ClientConfig;
use crate::error::Error;
use crate::testing::{FakeBroker, FakeSpec};

async fn admin(fake: &FakeBroker) -> Admin {
    Admin::connect(ClientConfig::new([fake.addr.as_str()]).request_timeout(Duration::from_secs(5)))
        .await
        .unwrap()
}

#[tokio::test]
async fn partitions_lookup_on_a_modern_broker() {
    let fake = FakeBroker::start(FakeSpec::new(3, 12, 6).topic("three", 3)).await;
    let admin = admin(&fake).await;
    assert_eq!(
        admin
            .get_partitions_for_topic("three", false)
            .await
            .unwrap(),
        vec![0, 1, 2]
    );
    assert_eq!(
        admin.get_partitions_for_topic("three", true).await.unwrap(),
        vec![0, 1, 2]
    );
    let err = admin
        .get_partitions_for_topic("missing", false)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    // Still missing: the lookup created nothing.
    assert!(matches!(
        admin.get_partitions_for_topic("missing", false).await,
        Err(Error::NotFound(_))
    ));
    // Asking to create lets the (permissive) fake create it.
    assert_eq!(
        admin
            .get_partitions_for_topic("missing", true)
            .await
            .unwrap(),
        vec![0]
    );
    assert!(fake
        .versions_used(ApiKey::Metadata)
        .iter()
        .all(|&v| v == 12));
}

#[tokio::test]
async fn partitions_lookup_refuses_to_risk_creation_on_old_metadata() {
    let fake = FakeBroker::start(FakeSpec::new(2, 3, 1).topic("old", 2)).await;
    let admin = admin(&fake).await;
    let before = fake.count(ApiKey::Metadata);
    let err = admin
        .get_partitions_for_topic("missing", false)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err}");
    let err = admin
        .get_partitions_for_topic("old", false)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err}");
    // Nothing was even asked, so nothing could have been created.
    assert_eq!(fake.count(ApiKey::Metadata), before);
    // With `true`, v3 (which always allows creation) is fine.
    assert_eq!(
        admin.get_partitions_for_topic("old", true).await.unwrap(),
        vec![0, 1]
    );
    assert_eq!(
        admin.get_partitions_for_topic("fresh", true).await.unwrap(),
        vec![0]
    );
    // describe_topics on such a broker lists all topics instead of naming one.
    let d = admin.describe_topics(&["nope"]).await.unwrap();
    assert!(matches!(d[0].1, Err(Error::NotFound(_))));
    assert!(admin.get_partitions_for_topic("nope", true).await.is_ok());
}

#[tokio::test]
async fn find_coordinators_batches_on_v4() {
    let fake = FakeBroker::start(FakeSpec::new(3, 12, 6)).await;
    let admin = admin(&fake).await;
    let groups: Vec<String> = (0..100).map(|i| format!("group-{i}")).collect();
    let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    let res = admin.find_coordinators(&refs).await.unwrap();
    assert_eq!(res.len(), 100);
    for ((g, r), want) in res.iter().zip(&groups) {
        assert_eq!(g, want);
        assert_eq!(r.as_ref().unwrap().id.0, 1);
    }
    assert_eq!(fake.versions_used(ApiKey::FindCoordinator), vec![6]);
}

#[tokio::test]
async fn find_coordinators_one_request_per_group_before_v4() {
    let fake = FakeBroker::start(FakeSpec::new(3, 12, 3)).await;
    let admin = admin(&fake).await;
    let groups: Vec<String> = (0..10).map(|i| format!("g{i}")).collect();
    let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    let res = admin.find_coordinators(&refs).await.unwrap();
    assert_eq!(res.len(), 10);
    assert!(res.iter().all(|(_, r)| r.as_ref().unwrap().port > 0));
    assert_eq!(fake.versions_used(ApiKey::FindCoordinator), vec![3; 10]);
    assert!(admin.find_coordinators(&[]).await.unwrap().is_empty());
}
