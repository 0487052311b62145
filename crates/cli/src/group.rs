//! `magnetar group ...` and `magnetar coordinator ...`

use clap::{Args, Subcommand};
use client::OffsetSpec;
use serde_json::json;

use crate::error::{check_items, CliError, Context};
use crate::output::{print_json, Table};
use crate::GlobalArgs;

/// `magnetar group` arguments.
#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(subcommand)]
    action: GroupAction,
    #[command(flatten)]
    global: GlobalArgs,
}

#[derive(Debug, Subcommand)]
enum GroupAction {
    /// List groups.
    List,
    /// Show a group's state and members.
    Describe {
        /// Group id.
        group: String,
    },
    /// Show a group's committed offsets, the log end and the lag.
    Offsets {
        /// Group id.
        group: String,
    },
    /// Reset a group's committed offsets (the group must have no members).
    Reset {
        /// Group id.
        group: String,
        /// The topic whose offsets to reset (all its partitions).
        #[arg(long)]
        topic: String,
        /// earliest, latest, an offset, or @TIMESTAMP_MS.
        #[arg(long)]
        to: String,
        /// Show what would be committed without committing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `magnetar coordinator` arguments.
#[derive(Debug, Args)]
pub struct CoordinatorArgs {
    /// Group ids.
    #[arg(required = true)]
    groups: Vec<String>,
    #[command(flatten)]
    global: GlobalArgs,
}

/// Runs `magnetar group`.
pub async fn run(args: GroupArgs) -> Result<(), CliError> {
    let g = &args.global;
    let b = g.bootstrap.as_str();
    let admin = g.admin().await?;
    match args.action {
        GroupAction::List => {
            let groups = admin.list_groups().await.context("cannot list groups", b)?;
            if g.json {
                let items: Vec<_> = groups
                    .iter()
                    .map(|l| json!({"group": l.group_id, "state": l.state, "type": l.group_type, "protocol_type": l.protocol_type}))
                    .collect();
                print_json(&json!({ "groups": items }));
            } else {
                let mut t = Table::new(&["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"]);
                for l in groups {
                    t.row(vec![l.group_id, l.state, l.group_type, l.protocol_type]);
                }
                t.print();
            }
        }
        GroupAction::Describe { group } => {
            let (_, r) = admin
                .describe_groups(&[&group])
                .await
                .context(format!("cannot describe group {group}"), b)?
                .into_iter()
                .next()
                .ok_or_else(|| CliError::Usage("no result".into()))?;
            let d = r.context(format!("cannot describe group {group}"), b)?;
            if d.state == "Dead" {
                return Err(group_not_found(&group, b));
            }
            if g.json {
                let members: Vec<_> = d
                    .members
                    .iter()
                    .map(|m| json!({"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id, "host": m.client_host}))
                    .collect();
                print_json(
                    &json!({"group": group, "state": d.state, "protocol_type": d.protocol_type,
                    "protocol": d.protocol, "members": members}),
                );
            } else {
                println!(
                    "group {group}  state {}  protocol {} {}",
                    d.state, d.protocol_type, d.protocol
                );
                let mut t = Table::new(&["MEMBER", "INSTANCE", "CLIENT", "HOST"]);
                for m in d.members {
                    t.row(vec![
                        m.member_id,
                        m.group_instance_id.unwrap_or_default(),
                        m.client_id,
                        m.client_host,
                    ]);
                }
                t.print();
            }
        }
        GroupAction::Offsets { group } => {
            let offsets = admin
                .list_group_offsets(&group)
                .await
                .context(format!("cannot fetch offsets of {group}"), b)?;
            // OffsetFetch does not tell a group without commits from one
            // that does not exist; DescribeGroups does.
            if offsets.is_empty() {
                ensure_group_exists(&admin, &group, b).await?;
            }
            let parts: Vec<(&str, i32)> = offsets
                .iter()
                .map(|o| (o.topic.as_str(), o.partition))
                .collect();
            let ends = if parts.is_empty() {
                Vec::new()
            } else {
                admin
                    .list_offsets(&parts, OffsetSpec::Latest)
                    .await
                    .context("cannot look up log end offsets", b)?
            };
            let end_of = |t: &str, p: i32| {
                ends.iter()
                    .find(|((et, ep), _)| et == t && *ep == p)
                    .and_then(|(_, r)| r.as_ref().ok().map(|o| o.offset))
            };
            if g.json {
                let items: Vec<_> = offsets
                    .iter()
                    .map(|o| {
                        let end = end_of(&o.topic, o.partition);
                        json!({"topic": o.topic, "partition": o.partition, "offset": o.offset,
                            "log_end": end, "lag": end.map(|e| (e - o.offset).max(0))})
                    })
                    .collect();
                print_json(&json!({"group": group, "offsets": items}));
            } else {
                let mut t = Table::new(&["TOPIC", "PARTITION", "OFFSET", "LOG-END", "LAG"]);
                for o in &offsets {
                    let end = end_of(&o.topic, o.partition);
                    t.row(vec![
                        o.topic.clone(),
                        o.partition.to_string(),
                        o.offset.to_string(),
                        end.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
                        end.map(|e| (e - o.offset).max(0).to_string())
                            .unwrap_or_else(|| "-".into()),
                    ]);
                }
                t.print();
            }
        }
        GroupAction::Reset {
            group,
            topic,
            to,
            dry_run,
        } => {
            let spec = match to.as_str() {
                "earliest" => Some(OffsetSpec::Earliest),
                "latest" => Some(OffsetSpec::Latest),
                s if s.starts_with('@') => {
                    Some(OffsetSpec::Timestamp(s[1..].parse().map_err(|_| {
                        CliError::Usage(format!("bad timestamp in --to {s}"))
                    })?))
                }
                _ => None,
            };
            let parts = admin
                .get_partitions_for_topic(&topic, false)
                .await
                .context(format!("cannot reset offsets on {topic}"), b)?;
            let targets: Vec<(String, i32, i64)> = match spec {
                Some(spec) => {
                    let asked: Vec<(&str, i32)> =
                        parts.iter().map(|p| (topic.as_str(), *p)).collect();
                    let found = admin
                        .list_offsets(&asked, spec)
                        .await
                        .context("cannot look up offsets", b)?;
                    check_items(
                        &found
                            .iter()
                            .map(|((t, p), r)| (format!("{t}-{p}"), r.clone()))
                            .collect::<Vec<_>>(),
                        "partitions",
                    )?;
                    let mut out = Vec::new();
                    for ((t, p), r) in found {
                        let o = r.context("cannot look up offsets", b)?;
                        // A timestamp after every record resets to the end.
                        let offset = if o.offset < 0 {
                            admin
                                .list_offsets(&[(t.as_str(), p)], OffsetSpec::Latest)
                                .await
                                .context("cannot look up offsets", b)?
                                .remove(0)
                                .1
                                .context("cannot look up offsets", b)?
                                .offset
                        } else {
                            o.offset
                        };
                        out.push((t, p, offset));
                    }
                    out
                }
                None => {
                    let o: i64 = to.parse().map_err(|_| {
                        CliError::Usage(format!(
                            "--to must be earliest, latest, an offset or @TIMESTAMP, not {to:?}"
                        ))
                    })?;
                    clamp_to_log(&admin, &topic, &parts, o, b).await?
                }
            };
            if !dry_run {
                let refs: Vec<(&str, i32, i64)> = targets
                    .iter()
                    .map(|(t, p, o)| (t.as_str(), *p, *o))
                    .collect();
                let res = admin
                    .alter_group_offsets(&group, &refs)
                    .await
                    .context(format!("cannot reset offsets of {group}"), b)?;
                let named: Vec<(String, client::Result<()>)> = res
                    .into_iter()
                    .map(|((t, p), r)| (format!("{t}-{p}"), r))
                    .collect();
                check_items(&named, "partitions")?;
            }
            if g.json {
                let items: Vec<_> = targets
                    .iter()
                    .map(|(t, p, o)| json!({"topic": t, "partition": p, "offset": o}))
                    .collect();
                print_json(&json!({"group": group, "dry_run": dry_run, "offsets": items}));
            } else {
                if dry_run {
                    println!("dry run: nothing was committed; without --dry-run group {group} would get:");
                }
                let mut t = Table::new(&["TOPIC", "PARTITION", "NEW-OFFSET"]);
                for (topic, p, o) in &targets {
                    t.row(vec![topic.clone(), p.to_string(), o.to_string()]);
                }
                t.print();
            }
        }
    }
    Ok(())
}

fn group_not_found(group: &str, broker: &str) -> CliError {
    CliError::Client {
        context: format!("group {group}"),
        broker: broker.to_string(),
        source: client::Error::NotFound(format!("group {group} does not exist")),
    }
}

/// Not found (exit 3) unless the broker knows `group`.
async fn ensure_group_exists(admin: &client::Admin, group: &str, b: &str) -> Result<(), CliError> {
    let described = admin
        .describe_groups(&[group])
        .await
        .context(format!("cannot describe group {group}"), b)?;
    match described.into_iter().next() {
        Some((_, Ok(d))) if d.state != "Dead" => Ok(()),
        Some((_, Err(e))) if crate::error::client_code(&e) != crate::error::EXIT_NOT_FOUND => {
            Err(e).context(format!("cannot describe group {group}"), b)
        }
        _ => Err(group_not_found(group, b)),
    }
}

/// `offset` for every partition, clamped to the partition's log (as Kafka's
/// tool does), with a note on stderr for each partition where it moved.
async fn clamp_to_log(
    admin: &client::Admin,
    topic: &str,
    parts: &[i32],
    offset: i64,
    b: &str,
) -> Result<Vec<(String, i32, i64)>, CliError> {
    let asked: Vec<(&str, i32)> = parts.iter().map(|p| (topic, *p)).collect();
    let earliest = admin
        .list_offsets(&asked, OffsetSpec::Earliest)
        .await
        .context("cannot look up offsets", b)?;
    let latest = admin
        .list_offsets(&asked, OffsetSpec::Latest)
        .await
        .context("cannot look up offsets", b)?;
    let find = |list: &client::PerItem<(String, i32), client::ListedOffset>, p: i32| {
        list.iter()
            .find(|((_, lp), _)| *lp == p)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| Err(client::Error::NotFound(format!("{topic}-{p}"))))
    };
    let mut out = Vec::with_capacity(parts.len());
    for &p in parts {
        let lo = find(&earliest, p)
            .context("cannot look up offsets", b)?
            .offset;
        let hi = find(&latest, p)
            .context("cannot look up offsets", b)?
            .offset;
        let o = offset.clamp(lo, hi);
        if o > offset {
            eprintln!("{topic}-{p}: offset {offset} is before the earliest offset; using {o}");
        } else if o < offset {
            eprintln!("{topic}-{p}: offset {offset} is past the latest offset; using {o}");
        }
        out.push((topic.to_string(), p, o));
    }
    Ok(out)
}

/// Runs `magnetar coordinator`.
pub async fn coordinator(args: CoordinatorArgs) -> Result<(), CliError> {
    let g = &args.global;
    let b = g.bootstrap.as_str();
    let admin = g.admin().await?;
    let refs: Vec<&str> = args.groups.iter().map(String::as_str).collect();
    let res = admin
        .find_coordinators(&refs)
        .await
        .context("cannot find coordinators", b)?;
    if g.json {
        let items: Vec<_> = res
            .iter()
            .map(|(grp, r)| match r {
                Ok(n) => json!({"group": grp, "node": n.id.0, "host": n.host, "port": n.port}),
                Err(e) => json!({"group": grp, "error": e.to_string()}),
            })
            .collect();
        print_json(&json!({ "coordinators": items }));
    } else {
        let mut t = Table::new(&["GROUP", "NODE", "HOST", "PORT"]);
        for (grp, r) in &res {
            if let Ok(n) = r {
                t.row(vec![
                    grp.clone(),
                    n.id.0.to_string(),
                    n.host.clone(),
                    n.port.to_string(),
                ]);
            }
        }
        t.print();
    }
    check_items(&res, "groups")
}
