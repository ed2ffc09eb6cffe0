//! poddebug-apiserver: the `poddebug.dev/v1alpha1` aggregated API server.
//!
//! [`run`] wires the pieces: flags → config, TLS, authentication, authorization, storage, the
//! router ([`routes::app`]), background reloaders, and graceful shutdown.
#![warn(missing_docs)]
// `ApiError` carries a whole Status (names, causes); errors are the rare path, so boxing it
// everywhere would cost more readability than the copies cost time.
#![allow(clippy::result_large_err)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod authn;
pub mod authz;
pub mod config;
pub mod error;
pub mod filters;
pub mod handlers;
pub mod logging;
pub mod metrics;
pub mod options;
pub mod recording;
pub mod routes;
pub mod serving;
pub mod state;
pub mod stream;
pub mod upstream_metrics;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::authn::Authenticator;
use crate::authn::config::{AuthConfigStore, FlagSettings};
use crate::authn::token::TokenAuthenticator;
use crate::authz::SarAuthorizer;
use crate::config::Config;
use crate::error::StartupError;
use crate::options::Options;
use crate::serving::tls::{CertFiles, ReloadingCert};
use crate::state::{AppState, Readiness};

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

/// Run the server until SIGTERM/SIGINT.
pub async fn run(opts: Options) -> Result<(), StartupError> {
    let errs = opts.validate();
    if !errs.is_empty() {
        return Err(StartupError::Flags(errs));
    }
    let config = Arc::new(Config::from_options(&opts));

    // Serving certificate.
    let files = match (&opts.tls_cert_file, &opts.tls_private_key_file) {
        (Some(cert), Some(key)) => CertFiles {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => serving::self_signed::ensure(
            &opts.cert_dir,
            &opts.service_name,
            &opts.service_namespace,
        )?,
    };
    let cert = Arc::new(ReloadingCert::load(files)?);
    let tls = Arc::new(serving::tls::server_config(cert.clone())?);

    // Cluster access.
    let main_cfg = kube_config(opts.kubeconfig.as_deref(), "--kubeconfig").await?;
    let authn_cfg = match &opts.authentication_kubeconfig {
        Some(p) => kube_config(Some(p), "--authentication-kubeconfig").await?,
        None => main_cfg.clone(),
    };
    let authz_cfg = match &opts.authorization_kubeconfig {
        Some(p) => kube_config(Some(p), "--authorization-kubeconfig").await?,
        None => main_cfg.clone(),
    };
    let metrics = Arc::new(metrics::Metrics::new());
    let authn_client = client(
        for_reviews(authn_cfg),
        "--authentication-kubeconfig",
        &metrics,
    )?;
    let authz_client = client(
        for_reviews(authz_cfg),
        "--authorization-kubeconfig",
        &metrics,
    )?;

    // Authentication.
    let flags = FlagSettings {
        client_ca_file: opts.client_ca_file.clone(),
        requestheader_client_ca_file: opts.requestheader_client_ca_file.clone(),
        allowed_names: opts
            .requestheader_allowed_names
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        username_headers: opts.requestheader_username_headers.clone(),
        uid_headers: opts.requestheader_uid_headers.clone(),
        group_headers: opts.requestheader_group_headers.clone(),
        extra_prefixes: opts.requestheader_extra_headers_prefix.clone(),
    };
    let auth_store = AuthConfigStore::new(
        flags,
        !opts.authentication_skip_lookup,
        opts.authentication_tolerate_lookup_failure,
    )
    .map_err(StartupError::Tls)?;
    let tokens = Arc::new(TokenAuthenticator::new(
        authn_client.clone(),
        opts.authentication_token_webhook_cache_ttl,
    ));
    let authn = Authenticator::new(auth_store.clone(), Some(tokens));
    let authz = Arc::new(SarAuthorizer::new(
        authz_client,
        opts.authorization_webhook_cache_authorized_ttl,
        opts.authorization_webhook_cache_unauthorized_ttl,
    ));

    // Storage.
    let mut backend_cfg = poddebug_storage::BackendConfig::new(poddebug_storage::Policy {
        allowed_images: opts.allowed_images.clone(),
        default_image: opts.default_image.clone(),
        default_profile: opts.default_profile,
        max_debug_containers_per_pod: opts.max_debug_containers_per_pod,
    });
    backend_cfg.impersonate = opts.impersonate;
    backend_cfg.reporting_instance = reporting_instance();
    let pod_client = client(main_cfg.clone(), "--kubeconfig", &metrics)?;
    let kube_backend = poddebug_storage::KubeBackend::new(pod_client, backend_cfg);
    metrics.register_validation_disagreements(kube_backend.validation_disagreements());
    tokio::spawn(kube_backend.track_cluster_version());
    let backend: Arc<dyn poddebug_storage::DebugBackend> = Arc::new(kube_backend);
    let upstream = Arc::new(
        stream::Upstream::new(main_cfg.clone(), opts.impersonate).map_err(StartupError::Tls)?,
    );

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
        recorder: recording::Recorder::from_options(&opts.recording),
    };
    if let Some(r) = &state.recorder {
        r.spawn_sweeper();
    }
    let app = routes::app(state);

    // Background work: every task loops forever and ends with the process.
    let reload_every = opts.cert_reload_interval;
    {
        let cert = cert.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(reload_every);
            loop {
                tick.tick().await;
                cert.reload_if_changed();
            }
        });
    }
    tokio::spawn(authn::config::poll_files(auth_store.clone(), reload_every));
    if !opts.authentication_skip_lookup {
        tokio::spawn(authn::config::watch_configmap(
            auth_store.clone(),
            authn_client,
        ));
    }
    {
        let backend = backend.clone();
        let readiness = readiness.clone();
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
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        });
    }

    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartupError::Bind {
            addr: config.listen,
            source,
        })?;
    tracing::info!(address = %config.listen, "serving securely");

    // One deadline from SIGTERM: delay (still serving, /readyz failing), then the grace period
    // for requests and streams, of which the last STREAM_GOODBYE is kept for streams to be told.
    let grace = config.shutdown_grace_period;
    let delay = config.shutdown_delay;
    let sigterm_at: Arc<std::sync::OnceLock<tokio::time::Instant>> = Arc::default();
    let shutdown = {
        let readiness = readiness.clone();
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
        config.max_request_header_bytes,
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
    tracing::info!("stopped");
    Ok(())
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
