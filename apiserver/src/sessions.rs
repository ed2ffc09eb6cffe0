//! The live sessions this replica relays, and what it does for them on the cluster's behalf.
//!
//! Every attach stream is a session ([`Sessions::open`]): recorded in the cluster as a Lease
//! ([`poddebug_storage::SessionStore`]) so that any replica lists, watches and terminates it,
//! renewed every third of `--session-lease-duration` while the stream lives, removed when it
//! ends. One task per replica follows the session records of the whole cluster and, for the
//! sessions relayed here:
//! - ends a session whose record carries a termination request (the client gets a `Forbidden`
//!   Status "session terminated by USER" on its error channel), whichever replica was asked;
//! - opens and closes the gate of a moderated session as moderators attach to and leave its
//!   debug container, through any replica — a moderator who is someone other than the
//!   container's creator and the users typing into it ([`second_pair_of_eyes`]);
//! - marks in a session's recording who joined and left the same debug container.
//!
//! A record that nobody renews (its replica died) stops being listed after its lease duration,
//! and the next sweep of any replica deletes it.
//!
//! A change to one record is work for the sessions on the same debug container only: the
//! sessions relayed here are indexed by debug container, and each is brought up to date from
//! the records of its container ([`poddebug_storage::SessionStore::on_container`]).
//!
//! Limits ([`admit`], before the upstream attach): a user holds at most
//! `--max-sessions-per-user` sessions at once, across every replica. First a cheap look at this
//! replica's copy of the records plus the attaches it is admitting; then the attach takes its
//! place in the cluster's queue of the user's sessions and admissions (an admission Lease, and
//! one consistent list: `poddebug_storage` sessions' admission), so that replicas admitting one
//! user at the same instant never together pass the limit. Over the limit: 429
//! TooManyRequests with `Retry-After`. With recording in strict mode, a user whose recordings
//! fill their quota in the store is refused too (403, [`poddebug_recording::Recorder::admit`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use poddebug_storage::{
    ContainerKey, LiveSession, SessionRecord, SessionStore, StorageError, second_pair_of_eyes,
};
use poddebug_types::{ApiError, Profile, SessionMode};

use poddebug_stream::websocket::frame::CLOSE_POLICY_VIOLATION;
use poddebug_stream::{EndSignal, Ending, Gate};

use crate::error::Error;
use crate::state::AppState;
use poddebug_recording::Marker;

/// A session relayed here.
struct Local {
    record: SessionRecord,
    end: EndSignal,
    gate: Option<Arc<Gate>>,
    marker: Option<Marker>,
    /// The other sessions on the same debug container already marked as joined, and their
    /// users.
    announced: BTreeMap<String, String>,
}

/// The sessions relayed here, by id and by debug container.
#[derive(Default)]
struct Locals {
    by_id: HashMap<String, Local>,
    by_container: HashMap<ContainerKey, BTreeSet<String>>,
}

impl Locals {
    fn insert(&mut self, local: Local) {
        let id = local.record.id.clone();
        self.by_container
            .entry(ContainerKey::of(&local.record))
            .or_default()
            .insert(id.clone());
        self.by_id.insert(id, local);
    }

    fn remove(&mut self, id: &str) {
        let Some(l) = self.by_id.remove(id) else {
            return;
        };
        let key = ContainerKey::of(&l.record);
        if let Some(ids) = self.by_container.get_mut(&key) {
            ids.remove(id);
            if ids.is_empty() {
                self.by_container.remove(&key);
            }
        }
    }
}

/// How long an admission waits for a replica that just started to know the sessions.
pub const SYNC_WAIT: Duration = Duration::from_secs(5);
/// What `Retry-After` says to a user over `--max-sessions-per-user`.
const LIMIT_RETRY_AFTER: i32 = 5;
/// Local sessions renewed at once.
const RENEWALS_AT_ONCE: usize = 8;
/// Every how many renewal rounds the admission Leases dead replicas left are swept.
const ADMISSION_SWEEP_EVERY: u64 = 24;

/// The sessions of this replica (module docs).
pub struct Sessions {
    store: SessionStore,
    replica: String,
    moderated_profiles: Vec<Profile>,
    renew_every: Duration,
    max_per_user: usize,
    local: Mutex<Locals>,
    /// Per user, the attaches admitted here whose session has no record yet.
    pending: Mutex<HashMap<String, usize>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

/// The ending of a session someone terminated.
pub fn terminated(by: &str) -> Ending {
    Ending {
        error: ApiError::ForbiddenMessage(format!("session terminated by {by}")),
        close_code: CLOSE_POLICY_VIOLATION,
        label: "terminated",
    }
}

/// Joined/left markers of a recording.
fn mode_words(mode: SessionMode) -> &'static str {
    match mode {
        SessionMode::Owner => "as the owner",
        SessionMode::Peer => "as a peer",
        SessionMode::Observer => "as an observer",
        SessionMode::Moderator => "as a moderator",
    }
}

