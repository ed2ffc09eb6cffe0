//! Live sessions, kept in the cluster so that every replica answers for all of them.
//!
//! The replica relaying an attach stream records it as a `coordination.k8s.io/v1` Lease in the
//! server's own namespace ([`SessionStore::open`]): named by the session id, labelled
//! [`SESSION_LABEL`] (and with the pod's namespace, the pod, the container and the user, for
//! people reading the Leases), the record itself in the annotation [`RECORD_ANNOTATION`],
//! `holderIdentity` the replica, renewed every third of `leaseDurationSeconds` while the stream
//! lives ([`SessionStore::renew`]) and deleted when it ends ([`SessionStore::close`]). A record
//! whose `renewTime` is older than its lease duration belongs to a replica that died: it is no
//! longer listed, and any replica deletes it ([`SessionStore::collect_garbage`]).
//!
//! Terminating a session ([`SessionStore::request_termination`]) annotates its Lease with who
//! asked ([`TERMINATE_ANNOTATION`]); the relaying replica sees it on its watch and ends the
//! stream. No replica keeps state of its own: each watches the session Leases (one watch per
//! replica, [`SessionStore::start`]) and serves lists and watches from that copy, numbered by the
//! Leases' resourceVersions.
//!
//! Why Leases: they are the cluster's own kind for "held by a process, renewed, expires", every
//! cluster has them, and they need no volume, no database and no CRD.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use poddebug_types::{
    API_VERSION, ApiError, DebugSession, DebugSessionSpec, DebugSessionStatus, GROUP,
    KIND_DEBUG_SESSION, Participant, SessionMode,
};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::StorageError;

/// The label every session Lease carries (its value is the record's format version).
pub const SESSION_LABEL: &str = "poddebug.dev/session";
/// The annotation holding the record (JSON).
pub const RECORD_ANNOTATION: &str = "poddebug.dev/session";
/// The annotation a termination request writes (JSON: who, when).
pub const TERMINATE_ANNOTATION: &str = "poddebug.dev/terminate";
/// The resource sessions are named as in API answers.
pub const RESOURCE: &str = "sessions";

/// Changes kept for watches that resume from a resourceVersion.
const HISTORY: usize = 4096;
/// Changes buffered per running watch.
const BROADCAST: usize = 1024;

/// What the relaying replica records of one attach stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    /// The session id (the Lease's name).
    pub id: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The debug container as the client named it.
    pub container: String,
    /// The ephemeral container's own name: sessions on the same one share participants.
    pub ec_name: String,
    /// Who opened the stream.
    pub user: String,
    /// Their groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// How they take part.
    pub mode: SessionMode,
    /// The stream protocol.
    pub protocol: String,
    /// A terminal.
    #[serde(default)]
    pub tty: bool,
    /// The stream sends input.
    #[serde(default)]
    pub stdin: bool,
    /// The recording, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_id: Option<String>,
    /// The container's profile is moderated.
    #[serde(default)]
    pub moderated: bool,
    /// The relaying replica.
    pub replica: String,
    /// When the stream was opened (RFC 3339).
    pub started: String,
    /// The reason, ticket, debug request and approvers of the debug container.
    #[serde(
        default,
        skip_serializing_if = "poddebug_types::request::Justification::is_empty"
    )]
    pub justification: poddebug_types::request::Justification,
}

/// A termination request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Termination {
    /// Who asked.
    pub by: String,
    /// When (RFC 3339).
    pub at: String,
}

/// A session as the cluster holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveSession {
    /// The record.
    pub record: SessionRecord,
    /// When it was last renewed.
    pub renewed: jiff::Timestamp,
    /// How long a renewal holds.
    pub lease_duration: Duration,
    /// The termination request, once there is one.
    pub terminate: Option<Termination>,
    /// The Lease's resourceVersion.
    pub resource_version: u64,
}

impl LiveSession {
    /// Whether the record is still held at `now` (renewed within its lease duration).
    pub fn is_live(&self, now: jiff::Timestamp) -> bool {
        let Ok(span) = jiff::SignedDuration::try_from(self.lease_duration) else {
            return false;
        };
        self.renewed
            .checked_add(span)
            .is_ok_and(|until| until >= now)
    }

