//! Attach and log streams of debug containers, proxied to the pod's core `pods/attach` and
//! `pods/log` endpoints.
//!
//! Attach: the request is checked (an upgrade over HTTP/1.1, valid options), the container must
//! be a debug container of the pod (storage waits up to `--attach-wait-timeout` for it to run),
//! then the upstream upgrade is made with the client's protocol headers. Only when the upstream
//! answered 101 does the client get our 101 and a relay task (counted in the metrics, ended by
//! either side or by the drain signal) copy bytes between the two connections. An upstream
//! refusal reaches the client unchanged.
//!
//! Log: the same debug-container check (without waiting), then the core log streamed back.

use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use poddebug_types::ApiError;

use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::error::Error;
use crate::query::query_map;
use crate::recording::{Session, SessionInfo};
use crate::state::AppState;
use crate::stream::ending::EndSignal;
use crate::stream::moderation::Gate;
use crate::stream::protocol::{self, AttachOptions, Negotiated};
use crate::stream::relay::{self, StreamGuard, StreamInfo};
use crate::stream::upstream::AttachOutcome;
use poddebug_types::SessionMode;
use std::sync::Arc;

/// How long the client's side of the upgrade may take to complete after our 101.
const CLIENT_UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn shutting_down() -> Error {
    ApiError::ServiceUnavailable(relay::SHUTDOWN_MESSAGE.to_owned()).into()
}

/// Profiles hold at attach and log: a debug container made with (or running with the
/// privileges of) a gated profile is reached only by a caller who may `use` that profile, the
/// same permission its create needed, worded as the create words its refusal.
pub(crate) async fn authorize_profiles(
    st: &AppState,
    auth: &Authenticated,
    target: &poddebug_storage::StreamTarget,
    container: &str,
) -> Result<(), Error> {
    for gate in &target.profiles {
        let p = gate.profile;
        if !st.config.profile_requires_permission(p) {
            continue;
        }
        let why = if gate.setting.is_empty() {
            format!(
                "debug container {container:?} was created with the {p} profile, which its streams need too"
            )
        } else {
            format!(
                "debug container {container:?} sets {}, which only the {p} profile grants, and its streams need that profile too",
                gate.setting
            )
        };
        crate::filters::check_explained(st, &auth.user, &crate::authz::profile_use(p), Some(&why))
            .await?;
    }
    Ok(())
}

/// A regular container of a pod poddebug made (a copy) is reached with the core permission
/// that reaches any container: `create pods/attach` or `get pods/log` in the namespace (with
/// `--impersonate` the upstream call is the caller's own, which kube-apiserver judges).
async fn authorize_regular(
    st: &AppState,
    auth: &Authenticated,
    target: &poddebug_storage::StreamTarget,
    verb: &str,
    sub: &str,
) -> Result<(), Error> {
    if !target.regular_container || st.config.impersonate {
        return Ok(());
    }
    let attrs = crate::authz::Attributes::Resource {
        verb: verb.to_owned(),
        group: String::new(),
        version: "v1".to_owned(),
        resource: "pods".to_owned(),
        subresource: sub.to_owned(),
        namespace: target.namespace.clone(),
        name: target.pod.clone(),
    };
    let why = format!(
        "container {:?} is a container of a copy of a pod, not a debug container: reaching it needs {verb} on pods/{sub}",
        target.container
    );
    crate::filters::check_explained(st, &auth.user, &attrs, Some(&why)).await?;
    Ok(())
}

