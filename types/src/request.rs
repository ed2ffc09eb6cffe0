//! Just-in-time access: `DebugRequest`, a request for a gated debug profile on one pod (or node)
//! for a while, with a reason, approved by someone else.
//!
//! A request names what it is for (`spec`: the pod or node, the mode, the profile, optionally
//! the exact container) and why (`reason`, `ticket`); reviewers approve, deny or revoke it
//! (`status.reviews`). Once it has the approvals its profile needs it is `Approved` from
//! `status.approvedAt` until `status.expiresAt` (`spec.duration` later), and during that window
//! its requester may make exactly what it names without holding `use` on the profile. Every
//! debug container, copy or node debug container made under it is listed in `status.made`.
//!
//! The phase a reader sees is [`DebugRequest::phase_at`]: an `Approved` request whose window
//! has passed is `Expired` whatever its record says, on every replica's own clock.

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, SecurityContext, VolumeDevice, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, Preconditions, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::API_VERSION;

/// Kind of a debug request.
pub const KIND_DEBUG_REQUEST: &str = "DebugRequest";
/// Kind of a list of debug requests.
pub const KIND_DEBUG_REQUEST_LIST: &str = "DebugRequestList";
/// The resource's plural.
pub const PLURAL_DEBUG_REQUESTS: &str = "debugrequests";
/// The verb on `debugrequests` (name: the profile) that reviewing a request needs.
pub const VERB_APPROVE: &str = "approve";
/// How long a request nobody decided stays `Pending`; it is `Expired` after that.
pub const PENDING_LIFETIME: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// The duration a request gets when it names none (cut to the profile's maximum).
pub const DEFAULT_DURATION: std::time::Duration = std::time::Duration::from_secs(3600);
/// Longest `reason` (bytes).
pub const MAX_REASON_BYTES: usize = 1024;
/// Longest `ticket` (bytes).
pub const MAX_TICKET_BYTES: usize = 256;
/// Longest review comment (bytes).
pub const MAX_COMMENT_BYTES: usize = 1024;
/// Most reviews a request keeps (a request that gets more is refused further reviews).
pub const MAX_REVIEWS: usize = 32;
/// Most entries of `status.made` (creates beyond it are refused: the request is used up).
pub const MAX_MADE: usize = 64;

/// What a request is for: a debug container in a pod, a copy of a pod, or a node debug
/// container.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RequestMode {
    /// A debug container in the pod (`pods/POD/debug`).
    #[default]
    Debug,
    /// A copy of the pod (`pods/POD/copy`).
    Copy,
    /// A node debug container (`nodes/NODE/debug`).
    Node,
}

impl RequestMode {
    /// The mode as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestMode::Debug => "debug",
            RequestMode::Copy => "copy",
            RequestMode::Node => "node",
        }
    }
}

/// Where a request is in its life.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
pub enum RequestPhase {
    /// Waiting for its approvals.
    #[default]
    Pending,
    /// Approved: usable from `approvedAt` until `expiresAt`.
    Approved,
    /// A reviewer denied it.
    Denied,
    /// Its window passed (or it stayed pending for a day).
    Expired,
    /// A reviewer revoked it during its window.
    Revoked,
}

impl RequestPhase {
    /// The phase as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestPhase::Pending => "Pending",
            RequestPhase::Approved => "Approved",
            RequestPhase::Denied => "Denied",
            RequestPhase::Expired => "Expired",
            RequestPhase::Revoked => "Revoked",
        }
    }

    /// Whether nothing can change it any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RequestPhase::Denied | RequestPhase::Expired | RequestPhase::Revoked
        )
    }
}

/// A reviewer's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Decision {
    /// Counts towards the approvals the profile needs.
    Approve,
    /// Ends a pending request.
    Deny,
    /// Ends an approved request before its window is over.
    Revoke,
}

impl Decision {
    /// The decision as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "Approve",
            Decision::Deny => "Deny",
            Decision::Revoke => "Revoke",
        }
    }

    /// The decision named `s` (`Approve`, `Deny`, `Revoke`).
    pub fn parse(s: &str) -> Option<Decision> {
        [Decision::Approve, Decision::Deny, Decision::Revoke]
            .into_iter()
            .find(|d| d.as_str() == s)
    }
}

