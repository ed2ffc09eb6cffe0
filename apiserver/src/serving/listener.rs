//! The accept loop. Each TLS connection is served by hyper-util's auto builder (HTTP/2 when
//! ALPN picked `h2`, HTTP/1.1 with upgrades otherwise); the client certificate chain the
//! connection presented travels with each request for the authenticators.
//!
//! On shutdown the listener closes at once, connections are asked to finish (HTTP/2 GOAWAY,
//! HTTP/1.1 close after the current response), and whatever still runs after the grace period
//! is dropped.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::authn::PeerCertificates;

/// Largest header block hyper buffers for HTTP/1.1; larger requests are refused by hyper with 431.
fn http1_max_buf(limit: usize) -> usize {
    limit.max(8192)
}

/// Serve until `shutdown` resolves, then drain for `grace`.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    max_header_bytes: usize,
    shutdown: impl std::future::Future<Output = ()> + Send,
    grace: Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .max_buf_size(http1_max_buf(max_header_bytes))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(max_header_bytes).unwrap_or(u32::MAX))
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        // Keepalive probes find peers that vanished without a FIN (a lost node): an idle attach
        // stream would otherwise hold its task and upstream session for hours.
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(Duration::from_secs(30))
            .with_interval(Duration::from_secs(10));
        let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls =
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%remote, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%remote, "TLS handshake timed out");
                        return;
                    }
                };
            let peer = PeerCertificates(Arc::new(
                tls.get_ref()
                    .1
                    .peer_certificates()
                    .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                    .unwrap_or_default(),
            ));
            let svc = app.map_request(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(peer.clone());
                req.extensions_mut().insert(RemoteAddr(remote));
                req
            });
            let conn = builder
                .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(svc));
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%remote, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!(
        grace_seconds = grace.as_secs(),
        "shutting down: no new connections, draining"
    );
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections closed"),
        _ = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
}

/// The client's address, for logs.
#[derive(Clone, Copy, Debug)]
pub struct RemoteAddr(pub std::net::SocketAddr);
