//! Secure serving: TLS (with certificate reload), the accept loop for HTTP/1.1 (with upgrades)
//! and HTTP/2, and graceful shutdown.

pub mod cluster_ca;
pub mod connection;
pub mod listener;
pub mod self_signed;
pub mod tls;