/// How a caller takes part in the session it opens: the owner of the debug container (its
/// creator, or anyone when its creator is not recorded), or, on someone else's, a peer (`join`
/// on `pods/debug`), an observer (`observe`) or a moderator (`moderate` on `pods/sessions`).
/// `mode=peer|observer|moderator` asks for one; without it a caller who may `join` is a peer,
/// else an observer. Observers and moderators never send input: `stdin=true` is a 403.
/// What a session's join, observe and moderate permissions are asked on: `pods/debug` (and
/// `pods/sessions` to moderate) of the pod, or `nodes/debug` of the node.
#[derive(Clone, Debug)]
pub(crate) struct SessionScope {
    /// `pods` or `nodes`.
    pub resource: &'static str,
    /// The pod's namespace; empty for a node.
    pub namespace: String,
    /// The pod or node.
    pub name: String,
    /// The subresource `moderate` is asked on (`sessions` for pods, `debug` for nodes).
    pub moderate_on: &'static str,
}

impl SessionScope {
    fn pod(ns: &str, pod: &str) -> Self {
        SessionScope {
            resource: "pods",
            namespace: ns.to_owned(),
            name: pod.to_owned(),
            moderate_on: "sessions",
        }
    }
}

async fn session_mode(
    st: &AppState,
    auth: &Authenticated,
    scope: &SessionScope,
    target: &poddebug_storage::StreamTarget,
    opts: &AttachOptions,
    query: &std::collections::BTreeMap<String, String>,
) -> Result<SessionMode, Error> {
    let requested = match query.get("mode").map(String::as_str).filter(|m| !m.is_empty()) {
        None => None,
        Some(m) => Some(SessionMode::parse_requested(m).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "mode: unsupported value {m:?}: supported values: \"peer\", \"observer\", \"moderator\""
            ))
        })?),
    };
    let attrs = |verb: &str, sub: &str| crate::authz::Attributes::Resource {
        verb: verb.to_owned(),
        group: poddebug_types::GROUP.to_owned(),
        version: poddebug_types::VERSION.to_owned(),
        resource: scope.resource.to_owned(),
        subresource: sub.to_owned(),
        namespace: scope.namespace.clone(),
        name: scope.name.clone(),
    };
    let (res, moderate_on) = (scope.resource, scope.moderate_on);
    let user = &auth.user.user;
    let own = target.owner.as_deref().is_none_or(|o| o == user);
    let why = |what: &str| match target.owner.as_deref() {
        Some(o) => format!(
            "debug container {:?} was created by {o:?}; attaching to it {what}",
            opts.container
        ),
        None => format!("attaching to debug container {:?} {what}", opts.container),
    };
    let mode = match requested {
        Some(SessionMode::Moderator) => {
            crate::filters::check_explained(
                st,
                &auth.user,
                &attrs("moderate", moderate_on),
                Some(&why(&format!(
                    "as a moderator needs moderate on {res}/{moderate_on}"
                ))),
            )
            .await?;
            SessionMode::Moderator
        }
        Some(m) if own => m,
        None if own => SessionMode::Owner,
        Some(SessionMode::Peer) | Some(SessionMode::Owner) => {
            crate::filters::check_explained(
                st,
                &auth.user,
                &attrs("join", "debug"),
                Some(&why(&format!("as a peer needs join on {res}/debug"))),
            )
            .await?;
            SessionMode::Peer
        }
        Some(SessionMode::Observer) => {
            crate::filters::check_explained(
                st,
                &auth.user,
                &attrs("observe", "debug"),
                Some(&why(&format!(
                    "as an observer needs observe on {res}/debug"
                ))),
            )
            .await?;
            SessionMode::Observer
        }
        None => {
            if crate::filters::check(st, &auth.user, &attrs("join", "debug"))
                .await
                .is_ok()
            {
                SessionMode::Peer
            } else {
                crate::filters::check_explained(
                    st,
                    &auth.user,
                    &attrs("observe", "debug"),
                    Some(&why(&format!(
                        "needs join (as a peer) or observe (as an observer) on {res}/debug"
                    ))),
                )
                .await?;
                SessionMode::Observer
            }
        }
    };
    if opts.stdin && requested.is_none() && mode == SessionMode::Observer {
        // The caller asked to type into another user's container without holding `join`.
        return Err(crate::authz::forbidden(
            &auth.user,
            &attrs("join", "debug"),
            &why(&format!(
                "with stdin needs join on {res}/debug (observe watches it with stdin=false)"
            )),
        )
        .into());
    }
    if opts.stdin && matches!(mode, SessionMode::Observer | SessionMode::Moderator) {
        let verb = if mode == SessionMode::Observer {
            "observe"
        } else {
            "moderate"
        };
        let sub = if mode == SessionMode::Observer {
            "debug"
        } else {
            moderate_on
        };
        return Err(crate::authz::forbidden(
            &auth.user,
            &attrs(verb, sub),
            &format!(
                "{}s do not send input: attach with stdin=false",
                mode.as_str()
            ),
        )
        .into());
    }
    Ok(mode)
}

