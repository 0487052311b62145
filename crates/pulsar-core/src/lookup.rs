//! Topic discovery: PartitionedTopicMetadata (PIP-344), Lookup and
//! GetTopicsOfNamespace. These may create topics or list many, so the
//! session runs them on the blocking pool.

use broker::security::acl::{Operation, Requester};
use broker::Broker;
use magnetar_pulsar_wire::proto::command_get_topics_of_namespace::Mode;
use magnetar_pulsar_wire::proto::command_lookup_topic_response::LookupType as LookupResult;
use magnetar_pulsar_wire::proto::command_partitioned_topic_metadata_response::LookupType as MetadataResult;
use magnetar_pulsar_wire::proto::{
    CommandGetTopicsOfNamespace, CommandGetTopicsOfNamespaceResponse, CommandLookupTopic,
    CommandLookupTopicResponse, CommandPartitionedTopicMetadata,
    CommandPartitionedTopicMetadataResponse, ServerError,
};
use model::pulsar_name::Namespace;
use model::PartitionId;

use crate::error::PulsarError;
use crate::topics;

/// PartitionedTopicMetadata, the PIP-344 table:
///
/// - an existing topic gives its partitions (0 when non-partitioned, and
///   for a `-partition-N` name of an existing partition);
/// - a missing topic is created only when the client allows it
///   (`metadata_auto_creation_enabled`, field 6, default true) *and* the
///   broker does (`auto.create.topics.enable`), by the broker's type and
///   partition count; otherwise TopicNotFound.
///
/// Like upstream's `ServerCnx.handlePartitionMetadataRequest`, the client's
/// feature flags are not consulted: a client that never announced
/// `supports_get_partitioned_metadata_without_auto_creation` never sends
/// field 6, which then takes its default (true).
pub fn partitioned_metadata(
    broker: &Broker,
    who: &dyn Requester,
    cmd: &CommandPartitionedTopicMetadata,
) -> CommandPartitionedTopicMetadataResponse {
    let request_id = cmd.request_id;
    let allow = cmd.metadata_auto_creation_enabled.unwrap_or(true);
    match metadata_partitions(broker, who, &cmd.topic, allow) {
        Ok(partitions) => CommandPartitionedTopicMetadataResponse {
            partitions: Some(partitions),
            request_id,
            response: Some(MetadataResult::Success as i32),
            ..Default::default()
        },
        Err(e) => CommandPartitionedTopicMetadataResponse {
            request_id,
            response: Some(MetadataResult::Failed as i32),
            error: Some(e.code as i32),
            message: Some(e.message),
            ..Default::default()
        },
    }
}

/// The partitions of topic `name` as PartitionedTopicMetadata and the
/// REST `partitions` endpoint report them (PIP-344: created only when
/// `allow` and the broker's policy both permit it); TopicNotFound (without
/// text, as upstream) otherwise. `who` needs Describe on the topic, and
/// Create to create it.
pub fn metadata_partitions(
    broker: &Broker,
    who: &dyn Requester,
    name: &str,
    allow: bool,
) -> Result<u32, PulsarError> {
    crate::authz::check_topic(broker, who, name, Operation::Describe, allow)?;
    let parsed = topics::parse(broker, name)?;
    let kafka = parsed.kafka_name();
    if let Some(n) = parsed.partition {
        let topic = broker.resolve_topic_name(kafka.as_str())?;
        if topics::reported_partitions(&topic) == 0 {
            return Err(PulsarError::new(
                ServerError::TopicNotFound,
                format!("{} is not a partitioned topic", parsed.base()),
            ));
        }
        if !topic.has_partition(PartitionId(n as i32)) {
            topic.partition(PartitionId(n as i32))?;
        }
        return Ok(0);
    }
    match broker.lookup_topic_in(&kafka, allow, Some(&parsed.namespace)) {
        Ok(topic) => Ok(topics::reported_partitions(&topic)),
        // Not-found answers carry no text, as upstream's do.
        Err(broker::Error::UnknownTopic(_)) => {
            Err(PulsarError::new(ServerError::TopicNotFound, ""))
        }
        Err(e) => Err(e.into()),
    }
}

/// Lookup: "connect to" the broker that leads the topic's partition,
/// authoritative (a standalone node leads every partition). A topic
/// that does not exist and may not be created by a producer or consumer
/// is TopicNotFound; one that does not exist yet is served here (the
/// producer or consumer creating it is sent on by its next lookup if its
/// partition lands elsewhere); a partition whose broker is fenced is
/// ServiceNotReady, which clients retry.
pub fn lookup(
    broker: &Broker,
    own: &ServiceUrls,
    who: &dyn Requester,
    cmd: &CommandLookupTopic,
) -> CommandLookupTopicResponse {
    let request_id = cmd.request_id;
    let found = crate::authz::check_topic(broker, who, &cmd.topic, Operation::Describe, false)
        .and_then(|()| lookup_allowed(broker, &cmd.topic))
        .and_then(|()| owner_urls(broker, own, &cmd.topic));
    match found {
        Ok(urls) => CommandLookupTopicResponse {
            broker_service_url: urls.plain,
            broker_service_url_tls: urls.tls,
            response: Some(LookupResult::Connect as i32),
            request_id,
            authoritative: Some(true),
            proxy_through_service_url: Some(false),
            ..Default::default()
        },
        Err(e) => CommandLookupTopicResponse {
            response: Some(LookupResult::Failed as i32),
            request_id,
            error: Some(e.code as i32),
            message: Some(e.message),
            ..Default::default()
        },
    }
}