    /// Same debug container as `other`.
    pub fn same_container(&self, other: &LiveSession) -> bool {
        let (a, b) = (&self.record, &other.record);
        a.namespace == b.namespace && a.pod == b.pod && a.ec_name == b.ec_name
    }
}

/// One change of the sessions a replica sees.
#[derive(Clone, Debug)]
pub struct SessionEvent {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// The session in its new (or last) state.
    pub session: LiveSession,
    /// Whether its record is gone.
    pub deleted: bool,
}

/// A resourceVersion older than the changes kept.
#[derive(Debug)]
pub struct TooOld;

#[derive(Debug, Default)]
struct State {
    sessions: BTreeMap<String, LiveSession>,
    rv: u64,
    oldest: u64,
    history: VecDeque<SessionEvent>,
}

#[derive(Debug)]
struct Inner {
    api: Api<Lease>,
    lease_duration: Duration,
    state: Mutex<State>,
    tx: broadcast::Sender<SessionEvent>,
    synced: AtomicBool,
}

/// The session records of the cluster, as this replica sees them (module docs).
#[derive(Clone, Debug)]
pub struct SessionStore {
    inner: Arc<Inner>,
}

/// A value fit for a label: kept when it is one, else reduced to the allowed characters and cut
/// to 54 with 8 hex digits of its hash appended (labels are for people and selectors; the record
/// holds the real value).
pub fn label_value(s: &str) -> String {
    let valid = s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric());
    if valid {
        return s.to_owned();
    }
    use sha2::Digest;
    let hash = sha2::Sha256::digest(s.as_bytes());
    let mut kept: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(54)
        .collect();
    kept = kept
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned();
    let hex: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
    if kept.is_empty() {
        hex
    } else {
        format!("{kept}-{hex}")
    }
}

/// A new session id: `s` and 16 hex digits, a valid Lease name.
pub fn new_session_id() -> String {
    format!("s{:016x}", rand::random::<u64>())
}

fn rv_of(lease: &Lease) -> u64 {
    lease
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The session a Lease records, when it is one.
fn from_lease(lease: &Lease) -> Option<LiveSession> {
    let annotations = lease.metadata.annotations.as_ref()?;
    let record: SessionRecord = serde_json::from_str(annotations.get(RECORD_ANNOTATION)?).ok()?;
    let spec = lease.spec.as_ref()?;
    let renewed = spec
        .renew_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| spec.acquire_time.as_ref().map(|t| t.0))?;
    let lease_duration =
        Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).ok()?);
    let terminate = annotations
        .get(TERMINATE_ANNOTATION)
        .and_then(|t| serde_json::from_str(t).ok());
    Some(LiveSession {
        record,
        renewed,
        lease_duration,
        terminate,
        resource_version: rv_of(lease),
    })
}

