//! `/admin/v2/{domain}/{tenant}/{namespace}[/...]`: list a namespace's
//! topics, create partitioned and non-partitioned topics, grow partitions,
//! delete topics. These are the broker's topics, the ones Kafka clients
//! see (`persistent://t/ns/x` is Kafka's `t.ns.x`, `public/default/x` is
//! `x`); there are no non-persistent topics.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use broker::config::{TopicConfig, TopicKind};
use broker::{Broker, NewTopic, MAX_PARTITIONS_PER_TOPIC};
use magnetar_pulsar_core::topics::reported_partitions;
use model::pulsar_name::{Namespace, PulsarTopic, PARTITION_SUFFIX};

use super::{broker_error, json_body, namespace_name, no_content, path, query, run, ForceQuery};
use crate::error::ApiError;
use crate::state::AppState;

/// The `{domain}` of a topic path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Domain {
    Persistent,
    NonPersistent,
}

fn domain(d: &str) -> Result<Domain, ApiError> {
    match d {
        "persistent" => Ok(Domain::Persistent),
        "non-persistent" => Ok(Domain::NonPersistent),
        other => Err(ApiError::not_found(format!(
            "unknown topic domain {other:?} (persistent or non-persistent)"
        ))),
    }
}

/// Creating in the non-persistent domain: upstream's answer to a topic
/// of the wrong domain.
fn no_non_persistent() -> ApiError {
    ApiError::new(
        StatusCode::NOT_ACCEPTABLE,
        "Need to provide a persistent topic name: Magnetar has no non-persistent topics",
    )
}

/// An existing namespace from a path: 412 for a bad name, 404 if missing.
fn existing_namespace(
    broker: &Broker,
    tenant: &str,
    namespace: &str,
) -> Result<Namespace, ApiError> {
    let ns = namespace_name(tenant, namespace)?;
    if !broker.namespace_exists(&ns) {
        return Err(ApiError::not_found("Namespace does not exist"));
    }
    Ok(ns)
}

/// The persistent topic a path names, in an existing namespace; 412 for a
/// name Magnetar cannot hold (or that is another namespace's topic).
fn topic_name(
    broker: &Broker,
    tenant: &str,
    namespace: &str,
    topic: &str,
) -> Result<(Namespace, PulsarTopic), ApiError> {
    let ns = existing_namespace(broker, tenant, namespace)?;
    let invalid = |why: String| {
        ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            format!("Topic name is not valid: {why}"),
        )
    };
    let name = PulsarTopic::parse(&format!("persistent://{tenant}/{namespace}/{topic}"))
        .map_err(|e| invalid(e.to_string()))?;
    if name.shadows_a_namespace(|n| broker.namespace_exists(n)) {
        return Err(invalid(format!(
            "{name} is the Kafka topic {}, which is a topic of another namespace",
            name.kafka_name()
        )));
    }
    Ok((ns, name))
}

/// Upstream's rule for the partitioned-topic endpoints.
fn no_partition_suffix(topic: &str) -> Result<(), ApiError> {
    if topic.contains(PARTITION_SUFFIX) {
        return Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "Partitioned Topic Name should not contain '-partition-'",
        ));
    }
    Ok(())
}

/// The partition count sent as the JSON body, within upstream's bounds.
fn partition_count(body: Result<Bytes, BytesRejection>) -> Result<i32, ApiError> {
    let n = json_body::<i64>(body)?
        .ok_or_else(|| ApiError::bad_request("the body must be the number of partitions"))?;
    if n <= 0 {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "Number of partitions should be more than 0",
        ));
    }
    if n > i64::from(MAX_PARTITIONS_PER_TOPIC) {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            format!(
                "Number of partitions should be less than or equal to {MAX_PARTITIONS_PER_TOPIC}"
            ),
        ));
    }
    Ok(n as i32)
}

