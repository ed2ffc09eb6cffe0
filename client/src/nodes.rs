//! `NodeDebugContainers`: debug containers on nodes (`nodes/NODE/debug[/NAME]`,
//! `nodedebugcontainers`), their console and their output.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use kube::api::ObjectMeta;
use kube::core::ClusterResourceScope;
use poddebug_types::DebugPhase;
use poddebug_types::node::{KIND_NODE_DEBUG_CONTAINER, NodeDebugContainer, NodeDebugContainerList};
use serde::Deserialize;

use crate::attach::{
    AttachOutcome, AttachedDebugContainer, OutcomeReader, check_params, kube_params,
};
use crate::debug_containers::{GV, esc, request_json};
use crate::error::{Error, Result};
use crate::params::{AttachParams, LogParams};

/// `nodes/NODE/debug` as kube-rs sees it: only a path for kube-rs's attach and log streams
/// (`…/nodes/NODE/debug/NAME/attach`, `…/log`); the node is the dynamic type.
#[derive(Clone, Debug, Default, Deserialize)]
struct NodeDebugPod {
    metadata: ObjectMeta,
}

impl kube::Resource for NodeDebugPod {
    type DynamicType = String;
    type Scope = ClusterResourceScope;

    fn kind(_: &String) -> Cow<'_, str> {
        "NodeDebugContainer".into()
    }
    fn group(_: &String) -> Cow<'_, str> {
        poddebug_types::GROUP.into()
    }
    fn version(_: &String) -> Cow<'_, str> {
        poddebug_types::VERSION.into()
    }
    fn plural(node: &String) -> Cow<'_, str> {
        format!("nodes/{}/debug", esc(node)).into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::api::Attach for NodeDebugPod {}

/// `nodes` in group `poddebug.dev`, for kube-rs's log stream: `…/nodes/NODE/log?container=NAME`.
#[derive(Clone, Debug, Default, Deserialize)]
struct NodeLog {
    metadata: ObjectMeta,
}

impl kube::Resource for NodeLog {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Node".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        poddebug_types::GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        poddebug_types::VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "nodes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::api::Log for NodeLog {}

/// Debug containers on nodes (cluster-wide).
#[derive(Clone)]
pub struct NodeDebugContainers {
    client: kube::Client,
}

impl std::fmt::Debug for NodeDebugContainers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeDebugContainers")
            .finish_non_exhaustive()
    }
}

impl NodeDebugContainers {
    /// The node debug containers of the cluster `client` reaches.
    pub fn new(client: kube::Client) -> Self {
        NodeDebugContainers { client }
    }

    fn path(node: &str, name: Option<&str>) -> String {
        match name {
            Some(n) => format!("{GV}/nodes/{}/debug/{}", esc(node), esc(n)),
            None => format!("{GV}/nodes/{}/debug", esc(node)),
        }
    }

