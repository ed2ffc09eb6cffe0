//! Watch: pod watch events turned into debug-container events.
//!
//! The server keeps, per pod, the debug-container objects it last emitted and diffs every pod
//! event against them: a debug name not seen before is ADDED, a changed object (status, stop
//! record, labels...) is MODIFIED, and every debug container of a deleted pod (or of a pod that
//! left the selection) is DELETED. Each object's resourceVersion is its pod's, so a client can
//! resume with the last one it saw.
//!
//! Start: without a resourceVersion or with "0", the pods are listed first and every debug
//! container is sent as ADDED, then the watch starts from the list's resourceVersion (as
//! kube-apiserver does). From any other resourceVersion, a watch served from the pod cache
//! ([`watch_cached`]) knows each pod as it was before each change (`Change::before`), so what
//! the client already had is MODIFIED; the uncached fallback cannot know, and reports a pod's
//! debug containers as ADDED on its first event (client-go informers treat an ADDED of a known
//! object as an update).
//!
//! The upstream watch is reopened from the last resourceVersion when it ends, until the
//! requested timeout. A 410 from upstream ends the stream with an `Expired` error event, as
//! kube-apiserver's own watch does; the client then lists again.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};
use poddebug_types::{ApiError, PodDebugContainer};
use tokio::time::Instant;

use crate::cache::{Change, PodCache};
use crate::read::{objects_of, selectors};
use crate::selector::PodSelection;
use crate::stop_lease::StopLeases;
use crate::{DebugWatchEvent, DebugWatchStream, StorageError, WatchOptions};

/// Longest single upstream watch call.
const MAX_UPSTREAM_SECS: u64 = 290;
/// Watch length when the client sets none (kube-apiserver picks 30-60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// `namespace/name` of a pod.
fn key(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// A fingerprint of an object without its resourceVersion: two objects that differ only there
/// are the same state. Watches keep fingerprints, not objects, so an open watch of thousands of
/// debug containers costs kilobytes, not megabytes.
fn fingerprint(obj: &PodDebugContainer) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut o = obj.clone();
    o.metadata.resource_version = None;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(&o).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// The debug containers last emitted (their names and fingerprints), per pod, and the diff of
/// new pod states against them.
#[derive(Default, Debug)]
pub(crate) struct Differ {
    last: HashMap<(String, String), Vec<(String, u64)>>,
    /// The stop records the objects show (see `read::object_of`).
    stops: Option<StopLeases>,
}

impl Differ {
    /// Events for a pod that was added or modified.
    pub(crate) fn observe(&mut self, pod: &Pod) -> Vec<DebugWatchEvent> {
        let k = key(pod);
        let now = objects_of(pod, self.stops.as_ref());
        let before = self.last.remove(&k).unwrap_or_default();
        let mut events = Vec::new();
        let mut seen = Vec::with_capacity(now.len());
        for (name, obj) in now {
            let fp = fingerprint(&obj);
            match before.iter().find(|(n, _)| *n == name) {
                None => events.push(DebugWatchEvent::Added(obj)),
                Some((_, old)) if *old != fp => events.push(DebugWatchEvent::Modified(obj)),
                Some(_) => {}
            }
            seen.push((name, fp));
        }
        if !seen.is_empty() {
            self.last.insert(k, seen);
        }
        events
    }

    /// Whether this watch has reported debug containers of `pod` before.
    pub(crate) fn knows(&self, pod: &Pod) -> bool {
        self.last.contains_key(&key(pod))
    }

    /// [`Self::remove`] for a pod this watch reported before; nothing for another.
    pub(crate) fn remove_known(&mut self, pod: &Pod) -> Vec<DebugWatchEvent> {
        if self.last.contains_key(&key(pod)) {
            self.remove(pod)
        } else {
            Vec::new()
        }
    }

    /// Events for a pod that was deleted (or no longer matches the selectors): every debug
    /// container it had, in its final state.
    pub(crate) fn remove(&mut self, pod: &Pod) -> Vec<DebugWatchEvent> {
        let before = self.last.remove(&key(pod)).unwrap_or_default();
        let mut now: Vec<PodDebugContainer> = objects_of(pod, self.stops.as_ref())
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        // Debug containers known from earlier events but absent from the final object (cannot
        // happen with an append-only list, but a client must never keep a ghost): their
        // deletion names them.
        for (name, _) in before {
            if !now
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some(name.as_str()))
            {
                now.push(ghost(pod, name));
            }
        }
        now.into_iter().map(DebugWatchEvent::Deleted).collect()
    }
}

