//! The storage interface the handlers call.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use poddebug_types::copy::{PodDebugCopy, PodDebugCopyList};
use poddebug_types::decode::PassThroughFields;
use poddebug_types::node::{NodeDebugContainer, NodeDebugContainerList};
use poddebug_types::{ApiError, PodDebugContainer, PodDebugContainerList, Profile};

use crate::StorageError;
use crate::phases::Phases;
use crate::prefetch::{Prefetch, PrefetchTarget};

/// The authenticated user a request is made for. Used for impersonation (`--impersonate`), for
/// the Events recorded on the pod, and for the stop record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// User name.
    pub user: String,
    /// User UID, if known.
    pub uid: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Server policy applied to every create (from the `Policy` flags).
#[derive(Clone, Debug)]
pub struct Policy {
    /// Image patterns allowed (`*` matches any run of characters); empty = all allowed.
    pub allowed_images: Vec<String>,
    /// Image used when the request names none.
    pub default_image: String,
    /// Profile used when the request names none.
    pub default_profile: Profile,
    /// Maximum number of ephemeral containers a pod may carry (0 = unlimited).
    pub max_debug_containers_per_pod: usize,
    /// The target given to a debug container that names none (`--default-target`).
    pub default_target: DefaultTarget,
}

/// What `targetContainerName` a create that names none gets (`--default-target`), so that
/// the debug container does not run as PID 1 of its own PID namespace, which no stop can end
/// (see `poddebug_types::stoppable`). Only applied when the pod shares no process namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DefaultTarget {
    /// The pod's first container in `spec.containers` (`first-container`, the default).
    #[default]
    FirstContainer,
    /// None: the debug container runs in its own PID namespace, as `kubectl debug` without
    /// `--target` (`none`).
    None,
}

impl DefaultTarget {
    /// Parse the flag value (`first-container`, `none`).
    pub fn parse(s: &str) -> Option<DefaultTarget> {
        match s {
            "first-container" => Some(DefaultTarget::FirstContainer),
            "none" => Some(DefaultTarget::None),
            _ => None,
        }
    }

    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultTarget::FirstContainer => "first-container",
            DefaultTarget::None => "none",
        }
    }
}

/// A create request, after authorization and profile permission checks.
#[derive(Clone, Debug)]
pub struct CreateRequest {
    /// Namespace of the pod.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// Debug container name from the URL; `None` generates `debugger-xxxxx`.
    pub name: Option<String>,
    /// The decoded body.
    pub body: PodDebugContainer,
    /// The profile to apply (already resolved from body or default, already permitted).
    pub profile: Profile,
    /// Who asks.
    pub caller: Caller,
    /// `?wait=true`: answer once running or terminated, or after this long.
    pub wait: Option<Duration>,
    /// Dry run, pass-through fields and the caller's own checks.
    pub options: CreateOptions,
}

/// A check of the request's own that may refuse a create (403) once the container is known to
/// be valid and before anything is changed: the handler's profile permission checks, so that a
/// request is answered 400, then 422, then 403, then created, whichever problems it has.
pub type AdmissionFuture = Pin<Box<dyn Future<Output = Result<(), ApiError>> + Send>>;

/// A shareable [`AdmissionFuture`] maker.
#[derive(Clone)]
pub struct AdmissionCheck(pub Arc<dyn Fn() -> AdmissionFuture + Send + Sync>);

impl std::fmt::Debug for AdmissionCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdmissionCheck")
    }
}

/// A check of the profiles a debug container amounts to by what its pod lends it
/// ([`poddebug_types::reach::effective_profiles`] of the container as planned, on the pod as
/// read), beyond those the [`AdmissionCheck`] already judged from the request alone: called with
/// them, only when there are some (an ordinary pod lends nothing, and costs no review), before
/// anything is changed; its refusal is the create's 403.
#[derive(Clone)]
pub struct ReachCheck(
    pub Arc<dyn Fn(Vec<poddebug_types::privilege::Elevation>) -> AdmissionFuture + Send + Sync>,
);

impl std::fmt::Debug for ReachCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReachCheck")
    }
}

