//! The crates' dependency directions, as the README's Architecture section
//! draws them: `cargo metadata` must show no workspace crate depending on
//! one its row below does not allow. A crate that needs a new neighbour
//! changes this table and the README together, on purpose.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each workspace crate and the workspace crates it may depend on (normal
/// and build dependencies; tests may use more, e.g. the broker's testing
/// feature).
const ALLOWED: &[(&str, &[&str])] = &[
    ("magnetar-model", &[]),
    ("magnetar-controller", &[]),
    ("magnetar-pulsar-wire", &[]),
    ("magnetar-storage", &["magnetar-model"]),
    ("magnetar-replication", &["magnetar-model"]),
    (
        "magnetar-config",
        &["magnetar-model", "magnetar-storage", "magnetar-controller"],
    ),
    (
        "magnetar-metadata",
        &[
            "magnetar-model",
            "magnetar-storage",
            "magnetar-config",
            "magnetar-controller",
            "magnetar-replication",
        ],
    ),
    (
        "magnetar-security",
        &["magnetar-model", "magnetar-config", "magnetar-metadata"],
    ),
    (
        "magnetar-coordinator",
        &[
            "magnetar-model",
            "magnetar-storage",
            "magnetar-config",
            "magnetar-metadata",
        ],
    ),
    (
        "magnetar-broker",
        &[
            "magnetar-model",
            "magnetar-storage",
            "magnetar-config",
            "magnetar-metadata",
            "magnetar-security",
            "magnetar-coordinator",
            "magnetar-controller",
            "magnetar-replication",
        ],
    ),
    (
        "magnetar-pulsar-core",
        &[
            "magnetar-model",
            "magnetar-storage",
            "magnetar-broker",
            "magnetar-pulsar-wire",
        ],
    ),
    // The front ends: each over the broker, never over each other. The
    // Kafka front end reaches peer brokers with the native client.
    (
        "magnetar-kafka",
        &[
            "magnetar-model",
            "magnetar-storage",
            "magnetar-broker",
            "magnetar-client",
        ],
    ),
    (
        "magnetar-pulsar",
        &[
            "magnetar-model",
            "magnetar-storage",
            "magnetar-broker",
            "magnetar-pulsar-wire",
            "magnetar-pulsar-core",
        ],
    ),
    (
        "magnetar-http",
        &[
            "magnetar-model",
            "magnetar-storage",
            "magnetar-broker",
            "magnetar-pulsar-wire",
            "magnetar-pulsar-core",
        ],
    ),
    // The native client and its CLI know no broker code.
    ("magnetar-client", &[]),
    ("magnetar-cli", &["magnetar-client", "magnetar-pulsar-wire"]),
    // The binary composes everything.
    (
        "magnetar",
        &[
            "magnetar-broker",
            "magnetar-kafka",
            "magnetar-pulsar",
            "magnetar-http",
            "magnetar-cli",
        ],
    ),
];

/// Workspace crate -> the workspace crates it depends on (normal and
/// build dependencies).
fn workspace_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .args(["--manifest-path", root])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null() || d["kind"] == "build")
                .map(|d| d["name"].as_str().expect("name").to_string())
                .filter(|n| members.contains(n))
                .collect();
            (p["name"].as_str().expect("name").to_string(), deps)
        })
        .collect()
}

#[test]
fn every_crate_depends_only_on_what_the_architecture_allows() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(c, deps)| (*c, deps.iter().copied().collect()))
        .collect();
    let mut wrong = Vec::new();
    for (krate, deps) in workspace_dependencies() {
        let Some(ok) = allowed.get(krate.as_str()) else {
            wrong.push(format!(
                "{krate} is not in the table: add its row (and a README paragraph)"
            ));
            continue;
        };
        for d in deps {
            if !ok.contains(d.as_str()) {
                wrong.push(format!("{krate} -> {d} is not an allowed direction"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_table_allows_no_loop_and_no_front_end_over_another() {
    // Depth-first over the allowed edges: a loop here would let two crates
    // grow into one again.
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    fn visit<'a>(c: &'a str, allowed: &BTreeMap<&'a str, &'a [&'a str]>, path: &mut Vec<&'a str>) {
        assert!(!path.contains(&c), "loop: {} -> {c}", path.join(" -> "));
        path.push(c);
        for d in allowed.get(c).copied().unwrap_or_default() {
            visit(d, allowed, path);
        }
        path.pop();
    }
    for c in allowed.keys() {
        visit(c, &allowed, &mut Vec::new());
    }
    let front_ends = ["magnetar-kafka", "magnetar-pulsar", "magnetar-http"];
    for f in front_ends {
        for other in front_ends {
            assert!(!allowed[f].contains(&other), "{f} may not import {other}");
        }
    }
    for lower in [
        "magnetar-model",
        "magnetar-storage",
        "magnetar-config",
        "magnetar-metadata",
        "magnetar-security",
        "magnetar-coordinator",
        "magnetar-broker",
    ] {
        assert!(
            !allowed["magnetar-client"].contains(&lower),
            "the client may not import {lower}"
        );
    }
}