/// `GET /admin/v2/{domain}/{tenant}/{namespace}`: every topic of the
/// namespace, each partition of a partitioned topic by its
/// `-partition-N` name, sorted.
pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<crate::auth::Caller>,
    p: Result<Path<(String, String, String)>, PathRejection>,
) -> Result<Json<Vec<String>>, ApiError> {
    let (d, tenant, namespace) = path(p)?;
    let d = domain(&d)?;
    let ns = existing_namespace(&state.broker, &tenant, &namespace)?;
    if d == Domain::NonPersistent {
        return Ok(Json(Vec::new()));
    }
    let names = magnetar_pulsar_core::lookup::namespace_topics(
        &state.broker,
        &caller,
        &ns.tenant,
        &ns.namespace,
        None,
    )?;
    Ok(Json(names))
}

/// `GET /admin/v2/{domain}/{tenant}/{namespace}/partitioned`: the
/// namespace's partitioned topics, sorted.
pub async fn list_partitioned(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<crate::auth::Caller>,
    p: Result<Path<(String, String, String)>, PathRejection>,
) -> Result<Json<Vec<String>>, ApiError> {
    let (d, tenant, namespace) = path(p)?;
    let d = domain(&d)?;
    let ns = existing_namespace(&state.broker, &tenant, &namespace)?;
    if d == Domain::NonPersistent {
        return Ok(Json(Vec::new()));
    }
    let broker = &state.broker;
    let mut names: Vec<String> = broker
        .namespace_topics(&ns)
        .iter()
        .filter(|t| reported_partitions(t) > 0)
        .filter(|t| magnetar_pulsar_core::authz::may_describe(broker, &caller, t.name.as_str()))
        .map(|t| magnetar_pulsar_core::topics::pulsar_name(broker, t).to_string())
        .collect();
    names.sort();
    Ok(Json(names))
}

type TopicPathParams = (String, String, String, String);

/// `PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions` with
/// the partition count as the body: 204; 409 if the topic exists.
pub async fn create_partitioned(
    State(state): State<Arc<AppState>>,
    p: Result<Path<TopicPathParams>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let (d, tenant, namespace, topic) = path(p)?;
    if domain(&d)? == Domain::NonPersistent {
        return Err(no_non_persistent());
    }
    let (ns, name) = topic_name(&state.broker, &tenant, &namespace, &topic)?;
    no_partition_suffix(&topic)?;
    let partitions = partition_count(body)?;
    let broker = state.broker.clone();
    run(move || {
        broker.create_topic_in(
            &ns,
            NewTopic {
                assignments: Vec::new(),
                name: name.kafka_name(),
                partitions: Some(partitions),
                replication_factor: None,
                kind: TopicKind::Partitioned,
                config: TopicConfig::default(),
            },
        )
    })
    .await?;
    Ok(no_content())
}

/// `POST /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions` with
/// the new partition count as the body: grows the topic; shrinking (or
/// the same count) is 409, as upstream.
pub async fn grow_partitions(
    State(state): State<Arc<AppState>>,
    p: Result<Path<TopicPathParams>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let (d, tenant, namespace, topic) = path(p)?;
    if domain(&d)? == Domain::NonPersistent {
        return Err(no_non_persistent());
    }
    let (_, name) = topic_name(&state.broker, &tenant, &namespace, &topic)?;
    no_partition_suffix(&topic)?;
    let partitions = partition_count(body)?;
    let kafka = name.kafka_name();
    let existing = state
        .broker
        .topic(kafka.as_str())
        .ok_or_else(|| ApiError::not_found(format!("Partitioned Topic {name} not found")))?;
    if reported_partitions(&existing) == 0 {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "Topic is not partitioned topic",
        ));
    }
    let too_few = || {
        ApiError::new(
            StatusCode::CONFLICT,
            "Number of new partitions must be greater than existing number of partitions",
        )
    };
    if partitions as usize <= existing.partition_count() {
        return Err(too_few());
    }
    let broker = state.broker.clone();
    crate::state::blocking(move || broker.create_partitions(kafka.as_str(), partitions, false))
        .await?
        .map_err(|e| match e {
            // Grown by someone else meanwhile.
            broker::Error::InvalidPartitions(_) => too_few(),
            e => broker_error(e),
        })?;
    Ok(no_content())
}

