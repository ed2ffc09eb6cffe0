//! The objects of `poddebug.dev/v1alpha1`.
//!
//! `PodDebugContainer` wraps a core `v1.Container`, as the "Troubleshoot Running Pods" proposal
//! did, and adds the fields of the Ephemeral Containers KEP (`targetContainerName`) plus a
//! `profile`. Its `status` is never stored: it is read from the pod every time.

use k8s_openapi::api::core::v1::{Container, ContainerState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ListMeta, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::API_VERSION;

/// Kind of a debug container.
pub const KIND_POD_DEBUG_CONTAINER: &str = "PodDebugContainer";
/// Kind of a list of debug containers.
pub const KIND_POD_DEBUG_CONTAINER_LIST: &str = "PodDebugContainerList";
/// Kind of a debug profile.
pub const KIND_DEBUG_PROFILE: &str = "DebugProfile";
/// Kind of a list of debug profiles.
pub const KIND_DEBUG_PROFILE_LIST: &str = "DebugProfileList";

/// PodDebugContainer is a debug (ephemeral) container of a running pod. `metadata.name` is the
/// debug container's name and `metadata.namespace` the pod's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.PodDebugContainer")]
pub struct PodDebugContainer {
    /// APIVersion defines the versioned schema of this representation of an object: `poddebug.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// Kind is a string value representing the REST resource this object represents: `PodDebugContainer`.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata. `name` is the debug container's name, `namespace` the pod's
    /// namespace; `creationTimestamp` is filled by the server.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The container to run. Only the fields allowed for ephemeral containers may be set; its
    /// `name` defaults to `metadata.name` and its `image` to the server's `--default-image`.
    #[serde(default)]
    pub container: Container,
    /// The name of a container (or init container) of the pod whose namespaces (PID in
    /// particular) the debug container joins, when the container runtime supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_container_name: Option<String>,
    /// Debug profile applied to the container: `legacy`, `general`, `baseline`, `restricted`,
    /// `netadmin` or `sysadmin`, with the meaning `kubectl debug --profile` gives them for
    /// ephemeral containers. Defaults to the server's `--default-profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// How long the debug container may run, in seconds from its creation. Once past, the
    /// server stops it as `DELETE` would. Defaults to the server's `--default-debug-ttl` (none
    /// when that is 0); may not exceed `--max-debug-ttl` when one is set. The deadline is fixed
    /// at creation and shown as `status.expiresAt`.
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
    /// Observed state of the debug container, read from the pod. Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodDebugContainerStatus>,
}

/// Phase of a debug container, derived from its `ContainerState`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugPhase")]
pub enum DebugPhase {
    /// Not started yet: no status, or `waiting` (image pull, creation).
    #[default]
    Waiting,
    /// Its process runs.
    Running,
    /// It ended; ephemeral containers are never restarted.
    Terminated,
}

impl DebugPhase {
    /// The phase as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DebugPhase::Waiting => "Waiting",
            DebugPhase::Running => "Running",
            DebugPhase::Terminated => "Terminated",
        }
    }
}

/// A stop that was asked for with `DELETE`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.StopRequest")]
pub struct StopRequest {
    /// When the stop was requested.
    pub requested_at: Time,
    /// The user who requested it.
    pub requested_by: String,
    /// Seconds between SIGTERM and SIGKILL that the stop used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<u64>,
}

// k8s-openapi's `Time` has no `Default`; the Unix epoch stands for "unset", as Go's zero
// `metav1.Time` does.
impl Default for StopRequest {
    fn default() -> Self {
        StopRequest {
            requested_at: Time(jiff::Timestamp::UNIX_EPOCH),
            requested_by: String::new(),
            grace_period_seconds: None,
        }
    }
}

