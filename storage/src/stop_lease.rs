//! Stop records in the cluster: the fact "a stop of this debug container was requested at T",
//! kept where every replica reads it, across restarts, and where neither the debug container
//! nor an ordinary user can write.
//!
//! A `DELETE` that is about to signal a debug container first writes a
//! `coordination.k8s.io/v1` Lease in the server's own namespace ([`StopLeases::record_stop`]),
//! named from the pod's UID and the ephemeral container's name ([`lease_name`]), labelled
//! [`STOP_RECORD_LABEL`] (and with the pod's namespace, pod and container, for people), the
//! record ([`StopLease`], JSON) in the annotation [`RECORD_ANNOTATION`] and its HMAC
//! ([`RecordKey::sign`](crate::record_key::RecordKey::sign) with `Purpose::Stop`) in
//! [`MAC_ANNOTATION`]. When the leader later finds a stopped or expired container still running
//! past its bound, it marks the record as reported ([`StopLeases::report`]; for a time limit,
//! whose deadline is in the pod spec already, the record is first made then), which is what
//! makes the report happen once, whichever replica leads.
//!
//! Readers trust a record only if its MAC verifies with the server's record key and it names
//! the pod UID and container its Lease name is made from: a Lease that anyone with `create
//! leases` in the server's namespace wrote, or one copied under another name, is ignored,
//! counted (`poddebug_stop_records_rejected_total`) and logged. Every replica watches the
//! records ([`StopLeases::start`]) to show them in the status of debug containers; the attach
//! and log-follow gate reads its record directly ([`StopLeases::fetch`]), so a stop made through
//! one replica is refused by every other at once. The leader deletes the records of pods that
//! are gone and of containers that terminated ([`crate::unstoppable`]).
//!
//! RBAC (manifests/rbac.yaml, Role `poddebug-apiserver:stop-records` in the server's namespace):
//! `get`, `list`, `watch`, `create`, `update` and `delete` on `leases`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use poddebug_types::{ApiError, GROUP};
use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};

use crate::StorageError;
use crate::record_key::{Purpose, SharedRecordKey};
use crate::sessions::label_value;

/// The label every stop record carries (its value is the record's format version).
pub const STOP_RECORD_LABEL: &str = "poddebug.dev/stop-record";
/// The annotation holding the record (JSON).
pub const RECORD_ANNOTATION: &str = "poddebug.dev/stop-record";
/// The annotation holding the record's MAC.
pub const MAC_ANNOTATION: &str = "poddebug.dev/stop-record-mac";

/// What asked for the stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopOrigin {
    /// `DELETE` of the debug container.
    Delete,
    /// Its time limit (`ttlSeconds`): the record is made when the leader reports it.
    Expiry,
}

/// One stop record (module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopLease {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The pod's UID: a pod of the same name made later is another pod.
    pub pod_uid: String,
    /// The debug container's name in the API.
    pub name: String,
    /// The ephemeral container's own name.
    pub container: String,
    /// What asked for the stop.
    pub origin: StopOrigin,
    /// Who asked (for a time limit, the server's expiry).
    pub requested_by: String,
    /// When (for a time limit, the deadline).
    pub requested_at: jiff::Timestamp,
    /// The grace period the stop gave the container's processes.
    pub grace_period_seconds: u64,
    /// Since when the container is reported unstoppable: set by the leader once it found the
    /// container still running past its bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unstoppable_since: Option<jiff::Timestamp>,
    /// The report's explanation, for the status condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a Lease labelled as a stop record is not believed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// It carries no record, or one that does not parse.
    Malformed,
    /// Its MAC does not verify with the server's key (or it has none).
    BadMac,
    /// The record names another pod or container than its Lease name is made from.
    WrongName,
}

impl Rejection {
    fn describe(self) -> &'static str {
        match self {
            Rejection::Malformed => "it holds no readable record",
            Rejection::BadMac => "its MAC does not verify with the server's record key",
            Rejection::WrongName => "it names another container than its Lease name",
        }
    }
}

/// The Lease name of the record of ephemeral container `container` of the pod with UID
/// `pod_uid`: `stop-` and 40 hex digits of a SHA-256 of both (a valid name whatever they hold).
pub fn lease_name(pod_uid: &str, container: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(pod_uid.as_bytes());
    h.update([0u8]);
    h.update(container.as_bytes());
    let hex: String = h.finalize()[..20]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("stop-{hex}")
}