/// The object of a debug container known only by name, in `pod`.
fn ghost(pod: &Pod, name: String) -> PodDebugContainer {
    let mut obj = PodDebugContainer {
        api_version: poddebug_types::API_VERSION.to_owned(),
        kind: "PodDebugContainer".to_owned(),
        ..Default::default()
    };
    obj.metadata.name = Some(name);
    obj.metadata.namespace = pod.metadata.namespace.clone();
    obj.metadata.resource_version = pod.metadata.resource_version.clone();
    obj.status = Some(poddebug_types::PodDebugContainerStatus {
        pod_name: pod.metadata.name.clone().unwrap_or_default(),
        ..Default::default()
    });
    obj
}

/// The Status of an upstream watch error as the client must see it; a 410 always says Expired.
fn upstream_error(mut status: Status) -> ApiError {
    if status.code == Some(410) {
        status.reason = Some("Expired".to_owned());
        if status.message.as_deref().is_none_or(str::is_empty) {
            status.message = Some("too old resource version".to_owned());
        }
    }
    ApiError::from_upstream(status)
}

/// The error event for a failure of the upstream watch (a Status keeps its code and message,
/// a 410 says Expired; a transport failure is a 503 that names no internals).
fn error_event(e: kube::Error) -> DebugWatchEvent {
    match e {
        kube::Error::Api(status) => DebugWatchEvent::Error(upstream_error(to_openapi(&status))),
        other => DebugWatchEvent::Error(StorageError::Kube(other).to_api_error()),
    }
}

/// k8s-openapi's Status from kube-core's (same wire form).
fn to_openapi(s: &kube::core::Status) -> Status {
    StorageError::Kube(kube::Error::Api(Box::new(s.clone())))
        .to_api_error()
        .to_status()
}

/// State of a running debug watch.
/// Pause before an ended upstream watch is opened again.
const REOPEN_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);

struct Watch {
    api: Api<Pod>,
    labels: Option<String>,
    fields: Option<String>,
    bookmarks: bool,
    deadline: Instant,
    rv: String,
    differ: Differ,
    pending: VecDeque<DebugWatchEvent>,
    upstream: Option<BoxStream<'static, kube::Result<WatchEvent<Pod>>>>,
    done: bool,
}

impl Watch {
    /// The next event to hand out, or `None` at the end.
    async fn next(&mut self) -> Option<DebugWatchEvent> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            let remaining = self.deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return None;
            }
            if self.upstream.is_none() {
                // Upstream bookmarks are always asked for: they keep the resume point fresh.
                let mut wp = WatchParams::default().timeout(
                    u32::try_from(remaining.as_secs().clamp(1, MAX_UPSTREAM_SECS)).unwrap_or(1),
                );
                if let Some(l) = self.labels.as_deref() {
                    wp = wp.labels(l);
                }
                if let Some(f) = self.fields.as_deref() {
                    wp = wp.fields(f);
                }
                match self.api.watch(&wp, &self.rv).await {
                    Ok(s) => self.upstream = Some(s.boxed()),
                    Err(e) => {
                        self.done = true;
                        return Some(error_event(e));
                    }
                }
            }
            let Some(upstream) = self.upstream.as_mut() else {
                continue;
            };
            let next = match tokio::time::timeout_at(self.deadline, upstream.next()).await {
                Ok(next) => next,
                Err(_) => return None,
            };
            match next {
                Some(Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod))) => {
                    self.advance(&pod);
                    self.pending.extend(self.differ.observe(&pod));
                }
                Some(Ok(WatchEvent::Deleted(pod))) => {
                    self.advance(&pod);
                    self.pending.extend(self.differ.remove(&pod));
                }
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    self.rv = b.metadata.resource_version;
                    if self.bookmarks {
                        self.pending
                            .push_back(DebugWatchEvent::Bookmark(self.rv.clone()));
                    }
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    self.done = true;
                    return Some(DebugWatchEvent::Error(upstream_error(to_openapi(&status))));
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(error_event(e));
                }
                // The upstream watch ended (its timeout): reopen from the last resourceVersion,
                // after a pause, so that a watch that keeps closing at once is no hot loop
                // against kube-apiserver.
                None => {
                    self.upstream = None;
                    tokio::time::sleep(
                        REOPEN_PAUSE.min(self.deadline.saturating_duration_since(Instant::now())),
                    )
                    .await;
                }
            }
        }
    }

    /// Remember the resourceVersion of an event's pod.
    fn advance(&mut self, pod: &Pod) {
        if let Some(rv) = pod.metadata.resource_version.as_deref() {
            self.rv = rv.to_owned();
        }
    }
}

