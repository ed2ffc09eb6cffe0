//! Run: the last step of Options → Config → Run. From the frozen [`Config`] it builds the
//! parts (serving certificate, cluster clients, authentication, authorization, storage, the
//! router), starts the background work, serves, and shuts down gracefully.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::authn::config::AuthConfigStore;
use crate::authn::token::TokenAuthenticator;
use crate::authn::{self, Authenticator};
use crate::authz::SarAuthorizer;
use crate::config::{Config, ServingCert};
use crate::error::StartupError;
use crate::metrics::{self, Metrics};
use crate::serving::tls::{CertFiles, ReloadingCert};
use crate::state::{AppState, Readiness};
use crate::{routes, serving, upstream_metrics};

/// Load a kube-rs configuration: the given kubeconfig, else the in-cluster configuration, else
/// (for running outside a cluster) the usual kubeconfig discovery (`KUBECONFIG`, `~/.kube/config`).
pub async fn kube_config(
    path: Option<&std::path::Path>,
    what: &str,
) -> Result<kube::Config, StartupError> {
    let err = |e: Box<dyn std::error::Error + Send + Sync>| StartupError::Kubeconfig {
        what: what.to_owned(),
        source: e,
    };
    match path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p).map_err(|e| err(Box::new(e)))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| err(Box::new(e)))
        }
        None => match kube::Config::incluster() {
            Ok(c) => Ok(c),
            Err(_) => kube::Config::infer().await.map_err(|e| err(Box::new(e))),
        },
    }
}

/// A kube-rs client whose calls are observed in the upstream metrics.
fn client(
    cfg: kube::Config,
    what: &str,
    metrics: &Arc<metrics::Metrics>,
) -> Result<kube::Client, StartupError> {
    let builder =
        kube::client::ClientBuilder::try_from(cfg).map_err(|e| StartupError::Kubeconfig {
            what: what.to_owned(),
            source: Box::new(e),
        })?;
    Ok(builder
        .with_layer(&upstream_metrics::UpstreamMetricsLayer(metrics.clone()))
        .build())
}

/// TokenReviews and SubjectAccessReviews sit on the path of every request: they fail fast
/// (no client-side retries, short timeouts) so that an outage is a prompt 503, not a hang.
fn for_reviews(mut cfg: kube::Config) -> kube::Config {
    cfg.default_retry = false;
    cfg.connect_timeout = Some(Duration::from_secs(5));
    cfg.read_timeout = Some(Duration::from_secs(10));
    cfg
}

/// Who records the Events: the pod's name (`POD_NAME`, set by the Deployment from the downward
/// API), else the host name, so `kubectl describe` shows which replica acted.
fn reporting_instance() -> String {
    std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "poddebug-apiserver".to_owned())
}

/// The end of the shutdown grace period kept for streams to be told the server is going.
const STREAM_GOODBYE: Duration = Duration::from_secs(2);

/// The kube-rs clients, each observed in the upstream metrics.
struct Clients {
    /// Pod calls (`--kubeconfig`).
    pods: kube::Client,
    /// Its configuration, for the attach/log dialer.
    pods_config: kube::Config,
    /// TokenReviews and the authentication ConfigMap.
    authn: kube::Client,
    /// SubjectAccessReviews.
    authz: kube::Client,
}

impl Clients {
    async fn connect(config: &Config, metrics: &Arc<Metrics>) -> Result<Self, StartupError> {
        let cluster = &config.cluster;
        let main_cfg = kube_config(cluster.kubeconfig.as_deref(), "--kubeconfig").await?;
        let authn_cfg = match &cluster.authentication_kubeconfig {
            Some(p) => kube_config(Some(p), "--authentication-kubeconfig").await?,
            None => main_cfg.clone(),
        };
        let authz_cfg = match &cluster.authorization_kubeconfig {
            Some(p) => kube_config(Some(p), "--authorization-kubeconfig").await?,
            None => main_cfg.clone(),
        };
        Ok(Clients {
            pods: client(main_cfg.clone(), "--kubeconfig", metrics)?,
            pods_config: main_cfg,
            authn: client(
                for_reviews(authn_cfg),
                "--authentication-kubeconfig",
                metrics,
            )?,
            authz: client(
                for_reviews(authz_cfg),
                "--authorization-kubeconfig",
                metrics,
            )?,
        })
    }
}

