//! The handler chain every request goes through, in the order of the generic apiserver's:
//! authentication (which also strips every credential from the request), then authorization, in-flight limit and timeout (skipped for long-running
//! requests), then the handler; one log line and the metrics at the end.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use poddebug_types::ApiError;

use crate::authn::PeerCertificates;
use crate::authz::{self, Attributes, Decision};
use crate::error::status_response;
use crate::state::AppState;

/// Long-running requests (watches, attach, log) are exempt from the in-flight limit and the
/// request timeout, as kube-apiserver's `BasicLongRunningRequestCheck` exempts them.
pub fn is_long_running(attrs: &Attributes) -> bool {
    match attrs {
        Attributes::Resource {
            verb, subresource, ..
        } => verb == "watch" || subresource == "attach" || subresource == "log",
        Attributes::NonResource { .. } => false,
    }
}

/// Go's `time.Duration.String()` for whole seconds, as used in kube's timeout message.
pub fn go_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let ms = d.subsec_millis();
    if secs == 0 {
        return format!("{ms}ms");
    }
    let s = if ms > 0 {
        format!("{s}.{ms:03}").trim_end_matches('0').to_owned()
    } else {
        s.to_string()
    };
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// The chain.
pub async fn handler_chain(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let start = Instant::now();
    crate::query::keep_first_query_values(&mut req);
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = crate::query::query_map(req.uri().query());
    let attrs = authz::request_attributes(&method, &path, &query);
    st.metrics.inflight.inc();
    // kube-apiserver's audit ID, so a log line can be matched with the cluster's audit log.
    let audit_id = req
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let peer = req
        .extensions()
        .get::<PeerCertificates>()
        .cloned()
        .unwrap_or_default();

    let (resp, user) = match st.authn.authenticate(req.headers_mut(), &peer).await {
        Err(e) => (status_response(&e), None),
        Ok(auth) => {
            let user = auth.user.user.clone();
            // A page on another origin driving the user's browser is refused before anything
            // is asked or done on its behalf.
            let browser = if crate::cross_site::guarded(&method, req.headers(), &attrs) {
                let headers = req.headers();
                st.config.cross_site.judge(
                    headers,
                    &attrs,
                    auth.method,
                    &st.api_server_origins,
                    || {
                        crate::attach_ticket::Tickets::offered(headers).is_some_and(|t| {
                            st.tickets
                                .verify(&t, &auth.user.user, std::time::SystemTime::now())
                        })
                    },
                )
            } else {
                Ok(())
            };
            let authorized = match browser {
                Ok(()) => authorize(&st, &path, &auth.user, &attrs).await,
                Err(e) => Err(e),
            };
            let resp = match authorized {
                Err(e) => status_response(&e),
                Ok(()) => {
                    req.extensions_mut().insert(auth);
                    req.extensions_mut().insert(attrs.clone());
                    match check_names(&attrs) {
                        Err(e) => status_response(&e),
                        Ok(()) => run(&st, req, next, &attrs).await,
                    }
                }
            };
            (as_status(resp, &attrs, &path).await, Some(user))
        }
    };

    st.metrics.inflight.dec();
    let mut resp = resp;
    // No answer is ever to be sniffed into another type (a recording as HTML, a Status as
    // script).
    resp.headers_mut().insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        http::HeaderValue::from_static("nosniff"),
    );
    let code = resp.status().as_u16();
    let elapsed = start.elapsed();
    st.metrics
        .observe_request(attrs.verb(), &attrs.resource_label(), code, elapsed);
    // One line per request. Never log headers: they may carry tokens.
    tracing::info!(
        user = user.as_deref().unwrap_or(""),
        verb = attrs.verb(),
        method = %method,
        path = %path,
        code,
        duration_ms = elapsed.as_secs_f64() * 1000.0,
        audit_id = audit_id.as_deref().unwrap_or(""),
        "request"
    );
    resp
}

/// Namespace and pod names that cannot exist are answered 404 here, before any handler could
/// put them into a Kubernetes API path (a decoded `..%2F` must never become a path segment).
fn check_names(attrs: &Attributes) -> Result<(), ApiError> {
    let Attributes::Resource {
        verb,
        resource,
        namespace,
        name,
        ..
    } = attrs
    else {
        return Ok(());
    };
    if !namespace.is_empty() && !poddebug_types::names::dns1123_label_errors(namespace).is_empty() {
        return Err(ApiError::not_found("namespaces", "", namespace));
    }
    // A list's name comes from its field selector, which simply matches nothing when odd.
    let from_path = verb != "list" && verb != "watch";
    if from_path
        && !name.is_empty()
        && !poddebug_types::names::dns1123_subdomain_errors(name).is_empty()
    {
        return Err(ApiError::not_found(resource, "", name));
    }
    Ok(())
}

