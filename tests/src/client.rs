//! `TestClient`: an HTTPS client for poddebug and the fake, with a chosen CA, an optional client
//! certificate (front proxy or client CA), HTTP/1.1 or HTTP/2 (ALPN), whole or streamed bodies,
//! and HTTP/1.1 upgrades. One connection per request, so every test sees fresh TLS handshakes.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::upgrade::Upgraded;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::fake::{certs, provider};
use crate::pki::{CertKey, TestPki};

/// How long one request may take in total.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A transport failure (connection, TLS, HTTP framing or timeout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError(pub String);

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ClientError {}

fn err(context: &str, e: impl fmt::Display) -> ClientError {
    ClientError(format!("{context}: {e}"))
}

/// 16 bytes that differ on every call (the WebSocket key only has to be a nonce).
fn websocket_key() -> [u8; 16] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&nanos.to_le_bytes());
    key[8..].copy_from_slice(&n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    key
}

/// Which HTTP version to speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpVersion {
    /// Offer only `http/1.1`.
    Http1,
    /// Offer only `h2` (the handshake fails if the server does not speak it).
    Http2,
    /// Offer `h2, http/1.1` and speak what the server picks.
    Auto,
}

/// Builder of a [`TestClient`].
#[derive(Clone)]
pub struct TestClientBuilder {
    base: String,
    ca_pems: Vec<String>,
    client_cert: Option<(String, String)>,
    version: HttpVersion,
    headers: HeaderMap,
    server_name: Option<String>,
}

impl TestClientBuilder {
    /// Trusts this CA (may be called several times).
    pub fn ca_pem(mut self, pem: &str) -> Self {
        self.ca_pems.push(pem.to_owned());
        self
    }

    /// Presents this client certificate.
    pub fn client_cert(mut self, cert_pem: &str, key_pem: &str) -> Self {
        self.client_cert = Some((cert_pem.to_owned(), key_pem.to_owned()));
        self
    }

    /// Presents this client certificate.
    pub fn client_cert_key(self, ck: &CertKey) -> Self {
        self.client_cert(&ck.cert_pem, &ck.key_pem)
    }

    /// Speaks HTTP/1.1 only (the default).
    pub fn http1_only(mut self) -> Self {
        self.version = HttpVersion::Http1;
        self
    }

    /// Speaks HTTP/2 only.
    pub fn http2(mut self) -> Self {
        self.version = HttpVersion::Http2;
        self
    }

    /// Offers both and follows the server's ALPN choice.
    pub fn version(mut self, version: HttpVersion) -> Self {
        self.version = version;
        self
    }

