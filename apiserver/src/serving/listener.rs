//! The accept loop. Each TLS connection is served by hyper's HTTP/2 server when ALPN picked
//! `h2`, by its HTTP/1.1 server (with upgrades) otherwise; the client certificate chain the
//! connection presented travels with each request for the authenticators.
//!
//! Limits ([`ConnectionLimits`]): at most `--max-connections` sockets (over it a new one is
//! closed at once), 10s for the TLS handshake, `--read-header-timeout` for an HTTP/1.1
//! request head, `--idle-connection-timeout` with no request in flight (see
//! [`super::connection`]).
//!
//! On shutdown the listener closes at once, connections are asked to finish (HTTP/2 GOAWAY,
//! HTTP/1.1 close after the current response), and whatever still runs after the grace period
//! is dropped.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::connection::{Activity, Counted, TrackedBody};
use crate::authn::PeerCertificates;
use crate::metrics::Metrics;

/// Largest header block hyper buffers for HTTP/1.1; larger requests are refused by hyper with 431.
fn http1_max_buf(limit: usize) -> usize {
    limit.max(8192)
}

/// Limits on connections, from the secure-serving flags.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Largest header block accepted.
    pub max_header_bytes: usize,
    /// Time a TLS handshake may take.
    pub tls_handshake_timeout: Duration,
    /// Time an HTTP/1.1 client has to send a complete request head, counted from when the
    /// connection starts waiting for it (so it also bounds the wait between keep-alive requests).
    pub read_header_timeout: Duration,
    /// Time a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
    /// Most connections open at once (upgraded streams included); 0 for no limit.
    pub max_connections: usize,
}

/// The HTTP/1.1 and HTTP/2 builders. ALPN picks one, as in Go's server (HTTP/2 over TLS needs
/// `h2` in ALPN): sniffing the protocol instead would wait for the client's first bytes with no
/// timer running.
struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Builders {
    fn new(limits: &ConnectionLimits) -> Self {
        let mut h1 = http1::Builder::new();
        h1.timer(TokioTimer::new())
            .header_read_timeout(limits.read_header_timeout)
            .max_buf_size(http1_max_buf(limits.max_header_bytes))
            .keep_alive(true);
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(20));
        Builders {
            http1: h1,
            http2: h2,
        }
    }
}

/// Serve until `shutdown` resolves, then drain for `grace`.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: ConnectionLimits,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send,
    grace: Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    // Every connection task holds a receiver: `closed()` resolves when the last one is done.
    let (stop_tx, stop_rx) = watch::channel(false);
    let builders = Arc::new(Builders::new(&limits));
    let slots =
        (limits.max_connections > 0).then(|| Arc::new(Semaphore::new(limits.max_connections)));
    let mut refusing = false;
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
        // Over the cap the connection is closed at once (docs/operator-guide.md says why
        // refusing beats queueing): the client learns immediately and can retry another
        // replica. One warning per episode, not per connection.
        let slot = match &slots {
            None => None,
            Some(s) => match s.clone().try_acquire_owned() {
                Ok(p) => {
                    if refusing {
                        refusing = false;
                        tracing::info!("accepting connections again");
                    }
                    Some(p)
                }
                Err(_) => {
                    metrics.refused_connections.inc();
                    if !refusing {
                        refusing = true;
                        tracing::warn!(%remote, max = limits.max_connections, "refusing connections: --max-connections reached");
                    } else {
                        tracing::debug!(%remote, "connection refused: --max-connections reached");
                    }
                    drop(tcp);
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
        let conn = Connection {
            acceptor: acceptor.clone(),
            app: app.clone(),
            builders: builders.clone(),
            stop: stop_rx.clone(),
            limits,
            remote,
        };
        tokio::spawn(conn.serve(Counted::new(tcp, slot, metrics.open_connections.clone())));
    }
    drop(listener);
    drop(stop_rx);
    tracing::info!(
        grace_seconds = grace.as_secs(),
        "shutting down: no new connections, draining"
    );
    let _ = stop_tx.send(true);
    tokio::select! {
        _ = stop_tx.closed() => tracing::info!("all connections closed"),
        _ = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
}

/// What one connection task needs.
struct Connection {
    acceptor: TlsAcceptor,
    app: Router,
    builders: Arc<Builders>,
    stop: watch::Receiver<bool>,
    limits: ConnectionLimits,
    remote: std::net::SocketAddr,
}

impl Connection {
    async fn serve(mut self, tcp: Counted<tokio::net::TcpStream>) {
        let remote = self.remote;
        let tls = match tokio::time::timeout(
            self.limits.tls_handshake_timeout,
            self.acceptor.accept(tcp),
        )
        .await
        {
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
        let activity = Activity::new();
        let app = self.app.clone();
        let tracked = activity.clone();
        let svc = tower::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(peer.clone());
            req.extensions_mut().insert(RemoteAddr(remote));
            let inflight = tracked.begin();
            let app = app.clone();
            async move {
                let resp = app.oneshot(req).await?;
                Ok::<_, std::convert::Infallible>(
                    resp.map(|b| Body::new(TrackedBody::new(b, inflight))),
                )
            }
        });
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        let io = TokioIo::new(tls);
        let svc = TowerToHyperService::new(svc);
        let builders = self.builders.clone();
        if h2 {
            let conn = builders.http2.serve_connection(io, svc);
            self.drive(conn, |c| c.graceful_shutdown(), &activity).await;
        } else {
            let conn = builders.http1.serve_connection(io, svc).with_upgrades();
            self.drive(conn, |c| c.graceful_shutdown(), &activity).await;
        }
    }

    /// Run `conn` to its end, asking it to close when it has been idle too long or when the
    /// server shuts down.
    async fn drive<C, E>(
        &mut self,
        conn: C,
        close: impl Fn(std::pin::Pin<&mut C>),
        activity: &Activity,
    ) where
        C: std::future::Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        let remote = self.remote;
        tokio::pin!(conn);
        let idle = self.limits.idle_timeout;
        let mut closing = false;
        loop {
            tokio::select! {
                res = conn.as_mut() => {
                    if let Err(e) = res {
                        tracing::debug!(%remote, error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = activity.idle_for(idle), if !closing => {
                    tracing::debug!(%remote, "closing an idle connection");
                    close(conn.as_mut());
                    closing = true;
                }
                _ = self.stop.wait_for(|s| *s), if !closing => {
                    close(conn.as_mut());
                    closing = true;
                }
            }
        }
    }
}

/// The client's address, for logs.
#[derive(Clone, Copy, Debug)]
pub struct RemoteAddr(pub std::net::SocketAddr);