/// The exact container a request asks for: every field an ephemeral container may have besides
/// its name. What is made under the request must have exactly these — a field the request
/// leaves out must be absent from the create too (an absent image is the server's
/// `--default-image` on both sides) — so an approval binds everything that decides what runs:
/// the program, its environment, what it mounts, where it starts and with what privileges.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.RequestedContainer")]
pub struct RequestedContainer {
    /// The image (the server's `--default-image` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// The working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Environment variables from ConfigMaps and Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// The pod's volumes it mounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// The pod's block devices it uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_devices: Option<Vec<VolumeDevice>>,
    /// The image pull policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Where the termination message is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_message_path: Option<String>,
    /// How the termination message is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_message_policy: Option<String>,
    /// The container's own securityContext (before the profile is applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// It reads stdin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<bool>,
    /// Its stdin closes after the first attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_once: Option<bool>,
    /// It has a terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<bool>,
}

/// `true` and `false` as the API reads an absent boolean (false).
fn bool_or_false(b: Option<bool>) -> bool {
    b.unwrap_or(false)
}

/// A field's value as JSON, with an absent, null, empty list, empty string and empty object read
/// alike (absent), so that `"env": []` and no `env` compare equal.
fn normalized<T: Serialize>(v: &Option<T>) -> serde_json::Value {
    let v = serde_json::to_value(v).unwrap_or(serde_json::Value::Null);
    let empty = match &v {
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        serde_json::Value::String(s) => s.is_empty(),
        _ => false,
    };
    if empty { serde_json::Value::Null } else { v }
}

impl RequestedContainer {
    /// The container `c` as a request names it: every field but its name.
    pub fn of(c: &Container) -> RequestedContainer {
        RequestedContainer {
            image: c.image.clone(),
            command: c.command.clone(),
            args: c.args.clone(),
            working_dir: c.working_dir.clone(),
            env: c.env.clone(),
            env_from: c.env_from.clone(),
            volume_mounts: c.volume_mounts.clone(),
            volume_devices: c.volume_devices.clone(),
            image_pull_policy: c.image_pull_policy.clone(),
            termination_message_path: c.termination_message_path.clone(),
            termination_message_policy: c.termination_message_policy.clone(),
            security_context: c.security_context.clone(),
            stdin: c.stdin,
            stdin_once: c.stdin_once,
            tty: c.tty,
        }
    }

    /// Every field of `got` that is not what this names, in words (`field value, not value`),
    /// in a stable order; `default_image` is what an absent image is. Fields an ephemeral
    /// container cannot have (ports, probes…) are refused by validation before this is asked.
    pub fn differences(&self, got: &Container, default_image: &str) -> Vec<String> {
        let made = RequestedContainer::of(got);
        let image = |i: &Option<String>| {
            i.as_deref()
                .filter(|i| !i.is_empty())
                .unwrap_or(default_image)
                .to_owned()
        };
        let mut out = Vec::new();
        let (wi, gi) = (image(&self.image), image(&made.image));
        if wi != gi {
            out.push(format!("image {gi:?}, not {wi:?}"));
        }
        let mut field = |name: &str, want: serde_json::Value, got: serde_json::Value| {
            if want != got {
                out.push(format!("{name} {got}, not {want}"));
            }
        };
        field(
            "command",
            normalized(&self.command),
            normalized(&made.command),
        );
        field("args", normalized(&self.args), normalized(&made.args));
        field(
            "workingDir",
            normalized(&self.working_dir),
            normalized(&made.working_dir),
        );
        field("env", normalized(&self.env), normalized(&made.env));
        field(
            "envFrom",
            normalized(&self.env_from),
            normalized(&made.env_from),
        );
        field(
            "volumeMounts",
            normalized(&self.volume_mounts),
            normalized(&made.volume_mounts),
        );
        field(
            "volumeDevices",
            normalized(&self.volume_devices),
            normalized(&made.volume_devices),
        );
        field(
            "imagePullPolicy",
            normalized(&self.image_pull_policy),
            normalized(&made.image_pull_policy),
        );
        field(
            "terminationMessagePath",
            normalized(&self.termination_message_path),
            normalized(&made.termination_message_path),
        );
        field(
            "terminationMessagePolicy",
            normalized(&self.termination_message_policy),
            normalized(&made.termination_message_policy),
        );
        field(
            "securityContext",
            normalized(&self.security_context),
            normalized(&made.security_context),
        );
        for (name, want, got) in [
            ("stdin", self.stdin, made.stdin),
            ("stdinOnce", self.stdin_once, made.stdin_once),
            ("tty", self.tty, made.tty),
        ] {
            if bool_or_false(want) != bool_or_false(got) {
                out.push(format!(
                    "{name} {}, not {}",
                    bool_or_false(got),
                    bool_or_false(want)
                ));
            }
        }
        out
    }

