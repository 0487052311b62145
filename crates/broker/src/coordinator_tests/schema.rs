//! Schemas over a real broker's group log.

use bytes::Bytes;

use crate::schema::*;

fn open(dir: &std::path::Path) -> crate::testing::TestNode {
    crate::testing::broker_with_topics(dir, &["t", "u"])
}

fn schema(data: &str) -> StoredSchema {
    StoredSchema {
        name: "orders".into(),
        schema_type: 2,
        data: Bytes::copy_from_slice(data.as_bytes()),
        properties: vec![("k".into(), "v".into()), ("a".into(), "".into())],
    }
}

#[test]
fn versions_survive_a_restart_and_die_with_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let s = b.schemas();
    assert_eq!(s.get_or_create("t", &schema("v0")).unwrap(), 0);
    assert_eq!(s.get_or_create("t", &schema("v1")).unwrap(), 1);
    let mut renamed = schema("v0");
    renamed.name = "other".into();
    assert_eq!(s.get_or_create("t", &renamed).unwrap(), 0, "same schema");
    assert_eq!(s.get_or_create("u", &schema("v1")).unwrap(), 0);
    drop(b);

    // No shutdown: schemas are in the log when their version is given.
    let b = open(dir.path());
    let s = b.schemas();
    assert_eq!(s.get("t", None), Some((schema("v1"), 1)));
    assert_eq!(s.get("t", Some(0)), Some((schema("v0"), 0)));
    assert_eq!(s.get("t", Some(2)), None);
    assert_eq!(s.get_or_create("t", &schema("v2")).unwrap(), 2);
    b.groups().front_end().forget_topic("t").unwrap();
    assert_eq!(s.get("t", None), None);
    b.shutdown().unwrap();
    drop(b);

    let b = open(dir.path());
    let s = b.schemas();
    assert_eq!(s.get("t", None), None, "tombstoned");
    assert_eq!(s.get("u", None), Some((schema("v1"), 0)));
    assert_eq!(
        s.get_or_create("t", &schema("v1")).unwrap(),
        0,
        "starts over"
    );
    b.shutdown().unwrap();
}
