//! [`KubeBackend`]: the [`DebugBackend`] that maps every verb onto the real pod through the
//! Kubernetes API with kube-rs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use poddebug_types::{PodDebugContainer, PodDebugContainerList};

use crate::cache::PodCache;
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
/// - always: `create` on `events`, `get` and `patch` on `pods` (stop record), and with a
///   [`PodCache`] `list` and `watch` on `pods` cluster-wide (the cache is the server's own);
/// - without impersonation: `get`, `list`, `watch` on `pods`, `update` on
///   `pods/ephemeralcontainers`, `create` and `get` on `pods/exec`;
/// - with impersonation: `impersonate` on `users`, `groups`, `serviceaccounts`, `uids` and
///   `userextras/*` (group `authentication.k8s.io` for the last two), and the callers need the
///   pod rights listed above themselves.
#[derive(Clone)]
pub struct KubeBackend {
    client: Client,
    config: BackendConfig,
    reporter: Reporter,
    cache: Option<PodCache>,
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
            cache: None,
        }
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

    /// With impersonation, reads served from the cache (made with the server's identity) are
    /// first tried as the caller, for kube-apiserver's RBAC to judge: a LIST of one pod, or a
    /// WATCH that is closed at once. Its refusal (403) is the answer; without impersonation the
    /// server's own authorization of the request is the only one, as for every other read.
    async fn caller_may_read(&self, api: &Api<Pod>, watch: bool) -> Result<(), StorageError> {
        if !self.config.impersonate {
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
        let api = self.pods_in(opts.namespace.as_deref(), caller)?;
        match &self.cache {
            Some(cache) => {
                self.caller_may_read(&api, false).await?;
                read::list_cached(cache, &api, opts).await
            }
            None => read::list(&api, opts).await,
        }
    }

    async fn watch(
        &self,
        opts: &WatchOptions,
        caller: &Caller,
    ) -> Result<DebugWatchStream, StorageError> {
        match &self.cache {
            Some(cache) => {
                let api = self.pods_in(opts.list.namespace.as_deref(), caller)?;
                self.caller_may_read(&api, true).await?;
                watch::watch_cached(cache, opts)
            }
            None => watch::watch(self.pods_in(opts.list.namespace.as_deref(), caller)?, opts).await,
        }
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
        self.client.apiserver_version().await?;
        if self.cache.as_ref().is_some_and(|c| !c.is_synced()) {
            return Err(poddebug_types::ApiError::ServiceUnavailable(
                "the pod cache has not synced yet".to_owned(),
            )
            .into());
        }
        Ok(())
    }
}
