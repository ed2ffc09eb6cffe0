//! The browser-context guard: requests that a page on another origin made the user's browser
//! send are refused before they are authorized.
//!
//! Why: the portal's access path is `kubectl proxy`, which adds the user's credentials to every
//! request that reaches its port, whoever made it. A page on any other origin open in the same
//! browser can make the browser send such requests: a `POST` with `mode: 'no-cors'` (no
//! preflight) or a WebSocket handshake (no CORS at all). kubectl proxy refuses core
//! `…/pods/…/attach|exec` for this reason; poddebug's paths are not on its list, so the server
//! defends itself here, for every client path (the aggregator, kubectl proxy, an authenticating
//! proxy, direct access).
//!
//! What browsers send, and no page can forge (both are forbidden header names):
//! - `Sec-Fetch-Site` (Fetch Metadata; Chromium, Firefox, Safari ≥ 16.4): `same-origin`,
//!   `same-site`, `cross-site`, or `none` for a navigation the user started (address bar,
//!   bookmark). WebSocket handshakes carry it too.
//! - `Origin`: on every cross-origin request, every non-GET request, and every WebSocket
//!   handshake.
//!
//! The verdict for a guarded request ([`guarded`]); origins are compared canonically
//! ([`Origin`]):
//! 1. `Origin` listed in `--allowed-origins` → allowed.
//! 2. `Sec-Fetch-Site` present → allowed only when `same-origin` or `none`.
//! 3. Else `Origin` present → allowed only when it is the origin the request was addressed to:
//!    `X-Forwarded-Proto`/`X-Forwarded-Host` when the request came through the authenticated
//!    front proxy (the aggregator sets them from what it received, on requests that are not
//!    upgrades), else `https://` + `Host`; or when it names the cluster's own API server
//!    ([`ApiServerOrigins`]: clients that are not browsers, such as the Kubernetes Python
//!    client, send the origin of the API server they dial); or, for a WebSocket handshake,
//!    when it offers a valid attach ticket ([`crate::attach_ticket`]). Behind `kubectl proxy`
//!    neither header shows the proxy's own origin (it rewrites `Host` to kube-apiserver's),
//!    and browsers send no Fetch Metadata on WebSocket handshakes (Chromium 156): the ticket is
//!    how the portal's own terminal gets through there, and a browser without Fetch Metadata
//!    cannot use the rest of the portal behind kubectl proxy unless its origin is in
//!    `--allowed-origins`.
//! 4. Neither header → allowed: the client is not a browser (kubectl, client-go, kube-rs, curl),
//!    or it is an old browser's same-origin `GET`.
//!
//! Which requests are guarded: every method but `GET`/`HEAD`/`OPTIONS`, every upgrade (attach
//! over WebSocket is a `GET`), and every read of an API resource (debug containers, logs,
//! recordings). Discovery, OpenAPI, health, metrics and the portal's own files stay readable,
//! so that a link from another site can open the portal; what the portal then does is
//! same-origin.

use http::{HeaderMap, Method, header};
use poddebug_types::ApiError;

use crate::api_server_origins::ApiServerOrigins;
use crate::authn::Method as AuthMethod;
use crate::authz::Attributes;
use crate::origin::Origin;

/// The resource the portal's files are served as (readable from any context).
const PORTAL_RESOURCE: &str = "portal";

/// Whether the browser check applies to a request.
pub fn guarded(method: &Method, headers: &HeaderMap, attrs: &Attributes) -> bool {
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe || is_upgrade(headers) {
        return true;
    }
    match attrs {
        Attributes::NonResource { .. } => false,
        Attributes::Resource { resource, .. } => resource != PORTAL_RESOURCE,
    }
}

/// Whether the request asks for a protocol upgrade (WebSocket or SPDY).
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Whether the request is a WebSocket handshake.
fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

fn one<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"))
}

/// The browser-context policy (`--allowed-origins`).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Origins whose pages may act on the API from a browser.
    allowed_origins: Vec<Origin>,
}

impl Policy {
    /// A policy allowing `origins` besides the server's own; the invalid ones are returned.
    pub fn new(origins: &[String]) -> Result<Policy, Vec<String>> {
        let mut allowed = Vec::new();
        let mut bad = Vec::new();
        for o in origins.iter().filter(|o| !o.trim().is_empty()) {
            match Origin::parse(o) {
                Some(n) => allowed.push(n),
                None => bad.push(o.clone()),
            }
        }
        if bad.is_empty() {
            Ok(Policy {
                allowed_origins: allowed,
            })
        } else {
            Err(bad)
        }
    }

