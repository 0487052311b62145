//! Group coordinator lookups (FindCoordinator), batched when the broker
//! allows it (KIP-699).

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::metadata::{Node, NodeId};

impl Client {
    /// The group coordinator of each group: one FindCoordinator v4+
    /// request carrying every key when the broker supports it (KIP-699),
    /// otherwise one request per group (pipelined on one connection).
    /// Results come in the order of `group_ids`.
    pub async fn find_coordinators(
        &self,
        group_ids: &[&str],
    ) -> Result<Vec<(String, Result<Node>)>> {
        if group_ids.is_empty() {
            return Ok(Vec::new());
        }
        let conn = self.any_connection().await?;
        let v = conn.versions().pick::<FindCoordinatorRequest>()?;
        if v >= 4 {
            let req = FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(
                    group_ids
                        .iter()
                        .map(|g| StrBytes::from_string(g.to_string()))
                        .collect(),
                );
            let resp = conn.send(v, &req)?.await?;
            return Ok(group_ids
                .iter()
                .map(|g| {
                    let r = resp
                        .coordinators
                        .iter()
                        .find(|c| c.key.as_str() == *g)
                        .ok_or_else(|| Error::Protocol(format!("no coordinator entry for {g}")))
                        .and_then(coordinator_node);
                    (g.to_string(), r)
                })
                .collect());
        }
        let mut pending = Vec::with_capacity(group_ids.len());
        for g in group_ids {
            let mut req =
                FindCoordinatorRequest::default().with_key(StrBytes::from_string(g.to_string()));
            if v >= 1 {
                req = req.with_key_type(0);
            }
            pending.push((g.to_string(), conn.send(v, &req)));
        }
        let mut out = Vec::with_capacity(pending.len());
        for (g, fut) in pending {
            let r = match fut {
                Ok(f) => f.await.and_then(|resp| {
                    Error::check(resp.error_code, resp.error_message.as_deref())?;
                    Ok(Node {
                        id: NodeId(resp.node_id.0),
                        host: resp.host.to_string(),
                        port: resp.port,
                        rack: None,
                    })
                }),
                Err(e) => Err(e),
            };
            out.push((g, r));
        }
        Ok(out)
    }

    /// The coordinator of one group.
    pub async fn find_coordinator(&self, group_id: &str) -> Result<Node> {
        self.find_coordinators(&[group_id])
            .await?
            .pop()
            .map(|(_, r)| r)
            .unwrap_or_else(|| Err(Error::NotFound(format!("group {group_id}"))))
    }
}

fn coordinator_node(c: &Coordinator) -> Result<Node> {
    Error::check(c.error_code, c.error_message.as_deref())?;
    Ok(Node {
        id: NodeId(c.node_id.0),
        host: c.host.to_string(),
        port: c.port,
        rack: None,
    })
}