fn to_lease(record: &SessionRecord, lease_duration: Duration, now: jiff::Timestamp) -> Lease {
    let labels = BTreeMap::from([
        (SESSION_LABEL.to_owned(), "v1".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "poddebug-apiserver".to_owned(),
        ),
        (format!("{GROUP}/namespace"), label_value(&record.namespace)),
        (format!("{GROUP}/pod"), label_value(&record.pod)),
        (format!("{GROUP}/container"), label_value(&record.container)),
        (format!("{GROUP}/user"), label_value(&record.user)),
    ]);
    let annotations = BTreeMap::from([(
        RECORD_ANNOTATION.to_owned(),
        serde_json::to_string(record).unwrap_or_default(),
    )]);
    Lease {
        metadata: ObjectMeta {
            name: Some(record.id.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(record.replica.clone()),
            lease_duration_seconds: i32::try_from(lease_duration.as_secs()).ok(),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

impl SessionStore {
    /// Start watching the session Leases of `namespace` with `client` (the server's identity).
    /// `lease_duration` is what this replica's records are held for without a renewal.
    pub fn start(client: kube::Client, namespace: &str, lease_duration: Duration) -> SessionStore {
        let (tx, _) = broadcast::channel(BROADCAST);
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let store = SessionStore {
            inner: Arc::new(Inner {
                api: api.clone(),
                lease_duration,
                state: Mutex::new(State::default()),
                tx,
                synced: AtomicBool::new(false),
            }),
        };
        let me = store.clone();
        let config = watcher::Config::default().labels(SESSION_LABEL);
        tokio::spawn(async move {
            let events = watcher(api, config).default_backoff();
            futures::pin_mut!(events);
            let mut listed: Vec<Lease> = Vec::new();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(watcher::Event::Init) => listed.clear(),
                    Ok(watcher::Event::InitApply(l)) => listed.push(l),
                    Ok(watcher::Event::InitDone) => me.resynced(std::mem::take(&mut listed)),
                    Ok(watcher::Event::Apply(l)) => me.record(&l, false),
                    Ok(watcher::Event::Delete(l)) => me.record(&l, true),
                    Err(e) => tracing::warn!(error = %e, "session watch failed; retrying"),
                }
            }
        });
        store
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, state: &mut State, event: SessionEvent) {
        state.rv = state.rv.max(event.rv);
        state.history.push_back(event.clone());
        while state.history.len() > HISTORY {
            if let Some(old) = state.history.pop_front() {
                state.oldest = state.oldest.max(old.rv);
            }
        }
        let _ = self.inner.tx.send(event);
    }

    fn record(&self, lease: &Lease, deleted: bool) {
        let rv = rv_of(lease);
        let name = lease.metadata.name.clone().unwrap_or_default();
        let mut state = self.state();
        let session = match from_lease(lease) {
            Some(s) => s,
            // Not (or no longer) a readable record: forget it.
            None => match state.sessions.remove(&name) {
                Some(old) => {
                    self.push(
                        &mut state,
                        SessionEvent {
                            rv,
                            session: old,
                            deleted: true,
                        },
                    );
                    return;
                }
                None => {
                    state.rv = state.rv.max(rv);
                    return;
                }
            },
        };
        if deleted {
            state.sessions.remove(&name);
        } else {
            state.sessions.insert(name, session.clone());
        }
        self.push(
            &mut state,
            SessionEvent {
                rv,
                session,
                deleted,
            },
        );
    }

    /// After a (re-)list: running watches get the difference, the history restarts there.
    fn resynced(&self, listed: Vec<Lease>) {
        let rv = listed.iter().map(rv_of).max().unwrap_or(0);
        let now: BTreeMap<String, LiveSession> = listed
            .iter()
            .filter_map(|l| Some((l.metadata.name.clone()?, from_lease(l)?)))
            .collect();
        let mut state = self.state();
        let gone: Vec<LiveSession> = state
            .sessions
            .iter()
            .filter(|(id, _)| !now.contains_key(*id))
            .map(|(_, s)| s.clone())
            .collect();
        let changed: Vec<LiveSession> = now
            .values()
            .filter(|s| state.sessions.get(&s.record.id) != Some(*s))
            .cloned()
            .collect();
        state.sessions = now;
        state.rv = state.rv.max(rv);
        state.oldest = state.rv;
        state.history.clear();
        for s in gone {
            let _ = self.inner.tx.send(SessionEvent {
                rv,
                session: s,
                deleted: true,
            });
        }
        for s in changed {
            let _ = self.inner.tx.send(SessionEvent {
                rv,
                session: s,
                deleted: false,
            });
        }
        drop(state);
        self.inner.synced.store(true, Ordering::Release);
    }

    /// Whether the first list completed.
    pub fn is_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }

    /// The sessions held at `now`, and the resourceVersion this view is at.
    pub fn snapshot(&self, now: jiff::Timestamp) -> (Vec<LiveSession>, u64) {
        let state = self.state();
        let live = state
            .sessions
            .values()
            .filter(|s| s.is_live(now))
            .cloned()
            .collect();
        (live, state.rv)
    }

    /// One session, when held at `now`.
    pub fn get(&self, id: &str, now: jiff::Timestamp) -> Option<LiveSession> {
        self.state()
            .sessions
            .get(id)
            .filter(|s| s.is_live(now))
            .cloned()
    }

    /// Running changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.inner.tx.subscribe()
    }

    /// The changes after `rv`, or [`TooOld`] when they are no longer kept.
    pub fn since(&self, rv: u64) -> Result<Vec<SessionEvent>, TooOld> {
        let state = self.state();
        if rv < state.oldest {
            return Err(TooOld);
        }
        Ok(state
            .history
            .iter()
            .filter(|e| e.rv > rv)
            .cloned()
            .collect())
    }

    /// Record a new session (create its Lease), held for this store's lease duration.
    pub async fn open(&self, record: &SessionRecord) -> Result<(), StorageError> {
        let lease = to_lease(record, self.inner.lease_duration, jiff::Timestamp::now());
        let created = self
            .inner
            .api
            .create(&PostParams::default(), &lease)
            .await?;
        // Known at once to this replica (its watch brings it again, unchanged).
        self.record(&created, false);
        Ok(())
    }

    /// Renew a session's record now.
    pub async fn renew(&self, id: &str) -> Result<(), StorageError> {
        let patch = serde_json::json!({"spec": {"renewTime": MicroTime(jiff::Timestamp::now())}});
        self.inner
            .api
            .patch(id, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Remove a session's record (it ended). A record already gone is fine.
    pub async fn close(&self, id: &str) {
        match self.inner.api.delete(id, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(session = id, error = %e, "the session's record could not be removed; it expires")
            }
        }
    }

    /// Ask the replica relaying session `id` to end it, as `by`. 404 when there is no such live
    /// session.
    pub async fn request_termination(
        &self,
        id: &str,
        by: &str,
        now: jiff::Timestamp,
    ) -> Result<(), StorageError> {
        let Some(live) = self.get(id, now) else {
            return Err(ApiError::not_found(RESOURCE, GROUP, id).into());
        };
        let term = Termination {
            by: by.to_owned(),
            at: now.to_string(),
        };
        let patch = serde_json::json!({
            "metadata": {
                "annotations": {TERMINATE_ANNOTATION: serde_json::to_string(&term).unwrap_or_default()},
                "resourceVersion": live.resource_version.to_string(),
            }
        });
        match self
            .inner
            .api
            .patch(id, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(l) => {
                self.record(&l, false);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                Err(ApiError::not_found(RESOURCE, GROUP, id).into())
            }
            // Renewed meanwhile: ask once more on the newest version.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let patch = serde_json::json!({"metadata": {"annotations": {
                    TERMINATE_ANNOTATION: serde_json::to_string(&term).unwrap_or_default()}}});
                self.inner
                    .api
                    .patch(id, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Delete the records no replica renewed within their lease duration (their replica died);
    /// each only if unchanged since it was seen expired. The number deleted.
    pub async fn collect_garbage(&self, now: jiff::Timestamp) -> usize {
        let expired: Vec<LiveSession> = self
            .state()
            .sessions
            .values()
            .filter(|s| !s.is_live(now))
            .cloned()
            .collect();
        let mut n = 0;
        for s in expired {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(s.resource_version.to_string()),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self.inner.api.delete(&s.record.id, &params).await {
                Ok(_) => {
                    n += 1;
                    tracing::info!(session = %s.record.id, replica = %s.record.replica,
                        "removed the record of a session whose replica stopped renewing it");
                }
                // Gone, or renewed meanwhile: nothing to do.
                Err(kube::Error::Api(st)) if st.code == 404 || st.code == 409 => {}
                Err(e) => {
                    tracing::debug!(session = %s.record.id, error = %e, "could not remove an expired session record")
                }
            }
        }
        n
    }
}

