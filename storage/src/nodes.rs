//! Node debug containers (`nodes/NODE/debug[/NAME]`, `nodedebugcontainers`): one pod each,
//! pinned to the node, in the server's node-debug namespace, always made, read, streamed and
//! deleted with the server's own identity (callers hold no rights there; `nodes/debug` in
//! `poddebug.dev` is their permission).

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use poddebug_types::copy::{LABEL_KIND, label};
use poddebug_types::node::{
    KIND_NODE_DEBUG_CONTAINER, LABEL_NODE_DEBUG, NodeDebugContainer, NodeDebugContainerList,
    NodePodContext, build_node_pod, node_debug_from_pod, pod_name,
};
use poddebug_types::{ApiError, ErrorList, FieldError, GROUP};

use crate::cluster::Cluster;
use crate::phases::Phase;
use crate::prefetch::{PrefetchTarget, read_node};
use crate::{NodeDebugRequest, NodeWatchStream, PodObjectEvent, StorageError, StreamTarget};

/// The resource node debug containers' errors name.
pub(crate) const RESOURCE: &str = "nodedebugcontainers";

fn pods(cluster: &Cluster) -> Api<Pod> {
    Api::namespaced(
        cluster.server_client(),
        &cluster.config().node_debug_namespace,
    )
}

fn not_found(name: &str) -> StorageError {
    ApiError::not_found(RESOURCE, GROUP, name).into()
}

fn invalid(name: &str, field: &str, value: &str, detail: String) -> StorageError {
    let mut errs = ErrorList::new();
    errs.push(FieldError::invalid(field, value, detail));
    ApiError::invalid(GROUP, KIND_NODE_DEBUG_CONTAINER, name, errs).into()
}

