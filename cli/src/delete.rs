//! `kubectl poddebug delete`: stop a debug container, delete a copy of a pod or a node debug
//! container, named as the plugin creates them (`POD NAME`, `POD --copy-to=NAME`,
//! `node/NODE NAME`) or as `kubectl get` lists them (`poddebugcontainer/POD.NAME`,
//! `nodedebugcontainer/NODE.NAME`).

use std::process::ExitCode;
use std::time::Duration;

use poddebug_client::types::node::split_pod_name;
use poddebug_client::types::resource::{collection_name, split_collection_name};
use poddebug_client::{Copies, DebugContainers, NodeDebugContainers};

use crate::fail;

/// What a `delete` command line names.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    /// Debug container `name` of pod `pod`.
    DebugContainer { pod: String, name: String },
    /// Copy `name` of pod `pod`.
    Copy { pod: String, name: String },
    /// Debug container `name` of node `node`.
    Node { node: String, name: String },
}

/// The resource types a `TYPE/NAME` argument may name, as kubectl resolves them.
fn kind_of(ty: &str) -> Option<&'static str> {
    let ty = ty.strip_suffix(".poddebug.dev").unwrap_or(ty);
    match ty {
        "pod" | "pods" | "po" => Some("pod"),
        "node" | "nodes" | "no" => Some("node"),
        "poddebugcontainer" | "poddebugcontainers" | "pdc" => Some("pdc"),
        "nodedebugcontainer" | "nodedebugcontainers" => Some("ndc"),
        _ => None,
    }
}

/// Read the command line: `target` (`POD`, `node/NODE`, `TYPE/POD.NAME`), the debug
/// container's name, `--copy-to`.
pub fn target(target: &str, name: Option<&str>, copy_to: Option<&str>) -> Result<Target, String> {
    let (kind, rest) = match target.split_once('/') {
        Some((ty, rest)) => (
            kind_of(ty).ok_or_else(|| {
                format!(
                    "the server doesn't have a resource type {ty:?} here: name a pod, \
                     node/NODE, poddebugcontainer/POD.NAME or nodedebugcontainer/NODE.NAME"
                )
            })?,
            rest,
        ),
        None => ("pod", target),
    };
    if rest.is_empty() {
        return Err(format!("{target:?}: a name is required"));
    }
    let own = |what: &str| -> Result<String, String> {
        name.map(str::to_owned).ok_or_else(|| {
            format!(
                "a debug container name is required: kubectl poddebug delete {target} NAME{what}"
            )
        })
    };
    let none_more = |t: Target| -> Result<Target, String> {
        match (name, copy_to) {
            (None, None) => Ok(t),
            _ => Err(format!(
                "{target} names one object already: no other name or --copy-to with it"
            )),
        }
    };
    match kind {
        "pod" => match copy_to {
            Some(c) => Ok(Target::Copy {
                pod: rest.to_owned(),
                name: c.to_owned(),
            }),
            None => Ok(Target::DebugContainer {
                pod: rest.to_owned(),
                name: own(" (or --copy-to=NAME for a copy of the pod)")?,
            }),
        },
        "node" => {
            if copy_to.is_some() {
                return Err("--copy-to is not supported with a node".to_owned());
            }
            Ok(Target::Node {
                node: rest.to_owned(),
                name: own("")?,
            })
        }
        "pdc" => {
            let (pod, n) = split_collection_name(rest)
                .ok_or_else(|| format!("{target:?}: expected poddebugcontainer/POD.NAME"))?;
            none_more(Target::DebugContainer {
                pod: pod.to_owned(),
                name: n.to_owned(),
            })
        }
        _ => {
            let (node, n) = split_pod_name(rest)
                .ok_or_else(|| format!("{target:?}: expected nodedebugcontainer/NODE.NAME"))?;
            none_more(Target::Node {
                node: node.to_owned(),
                name: n.to_owned(),
            })
        }
    }
}

/// Do it, and say what was done with the name `kubectl get` knows.
pub async fn run(client: &kube::Client, ns: &str, t: Target, grace: Option<u64>) -> ExitCode {
    if grace.is_some() && !matches!(t, Target::DebugContainer { .. }) {
        eprintln!("error: --grace-period applies to debug containers only");
        return ExitCode::FAILURE;
    }
    match t {
        Target::DebugContainer { pod, name } => {
            let api = DebugContainers::new(client.clone(), ns);
            match api.stop(&pod, &name, grace.map(Duration::from_secs)).await {
                Ok(_) => {
                    println!(
                        "poddebugcontainer.poddebug.dev/{} stopped",
                        collection_name(&pod, &name)
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        Target::Copy { pod, name } => {
            match Copies::new(client.clone(), ns).delete(&pod, &name).await {
                Ok(_) => {
                    println!("pod/{name} deleted (a copy of pod {pod})");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        Target::Node { node, name } => {
            match NodeDebugContainers::new(client.clone())
                .delete(&node, &name)
                .await
            {
                Ok(_) => {
                    println!(
                        "nodedebugcontainer.poddebug.dev/{} deleted",
                        poddebug_client::types::node::pod_name(&node, &name)
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
    }
}

/// The command that deletes a copy, for the hints the plugin prints.
pub fn copy_hint(ns: &str, pod: &str, copy: &str) -> String {
    format!("delete the copy with: kubectl poddebug delete -n {ns} {pod} --copy-to={copy}")
}

/// The command that deletes a node debug container.
pub fn node_hint(node: &str, name: &str) -> String {
    format!("delete it with: kubectl poddebug delete node/{node} {name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dc(pod: &str, name: &str) -> Target {
        Target::DebugContainer {
            pod: pod.into(),
            name: name.into(),
        }
    }

    #[test]
    fn every_form_the_plugin_prints_is_read_back() {
        assert_eq!(target("web", Some("dbg"), None), Ok(dc("web", "dbg")));
        assert_eq!(target("pod/web", Some("dbg"), None), Ok(dc("web", "dbg")));
        assert_eq!(
            target("poddebugcontainer.poddebug.dev/web.v2.dbg", None, None),
            Ok(dc("web.v2", "dbg"))
        );
        assert_eq!(target("pdc/web.dbg", None, None), Ok(dc("web", "dbg")));
        assert_eq!(
            target("web", None, Some("web-debug")),
            Ok(Target::Copy {
                pod: "web".into(),
                name: "web-debug".into()
            })
        );
        let node = Target::Node {
            node: "worker-1".into(),
            name: "dbg".into(),
        };
        assert_eq!(
            target("node/worker-1", Some("dbg"), None).as_ref(),
            Ok(&node)
        );
        assert_eq!(
            target("nodedebugcontainer.poddebug.dev/worker-1.dbg", None, None).as_ref(),
            Ok(&node)
        );
    }

    #[test]
    fn incomplete_or_contradictory_names_are_refused() {
        assert!(target("web", None, None).unwrap_err().contains("--copy-to"));
        assert!(target("node/n1", None, None).is_err());
        assert!(target("node/n1", Some("d"), Some("c")).is_err());
        assert!(target("pdc/web.dbg", Some("other"), None).is_err());
        assert!(target("pdc/web", None, None).is_err());
        assert!(
            target("deployment/web", Some("d"), None)
                .unwrap_err()
                .contains("resource type")
        );
        assert!(target("node/", Some("d"), None).is_err());
    }
}
