//! Just-in-time access: debug requests (`DebugRequest`), what an approved one grants, and how
//! its end ends what it opened.
//!
//! - A create (debug container, copy, node debug container) that names `debugRequest: NAME`
//!   is resolved by [`Requests::for_create`] into a [`Grant`] — the requester, in the window,
//!   exactly what the request names — that stands in for `use` on the request's profile and
//!   nothing else ([`check_use`]). What is made under it carries its reason, ticket, name and
//!   approvers, ends by the end of its window (its deadline), and is listed in the request's
//!   `status.made`, which is what a later attach or log is granted on ([`Requests::for_stream`]).
//! - Every replica follows the requests ([`poddebug_storage::RequestStore`]) and ends, within a
//!   fraction of a second, the streams it relays that a grant opened once that grant is over
//!   (expired on its own clock, revoked, denied, withdrawn): the streams are told why on their
//!   error channel, and their recordings say it.
//! - The replica that leads (the expiry loop's election) writes `Expired` into the records of
//!   requests whose time passed, so that lists and watches show it and the expiry is notified
//!   once.

pub mod grant;
pub mod notify;
pub mod options;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use poddebug_storage::{Caller, RequestStore, StreamTarget};
use poddebug_stream::websocket::frame::CLOSE_POLICY_VIOLATION;
use poddebug_stream::{EndSignal, Ending};
use poddebug_types::request::{
    DebugRequest, Justification, Made, PLURAL_DEBUG_REQUESTS, RequestPhase,
};
use poddebug_types::{ApiError, ErrorList, FieldError, GROUP, Profile};
use tokio::sync::watch;

pub use grant::{Grant, Wanted};
pub use notify::{EventKind, Notification, Notifier};
pub use options::{RequestOptions, RequestPolicy};

use crate::audit::{Action, AuditRecord};
use crate::state::AppState;
use poddebug_recording::Marker;

/// How long a request waits for a replica that just started to know the requests.
const SYNC_WAIT: Duration = Duration::from_secs(5);
/// How often a replica looks at the grants of the streams it relays (besides every change).
const ENFORCE_EVERY: Duration = Duration::from_millis(250);
/// How often the leader looks for requests whose time passed.
const SETTLE_EVERY: Duration = Duration::from_secs(1);
/// Who expires requests, in their reviews and the audit trail.
pub const EXPIRY_ACTOR: &str = "system:poddebug:expiry";
/// How long a request that ended (denied, revoked, expired) is kept before the leader deletes
/// its record, as kube-controller-manager keeps decided CertificateSigningRequests for a while:
/// requests of a namespace that was deleted go too. The audit trail keeps the history.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// When request `r` ended (its window, or its pending lifetime; its last review for a denial or
/// revocation); `None` while it has not.
fn ended_at(r: &DebugRequest, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
    let st = r.status.as_ref()?;
    match r.phase_at(now) {
        RequestPhase::Expired => r.due_at(),
        RequestPhase::Denied | RequestPhase::Revoked => st.reviews.last().map(|x| x.time.0),
        _ => None,
    }
}

/// The reason and ticket a create's body carries, and the request it names.
#[derive(Clone, Debug, Default)]
pub struct Asked<'a> {
    /// `reason`.
    pub reason: Option<&'a str>,
    /// `ticket`.
    pub ticket: Option<&'a str>,
    /// `debugRequest`.
    pub debug_request: Option<&'a str>,
}

/// What a create gets from the debug request it names and from `--require-reason`.
#[derive(Clone, Debug)]
pub struct ForCreate {
    /// The grant, or why there is none (a 403 answered where the create's profile checks are,
    /// after its validation): `Ok(None)` when no request was named.
    pub grant: Result<Option<Grant>, ApiError>,
    /// What the made thing carries.
    pub justification: Justification,
    /// The latest it may run to: the end of the request's window.
    pub deadline: Option<jiff::Timestamp>,
}

/// A stream a grant opened, watched until it ends.
struct Watched {
    key: (String, String),
    end: EndSignal,
    marker: Option<Marker>,
}

/// The replica's side of debug requests (module docs).
pub struct Requests {
    store: RequestStore,
    policy: RequestPolicy,
    node_namespace: String,
    notifier: Option<Notifier>,
    watched: Mutex<HashMap<u64, Watched>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requests").finish_non_exhaustive()
    }
}

/// Deregisters a watched stream when dropped (its session is over).
pub struct GrantGuard {
    requests: Arc<Requests>,
    id: u64,
}

