//! The request pipeline of the fake, in kube-apiserver's order: authentication (401),
//! impersonation, authorization (403), then the handler picked by path; every request is
//! recorded for the tests.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use super::authn::{self, PeerIdentity, UserInfo};
use super::authz::{self, Attributes};
use super::http::{Query, Resp, text_response};
use super::state::{Kind, Shared};
use super::status::{self, KubeStatus};
use super::{
    RequestRecord, apiservices, attach, discovery, ephemeral, events, eviction, exec, leases, logs,
    pod_create, pods, sar, secrets, tokenreview, watch,
};

/// Largest request body the fake reads.
const MAX_BODY: usize = 8 << 20;

/// One authenticated, authorized request on its way to a handler.
pub struct Ctx {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// The effective user (after impersonation).
    pub user: UserInfo,
    /// Its authorization attributes.
    pub attrs: Attributes,
    /// Method.
    pub method: Method,
    /// Path without query.
    pub path: String,
    /// Query.
    pub query: Query,
    /// Request headers.
    pub headers: HeaderMap,
    /// HTTP version the request came in with.
    pub version: http::Version,
}

impl Ctx {
    /// The request's media type without parameters, lower-cased.
    pub fn content_type(&self) -> String {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default()
    }

    /// Checks one more authorization (e.g. the `create` kube ≥1.35 adds for WebSocket exec).
    pub fn authorize(&self, verb: &str) -> Result<(), KubeStatus> {
        let attrs = Attributes {
            verb: verb.to_owned(),
            ..self.attrs.clone()
        };
        let policy = self.shared.lock().policy.clone();
        if policy(&attrs) {
            Ok(())
        } else {
            Err(authz::forbidden_status(&attrs, ""))
        }
    }
}

/// Reads a whole request body (bounded).
pub async fn read_body(req: Request<Incoming>) -> Result<Bytes, KubeStatus> {
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(KubeStatus::new(
            413,
            "RequestEntityTooLarge",
            format!("reading the request body: {e}"),
        )),
    }
}

/// Parses a JSON request body.
pub fn parse_json(body: &[u8]) -> Result<serde_json::Value, KubeStatus> {
    serde_json::from_slice(body)
        .map_err(|e| status::bad_request(format!("error decoding the request body as JSON: {e}")))
}

/// Entry point for every request on every connection.
pub async fn handle(shared: Arc<Shared>, peer: Arc<PeerIdentity>, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    // Decoded, as Go's net/http gives kube-apiserver `URL.Path`.
    let path = percent_encoding::percent_decode_str(req.uri().path())
        .decode_utf8_lossy()
        .into_owned();
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| path.clone());
    let query = Query::parse(req.uri().query());
    let headers = req.headers().clone();
    let mut record = RequestRecord {
        method: method.to_string(),
        path: path_and_query,
        user: String::new(),
        groups: Vec::new(),
        authenticated_as: String::new(),
        impersonation: authn::impersonation_headers(&headers),
        content_type: headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        version: req.version(),
        status: 0,
        arrived: shared.lock().tick(),
        answered: 0,
    };

    let (tokens, policy) = {
        let s = shared.lock();
        (s.tokens.clone(), s.policy.clone())
    };
    let delay = super::faults::delay(&shared.lock().settings.delays, &method, &record.path);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let resp = 'resp: {
        let injected =
            super::faults::take(&mut shared.lock().settings.faults, &method, &record.path);
        if let Some(r) = injected {
            break 'resp r;
        }
        let caller = match authn::authenticate(&headers, &peer, &tokens) {
            Ok(u) => u,
            Err(st) => break 'resp st.into_response(),
        };
        record.authenticated_as = caller.name.clone();
        let user = match authn::impersonate(&caller, &headers, &policy) {
            Ok(Some(u)) => u,
            Ok(None) => caller,
            Err(st) => break 'resp st.into_response(),
        };
        record.user = user.name.clone();
        record.groups = user.groups.clone();
        let attrs = authz::request_attributes(&user, &method, &path, &query);
        if !policy(&attrs) {
            break 'resp authz::forbidden_status(&attrs, "").into_response();
        }
        let ctx = Ctx {
            shared: shared.clone(),
            user,
            attrs,
            method,
            path,
            query,
            headers,
            version: req.version(),
        };
        route(ctx, req).await
    };
    record.status = resp.status().as_u16();
    {
        let mut s = shared.lock();
        record.answered = s.tick();
        s.requests.push(record);
    }
    resp
}

fn only(ctx: &Ctx, methods: &[Method]) -> Result<(), KubeStatus> {
    if methods.contains(&ctx.method) {
        Ok(())
    } else {
        Err(status::method_not_allowed())
    }
}

async fn route(ctx: Ctx, req: Request<Incoming>) -> Resp {
    match route_inner(ctx, req).await {
        Ok(r) => r,
        Err(st) => st.into_response(),
    }
}

