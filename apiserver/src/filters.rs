//! The handler chain every request goes through, in the order of the generic apiserver's:
//! authentication (which also strips every credential from the request), then authorization, in-flight limit and timeout (skipped for long-running
//! requests), then the handler; one log line and the metrics at the end.

use std::future::Future;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use poddebug_storage::{CreateKind, Phase, Phases, PrefetchTarget};
use poddebug_types::ApiError;
use tracing::Instrument;

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
    crate::query::keep_first_query_values(&mut req);
    let query = crate::query::query_map(req.uri().query());
    let attrs = authz::request_attributes(req.method(), req.uri().path(), &query);
    let kind = create_kind(&attrs);
    // A create runs in a span of its own, each of its phases in a child span.
    let span = match kind {
        Some(k) => tracing::debug_span!("create", resource = k.as_str(), path = %req.uri().path()),
        None => tracing::Span::none(),
    };
    chain(st, req, next, attrs, kind).instrument(span).await
}

/// What a request creates, if it is the create of a debug container, a copy or a node debug
/// container: the times of its phases are observed.
pub fn create_kind(attrs: &Attributes) -> Option<CreateKind> {
    let Attributes::Resource {
        verb,
        group,
        resource,
        subresource,
        name,
        ..
    } = attrs
    else {
        return None;
    };
    if verb != "create" || group != poddebug_types::GROUP || name.is_empty() {
        return None;
    }
    match (resource.as_str(), subresource.as_str()) {
        ("pods", "debug") => Some(CreateKind::DebugContainer),
        ("pods", "copy") => Some(CreateKind::Copy),
        ("nodes", "debug") => Some(CreateKind::NodeDebugContainer),
        _ => None,
    }
}

/// What a create of `kind` reads first (the pod or node its attributes name).
fn prefetch_target(kind: CreateKind, attrs: &Attributes) -> Option<PrefetchTarget> {
    let Attributes::Resource {
        namespace, name, ..
    } = attrs
    else {
        return None;
    };
    Some(match kind {
        CreateKind::DebugContainer | CreateKind::Copy => PrefetchTarget::Pod {
            namespace: namespace.clone(),
            name: name.clone(),
            // A debug container's create reads the watch cache first; a copy is made from the
            // pod as it is.
            cached: kind == CreateKind::DebugContainer,
        },
        CreateKind::NodeDebugContainer => PrefetchTarget::Node { name: name.clone() },
    })
}

/// `fut`, observed as `phase` when the request is a create.
async fn timed<F: Future>(phases: Option<&Phases>, phase: Phase, fut: F) -> F::Output {
    match phases {
        Some(p) => p.time(phase, fut).await,
        None => fut.await,
    }
}

