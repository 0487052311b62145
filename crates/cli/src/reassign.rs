//! `magnetar topic reassign` and `magnetar topic reassignments`.

use std::time::Duration;

use client::{Admin, NodeId};
use serde_json::json;

use crate::error::{check_items, CliError, Context};
use crate::output::{print_json, Table};
use crate::GlobalArgs;

/// How often `--wait` asks whether the moves completed.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// Starts (`target` given) or cancels the reassignment of `partitions` of
/// topic `name` (all of them if none given); with `wait`, returns once
/// none of them is moving any more.
pub async fn reassign(
    g: &GlobalArgs,
    admin: &Admin,
    name: &str,
    mut partitions: Vec<i32>,
    target: Option<Vec<i32>>,
    wait: bool,
) -> Result<(), CliError> {
    let b = g.bootstrap.as_str();
    if target.as_ref().is_some_and(|t| t.is_empty()) {
        return Err(CliError::Usage(
            "give the target brokers with --replicas, or --cancel".into(),
        ));
    }
    if partitions.is_empty() {
        let (_, t) = admin
            .describe_topics(&[name])
            .await
            .context(format!("cannot describe {name}"), b)?
            .into_iter()
            .next()
            .ok_or_else(|| CliError::Usage("no result".into()))?;
        let t = t.context(format!("cannot describe {name}"), b)?;
        partitions = t.partitions.iter().map(|p| p.partition).collect();
    }
    let target: Option<Vec<NodeId>> = target.map(|t| t.into_iter().map(NodeId).collect());
    let moves: Vec<client::Reassignment> = partitions
        .iter()
        .map(|p| (name, *p, target.clone()))
        .collect();
    let res = admin
        .alter_partition_reassignments(&moves)
        .await
        .context(format!("cannot reassign {name}"), b)?;
    let named: Vec<(String, client::Result<()>)> = res
        .into_iter()
        .map(|((t, p), r)| (format!("{t}-{p}"), r))
        .collect();
    if !g.json {
        let verb = if target.is_some() {
            "moving"
        } else {
            "cancelled the move of"
        };
        for (n, r) in &named {
            if r.is_ok() {
                println!("{verb} {n}");
            }
        }
    }
    check_items(&named, "partitions")?;
    if wait {
        let asked = [(name, partitions.clone())];
        loop {
            let moving = admin
                .list_partition_reassignments(Some(&asked))
                .await
                .context("cannot list partition reassignments", b)?;
            if moving.is_empty() {
                break;
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }
    if g.json {
        print_json(&json!({"topic": name, "partitions": partitions,
            "replicas": target.map(|t| t.iter().map(|n| n.0).collect::<Vec<_>>()),
            "completed": wait}));
    } else if wait {
        println!("done");
    }
    Ok(())
}

/// Lists the reassignments under way.
pub async fn list(g: &GlobalArgs, admin: &Admin) -> Result<(), CliError> {
    let moving = admin
        .list_partition_reassignments(None)
        .await
        .context("cannot list partition reassignments", g.bootstrap.as_str())?;
    let ids = |v: &[NodeId]| v.iter().map(|n| n.0).collect::<Vec<_>>();
    if g.json {
        let items: Vec<_> = moving
            .iter()
            .map(|m| {
                json!({"topic": m.topic, "partition": m.partition, "replicas": ids(&m.replicas),
                    "adding": ids(&m.adding), "removing": ids(&m.removing)})
            })
            .collect();
        print_json(&json!({ "reassignments": items }));
        return Ok(());
    }
    let join = |v: &[NodeId]| {
        v.iter()
            .map(|n| n.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut table = Table::new(&["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"]);
    for m in &moving {
        table.row(vec![
            m.topic.clone(),
            m.partition.to_string(),
            join(&m.replicas),
            join(&m.adding),
            join(&m.removing),
        ]);
    }
    table.print();
    Ok(())
}
