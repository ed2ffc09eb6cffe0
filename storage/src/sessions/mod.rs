//! Live sessions, kept in the cluster so that every replica answers for all of them.
//!
//! The replica relaying an attach stream records it as a `coordination.k8s.io/v1` Lease in the
//! server's own namespace ([`SessionStore::open`]): named by the session id, labelled
//! [`SESSION_LABEL`] (and with the pod's namespace, the pod, the container and the user, for
//! people reading the Leases), the record itself in the annotation [`RECORD_ANNOTATION`] with
//! its MAC ([`lease`] says what it covers), `holderIdentity` the replica, renewed (and signed
//! again) every third of `leaseDurationSeconds` while the stream lives
//! ([`SessionStore::renew`]) and deleted when it ends ([`SessionStore::close`]). A record whose
//! `renewTime` is older than its lease duration belongs to a replica that died: it is no longer
//! listed, and any replica deletes it ([`SessionStore::collect_garbage`]).
//!
//! Terminating a session ([`SessionStore::request_termination`]) annotates its Lease with who
//! asked ([`TERMINATE_ANNOTATION`], with its own MAC); the relaying replica sees it on its watch
//! and ends the stream. No replica keeps state of its own: each watches the session Leases (one
//! watch per replica, [`SessionStore::start`]) and serves lists and watches from that copy,
//! numbered by the Leases' resourceVersions.
//!
//! Only records whose MAC verifies are believed: anyone else's Lease with the session label (or
//! a record changed by anyone else) is not listed, opens no moderation gate, ends no session and
//! counts toward no limit; it is counted in `poddebug_untrusted_records_total` and logged once
//! per version ([`crate::UntrustedRecords`]).
//!
//! The copy is kept for work proportional to each change: sessions are shared (`Arc`), indexed
//! by debug container and by user, so a renewal (the most frequent change) updates one entry,
//! and readers take the sessions they need (a list its scope, a moderation gate one container,
//! a limit one user) under a read lock held only to copy pointers.
//!
//! Why Leases: they are the cluster's own kind for "held by a process, renewed, expires", every
//! cluster has them, and they need no volume, no database and no CRD.

mod admission;
mod lease;
mod moderation;
mod objects;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use poddebug_types::{ApiError, GROUP};
use tokio::sync::broadcast;

use crate::change_log::{ChangeLog, Numbered};

use crate::StorageError;
use crate::record_key::{RecordKey, SharedRecordKey};
use crate::untrusted::{RecordKind, UntrustedRecords};
pub use admission::{AdmissionTicket, OverLimit};
pub use lease::{
    ContainerKey, LiveSession, MAC_ANNOTATION, RECORD_ANNOTATION, SESSION_LABEL, SessionRecord,
    TERMINATE_ANNOTATION, TERMINATE_MAC_ANNOTATION, Termination,
};
use lease::{Read, Signed};
pub use moderation::second_pair_of_eyes;
pub use objects::{SessionSelector, object_of};

/// The resource sessions are named as in API answers.
pub const RESOURCE: &str = "sessions";

/// Changes buffered per running watch.
const BROADCAST: usize = 1024;
/// How often the watch looks again for the record key while it is not loaded yet.
const KEY_POLL: Duration = Duration::from_millis(100);

/// One change of the sessions a replica sees.
#[derive(Clone, Debug)]
pub struct SessionEvent {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// The session in its new (or last) state.
    pub session: Arc<LiveSession>,
    /// Whether its record is gone (or no longer believed).
    pub deleted: bool,
}

impl Numbered for SessionEvent {
    fn rv(&self) -> u64 {
        self.rv
    }
}

pub use crate::change_log::HistoryTooOld as TooOld;

/// The replica's copy of the trusted records, indexed.
#[derive(Debug, Default)]
struct State {
    sessions: HashMap<String, Arc<LiveSession>>,
    /// The ids of the sessions on each debug container.
    containers: BTreeMap<ContainerKey, BTreeSet<String>>,
    /// The ids of each user's sessions.
    users: HashMap<String, BTreeSet<String>>,
    /// Records created by a replica and not confirmed yet: relied on by nobody, deleted once
    /// expired (their replica died before confirming them).
    unconfirmed: HashMap<String, Arc<LiveSession>>,
    log: ChangeLog<SessionEvent>,
}