impl Drop for GrantGuard {
    fn drop(&mut self) {
        self.requests.watched().remove(&self.id);
    }
}

impl Requests {
    /// The requests of `store`, under `policy`.
    pub fn new(
        store: RequestStore,
        policy: RequestPolicy,
        node_namespace: String,
    ) -> Arc<Requests> {
        let notifier = policy.notify_webhook.clone().map(Notifier::start);
        Arc::new(Requests {
            store,
            policy,
            node_namespace,
            notifier,
            watched: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        })
    }

    /// The store.
    pub fn store(&self) -> &RequestStore {
        &self.store
    }

    /// The policy of the flags.
    pub fn policy(&self) -> &RequestPolicy {
        &self.policy
    }

    /// The namespace of node requests (the server's node-debug namespace).
    pub fn node_namespace(&self) -> &str {
        &self.node_namespace
    }

    /// The notifier, when `--notify-webhook` is set.
    pub fn notifier(&self) -> Option<&Notifier> {
        self.notifier.as_ref()
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Watched>> {
        self.watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait (bounded) until this replica knows the requests; 503 otherwise.
    pub async fn synced(&self) -> Result<(), ApiError> {
        let deadline = tokio::time::Instant::now() + SYNC_WAIT;
        while !self.store.is_synced() {
            if tokio::time::Instant::now() >= deadline {
                return Err(ApiError::ServiceUnavailable(
                    "this replica does not know the debug requests yet; retry".to_owned(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Queue a notification of `kind` (nothing without `--notify-webhook`).
    pub fn notify(
        &self,
        kind: EventKind,
        request: &DebugRequest,
        actor: &str,
        comment: Option<String>,
        made: Option<Made>,
    ) {
        if let Some(n) = &self.notifier {
            n.send(Notification {
                kind,
                request: request.as_seen_at(jiff::Timestamp::now()),
                actor: actor.to_owned(),
                comment,
                made,
                time: jiff::Timestamp::now(),
            });
        }
    }

    /// What a create in `namespace` that carries `asked` gets: the grant of the request it
    /// names (resolved against `wanted`; a refusal is kept for the create's 403 step), what it
    /// carries, and its deadline. A 422 of kind `kind` (named `name`) when the server requires
    /// a reason and there is none, or when the body's reason or ticket differ from the
    /// request's (what was approved is what is recorded); 503 while this replica does not
    /// know the requests.
    pub async fn for_create(
        &self,
        caller: &Caller,
        namespace: &str,
        asked: &Asked<'_>,
        wanted: &Wanted<'_>,
        (kind, name): (&str, &str),
    ) -> Result<ForCreate, ApiError> {
        let non_empty = |s: Option<&str>| {
            s.map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let (reason, ticket) = (non_empty(asked.reason), non_empty(asked.ticket));
        let named = asked.debug_request.filter(|n| !n.is_empty());
        let mut errs = ErrorList::new();
        if self.policy.require_reason && reason.is_none() && named.is_none() {
            errs.push(FieldError::required(
                "reason",
                "this server requires a reason for every debug container, copy and node debug \
                 container (--require-reason): say why in reason (and ticket), or name an \
                 approved debugRequest",
            ));
        }
        let Some(named) = named else {
            if !errs.is_empty() {
                return Err(ApiError::invalid(GROUP, kind, name, errs));
            }
            return Ok(ForCreate {
                grant: Ok(None),
                justification: Justification {
                    reason,
                    ticket,
                    ..Default::default()
                },
                deadline: None,
            });
        };
        self.synced().await?;
        // Read from the cluster, not this replica's view: a revocation or denial another
        // replica wrote a moment ago is what decides, and so is an approval.
        let request = self
            .store
            .fresh(namespace, named)
            .await
            .map_err(|e| e.to_api_error())?;
        if let Some(r) = &request {
            for (field, given, approved) in [
                ("reason", &reason, Some(r.spec.reason.clone())),
                ("ticket", &ticket, r.spec.ticket.clone()),
            ] {
                if let Some(g) = given
                    && approved.as_deref() != Some(g.as_str())
                {
                    errs.push(FieldError::invalid(
                        field,
                        g.as_str(),
                        format!(
                            "what is made under debug request {named} carries the {field} it was approved with; leave {field} out"
                        ),
                    ));
                }
            }
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(GROUP, kind, name, errs));
        }
        let grant = match &request {
            None => Err(ApiError::forbidden(
                PLURAL_DEBUG_REQUESTS,
                GROUP,
                named,
                format!("there is no such debug request in namespace {namespace:?}"),
            )),
            Some(r) => grant::resolve(r, &caller.user, wanted, jiff::Timestamp::now()).map(Some),
        };
        let (justification, deadline) = match &grant {
            Ok(Some(g)) => (g.justification(), g.expires_at()),
            _ => (
                Justification {
                    debug_request: Some(named.to_owned()),
                    ..Default::default()
                },
                None,
            ),
        };
        Ok(ForCreate {
            grant,
            justification,
            deadline,
        })
    }

    /// The grant that reaches `target` for `caller`: the request the target says it was made
    /// under, when that request lists the target among what was made under it (its signed
    /// record decides, not the target's own say), is its caller's, and is approved now.
    /// Read from the cluster as [`Requests::for_create`] does; a read that fails grants
    /// nothing.
    pub async fn for_stream(&self, caller: &Caller, target: &StreamTarget) -> Option<Grant> {
        let name = target.justification.debug_request.as_deref()?;
        let r = match self.store.fresh(&target.namespace, name).await {
            Ok(r) => r?,
            Err(e) => {
                tracing::warn!(namespace = %target.namespace, request = %name,
                    error = %e.to_api_error().message(),
                    "a debug request could not be read; it grants nothing to this stream");
                return None;
            }
        };
        grant::for_stream(
            &r,
            &caller.user,
            &target.pod,
            &target.container,
            jiff::Timestamp::now(),
        )
    }

    /// Record in the request that `made` was made under `grant` by `caller`; notified and
    /// audited.
    pub async fn record_made(&self, grant: &Grant, made: Made, caller: &Caller) {
        let (ns, name) = grant.key();
        let entry = made.clone();
        let written = self
            .store
            .update(&ns, &name, move |r| {
                let st = r.status.get_or_insert_with(Default::default);
                st.made.push(entry.clone());
                Ok(())
            })
            .await;
        match written {
            Ok(r) => {
                self.notify(EventKind::Used, &r, &caller.user, None, Some(made.clone()));
                let mut a = AuditRecord::new(Action::Request, caller, &ns, &made.pod, "")
                    .justified(&r.justification());
                a.outcome = Some(format!("used: {} {} made", made.kind, made.name));
                a.emit();
            }
            Err(e) => tracing::warn!(
                namespace = %ns, request = %name, error = %e.to_api_error().message(),
                "what was made under a debug request could not be recorded in it; attaching under the request will be refused"
            ),
        }
    }

    /// Watch a stream `grant` opened until the returned guard is dropped: it is ended (and its
    /// recording marked) once the grant is over.
    pub fn watch_session(
        self: &Arc<Self>,
        grant: &Grant,
        end: EndSignal,
        marker: Option<Marker>,
    ) -> GrantGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.watched().insert(
            id,
            Watched {
                key: grant.key(),
                end,
                marker,
            },
        );
        // A grant that ended between the check and now ends the stream at once.
        self.enforce();
        GrantGuard {
            requests: self.clone(),
            id,
        }
    }

    /// End the watched streams whose grant is over.
    fn enforce(&self) {
        let now = jiff::Timestamp::now();
        let watched = self.watched();
        for w in watched.values() {
            if w.end.current().is_some() {
                continue;
            }
            let why = match self.store.get(&w.key.0, &w.key.1) {
                None => Some("was withdrawn".to_owned()),
                Some(r) => grant::inactive(&r, now)
                    .map(|w| w.strip_prefix("it ").map(str::to_owned).unwrap_or(w)),
            };
            let Some(why) = why else {
                continue;
            };
            let text = format!("session ended: debug request {} {why}", w.key.1);
            tracing::info!(namespace = %w.key.0, request = %w.key.1, "{text}");
            if let Some(m) = &w.marker {
                m.mark(&text);
            }
            w.end.end(Ending {
                error: ApiError::ForbiddenMessage(text),
                close_code: CLOSE_POLICY_VIOLATION,
                label: "debug request ended",
            });
        }
    }

    /// Write `Expired` into the records of requests whose time passed (one conditional write
    /// each: of several replicas writing, one wins and notifies); delete the records of those
    /// that ended more than [`RETENTION`] ago.
    async fn settle_due(&self) {
        let now = jiff::Timestamp::now();
        let (all, _) = self.store.snapshot();
        for r in &all {
            let stored = r.status.as_ref().map(|s| s.phase).unwrap_or_default();
            let retention = jiff::SignedDuration::try_from(RETENTION).unwrap_or_default();
            if stored.is_final()
                && ended_at(r, now)
                    .is_some_and(|end| end.checked_add(retention).is_ok_and(|t| t <= now))
            {
                let rv = r
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok());
                match self.store.delete(r.namespace(), r.name(), rv).await {
                    Ok(_) => tracing::info!(namespace = %r.namespace(), request = %r.name(),
                        "the record of a debug request that ended a day ago was deleted"),
                    Err(e) => {
                        tracing::debug!(request = %r.name(), error = %e.to_api_error().message(),
                        "an old debug request was not deleted")
                    }
                }
            }
        }
        for r in all {
            let stored = r.status.as_ref().map(|s| s.phase).unwrap_or_default();
            if stored.is_final() || r.phase_at(now) != RequestPhase::Expired {
                continue;
            }
            let written = self
                .store
                .update(r.namespace(), r.name(), |r| {
                    let stored = r.status.as_ref().map(|s| s.phase).unwrap_or_default();
                    if stored.is_final()
                        || r.phase_at(jiff::Timestamp::now()) != RequestPhase::Expired
                    {
                        return Err(ApiError::conflict(
                            PLURAL_DEBUG_REQUESTS,
                            GROUP,
                            r.name(),
                            "no longer due",
                        ));
                    }
                    r.status.get_or_insert_with(Default::default).phase = RequestPhase::Expired;
                    Ok(())
                })
                .await;
            match written {
                Ok(r) => {
                    self.notify(EventKind::Expired, &r, EXPIRY_ACTOR, None, None);
                    let caller = Caller {
                        user: EXPIRY_ACTOR.to_owned(),
                        ..Default::default()
                    };
                    let mut a =
                        AuditRecord::new(Action::Request, &caller, r.namespace(), r.target(), "")
                            .justified(&r.justification());
                    a.outcome = Some("expired".to_owned());
                    a.expires_at = r.due_at();
                    a.emit();
                }
                Err(e) => {
                    tracing::debug!(request = %r.name(), error = %e.to_api_error().message(), "an expiry was not written")
                }
            }
        }
    }

    /// The background work, for the life of the process: end the streams whose grant is over
    /// (on every change of the requests, and every [`ENFORCE_EVERY`] for the clock); while
    /// `leading`, write the expiries.
    pub fn spawn(self: &Arc<Self>, leading: watch::Receiver<bool>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut rx = me.store.subscribe();
            let mut tick = tokio::time::interval(ENFORCE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    ev = rx.recv() => {
                        if matches!(ev, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                            return;
                        }
                    }
                    _ = tick.tick() => {}
                }
                me.enforce();
            }
        });
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SETTLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if *leading.borrow() && me.store.is_synced() {
                    me.settle_due().await;
                }
            }
        });
    }
}