impl StopLease {
    /// The name of this record's Lease.
    pub fn lease_name(&self) -> String {
        lease_name(&self.pod_uid, &self.container)
    }
}

/// The Lease that holds `record`, signed with `key`.
fn to_lease(record: &StopLease, key: &crate::record_key::RecordKey) -> Lease {
    let json = serde_json::to_string(record).unwrap_or_default();
    let mac = key.sign(Purpose::Stop, json.as_bytes());
    let labels = BTreeMap::from([
        (STOP_RECORD_LABEL.to_owned(), "v1".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "poddebug-apiserver".to_owned(),
        ),
        (format!("{GROUP}/namespace"), label_value(&record.namespace)),
        (format!("{GROUP}/pod"), label_value(&record.pod)),
        (format!("{GROUP}/container"), label_value(&record.container)),
    ]);
    Lease {
        metadata: ObjectMeta {
            name: Some(record.lease_name()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (RECORD_ANNOTATION.to_owned(), json),
                (MAC_ANNOTATION.to_owned(), mac),
            ])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            acquire_time: Some(MicroTime(record.requested_at)),
            ..Default::default()
        }),
    }
}

/// The record a Lease holds, unverified (for clean-up: which pod it is about).
fn content(lease: &Lease) -> Option<StopLease> {
    let raw = lease
        .metadata
        .annotations
        .as_ref()?
        .get(RECORD_ANNOTATION)?;
    serde_json::from_str(raw).ok()
}

/// The record a Lease holds, if `key` verifies it (module docs).
fn verify(lease: &Lease, key: &crate::record_key::RecordKey) -> Result<StopLease, Rejection> {
    let annotations = lease
        .metadata
        .annotations
        .as_ref()
        .ok_or(Rejection::Malformed)?;
    let raw = annotations
        .get(RECORD_ANNOTATION)
        .ok_or(Rejection::Malformed)?;
    let mac = annotations.get(MAC_ANNOTATION).ok_or(Rejection::BadMac)?;
    if !key.verify(Purpose::Stop, raw.as_bytes(), mac) {
        return Err(Rejection::BadMac);
    }
    let record: StopLease = serde_json::from_str(raw).map_err(|_| Rejection::Malformed)?;
    if lease.metadata.name.as_deref() != Some(record.lease_name().as_str()) {
        return Err(Rejection::WrongName);
    }
    Ok(record)
}

/// One Lease the watch holds, and what became of its check.
#[derive(Debug)]
struct Entry {
    lease: Lease,
    /// `None` while the record key is not loaded yet.
    verdict: Option<Result<StopLease, Rejection>>,
}

#[derive(Debug)]
struct Inner {
    api: Api<Lease>,
    key: SharedRecordKey,
    rejected: Counter,
    entries: Mutex<BTreeMap<String, Entry>>,
    synced: AtomicBool,
}

/// The stop records of the cluster, as this replica sees them (module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct StopLeases {
    inner: Arc<Inner>,
}

/// What [`StopLeases::report`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reported {
    /// This call marked the record: the report is this caller's to make.
    Now(StopLease),
    /// It was marked before (by this or another replica): nothing more to report.
    Already(StopLease),
    /// Another writer changed the record meanwhile: look again next round.
    Raced,
}

impl StopLeases {
    /// The records in `namespace`, read and written with `client` (the server's identity) and
    /// checked with `key`, those that fail counted in `rejected`; nothing is watched
    /// ([`StopLeases::start`] does).
    pub fn new(
        client: kube::Client,
        namespace: &str,
        key: SharedRecordKey,
        rejected: Counter,
    ) -> StopLeases {
        StopLeases {
            inner: Arc::new(Inner {
                api: Api::namespaced(client, namespace),
                key,
                rejected,
                entries: Mutex::new(BTreeMap::new()),
                synced: AtomicBool::new(false),
            }),
        }
    }

