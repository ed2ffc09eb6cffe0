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
//!   debug container, through any replica;
//! - marks in a session's recording who joined and left the same debug container.
//!
//! A record that nobody renews (its replica died) stops being listed after its lease duration,
//! and the next sweep of any replica deletes it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use poddebug_storage::{LiveSession, SessionRecord, SessionStore, StorageError};
use poddebug_types::{ApiError, Profile, SessionMode};

use poddebug_stream::websocket::frame::CLOSE_POLICY_VIOLATION;
use poddebug_stream::{EndSignal, Ending, Gate};

use crate::recording::Marker;

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

/// The sessions of this replica (module docs).
pub struct Sessions {
    store: SessionStore,
    replica: String,
    moderated_profiles: Vec<Profile>,
    renew_every: Duration,
    local: Mutex<HashMap<String, Local>>,
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
    /// with one of `moderated_profiles` are moderated.
    pub fn new(
        store: SessionStore,
        replica: String,
        moderated_profiles: Vec<Profile>,
        lease_duration: Duration,
    ) -> Arc<Sessions> {
        Arc::new(Sessions {
            store,
            replica,
            moderated_profiles,
            renew_every: (lease_duration / 3).max(Duration::from_millis(500)),
            local: Mutex::new(HashMap::new()),
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

    fn local(&self) -> std::sync::MutexGuard<'_, HashMap<String, Local>> {
        self.local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a moderator is attached to the debug container of `record` now.
    pub fn moderator_attached(&self, record: &SessionRecord) -> bool {
        let (live, _) = self.store.snapshot(jiff::Timestamp::now());
        live.iter().any(|s| {
            s.record.mode == SessionMode::Moderator
                && s.record.namespace == record.namespace
                && s.record.pod == record.pod
                && s.record.ec_name == record.ec_name
        })
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
        self.local().insert(
            id.clone(),
            Local {
                record,
                end,
                gate,
                marker,
                announced: BTreeMap::new(),
            },
        );
        // What the record already shows (a termination cannot be there yet; participants are).
        self.refresh(&id);
        Ok(SessionHandle {
            sessions: self.clone(),
            id: Some(id),
        })
    }

    /// Bring one local session up to date with the records: termination, gate, markers.
    fn refresh(&self, id: &str) {
        let now = jiff::Timestamp::now();
        let (live, _) = self.store.snapshot(now);
        let mut local = self.local();
        let Some(l) = local.get_mut(id) else {
            return;
        };
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
            .filter(|s| {
                s.record.id != id
                    && s.record.namespace == l.record.namespace
                    && s.record.pod == l.record.pod
                    && s.record.ec_name == l.record.ec_name
            })
            .collect();
        if let Some(gate) = &l.gate {
            gate.set(same.iter().any(|s| s.record.mode == SessionMode::Moderator));
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
        let ids: Vec<String> = self.local().keys().cloned().collect();
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
                    Ok(_) => me.refresh_all(),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => me.refresh_all(),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.renew_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let ids: Vec<String> = me.local().keys().cloned().collect();
                for id in ids {
                    if let Err(e) = me.store.renew(&id).await {
                        tracing::warn!(session = %id, error = %e, "could not renew a session's record");
                    }
                }
                me.store.collect_garbage(jiff::Timestamp::now()).await;
                // Records that expired without an event (a replica that died) change the
                // participants and moderators of the sessions here too.
                me.refresh_all();
            }
        });
    }
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