    /// Judge a guarded request (module docs); `Err` is the 403 to answer. `auth` says how the
    /// request was authenticated: only the front proxy's `X-Forwarded-*` headers are believed.
    /// `api_server` are the origins of the cluster's own API server. `ticket_valid` is asked
    /// only for a WebSocket handshake whose `Origin` alone cannot be judged: whether it offers a
    /// valid attach ticket ([`crate::attach_ticket`]).
    pub fn judge(
        &self,
        headers: &HeaderMap,
        attrs: &Attributes,
        auth: AuthMethod,
        api_server: &ApiServerOrigins,
        ticket_valid: impl FnOnce() -> bool,
    ) -> Result<(), ApiError> {
        let origin = one(headers, "origin");
        let normalized = origin.and_then(Origin::parse);
        if let Some(o) = &normalized
            && self.allowed_origins.contains(o)
        {
            return Ok(());
        }
        if let Some(site) = one(headers, "sec-fetch-site") {
            return match site.trim().to_ascii_lowercase().as_str() {
                "same-origin" | "none" => Ok(()),
                other => Err(refusal(
                    attrs,
                    &format!(
                        "the request came from a page on another origin (Sec-Fetch-Site: {other})"
                    ),
                )),
            };
        }
        let Some(origin) = origin else {
            return Ok(());
        };
        match (&normalized, addressed_origin(headers, auth)) {
            (Some(o), Some(own)) if *o == own => Ok(()),
            // A client naming the API server it dials, which is this server's front door.
            (Some(o), _) if api_server.contains(o) => Ok(()),
            // A browser's WebSocket handshake has nothing but Origin; behind kubectl proxy that
            // cannot be compared with anything, so the page proves it is of the server's origin
            // with a ticket only such a page could read.
            _ if is_websocket(headers) && ticket_valid() => Ok(()),
            _ => Err(refusal(
                attrs,
                &format!(
                    "the request came from a page on another origin (Origin: {})",
                    origin.chars().take(200).collect::<String>()
                ),
            )),
        }
    }
}

