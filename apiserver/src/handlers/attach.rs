//! Attach to debug containers, proxied to the pod's core `pods/attach`.
//!
//! The request is parsed once into a [`poddebug_stream::AttachRequest`] ([`prepare`]: an upgrade
//! over HTTP/1.1, valid options and mode), the container must be a debug container of the pod
//! (storage waits up to `--attach-wait-timeout` for it to run), and the caller must hold what
//! reaches it ([`authorize_profiles`], [`authorize_regular`], the session mode). Then
//! [`serve`] makes the upstream upgrade with the client's protocol headers; only when the
//! upstream answered 101 does the client get our 101, and a relay task
//! ([`poddebug_stream::relay`]), owning both connections, the session's record and its
//! recording, serve the stream until either side or the server ends it. An upstream refusal
//! reaches the client unchanged.
//!
//! Copies and node debug containers come in through their own handlers and share [`serve`].

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::StatusCode;
use hyper_util::rt::TokioIo;
use poddebug_storage::{Caller, SessionRecord, StreamTarget};
use poddebug_stream::relay::NoRecorder;
use poddebug_stream::request as protocol;
use poddebug_stream::{AttachRequest, EndSignal, Gate, Grants, Negotiated};
use poddebug_types::{ApiError, SessionMode};

use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::error::Error;
use crate::query::query_map;
use crate::sessions::SessionHandle;
use crate::state::AppState;
use crate::stream_guard::{StreamGuard, StreamInfo};
use crate::upstream::AttachOutcome;
use poddebug_recording::{Session as Recording, SessionInfo};

/// How long the client's side of the upgrade may take to complete after our 101.
const CLIENT_UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the end of a session may wait for the debug container's exit code.
const EXIT_CODE_LOOKUP: Duration = Duration::from_secs(5);

/// The answer to a stream request while the server shuts down.
pub(crate) fn shutting_down() -> Error {
    ApiError::ServiceUnavailable(poddebug_stream::ending::SHUTDOWN_MESSAGE.to_owned()).into()
}

/// Profiles hold at attach and log: a debug container made with (or running with the
/// privileges of) a gated profile — or a container of a copy whose pod gets them — is reached
/// only by a caller who may `use` that profile, the same permission its create needed.
pub(crate) async fn authorize_profiles(
    st: &AppState,
    auth: &Authenticated,
    target: &StreamTarget,
    container: &str,
) -> Result<Option<crate::requests::Grant>, Error> {
    // A container made under an approved debug request is reached by its requester, during
    // the window, without `use` (the request's signed record lists it). A replica that just
    // started learns the requests first (bounded).
    if target.justification.debug_request.is_some() {
        st.requests.synced().await?;
    }
    let grant = st.requests.for_stream(&auth.user, target).await;
    let mut granted = false;
    for gate in &target.profiles {
        let p = gate.profile;
        if !st.config.profile_requires_permission(p) {
            continue;
        }
        let why = if target.regular_container {
            // A container of a pod poddebug made: its profiles are what the pod gets.
            if gate.setting.is_empty() {
                format!(
                    "container {container:?} is in a pod of the {p} profile, which its streams need too"
                )
            } else {
                format!(
                    "container {container:?} is in a pod that gets {}, which only the {p} profile grants, and its streams need that profile too",
                    gate.setting
                )
            }
        } else if gate.setting.is_empty() {
            format!(
                "debug container {container:?} was created with the {p} profile, which its streams need too"
            )
        } else {
            // Its own securityContext, or what its pod lends it (a target's privileges, a
            // mounted volume, a host namespace).
            let own = gate.setting.starts_with("securityContext.")
                && !gate.setting.contains(" (container ");
            format!(
                "debug container {container:?} {} {}, which only the {p} profile grants, and its streams need that profile too",
                if own { "sets" } else { "reaches" },
                gate.setting
            )
        };
        granted |=
            crate::requests::check_use(st, &auth.user, p, Some(&why), grant.as_ref()).await?;
    }
    Ok(grant.filter(|_| granted))
}