impl State {
    fn insert(&mut self, s: Arc<LiveSession>) {
        let id = s.record.id.clone();
        if let Some(old) = self.sessions.get(&id)
            && (old.record.user != s.record.user || old.container() != s.container())
        {
            self.remove(&id);
        }
        self.containers
            .entry(s.container())
            .or_default()
            .insert(id.clone());
        self.users
            .entry(s.record.user.clone())
            .or_default()
            .insert(id.clone());
        self.sessions.insert(id, s);
    }

    fn remove(&mut self, id: &str) -> Option<Arc<LiveSession>> {
        let old = self.sessions.remove(id)?;
        let key = old.container();
        if let Some(ids) = self.containers.get_mut(&key) {
            ids.remove(id);
            if ids.is_empty() {
                self.containers.remove(&key);
            }
        }
        if let Some(ids) = self.users.get_mut(&old.record.user) {
            ids.remove(id);
            if ids.is_empty() {
                self.users.remove(&old.record.user);
            }
        }
        Some(old)
    }

    /// The live sessions of the containers in `range` order, each container's together.
    fn live_in<'a>(
        &'a self,
        keys: impl Iterator<Item = (&'a ContainerKey, &'a BTreeSet<String>)>,
        now: jiff::Timestamp,
    ) -> Vec<Arc<LiveSession>> {
        keys.flat_map(|(_, ids)| ids.iter())
            .filter_map(|id| self.sessions.get(id))
            .filter(|s| s.is_live(now))
            .cloned()
            .collect()
    }
}

/// What a Lease turned out to be, for the copy.
enum Verified {
    Session(LiveSession),
    Unconfirmed(LiveSession),
    Nothing,
}

/// What this replica writes again at each renewal of a session it relays.
#[derive(Clone, Debug)]
struct Own {
    record_json: String,
    uid: String,
    holder: String,
}

