//! `/healthz`, `/livez`, `/readyz`: plain `ok`, or with `?verbose` one `[+]check ok` line per
//! check, as the generic apiserver answers.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::state::AppState;

fn answer(checks: Vec<(&'static str, bool)>, verbose: bool, name: &str) -> Response {
    let ok = checks.iter().all(|(_, ok)| *ok);
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    let body = if verbose || !ok {
        let mut s = String::new();
        for (check, pass) in &checks {
            if *pass {
                s.push_str(&format!("[+]{check} ok\n"));
            } else {
                s.push_str(&format!("[-]{check} failed: reason withheld\n"));
            }
        }
        if ok {
            s.push_str(&format!("{name} check passed\n"));
        } else {
            s.push_str(&format!("{name} check failed\n"));
        }
        s
    } else {
        "ok".to_owned()
    };
    (
        code,
        [(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

fn verbose(q: &Option<String>) -> bool {
    q.as_deref().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    })
}

/// `/healthz` and `/livez`: the process serves.
pub async fn livez(RawQuery(q): RawQuery) -> Response {
    answer(vec![("ping", true), ("log", true)], verbose(&q), "livez")
}

/// `/healthz`.
pub async fn healthz(RawQuery(q): RawQuery) -> Response {
    answer(vec![("ping", true), ("log", true)], verbose(&q), "healthz")
}

/// `/readyz`: authentication configuration loaded, upstream answered once, record key loaded
/// (and, where sessions are recorded, the recording signing keys), not shutting down.
pub async fn readyz(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let mut checks = vec![
        ("ping", true),
        ("authentication-config", st.authn.config().is_loaded()),
        ("upstream-kube-apiserver", st.readiness.upstream_ok()),
        ("record-key", st.record_key.get().is_some()),
    ];
    if let Some(r) = &st.recorder {
        checks.push(("recording-signing-keys", r.store().signing_keys().is_some()));
    }
    checks.push(("shutdown", !st.readiness.shutting_down()));
    answer(checks, verbose(&q), "readyz")
}

/// `/metrics` (authorized as a non-resource URL by the chain).
pub async fn metrics(State(st): State<AppState>) -> Response {
    (
        StatusCode::OK,
        [(
            http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.encode(),
    )
        .into_response()
}