/// `GET|POST .../pods/POD/attach?container=NAME`.
pub async fn attach(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    mut req: Request,
) -> Result<Response, Error> {
    let query = query_map(req.uri().query());
    let (opts, on_upgrade) = prepare_attach(&st, &mut req, &query)?;
    let target = st
        .backend
        .stream_target(
            &ns,
            &pod,
            &opts.container,
            Some(st.config.attach_wait_timeout),
            &auth.user,
        )
        .await?;
    authorize_profiles(&st, &auth, &target, &opts.container).await?;
    authorize_regular(&st, &auth, &target, "create", "attach").await?;
    let scope = SessionScope::pod(&ns, &pod);
    attach_to(st, auth, req, target, opts, scope, on_upgrade).await
}

/// The checks every attach makes before anything is read: an upgrade over HTTP/1.1, valid
/// options, a server not draining.
pub(crate) fn prepare_attach(
    st: &AppState,
    req: &mut Request,
    query: &std::collections::BTreeMap<String, String>,
) -> Result<(AttachOptions, hyper::upgrade::OnUpgrade), Error> {
    protocol::classify(req.method(), req.version(), req.headers())?;
    let opts = AttachOptions::parse(query)?;
    let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(ApiError::BadRequest("this connection cannot be upgraded".to_owned()).into());
    };
    if *st.drain.borrow() {
        return Err(shutting_down());
    }
    Ok((opts, on_upgrade))
}