    /// Adds a header to every request (repeatable names are appended).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("header name");
        let value = HeaderValue::from_str(value).expect("header value");
        self.headers.append(name, value);
        self
    }

    /// `Authorization: Bearer <token>` on every request.
    pub fn bearer_token(self, token: &str) -> Self {
        self.header("authorization", &format!("Bearer {token}"))
    }

    /// TLS server name to verify (defaults to the URL's host).
    pub fn server_name(mut self, name: &str) -> Self {
        self.server_name = Some(name.to_owned());
        self
    }

    /// The aggregator's identity: the front-proxy client certificate plus `X-Remote-*` headers.
    pub fn front_proxy(
        self,
        pki: &TestPki,
        user: &str,
        groups: &[&str],
        extra: &[(&str, &str)],
    ) -> Self {
        let mut b = self
            .client_cert_key(&pki.front_proxy_client_cert())
            .header("x-remote-user", user);
        for g in groups {
            b = b.header("x-remote-group", g);
        }
        for (k, v) in extra {
            let key = percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
            b = b.header(&format!("x-remote-extra-{key}"), v);
        }
        b
    }

    /// Builds the client.
    pub fn build(self) -> TestClient {
        let uri: Uri = self.base.parse().expect("base URL");
        let host = uri
            .host()
            .expect("URL host")
            .trim_matches(['[', ']'])
            .to_owned();
        let port = uri.port_u16().unwrap_or(443);
        let addr: SocketAddr = format!(
            "{}:{port}",
            if host == "localhost" {
                "127.0.0.1"
            } else {
                &host
            }
        )
        .parse()
        .expect("the test client talks to IP addresses (or localhost)");
        let mut roots = RootCertStore::empty();
        for pem in &self.ca_pems {
            for c in certs(pem) {
                roots.add(c).expect("CA certificate");
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
        let mut config = match &self.client_cert {
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    certs(cert),
                    PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("client key"),
                )
                .expect("client certificate"),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = match self.version {
            HttpVersion::Http1 => vec![b"http/1.1".to_vec()],
            HttpVersion::Http2 => vec![b"h2".to_vec()],
            HttpVersion::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        };
        let server_name =
            ServerName::try_from(self.server_name.clone().unwrap_or(host)).expect("server name");
        TestClient {
            addr,
            authority: format!("{}:{port}", uri.host().unwrap_or("127.0.0.1")),
            server_name,
            tls: Arc::new(config),
            version: self.version,
            headers: self.headers,
        }
    }
}

/// A response whose body is read as it arrives (watches, followed logs).
pub struct StreamingResponse {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    body: Incoming,
    buffer: BytesMut,
    ended: bool,
}

impl fmt::Debug for StreamingResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamingResponse")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl StreamingResponse {
    /// The next data chunk; `None` at the end of the body, on error, or after `timeout`.
    pub async fn next_chunk(&mut self, timeout: Duration) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Some(data);
                    }
                }
                Ok(Some(Err(_)) | None) => {
                    self.ended = true;
                    return None;
                }
                Err(_) => return None,
            }
        }
    }

    /// The next line without its newline; `None` at the end or after `timeout`. A last line
    /// without newline is returned at the end of the body.
    pub async fn next_line(&mut self, timeout: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(i) = self.buffer.iter().position(|b| *b == b'\n') {
                let line = self.buffer.split_to(i + 1);
                return Some(String::from_utf8_lossy(&line[..i]).into_owned());
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_chunk(left).await {
                Some(chunk) => self.buffer.extend_from_slice(&chunk),
                None if self.ended && !self.buffer.is_empty() => {
                    let rest = self.buffer.split();
                    return Some(String::from_utf8_lossy(&rest).into_owned());
                }
                None => return None,
            }
        }
    }

    /// The next line parsed as JSON (watch events).
    pub async fn next_json(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.next_line(timeout).await?;
        serde_json::from_str(&line).ok()
    }

    /// Everything until the end of the body or `timeout` (what was received by then).
    pub async fn read_to_end(&mut self, timeout: Duration) -> Bytes {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut out = std::mem::take(&mut self.buffer);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            match self.next_chunk(left).await {
                Some(c) => out.extend_from_slice(&c),
                None => break,
            }
        }
        out.freeze()
    }

    /// Whether the server ended the body.
    pub fn ended(&self) -> bool {
        self.ended
    }
}

/// The answer to an upgrade request.
pub struct UpgradeResponse {
    /// Status (101 when switched).
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// The body of a refused upgrade.
    pub body: Bytes,
    /// The upgraded connection when the status is 101.
    pub io: Option<TokioIo<Upgraded>>,
}

impl fmt::Debug for UpgradeResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpgradeResponse")
            .field("status", &self.status)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish_non_exhaustive()
    }
}

/// The client. Cheap to clone.
#[derive(Clone)]
pub struct TestClient {
    addr: SocketAddr,
    authority: String,
    server_name: ServerName<'static>,
    tls: Arc<rustls::ClientConfig>,
    version: HttpVersion,
    headers: HeaderMap,
}