/// The serving certificate: the given files, a self-signed pair in `--cert-dir`, or one signed by
/// the CA of `--serving-ca-secret` (whose caBundle publisher starts here); and the attach
/// tickets, keyed by its private key.
async fn serving_cert(
    config: &Config,
    clients: &Clients,
) -> Result<(Arc<ReloadingCert>, Arc<crate::attach_ticket::Tickets>), StartupError> {
    let files: CertFiles = match &config.serving_cert {
        ServingCert::Files(files) => files.clone(),
        ServingCert::SelfSigned {
            dir,
            service,
            namespace,
        } => serving::self_signed::ensure(dir, service, namespace)?,
        ServingCert::ClusterCa {
            secret,
            dir,
            service,
            namespace,
        } => {
            let ca = serving::cluster_ca::ClusterCa::load_with_retries(
                clients.pods.clone(),
                namespace,
                secret,
            )
            .await?;
            let files = ca.issue(dir, service, namespace)?;
            ca.spawn_publisher(clients.pods.clone(), config.reload_interval);
            files
        }
    };
    let tickets = crate::attach_ticket::Tickets::from_key_file(&files.key)
        .map_err(|e| StartupError::Tls(format!("reading {}: {e}", files.key.display())))?;
    Ok((Arc::new(ReloadingCert::load(files)?), Arc::new(tickets)))
}

/// The authenticator chain over the dynamic authentication configuration.
fn authentication(
    config: &Config,
    clients: &Clients,
) -> Result<(Authenticator, Arc<AuthConfigStore>), StartupError> {
    let d = &config.delegation;
    let store = AuthConfigStore::new(
        d.authn_flags.clone(),
        d.authn_lookup,
        d.authn_tolerate_lookup_failure,
    )
    .map_err(StartupError::Tls)?;
    let tokens = Arc::new(TokenAuthenticator::new(
        clients.authn.clone(),
        d.token_cache_ttl,
    ));
    Ok((Authenticator::new(store.clone(), Some(tokens)), store))
}

/// The storage: one shared pod reflector serves every list and watch (server identity); the
/// cluster's version is tracked for the validator, and its disagreements counted in `metrics`.
fn storage(
    config: &Config,
    clients: &Clients,
    metrics: &Metrics,
    record_key: &poddebug_storage::record_key::SharedRecordKey,
) -> poddebug_storage::KubeBackend {
    let mut backend_cfg = poddebug_storage::BackendConfig::new(config.policy.clone());
    backend_cfg.impersonate = config.impersonate;
    backend_cfg.ttl = config.ttl;
    backend_cfg.node_debug_namespace = config.node_debug_namespace.clone();
    backend_cfg.reporting_instance = reporting_instance();
    backend_cfg.unstoppable_after = config.expiry.unstoppable_after;
    backend_cfg.expiry_check_interval = config.expiry.check_interval;
    backend_cfg.unstoppable_action = config.expiry.unstoppable_action;
    let pod_cache = poddebug_storage::PodCache::start(clients.pods.clone());
    // Stop records live beside the session records, in the server's own namespace.
    let stop_leases = poddebug_storage::StopLeases::start(
        clients.pods.clone(),
        &config.session_namespace,
        record_key.clone(),
        metrics.stop_records_rejected.clone(),
    );
    let mut backend = poddebug_storage::KubeBackend::new(clients.pods.clone(), backend_cfg)
        .with_pod_cache(pod_cache)
        .with_stop_leases(stop_leases);
    // Evictions are refused with 429 while a PodDisruptionBudget holds: not retried by the
    // client, the leader's backoff decides.
    let mut eviction_cfg = clients.pods_config.clone();
    eviction_cfg.default_retry = false;
    match kube::Client::try_from(eviction_cfg) {
        Ok(c) => backend = backend.with_eviction_client(c),
        Err(e) => {
            tracing::warn!(error = %e, "no client without retries for evictions; the main one is used")
        }
    }
    metrics.register_validation_disagreements(backend.validation_disagreements());
    metrics.register_events_failed(backend.events_failed());
    tokio::spawn(backend.track_cluster_version());
    backend
}