    /// [`StopLeases::new`], and a task watching the records for the life of the process.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        key: SharedRecordKey,
        rejected: Counter,
    ) -> StopLeases {
        let me = StopLeases::new(client, namespace, key, rejected);
        let watched = me.clone();
        let config = watcher::Config::default().labels(STOP_RECORD_LABEL);
        let api = me.inner.api.clone();
        tokio::spawn(async move {
            let events = watcher(api, config).default_backoff();
            futures::pin_mut!(events);
            let mut listed: Vec<Lease> = Vec::new();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(watcher::Event::Init) => listed.clear(),
                    Ok(watcher::Event::InitApply(l)) => listed.push(l),
                    Ok(watcher::Event::InitDone) => watched.resynced(std::mem::take(&mut listed)),
                    Ok(watcher::Event::Apply(l)) => watched.applied(l),
                    Ok(watcher::Event::Delete(l)) => watched.deleted(&l),
                    Err(e) => tracing::warn!(error = %e, "stop record watch failed; retrying"),
                }
            }
        });
        me
    }

    /// The count of records that failed their check.
    pub fn rejected(&self) -> &Counter {
        &self.inner.rejected
    }

    /// Whether the first list completed.
    pub fn is_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.inner
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Check `entry` now if the key is loaded (a failure is counted and logged once per version).
    fn check(&self, entry: &mut Entry) {
        if entry.verdict.is_some() {
            return;
        }
        let Some(key) = self.inner.key.get() else {
            return;
        };
        let verdict = verify(&entry.lease, key);
        if let Err(why) = verdict {
            self.inner.rejected.inc();
            tracing::warn!(
                lease = entry.lease.metadata.name.as_deref().unwrap_or_default(),
                resource_version = entry
                    .lease
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default(),
                reason = why.describe(),
                "a stop record was ignored: poddebug did not write it"
            );
        }
        entry.verdict = Some(verdict);
    }

    fn applied(&self, lease: Lease) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let mut entries = self.entries();
        let unchanged = entries
            .get(&name)
            .is_some_and(|e| e.lease.metadata.resource_version == lease.metadata.resource_version);
        if unchanged {
            return;
        }
        let mut entry = Entry {
            lease,
            verdict: None,
        };
        self.check(&mut entry);
        entries.insert(name, entry);
    }

    fn deleted(&self, lease: &Lease) {
        if let Some(name) = &lease.metadata.name {
            self.entries().remove(name);
        }
    }

    fn resynced(&self, listed: Vec<Lease>) {
        let names: std::collections::BTreeSet<String> = listed
            .iter()
            .filter_map(|l| l.metadata.name.clone())
            .collect();
        self.entries().retain(|name, _| names.contains(name));
        for lease in listed {
            self.applied(lease);
        }
        self.inner.synced.store(true, Ordering::Release);
    }

    /// The verified record of ephemeral container `container` of the pod with UID `pod_uid`,
    /// as this replica's watch last saw it.
    pub fn cached(&self, pod_uid: &str, container: &str) -> Option<StopLease> {
        let mut entries = self.entries();
        let entry = entries.get_mut(&lease_name(pod_uid, container))?;
        self.check(entry);
        match &entry.verdict {
            Some(Ok(r)) if r.pod_uid == pod_uid && r.container == container => Some(r.clone()),
            _ => None,
        }
    }

    /// Every record the watch holds: the verified ones as `Ok`, and for the others what they
    /// claim to be about (for clean-up), with each Lease's name and resourceVersion.
    pub(crate) fn all(&self) -> Vec<(String, String, Result<StopLease, Option<StopLease>>)> {
        let mut entries = self.entries();
        let mut out = Vec::with_capacity(entries.len());
        for (name, entry) in entries.iter_mut() {
            self.check(entry);
            let rv = entry
                .lease
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default();
            let record = match &entry.verdict {
                Some(Ok(r)) => Ok(r.clone()),
                _ => Err(content(&entry.lease)),
            };
            out.push((name.clone(), rv, record));
        }
        out
    }

    /// The record of ephemeral container `container` of the pod with UID `pod_uid`, read from
    /// the cluster now; `None` when there is none or it does not verify (that is logged).
    pub async fn fetch(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> Result<Option<StopLease>, StorageError> {
        let name = lease_name(pod_uid, container);
        let Some(lease) = self.inner.api.get_opt(&name).await? else {
            return Ok(None);
        };
        Ok(self.verified(&lease, pod_uid, container))
    }

    /// `lease`'s record, when it verifies and is about this container.
    fn verified(&self, lease: &Lease, pod_uid: &str, container: &str) -> Option<StopLease> {
        let key = self.inner.key.get()?;
        match verify(lease, key) {
            Ok(r) if r.pod_uid == pod_uid && r.container == container => Some(r),
            Ok(_) => None,
            Err(why) => {
                tracing::debug!(
                    lease = lease.metadata.name.as_deref().unwrap_or_default(),
                    reason = why.describe(),
                    "a stop record was ignored: poddebug did not write it"
                );
                None
            }
        }
    }

    /// The key, or 503: a record cannot be made before it is loaded.
    fn key(&self) -> Result<&crate::record_key::RecordKey, StorageError> {
        self.inner.key.get().ok_or_else(|| {
            ApiError::ServiceUnavailable(
                "the server has not loaded its record key yet, so it cannot record a stop; try again"
                    .to_owned(),
            )
            .into()
        })
    }

    /// Record a requested stop. When a verified record of the same container exists already
    /// (an earlier stop), it is kept and answered (the earliest request bounds the stop);
    /// a record that does not verify is replaced. The record in force, and whether this call
    /// wrote it.
    pub(crate) async fn record_stop(
        &self,
        record: &StopLease,
    ) -> Result<(StopLease, bool), StorageError> {
        let key = self.key()?;
        let lease = to_lease(record, key);
        let name = record.lease_name();
        match self.inner.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.applied(created);
                return Ok((record.clone(), true));
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let existing = self.inner.api.get(&name).await?;
        if let Some(r) = self.verified(&existing, &record.pod_uid, &record.container) {
            return Ok((r, false));
        }
        let mut replacement = lease;
        replacement.metadata.resource_version = existing.metadata.resource_version.clone();
        let replaced = self
            .inner
            .api
            .replace(&name, &PostParams::default(), &replacement)
            .await?;
        self.applied(replaced);
        Ok((record.clone(), true))
    }

    /// Mark the container of `record` as reported unstoppable (module docs): its record is made
    /// (from `record`) or updated, in either case only if nobody changed it meanwhile.
    pub(crate) async fn report(&self, record: &StopLease) -> Result<Reported, StorageError> {
        let key = self.key()?;
        let name = record.lease_name();
        let existing = self.inner.api.get_opt(&name).await?;
        let (wanted, resource_version) = match &existing {
            None => (record.clone(), None),
            Some(lease) => match self.verified(lease, &record.pod_uid, &record.container) {
                Some(r) if r.unstoppable_since.is_some() => return Ok(Reported::Already(r)),
                // Keep who asked and when; add the report.
                Some(r) => (
                    StopLease {
                        unstoppable_since: record.unstoppable_since,
                        message: record.message.clone(),
                        ..r
                    },
                    lease.metadata.resource_version.clone(),
                ),
                None => (record.clone(), lease.metadata.resource_version.clone()),
            },
        };
        let mut lease = to_lease(&wanted, key);
        let written = match resource_version {
            None => self.inner.api.create(&PostParams::default(), &lease).await,
            Some(rv) => {
                lease.metadata.resource_version = Some(rv);
                self.inner
                    .api
                    .replace(&name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(l) => {
                self.applied(l);
                Ok(Reported::Now(wanted))
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(Reported::Raced),
            Err(e) => Err(e.into()),
        }
    }

    /// Delete the record `name` if it is still at `resource_version` (a record already gone or
    /// changed meanwhile is left as it is).
    pub(crate) async fn remove(&self, name: &str, resource_version: Option<&str>) {
        let params = DeleteParams {
            preconditions: resource_version.map(|rv| Preconditions {
                resource_version: Some(rv.to_owned()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self.inner.api.delete(name, &params).await {
            Ok(_) => {
                self.entries().remove(name);
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => {
                tracing::warn!(lease = name, error = %e, "could not remove a stop record; trying again later")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_key::RecordKey;

    fn record() -> StopLease {
        StopLease {
            namespace: "shop".into(),
            pod: "web".into(),
            pod_uid: "0f6e4a8c-5d4b-4b8e-9c1a-2a3b4c5d6e7f".into(),
            name: "dbg".into(),
            container: "dbg".into(),
            origin: StopOrigin::Delete,
            requested_by: "alice".into(),
            requested_at: "2026-01-02T03:04:05Z".parse().expect("timestamp"),
            grace_period_seconds: 10,
            unstoppable_since: None,
            message: None,
        }
    }

    #[test]
    fn a_signed_record_verifies_and_round_trips() {
        let key = RecordKey::from_bytes(&[3; 32]);
        let lease = to_lease(&record(), &key);
        let name = lease.metadata.name.clone().expect("name");
        assert!(name.starts_with("stop-") && name.len() == 45, "{name}");
        assert_eq!(verify(&lease, &key), Ok(record()));
        let labels = lease.metadata.labels.clone().expect("labels");
        assert_eq!(labels[STOP_RECORD_LABEL], "v1");
        assert_eq!(labels["poddebug.dev/pod"], "web");
    }

    #[test]
    fn forged_changed_or_moved_records_are_rejected() {
        let key = RecordKey::from_bytes(&[3; 32]);
        // Signed with another key (someone who can write Leases but not read the Secret).
        let forged = to_lease(&record(), &RecordKey::from_bytes(&[4; 32]));
        assert_eq!(verify(&forged, &key), Err(Rejection::BadMac));
        // A valid record whose content was edited.
        let mut edited = to_lease(&record(), &key);
        if let Some(a) = edited.metadata.annotations.as_mut() {
            let raw = a[RECORD_ANNOTATION].replace("alice", "mallory");
            a.insert(RECORD_ANNOTATION.into(), raw);
        }
        assert_eq!(verify(&edited, &key), Err(Rejection::BadMac));
        // No MAC at all.
        let mut bare = to_lease(&record(), &key);
        if let Some(a) = bare.metadata.annotations.as_mut() {
            a.remove(MAC_ANNOTATION);
        }
        assert_eq!(verify(&bare, &key), Err(Rejection::BadMac));
        // A valid record copied under the name of another container's record.
        let mut moved = to_lease(&record(), &key);
        moved.metadata.name = Some(lease_name(&record().pod_uid, "other"));
        assert_eq!(verify(&moved, &key), Err(Rejection::WrongName));
        // A record the MAC covers but that is not one (a session record signed for a stop).
        let mut garbage = to_lease(&record(), &key);
        let mac = key.sign(Purpose::Stop, b"{}");
        if let Some(a) = garbage.metadata.annotations.as_mut() {
            a.insert(RECORD_ANNOTATION.into(), "{}".into());
            a.insert(MAC_ANNOTATION.into(), mac);
        }
        assert_eq!(verify(&garbage, &key), Err(Rejection::Malformed));
        // A MAC made for another purpose over the same bytes.
        let mut replayed = to_lease(&record(), &key);
        if let Some(a) = replayed.metadata.annotations.as_mut() {
            let mac = key.sign(Purpose::Session, a[RECORD_ANNOTATION].as_bytes());
            a.insert(MAC_ANNOTATION.into(), mac);
        }
        assert_eq!(verify(&replayed, &key), Err(Rejection::BadMac));
    }

    #[test]
    fn names_depend_on_the_pod_uid_and_the_container() {
        let a = lease_name("uid-1", "dbg");
        assert_eq!(a, lease_name("uid-1", "dbg"));
        assert_ne!(
            a,
            lease_name("uid-2", "dbg"),
            "a pod made again is another pod"
        );
        assert_ne!(a, lease_name("uid-1", "dbg-x"));
        // No ambiguity from where one part ends.
        assert_ne!(lease_name("a", "bc"), lease_name("ab", "c"));
    }

    #[tokio::test]
    async fn records_from_the_watch_are_checked_once_and_counted_when_forged() {
        let key = RecordKey::from_bytes(&[3; 32]);
        let client = crate::testkube::FakeKube::default().client();
        let store = StopLeases::new(
            client,
            "poddebug-system",
            SharedRecordKey::default(),
            Counter::default(),
        );
        let mut forged = to_lease(&record(), &RecordKey::from_bytes(&[9; 32]));
        forged.metadata.resource_version = Some("1".into());
        // Before the key is loaded nothing is judged.
        store.applied(forged.clone());
        assert_eq!(store.rejected().get(), 0);
        let store = StopLeases {
            inner: Arc::new(Inner {
                api: store.inner.api.clone(),
                key: SharedRecordKey::loaded(key.clone()),
                rejected: Counter::default(),
                entries: Mutex::new(BTreeMap::new()),
                synced: AtomicBool::new(false),
            }),
        };
        store.applied(forged.clone());
        store.applied(forged.clone());
        assert_eq!(store.rejected().get(), 1, "once per version");
        assert_eq!(store.cached(&record().pod_uid, "dbg"), None);
        let mut good = to_lease(&record(), &key);
        good.metadata.resource_version = Some("2".into());
        store.applied(good);
        assert_eq!(store.cached(&record().pod_uid, "dbg"), Some(record()));
        assert_eq!(store.cached("another-uid", "dbg"), None);
    }
}