async fn route_inner(ctx: Ctx, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    let path = ctx.path.clone();
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let get = [Method::GET];
    match segs.as_slice() {
        ["healthz" | "readyz" | "livez"] => Ok(text_response(200, "ok")),
        ["version"] => Ok(discovery::version(
            ctx.shared.lock().settings.reported_minor,
        )),
        ["api"] => Ok(discovery::api_versions(&ctx)),
        ["api", "v1"] => Ok(discovery::core_resources()),
        ["apis"] => Ok(discovery::api_groups()),
        ["apis", group] => discovery::api_group(group),
        ["apis", group, version] => discovery::group_resources(group, version),
        ["openapi", ..] => Err(status::path_not_found()),
        ["api", "v1", "namespaces"] => {
            only(&ctx, &get)?;
            Ok(watch::list_or_watch(
                &ctx.shared,
                Kind::Namespace,
                None,
                &ctx.query,
            ))
        }
        ["api", "v1", "namespaces", ns] => {
            only(&ctx, &get)?;
            pods::get_object(&ctx, Kind::Namespace, "", ns)
        }
        ["api", "v1", "nodes"] => {
            only(&ctx, &get)?;
            Ok(watch::list_or_watch(
                &ctx.shared,
                Kind::Node,
                None,
                &ctx.query,
            ))
        }
        ["api", "v1", "nodes", name] => {
            only(&ctx, &get)?;
            pods::get_object(&ctx, Kind::Node, "", name)
        }
        ["api", "v1", "pods"] => {
            only(&ctx, &get)?;
            Ok(watch::list_or_watch(
                &ctx.shared,
                Kind::Pod,
                None,
                &ctx.query,
            ))
        }
        ["api", "v1", "namespaces", ns, "pods"] => {
            only(&ctx, &[Method::GET, Method::POST])?;
            if ctx.method == Method::POST {
                return pod_create::handle(&ctx, ns, req).await;
            }
            Ok(watch::list_or_watch(
                &ctx.shared,
                Kind::Pod,
                Some(ns),
                &ctx.query,
            ))
        }
        ["api", "v1", "namespaces", ns, "pods", name] => pods::handle(&ctx, ns, name, req).await,
        [
            "api",
            "v1",
            "namespaces",
            ns,
            "pods",
            name,
            "ephemeralcontainers",
        ] => ephemeral::handle(&ctx, ns, name, req).await,
        ["api", "v1", "namespaces", ns, "pods", name, "exec"] => exec::handle(&ctx, ns, name, req),
        ["api", "v1", "namespaces", ns, "pods", name, "eviction"] => {
            eviction::handle(&ctx, ns, name, req).await
        }
        ["api", "v1", "namespaces", ns, "pods", name, "attach"] => {
            attach::handle(&ctx, ns, name, req)
        }
        ["api", "v1", "namespaces", ns, "pods", name, "log"] => {
            only(&ctx, &get)?;
            logs::handle(&ctx, ns, name)
        }
        ["api", "v1", "namespaces", ns, "configmaps"] => {
            only(&ctx, &get)?;
            Ok(watch::list_or_watch(
                &ctx.shared,
                Kind::ConfigMap,
                Some(ns),
                &ctx.query,
            ))
        }
        ["api", "v1", "namespaces", ns, "configmaps", name] => {
            only(&ctx, &get)?;
            pods::get_object(&ctx, Kind::ConfigMap, ns, name)
        }
        ["apis", "apiregistration.k8s.io", "v1", "apiservices", name] => {
            only(&ctx, &[Method::GET, Method::PATCH])?;
            if ctx.method == Method::PATCH {
                apiservices::patch(&ctx, name, req).await
            } else {
                pods::get_object(&ctx, Kind::ApiService, "", name)
            }
        }
        ["api", "v1", "namespaces", ns, "secrets"] => {
            only(&ctx, &[Method::POST])?;
            secrets::create(&ctx, ns, req).await
        }
        ["api", "v1", "namespaces", ns, "secrets", name] => {
            only(&ctx, &get)?;
            pods::get_object(&ctx, Kind::Secret, ns, name)
        }
        ["api", "v1", "namespaces", ns, "services"] => {
            only(&ctx, &get)?;
            Ok(watch::list_or_watch(
                &ctx.shared,
                Kind::Service,
                Some(ns),
                &ctx.query,
            ))
        }
        ["api", "v1", "namespaces", ns, "services", name] => {
            only(&ctx, &get)?;
            pods::get_object(&ctx, Kind::Service, ns, name)
        }
        [
            "apis",
            "discovery.k8s.io",
            "v1",
            "namespaces",
            ns,
            "endpointslices",
        ] => {
            only(&ctx, &get)?;
            Ok(watch::list_or_watch(
                &ctx.shared,
                Kind::EndpointSlice,
                Some(ns),
                &ctx.query,
            ))
        }
        [
            "apis",
            "discovery.k8s.io",
            "v1",
            "namespaces",
            ns,
            "endpointslices",
            name,
        ] => {
            only(&ctx, &get)?;
            pods::get_object(&ctx, Kind::EndpointSlice, ns, name)
        }
        ["api", "v1", "namespaces", ns, "events"] => events::collection(&ctx, "v1", ns, req).await,
        ["api", "v1", "namespaces", ns, "events", name] => {
            events::object(&ctx, "v1", ns, name, req).await
        }
        ["apis", "events.k8s.io", "v1", "namespaces", ns, "events"] => {
            events::collection(&ctx, "events.k8s.io/v1", ns, req).await
        }
        [
            "apis",
            "events.k8s.io",
            "v1",
            "namespaces",
            ns,
            "events",
            name,
        ] => events::object(&ctx, "events.k8s.io/v1", ns, name, req).await,
        [
            "apis",
            "coordination.k8s.io",
            "v1",
            "namespaces",
            ns,
            "leases",
        ] => leases::collection(&ctx, ns, req).await,
        [
            "apis",
            "coordination.k8s.io",
            "v1",
            "namespaces",
            ns,
            "leases",
            name,
        ] => leases::object(&ctx, ns, name, req).await,
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => {
            only(&ctx, &[Method::POST])?;
            tokenreview::handle(&ctx, req).await
        }
        ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => {
            only(&ctx, &[Method::POST])?;
            sar::handle(&ctx, req).await
        }
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
        ] => {
            only(&ctx, &[Method::POST])?;
            sar::handle_self(&ctx, req).await
        }
        _ => Err(status::path_not_found()),
    }
}
