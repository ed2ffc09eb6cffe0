//! What every handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use poddebug_storage::DebugBackend;
use tokio::sync::{Semaphore, watch};

use crate::authn::Authenticator;
use crate::authz::SarAuthorizer;
use crate::config::Config;
use crate::metrics::Metrics;

/// Readiness: the authentication configuration is loaded and the upstream answered once.
#[derive(Default)]
pub struct Readiness {
    upstream_ok: AtomicBool,
    shutting_down: AtomicBool,
}

impl Readiness {
    /// The upstream answered.
    pub fn mark_upstream_ok(&self) {
        self.upstream_ok.store(true, Ordering::Release);
    }
    /// Whether the upstream answered at least once.
    pub fn upstream_ok(&self) -> bool {
        self.upstream_ok.load(Ordering::Acquire)
    }
    /// Shutdown started: readiness fails so load balancers stop sending.
    pub fn mark_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }
    /// Whether shutdown started.
    pub fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// Frozen configuration.
    pub config: Arc<Config>,
    /// Authentication chain.
    pub authn: Authenticator,
    /// Delegated authorizer.
    pub authz: Arc<SarAuthorizer>,
    /// Storage.
    pub backend: Arc<dyn DebugBackend>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Discovery and OpenAPI documents, built once.
    pub docs: Arc<poddebug_openapi::Documents>,
    /// Readiness flags.
    pub readiness: Arc<Readiness>,
    /// Non-long-running request slots.
    pub inflight: Arc<Semaphore>,
    /// Flips to true when streams must end (shutdown grace period over).
    pub drain: watch::Receiver<bool>,
    /// Flips to true when shutdown begins (after the shutdown delay): watches end then, so
    /// their clients re-watch another replica while the HTTP connections drain.
    pub watch_drain: watch::Receiver<bool>,
    /// Upstream attach dialer (streams).
    pub upstream: Arc<crate::upstream::Upstream>,
    /// Session recorder (`--recording-dir`), if recording is on.
    pub recorder: Option<Arc<poddebug_recording::Recorder>>,
    /// The origins of the cluster's own API server (learned from the cluster).
    pub api_server_origins: Arc<crate::api_server_origins::ApiServerOrigins>,
    /// The attach tickets same-origin pages prove themselves with in WebSocket handshakes.
    pub tickets: Arc<crate::attach_ticket::Tickets>,
    /// Live sessions: those relayed here, and the cluster's records of all of them.
    pub sessions: Arc<crate::sessions::Sessions>,
    /// The key that signs the records poddebug reads back from the cluster and the store.
    pub record_key: poddebug_storage::record_key::SharedRecordKey,
    /// Debug requests (just-in-time access).
    pub requests: Arc<crate::requests::Requests>,
    /// The searches of recordings running here (bounded in all and per user).
    pub searches: Arc<crate::handlers::recording_search::Searches>,
    /// The server's own identity, for its admission webhook (learned at start).
    pub server_identity: Arc<crate::handlers::admission::ServerIdentity>,
}
