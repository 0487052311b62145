//! One member of a classic group: what it joined with, what it was assigned,
//! which of its requests are parked, and when its session runs out.

use bytes::Bytes;

use super::types::{JoinRequest, Protocol, RequestId};

#[derive(Debug, Clone)]
pub(super) struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    pub awaiting_join: Option<RequestId>,
    pub awaiting_sync: Option<RequestId>,
    /// Joined but not yet through a completed join phase: such a member has
    /// no way to heartbeat, so it is timed out by the new-member join timeout
    /// instead of being excused while it waits.
    pub is_new: bool,
    pub session_deadline: i64,
    /// Join order; the group lists members and picks fallback leaders by it.
    pub seq: u64,
}

impl Member {
    pub fn from_join(id: String, req: &JoinRequest, seq: u64) -> Member {
        Member {
            id,
            instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: effective_rebalance_timeout(req),
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            session_deadline: 0,
            seq,
        }
    }

    /// Takes the protocols and timeouts of a rejoin.
    pub fn update_from_join(&mut self, req: &JoinRequest) {
        self.protocols = req.protocols.clone();
        self.session_timeout_ms = req.session_timeout_ms;
        self.rebalance_timeout_ms = effective_rebalance_timeout(req);
    }

    /// Same protocols, same metadata, same order: a rejoin that changes
    /// nothing the leader would see.
    pub fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }

    pub fn metadata(&self, protocol: Option<&str>) -> Bytes {
        protocol
            .and_then(|name| self.protocols.iter().find(|p| p.name == name))
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    /// The member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| candidates.contains(name))
    }

    /// Whether the session deadline is currently excused. A member parked
    /// in a JoinGroup or SyncGroup cannot heartbeat, so the rebalance and
    /// sync timeouts police it instead; a new member is the exception.
    pub fn heartbeat_excused(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }

    pub fn refresh_session(&mut self, now_ms: i64) {
        self.session_deadline = now_ms.saturating_add(i64::from(self.session_timeout_ms));
    }
}

/// The rebalance timeout to use: JoinGroup v0 carries none, and a
/// non-positive one would complete every rebalance before anyone rejoined.
fn effective_rebalance_timeout(req: &JoinRequest) -> i32 {
    if req.rebalance_timeout_ms > 0 {
        req.rebalance_timeout_ms
    } else {
        req.session_timeout_ms.max(1)
    }
}
