//! The logs of debug containers, proxied from the pod's core `pods/log`.
//!
//! Who reads a debug container's log: the caller must hold what reaches it as an attach does —
//! `use` on its profiles ([`super::attach::authorize_profiles`]), the core `get pods/log` for a
//! copy's regular container — and, when someone else created it, `observe` or `join` on
//! `pods/debug` (`nodes/debug` for a node): its output is what attaching to it as an observer
//! shows, so reading it takes the same permission ([`authorize_reader`]).

use axum::Extension;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::{HeaderValue, header};
use http_body_util::BodyExt;
use poddebug_storage::StreamTarget;
use poddebug_stream::request::LogRequest;

use super::attach::{SessionScope, authorize_profiles, authorize_regular, shutting_down};
use crate::authn::Authenticated;
use crate::error::Error;
use crate::query::query_map;
use crate::state::AppState;
use crate::stream_guard::{StreamGuard, StreamInfo};

/// `GET .../pods/POD/log?container=NAME`.
pub async fn log(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    req: Request,
) -> Result<Response, Error> {
    let request = LogRequest::parse(&query_map(req.uri().query()))?;
    if *st.drain.borrow() {
        return Err(shutting_down());
    }
    let target = st
        .backend
        .stream_target(
            &ns,
            &pod,
            &request.container,
            // A stopped debug container refuses a log follow, not a plain read (storage's
            // `unstoppable`).
            poddebug_storage::StreamUse::Log {
                follow: request.follow,
            },
            &auth.user,
        )
        .await?;
    authorize_profiles(&st, &auth, &target, &request.container).await?;
    authorize_regular(&st, &auth, &target, "get", "log").await?;
    authorize_reader(
        &st,
        &auth,
        &target,
        &request.container,
        &SessionScope::pod(&ns, &pod),
    )
    .await?;
    stream(st, auth, &request, target).await
}

/// Someone else's debug container: its log is what observing its session shows, so it takes
/// `observe` (or `join`, which includes watching) on the scope's `debug` subresource.
pub(crate) async fn authorize_reader(
    st: &AppState,
    auth: &Authenticated,
    target: &StreamTarget,
    container: &str,
    scope: &SessionScope,
) -> Result<(), Error> {
    let Some(owner) = target.owner.as_deref() else {
        return Ok(());
    };
    if owner == auth.user.user {
        return Ok(());
    }
    if crate::filters::check(st, &auth.user, &scope.attrs("join", "debug"))
        .await
        .is_ok()
    {
        return Ok(());
    }
    let why = format!(
        "debug container {container:?} was created by {owner:?}; reading its log needs observe \
         (or join) on {}/debug, as attaching to it does",
        scope.resource
    );
    crate::filters::check_explained(st, &auth.user, &scope.attrs("observe", "debug"), Some(&why))
        .await?;
    Ok(())
}

/// Stream the log of a resolved and authorized target. The body ends with the upstream's, when
/// the client goes away (the stream is dropped with its guard), or when the drain signal flips.
pub(crate) async fn stream(
    st: AppState,
    auth: Authenticated,
    request: &LogRequest,
    target: StreamTarget,
) -> Result<Response, Error> {
    let upstream = match st
        .upstream
        .log(&target, request, &auth.user, &st.metrics)
        .await?
    {
        Ok(resp) => resp,
        Err(refusal) => return Ok(refusal),
    };
    let (parts, body) = upstream.into_parts();
    let guard = StreamGuard::new(
        st.metrics.clone(),
        StreamInfo {
            kind: "log",
            user: auth.user.user.clone(),
            namespace: target.namespace.clone(),
            pod: target.pod.clone(),
            container: request.container.clone(),
            protocol: "http".to_owned(),
        },
    );
    let stream = futures::stream::unfold(
        (body, st.drain.clone(), guard),
        |(mut body, mut drain, guard)| async move {
            loop {
                let frame = tokio::select! {
                    biased;
                    _ = poddebug_stream::relay::drained(&mut drain) => {
                        guard.set_end("server shutting down");
                        return None;
                    }
                    frame = body.frame() => frame,
                };
                match frame {
                    None => {
                        guard.set_end("upstream closed");
                        return None;
                    }
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "log stream from the kube-apiserver failed");
                        guard.set_end("upstream error");
                        return None;
                    }
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            guard.add_out(data.len());
                            return Some((Ok::<_, std::io::Error>(data), (body, drain, guard)));
                        }
                    }
                }
            }
        },
    );
    let mut resp = Response::new(axum::body::Body::from_stream(stream));
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("text/plain"));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    Ok(resp)
}