/// The labels of a session's object: `poddebug.dev/{pod,container,user,mode}`.
pub fn session_labels(r: &SessionRecord) -> BTreeMap<String, String> {
    BTreeMap::from([
        (format!("{GROUP}/pod"), label_value(&r.pod)),
        (format!("{GROUP}/container"), label_value(&r.container)),
        (format!("{GROUP}/user"), label_value(&r.user)),
        (format!("{GROUP}/mode"), r.mode.as_str().to_owned()),
    ])
}

/// Label and field selectors of a list or watch of sessions (`labelSelector`,
/// `fieldSelector`), with kube-apiserver's grammar and errors. Fields: `metadata.name`,
/// `metadata.namespace`, `spec.pod`, `spec.container`, `spec.user`, `spec.mode`,
/// `status.replica`.
#[derive(Clone, Debug, Default)]
pub struct SessionSelector {
    labels: crate::selector::LabelSelector,
    fields: Vec<(String, String, bool)>,
}

const SESSION_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.pod",
    "spec.container",
    "spec.user",
    "spec.mode",
    "status.replica",
];

fn session_field(r: &SessionRecord, field: &str) -> Option<String> {
    Some(match field {
        "metadata.name" => r.id.clone(),
        "metadata.namespace" => r.namespace.clone(),
        "spec.pod" => r.pod.clone(),
        "spec.container" => r.container.clone(),
        "spec.user" => r.user.clone(),
        "spec.mode" => r.mode.as_str().to_owned(),
        "status.replica" => r.replica.clone(),
        _ => return None,
    })
}