/// `PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}`: creates a
/// non-partitioned topic (one partition, reported as 0); 409 if it exists.
pub async fn create_non_partitioned(
    State(state): State<Arc<AppState>>,
    p: Result<Path<TopicPathParams>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let (d, tenant, namespace, topic) = path(p)?;
    if domain(&d)? == Domain::NonPersistent {
        return Err(no_non_persistent());
    }
    let (ns, name) = topic_name(&state.broker, &tenant, &namespace, &topic)?;
    if name.partition.is_some() {
        return Err(ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            format!("{name} names a partition; partitions are made with their partitioned topic"),
        ));
    }
    let broker = state.broker.clone();
    run(move || {
        broker.create_topic_in(
            &ns,
            NewTopic {
                assignments: Vec::new(),
                name: name.kafka_name(),
                partitions: Some(1),
                replication_factor: None,
                kind: TopicKind::NonPartitioned,
                config: TopicConfig::default(),
            },
        )
    })
    .await?;
    Ok(no_content())
}

/// `DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}?force=`:
/// deletes a non-partitioned topic; 412 while producers or consumers are
/// attached unless `force`; 409 for a partitioned topic.
pub async fn delete(
    State(state): State<Arc<AppState>>,
    p: Result<Path<TopicPathParams>, PathRejection>,
    q: Result<Query<ForceQuery>, QueryRejection>,
) -> Result<StatusCode, ApiError> {
    let (d, tenant, namespace, topic) = path(p)?;
    let force = query(q)?.force;
    let (_, name) = topic_name(&state.broker, &tenant, &namespace, &topic)?;
    let not_found = || ApiError::not_found(format!("Topic {name} not found"));
    if domain(&d)? == Domain::NonPersistent {
        return Err(not_found());
    }
    let kafka = name.kafka_name();
    let existing = state.broker.topic(kafka.as_str()).ok_or_else(not_found)?;
    if name.partition.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "{name} is one partition of {}; Magnetar deletes partitioned topics whole (delete-partitioned-topic)",
                name.base()
            ),
        ));
    }
    if reported_partitions(&existing) > 0 {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("{name} is a partitioned topic. Instead of calling delete please call delete-partitioned-topic."),
        ));
    }
    let broker = state.broker.clone();
    run(move || broker.delete_topic_unless_busy(kafka.as_str(), force)).await?;
    Ok(no_content())
}

/// `DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions
/// ?force=`: deletes a partitioned topic and every partition; 412 while
/// producers or consumers are attached unless `force`; 409 for a
/// non-partitioned topic.
pub async fn delete_partitioned(
    State(state): State<Arc<AppState>>,
    p: Result<Path<TopicPathParams>, PathRejection>,
    q: Result<Query<ForceQuery>, QueryRejection>,
) -> Result<StatusCode, ApiError> {
    let (d, tenant, namespace, topic) = path(p)?;
    let force = query(q)?.force;
    let (_, name) = topic_name(&state.broker, &tenant, &namespace, &topic)?;
    no_partition_suffix(&topic)?;
    let not_found = || ApiError::not_found(format!("Topic {name} not found."));
    if domain(&d)? == Domain::NonPersistent {
        return Err(not_found());
    }
    let kafka = name.kafka_name();
    let existing = state.broker.topic(kafka.as_str()).ok_or_else(not_found)?;
    if reported_partitions(&existing) == 0 {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("{name} is a non-partitioned topic. Instead of calling delete-partitioned-topic please call delete."),
        ));
    }
    let broker = state.broker.clone();
    run(move || broker.delete_topic_unless_busy(kafka.as_str(), force)).await?;
    Ok(no_content())
}
