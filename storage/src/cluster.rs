//! [`Cluster`]: what every verb of [`KubeBackend`](crate::KubeBackend) works with (the client,
//! the configuration, the Event reporter), kept apart from the backend itself so that the verbs
//! (`create`, `stop`, …) depend on it and the backend on them, without a cycle.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use tokio::sync::Semaphore;

use crate::cluster_version::ClusterVersion;
use prometheus_client::metrics::counter::Counter;

use crate::disagreements::Disagreements;
use crate::events::{Reporter, build_event, record};
use crate::impersonation::impersonating_client;
use crate::phases::{Phase, Phases};
use crate::stop_lease::StopLeases;
use crate::{BackendConfig, Caller, StorageError};

/// The cluster the verbs act on, and how.
#[derive(Clone)]
pub(crate) struct Cluster {
    client: Client,
    config: BackendConfig,
    reporter: Reporter,
    version: ClusterVersion,
    disagreements: Disagreements,
    /// Event writes running after their answer was sent (see [`Cluster::record_event_detached`]).
    events_in_flight: Arc<Semaphore>,
    /// Events that could not be written (refused, failed, timed out).
    events_failed: Counter,
    /// The stop records in the server's namespace, when kept (see `stop_lease`).
    stop_leases: Option<StopLeases>,
    /// The server's identity without client-side retries, for evictions (see `eviction`).
    eviction_client: Option<Client>,
}

/// At most this many Events are written in the background at once; beyond it a create waits
/// for its own Event, as before, so a slow events API slows creates instead of piling up tasks.
pub(crate) const EVENTS_IN_FLIGHT: u32 = 256;

impl Cluster {
    /// Calls made with `client` (the server's identity; impersonation headers are added per
    /// call when `config.impersonate` is set).
    pub(crate) fn new(client: Client, config: BackendConfig) -> Self {
        let reporter = Reporter {
            component: config.reporting_component.clone(),
            instance: config.reporting_instance.clone(),
        };
        Cluster {
            client,
            config,
            reporter,
            version: ClusterVersion::default(),
            disagreements: Disagreements::default(),
            events_in_flight: Arc::new(Semaphore::new(EVENTS_IN_FLIGHT as usize)),
            events_failed: Counter::default(),
            stop_leases: None,
            eviction_client: None,
        }
    }

    /// The count of Events that could not be written.
    pub(crate) fn events_failed(&self) -> &Counter {
        &self.events_failed
    }

    /// Make evictions with `client` (the server's identity, without retries).
    pub(crate) fn set_eviction_client(&mut self, client: Client) {
        self.eviction_client = Some(client);
    }

    /// The client evictions are made with: the one set, else the server's.
    pub(crate) fn eviction_client(&self) -> Client {
        self.eviction_client
            .clone()
            .unwrap_or_else(|| self.client.clone())
    }

    /// Keep stop records in `leases` (a `DELETE` records its stop there, the attach and
    /// log-follow gate and the status read them).
    pub(crate) fn set_stop_leases(&mut self, leases: StopLeases) {
        self.stop_leases = Some(leases);
    }

    /// The stop records, when kept.
    pub(crate) fn stop_leases(&self) -> Option<&StopLeases> {
        self.stop_leases.as_ref()
    }

    /// The cluster's version, as last discovered.
    pub(crate) fn cluster_version(&self) -> &ClusterVersion {
        &self.version
    }

    /// The counter of local/cluster validation disagreements.
    pub(crate) fn validation_disagreements(&self) -> &Disagreements {
        &self.disagreements
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &BackendConfig {
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
    pub(crate) fn pods_in(
        &self,
        namespace: Option<&str>,
        caller: &Caller,
    ) -> Result<Api<Pod>, StorageError> {
        let client = self.client_for(caller)?;
        Ok(match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        })
    }

    /// Record an Event about ephemeral container `ec_name` of `pod`, waiting at most `timeout`
    /// (and never more than the configured Event timeout); failures are only logged.
    pub(crate) async fn record_event_within(
        &self,
        pod: &Pod,
        ec_name: &str,
        reason: &str,
        message: String,
        timeout: Duration,
    ) {
        let event = self.event(pod, ec_name, reason, message);
        let timeout = timeout.min(self.config.event_timeout);
        if !record(self.server_client(), event, timeout).await {
            self.events_failed.inc();
        }
    }

    /// Record an Event like [`Cluster::record_event_within`], but off the caller's path: the
    /// write runs in a task of its own (bounded by the Event timeout), so the answer does not
    /// wait for the events API. When [`EVENTS_IN_FLIGHT`] writes are already running, it is
    /// written before returning instead. [`Cluster::flush_events`] waits for those in flight.
    /// Its time is observed as the create's [`Phase::Event`]; a failure is logged and counted
    /// ([`Cluster::events_failed`]).
    pub(crate) async fn record_event_detached(
        &self,
        pod: &Pod,
        ec_name: &str,
        reason: &str,
        message: String,
        phases: &Phases,
    ) {
        let event = self.event(pod, ec_name, reason, message);
        let client = self.server_client();
        let timeout = self.config.event_timeout;
        let failed = self.events_failed.clone();
        let phases = phases.clone();
        let write = async move {
            if !phases
                .time(Phase::Event, record(client, event, timeout))
                .await
            {
                failed.inc();
            }
        };
        match self.events_in_flight.clone().try_acquire_owned() {
            Ok(permit) => {
                // In the create's span still, so that a trace ties the write to its create.
                tokio::spawn(tracing::Instrument::instrument(
                    async move {
                        write.await;
                        drop(permit);
                    },
                    tracing::Span::current(),
                ));
            }
            Err(_) => write.await,
        }
    }

    /// The Event about ephemeral container `ec_name` of `pod`, as this server reports it, now.
    fn event(
        &self,
        pod: &Pod,
        ec_name: &str,
        reason: &str,
        message: String,
    ) -> k8s_openapi::api::core::v1::Event {
        build_event(
            &self.reporter,
            pod,
            ec_name,
            reason,
            message,
            jiff::Timestamp::now(),
        )
    }

    /// Wait until the Events written in the background are done, at most `within`; answers
    /// whether they all are.
    pub(crate) async fn flush_events(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.events_in_flight.acquire_many(EVENTS_IN_FLIGHT))
            .await
            .is_ok_and(|permits| permits.is_ok())
    }
}