/// Start a node debug container.
pub(crate) async fn create(
    cluster: &Cluster,
    req: NodeDebugRequest,
) -> Result<NodeDebugContainer, StorageError> {
    let name = req.name.clone();
    let errs = poddebug_types::names::dns1123_label_errors(&name);
    if let Some(e) = errs.first() {
        return Err(invalid(&name, "metadata.name", &name, e.clone()));
    }
    let pod = pod_name(&req.node, &name);
    if pod.len() > 253 {
        return Err(invalid(
            &name,
            "metadata.name",
            &name,
            format!(
                "the node's name and the debug container's together make a pod name ({pod:?}) \
                 over 253 characters"
            ),
        ));
    }
    let config = cluster.config();
    let phases = &req.phases;
    // The node first: a node that does not exist is kube-apiserver's own 404 (read beside
    // authorization when the handler could).
    let target = PrefetchTarget::Node {
        name: req.node.clone(),
    };
    let prefetched = match &req.prefetch {
        Some(p) => p.take(&target, &req.caller).await,
        None => None,
    };
    match prefetched {
        Some(answer) => drop(answer?),
        None => {
            let client = cluster.server_client();
            let read = read_node(&client, &req.node);
            drop(phases.time(Phase::NodeRead, read).await?);
        }
    }
    let expires_at = crate::ttl::deadline_of(
        KIND_NODE_DEBUG_CONTAINER,
        &config.ttl,
        req.body.ttl_seconds,
        &name,
        jiff::Timestamp::now(),
    )?;
    let expires_at = crate::ttl::earliest(expires_at, req.deadline);
    let mut built = phases.time_sync(Phase::Validation, || {
        build_node_pod(
            &req.body,
            &NodePodContext {
                node: &req.node,
                name: &name,
                namespace: &config.node_debug_namespace,
                profile: req.profile,
                default_image: &config.policy.default_image,
                created_by: &req.caller.user,
                expires_at,
            },
        )
    });
    req.justification.annotate(&mut built.metadata);
    phases.time_sync(Phase::Policy, || {
        poddebug_types::copy::images_of(&built)
            .iter()
            .try_for_each(|image| {
                crate::policy::check_image_for("nodes/debug", &config.policy, &req.node, image)
            })
    })?;
    let params = PostParams {
        dry_run: req.dry_run,
        field_manager: Some(config.reporting_component.clone()),
    };
    let pods = pods(cluster);
    match phases
        .time(Phase::Create, pods.create(&params, &built))
        .await
    {
        Ok(p) => Ok(node_debug_from_pod(&p)),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            Err(ApiError::already_exists(RESOURCE, GROUP, &name).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// The pod of debug container `name` on `node`; 404 when there is none.
pub(crate) async fn get_pod(
    cluster: &Cluster,
    node: &str,
    name: &str,
) -> Result<Pod, StorageError> {
    // The pod's name joins node and name with a dot, which node names may hold too
    // (`nodes/a/debug/b.c` and `nodes/a.b/debug/c` name one pod): the pod must be on the node
    // the path names, with the debug name the path names.
    match pods(cluster).get_opt(&pod_name(node, name)).await? {
        Some(p)
            if label(&p, LABEL_KIND) == Some("node")
                && label(&p, LABEL_NODE_DEBUG) == Some(name)
                && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node) =>
        {
            Ok(p)
        }
        _ => Err(not_found(name)),
    }
}

fn list_params(node: Option<&str>) -> (String, Option<String>) {
    (
        format!("{LABEL_KIND}=node,{LABEL_NODE_DEBUG}"),
        node.map(|n| format!("spec.nodeName={n}")),
    )
}

/// The node debug containers of `node`, or of every node; in the cluster-wide list, names
/// are `NODE.NAME`.
pub(crate) async fn list(
    cluster: &Cluster,
    node: Option<&str>,
) -> Result<NodeDebugContainerList, StorageError> {
    let (labels, fields) = list_params(node);
    let mut params = ListParams::default().labels(&labels);
    if let Some(f) = &fields {
        params = params.fields(f);
    }
    let found = pods(cluster).list(&params).await?;
    let mut meta = found.metadata.clone();
    meta.continue_ = None;
    let items = found
        .items
        .iter()
        .map(|p| named_for(node.is_none(), p))
        .collect();
    Ok(NodeDebugContainerList::new(items, meta))
}

fn named_for(cluster_wide: bool, p: &Pod) -> NodeDebugContainer {
    let mut obj = node_debug_from_pod(p);
    if cluster_wide {
        obj.metadata.name = p.metadata.name.clone();
    }
    obj
}

/// Watch node debug containers (of `node`, or all) from `resource_version`.
pub(crate) async fn watch(
    cluster: &Cluster,
    node: Option<&str>,
    resource_version: &str,
    timeout_seconds: Option<u32>,
) -> Result<NodeWatchStream, StorageError> {
    let (labels, fields) = list_params(node);
    let cluster_wide = node.is_none();
    let what = PodSelection { labels, fields };
    watch_pods(
        &pods(cluster),
        &what,
        resource_version,
        timeout_seconds,
        move |p| named_for(cluster_wide, p),
    )
    .await
}

/// The pods a watch of objects kept as pods selects.
#[derive(Clone, Debug, Default)]
pub(crate) struct PodSelection {
    /// Label selector.
    pub(crate) labels: String,
    /// Field selector.
    pub(crate) fields: Option<String>,
}

/// Watch the pods `what` selects from `resource_version`, each shown by `show`. From "any"
/// version ("" or "0"), as kube-apiserver answers it: the current ones as ADDED first, then the
/// changes since their list (a watch from "0" with bookmarks is refused by v1.36).
pub(crate) async fn watch_pods<T, F>(
    api: &Api<Pod>,
    what: &PodSelection,
    resource_version: &str,
    timeout_seconds: Option<u32>,
    show: F,
) -> Result<std::pin::Pin<Box<dyn futures::Stream<Item = PodObjectEvent<T>> + Send>>, StorageError>
where
    T: Send + 'static,
    F: Fn(&Pod) -> T + Copy + Send + Sync + 'static,
{
    let mut params = WatchParams::default().labels(&what.labels);
    if let Some(f) = &what.fields {
        params = params.fields(f);
    }
    if let Some(t) = timeout_seconds {
        params = params.timeout(t.min(290));
    }
    let (initial, from) = if resource_version.is_empty() || resource_version == "0" {
        let mut lp = ListParams::default().labels(&what.labels);
        if let Some(f) = &what.fields {
            lp = lp.fields(f);
        }
        let list = api.list(&lp).await?;
        let added: Vec<PodObjectEvent<T>> = list
            .items
            .iter()
            .map(|p| PodObjectEvent::Added(show(p)))
            .collect();
        (added, list.metadata.resource_version.unwrap_or_default())
    } else {
        (Vec::new(), resource_version.to_owned())
    };
    let stream = api.watch(&params, &from).await?;
    let changes = stream.filter_map(move |ev| async move {
        match ev {
            Ok(WatchEvent::Added(p)) => Some(PodObjectEvent::Added(show(&p))),
            Ok(WatchEvent::Modified(p)) => Some(PodObjectEvent::Modified(show(&p))),
            Ok(WatchEvent::Deleted(p)) => Some(PodObjectEvent::Deleted(show(&p))),
            Ok(WatchEvent::Bookmark(b)) => {
                Some(PodObjectEvent::Bookmark(b.metadata.resource_version))
            }
            Ok(WatchEvent::Error(e)) => Some(PodObjectEvent::Error(ApiError::from_upstream(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
                    code: Some(i32::from(e.code)),
                    message: Some(e.message),
                    reason: Some(e.reason),
                    status: Some("Failure".to_owned()),
                    ..Default::default()
                },
            ))),
            Err(e) => {
                tracing::debug!(error = %e, "watch of pods ended");
                None
            }
        }
    });
    Ok(Box::pin(futures::stream::iter(initial).chain(changes)))
}

/// Delete debug container `name` on `node` (its pod, the very one read).
pub(crate) async fn delete(
    cluster: &Cluster,
    node: &str,
    name: &str,
    grace_period_seconds: Option<u32>,
) -> Result<NodeDebugContainer, StorageError> {
    let found = get_pod(cluster, node, name).await?;
    let deleted = crate::copies::delete_read(&pods(cluster), found, grace_period_seconds, || {
        not_found(name)
    })
    .await?;
    Ok(node_debug_from_pod(&deleted))
}

/// Where an attach or log of debug container `name` on `node` goes (for attach, once it runs).
pub(crate) async fn stream_target(
    cluster: &Cluster,
    node: &str,
    name: &str,
    wait_running: Option<std::time::Duration>,
) -> Result<StreamTarget, StorageError> {
    let pod = get_pod(cluster, node, name).await?;
    let pod_name = pod_name(node, name);
    let target = crate::target::made_pod_target(
        &pod,
        &cluster.config().node_debug_namespace,
        &pod_name,
        name,
        true,
    )
    .ok_or_else(|| not_found(name))?;
    crate::target::finish(&pods(cluster), pod, target, name, wait_running).await
}
