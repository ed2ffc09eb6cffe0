//! `UserProxy`: what a user's browser sees when they run `kubectl proxy`, played on loopback
//! for the in-process suite: plain HTTP on 127.0.0.1, every request sent on with the user's
//! credentials. Paths under `/apis/poddebug.dev/` go to the poddebug server the way
//! kube-apiserver's aggregator sends them (front-proxy certificate, `X-Remote-User`/`-Group`);
//! everything else goes to the fake kube-apiserver with a bearer token of the user. WebSocket
//! upgrades are passed through, as kubectl proxy passes them.
//!
//! Dropping the proxy stops its listener and every connection, upgraded ones included.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::client::TestClient;
use crate::fake::{FakeKube, UserInfo};
use crate::server::PodDebugServer;

/// Largest request body passed on.
const MAX_BODY: usize = 4 << 20;
/// Request headers a browser sends that are passed on (credentials never come from the page).
const PASSED_HEADERS: [&str; 6] = [
    "accept",
    "content-type",
    "if-none-match",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
];

/// The running proxy.
pub struct UserProxy {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
}

impl std::fmt::Debug for UserProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserProxy")
            .field("addr", &self.addr)
            .finish()
    }
}

#[derive(Clone)]
struct Upstreams {
    poddebug: TestClient,
    kube: TestClient,
    /// The path prefix the API is served under (`kubectl proxy --api-prefix`), without the
    /// trailing slash; empty for `/`.
    prefix: String,
}

impl UserProxy {
    /// Starts a proxy for `user` in `groups` (a bearer token for them is added to `fake`).
    pub async fn start(
        fake: &FakeKube,
        server: &PodDebugServer,
        user: &str,
        groups: &[&str],
    ) -> UserProxy {
        Self::start_with_prefix(fake, server, user, groups, "/").await
    }

    /// [`UserProxy::start`] serving the API under `prefix` (as `kubectl proxy
    /// --api-prefix=/k8s/`); other paths are a 404.
    pub async fn start_with_prefix(
        fake: &FakeKube,
        server: &PodDebugServer,
        user: &str,
        groups: &[&str],
        prefix: &str,
    ) -> UserProxy {
        let token = format!("user-proxy-{user}-{}", std::process::id());
        fake.add_token(&token, UserInfo::new(user, groups));
        let upstreams = Upstreams {
            poddebug: server.front_proxy_client(user, groups),
            kube: fake.client(&token),
            prefix: prefix.trim_end_matches('/').to_owned(),
        };
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let (shutdown, rx) = watch::channel(false);
        tokio::spawn(accept_loop(listener, upstreams, rx));
        UserProxy { addr, shutdown }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for UserProxy {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

async fn accept_loop(listener: TcpListener, upstreams: Upstreams, mut rx: watch::Receiver<bool>) {
    loop {
        let tcp = tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(_) => continue,
            },
            _ = stopped(&mut rx) => return,
        };
        let upstreams = upstreams.clone();
        let mut conn_rx = rx.clone();
        let service_rx = rx.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let upstreams = upstreams.clone();
                let rx = service_rx.clone();
                async move { Ok::<_, Infallible>(forward(&upstreams, req, rx).await) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
            tokio::select! {
                _ = conn => {}
                _ = stopped(&mut conn_rx) => {}
            }
        });
    }
}

fn text(code: StatusCode, msg: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(msg)));
    *resp.status_mut() = code;
    resp
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap, skip: &[header::HeaderName]) {
    for (k, v) in from {
        if !skip.contains(k) {
            to.append(k.clone(), v.clone());
        }
    }
}

async fn forward(
    upstreams: &Upstreams,
    mut req: Request<Incoming>,
    rx: watch::Receiver<bool>,
) -> Response<Full<Bytes>> {
    let full = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".to_owned());
    let Some(path) = full
        .strip_prefix(upstreams.prefix.as_str())
        .filter(|p| p.starts_with('/'))
        .map(str::to_owned)
    else {
        return text(
            StatusCode::NOT_FOUND,
            format!("proxy: {full} is not under {}/", upstreams.prefix),
        );
    };
    let client = if path.starts_with("/apis/poddebug.dev/") {
        &upstreams.poddebug
    } else {
        &upstreams.kube
    };
    let passed: Vec<(String, String)> = PASSED_HEADERS
        .iter()
        .filter_map(|name| {
            req.headers()
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .map(|v| ((*name).to_owned(), v.to_owned()))
        })
        .collect();
    let mut headers: Vec<(&str, &str)> = passed
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let is_upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));

    if is_upgrade {
        headers.push(("connection", "Upgrade"));
        headers.push(("upgrade", "websocket"));
        let method = req.method().clone();
        let up = match client.upgrade(method, &path, &headers).await {
            Ok(up) => up,
            Err(e) => return text(StatusCode::BAD_GATEWAY, format!("proxy: {e}")),
        };
        let Some(mut upstream_io) = up.io else {
            let mut resp = Response::new(Full::new(up.body));
            *resp.status_mut() = up.status;
            copy_headers(&up.headers, resp.headers_mut(), &[]);
            return resp;
        };
        let downstream = hyper::upgrade::on(&mut req);
        let mut stop = rx;
        tokio::spawn(async move {
            let Ok(down) = downstream.await else { return };
            let mut down = TokioIo::new(down);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut down, &mut upstream_io) => {}
                _ = stopped(&mut stop) => {}
            }
        });
        let mut resp = Response::new(Full::new(Bytes::new()));
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        copy_headers(&up.headers, resp.headers_mut(), &[]);
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        return resp;
    }

    let method: Method = req.method().clone();
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return text(StatusCode::PAYLOAD_TOO_LARGE, format!("proxy: {e}")),
    };
    match client.request(method, &path, &headers, body).await {
        Ok((code, resp_headers, bytes)) => {
            let mut resp = Response::new(Full::new(bytes));
            *resp.status_mut() = code;
            copy_headers(
                &resp_headers,
                resp.headers_mut(),
                &[
                    header::CONTENT_LENGTH,
                    header::TRANSFER_ENCODING,
                    header::CONNECTION,
                ],
            );
            resp
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("proxy: {e}")),
    }
}
