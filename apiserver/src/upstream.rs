//! How streams reach the kube-apiserver: a dedicated `kube::Client` built from the server's
//! kubeconfig (its TLS, its credentials: tokens, token files, exec plugins, client
//! certificates), over HTTP/1.1 only (so upgrades work), with `TCP_NODELAY` for interactive
//! latency, TCP keepalive for idle streams, and no read timeout (streams may idle for hours).
//!
//! Only the requests built here go upstream: the path is the core `pods/attach` or `pods/log`
//! of the resolved ephemeral container, the headers an allowlist
//! ([`poddebug_stream::request`]), plus the
//! caller's `Impersonate-*` headers with `--impersonate`. Redirects are never followed (hyper
//! does not), and bytes are relayed only after the upstream answered 101.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::client::{Body as KubeBody, ConfigExt};
use poddebug_storage::{Caller, StreamTarget};
use poddebug_stream::request as protocol;
use poddebug_stream::{AttachRequest, request::LogRequest};
use poddebug_types::ApiError;
use tower::ServiceBuilder;

use crate::error::Error;
use crate::metrics::Metrics;

/// How long the upstream may take to answer an upgrade or a log request (head only).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the body of a refusal may take.
const REFUSAL_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest refusal body passed on.
const MAX_REFUSAL_BODY: usize = 1 << 20;
/// TCP keepalive of upstream connections.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// An upgraded upstream connection.
pub type UpstreamIo = TokioIo<hyper::upgrade::Upgraded>;

/// How the upstream answered an attach.
pub enum AttachOutcome {
    /// 101: the connection and the headers for our own 101.
    Switched {
        /// The upgraded connection.
        io: UpstreamIo,
        /// The upstream's 101 headers.
        headers: HeaderMap,
    },
    /// A refusal (>= 400) to hand to the client as is.
    Refused(axum::response::Response),
}

