//! Debug requests (just-in-time access), kept in the cluster so that every replica sees them and
//! they outlive restarts.
//!
//! Each `DebugRequest` is a `coordination.k8s.io/v1` Lease in the server's own namespace, as the
//! live sessions are ([`crate::SessionStore`]): named [`lease_name`] (a hash of the request's
//! namespace and name, so one name is one Lease and a create of a taken name is the cluster's
//! own 409), labelled [`REQUEST_LABEL`], the request itself (spec and status, with a revision
//! that grows with every write) in the annotation [`RECORD_ANNOTATION`]. Users never need
//! rights in the server's namespace: they act on the `debugrequests` resource, which the server
//! authorizes in their own namespace.
//!
//! The server's namespace is writable by more than poddebug (whoever holds `leases` there), and
//! an approval opens a gate, so every record is signed with the server's record key
//! ([`crate::record_key`], purpose `Request`): the MAC ([`MAC_ANNOTATION`]) covers the Lease's
//! name, its uid and the record's exact text. A record that does not verify (forged, edited,
//! copied into another Lease, or a deleted request's record replayed into a new Lease, whose
//! uid differs) is ignored, counted and logged; so is a record whose revision is lower than one
//! this replica already saw of the same Lease (an older approved version put back after a
//! revocation). A request is created in two writes for that reason: the Lease, then its MAC,
//! which needs the uid the cluster gave it; until the second write it is not listed anywhere.
//!
//! Why Leases rather than a CRD or ConfigMaps: the server already holds them (no new kind to
//! install, no CRD to version alongside the aggregated API), every replica already watches
//! its namespace's Leases, and a request is small (its record is bounded by the sizes the
//! validation allows).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use poddebug_types::request::{DebugRequest, KIND_DEBUG_REQUEST, PLURAL_DEBUG_REQUESTS};
use poddebug_types::{API_VERSION, ApiError, GROUP};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::change_log::{ChangeLog, Numbered};

use crate::StorageError;
use crate::record_key::{Purpose, SharedRecordKey};
use crate::sessions::label_value;

/// The label every request Lease carries (its value is the record's format version).
pub const REQUEST_LABEL: &str = "poddebug.dev/debug-request";
/// The annotation holding the record (JSON).
pub const RECORD_ANNOTATION: &str = "poddebug.dev/debug-request";
/// The annotation holding the record's MAC.
pub const MAC_ANNOTATION: &str = "poddebug.dev/debug-request-mac";

/// Changes buffered per running watch.
const BROADCAST: usize = 1024;
/// Tries of a conditional update that keeps meeting newer versions.
const UPDATE_ATTEMPTS: usize = 8;

/// The Lease of request `namespace/name`: `dr-` and 40 hex digits of the SHA-256 of both.
pub fn lease_name(namespace: &str, name: &str) -> String {
    use sha2::Digest;
    // Length-prefixed, so that no two (namespace, name) pairs hash the same text.
    let digest = sha2::Sha256::digest(format!("{}:{namespace}/{name}", namespace.len()).as_bytes());
    let hex: String = digest[..20].iter().map(|b| format!("{b:02x}")).collect();
    format!("dr-{hex}")
}

/// What a Lease holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    /// Grows by one with every write.
    revision: u64,
    /// The request, without uid and resourceVersion (the Lease's).
    request: DebugRequest,
}

/// A request as this replica holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRequest {
    /// The request, `metadata.uid` and `resourceVersion` the Lease's.
    pub request: DebugRequest,
    /// Its record's revision.
    pub revision: u64,
    /// The Lease's resourceVersion.
    pub resource_version: u64,
}

/// One change of the requests a replica sees.
#[derive(Clone, Debug)]
pub struct RequestEvent {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// The request in its new (or last) state.
    pub request: DebugRequest,
    /// Whether it is gone.
    pub deleted: bool,
}

impl Numbered for RequestEvent {
    fn rv(&self) -> u64 {
        self.rv
    }
}

pub use crate::change_log::HistoryTooOld as TooOld;