/// Observed state of a debug container.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.PodDebugContainerStatus")]
pub struct PodDebugContainerStatus {
    /// The pod the debug container runs in.
    pub pod_name: String,
    /// The name of the ephemeral container in the pod's spec. It equals `metadata.name` unless
    /// the name was reused after an earlier debug container of that name terminated.
    pub ephemeral_container_name: String,
    /// Waiting, Running or Terminated.
    pub phase: DebugPhase,
    /// The container's state as the kubelet reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerState>,
    /// Whether the container is ready.
    #[serde(default)]
    pub ready: bool,
    /// Whether the container has started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<bool>,
    /// The image the container runs.
    #[serde(default)]
    pub image: String,
    /// The image's ID as reported by the runtime.
    #[serde(default, rename = "imageID")]
    pub image_id: String,
    /// The container's ID as reported by the runtime.
    #[serde(
        default,
        rename = "containerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub container_id: Option<String>,
    /// Set once a stop was requested with DELETE. Read from the record the stop leaves in the
    /// container's termination message, so it shows once the container has terminated (and
    /// in the answer of the DELETE itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_requested: Option<StopRequest>,
    /// Whether DELETE can stop the debug container. `false` when its main process is PID 1 of
    /// its own PID namespace (no `targetContainerName`, and the pod shares neither its process
    /// namespace nor the node's): the kernel drops signals sent to it from inside the
    /// container, so it ends only by its own exit.
    #[serde(default = "stoppable_default")]
    pub stoppable: bool,
    /// Why DELETE cannot stop it, when `stoppable` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stoppable_message: Option<String>,
    /// When the server stops the debug container (its `ttlSeconds` after creation); absent
    /// when it has no time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    /// The user who created the debug container (absent for containers made before poddebug
    /// recorded it, or by other means). Anyone else attaching joins that user's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// The most powerful profile the container amounts to by what it can reach: its own
    /// securityContext and what its pod lends it (the container it targets, the volumes it
    /// mounts, the host's namespaces), whatever `profile` says (`sysadmin`, then `netadmin`,
    /// `general`, `legacy`, `baseline`, `restricted`). Attaching to it, reading its log and
    /// joining or moderating its sessions need `use` on every gated profile it amounts to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_profile: Option<String>,
    /// Who approved the debug request it was made under (see `debugRequest`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Conditions of the debug container, as the server observed them. One type so far:
    /// [`CONDITION_UNSTOPPABLE`] (`status: "True"`), set once the server found the container
    /// still running past the bound its stop (`DELETE`) or its time limit allowed it; it is
    /// then unusable through poddebug (no new attach or log follow, its sessions ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// Condition type of a debug container that was stopped (or whose time limit passed) and that
/// still ran past the bound the stop allowed it (see docs/api-reference.md).
pub const CONDITION_UNSTOPPABLE: &str = "Unstoppable";
/// Reason of [`CONDITION_UNSTOPPABLE`] when a `DELETE` did not end the container.
pub const REASON_STOP_DID_NOT_END: &str = "StopDidNotEnd";
/// Reason of [`CONDITION_UNSTOPPABLE`] when the stop at its time limit did not end it.
pub const REASON_EXPIRY_DID_NOT_END: &str = "ExpiryDidNotEnd";

/// A status without the field (written by an older server) makes no claim: stoppable.
fn stoppable_default() -> bool {
    true
}

/// PodDebugContainerList is a list of debug containers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.PodDebugContainerList")]
pub struct PodDebugContainerList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `PodDebugContainerList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The debug containers.
    pub items: Vec<PodDebugContainer>,
}

impl PodDebugContainerList {
    /// A list with its `apiVersion` and `kind` set.
    pub fn new(items: Vec<PodDebugContainer>, metadata: ListMeta) -> Self {
        PodDebugContainerList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_POD_DEBUG_CONTAINER_LIST.to_owned(),
            metadata,
            items,
        }
    }
}

/// DebugProfile describes one debug profile and the policy that applies to it. Cluster-scoped,
/// read-only: the server's flags define the profiles in force.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugProfile")]
pub struct DebugProfile {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `DebugProfile`.
    pub kind: String,
    /// Standard object metadata; `name` is the profile's name.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the profile does to a debug container, in words.
    pub description: String,
    /// The securityContext fields the profile sets, in words (one entry each).
    #[serde(default)]
    pub sets: Vec<String>,
    /// Whether using the profile requires the verb `use` on `debugprofiles/NAME` in group
    /// `poddebug.dev`.
    pub requires_use_permission: bool,
    /// Whether this is the server's `--default-profile`.
    pub default: bool,
    /// How many approvals a `DebugRequest` for this profile needs (`--approval-profiles`);
    /// absent when the profile cannot be requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_required: Option<u32>,
    /// The longest duration a `DebugRequest` for this profile may ask for (a Go duration);
    /// absent when the profile cannot be requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_duration: Option<String>,
}

/// DebugProfileList is a list of debug profiles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugProfileList")]
pub struct DebugProfileList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `DebugProfileList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The profiles.
    pub items: Vec<DebugProfile>,
}