/// Every failure answers a Kubernetes Status: an error response that is not JSON (a malformed
/// path or query rejected by the router, say) is wrapped in one with the same code. Health
/// endpoints keep their plain-text format, and attach/log keep what the kubelet answered, as
/// kube-apiserver passes it through.
async fn as_status(resp: Response, attrs: &Attributes, path: &str) -> Response {
    let code = resp.status();
    let is_json = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let exempt = matches!(path, "/healthz" | "/livez" | "/readyz")
        || matches!(attrs.resource_label().as_str(), "pods/attach" | "pods/log");
    if code.as_u16() < 400 || is_json || exempt {
        return resp;
    }
    let body = axum::body::to_bytes(resp.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_owned();
    let message = if text.is_empty() {
        code.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let reason = match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    status_response(&ApiError::from_upstream(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
            code: Some(i32::from(code.as_u16())),
            message: Some(message),
            reason: Some(reason.to_owned()),
            status: Some("Failure".to_owned()),
            ..Default::default()
        },
    ))
}

/// Authorize an authenticated request: the request's attributes, the extra `create` of a
/// WebSocket attach, and with `--require-core-permissions` the core equivalents. Paths of
/// `--authorization-always-allow-paths` need nothing.
async fn authorize(
    st: &AppState,
    path: &str,
    user: &poddebug_storage::Caller,
    attrs: &Attributes,
) -> Result<(), ApiError> {
    if authz::always_allowed_path(&st.config.always_allow_paths, path) {
        return Ok(());
    }
    check(st, user, attrs).await?;
    // A WebSocket attach arrives as GET; like kube-apiserver (1.35+), it also needs `create`.
    if let Attributes::Resource {
        subresource, verb, ..
    } = attrs
        && subresource == "attach"
        && verb == "get"
    {
        check(st, user, &attrs.with_verb("create")).await?;
    }
    if st.config.require_core_permissions {
        for core in authz::core_equivalent::core_equivalents(attrs) {
            check(st, user, &core).await?;
        }
    }
    Ok(())
}

/// Authorize one set of attributes: Ok, 403 worded as kube-apiserver words it, or 503 when the
/// authorizer cannot answer (never an allow).
pub async fn check(
    st: &AppState,
    user: &poddebug_storage::Caller,
    attrs: &Attributes,
) -> Result<(), ApiError> {
    check_explained(st, user, attrs, None).await
}

/// [`check`], with `why` (when given) as the reason of a denial instead of the authorizer's.
pub async fn check_explained(
    st: &AppState,
    user: &poddebug_storage::Caller,
    attrs: &Attributes,
    why: Option<&str>,
) -> Result<(), ApiError> {
    match st.authz.authorize(user, attrs).await {
        Ok(Decision::Allow) => Ok(()),
        Ok(Decision::Deny(reason)) => Err(authz::forbidden(user, attrs, why.unwrap_or(&reason))),
        Err(e) => Err(authorizer_unavailable(&e)),
    }
}

/// The answer when the authorizer cannot be asked: 503, never an allow.
pub fn authorizer_unavailable(e: &authz::sar::Unavailable) -> ApiError {
    tracing::warn!(error = %e, "authorization failed");
    ApiError::ServiceUnavailable(
        "the authorization service is unavailable, please try again later".to_owned(),
    )
}

/// The streams and watches of node debug containers, whose attributes (`nodes/debug`, named
/// after the node) do not tell them apart from a read.
fn is_long_running_node_request(path: &str, query: Option<&str>) -> bool {
    let Some(rest) = path.strip_prefix("/apis/poddebug.dev/v1alpha1/") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let streams = matches!(parts.as_slice(), ["nodes", _, "debug", _, "attach" | "log"]);
    let node_list = matches!(parts.as_slice(), ["nodes", _, "debug"]);
    let watch = crate::query::query_map(query)
        .get("watch")
        .is_some_and(|w| w == "true" || w == "1");
    streams || (node_list && watch)
}

async fn run(st: &AppState, req: Request, next: Next, attrs: &Attributes) -> Response {
    if is_long_running(attrs) || is_long_running_node_request(req.uri().path(), req.uri().query()) {
        return next.run(req).await;
    }
    let _permit = if st.config.max_requests_inflight > 0 {
        match st.inflight.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                return status_response(&ApiError::TooManyRequests {
                    message: "Too many requests, please try again later.".to_owned(),
                    retry_after_seconds: 1,
                });
            }
        }
    } else {
        None
    };
    match tokio::time::timeout(st.config.request_timeout, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => status_response(&ApiError::Timeout(format!(
            "request did not complete within {}",
            go_duration(st.config.request_timeout)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(60)), "1m0s");
        assert_eq!(go_duration(Duration::from_secs(5)), "5s");
        assert_eq!(go_duration(Duration::from_secs(3725)), "1h2m5s");
        assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