    /// The container in one line, as an approver reads it before deciding: every field it
    /// names, as JSON.
    pub fn describe(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What a request is for, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRequestSpec")]
pub struct DebugRequestSpec {
    /// The pod (modes `debug` and `copy`), in the request's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The node (mode `node`; the request lives in the server's node-debug namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `debug` (a debug container in the pod, the default), `copy` (a copy of the pod) or
    /// `node` (a node debug container).
    #[serde(default)]
    pub mode: RequestMode,
    /// The debug profile asked for: one of the server's `--approval-profiles`. For a node
    /// debug container, the profile its pod amounts to.
    #[serde(default)]
    pub profile: String,
    /// When set, only this container may be made under the request: a create whose container
    /// differs in any field (image, command, arguments, working directory, environment, mounts,
    /// securityContext, stdin and tty…), or names fields the server does not know, is refused.
    /// Without it the request grants its profile for any container on its target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<RequestedContainer>,
    /// With `container`: the container of the pod whose namespaces the debug container joins
    /// (its PID namespace, and through it that container's processes and root filesystem). A
    /// create under the request must name the same one, or none when this is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_container_name: Option<String>,
    /// Why the access is needed (required; recorded with everything made under the request).
    #[serde(default)]
    pub reason: String,
    /// A ticket or incident reference (recorded likewise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// How long the access lasts once approved, as a Go duration (`30m`, `1h`). Defaults to
    /// 1h, and may not exceed the profile's `--max-request-durations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// The user who made the request (set by the server; what a client sends is replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<String>,
}

/// One review of a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRequestReview")]
pub struct Review {
    /// The reviewer.
    pub user: String,
    /// When.
    pub time: Time,
    /// `Approve`, `Deny` or `Revoke`.
    pub decision: Decision,
    /// The reviewer's comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// One thing made under a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.MadeUnderRequest")]
pub struct Made {
    /// `PodDebugContainer`, `PodDebugCopy` or `NodeDebugContainer`.
    pub kind: String,
    /// Its name (the debug container's, the copy's, or the node debug container's).
    pub name: String,
    /// The namespace of the pod it runs in.
    pub namespace: String,
    /// The pod it runs in (the debug container's pod, the copy, the node debug pod).
    pub pod: String,
    /// The container of that pod, for a debug container (its ephemeral container's name); all
    /// of the pod's containers otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// When it was made.
    pub time: Time,
}

/// The state of a request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRequestStatus")]
pub struct DebugRequestStatus {
    /// `Pending`, `Approved`, `Denied`, `Expired` or `Revoked`.
    #[serde(default)]
    pub phase: RequestPhase,
    /// How many distinct reviewers must approve (the profile's `--approval-profiles` count).
    #[serde(default)]
    pub approvals_required: u32,
    /// Every review, in order.
    #[serde(default)]
    pub reviews: Vec<Review>,
    /// When it got its last approval: the window starts here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<Time>,
    /// When the window ends (`approvedAt` + `spec.duration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    /// What was made under it.
    #[serde(default)]
    pub made: Vec<Made>,
}

/// DebugRequest asks for a gated debug profile on one pod or node, for a while, with a reason;
/// someone else approves it. Namespaced: the pod's namespace, or the server's node-debug
/// namespace for a node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRequest")]
pub struct DebugRequest {
    /// `poddebug.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `DebugRequest`.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata (`generateName` is honoured on create).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What is asked for, and why.
    #[serde(default)]
    pub spec: DebugRequestSpec,
    /// Reviews, the window, and what was made under it. Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DebugRequestStatus>,
}

/// DebugRequestList is a list of debug requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRequestList")]
pub struct DebugRequestList {
    /// `poddebug.dev/v1alpha1`.
    pub api_version: String,
    /// `DebugRequestList`.
    pub kind: String,
    /// Standard list metadata.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The requests.
    pub items: Vec<DebugRequest>,
}

impl DebugRequestList {
    /// A list with its `apiVersion` and `kind` set.
    pub fn new(items: Vec<DebugRequest>, metadata: ListMeta) -> Self {
        DebugRequestList {
            api_version: API_VERSION.to_owned(),
            kind: KIND_DEBUG_REQUEST_LIST.to_owned(),
            metadata,
            items,
        }
    }
}

/// The body of `POST …/debugrequests/NAME/approval`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.DebugRequestApproval")]
pub struct Approval {
    /// `poddebug.dev/v1alpha1` (optional).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `DebugRequestApproval` (optional).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// `Approve`, `Deny` or `Revoke`.
    #[serde(default)]
    pub decision: String,
    /// Why (recorded in the review).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// What the reviewer read: the review is refused (409) unless the request is still the one
    /// with this `uid` (and, when given, this `resourceVersion`), so a request withdrawn and
    /// filed again under the same name is never approved on the strength of the first one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Preconditions>,
}

/// Kind of the body of a review.
pub const KIND_APPROVAL: &str = "DebugRequestApproval";

/// The reason, ticket, request and approvers carried by what was made under a request (or with
/// a reason alone): in the debug container's environment, the session's record, the recording's
/// metadata, the audit record and the Event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "dev.poddebug.v1alpha1.Justification")]
pub struct Justification {
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The ticket or incident.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// The debug request it was made under (in the same namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_request: Option<String>,
    /// Who approved that request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
}

impl Justification {
    /// Whether it carries nothing.
    pub fn is_empty(&self) -> bool {
        self.reason.is_none()
            && self.ticket.is_none()
            && self.debug_request.is_none()
            && self.approvers.is_empty()
    }

    /// One line for Events and logs: `under debug request R approved by bob: reason "…"
    /// (ticket T)`; empty when it carries nothing.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        if let Some(r) = &self.debug_request {
            let mut s = format!("under debug request {r}");
            if !self.approvers.is_empty() {
                s.push_str(&format!(" approved by {}", self.approvers.join(", ")));
            }
            out.push(s);
        }
        if let Some(r) = &self.reason {
            out.push(format!("reason {r:?}"));
        }
        if let Some(t) = &self.ticket {
            out.push(format!("ticket {t:?}"));
        }
        out.join(", ")
    }
}

/// Annotation of a pod poddebug made (a copy, a node debug pod) carrying its reason.
pub const ANNOTATION_REASON: &str = "poddebug.dev/reason";
/// … its ticket.
pub const ANNOTATION_TICKET: &str = "poddebug.dev/ticket";
/// … the debug request it was made under.
pub const ANNOTATION_DEBUG_REQUEST: &str = "poddebug.dev/debug-request";
/// … that request's approvers (comma-separated).
pub const ANNOTATION_APPROVERS: &str = "poddebug.dev/approvers";

impl Justification {
    /// Write it as annotations of `meta` (replacing any of the four it had: a copy keeping its
    /// original's annotations must not keep these).
    pub fn annotate(&self, meta: &mut ObjectMeta) {
        let a = meta.annotations.get_or_insert_with(Default::default);
        for k in [
            ANNOTATION_REASON,
            ANNOTATION_TICKET,
            ANNOTATION_DEBUG_REQUEST,
            ANNOTATION_APPROVERS,
        ] {
            a.remove(k);
        }
        let approvers = Some(self.approvers.join(",")).filter(|s| !s.is_empty());
        for (k, v) in [
            (ANNOTATION_REASON, self.reason.clone()),
            (ANNOTATION_TICKET, self.ticket.clone()),
            (ANNOTATION_DEBUG_REQUEST, self.debug_request.clone()),
            (ANNOTATION_APPROVERS, approvers),
        ] {
            if let Some(v) = v.filter(|v| !v.is_empty()) {
                a.insert(k.to_owned(), v);
            }
        }
        if a.is_empty() {
            meta.annotations = None;
        }
    }

