//! Topic administration: create, delete, list, describe, add partitions,
//! delete records.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{Admin, PerItem};
use crate::error::{Error, Result};
use crate::metadata::{NodeId, TopicId, TopicMetadata};

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// A topic to create.
///
/// ```
/// let t = magnetar_client::NewTopic::new("orders", 6)
///     .replication_factor(1)
///     .config("cleanup.policy", "delete");
/// assert_eq!(t.name, "orders");
/// // -1 partitions: the broker's num.partitions.
/// let d = magnetar_client::NewTopic::new("logs", -1);
/// assert_eq!(d.partitions, -1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partition count; -1 for the broker's default.
    pub partitions: i32,
    /// Replication factor; -1 (the default) for the broker's default.
    pub replication_factor: i16,
    /// Topic-level config overrides.
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions (-1: broker default).
    pub fn new(name: impl Into<String>, partitions: i32) -> NewTopic {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }

    /// Sets the replication factor.
    pub fn replication_factor(mut self, rf: i16) -> Self {
        self.replication_factor = rf;
        self
    }

    /// Adds a config override.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// What CreateTopics reported for a created (or validated) topic.
///
/// ```no_run
/// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
/// let t: magnetar_client::CreatedTopic = admin.create_topic(magnetar_client::NewTopic::new("t", 3)).await?;
/// println!("id {:?}, {} partitions", t.id, t.partitions);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTopic {
    /// The topic id (CreateTopics v7+).
    pub id: Option<TopicId>,
    /// Partitions (v5+; -1 when the broker did not say).
    pub partitions: i32,
    /// Replication factor (v5+; -1 when the broker did not say).
    pub replication_factor: i16,
}

