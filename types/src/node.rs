//! `NodeDebugContainer`: a debug container on a node (`kubectl debug node/NODE`), run as a pod
//! pinned to the node in the server's node-debug namespace, and the pure functions that build
//! that pod and read it back.
//!
//! The pod's name is `NODE.NAME` (a node name is a DNS subdomain, a debug name a DNS label, so
//! the pair is recovered from the last dot), its container is named `NAME`.
//!
//! Node profiles, as kubectl's for `debug node/…`:
//!
//! | profile | host PID, network, IPC | `/` at `/host` | container securityContext |
//! |---|---|---|---|
//! | `legacy` | yes | yes | none |
//! | `general` | yes | yes | none |
//! | `baseline` | no | no | none |
//! | `restricted` | no | no | non-root, all capabilities dropped, no privilege escalation, RuntimeDefault seccomp |
//! | `netadmin` | yes | no | adds NET_ADMIN, NET_RAW |
//! | `sysadmin` | yes | yes | privileged |
//!
//! What a node debug pod is allowed is decided on what it gets, never on the profile it was
//! asked with (recorded in an annotation anyone who may patch the pod can rewrite):
//! [`effective_node_profile`] reads the pod's spec and answers the least profile of the table
//! whose pod grants all of it. On a node `legacy` builds the same pod as `general`, so such a
//! pod is `general`; `baseline` and `restricted` are answered only for a pod that meets that
//! Pod Security level.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, HostPathVolumeSource, Pod, PodSpec, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::copy::{
    ANNOTATION_CREATED_BY, ANNOTATION_EXPIRES_AT, ANNOTATION_PROFILE, LABEL_KIND, annotation,
    apply_profile_to_container, expires_at_of_pod,
};
use crate::pod_security::{Level, level};
use crate::privilege::{Elevation, Privilege, Reach, pod_privileges};
use crate::{API_VERSION, DebugPhase, Profile};

/// Kind of a node debug container.
pub const KIND_NODE_DEBUG_CONTAINER: &str = "NodeDebugContainer";
/// Kind of a list of node debug containers.
pub const KIND_NODE_DEBUG_CONTAINER_LIST: &str = "NodeDebugContainerList";
/// Label of a node debug pod: the debug container's name.
pub const LABEL_NODE_DEBUG: &str = "poddebug.dev/node-debug";
/// Annotation of a node debug pod: the node's name (labels cannot hold every node name).
pub const ANNOTATION_NODE: &str = "poddebug.dev/node";
/// The profile of a node debug container that names none.
pub const DEFAULT_NODE_PROFILE: Profile = Profile::Sysadmin;

/// NodeDebugContainer is a debug container on a node: `POST …/nodes/NODE/debug/NAME`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "dev.poddebug.v1alpha1.NodeDebugContainer")]
pub struct NodeDebugContainer {
    /// `poddebug.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `NodeDebugContainer`.
    #[serde(default)]
    pub kind: String,
    /// `name` is the debug container's name (`NODE.NAME` in the cluster-wide list).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The container to run; `name` defaults to the debug name, `image` to `--default-image`.
    #[serde(default)]
    pub container: Container,
    /// Node profile (default `sysadmin`); creating, attaching to and reading the log of a node
    /// debug container needs `use` on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Seconds after which the server deletes the pod (default `--default-debug-ttl`, at most
    /// `--max-debug-ttl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    /// The debug request (in the same namespace) this is made under: its requester may make,
    /// during its window, exactly what it names without holding `use` on its profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_request: Option<String>,
    /// Why (required when the server runs with `--require-reason`, unless a debug request
    /// gives one). Recorded with the container, its sessions and recordings, the audit record
    /// and the Event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A ticket or incident reference, recorded beside the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// Observed state, read from the pod. Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeDebugContainerStatus>,
}

/// Observed state of a node debug container.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.NodeDebugContainerStatus")]
pub struct NodeDebugContainerStatus {
    /// The node.
    pub node_name: String,
    /// The pod running the container (in the server's node-debug namespace).
    pub pod_name: String,
    /// The pod's namespace.
    pub pod_namespace: String,
    /// Waiting, Running or Terminated.
    pub phase: DebugPhase,
    /// The container's state as the kubelet reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerState>,
    /// When the server deletes the pod; absent without a time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    /// The user who made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// The node profile the pod amounts to, from what it gets (host namespaces, the host's
    /// filesystem, privileges), whatever `profile` says: creating it, attaching to it, reading
    /// its log and joining or moderating its sessions need `use` on this one, and its sessions
    /// are moderated when it is one of the server's `--moderated-profiles`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_profile: Option<String>,
    /// Who approved the debug request it was made under (see `debugRequest`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
}

