//! `--recording-quota-per-user`: how many bytes one user's recordings may hold in the store.
//!
//! What a user holds is computed from the store itself, never from memory: one listing of every
//! object gives each recording's size ([`Store::sizes`]: its parts and metadata as the store
//! counts them), and each recording's metadata, when it verifies, names its user (metadata that
//! does not verify counts toward nobody). A recording's user never changes, so the metadata of
//! each is read once per replica and kept while the recording exists; the sizes are scanned
//! again when the last scan is older than [`TTL`], by one task at a time, in the background
//! (a request waits for it only as long as it says).
//!
//! At an attach, strict: a user who holds the quota or more is refused (403) before the
//! container is reached. best-effort: the session goes on, and its recording is capped at
//! what remained of the quota (marked truncated when it gets there; a user already over gets a
//! recording with only its header and the marker). Concurrent sessions of one user each get
//! what remained when they started, and what was written since the last scan is not yet
//! counted: together they can pass the quota by about that much. Each session's own size is
//! still bounded by `--max-recording-bytes`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use super::store::{RecordingKey, Store, StoreError};

/// A scan older than this is made again before it is relied on.
pub const TTL: Duration = Duration::from_secs(30);
/// A scan at least this old is made again once a recording of this replica ended since.
const RESCAN_AFTER_CHANGE: Duration = Duration::from_secs(2);
/// Longest a scan may take.
const SCAN_LIMIT: Duration = Duration::from_secs(120);
/// Metadata objects read at once by a scan.
const READS: usize = 16;

/// What one scan found.
#[derive(Debug, Default)]
pub struct Usage {
    /// Bytes per user.
    pub by_user: HashMap<String, u64>,
    /// When the scan ended.
    pub at: Option<Instant>,
    /// False when the scan stopped at its object limit (usage is then under-counted).
    pub complete: bool,
    /// How many recordings of this replica had ended when the scan began.
    pub ended_before: u64,
}

/// The quota and the store's usage (module docs).
#[derive(Debug)]
pub struct Quota {
    per_user: u64,
    store: Store,
    usage: Mutex<Arc<Usage>>,
    /// The user of each recording seen (None: its metadata did not verify).
    users: tokio::sync::Mutex<HashMap<RecordingKey, Option<String>>>,
    /// A scan finished.
    scanned: tokio::sync::Notify,
    scanning: std::sync::atomic::AtomicBool,
    /// How many recordings of this replica ended so far.
    ended: std::sync::atomic::AtomicU64,
}

