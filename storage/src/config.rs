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
}

impl BackendConfig {
    /// The defaults: no impersonation, component `poddebug`, 10s exec slack, 5s status wait,
    /// grace periods capped at 25s, 30 conflict retries, 3s Event timeout.
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
        }
    }
}