/// A broker's Pulsar service URLs: `pulsar://` and `pulsar+ssl://`, each
/// if that listener runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceUrls {
    /// `pulsar://host:port`.
    pub plain: Option<String>,
    /// `pulsar+ssl://host:port`.
    pub tls: Option<String>,
}

/// The node leading the partition `name` names (a non-partitioned topic:
/// its one partition) when it is another broker of the cluster (-1: none
/// is live); `None` when this broker answers for it (a topic that does not
/// exist yet, or one this broker leads).
pub fn owner_node(broker: &Broker, name: &str) -> Result<Option<i32>, PulsarError> {
    let Some((topic, partition)) = addressed(broker, name)? else {
        return Ok(None);
    };
    let Some(state) = topic.placements.get(partition.unwrap_or(0) as usize) else {
        return Ok(None);
    };
    let leader = broker.live_leader(state);
    Ok((leader != broker.node_id()).then_some(leader))
}

/// The nodes leading the partitions `name` addresses (one partition, or
/// every partition of a partitioned topic named without a partition), as
/// clients are told (-1: offline); empty for a topic that does not exist.
pub fn partition_owners(
    broker: &Broker,
    name: &str,
) -> Result<std::collections::BTreeSet<i32>, PulsarError> {
    let Some((topic, partition)) = addressed(broker, name)? else {
        return Ok(Default::default());
    };
    let states: Vec<_> = match partition {
        Some(p) => topic.placements.get(p as usize).into_iter().collect(),
        None => topic.placements.iter().collect(),
    };
    Ok(states.into_iter().map(|s| broker.live_leader(s)).collect())
}

/// For a topic `name` names without a partition: whether it is
/// partitioned, and the node leading each of its partitions in partition
/// order (-1: offline); `None` for a topic that does not exist or a name
/// with a partition.
pub fn topic_leaders(broker: &Broker, name: &str) -> Result<Option<(bool, Vec<i32>)>, PulsarError> {
    Ok(match addressed(broker, name)? {
        Some((topic, None)) => Some((
            topic.kind == broker::config::TopicKind::Partitioned,
            topic
                .placements
                .iter()
                .map(|s| broker.live_leader(s))
                .collect(),
        )),
        _ => None,
    })
}

/// An existing topic and the partition its name picks, if one.
type Addressed = (std::sync::Arc<broker::Topic>, Option<u32>);

/// The existing topic `name` names and the partition it names, if one;
/// `None` for a topic that does not exist (this broker answers for those).
fn addressed(broker: &Broker, name: &str) -> Result<Option<Addressed>, PulsarError> {
    let t = topics::parse(broker, name)?;
    Ok(broker
        .topic(t.kafka_name().as_str())
        .map(|topic| (topic, t.partition)))
}

/// `host:port` of live broker `node`'s listener `listener` (a key of the
/// registrations' endpoints), if it has one.
pub fn owner_endpoint(broker: &Broker, node: i32, listener: &str) -> Option<String> {
    broker
        .live_brokers(listener)
        .into_iter()
        .find(|(n, _)| *n == node)
        .map(|(_, e)| {
            if e.host.contains(':') {
                format!("[{}]:{}", e.host, e.port)
            } else {
                format!("{}:{}", e.host, e.port)
            }
        })
}

/// The service URLs of the broker leading the partition `name` names (a
/// non-partitioned topic: its one partition), `own` for this broker.
pub fn owner_urls(
    broker: &Broker,
    own: &ServiceUrls,
    name: &str,
) -> Result<ServiceUrls, PulsarError> {
    urls_of(broker, own, owner_node(broker, name)?, name)
}

/// The service URLs of `owner` (an [`owner_node`] answer for `name`): `own`
/// for this broker, else its registered Pulsar endpoints.
pub fn urls_of(
    broker: &Broker,
    own: &ServiceUrls,
    owner: Option<i32>,
    name: &str,
) -> Result<ServiceUrls, PulsarError> {
    let Some(leader) = owner else {
        return Ok(own.clone());
    };
    let endpoint = |listener: &str| owner_endpoint(broker, leader, listener);
    let urls = ServiceUrls {
        plain: endpoint(broker::cluster::PULSAR_LISTENER).map(|a| format!("pulsar://{a}")),
        tls: endpoint(broker::cluster::PULSAR_TLS_LISTENER).map(|a| format!("pulsar+ssl://{a}")),
    };
    if urls.plain.is_none() && urls.tls.is_none() {
        // -1 is what clients are told; the message names the broker that
        // holds the partition (fenced or down).
        let node = match leader {
            -1 => placed_leader(broker, name).unwrap_or(leader),
            n => n,
        };
        return Err(PulsarError::new(
            ServerError::ServiceNotReady,
            format!("the broker leading {name} (node {node}) is not available"),
        ));
    }
    Ok(urls)
}