impl Quota {
    /// A quota of `per_user` bytes on the recordings in `store`.
    pub fn new(per_user: u64, store: Store) -> Arc<Quota> {
        Arc::new(Quota {
            per_user,
            store,
            usage: Mutex::new(Arc::new(Usage::default())),
            users: tokio::sync::Mutex::new(HashMap::new()),
            scanned: tokio::sync::Notify::new(),
            scanning: std::sync::atomic::AtomicBool::new(false),
            ended: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The quota in bytes.
    pub fn per_user(&self) -> u64 {
        self.per_user
    }

    fn current(&self) -> Arc<Usage> {
        self.usage
            .lock()
            .map(|u| u.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// What the store's recordings of `user` hold, from a scan at most [`TTL`] old, waiting
    /// up to `wait` for one; `None` when there is none in time (or the scan fails).
    pub async fn used_by(self: &Arc<Self>, user: &str, wait: Duration) -> Option<u64> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let scanned = self.scanned.notified();
            tokio::pin!(scanned);
            scanned.as_mut().enable();
            let usage = self.current();
            if self.fresh(&usage) {
                return Some(usage.by_user.get(user).copied().unwrap_or(0));
            }
            self.refresh();
            if tokio::time::timeout_at(deadline, scanned).await.is_err() {
                return None;
            }
        }
    }

    fn fresh(&self, usage: &Usage) -> bool {
        let changed = self.ended.load(std::sync::atomic::Ordering::Acquire) != usage.ended_before;
        usage.at.is_some_and(|at| {
            at.elapsed() < TTL && (!changed || at.elapsed() < RESCAN_AFTER_CHANGE)
        })
    }

    /// A recording of this replica ended (the store's usage changed): the next check scans
    /// again, once the last scan is [`RESCAN_AFTER_CHANGE`] old.
    pub fn invalidate(&self) {
        self.ended.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Start a scan now unless the last one is fresh (or one runs).
    pub fn warm(self: &Arc<Self>) {
        if !self.fresh(&self.current()) {
            self.refresh();
        }
    }

    /// Start a scan unless one runs.
    fn refresh(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.scanning.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        // Recordings that end from now on may be after this scan's listing.
        let ended_before = self.ended.load(Ordering::Acquire);
        tokio::spawn(async move {
            match tokio::time::timeout(SCAN_LIMIT, me.scan(ended_before)).await {
                Ok(Ok(usage)) => {
                    if !usage.complete {
                        tracing::warn!(
                            objects = super::store::MAX_SCANNED,
                            "the recording store holds more objects than a quota scan reads: usage is under-counted"
                        );
                    }
                    if let Ok(mut u) = me.usage.lock() {
                        *u = Arc::new(usage);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the recording store could not be scanned for --recording-quota-per-user")
                }
                Err(_) => tracing::warn!(
                    limit = SCAN_LIMIT.as_secs(),
                    "a scan of the recording store for --recording-quota-per-user took too long"
                ),
            }
            me.scanning.store(false, Ordering::Release);
            me.scanned.notify_waiters();
        });
    }

    /// One scan: every recording's size, attributed to the user its verified metadata names.
    async fn scan(&self, ended_before: u64) -> Result<Usage, StoreError> {
        let sizes = self.store.sizes().await?;
        let mut users = self.users.lock().await;
        // Recordings gone from the store are forgotten.
        users.retain(|k, _| sizes.bytes.contains_key(k));
        let unknown: Vec<RecordingKey> = sizes
            .bytes
            .keys()
            .filter(|k| !users.contains_key(*k))
            .cloned()
            .collect();
        let store = &self.store;
        let mut found = futures::stream::iter(unknown)
            .map(|k| async move {
                let m = store.read_meta(&k.0, &k.1, &k.2).await;
                (k, m)
            })
            .buffer_unordered(READS);
        while let Some((k, m)) = found.next().await {
            match m {
                Ok(m) => {
                    users.insert(k, m.filter(|m| m.verified).map(|m| m.user));
                }
                // Deleted since the listing (retention), or a failed read: asked again next time.
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let mut by_user: HashMap<String, u64> = HashMap::new();
        for (k, bytes) in &sizes.bytes {
            if let Some(Some(user)) = users.get(k) {
                *by_user.entry(user.clone()).or_default() += bytes;
            }
        }
        Ok(Usage {
            by_user,
            at: Some(Instant::now()),
            complete: sizes.complete,
            ended_before,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::store::Metadata;
    use bytes::Bytes;
    use poddebug_storage::UntrustedRecords;
    use poddebug_storage::record_key::{RecordKey, SharedRecordKey};

    #[tokio::test]
    async fn usage_is_what_the_store_holds_per_verified_user() {
        let dir = std::env::temp_dir().join(format!("poddebug-quota-{:x}", rand::random::<u64>()));
        let store = Store::dir(&dir).unwrap().authenticated(
            SharedRecordKey::loaded(RecordKey::generate()),
            UntrustedRecords::default(),
        );
        let rec = |user: &str, pod: &str| Metadata {
            id: super::super::store::new_id(jiff::Timestamp::now()),
            namespace: "ns".into(),
            pod: pod.into(),
            user: user.into(),
            start: "2026-01-01T00:00:00Z".into(),
            ..Default::default()
        };
        let (a1, a2, b) = (rec("alice", "p1"), rec("alice", "p2"), rec("bob", "p1"));
        for (m, n) in [(&a1, 1000), (&a2, 2000), (&b, 300)] {
            store.write_meta(m).await.unwrap();
            store
                .write_part(m, 0, Bytes::from(vec![b'x'; n]))
                .await
                .unwrap();
        }
        // Metadata nobody signed: its bytes are nobody's.
        let forged = rec("carol", "p1");
        std::fs::write(
            dir.join("ns")
                .join("p1")
                .join(format!("{}.json", forged.id)),
            serde_json::to_vec(&forged).unwrap(),
        )
        .unwrap();
        let meta_len = |m: &Metadata| {
            std::fs::metadata(dir.join("ns").join(&m.pod).join(format!("{}.json", m.id)))
                .unwrap()
                .len()
        };
        let quota = Quota::new(1 << 20, store.clone());
        let wait = Duration::from_secs(10);
        assert_eq!(
            quota.used_by("alice", wait).await,
            Some(3000 + meta_len(&a1) + meta_len(&a2))
        );
        assert_eq!(quota.used_by("bob", wait).await, Some(300 + meta_len(&b)));
        assert_eq!(quota.used_by("carol", wait).await, Some(0));
        assert_eq!(quota.used_by("nobody", wait).await, Some(0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