/// Why a record was ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Its MAC is absent (a create whose second write has not come yet, or someone else's).
    Unsigned,
    /// Its MAC does not verify: written or edited by someone else, or copied from elsewhere.
    Forged,
    /// Signed, but older than a version this replica already saw.
    Replayed,
}

impl Ignored {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Ignored::Unsigned => "unsigned",
            Ignored::Forged => "forged",
            Ignored::Replayed => "replayed",
        }
    }
}

/// Labels of the counter of ignored records.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IgnoredLabels {
    /// One of [`Ignored::as_str`].
    pub reason: String,
}

#[derive(Debug, Default)]
struct State {
    requests: BTreeMap<(String, String), StoredRequest>,
    /// The namespace and name of each Lease's request, to forget it when the Lease goes bad.
    by_lease: HashMap<String, (String, String)>,
    /// The highest revision seen of each Lease (by uid).
    revisions: HashMap<String, u64>,
    /// The resourceVersion of the ignored version of each Lease last counted, so that one
    /// version read twice (by the watch and by a fresh read) is counted once.
    counted: HashMap<String, u64>,
    log: ChangeLog<RequestEvent>,
}

#[derive(Debug)]
struct Inner {
    api: Api<Lease>,
    key: SharedRecordKey,
    state: Mutex<State>,
    tx: broadcast::Sender<RequestEvent>,
    synced: AtomicBool,
    ignored: Family<IgnoredLabels, Counter>,
}

/// The debug requests of the cluster, as this replica sees them (module docs).
#[derive(Clone, Debug)]
pub struct RequestStore {
    inner: Arc<Inner>,
}

