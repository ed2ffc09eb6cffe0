//! `PodDebugCopy`: a copy of a pod made to debug it (`kubectl debug POD --copy-to=NAME`), and the
//! pure functions that build the copy from the original and read a copy back.
//!
//! The copy is a normal Pod in the original's namespace. What it keeps of the original follows
//! kubectl 1.30+: the spec, without the node (unless `sameNode`), the ephemeral containers, the
//! probes and the init containers (unless the matching `keep…` switch), with none of the
//! original's labels and annotations (unless `keepLabels`/`keepAnnotations`), so no Service,
//! ReplicaSet or controller ever picks the copy up.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{API_VERSION, ErrorList, FieldError, Profile};

/// Kind of a pod copy.
pub const KIND_POD_DEBUG_COPY: &str = "PodDebugCopy";
/// Kind of a list of pod copies.
pub const KIND_POD_DEBUG_COPY_LIST: &str = "PodDebugCopyList";

/// Label on every pod poddebug makes: `copy` or `node`. The expiry loop lists by it.
pub const LABEL_KIND: &str = "poddebug.dev/kind";
/// Label of a copy: the name of the pod it copies.
pub const LABEL_COPY_OF: &str = "poddebug.dev/copy-of";
/// Annotation: the user who made the pod.
pub const ANNOTATION_CREATED_BY: &str = "poddebug.dev/created-by";
/// Annotation: when the server deletes the pod (RFC 3339), absent without a time limit.
pub const ANNOTATION_EXPIRES_AT: &str = "poddebug.dev/expires-at";
/// Annotation: the debug profile of the pod's debug container.
pub const ANNOTATION_PROFILE: &str = "poddebug.dev/profile";
/// Annotation: the name of the debug container poddebug added, if any.
pub const ANNOTATION_DEBUG_CONTAINER: &str = "poddebug.dev/debug-container";

/// The name of the debug container a copy adds when its `container` names none.
pub const DEFAULT_COPY_CONTAINER: &str = "debugger";

/// A command and arguments that replace a container's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "dev.poddebug.v1alpha1.CommandReplacement")]
pub struct CommandReplacement {
    /// The new entrypoint. When set, `args` replaces the container's arguments too (empty
    /// clears them), as `kubectl debug --copy-to --container=C -- CMD` does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The new arguments (alone: the image's or container's command is kept, as
    /// `--arguments-only` does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Keep the container's stdin open (to attach to it), as `kubectl debug -i` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<bool>,
    /// Give the container a TTY, as `kubectl debug -t` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<bool>,
}

/// PodDebugCopy asks for (and reports) a copy of a pod made to debug it:
/// `POST …/namespaces/NS/pods/POD/copy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "dev.poddebug.v1alpha1.PodDebugCopy")]
pub struct PodDebugCopy {
    /// `poddebug.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `PodDebugCopy`.
    #[serde(default)]
    pub kind: String,
    /// `name` is the copy's name (generated as `POD-debug-xxxxx` when absent), `namespace` the
    /// original's.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Images to change: container name → image; `*` changes every container (the debug
    /// container excepted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_image: BTreeMap<String, String>,
    /// Whether the copy's containers share one process namespace (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_processes: Option<bool>,
    /// Keep the original's node (default false: the scheduler places the copy).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_node: bool,
    /// Commands to change: container name → new command and/or arguments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replace: BTreeMap<String, CommandReplacement>,
    /// A debug container to add (`name` defaults to `debugger`, `image` to the server's
    /// `--default-image`); the profile applies to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    /// Keep the original's labels (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_labels: bool,
    /// Keep the original's annotations (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_annotations: bool,
    /// Keep liveness probes (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_liveness: bool,
    /// Keep readiness probes (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_readiness: bool,
    /// Keep startup probes (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_startup: bool,
    /// Keep init containers (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_init_containers: bool,
    /// Debug profile of the debug container (default: the server's `--default-profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Seconds after which the server deletes the copy (default `--default-debug-ttl`, at most
    /// `--max-debug-ttl`; 0 = no limit when there is no maximum).
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
    /// Observed state, read from the copy. Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodDebugCopyStatus>,
}

/// Observed state of a copy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.PodDebugCopyStatus")]
pub struct PodDebugCopyStatus {
    /// The pod copied.
    pub source_pod: String,
    /// The copy's pod phase (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    #[serde(default)]
    pub phase: String,
    /// The node the copy runs on, once scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The debug container added to the copy, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_container_name: Option<String>,
    /// The containers' statuses as the kubelet reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_statuses: Vec<ContainerStatus>,
    /// When the server deletes the copy; absent without a time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    /// The user who made the copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Who approved the debug request it was made under (see `debugRequest`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
}