    /// Starts a debug container on node `node` (its name is `debug.metadata.name`, else
    /// `debug.container.name`, else generated `debugger-xxxxx`; its profile defaults to
    /// `sysadmin`). `dry_run`: everything checked, nothing made.
    pub async fn create(
        &self,
        node: &str,
        debug: &NodeDebugContainer,
        dry_run: bool,
    ) -> Result<NodeDebugContainer> {
        let mut body = debug.clone();
        if body.api_version.is_empty() {
            body.api_version = poddebug_types::API_VERSION.to_owned();
        }
        if body.kind.is_empty() {
            body.kind = KIND_NODE_DEBUG_CONTAINER.to_owned();
        }
        let name = body
            .metadata
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| Some(body.container.name.clone()).filter(|n| !n.is_empty()));
        let q = if dry_run { "?dryRun=All" } else { "" };
        let bytes = serde_json::to_vec(&body).map_err(Error::Decode)?;
        let uri = format!("{}{q}", Self::path(node, name.as_deref()));
        request_json(&self.client, http::Method::POST, uri, bytes).await
    }

    /// One debug container of `node`.
    pub async fn get(&self, node: &str, name: &str) -> Result<NodeDebugContainer> {
        request_json(
            &self.client,
            http::Method::GET,
            Self::path(node, Some(name)),
            Vec::new(),
        )
        .await
    }

    /// The debug containers of `node`, or of every node (then named `NODE.NAME`).
    pub async fn list(&self, node: Option<&str>) -> Result<NodeDebugContainerList> {
        let uri = match node {
            Some(n) => Self::path(n, None),
            None => format!("{GV}/nodedebugcontainers"),
        };
        request_json(&self.client, http::Method::GET, uri, Vec::new()).await
    }

    /// Deletes a debug container of `node` (its pod).
    pub async fn delete(&self, node: &str, name: &str) -> Result<NodeDebugContainer> {
        request_json(
            &self.client,
            http::Method::DELETE,
            Self::path(node, Some(name)),
            Vec::new(),
        )
        .await
    }

    /// Waits (at most `timeout`) until the debug container runs or has ended.
    pub async fn wait_started(
        &self,
        node: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<NodeDebugContainer> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let o = self.get(node, name).await?;
            let phase = o.status.as_ref().map(|s| s.phase);
            if matches!(phase, Some(DebugPhase::Running | DebugPhase::Terminated)) {
                return Ok(o);
            }
            if tokio::time::Instant::now() >= deadline {
                let waiting = o
                    .status
                    .and_then(|s| s.state)
                    .and_then(|s| s.waiting)
                    .map(|w| {
                        format!(
                            "{}: {}",
                            w.reason.unwrap_or_default(),
                            w.message.unwrap_or_default()
                        )
                    });
                return Err(Error::Timeout {
                    name: name.to_owned(),
                    after: timeout,
                    waiting,
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Attaches to the console of debug container `name` on `node`.
    pub async fn attach(
        &self,
        node: &str,
        name: &str,
        params: &AttachParams,
    ) -> Result<AttachedDebugContainer> {
        check_params(params)?;
        let api = kube::Api::<NodeDebugPod>::all_with(self.client.clone(), &node.to_owned());
        let process = api.attach(name, &kube_params(name, params)).await?;
        let (this, nd, n) = (self.clone(), node.to_owned(), name.to_owned());
        let outcome: OutcomeReader = Arc::new(move || {
            let (this, nd, n) = (this.clone(), nd.clone(), n.clone());
            Box::pin(async move { Ok(outcome_of(&this.get(&nd, &n).await?)) })
        });
        Ok(AttachedDebugContainer::new(
            process, outcome, node, name, params,
        ))
    }

    /// The output of debug container `name` on `node`.
    pub async fn logs(&self, node: &str, name: &str, params: &LogParams) -> Result<String> {
        let api = kube::Api::<NodeLog>::all(self.client.clone());
        Ok(api.logs(node, &params.to_kube(name)).await?)
    }

    /// The output of debug container `name` on `node` as a stream (with `follow`, until it
    /// terminates), from `…/nodes/NODE/log?container=NAME`, which kube-apiserver streams
    /// without cutting it at its request timeout.
    pub async fn log_stream(
        &self,
        node: &str,
        name: &str,
        params: &LogParams,
    ) -> Result<impl futures::AsyncBufRead + use<>> {
        let api = kube::Api::<NodeLog>::all(self.client.clone());
        Ok(api.log_stream(node, &params.to_kube(name)).await?)
    }
}

/// The outcome a node debug container's status shows: `Exited` once terminated.
pub fn outcome_of(o: &NodeDebugContainer) -> Option<AttachOutcome> {
    let status = o.status.as_ref()?;
    crate::attach::outcome_of_state(status.phase, status.state.as_ref())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn stream_paths_are_the_nodes() {
        let node = "node-1".to_owned();
        let r = kube::api::Request::new(NodeDebugPod::url_path(&node, None));
        let ap = kube_params(
            "dbg",
            &AttachParams {
                stdin: true,
                stderr: false,
                tty: true,
                ..Default::default()
            },
        );
        let uri = r.attach("dbg", &ap).unwrap().uri().to_string();
        assert!(
            uri.starts_with("/apis/poddebug.dev/v1alpha1/nodes/node-1/debug/dbg/attach?"),
            "{uri}"
        );
        let r = kube::api::Request::new(NodeLog::url_path(&(), None));
        let uri = r
            .logs("node-1", &LogParams::default().to_kube("dbg"))
            .unwrap()
            .uri()
            .to_string();
        assert!(
            uri.starts_with("/apis/poddebug.dev/v1alpha1/nodes/node-1/log?"),
            "{uri}"
        );
        assert!(uri.contains("container=dbg"), "{uri}");
    }
}