async fn chain(
    st: AppState,
    mut req: Request,
    next: Next,
    attrs: Attributes,
    kind: Option<CreateKind>,
) -> Response {
    let start = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let phases = kind.map(|k| st.metrics.create_phases.phases(k));
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

    let authenticated = timed(
        phases.as_ref(),
        Phase::Authentication,
        st.authn.authenticate(req.headers_mut(), &peer),
    )
    .await;
    let (resp, user) = match authenticated {
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
                Ok(()) => {
                    // A create's first read begins beside its authorization (only for names
                    // that can exist); a refusal drops it unread, which aborts it.
                    let prefetch = match (kind, &phases) {
                        (Some(k), Some(p)) if check_names(&attrs).is_ok() => {
                            prefetch_target(k, &attrs)
                                .and_then(|t| st.backend.prefetch(t, &auth.user, p))
                        }
                        _ => None,
                    };
                    let checks = authorize(&st, &path, &auth.user, &attrs, phases.as_ref());
                    match timed(phases.as_ref(), Phase::Authorization, checks).await {
                        Ok(()) => Ok(prefetch),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            let resp = match authorized {
                Err(e) => status_response(&e),
                Ok(prefetch) => {
                    req.extensions_mut().insert(auth);
                    req.extensions_mut().insert(attrs.clone());
                    if let Some(p) = prefetch {
                        req.extensions_mut().insert(p);
                    }
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
/// WebSocket attach, and with `--require-core-permissions` the core equivalents, all asked at
/// once ([`all_allowed`]). Paths of `--authorization-always-allow-paths` need nothing.
async fn authorize(
    st: &AppState,
    path: &str,
    user: &poddebug_storage::Caller,
    attrs: &Attributes,
    phases: Option<&Phases>,
) -> Result<(), ApiError> {
    // Admission reviews are answered to anyone: kube-apiserver calls webhooks without
    // credentials, and an answer only decides the asker's own request (handlers/admission.rs).
    if authz::always_allowed_path(&st.config.always_allow_paths, path)
        || path == crate::handlers::admission::PATH
    {
        return Ok(());
    }
    let mut checks = vec![(attrs.clone(), Phase::ReviewRequest)];
    // A WebSocket attach arrives as GET; like kube-apiserver (1.35+), it also needs `create`.
    if let Attributes::Resource {
        subresource, verb, ..
    } = attrs
        && subresource == "attach"
        && verb == "get"
    {
        checks.push((attrs.with_verb("create"), Phase::ReviewRequest));
    }
    if st.config.require_core_permissions {
        for core in authz::core_equivalent::core_equivalents(attrs) {
            checks.push((core, Phase::ReviewCoreEquivalent));
        }
    }
    all_allowed(
        checks
            .into_iter()
            .map(|(a, phase)| async move { timed(phases, phase, check(st, user, &a)).await }),
    )
    .await
}

/// Run every check at once and answer as if they had been made one after another: the
/// refusal of the first in their order that refuses (a later one's is not waited for, and its
/// review is dropped), else Ok. So a request needing several reviews waits for the slowest,
/// not for their sum, and its answer does not depend on which one the authorizer answers
/// first.
pub async fn all_allowed<E, F>(checks: impl IntoIterator<Item = F>) -> Result<(), E>
where
    F: Future<Output = Result<(), E>>,
{
    let mut ordered: FuturesOrdered<F> = checks.into_iter().collect();
    while let Some(answer) = ordered.next().await {
        answer?;
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

    #[tokio::test]
    async fn all_allowed_answers_the_first_refusal_in_order_whichever_comes_first() {
        use tokio::sync::oneshot;
        let refusal = |what: &str| ApiError::BadRequest(what.to_owned());
        // The second refuses first; the first refuses later: the first's refusal is the answer.
        let (tx1, rx1) = oneshot::channel::<Result<(), ApiError>>();
        let (tx2, rx2) = oneshot::channel::<Result<(), ApiError>>();
        let both = tokio::spawn(all_allowed([rx1, rx2].map(|rx| async move {
            rx.await
                .unwrap_or_else(|_| Err(ApiError::BadRequest("dropped".into())))
        })));
        tx2.send(Err(refusal("second"))).expect("sent");
        tokio::task::yield_now().await;
        tx1.send(Err(refusal("first"))).expect("sent");
        let answer = both.await.expect("joined").expect_err("refused");
        assert_eq!(answer.message(), "first");
        // The first allows, the second refuses: the second's refusal.
        let answer = all_allowed([Ok(()), Err(refusal("second"))].map(std::future::ready)).await;
        assert_eq!(answer.expect_err("refused").message(), "second");
        // All allow.
        assert!(
            all_allowed([Ok::<(), ApiError>(()), Ok(())].map(std::future::ready))
                .await
                .is_ok()
        );
        // A refusal first does not wait for the rest.
        let (_tx, never) = oneshot::channel::<Result<(), ApiError>>();
        let pending = async move { never.await.unwrap_or(Ok(())) };
        let first = async { Err::<(), _>(refusal("first")) };
        let checks: Vec<futures::future::BoxFuture<'_, Result<(), ApiError>>> =
            vec![Box::pin(first), Box::pin(pending)];
        let answer = tokio::time::timeout(std::time::Duration::from_secs(10), all_allowed(checks))
            .await
            .expect("answered without waiting for the rest");
        assert_eq!(answer.expect_err("refused").message(), "first");
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(60)), "1m0s");
        assert_eq!(go_duration(Duration::from_secs(5)), "5s");
        assert_eq!(go_duration(Duration::from_secs(3725)), "1h2m5s");
        assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
