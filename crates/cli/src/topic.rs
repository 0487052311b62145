//! `magnetar topic ...`

use clap::{Args, Subcommand};
use client::{AlterConfigOp, ConfigResource, NewTopic};
use serde_json::json;

use crate::error::{check_items, CliError, Context};
use crate::output::{print_json, Table};
use crate::{key_value, GlobalArgs};

/// `magnetar topic` arguments.
#[derive(Debug, Args)]
pub struct TopicArgs {
    #[command(subcommand)]
    action: TopicAction,
    #[command(flatten)]
    global: GlobalArgs,
}

#[derive(Debug, Subcommand)]
enum TopicAction {
    /// Create a topic.
    Create {
        /// Topic name.
        name: String,
        /// Partitions (default: the broker's num.partitions).
        #[arg(long, short, default_value_t = -1)]
        partitions: i32,
        /// Replication factor (default: the broker's).
        #[arg(long, short, default_value_t = -1)]
        replication_factor: i16,
        /// A topic config override, KEY=VALUE (repeatable).
        #[arg(long = "config", short = 'c', value_name = "KEY=VALUE")]
        configs: Vec<String>,
        /// Only check that the broker would accept it.
        #[arg(long)]
        validate_only: bool,
    },
    /// List topics.
    List {
        /// Include internal topics such as __consumer_offsets.
        #[arg(long)]
        internal: bool,
    },
    /// Show a topic's partitions and configuration.
    Describe {
        /// Topic name.
        name: String,
    },
    /// Delete topics.
    Delete {
        /// Topic names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Change a topic's configuration or grow its partitions.
    Alter {
        /// Topic name.
        name: String,
        /// Set a config, KEY=VALUE (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Remove a config override, KEY (repeatable).
        #[arg(long = "delete", value_name = "KEY")]
        delete: Vec<String>,
        /// Grow to this many partitions.
        #[arg(long)]
        partitions: Option<i32>,
    },
    /// Move partitions to other brokers: the new replicas copy the data,
    /// then the replicas not in the target are dropped.
    Reassign {
        /// Topic name.
        name: String,
        /// A partition to move (repeatable; default: every partition).
        #[arg(long = "partition", short = 'p')]
        partitions: Vec<i32>,
        /// The target brokers, comma-separated, the preferred leader first.
        #[arg(long, value_delimiter = ',', required_unless_present = "cancel")]
        replicas: Vec<i32>,
        /// Cancel the move under way instead (back to the replicas before it).
        #[arg(long, conflicts_with = "replicas")]
        cancel: bool,
        /// Wait until the moves complete.
        #[arg(long)]
        wait: bool,
    },
    /// List the partition reassignments under way.
    Reassignments,
    /// Look up a topic's partitions; never creates it unless asked and allowed.
    Partitions {
        /// Topic name.
        name: String,
        /// Let the broker create the topic if its policy allows (PIP-344).
        #[arg(long)]
        create_if_allowed: bool,
    },
}

/// Runs `magnetar topic`.
pub async fn run(args: TopicArgs) -> Result<(), CliError> {
    let g = &args.global;
    let admin = g.admin().await?;
    let b = g.bootstrap.as_str();
    match args.action {
        TopicAction::Create {
            name,
            partitions,
            replication_factor,
            configs,
            validate_only,
        } => {
            let mut t = NewTopic::new(&name, partitions).replication_factor(replication_factor);
            for c in &configs {
                let (k, v) = key_value(c)?;
                t = t.config(k, v);
            }
            let res = admin
                .create_topics(&[t], validate_only)
                .await
                .context(format!("cannot create topic {name}"), b)?;
            let (_, r) = res
                .into_iter()
                .next()
                .ok_or_else(|| CliError::Usage("no result".into()))?;
            let created = r.context(format!("cannot create topic {name}"), b)?;
            let id = created.id.map(|i| i.to_string()).unwrap_or_default();
            if g.json {
                print_json(
                    &json!({"topic": name, "id": id, "partitions": created.partitions,
                    "replication_factor": created.replication_factor, "validate_only": validate_only}),
                );
            } else if validate_only {
                println!(
                    "topic {name} would be created with {} partitions",
                    created.partitions
                );
            } else {
                println!(
                    "created topic {name} ({} partitions, id {id})",
                    created.partitions
                );
            }
        }
        TopicAction::List { internal } => {
            let names = admin
                .list_topics(internal)
                .await
                .context("cannot list topics", b)?;
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let described = if refs.is_empty() {
                Vec::new()
            } else {
                admin
                    .describe_topics(&refs)
                    .await
                    .context("cannot describe topics", b)?
            };
            if g.json {
                let topics: Vec<_> = described
                    .iter()
                    .filter_map(|(n, r)| r.as_ref().ok().map(|t| (n, t)))
                    .map(|(n, t)| {
                        json!({"topic": n, "partitions": t.partitions.len(),
                            "id": t.id.map(|i| i.to_string()), "internal": t.is_internal})
                    })
                    .collect();
                print_json(&json!({ "topics": topics }));
            } else {
                let mut table = Table::new(&["TOPIC", "PARTITIONS", "ID"]);
                for (n, r) in &described {
                    if let Ok(t) = r {
                        table.row(vec![
                            n.clone(),
                            t.partitions.len().to_string(),
                            t.id.map(|i| i.to_string()).unwrap_or_default(),
                        ]);
                    }
                }
                table.print();
            }
        }
        TopicAction::Describe { name } => {
            let (_, r) = admin
                .describe_topics(&[&name])
                .await
                .context(format!("cannot describe {name}"), b)?
                .into_iter()
                .next()
                .ok_or_else(|| CliError::Usage("no result".into()))?;
            let t = r.context(format!("cannot describe {name}"), b)?;
            let configs = admin
                .describe_configs(&[ConfigResource::Topic(name.clone())])
                .await
                .context(format!("cannot describe configs of {name}"), b)?
                .into_iter()
                .next()
                .and_then(|(_, r)| r.ok())
                .unwrap_or_default();
            if g.json {
                let parts: Vec<_> = t
                    .partitions
                    .iter()
                    .map(|p| {
                        json!({"partition": p.partition, "leader": p.leader.map(|n| n.0), "leader_epoch": p.leader_epoch,
                            "replicas": p.replicas.iter().map(|n| n.0).collect::<Vec<_>>(),
                            "isr": p.isr.iter().map(|n| n.0).collect::<Vec<_>>(),
                            "offline": p.offline.iter().map(|n| n.0).collect::<Vec<_>>()})
                    })
                    .collect();
                let cfg: serde_json::Map<String, serde_json::Value> = configs
                    .iter()
                    .map(|c| (c.name.clone(), json!(c.value)))
                    .collect();
                print_json(
                    &json!({"topic": name, "id": t.id.map(|i| i.to_string()), "internal": t.is_internal,
                    "partitions": parts, "configs": cfg}),
                );
            } else {
                println!(
                    "topic {name}  id {}  partitions {}",
                    t.id.map(|i| i.to_string()).unwrap_or_default(),
                    t.partitions.len()
                );
                let mut table =
                    Table::new(&["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"]);
                for p in &t.partitions {
                    let ids = |v: &[client::NodeId]| {
                        v.iter()
                            .map(|n| n.0.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    };
                    table.row(vec![
                        p.partition.to_string(),
                        p.leader
                            .map(|n| n.0.to_string())
                            .unwrap_or_else(|| "-".into()),
                        p.leader_epoch.to_string(),
                        ids(&p.replicas),
                        ids(&p.isr),
                        ids(&p.offline),
                    ]);
                }
                table.print();
                println!();
                let mut table = Table::new(&["CONFIG", "VALUE", "DEFAULT"]);
                for c in &configs {
                    table.row(vec![
                        c.name.clone(),
                        c.value.clone().unwrap_or_default(),
                        if c.is_default() {
                            "yes".into()
                        } else {
                            "no".into()
                        },
                    ]);
                }
                table.print();
            }
        }
        TopicAction::Delete { names } => {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let res = admin
                .delete_topics(&refs)
                .await
                .context("cannot delete topics", b)?;
            if g.json {
                let items: Vec<_> = res
                    .iter()
                    .map(|(n, r)| json!({"topic": n, "deleted": r.is_ok(), "error": r.as_ref().err().map(|e| e.to_string())}))
                    .collect();
                print_json(&json!({ "results": items }));
            } else {
                for (n, r) in &res {
                    if r.is_ok() {
                        println!("deleted topic {n}");
                    }
                }
            }
            check_items(&res, "topics")?;
        }
        TopicAction::Alter {
            name,
            set,
            delete,
            partitions,
        } => {
            let mut ops = Vec::new();
            for s in &set {
                let (k, v) = key_value(s)?;
                ops.push(AlterConfigOp::set(k, v));
            }
            for k in &delete {
                ops.push(AlterConfigOp::delete(k.clone()));
            }
            if ops.is_empty() && partitions.is_none() {
                return Err(CliError::Usage(
                    "nothing to alter: give --set, --delete or --partitions".into(),
                ));
            }
            if let Some(n) = partitions {
                let res = admin
                    .create_partitions(&[(name.as_str(), n)], false)
                    .await
                    .context(format!("cannot grow {name}"), b)?;
                check_items(&res, "topics")?;
            }
            if !ops.is_empty() {
                let res = admin
                    .incremental_alter_configs(&[(ConfigResource::Topic(name.clone()), ops)], false)
                    .await
                    .context(format!("cannot alter {name}"), b)?;
                let named: Vec<(String, client::Result<()>)> =
                    res.into_iter().map(|(_, r)| (name.clone(), r)).collect();
                check_items(&named, "topics")?;
            }
            if g.json {
                print_json(&json!({"topic": name, "altered": true}));
            } else {
                println!("altered topic {name}");
            }
        }
        TopicAction::Reassign {
            name,
            partitions,
            replicas,
            cancel,
            wait,
        } => {
            let target = (!cancel).then_some(replicas);
            crate::reassign::reassign(g, &admin, &name, partitions, target, wait).await?;
        }
        TopicAction::Reassignments => crate::reassign::list(g, &admin).await?,
        TopicAction::Partitions {
            name,
            create_if_allowed,
        } => {
            let parts = admin
                .get_partitions_for_topic(&name, create_if_allowed)
                .await
                .context(format!("no partitions for topic {name}"), b)?;
            if g.json {
                print_json(&json!({"topic": name, "partitions": parts}));
            } else {
                let list: Vec<String> = parts.iter().map(i32::to_string).collect();
                println!("{name}: {} partitions: {}", parts.len(), list.join(" "));
            }
        }
    }
    Ok(())
}