impl Sessions {
    /// The sessions of replica `replica`, kept in `store`; sessions on debug containers made
    /// with one of `moderated_profiles` are moderated; a user holds at most `max_per_user`
    /// sessions (0: no limit).
    pub fn new(
        store: SessionStore,
        replica: String,
        moderated_profiles: Vec<Profile>,
        lease_duration: Duration,
        max_per_user: usize,
    ) -> Arc<Sessions> {
        Arc::new(Sessions {
            store,
            replica,
            moderated_profiles,
            renew_every: (lease_duration / 3).max(Duration::from_millis(500)),
            max_per_user,
            local: Mutex::new(Locals::default()),
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// The store (lists, watches, terminations).
    pub fn store(&self) -> &SessionStore {
        &self.store
    }

    /// This replica's identity, as records name it.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Whether a session on a debug container with these profiles is moderated.
    pub fn is_moderated(&self, profiles: &[poddebug_types::privilege::Elevation]) -> bool {
        profiles
            .iter()
            .any(|e| self.moderated_profiles.contains(&e.profile))
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Locals> {
        self.local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether someone other than the container's creator and the users typing into it
    /// moderates the debug container of `record` now (four eyes are two people:
    /// [`second_pair_of_eyes`]).
    pub fn moderator_attached(&self, record: &SessionRecord) -> bool {
        let live = self
            .store
            .on_container(&ContainerKey::of(record), jiff::Timestamp::now());
        second_pair_of_eyes(record, live.iter().map(|s| &s.record))
    }

    /// Count one more attach of `user` toward `--max-sessions-per-user` (module docs), or the
    /// 429 that refuses it. The count holds until the [`Admission`] is dropped: by then the
    /// session has its record (counted from there) or the attach failed.
    pub fn admit_user(self: &Arc<Self>, user: &str) -> Result<Admission, ApiError> {
        let mut pending = self.pending();
        if self.max_per_user > 0 {
            let held = self.store.count_of_user(user, jiff::Timestamp::now());
            let admitting = pending.get(user).copied().unwrap_or(0);
            if held + admitting >= self.max_per_user {
                return Err(self.too_many(user, held, admitting));
            }
        }
        *pending.entry(user.to_owned()).or_default() += 1;
        Ok(Admission {
            sessions: self.clone(),
            user: user.to_owned(),
            ticket: None,
        })
    }

    fn too_many(&self, user: &str, held: usize, admitting: usize) -> ApiError {
        ApiError::TooManyRequests {
            message: format!(
                "too many sessions: user {user:?} has {held} open (and {admitting} being \
                 opened), and a user may hold at most {} at once (--max-sessions-per-user); \
                 end one and retry",
                self.max_per_user
            ),
            retry_after_seconds: LIMIT_RETRY_AFTER,
        }
    }

    /// The limit held across replicas (`poddebug_storage` sessions' admission): the attach
    /// takes its place in the cluster's queue of the user's sessions and admissions, or is
    /// refused 429 (503 when the cluster cannot be asked).
    async fn admit_in_cluster(&self, admission: &mut Admission) -> Result<(), ApiError> {
        if self.max_per_user == 0 {
            return Ok(());
        }
        match self
            .store
            .admit(&admission.user, &self.replica, self.max_per_user)
            .await
        {
            Ok(Ok(ticket)) => {
                admission.ticket = Some(ticket);
                Ok(())
            }
            Ok(Err(over)) => Err(self.too_many(&admission.user, over.held, 0)),
            Err(e) => {
                tracing::warn!(error = %e, "the user's sessions cannot be counted in the cluster");
                Err(ApiError::ServiceUnavailable(
                    "the user's sessions cannot be counted in the cluster \
                     (--max-sessions-per-user); retry"
                        .to_owned(),
                ))
            }
        }
    }

    /// Record a session and look after it until the handle is closed.
    pub async fn open(
        self: &Arc<Self>,
        record: SessionRecord,
        end: EndSignal,
        gate: Option<Arc<Gate>>,
        marker: Option<Marker>,
    ) -> Result<SessionHandle, StorageError> {
        self.store.open(&record).await?;
        let id = record.id.clone();
        self.local().insert(Local {
            record,
            end,
            gate,
            marker,
            announced: BTreeMap::new(),
        });
        // What the record already shows (a termination cannot be there yet; participants are).
        self.refresh(&id);
        Ok(SessionHandle {
            sessions: self.clone(),
            id: Some(id),
        })
    }

    /// Bring one local session up to date with the records of its debug container:
    /// termination, gate, markers.
    fn refresh(&self, id: &str) {
        let now = jiff::Timestamp::now();
        let mut local = self.local();
        let Some(l) = local.by_id.get_mut(id) else {
            return;
        };
        let live = self.store.on_container(&ContainerKey::of(&l.record), now);
        let me = live.iter().find(|s| s.record.id == id);
        if let Some(t) = me.and_then(|s| s.terminate.as_ref())
            && l.end.current().is_none()
        {
            tracing::info!(session = id, by = %t.by, "session terminated");
            if let Some(m) = &l.marker {
                m.mark(&format!("session terminated by {}", t.by));
            }
            l.end.end(terminated(&t.by));
        }
        let same: Vec<&LiveSession> = live
            .iter()
            .map(|s| &**s)
            .filter(|s| s.record.id != id)
            .collect();
        if let Some(gate) = &l.gate {
            gate.set(second_pair_of_eyes(
                &l.record,
                same.iter().map(|s| &s.record),
            ));
        }
        let present: BTreeMap<String, String> = same
            .iter()
            .map(|s| (s.record.id.clone(), s.record.user.clone()))
            .collect();
        if let Some(m) = &l.marker {
            for s in &same {
                if !l.announced.contains_key(&s.record.id) {
                    m.mark(&format!(
                        "{} joined {}",
                        s.record.user,
                        mode_words(s.record.mode)
                    ));
                }
            }
            for (id, user) in &l.announced {
                if !present.contains_key(id) {
                    m.mark(&format!("{user} left"));
                }
            }
        }
        l.announced = present;
    }

    fn refresh_all(&self) {
        let ids: Vec<String> = self.local().by_id.keys().cloned().collect();
        for id in ids {
            self.refresh(&id);
        }
    }

    /// The sessions relayed here on debug container `key` (a record there changed).
    fn refresh_container(&self, key: &ContainerKey) {
        let ids: Vec<String> = self
            .local()
            .by_container
            .get(key)
            .map(|ids| ids.iter().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            self.refresh(&id);
        }
    }

    /// The background work of the replica, for the life of the process: follow the records,
    /// renew this replica's, and sweep the records of replicas that died.
    pub fn spawn(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut rx = me.store.subscribe();
            loop {
                match rx.recv().await {
                    Ok(ev) => me.refresh_container(&ev.session.container()),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => me.refresh_all(),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.renew_every);
            let mut sweeps: u64 = 0;
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let ids: Vec<String> = me.local().by_id.keys().cloned().collect();
                futures::stream::iter(ids)
                    .for_each_concurrent(RENEWALS_AT_ONCE, |id| {
                        let store = me.store.clone();
                        async move {
                            if let Err(e) = store.renew(&id).await {
                                tracing::warn!(session = %id, error = %e, "could not renew a session's record");
                            }
                        }
                    })
                    .await;
                me.store.collect_garbage(jiff::Timestamp::now()).await;
                // Admissions a dead replica left: rarely, they count only for their TTL anyway.
                sweeps += 1;
                if sweeps.is_multiple_of(ADMISSION_SWEEP_EVERY) {
                    me.store.sweep_admissions(jiff::Timestamp::now()).await;
                }
                // Records that expired without an event (a replica that died) change the
                // participants and moderators of the sessions here too.
                me.refresh_all();
            }
        });
    }
}

/// An attach counted toward its user's `--max-sessions-per-user` while it is being opened
/// ([`Sessions::admit_user`]).
pub struct Admission {
    sessions: Arc<Sessions>,
    user: String,
    /// Its place in the cluster's count (removed when the admission is dropped, once the
    /// session has its record or the attach failed).
    ticket: Option<poddebug_storage::AdmissionTicket>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut pending = self.sessions.pending();
        if let Some(n) = pending.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                pending.remove(&self.user);
            }
        }
    }
}

