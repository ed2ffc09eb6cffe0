//! [`KubeBackend`]: the [`DebugBackend`] that maps every verb onto the real pod through the
//! Kubernetes API with kube-rs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use poddebug_types::{PodDebugContainer, PodDebugContainerList};

use crate::cluster_version::ClusterVersion;
use crate::disagreements::Disagreements;
use crate::events::{Reporter, build_event, record};
use crate::impersonation::impersonating_client;
use crate::{
    BackendConfig, Caller, CreateRequest, DebugBackend, DebugWatchStream, ListOptions, StopOutcome,
    StopRequest, StorageError, StreamTarget, WatchOptions, create, read, stop, target, watch,
};

/// The storage backed by a Kubernetes cluster.
///
/// Identities: with `impersonate`, every pod call (get, list, watch, the `pods/ephemeralcontainers`
/// update, the stop exec) is made as the caller, so kube-apiserver's RBAC, Pod Security admission
/// and webhooks judge the real user; Events and the stop-request annotation are always written
/// with the server's own identity. RBAC of the server's service account:
/// - always: `create` on `events`, `get` and `patch` on `pods` (stop record);
/// - without impersonation: `get`, `list`, `watch` on `pods`, `update` on
///   `pods/ephemeralcontainers` (its server-side dry runs too), `create` and `get` on
///   `pods/exec`;
/// - with impersonation: `impersonate` on `users`, `groups`, `serviceaccounts`, `uids` and
///   `userextras/*` (group `authentication.k8s.io` for the last two), and the callers need the
///   pod rights listed above themselves.
#[derive(Clone)]
pub struct KubeBackend {
    client: Client,
    config: BackendConfig,
    reporter: Reporter,
    version: ClusterVersion,
    disagreements: Disagreements,
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl KubeBackend {
    /// A backend making its calls with `client` (the server's identity; impersonation headers
    /// are added per call when `config.impersonate` is set).
    pub fn new(client: Client, config: BackendConfig) -> Self {
        let reporter = Reporter {
            component: config.reporting_component.clone(),
            instance: config.reporting_instance.clone(),
        };
        KubeBackend {
            client,
            config,
            reporter,
            version: ClusterVersion::default(),
            disagreements: Disagreements::default(),
        }
    }

    /// The cluster's version, as last discovered.
    pub fn cluster_version(&self) -> &ClusterVersion {
        &self.version
    }

    /// A task that keeps [`cluster_version`](Self::cluster_version) up to date for the life of
    /// the process (startup, reconnects, upgrades); spawn it once.
    pub fn track_cluster_version(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.version.clone().track(self.client.clone())
    }

    /// The counter of local/cluster validation disagreements, to register for `/metrics`.
    pub fn validation_disagreements(&self) -> &Disagreements {
        &self.disagreements
    }

    /// The configuration.
    pub fn config(&self) -> &BackendConfig {
        &self.config
    }

    /// The client with the server's own identity.
    pub(crate) fn server_client(&self) -> Client {
        self.client.clone()
    }

    /// The client for calls made on behalf of `caller`.
    pub(crate) fn client_for(&self, caller: &Caller) -> Result<Client, StorageError> {
        if self.config.impersonate {
            Ok(impersonating_client(&self.client, caller)?)
        } else {
            Ok(self.client.clone())
        }
    }

    /// Pods of `namespace`, as `caller`.
    pub(crate) fn pods(&self, namespace: &str, caller: &Caller) -> Result<Api<Pod>, StorageError> {
        Ok(Api::namespaced(self.client_for(caller)?, namespace))
    }

    /// Pods of `namespace`, or of all namespaces, as `caller`.
    fn pods_in(&self, namespace: Option<&str>, caller: &Caller) -> Result<Api<Pod>, StorageError> {
        let client = self.client_for(caller)?;
        Ok(match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        })
    }

    /// Record an Event about ephemeral container `ec_name` of `pod`; failures are only logged.
    pub(crate) async fn record_event(
        &self,
        pod: &Pod,
        ec_name: &str,
        reason: &str,
        message: String,
    ) {
        let event = build_event(
            &self.reporter,
            pod,
            ec_name,
            reason,
            message,
            jiff::Timestamp::now(),
        );
        record(self.server_client(), event, self.config.event_timeout).await;
    }
}

#[async_trait::async_trait]
impl DebugBackend for KubeBackend {
    async fn create(&self, req: CreateRequest) -> Result<PodDebugContainer, StorageError> {
        create::create(self, req).await
    }

    async fn get(
        &self,
        namespace: &str,
        pod: &str,
        name: &str,
        caller: &Caller,
    ) -> Result<PodDebugContainer, StorageError> {
        read::get(&self.pods(namespace, caller)?, pod, name).await
    }

    async fn list(
        &self,
        opts: &ListOptions,
        caller: &Caller,
    ) -> Result<PodDebugContainerList, StorageError> {
        read::list(&self.pods_in(opts.namespace.as_deref(), caller)?, opts).await
    }

    async fn watch(
        &self,
        opts: &WatchOptions,
        caller: &Caller,
    ) -> Result<DebugWatchStream, StorageError> {
        watch::watch(self.pods_in(opts.list.namespace.as_deref(), caller)?, opts).await
    }

    async fn stop(&self, req: StopRequest) -> Result<StopOutcome, StorageError> {
        stop::stop(self, req).await
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
            &self.pods(namespace, caller)?,
            namespace,
            pod,
            container,
            wait_running,
        )
        .await
    }

    async fn ping(&self) -> Result<(), StorageError> {
        // `/version` answers both questions: is the cluster there, and which rules apply.
        self.version.discover(&self.client).await?;
        Ok(())
    }
}