impl SessionSelector {
    /// Parse both selectors (empty: everything); malformed or an unsupported field is a 400.
    pub fn parse(labels: &str, fields: &str) -> Result<SessionSelector, poddebug_types::ApiError> {
        let mut terms = Vec::new();
        for term in fields.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, v, true)
            } else {
                return Err(poddebug_types::ApiError::BadRequest(format!(
                    "invalid selector: '{fields}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !SESSION_FIELDS.contains(&field) {
                return Err(poddebug_types::ApiError::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), value.trim().to_owned(), equal));
        }
        Ok(SessionSelector {
            labels: crate::selector::LabelSelector::parse(labels)?,
            fields: terms,
        })
    }

    /// Whether session `s` is selected.
    pub fn matches(&self, s: &LiveSession) -> bool {
        let r = &s.record;
        self.fields.iter().all(|(field, want, equal)| {
            (session_field(r, field).as_deref() == Some(want.as_str())) == *equal
        }) && self.labels.matches(Some(&session_labels(r)))
    }
}

/// The API object of `session`, with its participants among `all` (the live sessions of the
/// same debug container, its own user first, then by when they joined).
pub fn object_of(session: &LiveSession, all: &[LiveSession]) -> DebugSession {
    let r = &session.record;
    let started: Option<jiff::Timestamp> = r.started.parse().ok();
    let mut peers: Vec<&LiveSession> = all
        .iter()
        .filter(|o| o.same_container(session) && o.record.id != r.id)
        .collect();
    peers.sort_by(|a, b| a.record.started.cmp(&b.record.started));
    let participant = |s: &LiveSession| Participant {
        user: s.record.user.clone(),
        mode: s.record.mode,
        joined_at: Time(
            s.record
                .started
                .parse()
                .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        ),
        session: s.record.id.clone(),
    };
    let participants: Vec<Participant> = std::iter::once(participant(session))
        .chain(peers.iter().map(|s| participant(s)))
        .collect();
    let moderator_present = participants
        .iter()
        .any(|p| p.mode == SessionMode::Moderator);
    let labels = session_labels(r);
    DebugSession {
        api_version: API_VERSION.to_owned(),
        kind: KIND_DEBUG_SESSION.to_owned(),
        metadata: ObjectMeta {
            name: Some(r.id.clone()),
            namespace: Some(r.namespace.clone()),
            creation_timestamp: started.map(Time),
            resource_version: Some(session.resource_version.to_string()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: DebugSessionSpec {
            pod: r.pod.clone(),
            container: r.container.clone(),
            user: r.user.clone(),
            groups: r.groups.clone(),
            mode: r.mode,
            protocol: r.protocol.clone(),
            tty: r.tty,
            stdin: r.stdin,
            justification: Some(r.justification.clone()).filter(|j| !j.is_empty()),
        },
        status: Some(DebugSessionStatus {
            replica: r.replica.clone(),
            participants,
            recording_id: r.recording_id.clone(),
            moderated: r.moderated,
            waiting_for_moderator: r.moderated && !moderator_present,
            renew_time: Some(Time(session.renewed)),
            terminated_by: session.terminate.as_ref().map(|t| t.by.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, user: &str, mode: SessionMode, started: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            namespace: "shop".into(),
            pod: "web".into(),
            container: "dbg".into(),
            ec_name: "dbg".into(),
            user: user.into(),
            groups: vec!["devs".into()],
            mode,
            protocol: "websocket/v5.channel.k8s.io".into(),
            tty: true,
            stdin: true,
            recording_id: None,
            moderated: true,
            replica: "r1".into(),
            started: started.into(),
            justification: Default::default(),
        }
    }

    fn live(r: SessionRecord) -> LiveSession {
        LiveSession {
            record: r,
            renewed: "2026-01-01T00:00:10Z".parse().unwrap(),
            lease_duration: Duration::from_secs(15),
            terminate: None,
            resource_version: 7,
        }
    }

    #[test]
    fn a_lease_round_trips_and_expires_after_its_duration() {
        let r = record(
            "s1",
            "system:serviceaccount:ns:bot",
            SessionMode::Owner,
            "2026-01-01T00:00:00Z",
        );
        let now: jiff::Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let mut lease = to_lease(&r, Duration::from_secs(15), now);
        lease.metadata.resource_version = Some("42".into());
        let back = from_lease(&lease).unwrap();
        assert_eq!(back.record, r);
        assert_eq!(back.resource_version, 42);
        assert!(back.is_live("2026-01-01T00:00:25Z".parse().unwrap()));
        assert!(!back.is_live("2026-01-01T00:00:26Z".parse().unwrap()));
        let labels = lease.metadata.labels.unwrap();
        assert_eq!(labels[SESSION_LABEL], "v1");
        assert!(labels["poddebug.dev/user"].starts_with("system_serviceaccount_ns_bot-"));
    }

    #[test]
    fn label_values_are_kept_or_made_valid() {
        assert_eq!(label_value("alice"), "alice");
        assert_eq!(label_value(""), "");
        let long = "a".repeat(100);
        let v = label_value(&long);
        assert!(v.len() <= 63 && v.starts_with("aaaa"), "{v}");
        let odd = label_value("alice@example.com");
        assert!(odd.starts_with("alice_example.com-"), "{odd}");
        assert_ne!(
            label_value("a@b"),
            label_value("a#b"),
            "distinct values stay distinct"
        );
    }

    #[test]
    fn participants_are_the_sessions_on_the_same_container_and_a_moderator_opens_the_gate() {
        let owner = live(record(
            "s1",
            "alice",
            SessionMode::Owner,
            "2026-01-01T00:00:01Z",
        ));
        let observer = live(record(
            "s2",
            "bob",
            SessionMode::Observer,
            "2026-01-01T00:00:03Z",
        ));
        let mut elsewhere = live(record(
            "s3",
            "carol",
            SessionMode::Moderator,
            "2026-01-01T00:00:02Z",
        ));
        elsewhere.record.ec_name = "other".into();
        let all = vec![owner.clone(), observer.clone(), elsewhere.clone()];
        let o = object_of(&owner, &all);
        assert_eq!(o.metadata.name.as_deref(), Some("s1"));
        assert_eq!(o.metadata.namespace.as_deref(), Some("shop"));
        let st = o.status.unwrap();
        let who: Vec<(&str, SessionMode)> = st
            .participants
            .iter()
            .map(|p| (p.user.as_str(), p.mode))
            .collect();
        assert_eq!(
            who,
            [
                ("alice", SessionMode::Owner),
                ("bob", SessionMode::Observer)
            ]
        );
        assert!(st.moderated && st.waiting_for_moderator);
        let mut moderator = elsewhere;
        moderator.record.ec_name = "dbg".into();
        let all = vec![owner.clone(), observer, moderator];
        let st = object_of(&owner, &all).status.unwrap();
        assert_eq!(st.participants.len(), 3);
        assert!(!st.waiting_for_moderator);
    }
}