/// How a create is carried out, beyond what it adds.
#[derive(Clone, Debug, Default)]
pub struct CreateOptions {
    /// `?dryRun=All`: everything a create checks (validation by the cluster, policy, admission
    /// through a server-side dry run of the `pods/ephemeralcontainers` update), nothing changed,
    /// the would-be object answered.
    pub dry_run: bool,
    /// Unknown container fields of the request, sent on to kube-apiserver as they came.
    pub pass_through: PassThroughFields,
    /// The caller's check: started with the create, beside its reads, and its answer taken
    /// after validation and the server policy.
    pub admission: Option<AdmissionCheck>,
    /// The profiles the pod lends the container, and the profile named at the create: what the
    /// [`ReachCheck`] is asked about are those of [`poddebug_types::reach::effective_profiles`]
    /// that this list does not hold already.
    pub reach: Option<(ReachCheck, Vec<poddebug_types::privilege::Elevation>)>,
    /// The reason, ticket, debug request and approvers the container carries (its
    /// environment, its Event).
    pub justification: poddebug_types::request::Justification,
    /// The latest the container may run to (the end of the debug request's window it is made
    /// under), whatever its own time limit says: its deadline is the earlier of the two.
    pub deadline: Option<jiff::Timestamp>,
    /// The pod read begun beside authorization ([`DebugBackend::prefetch`]), if any.
    pub prefetch: Option<Prefetch>,
    /// Where the time of each phase is observed.
    pub phases: Phases,
}

/// A stop request (`DELETE`).
#[derive(Clone, Debug)]
pub struct StopRequest {
    /// Namespace of the pod.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// Debug container name.
    pub name: String,
    /// Seconds between SIGTERM and SIGKILL (cut to fit `timeout` and the configured maximum).
    pub grace_period: Duration,
    /// Who asks.
    pub caller: Caller,
    /// The time the whole stop may take: every step (reads, exec, status wait, Event) gets its
    /// share of it, and the answer comes before it ends.
    pub timeout: Duration,
}

/// What a stop achieved.
#[derive(Clone, Debug)]
pub enum StopOutcome {
    /// The container is terminated; the object shows its final state.
    Terminated(PodDebugContainer),
    /// The signals were sent but the status does not show it terminated yet (answered 202).
    InProgress(PodDebugContainer),
}

/// Which debug containers to list.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Namespace, or all namespaces.
    pub namespace: Option<String>,
    /// Only this pod.
    pub pod: Option<String>,
    /// With `pod`: a pod that does not exist is kube-apiserver's 404 `pods "POD" not found`
    /// instead of an empty list (the `pods/POD/debug` subresource, as for the pod's others).
    pub pod_must_exist: bool,
    /// Label selector on pod labels, as kube-apiserver parses it.
    pub label_selector: Option<String>,
    /// Field selector passed through to the pod list.
    pub field_selector: Option<String>,
}

/// Options of a watch.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// What to watch.
    pub list: ListOptions,
    /// Resume after this resourceVersion (of the pod list).
    pub resource_version: Option<String>,
    /// Send BOOKMARK events.
    pub allow_bookmarks: bool,
    /// End the watch after this long.
    pub timeout: Option<Duration>,
    /// `sendInitialEvents=true` (streaming lists): ADDED for every current debug container, then
    /// a BOOKMARK marking the end of the initial events, whatever `resource_version` says.
    pub send_initial_events: bool,
}

/// One watch event, with the object's `metadata.resourceVersion` set to the pod's.
#[derive(Clone, Debug)]
pub enum DebugWatchEvent {
    /// A debug container appeared.
    Added(PodDebugContainer),
    /// A debug container's status changed.
    Modified(PodDebugContainer),
    /// The pod holding a debug container was deleted.
    Deleted(PodDebugContainer),
    /// Progress marker carrying only a resourceVersion.
    Bookmark(String),
    /// The BOOKMARK that ends the initial events of a streaming list (annotated
    /// `k8s.io/initial-events-end: "true"`), carrying the list's resourceVersion.
    InitialEventsEnd(String),
    /// The watch cannot continue (e.g. 410 Expired); carries the Status.
    Error(poddebug_types::ApiError),
}

/// A stream of watch events.
pub type DebugWatchStream = Pin<Box<dyn Stream<Item = DebugWatchEvent> + Send>>;

