//! The layering check: store-index → delta-fifo → reflector → shared-informer → workqueue →
//! controller.
//!
//! Each layered crate may have a normal (non-dev, non-build) dependency on at most one workspace
//! crate: the one directly below it. Dev-dependencies are free (tests may use the simulated API
//! server or any layer). Crates outside the layer list (xtask, the test crates) are not checked.
//!
//! And no layered crate depends, in any way, on kube-rs (`kube`, `kube-*`): the peer comparison's
//! crate (`benches/peer`) is the only place it may appear.

use std::process::Command;

use crate::tools;

/// The layers, bottom first.
pub const LAYERS: [&str; 6] = [
    "store-index",
    "delta-fifo",
    "reflector",
    "shared-informer",
    "workqueue",
    "controller",
];

/// One normal dependency edge between two workspace packages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
}

/// Returns a message for every edge that breaks the layering rule.
pub fn violations(edges: &[Edge]) -> Vec<String> {
    let position = |name: &str| LAYERS.iter().position(|l| *l == name);
    edges
        .iter()
        .filter_map(|edge| {
            let from = position(&edge.from)?;
            let allowed = from.checked_sub(1).map(|below| LAYERS[below]);
            if allowed == Some(edge.to.as_str()) {
                None
            } else {
                Some(format!(
                    "`{}` depends on `{}`; it may depend only on {}",
                    edge.from,
                    edge.to,
                    allowed.map_or("no workspace crate".to_string(), |a| format!("`{a}`"))
                ))
            }
        })
        .collect()
}

/// Returns a message for every dependency (of any kind) of a layered crate on kube-rs.
pub fn peer_violations(deps: &[Edge]) -> Vec<String> {
    deps.iter()
        .filter(|d| LAYERS.contains(&d.from.as_str()))
        .filter(|d| d.to == "kube" || d.to.starts_with("kube-"))
        .map(|d| {
            format!(
                "`{}` depends on `{}`; only the peer benchmark crate may",
                d.from, d.to
            )
        })
        .collect()
}

/// Reads the workspace's normal dependency edges between its members, and every dependency of
/// every member, from `cargo metadata`.
fn workspace_edges() -> Result<(Vec<Edge>, Vec<Edge>), String> {
    let output = Command::new(tools::cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(tools::workspace_root())
        .output()
        .map_err(|e| format!("could not run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata printed invalid JSON: {e}"))?;
    let packages = metadata["packages"]
        .as_array()
        .ok_or("cargo metadata has no `packages` array")?;
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut edges = Vec::new();
    let mut all = Vec::new();
    for package in packages {
        let from = package["name"].as_str().unwrap_or_default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let to = dep["name"].as_str().unwrap_or_default();
            all.push(Edge {
                from: from.to_string(),
                to: to.to_string(),
            });
            let normal = dep["kind"].is_null();
            if normal && members.contains(&to) {
                edges.push(Edge {
                    from: from.to_string(),
                    to: to.to_string(),
                });
            }
        }
    }
    Ok((edges, all))
}

/// `cargo xtask layering`.
pub fn run() -> Result<(), String> {
    let (edges, all) = workspace_edges()?;
    let mut problems = violations(&edges);
    problems.extend(peer_violations(&all));
    for edge in &edges {
        println!("  {} -> {}", edge.from, edge.to);
    }
    if problems.is_empty() {
        println!("layering ok ({} workspace edges)", edges.len());
        Ok(())
    } else {
        Err(format!("layering violated:\n  {}", problems.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str) -> Edge {
        Edge {
            from: from.into(),
            to: to.into(),
        }
    }

    #[test]
    fn each_layer_may_depend_on_the_one_directly_below() {
        let edges = [
            edge("delta-fifo", "store-index"),
            edge("reflector", "delta-fifo"),
            edge("shared-informer", "reflector"),
            edge("workqueue", "shared-informer"),
            edge("controller", "workqueue"),
        ];
        assert!(violations(&edges).is_empty());
    }

    #[test]
    fn skipping_a_layer_is_a_violation() {
        let v = violations(&[edge("reflector", "store-index")]);
        assert_eq!(v.len(), 1);
        assert!(v[0].contains("may depend only on `delta-fifo`"), "{}", v[0]);
    }

    #[test]
    fn depending_upwards_or_on_test_crates_is_a_violation() {
        assert_eq!(violations(&[edge("store-index", "delta-fifo")]).len(), 1);
        assert_eq!(violations(&[edge("delta-fifo", "sim-apiserver")]).len(), 1);
    }

    #[test]
    fn only_crates_outside_the_layers_may_depend_on_kube() {
        let v = peer_violations(&[
            edge("peer-bench", "kube"),
            edge("reflector", "k8s-openapi"),
            edge("reflector", "kube-runtime"),
            edge("shared-informer", "kube"),
        ]);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].contains("`reflector` depends on `kube-runtime`"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn crates_outside_the_layers_are_not_checked() {
        assert!(violations(&[
            edge("xtask", "store-index"),
            edge("integration", "workqueue")
        ])
        .is_empty());
    }
}