/// A regular container of a pod poddebug made (a copy) is reached with the core permission
/// that reaches any container: `create pods/attach` or `get pods/log` in the namespace (with
/// `--impersonate` the upstream call is the caller's own, which kube-apiserver judges).
pub(crate) async fn authorize_regular(
    st: &AppState,
    auth: &Authenticated,
    target: &StreamTarget,
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
    /// The scope of a pod's debug containers.
    pub fn pod(ns: &str, pod: &str) -> Self {
        SessionScope {
            resource: "pods",
            namespace: ns.to_owned(),
            name: pod.to_owned(),
            moderate_on: "sessions",
        }
    }

    /// The attributes of `verb` on `subresource` in this scope.
    pub fn attrs(&self, verb: &str, subresource: &str) -> crate::authz::Attributes {
        crate::authz::Attributes::Resource {
            verb: verb.to_owned(),
            group: poddebug_types::GROUP.to_owned(),
            version: poddebug_types::VERSION.to_owned(),
            resource: self.resource.to_owned(),
            subresource: subresource.to_owned(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// How a caller takes part in the session it opens: the owner of the debug container (its
/// creator, or anyone when its creator is not recorded), or, on someone else's, a peer (`join`
/// on `pods/debug`), an observer (`observe`) or a moderator (`moderate` on `pods/sessions`).
/// `mode=peer|observer|moderator` asks for one; without it a caller who may `join` is a peer,
/// else an observer. Observers and moderators never send input: `stdin=true` is a 403.
async fn session_mode(
    st: &AppState,
    auth: &Authenticated,
    scope: &SessionScope,
    target: &StreamTarget,
    request: &AttachRequest,
) -> Result<SessionMode, Error> {
    let opts = &request.options;
    let requested = request.mode;
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
    let check = |verb: &'static str, sub: &'static str, what: String| async move {
        crate::filters::check_explained(st, &auth.user, &scope.attrs(verb, sub), Some(&what)).await
    };
    let mode = match requested {
        Some(SessionMode::Moderator) => {
            check(
                "moderate",
                moderate_on,
                why(&format!(
                    "as a moderator needs moderate on {res}/{moderate_on}"
                )),
            )
            .await?;
            SessionMode::Moderator
        }
        Some(m) if own => m,
        None if own => SessionMode::Owner,
        Some(SessionMode::Peer) | Some(SessionMode::Owner) => {
            check(
                "join",
                "debug",
                why(&format!("as a peer needs join on {res}/debug")),
            )
            .await?;
            SessionMode::Peer
        }
        Some(SessionMode::Observer) => {
            check(
                "observe",
                "debug",
                why(&format!("as an observer needs observe on {res}/debug")),
            )
            .await?;
            SessionMode::Observer
        }
        None => {
            if crate::filters::check(st, &auth.user, &scope.attrs("join", "debug"))
                .await
                .is_ok()
            {
                SessionMode::Peer
            } else {
                check(
                    "observe",
                    "debug",
                    why(&format!(
                        "needs join (as a peer) or observe (as an observer) on {res}/debug"
                    )),
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
            &scope.attrs("join", "debug"),
            &why(&format!(
                "with stdin needs join on {res}/debug (observe watches it with stdin=false)"
            )),
        )
        .into());
    }
    if opts.stdin && matches!(mode, SessionMode::Observer | SessionMode::Moderator) {
        let (verb, sub) = if mode == SessionMode::Observer {
            ("observe", "debug")
        } else {
            ("moderate", moderate_on)
        };
        return Err(crate::authz::forbidden(
            &auth.user,
            &scope.attrs(verb, sub),
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
    let (request, on_upgrade) = prepare(&st, &mut req)?;
    let target = st
        .backend
        .stream_target(
            &ns,
            &pod,
            &request.options.container,
            poddebug_storage::StreamUse::Attach(st.config.attach_wait_timeout),
            &auth.user,
        )
        .await?;
    let grant = authorize_profiles(&st, &auth, &target, &request.options.container).await?;
    authorize_regular(&st, &auth, &target, "create", "attach").await?;
    serve(
        st,
        auth,
        request,
        on_upgrade,
        target,
        SessionScope::pod(&ns, &pod),
        grant,
    )
    .await
}

/// Parse an attach request once, before anything is read: an upgrade over HTTP/1.1, valid
/// options and mode, a connection that can be upgraded, a server not draining. `query` is
/// the request's own unless a handler rewrote it (a node debug container's path names its
/// container).
pub(crate) fn prepare_with(
    st: &AppState,
    req: &mut Request,
    query: &std::collections::BTreeMap<String, String>,
) -> Result<(AttachRequest, hyper::upgrade::OnUpgrade), Error> {
    let request = AttachRequest::parse(req.method(), req.version(), req.headers(), query)?;
    let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(ApiError::BadRequest("this connection cannot be upgraded".to_owned()).into());
    };
    if *st.drain.borrow() {
        return Err(shutting_down());
    }
    Ok((request, on_upgrade))
}

/// [`prepare_with`] the request's own query.
pub(crate) fn prepare(
    st: &AppState,
    req: &mut Request,
) -> Result<(AttachRequest, hyper::upgrade::OnUpgrade), Error> {
    let query = query_map(req.uri().query());
    prepare_with(st, req, &query)
}

/// Attach to a resolved and authorized target: the session mode, the upstream upgrade, the
/// recording, the session's record, then the relay task; the answer is our 101. A session a
/// debug request's grant opened (`grant`) ends when the grant does.
pub(crate) async fn serve(
    st: AppState,
    auth: Authenticated,
    request: AttachRequest,
    on_upgrade: hyper::upgrade::OnUpgrade,
    target: StreamTarget,
    scope: SessionScope,
    grant: Option<crate::requests::Grant>,
) -> Result<Response, Error> {
    let mode = session_mode(&st, &auth, &scope, &target, &request).await?;
    // The per-user limit on sessions, before anything is dialled; held until the session's
    // record exists.
    let admission = crate::sessions::admit(&st, &auth.user.user).await?;
    let (upstream, headers) = match st
        .upstream
        .attach(&target, &request, &auth.user, &st.metrics)
        .await?
    {
        AttachOutcome::Refused(resp) => return Ok(resp),
        AttachOutcome::Switched { io, headers } => (io, headers),
    };
    let negotiated = Negotiated::from_switching(request.upgrade, &headers);
    let mut session = Live::open(&st, &auth.user, target, &request, negotiated, mode).await?;
    drop(admission);
    session.grant = grant.map(|g| {
        st.requests.watch_session(
            &g,
            session.end.clone(),
            session.recording.as_ref().map(Recording::marker),
        )
    });
    tokio::spawn(session.run(st.clone(), on_upgrade, upstream));
    let mut resp = Response::new(axum::body::Body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *resp.headers_mut() = protocol::switching_headers(&headers);
    Ok(resp)
}

/// A session between our 101 and its end: what the relay task owns.
struct Live {
    caller: Caller,
    target: StreamTarget,
    /// The debug container as the client named it.
    container: String,
    mode: SessionMode,
    negotiated: Negotiated,
    /// How the server ends the session of its own accord (its recording in strict mode, a
    /// termination, the client breaking the protocol).
    end: EndSignal,
    /// What the client may send: stdin only as asked and as its mode allows, resizes with a TTY.
    grants: Grants,
    gate: Option<Arc<Gate>>,
    recording: Option<Recording>,
    record: SessionHandle,
    guard: StreamGuard,
    /// The watch of the debug request whose grant opened the session, if one did.
    grant: Option<crate::requests::GrantGuard>,
}

impl Live {
    /// Start the recording (a session that cannot be recorded is not started, when recording
    /// is on) and the session's record in the cluster (a moderated session withholds the input
    /// of those who may type until a moderator is attached).
    async fn open(
        st: &AppState,
        caller: &Caller,
        target: StreamTarget,
        request: &AttachRequest,
        negotiated: Negotiated,
        mode: SessionMode,
    ) -> Result<Live, Error> {
        let opts = &request.options;
        let end = EndSignal::default();
        let session_id = poddebug_storage::new_session_id();
        let recording = match &st.recorder {
            None => None,
            Some(recorder) => {
                let info = SessionInfo {
                    namespace: target.namespace.clone(),
                    pod: target.pod.clone(),
                    container: opts.container.clone(),
                    user: caller.user.clone(),
                    protocol: negotiated.label(),
                    session_id: session_id.clone(),
                    mode: mode.as_str().to_owned(),
                    justification: target.justification.clone(),
                };
                match recorder.start(info, &end).await {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::error!(error = %e, "a session recording cannot be written; attach refused");
                        return Err(ApiError::ServiceUnavailable(format!(
                            "session recording is unavailable on this server, so the session was \
                             not started (every session is recorded; --recording-mode={})",
                            recorder.mode().as_str()
                        ))
                        .into());
                    }
                }
            }
        };
        let record = SessionRecord {
            id: session_id,
            namespace: target.namespace.clone(),
            pod: target.pod.clone(),
            container: opts.container.clone(),
            ec_name: target.container.clone(),
            user: caller.user.clone(),
            creator: target.owner.clone(),
            groups: caller.groups.clone(),
            mode,
            protocol: negotiated.label(),
            tty: opts.tty,
            stdin: opts.stdin,
            recording_id: recording.as_ref().map(|r| r.id().to_owned()),
            moderated: st.sessions.is_moderated(&target.profiles),
            replica: st.sessions.replica().to_owned(),
            started: jiff::Timestamp::now().to_string(),
            justification: target.justification.clone(),
        };
        // Whether input is held is the container's and the caller's mode's to decide, not the
        // query's: a client can open a stdin stream it never asked for (the relay refuses it,
        // and the gate would hold it all the same).
        let gate = (record.moderated && mode.may_type())
            .then(|| Arc::new(Gate::new(st.sessions.moderator_attached(&record))));
        let marker = recording.as_ref().map(Recording::marker);
        let handle = match st
            .sessions
            .open(record, end.clone(), gate.clone(), marker)
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
                user: caller.user.clone(),
                namespace: target.namespace.clone(),
                pod: target.pod.clone(),
                container: opts.container.clone(),
                protocol: negotiated.label(),
            },
        );
        Ok(Live {
            caller: caller.clone(),
            target,
            container: opts.container.clone(),
            mode,
            negotiated,
            end,
            grants: Grants::of(opts, mode.may_type()),
            gate,
            recording,
            record: handle,
            guard,
            grant: None,
        })
    }

    /// Relay once the client's side of the upgrade completes, until the stream ends (bounded by
    /// the drain signal at shutdown); then close the session's record at once, finish the
    /// recording and write the session's audit record (both bounded).
    async fn run(
        self,
        st: AppState,
        on_upgrade: hyper::upgrade::OnUpgrade,
        upstream: crate::upstream::UpstreamIo,
    ) {
        let start = jiff::Timestamp::now();
        let relayed = match tokio::time::timeout(CLIENT_UPGRADE_TIMEOUT, on_upgrade).await {
            Ok(Ok(io)) => {
                let controls = poddebug_stream::Controls {
                    drain: st.drain.clone(),
                    end: self.end.clone(),
                    grants: self.grants,
                    gate: self.gate.clone(),
                    idle_timeout: st.config.stream_idle_timeout,
                };
                let client = TokioIo::new(io);
                match &self.recording {
                    Some(r) => {
                        let tap = Some(r.tap());
                        poddebug_stream::relay(
                            client,
                            upstream,
                            &self.negotiated,
                            controls,
                            &self.guard,
                            tap,
                        )
                        .await
                    }
                    None => {
                        poddebug_stream::relay(
                            client,
                            upstream,
                            &self.negotiated,
                            controls,
                            &self.guard,
                            None::<&NoRecorder>,
                        )
                        .await
                    }
                }
                true
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "client upgrade failed");
                self.guard.set_end("client upgrade failed");
                false
            }
            Err(_) => {
                self.guard.set_end("client upgrade timed out");
                false
            }
        };
        let finished_at = jiff::Timestamp::now();
        let Live {
            caller,
            target,
            container,
            mode,
            end,
            recording,
            record,
            guard,
            grant,
            ..
        } = self;
        // Its grant no longer needs watching.
        drop(grant);
        let justification = target.justification.clone();
        // The session is over: its record goes at once, whatever is still written about it.
        let session_id = record.id().to_owned();
        record.close().await;
        // No lookup for a stream that never ran, nor while the server is going down.
        let look_up = relayed && !*st.drain.borrow();
        let backend = st.backend.clone();
        let lookup_caller = caller.clone();
        let lookup_container = container.clone();
        let fallback = async move {
            if look_up {
                container_exit_code(backend, target, lookup_container, lookup_caller).await
            } else {
                None
            }
        };
        let (recording_id, exit_code, finished) = match recording {
            Some(r) => {
                let f = r.finish(fallback).await;
                (Some(f.id.clone()), f.exit_code, Some(f))
            }
            None => (None, fallback.await, None),
        };
        let (bytes_in, bytes_out) = guard.bytes();
        let info = guard.info();
        let mut audit = AuditRecord::new(
            Action::Session,
            &caller,
            &info.namespace,
            &info.pod,
            &info.container,
        )
        .justified(&justification);
        audit.protocol = Some(info.protocol.clone());
        audit.start = Some(start);
        audit.end = Some(finished_at);
        audit.bytes_in = Some(bytes_in);
        audit.bytes_out = Some(bytes_out);
        audit.exit_code = exit_code;
        audit.recording_id = recording_id;
        audit.session = Some(session_id);
        audit.mode = Some(mode.as_str().to_owned());
        audit.outcome = end
            .current()
            .map(|e| format!("ended by the server: {}", e.error.message()));
        audit.emit();
        if let Some(f) = finished {
            // The recording is complete: its own event, and one for each command it derived.
            let mut done = audit.clone();
            done.action = Action::RecordingFinished;
            done.outcome = f.truncated.then(|| "truncated".to_owned());
            done.emit();
            crate::audit::export::commands(&audit, f.start.unwrap_or(start), &f.commands);
        }
    }
}

/// The debug container's exit code, read once from its status when the stream did not report
/// it (best effort: None when it still runs, or the read fails or takes too long).
/// `container` is the debug container's name as the API knows it (the client's).
async fn container_exit_code(
    backend: Arc<dyn poddebug_storage::DebugBackend>,
    target: StreamTarget,
    container: String,
    caller: Caller,
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
