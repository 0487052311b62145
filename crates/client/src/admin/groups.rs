//! Consumer groups: list, describe, committed offsets.

use std::collections::HashMap;

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, PerItem};
use crate::conn::Connection;
use crate::error::{Error, Result};

fn group_id(g: &str) -> GroupId {
    GroupId(StrBytes::from_string(g.to_string()))
}

/// A group as ListGroups reported it.
///
/// ```no_run
/// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
/// for g in admin.list_groups().await? { println!("{} ({})", g.group_id, g.state); }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// Protocol type, e.g. `consumer`; empty for groups that only commit.
    pub protocol_type: String,
    /// State (ListGroups v4+), empty on older brokers.
    pub state: String,
    /// Type, `classic` or `consumer` (v5+), empty on older brokers.
    pub group_type: String,
}

/// One member of a described group.
///
/// ```
/// # fn f(m: &magnetar_client::GroupMember) { println!("{} from {}", m.member_id, m.client_host); }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id, if any.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
}

/// A group as DescribeGroups reported it.
///
/// ```no_run
/// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
/// for (id, d) in admin.describe_groups(&["g1"]).await? {
///     let d: magnetar_client::GroupDescription = d?;
///     println!("{id}: {} with {} members", d.state, d.members.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// State, e.g. `Stable`, `Empty`, `Dead`.
    pub state: String,
    /// Protocol type, e.g. `consumer`.
    pub protocol_type: String,
    /// The chosen protocol (assignor), e.g. `range`.
    pub protocol: String,
    /// Members.
    pub members: Vec<GroupMember>,
}

/// A committed offset of a group.
///
/// ```no_run
/// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
/// for o in admin.list_group_offsets("g1").await? {
///     println!("{}/{} at {}", o.topic, o.partition, o.offset);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed offset (the next record to read).
    pub offset: i64,
    /// Leader epoch of the committed record, -1 if unknown.
    pub leader_epoch: i32,
    /// The metadata string committed with it.
    pub metadata: Option<String>,
}

impl Admin {
    pub(crate) async fn coordinator_connection(&self, group: &str) -> Result<Connection> {
        let node = self.find_coordinator(group).await?;
        self.client.connection_to(&node.addr()).await
    }