#[derive(Debug)]
struct Inner {
    api: Api<Lease>,
    namespace: String,
    lease_duration: Duration,
    key: SharedRecordKey,
    untrusted: UntrustedRecords,
    state: RwLock<State>,
    own: Mutex<HashMap<String, Own>>,
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

/// The record key, or the 503 a replica without it answers (it is not ready either).
fn loaded(key: &SharedRecordKey) -> Result<&RecordKey, StorageError> {
    key.get().ok_or_else(|| {
        ApiError::ServiceUnavailable(
            "this replica has not loaded its record key yet; retry".to_owned(),
        )
        .into()
    })
}

impl SessionStore {
    /// Start watching the session Leases of `namespace` with `client` (the server's identity),
    /// once `key` is loaded (records are verified with it). `lease_duration` is what this
    /// replica's records are held for without a renewal; records that do not verify are
    /// counted in `untrusted`.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        lease_duration: Duration,
        key: SharedRecordKey,
        untrusted: UntrustedRecords,
    ) -> SessionStore {
        let store = SessionStore::new(client, namespace, lease_duration, key, untrusted);
        let (me, api) = (store.clone(), store.inner.api.clone());
        let config = watcher::Config::default().labels(SESSION_LABEL);
        tokio::spawn(async move {
            // Nothing can be verified before the key is there.
            while me.inner.key.get().is_none() {
                tokio::time::sleep(KEY_POLL).await;
            }
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

    fn new(
        client: kube::Client,
        namespace: &str,
        lease_duration: Duration,
        key: SharedRecordKey,
        untrusted: UntrustedRecords,
    ) -> SessionStore {
        let (tx, _) = broadcast::channel(BROADCAST);
        SessionStore {
            inner: Arc::new(Inner {
                api: Api::namespaced(client, namespace),
                namespace: namespace.to_owned(),
                lease_duration,
                key,
                untrusted,
                state: RwLock::new(State::default()),
                own: Mutex::new(HashMap::new()),
                tx,
                synced: AtomicBool::new(false),
            }),
        }
    }

    fn read_state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.inner
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.inner
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn own(&self) -> std::sync::MutexGuard<'_, HashMap<String, Own>> {
        self.inner
            .own
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, state: &mut State, event: SessionEvent) {
        state.log.push(event.clone());
        let _ = self.inner.tx.send(event);
    }

    /// What a Lease is: a trusted session, an unconfirmed one of poddebug's, or nothing to
    /// rely on. Untrusted versions (and untrusted termination requests) are counted and logged
    /// once each.
    fn verify(&self, lease: &Lease) -> Verified {
        let Some(key) = self.inner.key.get() else {
            return Verified::Nothing;
        };
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let version = lease
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default();
        match lease::read(lease, key) {
            Read::Trusted(s, bad_termination) => {
                if let Some(why) = bad_termination {
                    self.inner
                        .untrusted
                        .note(RecordKind::Termination, name, version, why);
                }
                Verified::Session(*s)
            }
            Read::Unconfirmed(s) => Verified::Unconfirmed(*s),
            Read::Untrusted(why) => {
                self.inner
                    .untrusted
                    .note(RecordKind::Session, name, version, why);
                Verified::Nothing
            }
        }
    }

    fn record(&self, lease: &Lease, deleted: bool) {
        self.apply(lease, deleted, false);
    }

    /// A change of a Lease: `deleted`, or its new version; with `only_known`, only if the
    /// session is known (an answer to this replica's own write, which must not bring back a
    /// session whose deletion is already known).
    fn apply(&self, lease: &Lease, deleted: bool, only_known: bool) {
        let rv = rv_of(lease);
        let name = lease.metadata.name.clone().unwrap_or_default();
        // A deleted record is gone whatever it said; any other is believed only if it verifies.
        let verified = if deleted {
            Verified::Nothing
        } else {
            self.verify(lease)
        };
        let mut state = self.write_state();
        if only_known && !state.sessions.contains_key(&name) {
            return;
        }
        // A version no newer than the one already known says nothing new, whatever it holds:
        // the watch's event for the created Lease (not yet signed with its uid, so not
        // believed) arriving after this replica's own renewal must not make the session leave
        // and join again (false markers in its recording). A deletion is final.
        if !deleted
            && state
                .sessions
                .get(&name)
                .is_some_and(|old| old.resource_version >= rv)
        {
            return;
        }
        state.unconfirmed.remove(&name);
        let session = match verified {
            Verified::Session(s) => Some(s),
            Verified::Unconfirmed(s) => {
                state.unconfirmed.insert(name.clone(), Arc::new(s));
                None
            }
            Verified::Nothing => None,
        };
        match session {
            Some(s) => {
                if state
                    .sessions
                    .get(&name)
                    .is_some_and(|old| old.resource_version >= s.resource_version)
                {
                    // A version no newer than the one already known (this replica's own write
                    // came first): nothing new.
                    return;
                }
                let s = Arc::new(s);
                state.insert(s.clone());
                self.push(
                    &mut state,
                    SessionEvent {
                        rv,
                        session: s,
                        deleted: false,
                    },
                );
            }
            // Gone, or no longer a record to believe: forget it.
            None => match state.remove(&name) {
                Some(old) => self.push(
                    &mut state,
                    SessionEvent {
                        rv,
                        session: old,
                        deleted: true,
                    },
                ),
                None => state.log.saw(rv),
            },
        }
    }

    /// After a (re-)list: running watches get the difference, the history restarts there.
    fn resynced(&self, listed: Vec<Lease>) {
        let rv = listed.iter().map(rv_of).max().unwrap_or(0);
        let mut now: HashMap<String, Arc<LiveSession>> = HashMap::new();
        let mut unconfirmed: HashMap<String, Arc<LiveSession>> = HashMap::new();
        for l in &listed {
            match self.verify(l) {
                Verified::Session(s) => {
                    now.insert(s.record.id.clone(), Arc::new(s));
                }
                Verified::Unconfirmed(s) => {
                    unconfirmed.insert(s.record.id.clone(), Arc::new(s));
                }
                Verified::Nothing => {}
            }
        }
        let mut state = self.write_state();
        let gone: Vec<Arc<LiveSession>> = state
            .sessions
            .iter()
            .filter(|(id, _)| !now.contains_key(*id))
            .map(|(_, s)| s.clone())
            .collect();
        let changed: Vec<Arc<LiveSession>> = now
            .values()
            .filter(|s| state.sessions.get(&s.record.id) != Some(*s))
            .cloned()
            .collect();
        let mut fresh = State {
            log: std::mem::take(&mut state.log),
            unconfirmed,
            ..State::default()
        };
        fresh.log.restart(rv);
        for s in now.into_values() {
            fresh.insert(s);
        }
        *state = fresh;
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

    /// The sessions held at `now`, each debug container's together, and the resourceVersion
    /// this view is at.
    pub fn snapshot(&self, now: jiff::Timestamp) -> (Vec<Arc<LiveSession>>, u64) {
        let state = self.read_state();
        (state.live_in(state.containers.iter(), now), state.log.rv())
    }

    /// The sessions held at `now` in `namespace` (all: None) and, within it, on `pod` (all:
    /// None), each debug container's together; and the resourceVersion of this view.
    pub fn scoped(
        &self,
        namespace: Option<&str>,
        pod: Option<&str>,
        now: jiff::Timestamp,
    ) -> (Vec<Arc<LiveSession>>, u64) {
        let Some(ns) = namespace else {
            return self.snapshot(now);
        };
        let state = self.read_state();
        let from = ContainerKey {
            namespace: ns.to_owned(),
            pod: pod.unwrap_or_default().to_owned(),
            ec_name: String::new(),
        };
        let keys = state
            .containers
            .range(from..)
            .take_while(|(k, _)| k.namespace == ns && pod.is_none_or(|p| k.pod == p));
        (state.live_in(keys, now), state.log.rv())
    }

    /// The sessions held at `now` on debug container `key`.
    pub fn on_container(&self, key: &ContainerKey, now: jiff::Timestamp) -> Vec<Arc<LiveSession>> {
        let state = self.read_state();
        let ids = state.containers.get_key_value(key);
        state.live_in(ids.into_iter(), now)
    }

    /// How many sessions `user` holds at `now`, through every replica.
    pub fn count_of_user(&self, user: &str, now: jiff::Timestamp) -> usize {
        let state = self.read_state();
        state.users.get(user).map_or(0, |ids| {
            ids.iter()
                .filter_map(|id| state.sessions.get(id))
                .filter(|s| s.is_live(now))
                .count()
        })
    }

    /// One session, when held at `now`.
    pub fn get(&self, id: &str, now: jiff::Timestamp) -> Option<Arc<LiveSession>> {
        self.read_state()
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
        self.read_state().log.since(rv)
    }

    /// Record a new session (create its Lease, then confirm it with a first renewal that binds
    /// its MAC to the Lease's uid), held for this store's lease duration. Known to this
    /// replica at once.
    pub async fn open(&self, record: &SessionRecord) -> Result<(), StorageError> {
        let key = loaded(&self.inner.key)?;
        let record_json = serde_json::to_string(record)
            .map_err(|e| ApiError::Internal(format!("a session record: {e}")))?;
        let lease = lease::new_lease(
            key,
            &self.inner.namespace,
            record,
            &record_json,
            self.inner.lease_duration,
            jiff::Timestamp::now(),
        );
        let created = self
            .inner
            .api
            .create(&PostParams::default(), &lease)
            .await?;
        self.own().insert(
            record.id.clone(),
            Own {
                record_json,
                uid: created.metadata.uid.clone().unwrap_or_default(),
                holder: record.replica.clone(),
            },
        );
        if let Err(e) = self.renew(&record.id).await {
            self.close(&record.id).await;
            return Err(e);
        }
        Ok(())
    }

    /// Renew a session's record now (one this replica opened), signed again.
    pub async fn renew(&self, id: &str) -> Result<(), StorageError> {
        let key = loaded(&self.inner.key)?;
        let Some(own) = self.own().get(id).cloned() else {
            return Err(ApiError::not_found(RESOURCE, GROUP, id).into());
        };
        let signed = Signed {
            namespace: &self.inner.namespace,
            name: id,
            uid: &own.uid,
            holder: &own.holder,
            duration_seconds: i64::try_from(self.inner.lease_duration.as_secs())
                .unwrap_or(i64::MAX),
            renewed: lease::to_micros(jiff::Timestamp::now()),
            record: &own.record_json,
        };
        let patch = lease::renewal(key, &signed);
        let renewed = self
            .inner
            .api
            .patch(id, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        // Known here at once, unless the session ended meanwhile: its deletion may already be
        // known, and this older answer must not bring it back.
        let own = self.own();
        if own.contains_key(id) {
            self.record(&renewed, false);
        }
        drop(own);
        Ok(())
    }

    /// Remove a session's record (it ended). A record already gone is fine.
    pub async fn close(&self, id: &str) {
        self.own().remove(id);
        match self.inner.api.delete(id, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(session = id, error = %e, "the session's record could not be removed; it expires")
            }
        }
    }

    /// Ask the replica relaying session `id` to end it, as `by` (signed, so that the relaying
    /// replica believes it). 404 when there is no such live session.
    pub async fn request_termination(
        &self,
        id: &str,
        by: &str,
        now: jiff::Timestamp,
    ) -> Result<(), StorageError> {
        let key = loaded(&self.inner.key)?;
        let Some(live) = self.get(id, now) else {
            return Err(ApiError::not_found(RESOURCE, GROUP, id).into());
        };
        let term = serde_json::to_string(&Termination {
            by: by.to_owned(),
            at: now.to_string(),
        })
        .unwrap_or_default();
        let mac = lease::termination_mac(key, &self.inner.namespace, id, &live.uid, &term);
        let annotations = serde_json::json!({
            TERMINATE_ANNOTATION: term,
            TERMINATE_MAC_ANNOTATION: mac,
        });
        let patch = serde_json::json!({
            "metadata": {
                "annotations": annotations,
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
                // Known here at once, unless the session is already gone.
                self.apply(&l, false, true);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                Err(ApiError::not_found(RESOURCE, GROUP, id).into())
            }
            // Renewed meanwhile: ask once more on the newest version (the same Lease, so the
            // same uid and MAC; a Lease made anew would not verify it).
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let patch = serde_json::json!({"metadata": {"annotations": annotations}});
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
    /// each only if unchanged since it was seen expired. The number deleted. Leases that are
    /// not poddebug's records are never deleted.
    pub async fn collect_garbage(&self, now: jiff::Timestamp) -> usize {
        let expired: Vec<Arc<LiveSession>> = {
            let state = self.read_state();
            state
                .sessions
                .values()
                .chain(state.unconfirmed.values())
                .filter(|s| !s.is_live(now))
                .cloned()
                .collect()
        };
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

#[cfg(test)]
mod tests {
    use super::*;

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

    fn record(id: &str, user: &str, pod: &str, mode: poddebug_types::SessionMode) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            namespace: "shop".into(),
            pod: pod.into(),
            container: "dbg".into(),
            ec_name: "dbg".into(),
            user: user.into(),
            creator: None,
            groups: vec![],
            mode,
            protocol: "websocket/v5.channel.k8s.io".into(),
            tty: true,
            stdin: false,
            recording_id: None,
            moderated: true,
            replica: "r1".into(),
            started: "2026-01-01T00:00:00Z".into(),
            justification: Default::default(),
        }
    }

    #[tokio::test]
    async fn the_copy_is_indexed_by_container_and_user_and_believes_only_what_verifies() {
        use poddebug_types::SessionMode::{Moderator, Owner};
        let kube = crate::testkube::FakeKube::default();
        let key = RecordKey::generate();
        let untrusted = UntrustedRecords::default();
        let store = SessionStore::new(
            kube.client(),
            "poddebug-system",
            Duration::from_secs(15),
            SharedRecordKey::loaded(key.clone()),
            untrusted.clone(),
        );
        let mut rx = store.subscribe();
        let now = jiff::Timestamp::now();
        let lease = |r: &SessionRecord, rv: u64| lease::confirmed_lease(&key, r, now, "u", rv);
        let s1 = record("s1", "alice", "web", Owner);
        let s2 = record("s2", "bob", "web", Moderator);
        let s3 = record("s3", "alice", "db", Owner);
        store.resynced(vec![lease(&s1, 1), lease(&s2, 2)]);
        store.record(&lease(&s3, 3), false);
        let ids = |v: Vec<Arc<LiveSession>>| -> Vec<String> {
            v.iter().map(|s| s.record.id.clone()).collect()
        };
        // Each debug container's sessions together; scoped reads take only their range.
        assert_eq!(ids(store.snapshot(now).0), ["s3", "s1", "s2"]);
        assert_eq!(store.snapshot(now).1, 3);
        assert_eq!(
            ids(store.scoped(Some("shop"), Some("web"), now).0),
            ["s1", "s2"]
        );
        assert_eq!(
            ids(store.scoped(Some("shop"), Some("we"), now).0),
            Vec::<String>::new()
        );
        assert!(store.scoped(Some("other"), None, now).0.is_empty());
        let web = ContainerKey::of(&s1);
        assert_eq!(ids(store.on_container(&web, now)), ["s1", "s2"]);
        assert_eq!(store.count_of_user("alice", now), 2);
        assert_eq!(store.count_of_user("bob", now), 1);
        // Expired records are held but not live.
        let later = now
            .checked_add(jiff::SignedDuration::from_secs(16))
            .unwrap();
        assert_eq!(store.count_of_user("alice", later), 0);
        // A renewal replaces one entry (one event); an older version changes nothing.
        while rx.try_recv().is_ok() {}
        store.record(&lease(&s1, 4), false);
        store.record(&lease(&s1, 2), false);
        assert_eq!(rx.try_recv().map(|e| e.rv).ok(), Some(4));
        assert!(rx.try_recv().is_err());
        // The watch's event for the Lease as created (its MAC not yet bound to the uid: not
        // believed) arriving after the renewal that confirmed it: nothing new either, and above
        // all no departure (it made a recording say the participant left and joined again).
        let json = serde_json::to_string(&s1).unwrap();
        let mut created = lease::new_lease(
            &key,
            "poddebug-system",
            &s1,
            &json,
            Duration::from_secs(15),
            now,
        );
        created.metadata.uid = Some("u".into());
        created.metadata.resource_version = Some("3".into());
        store.record(&created, false);
        assert!(rx.try_recv().is_err(), "no event");
        assert_eq!(store.get("s1", now).map(|s| s.resource_version), Some(4));
        // A forged moderator (no MAC) is neither listed nor counted, and counted once per
        // version as untrusted.
        let mut forged = lease(&record("s9", "mallory", "web", Moderator), 5);
        forged
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(MAC_ANNOTATION);
        store.record(&forged, false);
        store.record(&forged, false);
        store.resynced(vec![
            lease(&s1, 4),
            lease(&s2, 2),
            lease(&s3, 3),
            forged.clone(),
        ]);
        assert_eq!(ids(store.on_container(&web, now)), ["s1", "s2"]);
        assert_eq!(store.count_of_user("mallory", now), 0);
        assert_eq!(untrusted.get(RecordKind::Session), 1);
        // A trusted record changed by someone else is no longer believed: gone, as deleted.
        let mut tampered = lease(&s2, 6);
        tampered.spec.as_mut().unwrap().lease_duration_seconds = Some(3600);
        while rx.try_recv().is_ok() {}
        store.record(&tampered, false);
        let ev = rx.try_recv().expect("an event");
        assert!(ev.deleted && ev.session.record.id == "s2");
        assert_eq!(ids(store.on_container(&web, now)), ["s1"]);
        assert_eq!(untrusted.get(RecordKind::Session), 2);
        // A record as created, before its replica confirms it: relied on by nobody, not
        // counted as untrusted either (it is poddebug's), kept only to be swept once expired.
        let r8 = record("s8", "alice", "web", Moderator);
        let json = serde_json::to_string(&r8).unwrap();
        let mut created = lease::new_lease(
            &key,
            "poddebug-system",
            &r8,
            &json,
            Duration::from_secs(15),
            now,
        );
        created.metadata.uid = Some("u8".into());
        created.metadata.resource_version = Some("8".into());
        store.record(&created, false);
        assert_eq!(ids(store.on_container(&web, now)), ["s1"]);
        assert_eq!(store.count_of_user("alice", now), 2);
        assert_eq!(untrusted.get(RecordKind::Session), 2);
        assert!(store.read_state().unconfirmed.contains_key("s8"));
        // A deletion.
        store.record(&lease(&s1, 7), true);
        assert!(store.on_container(&web, now).is_empty());
        assert!(store.get("s1", now).is_none());
        assert_eq!(ids(store.snapshot(now).0), ["s3"]);
    }
}
