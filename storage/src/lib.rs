//! REST storage of poddebug: each verb of the debug API mapped onto the real pod through the
//! Kubernetes API. The pod is the source of truth; nothing is stored here.
//!
//! Handlers in `poddebug-apiserver` talk to [`DebugBackend`], never to kube-rs directly, so they
//! can be tested with an in-memory backend while the end-to-end suite runs [`KubeBackend`]
//! against the fake kube-apiserver.
//!
//! How each verb maps onto the pod:
//! - create: `GET pods/POD`, then `PUT pods/POD/ephemeralcontainers` with the resourceVersion read
//!   (retried on 409 Conflict), then a core/v1 Event `DebugContainerCreated` (see [`KubeBackend`]).
//!   When the local validator refuses, the same update is first sent as a server-side dry run
//!   and the cluster's answer decides; `?dryRun=All` ends with that dry run.
//! - get: the pod read and turned into one object per debug name.
//! - list / watch: served from [`PodCache`], one shared reflector of the cluster's pods, when
//!   the backend has one ([`KubeBackend::with_pod_cache`]); else a pod LIST or WATCH each.
//! - stop: a stop record in the server's namespace ([`StopLeases`]), then `pods/exec` of a fixed
//!   script inside the debug container itself ([`STOP_SCRIPT`]), which records the request in
//!   the container's termination message before it signals; plus an Event
//!   `DebugContainerStopped`. The pod object is never written. The script's word is not taken:
//!   a stopped container is refused to attach and log follow, and one still running past its
//!   bound is reported unstoppable ([`Unstoppable`]).
#![warn(missing_docs)]
// `ApiError` (poddebug-types) is over clippy's 128-byte line and is what every error of this
// crate carries, as the `DebugBackend` interface defines; errors are the cold path, and boxing
// them here would only move the cost to every handler.
#![allow(clippy::result_large_err)]

mod backend;
#[cfg(test)]
mod backend_tests;
mod cache;
mod change_log;
mod cluster;
mod cluster_version;
mod config;
mod copies;
mod create;
mod disagreements;
mod error;
mod events;
mod eviction;
mod expiry;
mod impersonation;
mod kube_backend;
mod naming;
mod nodes;
mod phases;
pub mod pod_json;
mod policy;
mod prefetch;
mod read;
pub mod record_key;
mod requests;
pub mod secret_once;
mod selector;
mod sessions;
pub mod signing_secret;
mod state;
mod stop;
mod stop_lease;
mod stop_record;
mod stop_script;
mod target;
#[cfg(test)]
mod testkube;
mod ttl;
mod unstoppable;
mod untrusted;
mod wait;
mod watch;

pub use backend::*;
pub use cache::PodCache;
pub use cluster_version::ClusterVersion;
pub use config::BackendConfig;
pub use config::UnstoppableAction;
pub use copies::ExpiredPod;
pub use disagreements::{Disagreement, DisagreementLabels, Disagreements};
pub use error::StorageError;
pub use events::{
    REASON_CREATED, REASON_EVICTION_BLOCKED, REASON_EXPIRED, REASON_NOT_STOPPABLE,
    REASON_POD_EVICTED, REASON_SESSION_TERMINATED, REASON_STOP_FAILED, REASON_STOPPED,
};
pub use eviction::EvictionOutcome;
pub use expiry::{EXPIRY_USER, Expired, ExpiryResult};
pub use impersonation::{ImpersonationLayer, impersonation_headers};
pub use kube_backend::KubeBackend;
pub use phases::{CreateKind, Phase, PhaseLabels, PhaseMetrics, Phases};
pub use policy::glob_match;
pub use prefetch::{Prefetch, PrefetchTarget};
pub use requests::{
    Ignored as IgnoredRequestRecord, IgnoredLabels as IgnoredRequestLabels, MAC_ANNOTATION,
    REQUEST_LABEL, RequestEvent, RequestSelector, RequestStore, StoredRequest,
    TooOld as RequestHistoryTooOld, lease_name as request_lease_name,
};
pub use selector::LabelSelector;
pub use sessions::{
    AdmissionTicket, ContainerKey, LiveSession, MAC_ANNOTATION as SESSION_MAC_ANNOTATION,
    OverLimit, RECORD_ANNOTATION as SESSION_RECORD_ANNOTATION, SESSION_LABEL, SessionEvent,
    SessionRecord, SessionSelector, SessionStore, Termination, TooOld as SessionHistoryTooOld,
    label_value, new_session_id, object_of as session_object, second_pair_of_eyes,
};
pub use stop_lease::{
    MAC_ANNOTATION as STOP_RECORD_MAC_ANNOTATION, RECORD_ANNOTATION as STOP_RECORD_ANNOTATION,
    STOP_RECORD_LABEL, StopLease, StopLeases, StopOrigin, lease_name as stop_lease_name,
};
pub use stop_record::STOP_REQUESTS_ANNOTATION;
pub use stop_script::{STOP_SCRIPT, StopInvocation};
pub use ttl::TtlPolicy;
pub use unstoppable::Unstoppable;
pub use untrusted::{RecordKind, RecordKindLabels, UntrustedRecords};
