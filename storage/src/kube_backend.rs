//! [`KubeBackend`]: the [`DebugBackend`] that maps every verb onto the real pod through the
//! Kubernetes API with kube-rs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use poddebug_types::{PodDebugContainer, PodDebugContainerList};

use crate::cache::PodCache;
use crate::cluster::Cluster;
use crate::cluster_version::ClusterVersion;
use crate::disagreements::Disagreements;
use crate::stop_lease::StopLeases;
use crate::{
    BackendConfig, Caller, CreateRequest, DebugBackend, DebugWatchStream, ListOptions, StopOutcome,
    StopRequest, StorageError, StreamTarget, StreamUse, WatchOptions, create, read, stop, target,
    watch,
};

/// The storage backed by a Kubernetes cluster.
///
/// Identities: with `impersonate`, every pod call (get, list, watch, the `pods/ephemeralcontainers`
/// update, the stop exec) is made as the caller, so kube-apiserver's RBAC, Pod Security admission
/// and webhooks judge the real user; Events are always written with the server's own identity.
/// Nothing writes the pod object itself: a stop is recorded in the debug container's termination
/// message and in an Event. RBAC of the server's service account:
/// - always: `create` on `events`;
/// - with a [`PodCache`]: `list` and `watch` on `pods` cluster-wide (the cache is the server's own);
/// - without impersonation: `get`, `list`, `watch` on `pods`, `update` on
///   `pods/ephemeralcontainers` (its server-side dry runs too), `create` and `get` on
///   `pods/exec`;
/// - with impersonation: `impersonate` on `users`, `groups`, `serviceaccounts`, `uids` and
///   `userextras/*` (group `authentication.k8s.io` for the last two), and the callers need the
///   pod rights listed above themselves.
#[derive(Clone)]
pub struct KubeBackend {
    cluster: Cluster,
    cache: Option<PodCache>,
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("config", self.cluster.config())
            .finish_non_exhaustive()
    }
}

impl KubeBackend {
    /// A backend making its calls with `client` (the server's identity; impersonation headers
    /// are added per call when `config.impersonate` is set).
    pub fn new(client: Client, config: BackendConfig) -> Self {
        KubeBackend {
            cluster: Cluster::new(client, config),
            cache: None,
        }
    }

    /// The cluster's version, as last discovered.
    pub fn cluster_version(&self) -> &ClusterVersion {
        self.cluster.cluster_version()
    }

    /// A task that keeps [`cluster_version`](Self::cluster_version) up to date for the life of
    /// the process (startup, reconnects, upgrades); spawn it once.
    pub fn track_cluster_version(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.cluster
            .cluster_version()
            .clone()
            .track(self.cluster.server_client())
    }

    /// The counter of local/cluster validation disagreements, to register for `/metrics`.
    pub fn validation_disagreements(&self) -> &Disagreements {
        self.cluster.validation_disagreements()
    }

    /// The count of Events that could not be written (refused, failed, timed out), to register
    /// for `/metrics`.
    pub fn events_failed(&self) -> &prometheus_client::metrics::counter::Counter {
        self.cluster.events_failed()
    }

