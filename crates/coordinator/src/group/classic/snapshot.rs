//! The group's durable form (what Kafka writes as a GroupMetadata record),
//! restoring from it after a restart, and DescribeGroups.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::group::ClassicGroup;
use super::member::Member;
use super::types::{ClassicConfig, GroupDescription, GroupState, MemberDescription, Protocol};

/// A group's durable metadata. Take it when [`super::Effect::Persist`] is
/// emitted; that is when it describes a settled generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSnapshot {
    /// The group id.
    pub group_id: String,
    /// The generation.
    pub generation_id: i32,
    /// The protocol type, e.g. `consumer`.
    pub protocol_type: Option<String>,
    /// The generation's protocol; `None` for an Empty group.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// When the group entered its state (ms).
    pub state_timestamp_ms: i64,
    /// The members, in join order.
    pub members: Vec<MemberSnapshot>,
}

/// One member of a [`GroupSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSnapshot {
    /// The member id.
    pub member_id: String,
    /// The static instance id, if any.
    pub group_instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// The member's rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The member's session timeout.
    pub session_timeout_ms: i32,
    /// The member's metadata for the generation's protocol.
    #[serde(with = "hex_bytes")]
    pub metadata: Bytes,
    /// The member's assignment.
    #[serde(with = "hex_bytes")]
    pub assignment: Bytes,
}

impl ClassicGroup {
    /// The group's durable metadata.
    pub fn snapshot(&self) -> GroupSnapshot {
        let protocol = self.protocol_name.as_deref();
        let members = self
            .ordered_ids()
            .into_iter()
            .map(|id| {
                let m = &self.members[&id];
                MemberSnapshot {
                    member_id: id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    metadata: m.metadata(protocol),
                    assignment: m.assignment.clone(),
                }
            })
            .collect();
        GroupSnapshot {
            group_id: self.group_id.clone(),
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone(),
            state_timestamp_ms: self.state_since_ms,
            members,
        }
    }

    /// Rebuilds a group after a restart. A snapshot with a protocol and
    /// members comes back Stable, its members with fresh sessions (they
    /// must heartbeat or rejoin as usual); anything else comes back Empty.
    /// A group over `group.max.size` starts rebalancing at once, as Kafka
    /// does, so the excess members are dropped.
    pub fn restore(snapshot: GroupSnapshot, config: ClassicConfig, now_ms: i64) -> Self {
        let mut group = ClassicGroup::new(snapshot.group_id, config);
        group.generation_id = snapshot.generation_id;
        group.protocol_type = snapshot.protocol_type;
        group.state_since_ms = snapshot.state_timestamp_ms;
        let Some(protocol) = snapshot
            .protocol_name
            .filter(|_| !snapshot.members.is_empty())
        else {
            return group;
        };
        for s in snapshot.members {
            if group.members.contains_key(&s.member_id) {
                continue;
            }
            let mut member = Member {
                id: s.member_id.clone(),
                instance_id: s.group_instance_id.clone(),
                client_id: s.client_id,
                client_host: s.client_host,
                session_timeout_ms: s.session_timeout_ms,
                rebalance_timeout_ms: s.rebalance_timeout_ms.max(1),
                protocols: vec![Protocol::new(protocol.clone(), s.metadata)],
                assignment: s.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                session_deadline: 0,
                seq: group.next_seq,
            };
            group.next_seq += 1;
            member.refresh_session(now_ms);
            if let Some(instance) = s.group_instance_id {
                group.static_members.insert(instance, s.member_id.clone());
            }
            group.members.insert(s.member_id, member);
        }
        group.protocol_name = Some(protocol);
        group.leader = snapshot
            .leader
            .filter(|l| group.members.contains_key(l))
            .or_else(|| group.ordered_ids().into_iter().next());
        group.state = GroupState::Stable;
        group.previous_state = GroupState::Stable;
        if group.members.len() > group.config.max_size {
            group.prepare_rebalance(now_ms, "restored group is over capacity");
        }
        // Nothing was parked, so nothing can have been answered.
        debug_assert!(group.out.iter().all(|e| e.request().is_none()));
        group.out.clear();
        group
    }

    /// The group as DescribeGroups shows it: protocol metadata and
    /// assignments only once Stable, as in Kafka.
    pub fn describe(&self) -> GroupDescription {
        let stable = self.state == GroupState::Stable;
        let protocol = self.protocol_name.as_deref();
        let members = self
            .ordered_ids()
            .into_iter()
            .map(|id| {
                let m = &self.members[&id];
                MemberDescription {
                    member_id: id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                }
            })
            .collect();
        GroupDescription {
            group_id: self.group_id.clone(),
            state: self.state,
            protocol_type: self.protocol_type.clone(),
            protocol_name: if stable {
                self.protocol_name.clone()
            } else {
                None
            },
            members,
        }
    }
}

/// Opaque bytes as a lowercase hex string: compact and readable in JSON.
mod hex_bytes {
    use bytes::Bytes;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(bytes.len() * 2);
        for b in bytes.iter() {
            out.push(DIGITS[usize::from(b >> 4)] as char);
            out.push(DIGITS[usize::from(b & 0xf)] as char);
        }
        s.serialize_str(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 2 != 0 {
            return Err(D::Error::custom("odd-length hex string"));
        }
        let digit = |c: u8| {
            (c as char)
                .to_digit(16)
                .map(|v| v as u8)
                .ok_or_else(|| D::Error::custom("invalid hex digit"))
        };
        s.as_bytes()
            .chunks(2)
            .map(|pair| Ok((digit(pair[0])? << 4) | digit(pair[1])?))
            .collect::<Result<Vec<u8>, D::Error>>()
            .map(Bytes::from)
    }
}