impl fmt::Debug for TestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestClient")
            .field("addr", &self.addr)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl TestClient {
    /// A builder for `https://host:port`.
    pub fn builder(base_url: &str) -> TestClientBuilder {
        TestClientBuilder {
            base: base_url.to_owned(),
            ca_pems: Vec::new(),
            client_cert: None,
            version: HttpVersion::Http1,
            headers: HeaderMap::new(),
            server_name: None,
        }
    }

    /// The aggregator talking to an extension server at `base_url` whose serving certificate
    /// comes from `pki`'s cluster CA: front-proxy certificate and `X-Remote-*` headers.
    pub fn front_proxy(
        base_url: &str,
        pki: &TestPki,
        user: &str,
        groups: &[&str],
        extra: &[(&str, &str)],
    ) -> TestClient {
        TestClient::builder(base_url)
            .ca_pem(pki.cluster_ca_pem())
            .front_proxy(pki, user, groups, extra)
            .build()
    }

    /// A copy that sends one more header on every request.
    pub fn with_header(&self, name: &str, value: &str) -> TestClient {
        let mut c = self.clone();
        c.headers.append(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_str(value).expect("header value"),
        );
        c
    }

    /// Opens a TLS connection (exposed for tests of the handshake itself).
    pub async fn connect_tls(&self) -> Result<TlsStream<TcpStream>, ClientError> {
        let tcp = TcpStream::connect(self.addr)
            .await
            .map_err(|e| err("connect", e))?;
        TlsConnector::from(self.tls.clone())
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| err("TLS handshake", e))
    }

    async fn sender(&self, upgrade: bool) -> Result<Sender, ClientError> {
        let tls = self.connect_tls().await?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        if h2 && !upgrade {
            let (send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| err("HTTP/2 handshake", e))?;
            tokio::spawn(conn);
            Ok(Sender::H2(send))
        } else {
            if h2 {
                return Err(ClientError(
                    "upgrades need HTTP/1.1 but the server picked h2".into(),
                ));
            }
            let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| err("HTTP/1.1 handshake", e))?;
            tokio::spawn(conn.with_upgrades());
            Ok(Sender::H1(send))
        }
    }

    fn build_request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
        h2: bool,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let uri = if h2 {
            format!("https://{}{path}", self.authority)
        } else {
            path.to_owned()
        };
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .body(Full::new(body))
            .map_err(|e| err("request", e))?;
        if h2 {
            *req.version_mut() = http::Version::HTTP_2;
        } else {
            req.headers_mut().insert(
                header::HOST,
                HeaderValue::from_str(&self.authority).map_err(|e| err("host", e))?,
            );
        }
        for (k, v) in &self.headers {
            req.headers_mut().append(k.clone(), v.clone());
        }
        for (k, v) in headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| err("header name", e))?;
            let value = HeaderValue::from_str(v).map_err(|e| err("header value", e))?;
            req.headers_mut().append(name, value);
        }
        Ok(req)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<http::Response<Incoming>, ClientError> {
        let fut = async {
            match self.sender(false).await? {
                Sender::H1(mut s) => {
                    let req = self.build_request(method, path, headers, body, false)?;
                    s.send_request(req)
                        .await
                        .map_err(|e| err("HTTP/1.1 request", e))
                }
                Sender::H2(mut s) => {
                    let req = self.build_request(method, path, headers, body, true)?;
                    s.send_request(req)
                        .await
                        .map_err(|e| err("HTTP/2 request", e))
                }
            }
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .map_err(|_| ClientError("request timed out".into()))?
    }

    /// Sends a request and reads the whole answer.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<(StatusCode, HeaderMap, Bytes), ClientError> {
        let resp = self.send(method, path, headers, body.into()).await?;
        let (parts, body) = resp.into_parts();
        let bytes = tokio::time::timeout(REQUEST_TIMEOUT, body.collect())
            .await
            .map_err(|_| ClientError("reading the body timed out".into()))?
            .map_err(|e| err("reading the body", e))?
            .to_bytes();
        Ok((parts.status, parts.headers, bytes))
    }

    /// Sends a request and returns as soon as the head arrives.
    pub async fn stream(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<StreamingResponse, ClientError> {
        let resp = self.send(method, path, headers, body.into()).await?;
        let (parts, body) = resp.into_parts();
        Ok(StreamingResponse {
            status: parts.status,
            headers: parts.headers,
            body,
            buffer: BytesMut::new(),
            ended: false,
        })
    }

    /// Sends an HTTP/1.1 upgrade request (the caller sets `Connection`/`Upgrade` and friends).
    pub async fn upgrade(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<UpgradeResponse, ClientError> {
        let fut = async {
            let Sender::H1(mut s) = self.sender(true).await? else {
                return Err(ClientError("upgrade over HTTP/2 is not supported".into()));
            };
            let req = self.build_request(method, path, headers, Bytes::new(), false)?;
            let mut resp = s
                .send_request(req)
                .await
                .map_err(|e| err("upgrade request", e))?;
            let status = resp.status();
            let headers = resp.headers().clone();
            if status == StatusCode::SWITCHING_PROTOCOLS {
                let io = hyper::upgrade::on(&mut resp)
                    .await
                    .map_err(|e| err("upgrade", e))?;
                return Ok(UpgradeResponse {
                    status,
                    headers,
                    body: Bytes::new(),
                    io: Some(TokioIo::new(io)),
                });
            }
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| err("reading the body", e))?
                .to_bytes();
            Ok(UpgradeResponse {
                status,
                headers,
                body,
                io: None,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .map_err(|_| ClientError("upgrade timed out".into()))?
    }

    /// A WebSocket `v5.channel.k8s.io` attach: `GET path` upgraded (asserted: 101), as the
    /// channel client of the stream.
    pub async fn attach_v5(&self, path: &str) -> crate::channel::ChannelClient<TokioIo<Upgraded>> {
        let headers = TestClient::websocket_headers("v5.channel.k8s.io");
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let resp = self
            .upgrade(Method::GET, path, &headers)
            .await
            .unwrap_or_else(|e| panic!("attach {path}: {e:?}"));
        assert_eq!(
            resp.status,
            StatusCode::SWITCHING_PROTOCOLS,
            "{path}: {resp:?}"
        );
        crate::channel::ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await
    }

    /// `GET path` as a `meta.k8s.io/v1` Table (asserted: 200).
    pub async fn get_table(&self, path: &str) -> Value {
        let (code, _, body) = self
            .request(
                Method::GET,
                path,
                &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
                Bytes::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("GET {path} as a Table: {e:?}"));
        assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("a Table is JSON")
    }

    /// WebSocket upgrade headers (key, version, subprotocols) for [`TestClient::upgrade`].
    pub fn websocket_headers(protocols: &str) -> Vec<(&'static str, String)> {
        use base64::Engine;
        let key = base64::engine::general_purpose::STANDARD.encode(websocket_key());
        vec![
            ("connection", "Upgrade".to_owned()),
            ("upgrade", "websocket".to_owned()),
            ("sec-websocket-version", "13".to_owned()),
            ("sec-websocket-key", key),
            ("sec-websocket-protocol", protocols.to_owned()),
        ]
    }

    fn expect_json(
        result: Result<(StatusCode, HeaderMap, Bytes), ClientError>,
        what: &str,
    ) -> (StatusCode, Value) {
        let (status, _, body) = result.unwrap_or_else(|e| panic!("{what}: {e}"));
        let value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
        };
        (status, value)
    }

    /// `GET` with `Accept: application/json`; the body as JSON (or as a JSON string if it is
    /// not JSON). Panics on transport errors.
    pub async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .request(
                Method::GET,
                path,
                &[("accept", "application/json")],
                Bytes::new(),
            )
            .await;
        Self::expect_json(r, &format!("GET {path}"))
    }

    /// `POST` of a JSON body. Panics on transport errors.
    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.send_json(Method::POST, path, "application/json", body)
            .await
    }

    /// `PUT` of a JSON body. Panics on transport errors.
    pub async fn put_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.send_json(Method::PUT, path, "application/json", body)
            .await
    }

    /// `PATCH` with the given patch media type. Panics on transport errors.
    pub async fn patch_json(
        &self,
        path: &str,
        content_type: &str,
        body: &Value,
    ) -> (StatusCode, Value) {
        self.send_json(Method::PATCH, path, content_type, body)
            .await
    }

    /// `DELETE`. Panics on transport errors.
    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .request(
                Method::DELETE,
                path,
                &[("accept", "application/json")],
                Bytes::new(),
            )
            .await;
        Self::expect_json(r, &format!("DELETE {path}"))
    }

    /// Any method with a JSON body and content type. Panics on transport errors.
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: &Value,
    ) -> (StatusCode, Value) {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let what = format!("{method} {path}");
        let r = self
            .request(
                method,
                path,
                &[
                    ("content-type", content_type),
                    ("accept", "application/json"),
                ],
                bytes,
            )
            .await;
        Self::expect_json(r, &what)
    }
}