    /// Serve lists and watches from `cache` (the server's shared pod reflector) instead of a
    /// LIST or WATCH of the cluster per request; readiness ([`DebugBackend::ping`]) then also
    /// waits for its first sync. One debug container (`get`) is still read from the pod, so
    /// it is fresh right after a create.
    pub fn with_pod_cache(mut self, cache: PodCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &BackendConfig {
        self.cluster.config()
    }

    /// One expiry round at `now`: stop every running debug container whose time limit passed,
    /// with the server's own identity (see `expiry`), except those in `skip` (pod UID and
    /// ephemeral container name of earlier refusals and stops in progress; what no longer runs
    /// past its deadline is dropped from it). The candidates come from the pod cache
    /// when there is one. The pod listing's failure is the only error; each container's own
    /// outcome is in the list.
    pub async fn expire_due(
        &self,
        now: jiff::Timestamp,
        skip: &mut std::collections::BTreeSet<(String, String)>,
    ) -> Result<Vec<crate::Expired>, StorageError> {
        crate::expiry::expire_due(&self.cluster, self.cache.as_ref(), now, skip).await
    }

    /// Keep stop records in `leases` (see `stop_lease`): a `DELETE` records its stop there
    /// before it signals anything, attach and log follow of a stopped container are refused on
    /// every replica, the status shows them, and the leader reports the containers a stop did
    /// not end ([`KubeBackend::unstoppable`]). Without them only time limits are enforced so.
    pub fn with_stop_leases(mut self, leases: StopLeases) -> Self {
        self.cluster.set_stop_leases(leases);
        self
    }

    /// Make evictions (`--unstoppable-action=evict`) with `client`: the server's identity,
    /// built without client-side retries (kube-rs retries a 429 by default, and a
    /// PodDisruptionBudget's refusal is one; see `eviction`). Without it the backend's client is
    /// used.
    pub fn with_eviction_client(mut self, client: Client) -> Self {
        self.cluster.set_eviction_client(client);
        self
    }

    /// The leader's round at `now` (see `unstoppable`): every debug container still running past
    /// the bound of its stop or time limit, each reported once (stop record marked, `Warning`
    /// Event `DebugContainerStopFailed`). Only the listing of pods can fail.
    pub async fn unstoppable(
        &self,
        now: jiff::Timestamp,
    ) -> Result<Vec<crate::Unstoppable>, StorageError> {
        crate::unstoppable::find(&self.cluster, self.cache.as_ref(), now).await
    }

    /// Evict the pod of unstoppable debug container `u` through the Eviction API, with the
    /// server's own identity (see `eviction`); Events on the pod say so (`warn_if_blocked`: also
    /// when a PodDisruptionBudget refuses it).
    pub async fn evict_unstoppable(
        &self,
        u: &crate::Unstoppable,
        warn_if_blocked: bool,
    ) -> crate::EvictionOutcome {
        crate::eviction::evict(&self.cluster, u, warn_if_blocked).await
    }

    /// Remove the stop records no longer needed (pods gone, containers terminated); how many.
    pub async fn collect_stop_records(&self) -> usize {
        crate::unstoppable::collect_records(&self.cluster, self.cache.as_ref()).await
    }

    /// Delete every copy and node debug pod whose deadline passed at `now`, with the server's
    /// own identity.
    pub async fn expire_made_pods(
        &self,
        now: jiff::Timestamp,
    ) -> Result<Vec<crate::ExpiredPod>, StorageError> {
        crate::copies::expire_made_pods(&self.cluster, now).await
    }

    /// With impersonation, reads served from the cache (made with the server's identity) are
    /// first tried as the caller, for kube-apiserver's RBAC to judge: a LIST of one pod, or a
    /// WATCH that is closed at once. Its refusal (403) is the answer; without impersonation the
    /// server's own authorization of the request is the only one, as for every other read.
    async fn caller_may_read(&self, api: &Api<Pod>, watch: bool) -> Result<(), StorageError> {
        if !self.cluster.config().impersonate {
            return Ok(());
        }
        if watch {
            let probe = kube::api::WatchParams::default().timeout(1);
            drop(api.watch(&probe, "0").await?);
        } else {
            api.list(&kube::api::ListParams::default().limit(1)).await?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl DebugBackend for KubeBackend {
    async fn create(&self, req: CreateRequest) -> Result<PodDebugContainer, StorageError> {
        create::create(&self.cluster, req).await
    }

    async fn get(
        &self,
        namespace: &str,
        pod: &str,
        name: &str,
        caller: &Caller,
    ) -> Result<PodDebugContainer, StorageError> {
        read::get(
            &self.cluster.pods(namespace, caller)?,
            pod,
            name,
            self.cluster.stop_leases(),
        )
        .await
    }

    async fn list(
        &self,
        opts: &ListOptions,
        caller: &Caller,
    ) -> Result<PodDebugContainerList, StorageError> {
        let api = self.cluster.pods_in(opts.namespace.as_deref(), caller)?;
        match &self.cache {
            Some(cache) => {
                self.caller_may_read(&api, false).await?;
                read::list_cached(cache, &api, opts, self.cluster.stop_leases()).await
            }
            None => read::list(&api, opts, self.cluster.stop_leases()).await,
        }
    }

    async fn watch(
        &self,
        opts: &WatchOptions,
        caller: &Caller,
    ) -> Result<DebugWatchStream, StorageError> {
        let api = self
            .cluster
            .pods_in(opts.list.namespace.as_deref(), caller)?;
        match &self.cache {
            Some(cache) => {
                self.caller_may_read(&api, true).await?;
                watch::watch_cached(cache, opts, self.cluster.stop_leases().cloned())
            }
            None => watch::watch(api, opts, self.cluster.stop_leases().cloned()).await,
        }
    }

    async fn stop(&self, req: StopRequest) -> Result<StopOutcome, StorageError> {
        stop::stop(&self.cluster, req).await
    }

    async fn stream_target(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        purpose: StreamUse,
        caller: &Caller,
    ) -> Result<StreamTarget, StorageError> {
        target::stream_target(
            &self.cluster,
            &self.cluster.pods(namespace, caller)?,
            namespace,
            pod,
            container,
            purpose,
        )
        .await
    }

    async fn record_event(
        &self,
        namespace: &str,
        pod: &str,
        ec_name: &str,
        reason: &str,
        message: String,
    ) {
        // The pod as the server sees it (its uid in the Event); its names alone when it is gone.
        let api: Api<Pod> = Api::namespaced(self.cluster.server_client(), namespace);
        let pod_obj = match api.get(pod).await {
            Ok(p) => p,
            Err(_) => Pod {
                metadata: kube::api::ObjectMeta {
                    name: Some(pod.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    ..Default::default()
                },
                ..Default::default()
            },
        };
        self.cluster
            .record_event_within(&pod_obj, ec_name, reason, message, Duration::from_secs(5))
            .await;
    }

    async fn ping(&self) -> Result<(), StorageError> {
        // `/version` answers both questions: is the cluster there, and which rules apply.
        self.cluster
            .cluster_version()
            .discover(&self.cluster.server_client())
            .await?;
        if self.cache.as_ref().is_some_and(|c| !c.is_synced()) {
            return Err(poddebug_types::ApiError::ServiceUnavailable(
                "the pod cache has not synced yet".to_owned(),
            )
            .into());
        }
        Ok(())
    }

    async fn flush(&self, within: Duration) -> bool {
        self.cluster.flush_events(within).await
    }

    async fn governed(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
    ) -> Result<Option<String>, StorageError> {
        // A consistent read, not the watch cache's: the container the CONNECT names may have
        // been added a moment ago, and kube-apiserver resolves the CONNECT on the pod as it is.
        let api: Api<Pod> = Api::namespaced(self.cluster.server_client(), namespace);
        Ok(api
            .get_opt(pod)
            .await?
            .and_then(|p| poddebug_types::only_way_in::governed(&p, container)))
    }

    fn prefetch(
        &self,
        target: crate::PrefetchTarget,
        caller: &Caller,
        phases: &crate::Phases,
    ) -> Option<crate::Prefetch> {
        // The identity the create itself reads with: the caller's with `--impersonate` for a
        // pod, always the server's for a node.
        let client = match &target {
            crate::PrefetchTarget::Pod { .. } => self.cluster.client_for(caller).ok()?,
            crate::PrefetchTarget::Node { .. } => self.cluster.server_client(),
        };
        Some(crate::Prefetch::start(client, target, caller, phases))
    }
}

#[async_trait::async_trait]
impl crate::WorkloadBackend for KubeBackend {
    async fn create_copy(
        &self,
        req: crate::CopyRequest,
    ) -> Result<poddebug_types::copy::PodDebugCopy, StorageError> {
        crate::copies::create(&self.cluster, req).await
    }

    async fn get_copy(
        &self,
        namespace: &str,
        pod: &str,
        name: &str,
        caller: &Caller,
    ) -> Result<poddebug_types::copy::PodDebugCopy, StorageError> {
        let p = crate::copies::get(&self.cluster, namespace, pod, name, caller).await?;
        Ok(poddebug_types::copy::copy_from_pod(&p))
    }

    async fn list_copies(
        &self,
        namespace: &str,
        pod: &str,
        caller: &Caller,
    ) -> Result<poddebug_types::copy::PodDebugCopyList, StorageError> {
        crate::copies::list(&self.cluster, namespace, pod, caller).await
    }

    async fn list_all_copies(
        &self,
        selection: &crate::CopySelection,
        caller: &Caller,
    ) -> Result<poddebug_types::copy::PodDebugCopyList, StorageError> {
        crate::copies::list_all(&self.cluster, selection, caller).await
    }

    async fn get_any_copy(
        &self,
        namespace: &str,
        name: &str,
        caller: &Caller,
    ) -> Result<poddebug_types::copy::PodDebugCopy, StorageError> {
        crate::copies::get_any(&self.cluster, namespace, name, caller).await
    }

    async fn watch_copies(
        &self,
        selection: &crate::CopySelection,
        resource_version: &str,
        timeout_seconds: Option<u32>,
        caller: &Caller,
    ) -> Result<crate::CopyWatchStream, StorageError> {
        crate::copies::watch(
            &self.cluster,
            selection,
            resource_version,
            timeout_seconds,
            caller,
        )
        .await
    }

    async fn delete_copy(
        &self,
        namespace: &str,
        pod: &str,
        name: &str,
        grace_period_seconds: Option<u32>,
        caller: &Caller,
    ) -> Result<poddebug_types::copy::PodDebugCopy, StorageError> {
        crate::copies::delete(
            &self.cluster,
            namespace,
            pod,
            name,
            grace_period_seconds,
            caller,
        )
        .await
    }

    async fn create_node_debug(
        &self,
        req: crate::NodeDebugRequest,
    ) -> Result<poddebug_types::node::NodeDebugContainer, StorageError> {
        crate::nodes::create(&self.cluster, req).await
    }

    async fn get_node_debug(
        &self,
        node: &str,
        name: &str,
    ) -> Result<poddebug_types::node::NodeDebugContainer, StorageError> {
        let p = crate::nodes::get_pod(&self.cluster, node, name).await?;
        Ok(poddebug_types::node::node_debug_from_pod(&p))
    }

    async fn list_node_debug(
        &self,
        node: Option<&str>,
    ) -> Result<poddebug_types::node::NodeDebugContainerList, StorageError> {
        crate::nodes::list(&self.cluster, node).await
    }

    async fn watch_node_debug(
        &self,
        node: Option<&str>,
        resource_version: &str,
        timeout_seconds: Option<u32>,
    ) -> Result<crate::NodeWatchStream, StorageError> {
        crate::nodes::watch(&self.cluster, node, resource_version, timeout_seconds).await
    }

    async fn delete_node_debug(
        &self,
        node: &str,
        name: &str,
        grace_period_seconds: Option<u32>,
    ) -> Result<poddebug_types::node::NodeDebugContainer, StorageError> {
        crate::nodes::delete(&self.cluster, node, name, grace_period_seconds).await
    }

    async fn node_stream_target(
        &self,
        node: &str,
        name: &str,
        wait_running: Option<Duration>,
    ) -> Result<StreamTarget, StorageError> {
        crate::nodes::stream_target(&self.cluster, node, name, wait_running).await
    }
}