/// Start a debug watch (see the module docs).
pub(crate) async fn watch(
    api: Api<Pod>,
    opts: &WatchOptions,
    stops: Option<StopLeases>,
) -> Result<DebugWatchStream, StorageError> {
    let (labels, fields) = selectors(&opts.list);
    let deadline = Instant::now() + opts.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let mut w = Watch {
        api,
        labels,
        fields,
        bookmarks: opts.allow_bookmarks,
        deadline,
        rv: String::new(),
        differ: Differ {
            stops,
            ..Differ::default()
        },
        pending: VecDeque::new(),
        upstream: None,
        done: false,
    };
    match opts.resource_version.as_deref() {
        _ if opts.send_initial_events => {
            w.rv = initial_list(&mut w).await?;
            w.pending
                .push_back(DebugWatchEvent::InitialEventsEnd(w.rv.clone()));
        }
        None | Some("" | "0") => {
            w.rv = initial_list(&mut w).await?;
        }
        Some(rv) => w.rv = rv.to_owned(),
    }
    let stream =
        futures::stream::unfold(w, |mut w| async move { w.next().await.map(|ev| (ev, w)) });
    Ok(stream.boxed())
}

/// List the pods, queue ADDED for every debug container, and return the list's
/// resourceVersion, from which the watch continues.
async fn initial_list(w: &mut Watch) -> Result<String, StorageError> {
    let mut lp = ListParams::default();
    if let Some(l) = w.labels.as_deref() {
        lp = lp.labels(l);
    }
    if let Some(f) = w.fields.as_deref() {
        lp = lp.fields(f);
    }
    let pods = w.api.list(&lp).await?;
    for pod in &pods.items {
        let events = w.differ.observe(pod);
        w.pending.extend(events);
    }
    Ok(pods.metadata.resource_version.unwrap_or_default())
}

/// How often a watch served from the cache sends a BOOKMARK (when asked for them) with the
/// cache's newest resourceVersion, so a client resumes past changes it was not shown.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// A debug watch served from the pod cache.
struct CachedWatch {
    selection: PodSelection,
    rx: tokio::sync::broadcast::Receiver<Change>,
    /// Changes at or below this resourceVersion were already handled.
    seen: u64,
    bookmarks: bool,
    deadline: Instant,
    next_bookmark: Instant,
    cache: PodCache,
    differ: Differ,
    /// Pods of the initial state not yet turned into events: they are turned one at a time,
    /// so a watch never holds thousands of encoded-to-be objects at once.
    initial: VecDeque<Arc<Pod>>,
    /// Sent once `initial` is empty (streaming lists).
    initial_end: Option<DebugWatchEvent>,
    pending: VecDeque<DebugWatchEvent>,
    /// Resumed from a resourceVersion: the client already has the state at that version, so a
    /// pod first seen here is known as it was before its change (see [`Change::before`]).
    resumed: bool,
}