/// What a stream target is resolved for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamUse {
    /// An attach (a session, or joining one): wait up to this long for the container to run.
    Attach(Duration),
    /// A log read; with `follow`, it stays open on the running container.
    Log {
        /// `follow` as kube-apiserver reads it (only absent, `false` and `0` are false).
        follow: bool,
    },
}

impl StreamUse {
    /// How long an attach waits for the container to run; a log never waits.
    pub fn wait_running(self) -> Option<Duration> {
        match self {
            StreamUse::Attach(d) => Some(d),
            StreamUse::Log { .. } => None,
        }
    }

    /// Whether it reaches the running container (attach, log follow), which a stopped debug
    /// container refuses (see `unstoppable`); a plain log read does not.
    pub fn reaches_the_container(self) -> bool {
        !matches!(self, StreamUse::Log { follow: false })
    }
}

/// Where an attach or log stream must go upstream, once the storage has checked that `container`
/// is a debug container of the pod.
#[derive(Clone, Debug)]
pub struct StreamTarget {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// The ephemeral container's name in the pod spec (after name-reuse mapping).
    pub container: String,
    /// The profiles the container runs with. A debug container: the one it was created with
    /// (when recorded) and the gated ones its security context amounts to. A container of a
    /// pod poddebug made: what the pod gets, from its spec (the node profile of a node debug
    /// pod, the profiles of a copy's settings). Attaching to it or reading its log needs the
    /// same `use` permission as creating it, and its sessions are moderated when one of them is.
    pub profiles: Vec<poddebug_types::privilege::Elevation>,
    /// The user who created the debug container, when recorded: anyone else attaching joins
    /// that user's session.
    pub owner: Option<String>,
    /// Reach it with the server's own identity even with `--impersonate` (a node debug pod,
    /// in a namespace where callers hold no rights).
    pub server_identity: bool,
    /// A regular container of a pod poddebug made (a copy), not an ephemeral one: reaching it
    /// is what core `pods/attach` and `pods/log` grant, which the caller must hold as well
    /// (labels that mark a pod as poddebug's can be written by whoever may patch it).
    pub regular_container: bool,
    /// The reason, ticket and debug request the container carries (its environment, or its
    /// pod's annotations), as recorded at its create. For records and people: a grant is
    /// decided on the debug request's own signed record, never on these.
    pub justification: poddebug_types::request::Justification,
}

/// The caller's check of the pod a create would make, run once the pod is built and the image
/// policy passed, before anything is created: it decides on what the pod gets.
#[derive(Clone)]
pub struct PodAdmission(
    pub Arc<dyn Fn(k8s_openapi::api::core::v1::Pod) -> AdmissionFuture + Send + Sync>,
);

impl std::fmt::Debug for PodAdmission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PodAdmission")
    }
}

/// A copy of a pod to make (`POST pods/POD/copy`), after authorization.
#[derive(Clone, Debug)]
pub struct CopyRequest {
    /// Namespace of the original.
    pub namespace: String,
    /// The original.
    pub pod: String,
    /// The decoded body.
    pub body: PodDebugCopy,
    /// The debug container's profile (resolved, permitted).
    pub profile: Profile,
    /// Who asks.
    pub caller: Caller,
    /// `?dryRun=All`.
    pub dry_run: bool,
    /// The caller's check of the copy as built (the profiles it amounts to, moderation).
    pub admission: Option<PodAdmission>,
    /// The reason, ticket, debug request and approvers the copy carries (its annotations).
    pub justification: poddebug_types::request::Justification,
    /// The latest the copy may run to (the end of the debug request's window it is made
    /// under), whatever its own time limit says.
    pub deadline: Option<jiff::Timestamp>,
    /// The read of the original begun beside authorization, if any.
    pub prefetch: Option<Prefetch>,
    /// Where the time of each phase is observed.
    pub phases: Phases,
}

/// A node debug container to start (`POST nodes/NODE/debug[/NAME]`), after authorization.
#[derive(Clone, Debug)]
pub struct NodeDebugRequest {
    /// The node.
    pub node: String,
    /// The debug container's name (from the URL, the body, or generated).
    pub name: String,
    /// The decoded body.
    pub body: NodeDebugContainer,
    /// The profile (resolved, permitted).
    pub profile: Profile,
    /// Who asks.
    pub caller: Caller,
    /// `?dryRun=All`.
    pub dry_run: bool,
    /// The reason, ticket, debug request and approvers its pod carries (its annotations).
    pub justification: poddebug_types::request::Justification,
    /// The latest its pod may run to (the end of the debug request's window it is made
    /// under), whatever its own time limit says.
    pub deadline: Option<jiff::Timestamp>,
    /// The read of the node begun beside authorization, if any.
    pub prefetch: Option<Prefetch>,
    /// Where the time of each phase is observed.
    pub phases: Phases,
}