/// Background work: every task loops until its job is done or the process ends.
fn spawn_background(
    config: &Config,
    (cert, tickets): (Arc<ReloadingCert>, Arc<crate::attach_ticket::Tickets>),
    auth_store: Arc<AuthConfigStore>,
    authn_client: kube::Client,
    backend: Arc<dyn poddebug_storage::DebugBackend>,
    readiness: Arc<Readiness>,
) {
    let reload_every = config.reload_interval;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(reload_every);
        loop {
            tick.tick().await;
            cert.reload_if_changed();
            tickets.reload_if_changed();
        }
    });
    tokio::spawn(authn::config::poll_files(auth_store.clone(), reload_every));
    if config.delegation.authn_lookup {
        tokio::spawn(authn::config::watch_configmap(auth_store, authn_client));
    }
    // Readiness: the upstream answered and the pod cache synced once.
    tokio::spawn(async move {
        let mut delay = Duration::from_millis(200);
        loop {
            match backend.ping().await {
                Ok(()) => readiness.mark_upstream_ok(),
                Err(e) => tracing::warn!(error = %e, "kube-apiserver not reachable yet"),
            }
            if readiness.upstream_ok() {
                break;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    });
}

/// How a replica reads the recording signing keys: from the Secret
/// [`poddebug_storage::signing_secret::SECRET_NAME`] in `namespace`, made with one fresh key
/// when there is none.
fn signing_key_reader(
    client: kube::Client,
    namespace: String,
) -> poddebug_recording::keys::KeyReader {
    use poddebug_recording::keys::Keys;
    std::sync::Arc::new(move || {
        let (client, namespace) = (client.clone(), namespace.clone());
        Box::pin(async move {
            let entries =
                poddebug_storage::signing_secret::load_or_create(client, &namespace, || {
                    Keys::new_entries().map_err(|e| e.to_string())
                })
                .await
                .map_err(|e| e.to_string())?;
            Keys::from_entries(&entries).map_err(|e| e.to_string())
        })
    })
}

/// Load the recording signing keys (with their reader), retrying until they load, then read
/// them again every `resync` and take them when they changed (a rotation). Keys that cannot
/// be read or are not valid are reported: before the first load they are retried and
/// recordings are not written until an operator fixes the Secret; after, the keys held are
/// kept.
async fn load_signing_keys(
    keys: poddebug_recording::keys::SharedKeys,
    namespace: String,
    resync: Duration,
) {
    use poddebug_storage::signing_secret::SECRET_NAME;
    let mut delay = Duration::from_millis(200);
    loop {
        let first = keys.get().is_none();
        match keys.read().await {
            Ok(changed) => {
                if let (true, Some(k)) = (changed, keys.get()) {
                    let what = if first {
                        "loaded"
                    } else {
                        "changed in their Secret: now taken"
                    };
                    tracing::info!(key_id = %k.active().id(), trusted = %k.trusted_ids(), secret = SECRET_NAME, %namespace, "recording signing keys {what}");
                }
                delay = Duration::from_millis(200);
            }
            Err(e) if first => {
                tracing::warn!(error = %e, secret = SECRET_NAME, %namespace, "the recording signing keys cannot be loaded yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, secret = SECRET_NAME, %namespace, "the recording signing keys could not be read again; the keys loaded are kept");
            }
        }
        tokio::time::sleep(resync).await;
    }
}

/// Run the server from its frozen configuration until SIGTERM/SIGINT.
pub async fn run(config: Config) -> Result<(), StartupError> {
    let config = Arc::new(config);
    let metrics = Arc::new(metrics::Metrics::new());
    let clients = Clients::connect(&config, &metrics).await?;
    let (cert, tickets) = serving_cert(&config, &clients).await?;
    let tls = Arc::new(serving::tls::server_config(cert.clone())?);
    let (authn, auth_store) = authentication(&config, &clients)?;
    let authz = Arc::new(SarAuthorizer::new(
        clients.authz.clone(),
        config.delegation.authz_allowed_ttl,
        config.delegation.authz_denied_ttl,
    ));
    let record_key = poddebug_storage::record_key::SharedRecordKey::default();
    {
        let (key, client, ns) = (
            record_key.clone(),
            clients.pods.clone(),
            config.session_namespace.clone(),
        );
        tokio::spawn(async move { key.load(client, ns).await });
    }
    // Where the cluster's API server is, for clients that name it in Origin (cross_site.rs).
    let api_server_origins = Arc::new(crate::api_server_origins::ApiServerOrigins::new(
        &clients.pods_config.cluster_url.to_string(),
    ));
    api_server_origins.spawn_watches(clients.pods.clone());
    let kube_backend = storage(&config, &clients, &metrics, &record_key);
    // Sessions: every replica follows the session records of the cluster (its own identity).
    let session_store = poddebug_storage::SessionStore::start(
        clients.pods.clone(),
        &config.session_namespace,
        config.session_lease_duration,
        record_key.clone(),
        metrics.untrusted_records.clone(),
    );
    // The expiry loop stops debug containers whose time limit passed, and reports those a stop
    // did not end (one replica, by Lease).
    let expiry = crate::expiry::spawn(
        &config.expiry,
        kube_backend.clone(),
        clients.pods.clone(),
        &reporting_instance(),
        metrics.clone(),
        session_store.clone(),
    );
    // Debug requests: every replica follows them (its own identity, their records verified
    // with the record key); the leader of the expiry loop writes their expiries.
    let requests = crate::requests::Requests::new(
        poddebug_storage::RequestStore::start(
            clients.pods.clone(),
            &config.session_namespace,
            record_key.clone(),
        ),
        config.requests.clone(),
        config.node_debug_namespace.clone(),
    );
    requests.spawn(expiry.leading());
    metrics.register_requests(
        requests.store().ignored(),
        requests.notifier().map(|n| n.counts()),
    );
    // The audit trail's OCSF sinks (--audit-stdout, --audit-webhook).
    if let Some(e) =
        crate::audit::export::Exporter::start(config.audit_stdout, config.audit_webhook.clone())
    {
        metrics.register_audit_export(e.counts(), e.webhook_outcomes());
        crate::audit::export::install(e);
    }
    let backend: Arc<dyn poddebug_storage::DebugBackend> = Arc::new(kube_backend);
    // The Ed25519 keys recordings are signed with, from their Secret (made by the first replica
    // that finds none): loaded only where recordings are made.
    let signing_keys = poddebug_recording::keys::SharedKeys::read_with(signing_key_reader(
        clients.pods.clone(),
        config.session_namespace.clone(),
    ));
    if config.recording.store().ok().flatten().is_some() {
        let (keys, ns) = (signing_keys.clone(), config.session_namespace.clone());
        let resync = config.recording.recording_keys_resync_period;
        tokio::spawn(async move { load_signing_keys(keys, ns, resync).await });
    }
    let backend_for_flush = backend.clone();
    let upstream = Arc::new(
        crate::upstream::Upstream::new(clients.pods_config.clone(), config.impersonate)
            .map_err(StartupError::Tls)?,
    );

    let sessions = crate::sessions::Sessions::new(
        session_store,
        crate::leader::identity(&reporting_instance()),
        config.moderated_profiles.clone(),
        config.session_lease_duration,
        config.max_sessions_per_user,
    );
    sessions.spawn();
    let readiness = Arc::new(Readiness::default());
    let (drain_tx, drain_rx) = watch::channel(false);
    let (watch_drain_tx, watch_drain_rx) = watch::channel(false);
    let state = AppState {
        config: config.clone(),
        authn,
        authz,
        backend: backend.clone(),
        metrics: metrics.clone(),
        docs: Arc::new(
            poddebug_openapi::Documents::new()
                .map_err(|e| StartupError::Documents(e.to_string()))?,
        ),
        readiness: readiness.clone(),
        inflight: Arc::new(Semaphore::new(config.max_requests_inflight.max(1))),
        drain: drain_rx,
        watch_drain: watch_drain_rx,
        upstream,
        recorder: poddebug_recording::Recorder::from_options(
            &config.recording,
            record_key.clone(),
            metrics.untrusted_records.clone(),
            metrics.recording_memory.clone(),
            Some(signing_keys.clone()),
        ),
        api_server_origins,
        tickets: tickets.clone(),
        sessions: sessions.clone(),
        record_key,
        requests,
        searches: Default::default(),
        server_identity: {
            let identity = Arc::new(crate::handlers::admission::ServerIdentity::default());
            identity.spawn_learn(clients.pods.clone());
            identity
        },
    };
    if let Some(r) = &state.recorder {
        r.spawn_sweeper(expiry.leading(), metrics.recordings_deleted.clone());
        metrics.register_recording_verifications(r.store().verified().counts());
    }
    let app = routes::app(state);
    spawn_background(
        &config,
        (cert, tickets),
        auth_store,
        clients.authn.clone(),
        backend,
        readiness.clone(),
    );

    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartupError::Bind {
            addr: config.listen,
            source,
        })?;
    tracing::info!(address = %config.listen, "serving securely");
    serve_until_shutdown(
        &config,
        listener,
        tls,
        app,
        &metrics,
        readiness,
        (drain_tx, watch_drain_tx),
    )
    .await;
    // Events of the last creates are written after their answers: give them a moment.
    if !backend_for_flush.flush(Duration::from_secs(2)).await {
        tracing::warn!("some Events were still being written at shutdown");
    }
    // A stopping leader releases its Lease, so another replica takes over at once.
    expiry.stop(Duration::from_secs(2)).await;
    tracing::info!("stopped");
    Ok(())
}

/// Serve until SIGTERM, then shut down on one deadline: the delay (still serving, /readyz
/// failing), then the grace period for requests and streams, of which the last
/// [`STREAM_GOODBYE`] is kept for streams to be told.
async fn serve_until_shutdown(
    config: &Config,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: axum::Router,
    metrics: &Arc<Metrics>,
    readiness: Arc<Readiness>,
    (drain_tx, watch_drain_tx): (watch::Sender<bool>, watch::Sender<bool>),
) {
    let grace = config.shutdown_grace_period;
    let delay = config.shutdown_delay;
    let sigterm_at: Arc<std::sync::OnceLock<tokio::time::Instant>> = Arc::default();
    let shutdown = {
        let sigterm_at = sigterm_at.clone();
        async move {
            shutdown_signal().await;
            let _ = sigterm_at.set(tokio::time::Instant::now());
            readiness.mark_shutting_down();
            tokio::time::sleep(delay).await;
            let _ = watch_drain_tx.send(true);
        }
    };
    serving::listener::serve(
        listener,
        tls,
        app,
        config.connections,
        metrics.clone(),
        shutdown,
        grace.saturating_sub(STREAM_GOODBYE),
    )
    .await;

    // Streams outlive their HTTP connection (they were upgraded): they get what is left of the
    // grace period, then are told to end, and have STREAM_GOODBYE to say so.
    let start = sigterm_at
        .get()
        .copied()
        .unwrap_or_else(tokio::time::Instant::now);
    let deadline = start + delay + grace.saturating_sub(STREAM_GOODBYE);
    while metrics.active_streams.get() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = drain_tx.send(true);
    let end = tokio::time::Instant::now() + STREAM_GOODBYE;
    while metrics.active_streams.get() > 0 && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {},
                _ = i.recv() => {},
            }
        }
        _ => {
            // Without signal handlers the process can only be killed; serve until then.
            std::future::pending::<()>().await;
        }
    }
    tracing::info!("termination signal received");
}
