//! Configuration of [`KubeBackend`](crate::KubeBackend).

use std::time::Duration;

use crate::{Policy, TtlPolicy};

/// How [`KubeBackend`](crate::KubeBackend) behaves; built once from the server's flags.
#[derive(Clone, Debug)]
pub struct BackendConfig {
    /// Policy applied to every create (allowed images, default image and profile, limits).
    pub policy: Policy,
    /// Make every pod call (read, update of `pods/ephemeralcontainers`, exec, list, watch) as
    /// the caller, with `Impersonate-*` headers. The server's own identity still records Events.
    pub impersonate: bool,
    /// `source.component` and `reportingComponent` of the Events recorded on pods.
    pub reporting_component: String,
    /// `reportingInstance` of the Events (for example the server's pod name); empty = unset.
    pub reporting_instance: String,
    /// Time allowed to the stop script on top of the grace period before the exec is abandoned
    /// (at most: the request's deadline cuts it shorter).
    pub stop_exec_timeout: Duration,
    /// After the stop script ends, how long to wait for the kubelet to report the container
    /// terminated before answering "in progress" (at most: the request's deadline cuts it
    /// shorter).
    pub stop_status_wait: Duration,
    /// Upper bound of the grace period a stop may ask for: kube-apiserver cuts requests to an
    /// aggregated server after `--request-timeout` (1m by default).
    pub max_grace_period: Duration,
    /// How many times a create re-reads the pod and retries after a 409 Conflict. Every
    /// conflict means another writer succeeded (a create, the kubelet's status update), so a
    /// burst of N creates on one pod needs up to N-1 retries for its last one.
    pub conflict_retries: u32,
    /// Bound on each Event write (a stop keeps at most this much of its deadline for its Event);
    /// Event failures are logged, never returned.
    pub event_timeout: Duration,
    /// Time limits of debug containers (none by default).
    pub ttl: TtlPolicy,
    /// Namespace of node debug pods (`--node-debug-namespace`).
    pub node_debug_namespace: String,
    /// How long past its grace period a stopped or expired debug container may still run
    /// before it is reported unstoppable (`--unstoppable-after`; see `unstoppable`).
    pub unstoppable_after: Duration,
    /// How often the expiry loop looks (`--debug-ttl-check-interval`): an expired container is
    /// stopped up to this long after its deadline, which its bound allows for.
    pub expiry_check_interval: Duration,
    /// What the leader does to the pod of an unstoppable debug container
    /// (`--unstoppable-action`).
    pub unstoppable_action: UnstoppableAction,
}

/// What is done to the pod of a debug container that a stop did not end
/// (`--unstoppable-action`). Either way the container is unusable through poddebug.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnstoppableAction {
    /// Nothing: it is reported, and ends with its own exit or its pod (`none`, the default).
    #[default]
    None,
    /// Evict the pod through the Eviction API, which PodDisruptionBudgets can refuse (then it is
    /// tried again later), so that its controller replaces it (`evict`).
    Evict,
}

impl UnstoppableAction {
    /// Parse the flag value (`none`, `evict`).
    pub fn parse(s: &str) -> Option<UnstoppableAction> {
        match s {
            "none" => Some(UnstoppableAction::None),
            "evict" => Some(UnstoppableAction::Evict),
            _ => None,
        }
    }

    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            UnstoppableAction::None => "none",
            UnstoppableAction::Evict => "evict",
        }
    }
}

impl BackendConfig {
    /// The defaults: no impersonation, component `poddebug`, 10s exec slack, 5s status wait,
    /// grace periods capped at 25s, 30 conflict retries, 3s Event timeout, unstoppable 30s past
    /// a stop's grace period, nothing done to their pods.
    pub fn new(policy: Policy) -> Self {
        BackendConfig {
            policy,
            impersonate: false,
            reporting_component: "poddebug".to_owned(),
            reporting_instance: String::new(),
            stop_exec_timeout: Duration::from_secs(10),
            stop_status_wait: Duration::from_secs(5),
            max_grace_period: Duration::from_secs(25),
            conflict_retries: 30,
            event_timeout: Duration::from_secs(3),
            ttl: TtlPolicy::default(),
            node_debug_namespace: "poddebug-nodes".to_owned(),
            unstoppable_after: Duration::from_secs(30),
            expiry_check_interval: Duration::from_secs(10),
            unstoppable_action: UnstoppableAction::None,
        }
    }
}