impl CachedWatch {
    /// The events of one change of a pod.
    fn apply(&mut self, change: &Change) {
        if change.rv > self.seen {
            self.seen = change.rv;
        }
        if self.resumed
            && let Some(before) = &change.before
            && !self.differ.knows(before)
            && self.selection.matches(before)
        {
            // What the client had at its resourceVersion; the events below are the difference.
            let _ = self.differ.observe(before);
        }
        let events = if change.deleted || !self.selection.matches(&change.pod) {
            // A pod that left the selection is a deletion for this watch, as for kube's.
            self.differ.remove_known(&change.pod)
        } else {
            self.differ.observe(&change.pod)
        };
        self.pending.extend(events);
    }

    async fn next(&mut self) -> Option<DebugWatchEvent> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            if let Some(pod) = self.initial.pop_front() {
                let events = self.differ.observe(&pod);
                self.pending.extend(events);
                continue;
            }
            if let Some(end) = self.initial_end.take() {
                return Some(end);
            }
            let now = Instant::now();
            if now >= self.deadline {
                return None;
            }
            let wake = if self.bookmarks {
                self.deadline.min(self.next_bookmark)
            } else {
                self.deadline
            };
            match tokio::time::timeout_at(wake, self.rx.recv()).await {
                Ok(Ok(change)) => {
                    // Replayed or snapshot state already covers older changes; diffing makes
                    // a repeat harmless, so only strictly older ones are skipped.
                    if change.rv >= self.seen || change.deleted {
                        self.apply(&change);
                    }
                }
                // Too slow for the broadcast: end; the client re-watches from its last
                // resourceVersion, which the history serves.
                Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => return None,
                Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return None,
                Err(_) => {
                    if self.bookmarks && Instant::now() >= self.next_bookmark {
                        self.next_bookmark = Instant::now() + BOOKMARK_EVERY;
                        let rv = self.cache.resource_version().max(self.seen);
                        return Some(DebugWatchEvent::Bookmark(rv.to_string()));
                    }
                }
            }
        }
    }
}