/// The origin the client addressed: the aggregator's `X-Forwarded-Proto`/`-Host` when the front
/// proxy authenticated the request, else `https://` and `Host` (this server only serves TLS).
fn addressed_origin(headers: &HeaderMap, auth: AuthMethod) -> Option<Origin> {
    let forwarded = |name: &str| {
        one(headers, name)
            .and_then(|v| v.split(',').next())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let (scheme, host) = match auth {
        AuthMethod::FrontProxy => (
            forwarded("x-forwarded-proto").unwrap_or("https"),
            forwarded("x-forwarded-host").or_else(|| one(headers, "host"))?,
        ),
        _ => ("https", one(headers, "host")?),
    };
    Origin::parse(&format!("{scheme}://{host}"))
}

/// The 403 of a refused cross-site request, worded as kube-apiserver words a denial.
fn refusal(attrs: &Attributes, why: &str) -> ApiError {
    // What the browser sent, for operators wondering why a page was refused.
    tracing::info!(why, "cross-site request refused");
    let reason = format!(
        "cross-site requests are forbidden: {why}; poddebug accepts state-changing requests, \
         streams and resource reads from a browser only when they come from a page of its own \
         origin, and an Origin from other clients only when it names the cluster's API server \
         as the cluster publishes it (see --allowed-origins)"
    );
    match attrs {
        Attributes::Resource {
            group,
            resource,
            name,
            ..
        } => ApiError::forbidden(resource, group, name, reason),
        Attributes::NonResource { .. } => ApiError::ForbiddenMessage(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(verb: &str, resource: &str, subresource: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: "poddebug.dev".into(),
            version: "v1alpha1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: "ns".into(),
            name: "web".into(),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    /// No API server origin known.
    fn nobody() -> ApiServerOrigins {
        ApiServerOrigins::default()
    }

    fn discovery() -> Attributes {
        Attributes::NonResource {
            path: "/apis".into(),
            verb: "get".into(),
        }
    }

    #[test]
    fn what_is_guarded() {
        let none = HeaderMap::new();
        let create = attrs("create", "pods", "debug");
        assert!(guarded(&Method::POST, &none, &create));
        assert!(guarded(&Method::DELETE, &none, &create));
        assert!(guarded(&Method::PUT, &none, &create));
        assert!(guarded(&Method::PATCH, &none, &create));
        let ws = headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
        ]);
        assert!(guarded(&Method::GET, &ws, &attrs("get", "pods", "attach")));
        assert!(
            guarded(&Method::GET, &ws, &discovery()),
            "an upgrade anywhere"
        );
        assert!(guarded(
            &Method::GET,
            &none,
            &attrs("get", "pods", "recordings")
        ));
        assert!(guarded(&Method::GET, &none, &attrs("get", "pods", "log")));
        assert!(guarded(
            &Method::GET,
            &none,
            &attrs("list", "poddebugcontainers", "")
        ));
        assert!(!guarded(&Method::GET, &none, &discovery()));
        assert!(!guarded(&Method::GET, &none, &attrs("list", "portal", "")));
        assert!(!guarded(&Method::HEAD, &none, &attrs("get", "portal", "")));
    }

    #[test]
    fn fetch_metadata_decides_when_present() {
        let p = Policy::default();
        let a = attrs("create", "pods", "debug");
        for ok in ["same-origin", "none", "Same-Origin"] {
            let h = headers(&[("sec-fetch-site", ok), ("origin", "http://127.0.0.1:9999")]);
            assert!(
                p.judge(&h, &a, AuthMethod::FrontProxy, &nobody(), || false)
                    .is_ok(),
                "{ok}"
            );
        }
        for bad in ["same-site", "cross-site", "weird"] {
            let h = headers(&[("sec-fetch-site", bad), ("origin", "http://127.0.0.1:9999")]);
            let e = p
                .judge(&h, &a, AuthMethod::FrontProxy, &nobody(), || false)
                .unwrap_err();
            assert_eq!(e.code(), 403);
            assert_eq!(e.reason(), "Forbidden");
            assert!(
                e.message().starts_with(
                    "pods.poddebug.dev \"web\" is forbidden: cross-site requests are forbidden: \
                     the request came from a page on another origin (Sec-Fetch-Site: "
                ),
                "{}",
                e.message()
            );
        }
    }

    #[test]
    fn without_fetch_metadata_the_origin_must_be_the_addressed_one() {
        let p = Policy::default();
        let a = attrs("get", "pods", "attach");
        // A request that is not an upgrade, through the aggregator: X-Forwarded-Host is the
        // address the client gave kube-apiserver.
        let via_aggregator = headers(&[
            ("origin", "https://127.0.0.1:6443"),
            ("x-forwarded-host", "127.0.0.1:6443"),
            ("x-forwarded-proto", "https"),
            ("host", "poddebug-apiserver.poddebug-system.svc"),
        ]);
        assert!(
            p.judge(
                &via_aggregator,
                &a,
                AuthMethod::FrontProxy,
                &nobody(),
                || false
            )
            .is_ok()
        );
        // The same forwarded headers from a client the front proxy did not authenticate are not
        // believed.
        assert!(
            p.judge(&via_aggregator, &a, AuthMethod::Token, &nobody(), || false)
                .is_err()
        );
        let direct = headers(&[
            ("origin", "https://debug.example:443"),
            ("host", "debug.example"),
        ]);
        assert!(
            p.judge(&direct, &a, AuthMethod::Token, &nobody(), || false)
                .is_ok()
        );
        for bad in ["http://127.0.0.1:9999", "null", "https://evil.example", ""] {
            let h = headers(&[("origin", bad), ("host", "debug.example")]);
            let e = p
                .judge(&h, &a, AuthMethod::Token, &nobody(), || false)
                .unwrap_err();
            assert!(e.message().contains("(Origin: "), "{}", e.message());
        }
    }

    #[test]
    fn an_origin_naming_the_api_server_passes_without_fetch_metadata() {
        let p = Policy::default();
        let a = attrs("get", "pods", "attach");
        let api = ApiServerOrigins::new("https://127.0.0.1:6443");
        api.set(
            crate::api_server_origins::Source::Service,
            vec![Origin::https("10.96.0.1", 443).expect("an origin")],
        );
        // What the Kubernetes Python client's WebSocket sends through the aggregator: its
        // Origin names the server it dialled; Host is rewritten, no X-Forwarded-Host.
        let python = |origin: &str| {
            headers(&[
                ("origin", origin),
                ("upgrade", "websocket"),
                ("connection", "Upgrade"),
                ("host", "poddebug-apiserver.poddebug-system.svc:443"),
            ])
        };
        for ok in [
            "https://127.0.0.1:6443",
            "HTTPS://127.0.0.1:6443",
            "https://10.96.0.1",
            "https://10.96.0.1:443",
        ] {
            assert!(
                p.judge(&python(ok), &a, AuthMethod::FrontProxy, &api, || false)
                    .is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "https://127.0.0.1:6443.evil.example",
            "https://evil.example",
            "null",
            "http://127.0.0.1:6443",
            "https://127.0.0.1:6444",
            "https://10.96.0.1:6443",
            "https://127.0.0.1:6443/",
        ] {
            let e = p
                .judge(&python(bad), &a, AuthMethod::FrontProxy, &api, || false)
                .unwrap_err();
            assert_eq!(e.code(), 403, "{bad}");
        }
        // A browser says where the page is: a page on the API server's origin that the browser
        // marks cross-site (it is not the origin the request went to) is refused.
        let mut from_page = python("https://127.0.0.1:6443");
        from_page.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(
            p.judge(&from_page, &a, AuthMethod::FrontProxy, &api, || false)
                .is_err()
        );
    }

    #[test]
    fn a_websocket_with_only_an_origin_passes_with_a_valid_ticket() {
        let p = Policy::default();
        let a = attrs("get", "pods", "attach");
        // What Chromium sends through kubectl proxy and the aggregator: no Fetch Metadata, no
        // X-Forwarded-Host on an upgrade, Host rewritten.
        let ws = headers(&[
            ("origin", "http://127.0.0.1:8001"),
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("host", "poddebug-apiserver.poddebug-system.svc:443"),
        ]);
        assert!(
            p.judge(&ws, &a, AuthMethod::FrontProxy, &nobody(), || true)
                .is_ok()
        );
        assert!(
            p.judge(&ws, &a, AuthMethod::FrontProxy, &nobody(), || false)
                .is_err()
        );
        // Fetch Metadata saying cross-site is not overruled by a ticket, and a ticket opens no
        // request that is not a WebSocket handshake.
        let mut cross = ws.clone();
        cross.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(
            p.judge(&cross, &a, AuthMethod::FrontProxy, &nobody(), || true)
                .is_err()
        );
        let post = headers(&[("origin", "http://127.0.0.1:8001")]);
        assert!(
            p.judge(
                &post,
                &attrs("create", "pods", "debug"),
                AuthMethod::FrontProxy,
                &nobody(),
                || true
            )
            .is_err()
        );
    }

    #[test]
    fn no_browser_headers_no_refusal() {
        let p = Policy::default();
        let h = headers(&[("user-agent", "kubectl/v1.32.4"), ("host", "x")]);
        assert!(
            p.judge(
                &h,
                &attrs("create", "pods", "debug"),
                AuthMethod::FrontProxy,
                &nobody(),
                || false
            )
            .is_ok()
        );
    }

    #[test]
    fn allowed_origins_pass_whatever_the_site() {
        let p = Policy::new(&[
            "https://portal.example".into(),
            "HTTP://Tools.Example:80".into(),
        ])
        .unwrap();
        let a = attrs("create", "pods", "debug");
        for origin in ["https://portal.example", "http://tools.example"] {
            let h = headers(&[("origin", origin), ("sec-fetch-site", "cross-site")]);
            assert!(
                p.judge(&h, &a, AuthMethod::FrontProxy, &nobody(), || false)
                    .is_ok(),
                "{origin}"
            );
        }
        let h = headers(&[
            ("origin", "https://portal.example.evil"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert!(
            p.judge(&h, &a, AuthMethod::FrontProxy, &nobody(), || false)
                .is_err()
        );
        assert_eq!(
            Policy::new(&["portal.example".into(), "https://x/y".into()]).unwrap_err(),
            vec!["portal.example".to_owned(), "https://x/y".to_owned()]
        );
    }

    #[test]
    fn non_resource_refusals_have_no_object() {
        let h = headers(&[("sec-fetch-site", "cross-site")]);
        let e = Policy::default()
            .judge(&h, &discovery(), AuthMethod::FrontProxy, &nobody(), || {
                false
            })
            .unwrap_err();
        assert!(e.message().starts_with("cross-site requests are forbidden"));
    }
}