/// NodeDebugContainerList is a list of node debug containers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.NodeDebugContainerList")]
pub struct NodeDebugContainerList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `NodeDebugContainerList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The node debug containers.
    pub items: Vec<NodeDebugContainer>,
}

impl NodeDebugContainerList {
    /// A list with its `apiVersion` and `kind` set.
    pub fn new(items: Vec<NodeDebugContainer>, metadata: ListMeta) -> Self {
        NodeDebugContainerList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_NODE_DEBUG_CONTAINER_LIST.to_owned(),
            metadata,
            items,
        }
    }
}

/// The pod name of debug container `name` on `node`.
pub fn pod_name(node: &str, name: &str) -> String {
    format!("{node}.{name}")
}

/// The node and debug name a node debug pod's name stands for.
pub fn split_pod_name(pod: &str) -> Option<(&str, &str)> {
    pod.rsplit_once('.')
        .filter(|(n, d)| !n.is_empty() && !d.is_empty())
}

/// Whether a profile gives the node debug pod the host's namespaces.
fn host_namespaces(p: Profile) -> bool {
    matches!(
        p,
        Profile::Legacy | Profile::General | Profile::Netadmin | Profile::Sysadmin
    )
}

/// Whether a profile mounts the host's root at `/host`.
fn host_root(p: Profile) -> bool {
    matches!(p, Profile::Legacy | Profile::General | Profile::Sysadmin)
}

/// The profile table above, in words, for `DebugProfile` and the docs.
pub fn node_profile_description(p: Profile) -> String {
    format!(
        "host namespaces: {}; host root at /host: {}",
        if host_namespaces(p) { "yes" } else { "no" },
        if host_root(p) { "yes" } else { "no" }
    )
}

/// The least node profile whose pod (the table in the module docs) grants everything `pod`
/// gets, read from its spec, with the setting that decided it (empty for `baseline` and
/// `restricted`):
///
/// * `sysadmin` for a privilege only it grants (privileged, a capability of no other profile,
///   unconfined seccomp or AppArmor, an unsafe sysctl…), or `netadmin`'s capabilities together
///   with the host's filesystem;
/// * `netadmin` for `NET_ADMIN` or `NET_RAW` (with or without the host's namespaces);
/// * `general` for the host's filesystem, namespaces or ports, a probe aimed at another host,
///   or a capability beyond Pod Security baseline that no gated profile grants (`SYS_PTRACE`);
/// * else `restricted` when the pod meets Pod Security `restricted`, and `baseline`.
pub fn effective_node_profile(pod: &Pod) -> Elevation {
    let found = pod_privileges(pod);
    let first = |r: Reach| found.iter().find(|p| p.reach == r);
    let pick = |profile: Profile, p: &Privilege| Elevation {
        profile,
        setting: p.to_string(),
    };
    if let Some(p) = first(Reach::Node) {
        return pick(Profile::Sysadmin, p);
    }
    match (first(Reach::NetAdmin), first(Reach::HostFilesystem)) {
        (Some(net), Some(fs)) => {
            return Elevation {
                profile: Profile::Sysadmin,
                setting: format!("{fs} together with {net}"),
            };
        }
        (Some(net), None) => return pick(Profile::Netadmin, net),
        _ => {}
    }
    if let Some(p) = first(Reach::HostFilesystem)
        .or_else(|| first(Reach::Host))
        .or_else(|| first(Reach::Ungated))
    {
        return pick(Profile::General, p);
    }
    let profile = match level(pod) {
        Level::Restricted => Profile::Restricted,
        _ => Profile::Baseline,
    };
    Elevation {
        profile,
        setting: String::new(),
    }
}

/// What [`build_node_pod`] needs besides the request.
#[derive(Clone, Debug)]
pub struct NodePodContext<'a> {
    /// The node.
    pub node: &'a str,
    /// The debug name.
    pub name: &'a str,
    /// The node-debug namespace.
    pub namespace: &'a str,
    /// The profile (resolved, permitted).
    pub profile: Profile,
    /// Image of a container that names none.
    pub default_image: &'a str,
    /// The caller.
    pub created_by: &'a str,
    /// When the pod is deleted.
    pub expires_at: Option<jiff::Timestamp>,
}

/// The pod that runs node debug container `ctx.name` on `ctx.node`.
pub fn build_node_pod(req: &NodeDebugContainer, ctx: &NodePodContext<'_>) -> Pod {
    let mut c = req.container.clone();
    c.name = ctx.name.to_owned();
    if c.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
        c.image = Some(ctx.default_image.to_owned());
    }
    // kubectl's node profiles start from an empty securityContext.
    let mut spec = PodSpec {
        node_name: Some(ctx.node.to_owned()),
        restart_policy: Some("Never".to_owned()),
        tolerations: Some(vec![Toleration {
            operator: Some("Exists".to_owned()),
            ..Default::default()
        }]),
        enable_service_links: Some(false),
        automount_service_account_token: Some(false),
        termination_grace_period_seconds: Some(1),
        ..Default::default()
    };
    let host = host_namespaces(ctx.profile);
    spec.host_network = Some(host);
    spec.host_pid = Some(host);
    spec.host_ipc = Some(host);
    if !host {
        spec.hostname = Some(ctx.name.to_owned());
    }
    if host_root(ctx.profile) {
        spec.volumes = Some(vec![Volume {
            name: "host-root".to_owned(),
            host_path: Some(HostPathVolumeSource {
                path: "/".to_owned(),
                type_: None,
            }),
            ..Default::default()
        }]);
        c.volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: "host-root".to_owned(),
                mount_path: "/host".to_owned(),
                ..Default::default()
            });
    }
    match ctx.profile {
        // Host namespaces and the root mount are all these do.
        Profile::Legacy | Profile::General | Profile::Baseline => {}
        p => apply_profile_to_container(p, &mut c),
    }
    let mut annotations = BTreeMap::from([
        (ANNOTATION_CREATED_BY.to_owned(), ctx.created_by.to_owned()),
        (
            ANNOTATION_PROFILE.to_owned(),
            ctx.profile.as_str().to_owned(),
        ),
        (ANNOTATION_NODE.to_owned(), ctx.node.to_owned()),
    ]);
    if let Some(at) = ctx.expires_at {
        annotations.insert(ANNOTATION_EXPIRES_AT.to_owned(), at.to_string());
        let secs = (at.as_second() - jiff::Timestamp::now().as_second()).max(1);
        spec.active_deadline_seconds = Some(secs);
    }
    spec.containers = vec![c];
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(ctx.node, ctx.name)),
            namespace: Some(ctx.namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (LABEL_KIND.to_owned(), "node".to_owned()),
                (LABEL_NODE_DEBUG.to_owned(), ctx.name.to_owned()),
            ])),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The node debug container a pod runs, as the API shows it.
pub fn node_debug_from_pod(pod: &Pod) -> NodeDebugContainer {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let (node, name) = split_pod_name(&pod_name).unwrap_or(("", pod_name.as_str()));
    let node = annotation(pod, ANNOTATION_NODE).unwrap_or(node).to_owned();
    let why = crate::request::Justification::from_annotations(&pod.metadata);
    let spec = pod.spec.clone().unwrap_or_default();
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == name)
        .cloned()
        .unwrap_or_default();
    let cs = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|all| all.iter().find(|c| c.name == name));
    let state = cs.and_then(|c| c.state.clone());
    let phase = match &state {
        Some(s) if s.terminated.is_some() => DebugPhase::Terminated,
        Some(s) if s.running.is_some() => DebugPhase::Running,
        _ => {
            // A pod that failed before its container ran (deadline, eviction) never runs it.
            match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Failed" | "Succeeded") => DebugPhase::Terminated,
                _ => DebugPhase::Waiting,
            }
        }
    };
    NodeDebugContainer {
        api_version: API_VERSION.to_owned(),
        kind: KIND_NODE_DEBUG_CONTAINER.to_owned(),
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            creation_timestamp: pod.metadata.creation_timestamp.clone(),
            deletion_timestamp: pod.metadata.deletion_timestamp.clone(),
            ..Default::default()
        },
        container,
        profile: annotation(pod, ANNOTATION_PROFILE).map(str::to_owned),
        ttl_seconds: None,
        debug_request: why.debug_request,
        reason: why.reason,
        ticket: why.ticket,
        status: Some(NodeDebugContainerStatus {
            node_name: node,
            pod_name: pod_name.clone(),
            pod_namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            phase,
            state,
            expires_at: expires_at_of_pod(pod).map(Time),
            created_by: annotation(pod, ANNOTATION_CREATED_BY).map(str::to_owned),
            approvers: why.approvers,
            effective_profile: Some(effective_node_profile(pod).profile.as_str().to_owned()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(profile: Profile) -> NodePodContext<'static> {
        NodePodContext {
            node: "node-1.example",
            name: "dbg",
            namespace: "poddebug-nodes",
            profile,
            default_image: "busybox:1.36",
            created_by: "root-user",
            expires_at: None,
        }
    }

    #[test]
    fn sysadmin_gets_the_host_and_privilege() {
        let pod = build_node_pod(&NodeDebugContainer::default(), &ctx(Profile::Sysadmin));
        assert_eq!(pod.metadata.name.as_deref(), Some("node-1.example.dbg"));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-1.example"));
        assert_eq!(spec.host_pid, Some(true));
        assert_eq!(spec.host_network, Some(true));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(
            spec.tolerations.as_ref().unwrap()[0].operator.as_deref(),
            Some("Exists")
        );
        let c = &spec.containers[0];
        assert_eq!(c.name, "dbg");
        assert_eq!(c.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(c.volume_mounts.as_ref().unwrap()[0].mount_path, "/host");
        assert_eq!(c.security_context.as_ref().unwrap().privileged, Some(true));
        let back = node_debug_from_pod(&pod);
        assert_eq!(back.metadata.name.as_deref(), Some("dbg"));
        let st = back.status.unwrap();
        assert_eq!(st.node_name, "node-1.example");
        assert_eq!(st.phase, DebugPhase::Waiting);
    }

    #[test]
    fn baseline_and_restricted_stay_isolated() {
        for p in [Profile::Baseline, Profile::Restricted] {
            let pod = build_node_pod(&NodeDebugContainer::default(), &ctx(p));
            let spec = pod.spec.as_ref().unwrap();
            assert_eq!(spec.host_pid, Some(false), "{p}");
            assert!(spec.volumes.is_none(), "{p}");
        }
        let pod = build_node_pod(&NodeDebugContainer::default(), &ctx(Profile::Netadmin));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.host_network, Some(true));
        assert!(spec.volumes.is_none());
    }

    fn effective(req: serde_json::Value, p: Profile) -> (Profile, String) {
        let req: NodeDebugContainer = serde_json::from_value(req).unwrap();
        let e = effective_node_profile(&build_node_pod(&req, &ctx(p)));
        (e.profile, e.setting)
    }

    #[test]
    fn each_profile_as_built_is_itself_and_legacy_is_general() {
        let plain = serde_json::json!({"container": {"image": "busybox"}});
        for p in Profile::ALL {
            let want = if p == Profile::Legacy {
                Profile::General
            } else {
                p
            };
            assert_eq!(effective(plain.clone(), p).0, want, "{p}");
        }
        let pod = build_node_pod(&NodeDebugContainer::default(), &ctx(Profile::Baseline));
        let shown = node_debug_from_pod(&pod);
        assert_eq!(
            shown.status.unwrap().effective_profile.as_deref(),
            Some("baseline")
        );
    }

    #[test]
    fn what_the_container_sets_lifts_an_isolated_profile() {
        let with_sc = |sc: serde_json::Value| serde_json::json!({"container": {"image": "busybox", "securityContext": sc}});
        assert_eq!(
            effective(
                with_sc(serde_json::json!({"privileged": true})),
                Profile::Baseline
            ),
            (
                Profile::Sysadmin,
                "securityContext.privileged: true (container \"dbg\")".to_owned()
            )
        );
        assert_eq!(
            effective(
                with_sc(serde_json::json!({"capabilities": {"add": ["NET_RAW"]}})),
                Profile::Baseline
            )
            .0,
            Profile::Netadmin
        );
        assert_eq!(
            effective(
                with_sc(serde_json::json!({"capabilities": {"add": ["SYS_PTRACE"]}})),
                Profile::Baseline
            )
            .0,
            Profile::General
        );
        // Baseline with what baseline allows stays baseline (not restricted: it may run as root).
        assert_eq!(
            effective(
                with_sc(serde_json::json!({"runAsUser": 0, "capabilities": {"add": ["CHOWN"]}})),
                Profile::Baseline
            ),
            (Profile::Baseline, String::new())
        );
        // The host's filesystem and netadmin's capabilities: only sysadmin grants both.
        assert_eq!(
            effective(
                with_sc(serde_json::json!({"capabilities": {"add": ["NET_ADMIN"]}})),
                Profile::General
            )
            .0,
            Profile::Sysadmin
        );
        // Restricted replaces whatever the container asked for.
        assert_eq!(
            effective(
                with_sc(serde_json::json!({"privileged": true})),
                Profile::Restricted
            )
            .0,
            Profile::Restricted
        );
    }

    #[test]
    fn a_pod_read_back_is_judged_on_its_spec_not_its_annotation() {
        let mut pod = build_node_pod(&NodeDebugContainer::default(), &ctx(Profile::Sysadmin));
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_PROFILE.to_owned(), "baseline".to_owned());
        let shown = node_debug_from_pod(&pod);
        assert_eq!(shown.profile.as_deref(), Some("baseline"));
        assert_eq!(
            shown.status.unwrap().effective_profile.as_deref(),
            Some("sysadmin")
        );
        // A pod with the host's namespaces alone (no profile builds one) is general.
        let mut pod = build_node_pod(&NodeDebugContainer::default(), &ctx(Profile::Baseline));
        pod.spec.as_mut().unwrap().host_pid = Some(true);
        assert_eq!(
            effective_node_profile(&pod),
            Elevation {
                profile: Profile::General,
                setting: "spec.hostPID: true".to_owned()
            }
        );
    }

    #[test]
    fn pod_names_split_at_the_last_dot() {
        assert_eq!(split_pod_name("a.b.c.dbg"), Some(("a.b.c", "dbg")));
        assert_eq!(split_pod_name("nodot"), None);
    }
}