/// Start a debug watch served from the pod cache (see the module docs for the semantics; an
/// explicit resourceVersion older than the cache's history is 410 Expired).
pub(crate) fn watch_cached(
    cache: &PodCache,
    opts: &WatchOptions,
    stops: Option<StopLeases>,
) -> Result<DebugWatchStream, StorageError> {
    let selection = PodSelection::new(&opts.list)?;
    let rx = cache.subscribe();
    let deadline = Instant::now() + opts.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let mut w = CachedWatch {
        selection,
        rx,
        seen: 0,
        bookmarks: opts.allow_bookmarks,
        deadline,
        next_bookmark: Instant::now() + BOOKMARK_EVERY,
        cache: cache.clone(),
        differ: Differ {
            stops,
            ..Differ::default()
        },
        initial: VecDeque::new(),
        initial_end: None,
        pending: VecDeque::new(),
        resumed: false,
    };
    let from = match opts.resource_version.as_deref() {
        _ if opts.send_initial_events => None,
        None | Some("" | "0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version {rv:?}")))?,
        ),
    };
    match from {
        None => {
            let (pods, rv) = cache.snapshot();
            let mut pods: Vec<_> = pods
                .into_iter()
                .filter(|p| w.selection.matches(p))
                .collect();
            pods.sort_by(|a, b| {
                (&a.metadata.namespace, &a.metadata.name)
                    .cmp(&(&b.metadata.namespace, &b.metadata.name))
            });
            w.initial = pods.into();
            w.seen = rv;
            if opts.send_initial_events {
                w.initial_end = Some(DebugWatchEvent::InitialEventsEnd(rv.to_string()));
            }
        }
        Some(rv) => {
            let Ok(replay) = cache.since(rv) else {
                // As from kube-apiserver's watch cache: one ERROR event, then the end.
                let expired = upstream_error(Status {
                    code: Some(410),
                    message: Some(format!("too old resource version: {rv}")),
                    ..Default::default()
                });
                return Ok(
                    futures::stream::once(async move { DebugWatchEvent::Error(expired) }).boxed(),
                );
            };
            w.seen = rv;
            w.resumed = true;
            for change in &replay {
                w.apply(change);
            }
        }
    }
    let stream =
        futures::stream::unfold(w, |mut w| async move { w.next().await.map(|ev| (ev, w)) });
    Ok(stream.boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::{pod, state};

    fn kinds(events: &[DebugWatchEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                DebugWatchEvent::Added(o) => {
                    format!("ADDED {}", o.metadata.name.clone().unwrap_or_default())
                }
                DebugWatchEvent::Modified(o) => {
                    format!("MODIFIED {}", o.metadata.name.clone().unwrap_or_default())
                }
                DebugWatchEvent::Deleted(o) => {
                    format!("DELETED {}", o.metadata.name.clone().unwrap_or_default())
                }
                DebugWatchEvent::Bookmark(rv) => format!("BOOKMARK {rv}"),
                DebugWatchEvent::InitialEventsEnd(rv) => format!("INITIAL-END {rv}"),
                DebugWatchEvent::Error(e) => format!("ERROR {}", e.code()),
            })
            .collect()
    }

    fn with_rv(mut p: Pod, rv: &str) -> Pod {
        p.metadata.resource_version = Some(rv.to_owned());
        p
    }

    #[test]
    fn added_modified_deleted() {
        let mut d = Differ::default();
        // A pod without debug containers emits nothing and is not remembered.
        assert!(d.observe(&pod("web", &[])).is_empty());
        assert!(d.last.is_empty());

        let p1 = with_rv(
            pod("web", &[("dbg", None, "waiting:ContainerCreating")]),
            "101",
        );
        assert_eq!(kinds(&d.observe(&p1)), vec!["ADDED dbg"]);

        // Only the resourceVersion changed: nothing to say.
        assert!(d.observe(&with_rv(p1.clone(), "102")).is_empty());

        // Status changed: MODIFIED carrying the pod's resourceVersion.
        let mut p2 = with_rv(p1.clone(), "103");
        if let Some(s) = p2
            .status
            .as_mut()
            .and_then(|s| s.ephemeral_container_statuses.as_mut())
        {
            s[0].state = Some(state("running"));
        }
        let ev = d.observe(&p2);
        assert_eq!(kinds(&ev), vec!["MODIFIED dbg"]);
        if let DebugWatchEvent::Modified(o) = &ev[0] {
            assert_eq!(o.metadata.resource_version.as_deref(), Some("103"));
        }

        // A second debug container appears.
        let p3 = with_rv(
            pod("web", &[("dbg", None, "running"), ("two", None, "none")]),
            "104",
        );
        assert_eq!(kinds(&d.observe(&p3)), vec!["ADDED two"]);

        // Another pod does not disturb the first.
        let other = with_rv(pod("api", &[("x", None, "running")]), "105");
        assert_eq!(kinds(&d.observe(&other)), vec!["ADDED x"]);

        // Pod deleted: every debug container goes.
        let ev = d.remove(&with_rv(p3, "106"));
        assert_eq!(kinds(&ev), vec!["DELETED dbg", "DELETED two"]);
        if let DebugWatchEvent::Deleted(o) = &ev[1] {
            assert_eq!(o.metadata.resource_version.as_deref(), Some("106"));
        }
        assert_eq!(d.last.len(), 1);
    }

    #[test]
    fn name_reuse_is_a_modification_of_the_debug_name() {
        let mut d = Differ::default();
        d.observe(&pod("web", &[("dbg", None, "terminated")]));
        let ev = d.observe(&pod(
            "web",
            &[
                ("dbg", None, "terminated"),
                ("dbg-bcdfg", Some("dbg"), "none"),
            ],
        ));
        assert_eq!(kinds(&ev), vec!["MODIFIED dbg"]);
    }

    #[test]
    fn deleted_unknown_pod_still_reports_its_debug_containers() {
        let mut d = Differ::default();
        let ev = d.remove(&pod("web", &[("dbg", None, "running")]));
        assert_eq!(kinds(&ev), vec!["DELETED dbg"]);
    }

    #[test]
    fn gone_becomes_expired() {
        let e = upstream_error(Status {
            code: Some(410),
            reason: Some("Gone".into()),
            message: Some("too old resource version: 1 (50)".into()),
            ..Default::default()
        });
        assert_eq!(e.code(), 410);
        assert_eq!(e.reason(), "Expired");
        assert_eq!(e.message(), "too old resource version: 1 (50)");
    }
}