    /// Every group on every broker, sorted by id.
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>> {
        let md = self.client.refresh_metadata(&[]).await?;
        let mut out = Vec::new();
        let mut nodes: Vec<_> = md.brokers.keys().copied().collect();
        nodes.sort();
        for node in nodes {
            let conn = self.client.connection(node).await?;
            let v = conn.versions().pick::<ListGroupsRequest>()?;
            let resp = conn.send(v, &ListGroupsRequest::default())?.await?;
            Error::check(resp.error_code, None)?;
            out.extend(resp.groups.iter().map(|g| GroupListing {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
                group_type: g.group_type.to_string(),
            }));
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(out)
    }

    /// State, protocol and members of each group, asked of its coordinator.
    pub async fn describe_groups(
        &self,
        groups: &[&str],
    ) -> Result<PerItem<String, GroupDescription>> {
        let coordinators = self.find_coordinators(groups).await?;
        let mut by_addr: HashMap<String, Vec<&str>> = HashMap::new();
        let mut out: Vec<(String, Result<GroupDescription>)> = Vec::with_capacity(groups.len());
        for (g, c) in &coordinators {
            match c {
                Ok(node) => by_addr.entry(node.addr()).or_default().push(g.as_str()),
                Err(e) => out.push((g.clone(), Err(e.clone()))),
            }
        }
        for (addr, gs) in by_addr {
            let conn = self.client.connection_to(&addr).await?;
            let v = conn.versions().pick::<DescribeGroupsRequest>()?;
            let req = DescribeGroupsRequest::default()
                .with_groups(gs.iter().map(|g| group_id(g)).collect());
            let resp = conn.send(v, &req)?.await?;
            for g in gs {
                let r = resp
                    .groups
                    .iter()
                    .find(|x| x.group_id.0.as_str() == g)
                    .ok_or_else(|| Error::Protocol(format!("no result for group {g}")))
                    .and_then(|x| {
                        Error::check(x.error_code, x.error_message.as_deref())?;
                        Ok(GroupDescription {
                            state: x.group_state.to_string(),
                            protocol_type: x.protocol_type.to_string(),
                            protocol: x.protocol_data.to_string(),
                            members: x
                                .members
                                .iter()
                                .map(|m| GroupMember {
                                    member_id: m.member_id.to_string(),
                                    group_instance_id: m
                                        .group_instance_id
                                        .as_ref()
                                        .map(|s| s.to_string()),
                                    client_id: m.client_id.to_string(),
                                    client_host: m.client_host.to_string(),
                                })
                                .collect(),
                        })
                    });
                out.push((g.to_string(), r));
            }
        }
        let order: HashMap<&str, usize> = groups.iter().enumerate().map(|(i, g)| (*g, i)).collect();
        out.sort_by_key(|(g, _)| order.get(g.as_str()).copied().unwrap_or(usize::MAX));
        Ok(out)
    }

    /// Deletes groups that have no members, with their committed offsets
    /// (DeleteGroups to each group's coordinator). Results come in the
    /// order of `groups`.
    pub async fn delete_groups(&self, groups: &[&str]) -> Result<PerItem<String, ()>> {
        let coordinators = self.find_coordinators(groups).await?;
        let mut by_addr: HashMap<String, Vec<&str>> = HashMap::new();
        let mut out: Vec<(String, Result<()>)> = Vec::with_capacity(groups.len());
        for (g, c) in &coordinators {
            match c {
                Ok(node) => by_addr.entry(node.addr()).or_default().push(g.as_str()),
                Err(e) => out.push((g.clone(), Err(e.clone()))),
            }
        }
        for (addr, gs) in by_addr {
            let conn = self.client.connection_to(&addr).await?;
            let v = conn.versions().pick::<DeleteGroupsRequest>()?;
            let req = DeleteGroupsRequest::default()
                .with_groups_names(gs.iter().map(|g| group_id(g)).collect());
            let resp = conn.send(v, &req)?.await?;
            for g in gs {
                let r = resp
                    .results
                    .iter()
                    .find(|x| x.group_id.0.as_str() == g)
                    .ok_or_else(|| Error::Protocol(format!("no result for group {g}")))
                    .and_then(|x| Error::check(x.error_code, None));
                out.push((g.to_string(), r));
            }
        }
        let order: HashMap<&str, usize> = groups.iter().enumerate().map(|(i, g)| (*g, i)).collect();
        out.sort_by_key(|(g, _)| order.get(g.as_str()).copied().unwrap_or(usize::MAX));
        Ok(out)
    }

    /// Every committed offset of `group` (OffsetFetch for all topics),
    /// sorted by topic and partition.
    pub async fn list_group_offsets(&self, group: &str) -> Result<Vec<OffsetAndMetadata>> {
        let conn = self.coordinator_connection(group).await?;
        let v = conn.versions().pick::<OffsetFetchRequest>()?;
        // v2+ takes a null topic list as "all topics".
        if v < 2 {
            return Err(Error::NotSupported(format!(
                "{}: OffsetFetch v{v} cannot list all of a group's offsets",
                conn.addr()
            )));
        }
        let req = if v >= 8 {
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(group_id(group))
                .with_topics(None)])
        } else {
            OffsetFetchRequest::default()
                .with_group_id(group_id(group))
                .with_topics(None)
        };
        let resp = conn.send(v, &req)?.await?;
        let mut out = Vec::new();
        if v >= 8 {
            let g = resp
                .groups
                .iter()
                .find(|g| g.group_id.0.as_str() == group)
                .ok_or_else(|| Error::Protocol(format!("no result for group {group}")))?;
            Error::check(g.error_code, None)?;
            for t in &g.topics {
                for p in &t.partitions {
                    Error::check(p.error_code, None)?;
                    out.push(OffsetAndMetadata {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.as_ref().map(|m| m.to_string()),
                    });
                }
            }
        } else {
            Error::check(resp.error_code, None)?;
            for t in &resp.topics {
                for p in &t.partitions {
                    Error::check(p.error_code, None)?;
                    out.push(OffsetAndMetadata {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.as_ref().map(|m| m.to_string()),
                    });
                }
            }
        }
        out.retain(|o| o.offset >= 0);
        out.sort_by(|a, b| (a.topic.as_str(), a.partition).cmp(&(b.topic.as_str(), b.partition)));
        Ok(out)
    }
}