/// The broker the metadata places the partition `name` names on, live or
/// not.
fn placed_leader(broker: &Broker, name: &str) -> Option<i32> {
    let (topic, partition) = addressed(broker, name).ok()??;
    let state = topic.placements.get(partition.unwrap_or(0) as usize)?;
    Some(state.leader)
}

/// Whether a lookup of `name` finds a broker: the topic exists, or a
/// producer or consumer may create it.
pub fn lookup_allowed(broker: &Broker, name: &str) -> Result<(), PulsarError> {
    let t = topics::parse(broker, name)?;
    let exists = broker.topic(t.kafka_name().as_str()).is_some();
    if exists || broker.config().auto_create_topics_enable() {
        Ok(())
    } else {
        Err(PulsarError::new(
            ServerError::TopicNotFound,
            format!("topic {t} does not exist"),
        ))
    }
}

/// The persistent topics of namespace `tenant/namespace` (each partition
/// of a partitioned topic by its partition name) that `who` may describe,
/// matching `pattern` when given, sorted.
pub fn namespace_topics(
    broker: &Broker,
    who: &dyn Requester,
    tenant: &str,
    namespace: &str,
    pattern: Option<&str>,
) -> Result<Vec<String>, PulsarError> {
    let namespace = Namespace::new(tenant, namespace)?;
    if !topics::namespace_exists(broker, &namespace) {
        return Err(PulsarError::new(
            ServerError::MetadataError,
            format!("namespace {namespace} does not exist"),
        ));
    }
    let pattern = match pattern.filter(|p| !p.is_empty()) {
        Some(p) => Some(
            regex::Regex::new(&format!("^(?:{})$", strip_domain(p))).map_err(|e| {
                PulsarError::new(
                    ServerError::MetadataError,
                    format!("bad topics_pattern: {e}"),
                )
            })?,
        ),
        None => None,
    };
    let mut names = Vec::new();
    for topic in broker.namespace_topics(&namespace) {
        if !crate::authz::may_describe(broker, who, topic.name.as_str()) {
            continue;
        }
        let base = topics::pulsar_name(broker, &topic);
        match topics::reported_partitions(&topic) {
            0 => names.push(base.to_string()),
            n => names.extend((0..n).map(|i| base.partition(i).to_string())),
        }
    }
    if let Some(re) = &pattern {
        names.retain(|n| re.is_match(strip_domain(n)));
    }
    names.sort();
    Ok(names)
}

/// GetTopicsOfNamespace: every persistent topic of the namespace, each
/// partition of a partitioned topic by its partition name (as upstream
/// lists them), filtered by `topics_pattern` when given; with the client's
/// `topics_hash` unchanged, nothing is listed and `changed` is false.
pub fn topics_of_namespace(
    broker: &Broker,
    who: &dyn Requester,
    cmd: &CommandGetTopicsOfNamespace,
) -> Result<CommandGetTopicsOfNamespaceResponse, PulsarError> {
    let (tenant, ns) = cmd.namespace.split_once('/').ok_or_else(|| {
        PulsarError::new(
            ServerError::MetadataError,
            format!("{:?} is not a tenant/namespace name", cmd.namespace),
        )
    })?;
    let names = if cmd.mode() == Mode::NonPersistent {
        // There are no non-persistent topics; the namespace must exist.
        namespace_topics(broker, who, tenant, ns, None)?;
        Vec::new()
    } else {
        namespace_topics(broker, who, tenant, ns, cmd.topics_pattern.as_deref())?
    };
    let filtered = cmd.topics_pattern.as_deref().is_some_and(|p| !p.is_empty());
    let hash = topics_hash(&names);
    let unchanged = cmd.topics_hash.as_deref() == Some(hash.as_str());
    Ok(CommandGetTopicsOfNamespaceResponse {
        request_id: cmd.request_id,
        topics: if unchanged { Vec::new() } else { names },
        filtered: Some(filtered),
        topics_hash: Some(hash),
        changed: Some(!unchanged),
    })
}

/// Patterns may or may not carry the `persistent://` domain; match without.
fn strip_domain(s: &str) -> &str {
    s.strip_prefix("persistent://").unwrap_or(s)
}

/// A hash of a topic list (CRC32C of the sorted names, as upstream's
/// `TopicList.calculateHash` does with CRC32C), in hex.
fn topics_hash(sorted: &[String]) -> String {
    let mut crc = 0u32;
    for n in sorted {
        crc = crc32c::crc32c_append(crc, n.as_bytes());
    }
    format!("{crc:x}")
}
