//! [`KubeBackend`]: the [`DebugBackend`] that maps every verb onto the real pod through the
//! Kubernetes API with kube-rs.

use std::time::Duration;

use kube::Client;
use poddebug_types::{PodDebugContainer, PodDebugContainerList};

use crate::cluster::Cluster;
use crate::cluster_version::ClusterVersion;
use crate::disagreements::Disagreements;
use crate::{
    BackendConfig, Caller, CreateRequest, DebugBackend, DebugWatchStream, ListOptions, StopOutcome,
    StopRequest, StorageError, StreamTarget, WatchOptions, create, read, stop, target, watch,
};

/// The storage backed by a Kubernetes cluster.
///
/// Identities: with `impersonate`, every pod call (get, list, watch, the `pods/ephemeralcontainers`
/// update, the stop exec) is made as the caller, so kube-apiserver's RBAC, Pod Security admission
/// and webhooks judge the real user; Events are always written with the server's own identity.
/// Nothing writes the pod object itself: a stop is recorded in the debug container's termination
/// message and in an Event. RBAC of the server's service account:
/// - always: `create` on `events`;
/// - without impersonation: `get`, `list`, `watch` on `pods`, `update` on
///   `pods/ephemeralcontainers` (its server-side dry runs too), `create` and `get` on
///   `pods/exec`;
/// - with impersonation: `impersonate` on `users`, `groups`, `serviceaccounts`, `uids` and
///   `userextras/*` (group `authentication.k8s.io` for the last two), and the callers need the
///   pod rights listed above themselves.
#[derive(Clone)]
pub struct KubeBackend {
    cluster: Cluster,
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

    /// The configuration.
    pub fn config(&self) -> &BackendConfig {
        self.cluster.config()
    }

    /// One expiry round at `now`: stop every running debug container whose time limit passed,
    /// with the server's own identity (see `expiry`), except those in `skip` (pod UID and
    /// ephemeral container name of earlier refusals). The pod listing's failure is the only
    /// error; each container's own outcome is in the list.
    pub async fn expire_due(
        &self,
        now: jiff::Timestamp,
        skip: &std::collections::BTreeSet<(String, String)>,
    ) -> Result<Vec<crate::Expired>, StorageError> {
        crate::expiry::expire_due(&self.cluster, now, skip).await
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
        read::get(&self.cluster.pods(namespace, caller)?, pod, name).await
    }

    async fn list(
        &self,
        opts: &ListOptions,
        caller: &Caller,
    ) -> Result<PodDebugContainerList, StorageError> {
        read::list(
            &self.cluster.pods_in(opts.namespace.as_deref(), caller)?,
            opts,
        )
        .await
    }

    async fn watch(
        &self,
        opts: &WatchOptions,
        caller: &Caller,
    ) -> Result<DebugWatchStream, StorageError> {
        watch::watch(
            self.cluster
                .pods_in(opts.list.namespace.as_deref(), caller)?,
            opts,
        )
        .await
    }

    async fn stop(&self, req: StopRequest) -> Result<StopOutcome, StorageError> {
        stop::stop(&self.cluster, req).await
    }

    async fn stream_target(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        wait_running: Option<Duration>,
        caller: &Caller,
    ) -> Result<StreamTarget, StorageError> {
        target::stream_target(
            &self.cluster.pods(namespace, caller)?,
            namespace,
            pod,
            container,
            wait_running,
        )
        .await
    }

    async fn ping(&self) -> Result<(), StorageError> {
        // `/version` answers both questions: is the cluster there, and which rules apply.
        self.cluster
            .cluster_version()
            .discover(&self.cluster.server_client())
            .await?;
        Ok(())
    }
}