/// Attach to a resolved and authorized target: session mode, upstream upgrade, recording,
/// session record, relay.
pub(crate) async fn attach_to(
    st: AppState,
    auth: Authenticated,
    req: Request,
    target: poddebug_storage::StreamTarget,
    opts: AttachOptions,
    scope: SessionScope,
    on_upgrade: hyper::upgrade::OnUpgrade,
) -> Result<Response, Error> {
    let query = query_map(req.uri().query());
    let kind = protocol::classify(req.method(), req.version(), req.headers())?;
    let (ns, pod) = (target.namespace.clone(), target.pod.clone());
    let mode = session_mode(&st, &auth, &scope, &target, &opts, &query).await?;
    let _admission = crate::sessions::admit(&st, &auth.user.user).await?;
    let outcome = st
        .upstream
        .attach(
            &target,
            req.method().clone(),
            &opts.upstream_query(&target.container),
            protocol::upstream_headers(req.headers(), kind),
            &auth.user,
            &st.metrics,
        )
        .await?;
    let (upstream_io, headers) = match outcome {
        AttachOutcome::Refused(resp) => return Ok(resp),
        AttachOutcome::Switched { io, headers } => (io, headers),
    };
    let negotiated = Negotiated::from_switching(kind, &headers);
    // How the server ends this session of its own accord (its recording in strict mode, a
    // termination).
    let end = EndSignal::default();
    let session_id = poddebug_storage::new_session_id();
    // With recording on, a session that cannot be recorded is not started.
    let recording = match &st.recorder {
        None => None,
        Some(recorder) => match recorder
            .start(
                SessionInfo {
                    namespace: ns.clone(),
                    pod: pod.clone(),
                    container: opts.container.clone(),
                    user: auth.user.user.clone(),
                    protocol: negotiated.label(),
                    spdy: negotiated.kind == protocol::UpgradeKind::Spdy,
                    base64: negotiated.base64(),
                    session_id: session_id.clone(),
                    mode: mode.as_str().to_owned(),
                },
                &end,
            )
            .await
        {
            Ok(session) => Some(session),
            Err(e) => {
                tracing::error!(error = %e, "a session recording cannot be written; attach refused");
                return Err(ApiError::ServiceUnavailable(format!(
                    "session recording is unavailable on this server, so the session was not \
                     started (every session is recorded; --recording-mode={})",
                    recorder.mode().as_str()
                ))
                .into());
            }
        },
    };
    // The session's record in the cluster; a moderated session withholds the input of those
    // who may type until a moderator is attached.
    let record = poddebug_storage::SessionRecord {
        id: session_id.clone(),
        namespace: ns.clone(),
        pod: pod.clone(),
        container: opts.container.clone(),
        ec_name: target.container.clone(),
        user: auth.user.user.clone(),
        groups: auth.user.groups.clone(),
        mode,
        protocol: negotiated.label(),
        tty: opts.tty,
        stdin: opts.stdin,
        recording_id: recording.as_ref().map(|r| r.id().to_owned()),
        moderated: st.sessions.is_moderated(&target.profiles),
        replica: st.sessions.replica().to_owned(),
        started: jiff::Timestamp::now().to_string(),
    };
    let gate =
        (record.moderated && opts.stdin && matches!(mode, SessionMode::Owner | SessionMode::Peer))
            .then(|| Arc::new(Gate::new(st.sessions.moderator_attached(&record))));
    let session = match st
        .sessions
        .open(
            record,
            end.clone(),
            gate.clone(),
            recording.as_ref().map(Session::marker),
        )
        .await
    {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(error = %e, "the session's record could not be written; attach refused");
            if let Some(r) = recording {
                r.finish(async { None }).await;
            }
            return Err(ApiError::ServiceUnavailable(
                "the session could not be registered with the cluster, so it was not started"
                    .to_owned(),
            )
            .into());
        }
    };
    let guard = StreamGuard::new(
        st.metrics.clone(),
        StreamInfo {
            kind: "attach",
            user: auth.user.user.clone(),
            namespace: ns,
            pod,
            container: opts.container.clone(),
            protocol: negotiated.label(),
        },
    );
    let drain = st.drain.clone();
    let backend = st.backend.clone();
    let caller = auth.user.clone();
    let caller_for_lookup = auth.user.clone();
    let container = opts.container.clone();
    // The relay task owns both connections, the guard and the recording; it ends when either
    // side closes or when the drain signal flips (bounded by DRAIN_FINISH), then finishes the
    // recording and writes the session's audit record (both bounded), so nothing outlives
    // shutdown for long.
    tokio::spawn(async move {
        let start = jiff::Timestamp::now();
        let relayed = match tokio::time::timeout(CLIENT_UPGRADE_TIMEOUT, on_upgrade).await {
            Ok(Ok(io)) => {
                let tap = recording.as_ref().map(Session::tap);
                relay::relay(
                    TokioIo::new(io),
                    upstream_io,
                    &negotiated,
                    relay::Controls {
                        drain: drain.clone(),
                        end: end.subscribe(),
                        gate,
                    },
                    &guard,
                    tap,
                )
                .await;
                true
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "client upgrade failed");
                guard.set_end("client upgrade failed");
                false
            }
            Err(_) => {
                guard.set_end("client upgrade timed out");
                false
            }
        };
        let finished_at = jiff::Timestamp::now();
        // The session is over: its record goes at once, whatever is still written about it.
        let session_id = session.id().to_owned();
        session.close().await;
        // No lookup for a stream that never ran, nor while the server is going down.
        let look_up = relayed && !*drain.borrow();
        let fallback = async move {
            if look_up {
                container_exit_code(backend, target, container, caller_for_lookup).await
            } else {
                None
            }
        };
        let (recording_id, exit_code) = match recording {
            Some(session) => {
                let f = session.finish(fallback).await;
                (Some(f.id), f.exit_code)
            }
            None => (None, fallback.await),
        };
        let (bytes_in, bytes_out) = guard.bytes();
        let info = guard.info();
        let mut record = AuditRecord::new(
            Action::Session,
            &caller,
            &info.namespace,
            &info.pod,
            &info.container,
        );
        record.protocol = Some(info.protocol.clone());
        record.start = Some(start);
        record.end = Some(finished_at);
        record.bytes_in = Some(bytes_in);
        record.bytes_out = Some(bytes_out);
        record.exit_code = exit_code;
        record.recording_id = recording_id;
        record.session = Some(session_id);
        record.mode = Some(mode.as_str().to_owned());
        record.outcome = end
            .current()
            .map(|e| format!("ended by the server: {}", e.error.message()));
        record.emit();
    });

    let mut resp = Response::new(axum::body::Body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *resp.headers_mut() = protocol::switching_headers(&headers);
    Ok(resp)
}