/// How streams reach the kube-apiserver.
pub struct Upstream {
    client: kube::Client,
    impersonate: bool,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("impersonate", &self.impersonate)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// A client for streams from the server's cluster configuration. Must run inside a Tokio
    /// runtime.
    pub fn new(config: kube::Config, impersonate: bool) -> Result<Self, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_keepalive(Some(TCP_KEEPALIVE));
        http.set_connect_timeout(config.connect_timeout.or(Some(Duration::from_secs(30))));
        // HTTP/1.1 only: the connector offers ALPN http/1.1 alone, so upgrades are possible.
        let https = config
            .rustls_https_connector_with_connector(http)
            .map_err(|e| format!("stream client TLS: {e}"))?;
        let hyper_client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(8)
            .build::<_, KubeBody>(https);
        let auth = config
            .auth_layer()
            .map_err(|e| format!("stream client credentials: {e}"))?;
        let extra = config
            .extra_headers_layer()
            .map_err(|e| format!("stream client headers: {e}"))?;
        let service = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(auth)
            .layer(extra)
            .map_err(tower::BoxError::from)
            .service(hyper_client);
        Ok(Upstream {
            client: kube::Client::new(service, config.default_namespace),
            impersonate,
        })
    }

    fn request(
        &self,
        method: Method,
        uri: String,
        mut headers: HeaderMap,
        caller: Option<&Caller>,
    ) -> Result<Request<KubeBody>, Error> {
        if self.impersonate
            && let Some(caller) = caller
        {
            for (k, v) in poddebug_storage::impersonation_headers(caller)? {
                headers.append(k, v);
            }
        }
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .body(KubeBody::empty())
            .map_err(|e| ApiError::BadRequest(format!("invalid upstream request: {e}")))?;
        *req.headers_mut() = headers;
        Ok(req)
    }

    async fn send(
        &self,
        req: Request<KubeBody>,
        metrics: &Metrics,
    ) -> Result<Response<KubeBody>, Error> {
        let method = req.method().to_string();
        let start = Instant::now();
        let result = tokio::time::timeout(RESPONSE_TIMEOUT, self.client.send(req)).await;
        match result {
            Ok(Ok(resp)) => {
                metrics.observe_upstream(&method, Some(resp.status().as_u16()), start.elapsed());
                Ok(resp)
            }
            Ok(Err(e)) => {
                metrics.observe_upstream(&method, None, start.elapsed());
                tracing::warn!(error = %e, "stream request to the kube-apiserver failed");
                Err(
                    ApiError::ServiceUnavailable("the Kubernetes API is unreachable".to_owned())
                        .into(),
                )
            }
            Err(_) => {
                metrics.observe_upstream(&method, None, start.elapsed());
                Err(ApiError::Timeout(format!(
                    "the Kubernetes API did not answer within {}s",
                    RESPONSE_TIMEOUT.as_secs()
                ))
                .into())
            }
        }
    }

    /// Upgrade to the core attach of `target` with the client's protocol headers.
    pub async fn attach(
        &self,
        target: &StreamTarget,
        request: &AttachRequest,
        caller: &Caller,
        metrics: &Metrics,
    ) -> Result<AttachOutcome, Error> {
        let uri = format!(
            "/api/v1/namespaces/{}/pods/{}/attach?{}",
            path_segment(&target.namespace),
            path_segment(&target.pod),
            request.upstream_query(&target.container)
        );
        let req = self.request(
            request.method.clone(),
            uri,
            request.upstream_headers.clone(),
            (!target.server_identity).then_some(caller),
        )?;
        let mut resp = self.send(req, metrics).await?;
        let status = resp.status();
        if status == StatusCode::SWITCHING_PROTOCOLS {
            let headers = resp.headers().clone();
            let io = hyper::upgrade::on(&mut resp).await.map_err(|e| {
                tracing::warn!(error = %e, "the kube-apiserver's upgraded connection failed");
                Error::from(bad_gateway(
                    "the upgraded connection to the Kubernetes API failed",
                ))
            })?;
            return Ok(AttachOutcome::Switched {
                io: TokioIo::new(io),
                headers,
            });
        }
        if status.as_u16() >= 400 {
            return Ok(AttachOutcome::Refused(refusal(resp).await));
        }
        // 1xx/2xx/3xx without an upgrade: never relay anything on this connection (it would
        // carry further requests with the server's credentials, CVE-2018-1002105); the
        // response is dropped with its connection and the client gets an error.
        Err(bad_gateway(&format!(
            "the Kubernetes API answered the attach upgrade with {status} instead of 101 Switching Protocols"
        ))
        .into())
    }

    /// The core log of `target`: the streaming response on success, a refusal as is.
    pub async fn log(
        &self,
        target: &StreamTarget,
        request: &LogRequest,
        caller: &Caller,
        metrics: &Metrics,
    ) -> Result<Result<Response<KubeBody>, axum::response::Response>, Error> {
        let uri = format!(
            "/api/v1/namespaces/{}/pods/{}/log?{}",
            path_segment(&target.namespace),
            path_segment(&target.pod),
            request.upstream_query(&target.container)
        );
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        let req = self.request(
            Method::GET,
            uri,
            headers,
            (!target.server_identity).then_some(caller),
        )?;
        let resp = self.send(req, metrics).await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(Ok(resp));
        }
        if status.as_u16() >= 400 {
            return Ok(Err(refusal(resp).await));
        }
        Err(bad_gateway(&format!(
            "the Kubernetes API answered the log request with {status}"
        ))
        .into())
    }
}

/// A path segment, percent-encoded (names are DNS labels, but never trust that here).
fn path_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, poddebug_stream::URL_COMPONENT).to_string()
}

/// 502: the upstream answered something a proxy cannot pass on.
pub fn bad_gateway(message: &str) -> ApiError {
    ApiError::from_upstream(k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
        code: Some(502),
        message: Some(message.to_owned()),
        reason: Some("InternalError".to_owned()),
        status: Some("Failure".to_owned()),
        ..Default::default()
    })
}

/// The upstream's error answer, for the client: its code and body unchanged, `Content-Type:
/// application/json` when the body is a `Status`, its own content type otherwise.
async fn refusal(resp: Response<KubeBody>) -> axum::response::Response {
    let (parts, body) = resp.into_parts();
    let body = match tokio::time::timeout(
        REFUSAL_BODY_TIMEOUT,
        Limited::new(body, MAX_REFUSAL_BODY).collect(),
    )
    .await
    {
        Ok(Ok(c)) => c.to_bytes(),
        _ => Bytes::new(),
    };
    let content_type = if protocol::is_status(&body) {
        HeaderValue::from_static("application/json")
    } else {
        parts
            .headers
            .get(header::CONTENT_TYPE)
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static("text/plain; charset=utf-8"))
    };
    let mut out = axum::response::Response::new(axum::body::Body::from(body));
    *out.status_mut() = parts.status;
    *out.headers_mut() = protocol::refusal_headers(&parts.headers);
    out.headers_mut().insert(header::CONTENT_TYPE, content_type);
    out
}