    /// What the annotations of `meta` carry.
    pub fn from_annotations(meta: &ObjectMeta) -> Justification {
        let get = |k: &str| {
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        Justification {
            reason: get(ANNOTATION_REASON),
            ticket: get(ANNOTATION_TICKET),
            debug_request: get(ANNOTATION_DEBUG_REQUEST),
            approvers: get(ANNOTATION_APPROVERS)
                .map(|a| a.split(',').map(str::to_owned).collect())
                .unwrap_or_default(),
        }
    }
}

fn ts(t: &Option<Time>) -> Option<jiff::Timestamp> {
    t.as_ref().map(|t| t.0)
}

impl DebugRequest {
    /// What an approval of this request lets its requester make, in one line, as an approver
    /// reads it before deciding (the plugin's `approve`, the notification of its creation):
    /// the target, the profile, and the container bound field by field with its target — or
    /// that any container may be made.
    pub fn grants(&self) -> String {
        let s = &self.spec;
        let what = match s.mode {
            RequestMode::Debug => "a debug container in pod",
            RequestMode::Copy => "a copy of pod",
            RequestMode::Node => "a node debug container on node",
        };
        let place = match s.mode {
            RequestMode::Node => self.target().to_owned(),
            _ => format!("{}/{}", self.namespace(), self.target()),
        };
        let runs = match &s.container {
            Some(c) => {
                let target = s.target_container_name.as_deref().map_or_else(
                    || "no container's".to_owned(),
                    |t| format!("container {t:?}'s"),
                );
                format!(
                    "exactly the container {}, joining {target} namespaces",
                    c.describe()
                )
            }
            None => "any container: the request does not say what runs".to_owned(),
        };
        format!("{what} {place} with the {} profile: {runs}", s.profile)
    }