fn rv_of(lease: &Lease) -> u64 {
    lease
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The bytes a MAC covers: the Lease's name and uid and the record's text.
fn signed(lease: &str, uid: &str, record: &str) -> Vec<u8> {
    format!("{lease}\n{uid}\n{record}").into_bytes()
}

/// What a Lease holds, when it is a request's.
enum Read {
    /// A verified request.
    Request(Box<StoredRequest>),
    /// Not a request's record (or unreadable): ignored for this reason.
    Ignored(Ignored),
}

fn not_found(name: &str) -> StorageError {
    ApiError::not_found(PLURAL_DEBUG_REQUESTS, GROUP, name).into()
}

impl RequestStore {
    /// Start watching the request Leases of `namespace` with `client` (the server's identity),
    /// once `key` is loaded (records cannot be verified before).
    pub fn start(client: kube::Client, namespace: &str, key: SharedRecordKey) -> RequestStore {
        let store = RequestStore::new(Api::namespaced(client, namespace), key);
        let me = store.clone();
        tokio::spawn(async move {
            while me.inner.key.get().is_none() {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            let config = watcher::Config::default().labels(REQUEST_LABEL);
            let events = watcher(me.inner.api.clone(), config).default_backoff();
            futures::pin_mut!(events);
            let mut listed: Vec<Lease> = Vec::new();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(watcher::Event::Init) => listed.clear(),
                    Ok(watcher::Event::InitApply(l)) => listed.push(l),
                    Ok(watcher::Event::InitDone) => me.resynced(std::mem::take(&mut listed)),
                    Ok(watcher::Event::Apply(l)) => me.record(&l, false),
                    Ok(watcher::Event::Delete(l)) => me.record(&l, true),
                    Err(e) => tracing::warn!(error = %e, "debug request watch failed; retrying"),
                }
            }
        });
        store
    }

    fn new(api: Api<Lease>, key: SharedRecordKey) -> RequestStore {
        let (tx, _) = broadcast::channel(BROADCAST);
        RequestStore {
            inner: Arc::new(Inner {
                api,
                key,
                state: Mutex::new(State::default()),
                tx,
                synced: AtomicBool::new(false),
                ignored: Family::default(),
            }),
        }
    }

    /// The counter of ignored records (by reason), to register in a metrics registry.
    pub fn ignored(&self) -> Family<IgnoredLabels, Counter> {
        self.inner.ignored.clone()
    }

    /// How many records were ignored for `why` so far.
    pub fn ignored_count(&self, why: Ignored) -> u64 {
        self.inner
            .ignored
            .get_or_create(&IgnoredLabels {
                reason: why.as_str().to_owned(),
            })
            .get()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Read a Lease: its record, verified (signature, name, revision).
    fn read(&self, lease: &Lease, revisions: &HashMap<String, u64>) -> Read {
        let meta = &lease.metadata;
        let (Some(name), Some(uid)) = (meta.name.as_deref(), meta.uid.as_deref()) else {
            return Read::Ignored(Ignored::Unsigned);
        };
        let annotations = meta.annotations.as_ref();
        let Some(text) = annotations.and_then(|a| a.get(RECORD_ANNOTATION)) else {
            return Read::Ignored(Ignored::Unsigned);
        };
        let Some(mac) = annotations.and_then(|a| a.get(MAC_ANNOTATION)) else {
            return Read::Ignored(Ignored::Unsigned);
        };
        let verified = self
            .inner
            .key
            .get()
            .is_some_and(|k| k.verify(Purpose::Request, &signed(name, uid, text), mac));
        if !verified {
            return Read::Ignored(Ignored::Forged);
        }
        let Ok(record) = serde_json::from_str::<Record>(text) else {
            return Read::Ignored(Ignored::Forged);
        };
        let mut request = record.request;
        if lease_name(request.namespace(), request.name()) != name {
            return Read::Ignored(Ignored::Forged);
        }
        if revisions
            .get(uid)
            .is_some_and(|seen| *seen > record.revision)
        {
            return Read::Ignored(Ignored::Replayed);
        }
        request.api_version = API_VERSION.to_owned();
        request.kind = KIND_DEBUG_REQUEST.to_owned();
        request.metadata.uid = Some(uid.to_owned());
        request.metadata.resource_version = Some(rv_of(lease).to_string());
        Read::Request(Box::new(StoredRequest {
            request,
            revision: record.revision,
            resource_version: rv_of(lease),
        }))
    }

    fn count_ignored(&self, lease: &Lease, why: Ignored) {
        self.inner
            .ignored
            .get_or_create(&IgnoredLabels {
                reason: why.as_str().to_owned(),
            })
            .inc();
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        match why {
            // The first write of a create, or a Lease of someone else's with the label.
            Ignored::Unsigned => {
                tracing::debug!(lease = name, "an unsigned debug request record is ignored")
            }
            _ => tracing::warn!(
                lease = name,
                reason = why.as_str(),
                "a debug request record poddebug did not write (or an older one put back) is ignored"
            ),
        }
    }

    fn push(&self, state: &mut State, event: RequestEvent) {
        state.log.push(event.clone());
        let _ = self.inner.tx.send(event);
    }

    /// Take in one Lease as the watch (or a write of ours) brought it.
    fn record(&self, lease: &Lease, deleted: bool) {
        let rv = rv_of(lease);
        let lease_name = lease.metadata.name.clone().unwrap_or_default();
        let mut state = self.state();
        let read = self.read(lease, &state.revisions);
        let stored = match read {
            Read::Request(s) => *s,
            Read::Ignored(why) => {
                if deleted {
                    state.counted.remove(&lease_name);
                } else if state.counted.insert(lease_name.clone(), rv) != Some(rv) {
                    self.count_ignored(lease, why);
                }
                // Whatever the Lease held before is no longer a request anyone can rely on —
                // unless this is an older version coming back after a newer one was taken in
                // (the watch bringing the unsigned first write of a create after the second).
                let held = state.by_lease.get(&lease_name).cloned();
                let newer = held
                    .as_ref()
                    .and_then(|key| state.requests.get(key))
                    .is_none_or(|held| held.resource_version < rv);
                if newer
                    && let Some(key) = held
                    && let Some(old) = state.requests.remove(&key)
                {
                    state.by_lease.remove(&lease_name);
                    self.push(
                        &mut state,
                        RequestEvent {
                            rv,
                            request: old.request,
                            deleted: true,
                        },
                    );
                } else {
                    state.log.saw(rv);
                }
                return;
            }
        };
        let key = (
            stored.request.namespace().to_owned(),
            stored.request.name().to_owned(),
        );
        // An event older than what is held (a write of ours came back after a newer one).
        if !deleted
            && state
                .requests
                .get(&key)
                .is_some_and(|held| held.resource_version >= stored.resource_version)
        {
            return;
        }
        if let Some(uid) = stored.request.metadata.uid.clone() {
            let seen = state.revisions.entry(uid).or_default();
            *seen = (*seen).max(stored.revision);
        }
        let request = stored.request.clone();
        if deleted {
            state.requests.remove(&key);
            state.by_lease.remove(&lease_name);
        } else {
            state.by_lease.insert(lease_name, key.clone());
            state.requests.insert(key, stored);
        }
        self.push(
            &mut state,
            RequestEvent {
                rv,
                request,
                deleted,
            },
        );
    }

    /// After a (re-)list: running watches get the difference, the history restarts there.
    fn resynced(&self, listed: Vec<Lease>) {
        let rv = listed.iter().map(rv_of).max().unwrap_or(0);
        let mut state = self.state();
        let mut now: BTreeMap<(String, String), StoredRequest> = BTreeMap::new();
        let mut by_lease = HashMap::new();
        for l in &listed {
            match self.read(l, &state.revisions) {
                Read::Request(s) => {
                    let key = (
                        s.request.namespace().to_owned(),
                        s.request.name().to_owned(),
                    );
                    by_lease.insert(l.metadata.name.clone().unwrap_or_default(), key.clone());
                    now.insert(key, *s);
                }
                Read::Ignored(why) => {
                    let name = l.metadata.name.clone().unwrap_or_default();
                    if state.counted.insert(name, rv_of(l)) != Some(rv_of(l)) {
                        self.count_ignored(l, why);
                    }
                }
            }
        }
        // Leases gone since are forgotten; a version read again after a re-list is not
        // counted again.
        let listed_names: std::collections::HashSet<&str> = listed
            .iter()
            .filter_map(|l| l.metadata.name.as_deref())
            .collect();
        state
            .counted
            .retain(|name, _| listed_names.contains(name.as_str()));
        for s in now.values() {
            if let Some(uid) = s.request.metadata.uid.clone() {
                let seen = state.revisions.entry(uid).or_default();
                *seen = (*seen).max(s.revision);
            }
        }
        let gone: Vec<DebugRequest> = state
            .requests
            .iter()
            .filter(|(k, _)| !now.contains_key(*k))
            .map(|(_, s)| s.request.clone())
            .collect();
        let changed: Vec<DebugRequest> = now
            .iter()
            .filter(|(k, s)| state.requests.get(*k) != Some(*s))
            .map(|(_, s)| s.request.clone())
            .collect();
        state.requests = now;
        state.by_lease = by_lease;
        state.log.restart(rv);
        for request in gone {
            let _ = self.inner.tx.send(RequestEvent {
                rv,
                request,
                deleted: true,
            });
        }
        for request in changed {
            let _ = self.inner.tx.send(RequestEvent {
                rv,
                request,
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

    /// Every request, and the resourceVersion this view is at.
    pub fn snapshot(&self) -> (Vec<DebugRequest>, u64) {
        let state = self.state();
        let all = state.requests.values().map(|s| s.request.clone()).collect();
        (all, state.log.rv())
    }

    /// One request.
    pub fn get(&self, namespace: &str, name: &str) -> Option<DebugRequest> {
        self.state()
            .requests
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|s| s.request.clone())
    }

    /// One request as the cluster holds it now (a quorum read of its Lease, verified and
    /// taken into this replica's view): what decides a grant, never a view that may lag a
    /// review another replica just wrote.
    pub async fn fresh(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DebugRequest>, StorageError> {
        self.refresh(namespace, name).await?;
        Ok(self.get(namespace, name))
    }

    /// Running changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<RequestEvent> {
        self.inner.tx.subscribe()
    }

    /// The changes after `rv`, or [`TooOld`] when they are no longer kept.
    pub fn since(&self, rv: u64) -> Result<Vec<RequestEvent>, TooOld> {
        self.state().log.since(rv)
    }

    fn key(&self) -> Result<&crate::record_key::RecordKey, StorageError> {
        self.inner.key.get().ok_or_else(|| {
            ApiError::ServiceUnavailable(
                "this replica has not loaded its record key yet; retry".to_owned(),
            )
            .into()
        })
    }

    /// The annotations of a record: its text and MAC.
    fn annotations(
        &self,
        lease: &str,
        uid: &str,
        revision: u64,
        request: &DebugRequest,
    ) -> Result<BTreeMap<String, String>, StorageError> {
        let mut request = request.clone();
        request.metadata.uid = None;
        request.metadata.resource_version = None;
        request.metadata.managed_fields = None;
        let text = serde_json::to_string(&Record { revision, request }).map_err(|_| {
            StorageError::from(ApiError::Internal(
                "encoding a debug request failed".to_owned(),
            ))
        })?;
        let mac = self
            .key()?
            .sign(Purpose::Request, &signed(lease, uid, &text));
        Ok(BTreeMap::from([
            (RECORD_ANNOTATION.to_owned(), text),
            (MAC_ANNOTATION.to_owned(), mac),
        ]))
    }

    /// Record a new request (its name set, validated and authorized): the Lease, then its MAC.
    /// 409 AlreadyExists when the name is taken.
    pub async fn create(&self, request: &DebugRequest) -> Result<DebugRequest, StorageError> {
        self.key()?;
        let (ns, name) = (request.namespace(), request.name());
        let lease = lease_name(ns, name);
        let mut unsigned = request.clone();
        unsigned.metadata.uid = None;
        unsigned.metadata.resource_version = None;
        let text = serde_json::to_string(&Record {
            revision: 1,
            request: unsigned.clone(),
        })
        .map_err(|_| ApiError::Internal("encoding a debug request failed".to_owned()))?;
        let labels = BTreeMap::from([
            (REQUEST_LABEL.to_owned(), "v1".to_owned()),
            (
                "app.kubernetes.io/managed-by".to_owned(),
                "poddebug-apiserver".to_owned(),
            ),
            (format!("{GROUP}/namespace"), label_value(ns)),
            (format!("{GROUP}/name"), label_value(name)),
        ]);
        let object = Lease {
            metadata: ObjectMeta {
                name: Some(lease.clone()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(RECORD_ANNOTATION.to_owned(), text)])),
                ..Default::default()
            },
            spec: None,
        };
        let created = match self.inner.api.create(&PostParams::default(), &object).await {
            Ok(l) => l,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                return Err(ApiError::already_exists(PLURAL_DEBUG_REQUESTS, GROUP, name).into());
            }
            Err(e) => return Err(e.into()),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        let signed = async {
            let annotations = self.annotations(&lease, &uid, 1, &unsigned)?;
            let patch = serde_json::json!({"metadata": {
                "annotations": annotations,
                "resourceVersion": created.metadata.resource_version,
            }});
            let l = self
                .inner
                .api
                .patch(&lease, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            Ok::<Lease, StorageError>(l)
        }
        .await;
        match signed {
            Ok(l) => {
                self.record(&l, false);
                self.get(ns, name).ok_or_else(|| {
                    ApiError::Internal("the debug request just written does not verify".to_owned())
                        .into()
                })
            }
            Err(e) => {
                // Not a request without its MAC: take the Lease back.
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                if let Err(d) = self.inner.api.delete(&lease, &params).await {
                    tracing::warn!(lease = %lease, error = %d, "an unsigned debug request record could not be removed; it is ignored");
                }
                Err(e)
            }
        }
    }

    /// The newest version of a request from the cluster (after a conflict), verified.
    async fn refresh(&self, namespace: &str, name: &str) -> Result<(), StorageError> {
        let lease = lease_name(namespace, name);
        match self.inner.api.get_opt(&lease).await? {
            Some(l) => self.record(&l, false),
            None => {
                let mut state = self.state();
                if let Some(old) = state
                    .requests
                    .remove(&(namespace.to_owned(), name.to_owned()))
                {
                    state.by_lease.remove(&lease);
                    let rv = state.log.rv();
                    self.push(
                        &mut state,
                        RequestEvent {
                            rv,
                            request: old.request,
                            deleted: true,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// Change a request: `change` is applied to the newest version this replica knows, and the
    /// result written conditionally on it (a version written meanwhile is read and `change`
    /// applied again). `change` refusing is the answer. The request as written.
    pub async fn update(
        &self,
        namespace: &str,
        name: &str,
        change: impl Fn(&mut DebugRequest) -> Result<(), ApiError>,
    ) -> Result<DebugRequest, StorageError> {
        let lease = lease_name(namespace, name);
        for _ in 0..UPDATE_ATTEMPTS {
            let current = self
                .state()
                .requests
                .get(&(namespace.to_owned(), name.to_owned()))
                .cloned()
                .ok_or_else(|| not_found(name))?;
            let mut next = current.request.clone();
            change(&mut next)?;
            let uid = current.request.metadata.uid.clone().unwrap_or_default();
            let annotations = self.annotations(&lease, &uid, current.revision + 1, &next)?;
            let patch = serde_json::json!({"metadata": {
                "annotations": annotations,
                "resourceVersion": current.resource_version.to_string(),
            }});
            match self
                .inner
                .api
                .patch(&lease, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(l) => {
                    self.record(&l, false);
                    return self.get(namespace, name).ok_or_else(|| not_found(name));
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    self.refresh(namespace, name).await?;
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.refresh(namespace, name).await?;
                    return Err(not_found(name));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict(
            PLURAL_DEBUG_REQUESTS,
            GROUP,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
        .into())
    }

    /// Delete a request (the very version `resource_version`, when given). 404 when absent.
    pub async fn delete(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<u64>,
    ) -> Result<DebugRequest, StorageError> {
        let current = self.get(namespace, name).ok_or_else(|| not_found(name))?;
        let lease = lease_name(namespace, name);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: current.metadata.uid.clone(),
                resource_version: resource_version.map(|v| v.to_string()),
            }),
            ..DeleteParams::default()
        };
        match self.inner.api.delete(&lease, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Err(not_found(name)),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                return Err(ApiError::conflict(
                    PLURAL_DEBUG_REQUESTS,
                    GROUP,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
                .into());
            }
            Err(e) => return Err(e.into()),
        }
        let mut state = self.state();
        if let Some(old) = state
            .requests
            .remove(&(namespace.to_owned(), name.to_owned()))
        {
            state.by_lease.remove(&lease);
            let rv = state.log.rv();
            self.push(
                &mut state,
                RequestEvent {
                    rv,
                    request: old.request,
                    deleted: true,
                },
            );
        }
        Ok(current)
    }
}

/// Label and field selectors of a list or watch of requests (`labelSelector`,
/// `fieldSelector`), with kube-apiserver's grammar and errors. Fields: `metadata.name`,
/// `metadata.namespace`, `spec.pod`, `spec.node`, `spec.mode`, `spec.profile`,
/// `spec.requester`, `status.phase` (the phase as the reader's clock sees it).
#[derive(Clone, Debug, Default)]
pub struct RequestSelector {
    labels: crate::selector::LabelSelector,
    fields: Vec<(String, String, bool)>,
}

const REQUEST_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.pod",
    "spec.node",
    "spec.mode",
    "spec.profile",
    "spec.requester",
    "status.phase",
];

fn request_field(r: &DebugRequest, field: &str, now: jiff::Timestamp) -> Option<String> {
    Some(match field {
        "metadata.name" => r.name().to_owned(),
        "metadata.namespace" => r.namespace().to_owned(),
        "spec.pod" => r.spec.pod.clone().unwrap_or_default(),
        "spec.node" => r.spec.node.clone().unwrap_or_default(),
        "spec.mode" => r.spec.mode.as_str().to_owned(),
        "spec.profile" => r.spec.profile.clone(),
        "spec.requester" => r.spec.requester.clone().unwrap_or_default(),
        "status.phase" => r.phase_at(now).as_str().to_owned(),
        _ => return None,
    })
}

impl RequestSelector {
    /// Parse both selectors (empty: everything); malformed or an unsupported field is a 400.
    pub fn parse(labels: &str, fields: &str) -> Result<RequestSelector, ApiError> {
        let mut terms = Vec::new();
        for term in fields.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value, equal) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, v, true)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{fields}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !REQUEST_FIELDS.contains(&field) {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_owned(), value.trim().to_owned(), equal));
        }
        Ok(RequestSelector {
            labels: crate::selector::LabelSelector::parse(labels)?,
            fields: terms,
        })
    }

    /// Whether request `r` is selected at `now`.
    pub fn matches(&self, r: &DebugRequest, now: jiff::Timestamp) -> bool {
        self.fields.iter().all(|(field, want, equal)| {
            (request_field(r, field, now).as_deref() == Some(want.as_str())) == *equal
        }) && self.labels.matches(r.metadata.labels.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_key::RecordKey;
    use poddebug_types::request::{DebugRequestSpec, DebugRequestStatus, RequestPhase};

    /// A client of nothing: these tests never call the cluster.
    fn nowhere() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    fn store() -> RequestStore {
        RequestStore::new(
            Api::namespaced(nowhere(), "poddebug-system"),
            SharedRecordKey::loaded(RecordKey::from_bytes(&[3; 32])),
        )
    }

    fn request(ns: &str, name: &str, phase: RequestPhase) -> DebugRequest {
        let mut r = DebugRequest {
            spec: DebugRequestSpec {
                pod: Some("web".into()),
                profile: "sysadmin".into(),
                reason: "INC-7".into(),
                requester: Some("alice".into()),
                ..Default::default()
            },
            status: Some(DebugRequestStatus {
                phase,
                approvals_required: 1,
                ..Default::default()
            }),
            ..Default::default()
        };
        r.metadata.name = Some(name.into());
        r.metadata.namespace = Some(ns.into());
        r
    }

    /// The Lease a replica writes for `r` at `revision`, with uid `uid` and resourceVersion `rv`.
    fn lease(s: &RequestStore, r: &DebugRequest, uid: &str, revision: u64, rv: u64) -> Lease {
        let name = lease_name(r.namespace(), r.name());
        let annotations = s.annotations(&name, uid, revision, r).unwrap();
        Lease {
            metadata: ObjectMeta {
                name: Some(name),
                uid: Some(uid.into()),
                resource_version: Some(rv.to_string()),
                labels: Some(BTreeMap::from([(REQUEST_LABEL.into(), "v1".into())])),
                annotations: Some(annotations),
                ..Default::default()
            },
            spec: None,
        }
    }

    #[tokio::test]
    async fn a_signed_record_is_read_back_with_the_leases_uid_and_version() {
        let s = store();
        let r = request("shop", "web-sysadmin", RequestPhase::Approved);
        s.record(&lease(&s, &r, "u1", 1, 10), false);
        let got = s.get("shop", "web-sysadmin").expect("held");
        assert_eq!(got.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(got.metadata.resource_version.as_deref(), Some("10"));
        assert_eq!(got.kind, "DebugRequest");
        assert_eq!(got.spec, r.spec);
        assert_eq!(s.snapshot().1, 10);
    }

    #[tokio::test]
    async fn forged_copied_and_replayed_records_are_ignored_and_counted() {
        let s = store();
        let pending = request("shop", "web-sysadmin", RequestPhase::Pending);
        s.record(&lease(&s, &pending, "u1", 1, 10), false);

        // Edited after signing: the phase says Approved, the MAC is of the pending record.
        let mut edited = lease(&s, &pending, "u1", 1, 11);
        let text = edited.metadata.annotations.as_ref().unwrap()[RECORD_ANNOTATION]
            .replace("Pending", "Approved");
        edited
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(RECORD_ANNOTATION.into(), text);
        s.record(&edited, false);
        assert_eq!(s.ignored_count(Ignored::Forged), 1);
        assert!(
            s.get("shop", "web-sysadmin").is_none(),
            "a request whose Lease went bad is no longer held"
        );

        // Signed by another key.
        let other = RequestStore::new(
            Api::namespaced(nowhere(), "poddebug-system"),
            SharedRecordKey::loaded(RecordKey::from_bytes(&[4; 32])),
        );
        s.record(&lease(&other, &pending, "u1", 1, 12), false);
        assert_eq!(s.ignored_count(Ignored::Forged), 2);

        // An approved record of another Lease (uid) copied here.
        let approved = request("shop", "web-sysadmin", RequestPhase::Approved);
        let mut copied = lease(&s, &approved, "u-old", 3, 13);
        copied.metadata.uid = Some("u1".into());
        s.record(&copied, false);
        assert_eq!(s.ignored_count(Ignored::Forged), 3);

        // A record of another request's name put in this Lease.
        let elsewhere = request("shop", "other", RequestPhase::Approved);
        let mut moved = lease(&s, &elsewhere, "u1", 3, 14);
        moved.metadata.name = Some(lease_name("shop", "web-sysadmin"));
        s.record(&moved, false);
        assert_eq!(s.ignored_count(Ignored::Forged), 4);

        // The genuine history: approved (revision 2), then revoked (3); putting the approved
        // version back is a replay.
        s.record(&lease(&s, &approved, "u1", 2, 20), false);
        let revoked = request("shop", "web-sysadmin", RequestPhase::Revoked);
        s.record(&lease(&s, &revoked, "u1", 3, 21), false);
        s.record(&lease(&s, &approved, "u1", 2, 22), false);
        assert_eq!(s.ignored_count(Ignored::Replayed), 1);
        assert!(s.get("shop", "web-sysadmin").is_none());

        // Unsigned Leases with the label are ignored as such.
        let mut unsigned = lease(&s, &pending, "u9", 1, 30);
        unsigned
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(MAC_ANNOTATION);
        s.record(&unsigned, false);
        assert_eq!(s.ignored_count(Ignored::Unsigned), 1);
    }

    #[tokio::test]
    async fn the_unsigned_first_write_of_a_create_coming_back_late_changes_nothing() {
        let s = store();
        let mut events = s.inner.tx.subscribe();
        let pending = request("shop", "web-sysadmin", RequestPhase::Pending);
        // The create's second write (signed, bound to the uid) is taken in first, as the
        // replica that wrote it does; the watch brings the first (unsigned) write after it.
        s.record(&lease(&s, &pending, "u1", 1, 11), false);
        let mut first = lease(&s, &pending, "u1", 1, 10);
        first
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(MAC_ANNOTATION);
        s.record(&first, false);
        assert!(s.get("shop", "web-sysadmin").is_some(), "still held");
        let ev = events.try_recv().expect("the create");
        assert!(!ev.deleted && ev.rv == 11);
        assert!(events.try_recv().is_err(), "and nothing else");
        // A newer unsigned write is someone else's: the request is no longer held.
        let mut later = first.clone();
        later.metadata.resource_version = Some("12".into());
        s.record(&later, false);
        assert!(s.get("shop", "web-sysadmin").is_none());
        assert!(events.try_recv().expect("gone").deleted);
    }

    #[test]
    fn lease_names_are_one_per_request_and_valid() {
        let a = lease_name("shop", "web-sysadmin");
        assert_eq!(a.len(), 43);
        assert!(a.starts_with("dr-"));
        assert_ne!(a, lease_name("shop", "web-sysadmin2"));
        assert_ne!(lease_name("a/b", "c"), lease_name("a", "b/c"));
        assert!(poddebug_types::names::dns1123_label_errors(&a).is_empty());
    }

    #[test]
    fn selectors_see_the_phase_on_the_readers_clock() {
        let mut r = request("shop", "x", RequestPhase::Approved);
        r.status.as_mut().unwrap().expires_at =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:30:00Z".parse().unwrap(),
            ));
        let sel = RequestSelector::parse("", "status.phase=Approved,spec.requester=alice").unwrap();
        assert!(sel.matches(&r, "2026-01-01T00:29:00Z".parse().unwrap()));
        assert!(!sel.matches(&r, "2026-01-01T00:31:00Z".parse().unwrap()));
        assert!(RequestSelector::parse("", "spec.image=x").is_err());
    }
}