/// How long the end of a session may wait for the debug container's exit code.
const EXIT_CODE_LOOKUP: Duration = Duration::from_secs(5);

/// The debug container's exit code, read once from its status when the stream did not report
/// it (best effort: None when it still runs, or the read fails or takes too long).
/// `container` is the debug container's name as the API knows it (the client's).
async fn container_exit_code(
    backend: std::sync::Arc<dyn poddebug_storage::DebugBackend>,
    target: poddebug_storage::StreamTarget,
    container: String,
    caller: poddebug_storage::Caller,
) -> Option<i32> {
    // The kubelet reports the termination a moment after the stream ends: read again for a
    // bounded while, until the status says terminated (a detached session's container keeps
    // running, and gets None at the end of the wait).
    let deadline = tokio::time::Instant::now() + EXIT_CODE_LOOKUP;
    loop {
        let read = backend.get(&target.namespace, &target.pod, &container, &caller);
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if let Ok(Ok(dc)) = tokio::time::timeout(left, read).await
            && let Some(t) = dc.status.and_then(|s| s.state).and_then(|s| s.terminated)
        {
            return Some(t.exit_code);
        }
        if tokio::time::Instant::now() + Duration::from_millis(250) >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `GET .../pods/POD/log?container=NAME`.
pub async fn log(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    req: Request,
) -> Result<Response, Error> {
    let query = query_map(req.uri().query());
    let container = protocol::log_container(&query)?;
    if *st.drain.borrow() {
        return Err(shutting_down());
    }
    let target = st
        .backend
        .stream_target(&ns, &pod, &container, None, &auth.user)
        .await?;
    authorize_profiles(&st, &auth, &target, &container).await?;
    authorize_regular(&st, &auth, &target, "get", "log").await?;
    log_from(st, auth, &query, target, container).await
}

/// Stream the log of a resolved and authorized target.
pub(crate) async fn log_from(
    st: AppState,
    auth: Authenticated,
    query: &std::collections::BTreeMap<String, String>,
    target: poddebug_storage::StreamTarget,
    container: String,
) -> Result<Response, Error> {
    let (ns, pod) = (target.namespace.clone(), target.pod.clone());
    let upstream = match st
        .upstream
        .log(
            &target,
            &protocol::log_query(query, &target.container),
            &auth.user,
            &st.metrics,
        )
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
            namespace: ns,
            pod,
            container,
            protocol: "http".to_owned(),
        },
    );
    // The body ends with the upstream's, when the client goes away (the stream is dropped with
    // the guard), or when the drain signal flips.
    let stream = futures::stream::unfold(
        (body, st.drain.clone(), guard),
        |(mut body, mut drain, guard)| async move {
            loop {
                let frame = tokio::select! {
                    biased;
                    _ = relay::drained(&mut drain) => {
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
