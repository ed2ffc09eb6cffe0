//! poddebug-apiserver: the `poddebug.dev/v1alpha1` aggregated API server.
//!
//! [`run`] goes from flags ([`options::Options`]) to the frozen [`config::Config`], then
//! [`server::run`] wires the pieces: TLS, authentication, authorization, storage, the router
//! ([`routes::app`]), background reloaders, and graceful shutdown.
#![warn(missing_docs)]
// `ApiError` carries a whole Status (names, causes); errors are the rare path, so boxing it
// everywhere would cost more readability than the copies cost time.
#![allow(clippy::result_large_err)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod api_server_origins;
pub mod attach_ticket;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod config;
pub mod cross_site;
pub mod error;
pub mod expiry;
pub mod filters;
pub mod handlers;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod options;
pub mod origin;
pub mod query;
pub mod requests;
pub mod routes;
pub mod server;
pub mod serving;
pub mod sessions;
pub mod state;
pub mod stream_guard;
pub mod upstream;
pub mod upstream_metrics;
pub mod webhook;

use crate::config::Config;
use crate::error::StartupError;
use crate::options::Options;

/// Run the server until SIGTERM/SIGINT: Options → Config (validated, frozen) → Run.
pub async fn run(opts: Options) -> Result<(), StartupError> {
    let config = Config::new(&opts)?;
    server::run(config).await
}