    /// The request's name (empty when it has none yet).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The request's namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// The phase at `now`: an approved request past its window, or a pending one older than
    /// [`PENDING_LIFETIME`], is `Expired` whatever its record says.
    pub fn phase_at(&self, now: jiff::Timestamp) -> RequestPhase {
        let Some(st) = &self.status else {
            return RequestPhase::Pending;
        };
        match st.phase {
            RequestPhase::Approved => match ts(&st.expires_at) {
                Some(end) if end > now => RequestPhase::Approved,
                _ => RequestPhase::Expired,
            },
            RequestPhase::Pending => {
                let created = ts(&self.metadata.creation_timestamp);
                let lifetime = jiff::SignedDuration::try_from(PENDING_LIFETIME).ok();
                match (created, lifetime) {
                    (Some(c), Some(l)) if c.checked_add(l).is_ok_and(|end| end <= now) => {
                        RequestPhase::Expired
                    }
                    _ => RequestPhase::Pending,
                }
            }
            other => other,
        }
    }

    /// When a change of phase is due by the clock alone (the end of the window, or of the
    /// pending lifetime); `None` for a final phase.
    pub fn due_at(&self) -> Option<jiff::Timestamp> {
        let st = self.status.as_ref();
        match st.map(|s| s.phase).unwrap_or_default() {
            RequestPhase::Approved => st.and_then(|s| ts(&s.expires_at)),
            RequestPhase::Pending => {
                let l = jiff::SignedDuration::try_from(PENDING_LIFETIME).ok()?;
                ts(&self.metadata.creation_timestamp)?.checked_add(l).ok()
            }
            _ => None,
        }
    }

    /// The object as a reader sees it at `now`: its phase as [`DebugRequest::phase_at`] says.
    pub fn as_seen_at(&self, now: jiff::Timestamp) -> DebugRequest {
        let mut out = self.clone();
        let phase = self.phase_at(now);
        out.status.get_or_insert_with(Default::default).phase = phase;
        out
    }

    /// The users who approved it, in order.
    pub fn approvers(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.status.iter().flat_map(|s| &s.reviews) {
            if r.decision == Decision::Approve && !out.contains(&r.user) {
                out.push(r.user.clone());
            }
        }
        out
    }

    /// The pod or node it names.
    pub fn target(&self) -> &str {
        match self.spec.mode {
            RequestMode::Node => self.spec.node.as_deref().unwrap_or_default(),
            _ => self.spec.pod.as_deref().unwrap_or_default(),
        }
    }