impl Admin {
    /// Creates topics (or only validates the request with
    /// `validate_only`). Partition and replication `-1` need CreateTopics
    /// v4+.
    pub async fn create_topics(
        &self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Result<PerItem<String, CreatedTopic>> {
        let conn = self.controller_connection().await?;
        let v = conn.versions().pick::<CreateTopicsRequest>()?;
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_validate_only(validate_only)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(topic_name(&t.name))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(StrBytes::from_string(k.clone()))
                                            .with_value(Some(StrBytes::from_string(v.clone())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = conn.send(v, &req)?.await?;
        let mut by_name: HashMap<&str, _> =
            resp.topics.iter().map(|t| (t.name.0.as_str(), t)).collect();
        Ok(topics
            .iter()
            .map(|t| {
                let r = match by_name.remove(t.name.as_str()) {
                    None => Err(Error::Protocol(format!("no result for topic {}", t.name))),
                    Some(r) => Error::check(r.error_code, r.error_message.as_deref()).map(|_| {
                        CreatedTopic {
                            id: (!r.topic_id.is_nil()).then_some(TopicId(r.topic_id)),
                            partitions: r.num_partitions,
                            replication_factor: r.replication_factor,
                        }
                    }),
                };
                (t.name.clone(), r)
            })
            .collect())
    }

    /// Creates one topic.
    pub async fn create_topic(&self, topic: NewTopic) -> Result<CreatedTopic> {
        self.create_topics(std::slice::from_ref(&topic), false)
            .await?
            .pop()
            .map(|(_, r)| r)
            .unwrap_or_else(|| Err(Error::Protocol("empty CreateTopics answer".into())))
    }

    /// Deletes topics by name.
    pub async fn delete_topics(&self, names: &[&str]) -> Result<PerItem<String, ()>> {
        let conn = self.controller_connection().await?;
        let v = conn.versions().pick::<DeleteTopicsRequest>()?;
        let mut req = DeleteTopicsRequest::default().with_timeout_ms(self.timeout_ms());
        if v >= 6 {
            req = req.with_topics(
                names
                    .iter()
                    .map(|n| DeleteTopicState::default().with_name(Some(topic_name(n))))
                    .collect(),
            );
        } else {
            req = req.with_topic_names(names.iter().map(|n| topic_name(n)).collect());
        }
        let resp = conn.send(v, &req)?.await?;
        for n in names {
            self.client.invalidate_topic(n);
        }
        Ok(names
            .iter()
            .map(|n| {
                let r = resp
                    .responses
                    .iter()
                    .find(|r| r.name.as_ref().is_some_and(|x| x.0.as_str() == *n))
                    .ok_or_else(|| Error::Protocol(format!("no result for topic {n}")))
                    .and_then(|r| Error::check(r.error_code, r.error_message.as_deref()));
                (n.to_string(), r)
            })
            .collect())
    }

    /// Names of all topics, sorted; internal topics only if asked.
    pub async fn list_topics(&self, include_internal: bool) -> Result<Vec<String>> {
        let md = self.client.refresh_all_metadata().await?;
        let mut names: Vec<String> = md
            .topics
            .values()
            .filter(|t| include_internal || !t.is_internal)
            .map(|t| t.name.clone())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Partitions, leaders and ids of the named topics; never creates them
    /// (on brokers whose Metadata is older than v4, all topics are listed
    /// and filtered, since naming one could create it). A missing topic is
    /// [`Error::NotFound`].
    pub async fn describe_topics(
        &self,
        names: &[&str],
    ) -> Result<PerItem<String, Arc<TopicMetadata>>> {
        let conn = self.client.any_connection().await?;
        let v = conn.versions().pick::<MetadataRequest>()?;
        let results = if v >= 4 {
            self.client.metadata_on(&conn, Some(names), false).await?
        } else {
            self.client.metadata_on(&conn, None, false).await?
        };
        Ok(names
            .iter()
            .map(|n| {
                let r = results
                    .iter()
                    .find(|(t, _)| t == n)
                    .map(|(_, r)| r.clone())
                    .unwrap_or_else(|| Err(Error::NotFound(format!("topic {n}"))));
                let r = r.map_err(|e| match e.kafka_error() {
                    Some(ResponseError::UnknownTopicOrPartition) => {
                        Error::NotFound(format!("topic {n}"))
                    }
                    _ => e,
                });
                (n.to_string(), r)
            })
            .collect())
    }

    /// Raises the partition count of topics to the given totals.
    pub async fn create_partitions(
        &self,
        topics: &[(&str, i32)],
        validate_only: bool,
    ) -> Result<PerItem<String, ()>> {
        let conn = self.controller_connection().await?;
        let v = conn.versions().pick::<CreatePartitionsRequest>()?;
        let req = CreatePartitionsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_validate_only(validate_only)
            .with_topics(
                topics
                    .iter()
                    .map(|(n, count)| {
                        CreatePartitionsTopic::default()
                            .with_name(topic_name(n))
                            .with_count(*count)
                            .with_assignments(None)
                    })
                    .collect(),
            );
        let resp = conn.send(v, &req)?.await?;
        for (n, _) in topics {
            self.client.invalidate_topic(n);
        }
        Ok(topics
            .iter()
            .map(|(n, _)| {
                let r = resp
                    .results
                    .iter()
                    .find(|r| r.name.0.as_str() == *n)
                    .ok_or_else(|| Error::Protocol(format!("no result for topic {n}")))
                    .and_then(|r| Error::check(r.error_code, r.error_message.as_deref()));
                (n.to_string(), r)
            })
            .collect())
    }

    /// Deletes records before `offset` (-1: the high watermark) in each
    /// `(topic, partition, offset)`; each result is the new low watermark.
    /// Requests go to each partition's leader.
    pub async fn delete_records(
        &self,
        targets: &[(&str, i32, i64)],
    ) -> Result<PerItem<(String, i32), i64>> {
        let names: Vec<&str> = {
            let mut n: Vec<&str> = targets.iter().map(|t| t.0).collect();
            n.sort();
            n.dedup();
            n
        };
        let md = self.client.refresh_metadata(&names).await?;
        let mut out: Vec<((String, i32), Result<i64>)> = targets
            .iter()
            .map(|(t, p, _)| {
                (
                    (t.to_string(), *p),
                    Err(Error::NotFound(format!("{t}/{p}"))),
                )
            })
            .collect();
        let mut by_leader: HashMap<NodeId, Vec<usize>> = HashMap::new();
        for (i, (t, p, _)) in targets.iter().enumerate() {
            match md.leader(t, *p) {
                Some(l) => by_leader.entry(l).or_default().push(i),
                None => {
                    if !md.topics.contains_key(*t) {
                        out[i].1 = Err(Error::NotFound(format!("topic {t}")));
                    }
                }
            }
        }
        for (leader, idx) in by_leader {
            let conn = self.client.connection(leader).await?;
            let v = conn.versions().pick::<DeleteRecordsRequest>()?;
            let mut topics: Vec<DeleteRecordsTopic> = Vec::new();
            for &i in &idx {
                let (t, p, off) = targets[i];
                let part = DeleteRecordsPartition::default()
                    .with_partition_index(p)
                    .with_offset(off);
                match topics.iter_mut().find(|x| x.name.0.as_str() == t) {
                    Some(x) => x.partitions.push(part),
                    None => topics.push(
                        DeleteRecordsTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(vec![part]),
                    ),
                }
            }
            let req = DeleteRecordsRequest::default()
                .with_timeout_ms(self.timeout_ms())
                .with_topics(topics);
            let resp = conn.send(v, &req)?.await?;
            for &i in &idx {
                let (t, p, _) = targets[i];
                out[i].1 = resp
                    .topics
                    .iter()
                    .filter(|x| x.name.0.as_str() == t)
                    .flat_map(|x| x.partitions.iter())
                    .find(|x| x.partition_index == p)
                    .ok_or_else(|| Error::Protocol(format!("no result for {t}/{p}")))
                    .and_then(|x| Error::check(x.error_code, None).map(|_| x.low_watermark));
            }
        }
        Ok(out)
    }
}