/// Wait (at most [`SYNC_WAIT`]) until this replica knows the session records; 503 otherwise.
pub async fn synced(store: &SessionStore) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + SYNC_WAIT;
    while !store.is_synced() {
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::ServiceUnavailable(
                "this replica does not know the live sessions yet; retry".to_owned(),
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The limits an attach of `user` must pass before its upstream attach is made (module docs):
/// `--max-sessions-per-user` (429), and in strict recording mode the user's recording quota
/// (403). The attach holds the admission until it has its session record, or fails.
pub async fn admit(st: &AppState, user: &str) -> Result<Admission, Error> {
    synced(st.sessions.store()).await?;
    let mut admission = st.sessions.admit_user(user)?;
    if let Some(recorder) = &st.recorder {
        recorder.admit(user).await?;
    }
    st.sessions.admit_in_cluster(&mut admission).await?;
    Ok(admission)
}

/// A session relayed here; [`SessionHandle::close`] removes its record (dropping the handle
/// does it in the background).
pub struct SessionHandle {
    sessions: Arc<Sessions>,
    id: Option<String>,
}

impl SessionHandle {
    /// The session id.
    pub fn id(&self) -> &str {
        self.id.as_deref().unwrap_or_default()
    }

    /// The session ended: forget it and remove its record.
    pub async fn close(mut self) {
        if let Some(id) = self.id.take() {
            self.sessions.local().remove(&id);
            self.sessions.store.close(&id).await;
        }
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.sessions.local().remove(&id);
            let store = self.sessions.store.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { store.close(&id).await });
            }
        }
    }
}