    /// What it carries into what is made under it.
    pub fn justification(&self) -> Justification {
        Justification {
            reason: Some(self.spec.reason.clone()).filter(|r| !r.is_empty()),
            ticket: self.spec.ticket.clone().filter(|t| !t.is_empty()),
            debug_request: Some(self.name().to_owned()).filter(|n| !n.is_empty()),
            approvers: self.approvers(),
        }
    }
}

/// `kube::Resource` for the `debugrequests` resource.
impl kube_core::Resource for DebugRequest {
    type DynamicType = ();
    type Scope = kube_core::NamespaceResourceScope;

    fn kind((): &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(KIND_DEBUG_REQUEST)
    }

    fn group((): &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(crate::GROUP)
    }

    fn version((): &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(crate::VERSION)
    }

    fn api_version((): &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(API_VERSION)
    }

    fn plural((): &()) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(PLURAL_DEBUG_REQUESTS)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approved(expires: &str) -> DebugRequest {
        DebugRequest {
            metadata: ObjectMeta {
                name: Some("r".into()),
                creation_timestamp: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                ..Default::default()
            },
            status: Some(DebugRequestStatus {
                phase: RequestPhase::Approved,
                expires_at: Some(Time(expires.parse().unwrap())),
                reviews: vec![
                    Review {
                        user: "bob".into(),
                        time: Time("2026-01-01T00:01:00Z".parse().unwrap()),
                        decision: Decision::Approve,
                        comment: None,
                    },
                    Review {
                        user: "bob".into(),
                        time: Time("2026-01-01T00:01:00Z".parse().unwrap()),
                        decision: Decision::Approve,
                        comment: None,
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_approved_request_expires_at_the_end_of_its_window_on_the_readers_clock() {
        let r = approved("2026-01-01T00:31:00Z");
        assert_eq!(
            r.phase_at("2026-01-01T00:30:59Z".parse().unwrap()),
            RequestPhase::Approved
        );
        assert_eq!(
            r.phase_at("2026-01-01T00:31:00Z".parse().unwrap()),
            RequestPhase::Expired
        );
        assert_eq!(r.due_at(), Some("2026-01-01T00:31:00Z".parse().unwrap()));
        assert_eq!(r.approvers(), ["bob"], "each approver once");
        let mut no_end = r.clone();
        no_end.status.as_mut().unwrap().expires_at = None;
        assert_eq!(
            no_end.phase_at("2026-01-01T00:00:01Z".parse().unwrap()),
            RequestPhase::Expired,
            "an approval without a window grants nothing"
        );
    }

    #[test]
    fn a_pending_request_expires_after_a_day_and_final_phases_stay() {
        let mut r = approved("2026-01-01T00:31:00Z");
        r.status.as_mut().unwrap().phase = RequestPhase::Pending;
        assert_eq!(
            r.phase_at("2026-01-01T23:59:59Z".parse().unwrap()),
            RequestPhase::Pending
        );
        assert_eq!(
            r.phase_at("2026-01-02T00:00:00Z".parse().unwrap()),
            RequestPhase::Expired
        );
        r.status.as_mut().unwrap().phase = RequestPhase::Revoked;
        assert_eq!(r.due_at(), None);
        assert_eq!(
            r.phase_at("2026-01-01T00:00:01Z".parse().unwrap()),
            RequestPhase::Revoked
        );
    }

    #[test]
    fn names_on_the_wire() {
        assert_eq!(
            serde_json::to_value(RequestPhase::Approved).unwrap(),
            "Approved"
        );
        assert_eq!(serde_json::to_value(RequestMode::Node).unwrap(), "node");
        assert_eq!(Decision::parse("Revoke"), Some(Decision::Revoke));
        assert_eq!(Decision::parse("revoke"), None);
        let j = Justification {
            reason: Some("INC-7: disk full".into()),
            ticket: Some("INC-7".into()),
            debug_request: Some("web-sysadmin".into()),
            approvers: vec!["bob".into()],
        };
        assert_eq!(
            j.describe(),
            "under debug request web-sysadmin approved by bob, reason \"INC-7: disk full\", ticket \"INC-7\""
        );
        assert_eq!(Justification::default().describe(), "");
    }
}