/// PodDebugCopyList is a list of copies.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.PodDebugCopyList")]
pub struct PodDebugCopyList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `PodDebugCopyList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The copies.
    pub items: Vec<PodDebugCopy>,
}

impl PodDebugCopyList {
    /// A list with its `apiVersion` and `kind` set.
    pub fn new(items: Vec<PodDebugCopy>, metadata: ListMeta) -> Self {
        PodDebugCopyList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_POD_DEBUG_COPY_LIST.to_owned(),
            metadata,
            items,
        }
    }
}

/// Apply `profile` to a (regular) container as it applies to an ephemeral one: the fields
/// the profile touches are the same in both.
pub fn apply_profile_to_container(profile: Profile, c: &mut Container) {
    let mut ec = k8s_openapi::api::core::v1::EphemeralContainer {
        name: c.name.clone(),
        security_context: c.security_context.take(),
        ..Default::default()
    };
    profile.apply(&mut ec);
    c.security_context = ec.security_context;
}

/// What [`build_copy`] needs besides the request.
#[derive(Clone, Debug)]
pub struct CopyContext<'a> {
    /// The copy's name; `None` asks kube-apiserver to generate `POD-debug-xxxxx`.
    pub name: Option<String>,
    /// The debug container's profile (resolved, permitted).
    pub profile: Profile,
    /// Image of a debug container that names none.
    pub default_image: &'a str,
    /// The caller, recorded on the copy.
    pub created_by: &'a str,
    /// When the copy is deleted.
    pub expires_at: Option<jiff::Timestamp>,
}

/// The copy of `source` that `req` asks for, or the field errors of a request that cannot be
/// applied to it (a `setImage` or `replace` naming no container, a debug container named as an
/// existing one).
pub fn build_copy(
    source: &Pod,
    req: &PodDebugCopy,
    ctx: &CopyContext<'_>,
) -> Result<Pod, ErrorList> {
    let source_name = source.metadata.name.clone().unwrap_or_default();
    let mut errs = ErrorList::new();
    let mut spec: PodSpec = source.spec.clone().unwrap_or_default();
    spec.ephemeral_containers = None;
    if !req.same_node {
        spec.node_name = None;
    }
    if !req.keep_init_containers {
        spec.init_containers = None;
    }
    spec.share_process_namespace = Some(req.share_processes.unwrap_or(true));
    let names: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if !req.keep_liveness {
            c.liveness_probe = None;
        }
        if !req.keep_readiness {
            c.readiness_probe = None;
        }
        if !req.keep_startup {
            c.startup_probe = None;
        }
    }
    for (container, image) in &req.set_image {
        let path = format!("setImage[{container}]");
        if image.trim().is_empty() {
            errs.push(FieldError::required(&path, ""));
            continue;
        }
        if container == "*" {
            for c in &mut spec.containers {
                c.image = Some(image.clone());
            }
        } else if let Some(c) = spec.containers.iter_mut().find(|c| &c.name == container) {
            c.image = Some(image.clone());
        } else {
            errs.push(FieldError::not_found(&path, container.clone()));
        }
    }
    // A `*` and a named entry: the named one wins, as kubectl's `--set-image` reads them.
    for (container, image) in req.set_image.iter().filter(|(k, _)| k.as_str() != "*") {
        if let Some(c) = spec.containers.iter_mut().find(|c| &c.name == container) {
            c.image = Some(image.clone());
        }
    }
    for (container, r) in &req.replace {
        let path = format!("replace[{container}]");
        let Some(c) = spec.containers.iter_mut().find(|c| &c.name == container) else {
            errs.push(FieldError::not_found(&path, container.clone()));
            continue;
        };
        if r.command.is_empty() && r.args.is_empty() && r.stdin.is_none() && r.tty.is_none() {
            errs.push(FieldError::required(&path, "command, args, stdin or tty"));
            continue;
        }
        if !r.command.is_empty() {
            c.command = Some(r.command.clone());
            c.args = (!r.args.is_empty()).then(|| r.args.clone());
        } else if !r.args.is_empty() {
            c.args = Some(r.args.clone());
        }
        if let Some(stdin) = r.stdin {
            c.stdin = Some(stdin);
        }
        if let Some(tty) = r.tty {
            c.tty = Some(tty);
        }
    }
    let mut debug_container = None;
    if let Some(dc) = &req.container {
        let mut dc = dc.clone();
        if dc.name.is_empty() {
            dc.name = DEFAULT_COPY_CONTAINER.to_owned();
        }
        if names.contains(&dc.name) {
            errs.push(FieldError::duplicate("container.name", dc.name.clone()));
        }
        if dc.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
            dc.image = Some(ctx.default_image.to_owned());
        }
        apply_profile_to_container(ctx.profile, &mut dc);
        debug_container = Some(dc.name.clone());
        spec.containers.push(dc);
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut labels = if req.keep_labels {
        source.metadata.labels.clone().unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    labels.insert(LABEL_KIND.to_owned(), "copy".to_owned());
    labels.insert(LABEL_COPY_OF.to_owned(), source_name.clone());
    let mut annotations = if req.keep_annotations {
        source.metadata.annotations.clone().unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    annotations.insert(ANNOTATION_CREATED_BY.to_owned(), ctx.created_by.to_owned());
    annotations.insert(
        ANNOTATION_PROFILE.to_owned(),
        ctx.profile.as_str().to_owned(),
    );
    if let Some(dc) = &debug_container {
        annotations.insert(ANNOTATION_DEBUG_CONTAINER.to_owned(), dc.clone());
    }
    if let Some(at) = ctx.expires_at {
        annotations.insert(ANNOTATION_EXPIRES_AT.to_owned(), at.to_string());
        // The kubelet ends the copy at its deadline even when no poddebug replica is there to
        // delete it.
        let secs = (at.as_second() - jiff::Timestamp::now().as_second()).max(1);
        spec.active_deadline_seconds = Some(secs);
    }
    Ok(Pod {
        metadata: ObjectMeta {
            name: ctx.name.clone(),
            generate_name: ctx.name.is_none().then(|| format!("{source_name}-debug-")),
            namespace: source.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// Every image a pod would run (containers and init containers), for the image policy.
pub fn images_of(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| c.image.clone().unwrap_or_default())
        .collect()
}

/// An annotation of a pod poddebug made.
pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// A label of a pod.
pub fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The deadline recorded on a pod poddebug made.
pub fn expires_at_of_pod(pod: &Pod) -> Option<jiff::Timestamp> {
    annotation(pod, ANNOTATION_EXPIRES_AT).and_then(|s| s.parse().ok())
}

/// The copy as the API shows it: what it was made with (as far as the pod tells) and its
/// status.
pub fn copy_from_pod(pod: &Pod) -> PodDebugCopy {
    let status = pod.status.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let debug_container = annotation(pod, ANNOTATION_DEBUG_CONTAINER).map(str::to_owned);
    let why = crate::request::Justification::from_annotations(&pod.metadata);
    PodDebugCopy {
        api_version: API_VERSION.to_owned(),
        kind: KIND_POD_DEBUG_COPY.to_owned(),
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            creation_timestamp: pod.metadata.creation_timestamp.clone(),
            deletion_timestamp: pod.metadata.deletion_timestamp.clone(),
            labels: pod.metadata.labels.clone(),
            ..Default::default()
        },
        share_processes: spec.share_process_namespace,
        same_node: false,
        container: debug_container
            .as_deref()
            .and_then(|n| spec.containers.iter().find(|c| c.name == n))
            .cloned(),
        profile: annotation(pod, ANNOTATION_PROFILE).map(str::to_owned),
        debug_request: why.debug_request,
        reason: why.reason,
        ticket: why.ticket,
        status: Some(PodDebugCopyStatus {
            source_pod: label(pod, LABEL_COPY_OF).unwrap_or_default().to_owned(),
            phase: status.phase.clone().unwrap_or_else(|| "Pending".to_owned()),
            node_name: spec.node_name.clone(),
            debug_container_name: debug_container,
            container_statuses: status.container_statuses.clone().unwrap_or_default(),
            expires_at: expires_at_of_pod(pod).map(Time),
            created_by: annotation(pod, ANNOTATION_CREATED_BY).map(str::to_owned),
            approvers: why.approvers,
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"},
                         "annotations": {"a": "b"}},
            "spec": {
                "nodeName": "n1",
                "initContainers": [{"name": "init", "image": "init:1"}],
                "containers": [
                    {"name": "app", "image": "app:1", "command": ["crash"],
                     "livenessProbe": {"exec": {"command": ["true"]}},
                     "readinessProbe": {"exec": {"command": ["true"]}}},
                    {"name": "side", "image": "side:1"}
                ],
                "ephemeralContainers": [{"name": "dbg", "image": "busybox"}]
            }
        }))
        .unwrap()
    }

    fn ctx() -> CopyContext<'static> {
        CopyContext {
            name: None,
            profile: Profile::General,
            default_image: "busybox:1.36",
            created_by: "alice",
            expires_at: None,
        }
    }

    #[test]
    fn a_copy_keeps_the_spec_but_not_what_would_bind_it_to_the_original() {
        let copy = build_copy(&source(), &PodDebugCopy::default(), &ctx()).unwrap();
        let spec = copy.spec.as_ref().unwrap();
        assert_eq!(spec.node_name, None);
        assert_eq!(spec.init_containers, None);
        assert_eq!(spec.ephemeral_containers, None);
        assert_eq!(spec.share_process_namespace, Some(true));
        assert!(spec.containers[0].liveness_probe.is_none());
        assert!(spec.containers[0].readiness_probe.is_none());
        let labels = copy.metadata.labels.unwrap();
        assert_eq!(
            labels.get("app"),
            None,
            "a Service must not select the copy"
        );
        assert_eq!(labels.get(LABEL_COPY_OF).map(String::as_str), Some("web"));
        assert_eq!(copy.metadata.generate_name.as_deref(), Some("web-debug-"));
        assert_eq!(copy.metadata.annotations.unwrap().get("a"), None);
    }

    #[test]
    fn keep_switches_keep_what_they_name() {
        let req = PodDebugCopy {
            same_node: true,
            keep_labels: true,
            keep_annotations: true,
            keep_liveness: true,
            keep_init_containers: true,
            share_processes: Some(false),
            ..Default::default()
        };
        let copy = build_copy(&source(), &req, &ctx()).unwrap();
        let spec = copy.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.init_containers.as_ref().map(Vec::len), Some(1));
        assert_eq!(spec.share_process_namespace, Some(false));
        assert!(spec.containers[0].liveness_probe.is_some());
        assert!(spec.containers[0].readiness_probe.is_none());
        assert_eq!(
            copy.metadata.labels.unwrap().get("app").map(String::as_str),
            Some("web")
        );
        assert_eq!(
            copy.metadata
                .annotations
                .unwrap()
                .get("a")
                .map(String::as_str),
            Some("b")
        );
    }

    #[test]
    fn images_commands_and_a_debug_container() {
        let req: PodDebugCopy = serde_json::from_value(serde_json::json!({
            "setImage": {"*": "busybox:1.36", "side": "pause:3"},
            "replace": {"app": {"command": ["sleep", "3600"]}},
            "container": {"stdin": true},
            "profile": "sysadmin"
        }))
        .unwrap();
        let mut c = ctx();
        c.profile = Profile::Sysadmin;
        c.expires_at = Some(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60));
        let copy = build_copy(&source(), &req, &c).unwrap();
        let spec = copy.spec.as_ref().unwrap();
        assert_eq!(spec.containers[0].image.as_deref(), Some("busybox:1.36"));
        assert_eq!(spec.containers[1].image.as_deref(), Some("pause:3"));
        assert_eq!(
            spec.containers[0].command,
            Some(vec!["sleep".to_owned(), "3600".to_owned()])
        );
        let dc = &spec.containers[2];
        assert_eq!(dc.name, "debugger");
        assert_eq!(dc.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(dc.security_context.as_ref().unwrap().privileged, Some(true));
        assert!(spec.active_deadline_seconds.unwrap() > 0);
        assert_eq!(
            images_of(&copy),
            vec!["busybox:1.36", "pause:3", "busybox:1.36"]
        );
        let back = copy_from_pod(&copy);
        assert_eq!(
            back.status.unwrap().debug_container_name.as_deref(),
            Some("debugger")
        );
    }

    #[test]
    fn names_that_match_no_container_are_field_errors() {
        let req: PodDebugCopy = serde_json::from_value(serde_json::json!({
            "setImage": {"nope": "x:1"},
            "replace": {"gone": {"args": ["x"]}},
            "container": {"name": "app"}
        }))
        .unwrap();
        let errs = build_copy(&source(), &req, &ctx()).unwrap_err();
        let fields: Vec<String> = errs.iter().map(|e| e.field.clone()).collect();
        assert_eq!(
            fields,
            vec!["setImage[nope]", "replace[gone]", "container.name"]
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_str::<PodDebugCopy>(r#"{"keeplabels": true}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `keeplabels`"),
            "{err}"
        );
    }
}