/// One event of a watch of objects poddebug keeps as pods it made (node debug containers,
/// copies).
#[derive(Clone, Debug)]
pub enum PodObjectEvent<T> {
    /// Appeared.
    Added(T),
    /// Changed.
    Modified(T),
    /// Its pod was deleted.
    Deleted(T),
    /// Progress marker.
    Bookmark(String),
    /// The watch cannot continue.
    Error(ApiError),
}

/// One event of a watch of node debug containers.
pub type NodeWatchEvent = PodObjectEvent<NodeDebugContainer>;

/// A stream of node watch events.
pub type NodeWatchStream = Pin<Box<dyn Stream<Item = NodeWatchEvent> + Send>>;

/// One event of a watch of copies.
pub type CopyWatchEvent = PodObjectEvent<PodDebugCopy>;

/// A stream of copy watch events.
pub type CopyWatchStream = Pin<Box<dyn Stream<Item = CopyWatchEvent> + Send>>;

/// What a list or watch of the `poddebugcopies` collection selects, beside being a copy: the
/// client's selectors and paging, passed on to the list of pods.
#[derive(Clone, Debug, Default)]
pub struct CopySelection {
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector` (as pods take it: `metadata.name`, `status.phase`, `spec.nodeName`).
    pub field_selector: Option<String>,
    /// `limit`.
    pub limit: Option<u32>,
    /// `continue`.
    pub continue_token: Option<String>,
}

fn unsupported() -> StorageError {
    ApiError::MethodNotAllowed("this storage does not serve copies or node debugging".to_owned())
        .into()
}

/// Copies of pods and node debug containers: pods poddebug makes itself.
#[async_trait::async_trait]
pub trait WorkloadBackend: Send + Sync + 'static {
    /// Make a copy of a pod.
    async fn create_copy(&self, _req: CopyRequest) -> Result<PodDebugCopy, StorageError> {
        Err(unsupported())
    }
    /// One copy of a pod.
    async fn get_copy(
        &self,
        _namespace: &str,
        _pod: &str,
        _name: &str,
        _caller: &Caller,
    ) -> Result<PodDebugCopy, StorageError> {
        Err(unsupported())
    }
    /// The copies of a pod.
    async fn list_copies(
        &self,
        _namespace: &str,
        _pod: &str,
        _caller: &Caller,
    ) -> Result<PodDebugCopyList, StorageError> {
        Err(unsupported())
    }
    /// The copies of every pod (of a namespace, or of all) as the `poddebugcopies` collection
    /// lists them.
    async fn list_all_copies(
        &self,
        _selection: &CopySelection,
        _caller: &Caller,
    ) -> Result<PodDebugCopyList, StorageError> {
        Err(unsupported())
    }
    /// Copy `name` of namespace `namespace`, whatever pod it copies.
    async fn get_any_copy(
        &self,
        _namespace: &str,
        _name: &str,
        _caller: &Caller,
    ) -> Result<PodDebugCopy, StorageError> {
        Err(unsupported())
    }
    /// Watch the copies selected from `resource_version` ("" or "0": the current ones first).
    async fn watch_copies(
        &self,
        _selection: &CopySelection,
        _resource_version: &str,
        _timeout_seconds: Option<u32>,
        _caller: &Caller,
    ) -> Result<CopyWatchStream, StorageError> {
        Err(unsupported())
    }
    /// Delete a copy.
    async fn delete_copy(
        &self,
        _namespace: &str,
        _pod: &str,
        _name: &str,
        _grace_period_seconds: Option<u32>,
        _caller: &Caller,
    ) -> Result<PodDebugCopy, StorageError> {
        Err(unsupported())
    }
    /// Start a node debug container.
    async fn create_node_debug(
        &self,
        _req: NodeDebugRequest,
    ) -> Result<NodeDebugContainer, StorageError> {
        Err(unsupported())
    }
    /// One node debug container.
    async fn get_node_debug(
        &self,
        _node: &str,
        _name: &str,
    ) -> Result<NodeDebugContainer, StorageError> {
        Err(unsupported())
    }
    /// Node debug containers of one node, or of all (named `NODE.NAME`).
    async fn list_node_debug(
        &self,
        _node: Option<&str>,
    ) -> Result<NodeDebugContainerList, StorageError> {
        Err(unsupported())
    }
    /// Watch node debug containers.
    async fn watch_node_debug(
        &self,
        _node: Option<&str>,
        _resource_version: &str,
        _timeout_seconds: Option<u32>,
    ) -> Result<NodeWatchStream, StorageError> {
        Err(unsupported())
    }
    /// Delete a node debug container's pod.
    async fn delete_node_debug(
        &self,
        _node: &str,
        _name: &str,
        _grace_period_seconds: Option<u32>,
    ) -> Result<NodeDebugContainer, StorageError> {
        Err(unsupported())
    }
    /// Where an attach or log of a node debug container goes.
    async fn node_stream_target(
        &self,
        _node: &str,
        _name: &str,
        _wait_running: Option<Duration>,
    ) -> Result<StreamTarget, StorageError> {
        Err(unsupported())
    }
}

/// The verbs of the debug API, mapped onto the pod.
#[async_trait::async_trait]
pub trait DebugBackend: WorkloadBackend + Send + Sync + 'static {
    /// Add a debug container to the pod (validation, policy, append, event, optional wait).
    async fn create(&self, req: CreateRequest) -> Result<PodDebugContainer, StorageError>;
    /// One debug container of a pod, with status.
    async fn get(
        &self,
        namespace: &str,
        pod: &str,
        name: &str,
        caller: &Caller,
    ) -> Result<PodDebugContainer, StorageError>;
    /// Debug containers matching the options.
    async fn list(
        &self,
        opts: &ListOptions,
        caller: &Caller,
    ) -> Result<PodDebugContainerList, StorageError>;
    /// Watch debug containers.
    async fn watch(
        &self,
        opts: &WatchOptions,
        caller: &Caller,
    ) -> Result<DebugWatchStream, StorageError>;
    /// Stop a debug container's processes.
    async fn stop(&self, req: StopRequest) -> Result<StopOutcome, StorageError>;
    /// Resolve an attach/log target: the container must be a debug container of the pod. For
    /// attach, wait up to its duration for it to run; a terminated container or one that cannot
    /// start is an error. A debug container whose stop was asked for (`DELETE`, its time
    /// limit) refuses an attach and a log follow with 409.
    async fn stream_target(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        purpose: StreamUse,
        caller: &Caller,
    ) -> Result<StreamTarget, StorageError>;
    /// True once the upstream kube-apiserver answered at least once (readiness).
    async fn ping(&self) -> Result<(), StorageError>;
    /// Begin the first read of a create (`target`, as `caller`) beside its authorization; the
    /// create takes its answer through its request's `prefetch` (see [`Prefetch`]). `None`
    /// when this storage reads nothing ahead. The read's time is observed in `phases`.
    fn prefetch(
        &self,
        _target: PrefetchTarget,
        _caller: &Caller,
        _phases: &Phases,
    ) -> Option<Prefetch> {
        None
    }
    /// Record an Event about ephemeral container `ec_name` of pod `namespace/pod`, with the
    /// server's identity (best effort: a failure is logged).
    async fn record_event(
        &self,
        _namespace: &str,
        _pod: &str,
        _ec_name: &str,
        _reason: &str,
        _message: String,
    ) {
    }
    /// Wait, at most `within`, for work that outlives its answer (Events written in the
    /// background) to finish; answers whether it all did. Called on shutdown.
    async fn flush(&self, _within: Duration) -> bool {
        true
    }
    /// Why a core `CONNECT` (attach, exec) into `container` of pod `namespace/pod` reaches what
    /// poddebug governs ([`poddebug_types::only_way_in::governed`]), read with the server's
    /// identity; `None` when it does not, or the pod does not exist. The admission webhook's
    /// question; storage without pods governs nothing.
    async fn governed(
        &self,
        _namespace: &str,
        _pod: &str,
        _container: Option<&str>,
    ) -> Result<Option<String>, StorageError> {
        Ok(None)
    }
}