/// `use` on profile `p` for `user`, or else `grant` standing in for it; whether the grant was
/// needed. A refusal of a profile that can be requested says so.
pub(crate) async fn check_use(
    st: &AppState,
    user: &Caller,
    p: Profile,
    why: Option<&str>,
    grant: Option<&Grant>,
) -> Result<bool, ApiError> {
    let checked =
        crate::filters::check_explained(st, user, &crate::authz::profile_use(p), why).await;
    match checked {
        Ok(()) => Ok(false),
        Err(ApiError::Forbidden { .. }) if grant.is_some_and(|g| g.covers(p)) => Ok(true),
        Err(ApiError::Forbidden {
            resource,
            name,
            mut reason,
            kind,
            group,
        }) if st.requests.policy().approvals(p).is_some() => {
            match grant {
                Some(g) => reason.push_str(&format!(
                    "; debug request {} grants the {} profile, not {p}",
                    g.request.name(),
                    g.profile
                )),
                None => reason.push_str(&format!(
                    "; a DebugRequest for the {p} profile can be made and, once someone else \
                     approves it, grants what it names (kubectl poddebug request POD \
                     --profile={p} --reason=...)"
                )),
            }
            Err(ApiError::Forbidden {
                resource,
                name,
                reason,
                kind,
                group,
            })
        }
        Err(e) => Err(e),
    }
}

/// What is made under a request, as `status.made` lists it.
pub fn made(kind: &str, name: &str, namespace: &str, pod: &str, container: Option<&str>) -> Made {
    Made {
        kind: kind.to_owned(),
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
        container: container.map(str::to_owned),
        time: Time(jiff::Timestamp::now()),
    }
}
