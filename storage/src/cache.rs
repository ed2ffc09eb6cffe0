//! The pod cache: one kube-runtime reflector per server over every pod of the cluster, from
//! which lists and watches of debug containers are served, so that N clients listing or
//! watching cost one upstream watch instead of N cluster-wide LISTs and WATCHes.
//!
//! Memory: every pod must be watched to learn which carry ephemeral containers, but only those
//! are kept, stripped to what a debug container object and the field selectors need (see
//! [`strip`]). Ephemeral containers are append-only, so a pod without them can be dropped
//! safely: it reappears with its first one as an update.
//!
//! Changes: every applied or deleted pod is numbered by its resourceVersion, kept in a bounded
//! history (for watches that resume from a resourceVersion) and broadcast to running watches.
//! A resourceVersion older than the history is 410 Expired, as from kube-apiserver's watch
//! cache. After the reflector re-lists (its watch expired), the history restarts there, and
//! running watches get the difference (pods gone are deleted, the others applied again).
//! ResourceVersions are compared as integers, as kube-apiserver's watch cache does with etcd's.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::broadcast;

use crate::stop_record::STOP_REQUESTS_ANNOTATION;

/// Changes kept for watches that resume from a resourceVersion.
const HISTORY: usize = 4096;
/// Changes buffered per running watch before it is ended as too slow (it then re-watches from
/// its last resourceVersion, from the history).
const BROADCAST: usize = 1024;

/// One change of a cached pod.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    /// The pod's resourceVersion as a number.
    pub(crate) rv: u64,
    /// The pod (stripped), in its new or final state.
    pub(crate) pod: Arc<Pod>,
    /// Whether the pod was deleted.
    pub(crate) deleted: bool,
    /// The same pod as the cache held it just before this change (none when it is new to the
    /// cache): a watch resumed from a resourceVersion knows from it what its client already
    /// has, so a change of a known debug container is MODIFIED, not ADDED.
    pub(crate) before: Option<Arc<Pod>>,
}

/// What the cache has seen: the newest resourceVersion and the recent changes.
#[derive(Debug, Default)]
struct Log {
    /// Newest resourceVersion seen.
    rv: u64,
    /// Oldest resourceVersion a watch may resume from.
    oldest: u64,
    /// Newest resourceVersion among the dropped pods of a list in progress.
    listing: u64,
    changes: VecDeque<Change>,
}

/// The resourceVersion of `pod` as a number (0 when absent or not a number).
pub(crate) fn rv_of(pod: &Pod) -> u64 {
    pod.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn has_debug_containers(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|e| !e.is_empty())
}

/// Keep of a pod only what debug container objects, stop, and selectors read.
pub(crate) fn strip(pod: &mut Pod) {
    let m = &mut pod.metadata;
    m.managed_fields = None;
    m.owner_references = None;
    m.finalizers = None;
    m.generate_name = None;
    m.generation = None;
    m.annotations = m.annotations.take().and_then(|mut a| {
        a.retain(|k, _| k == STOP_REQUESTS_ANNOTATION);
        (!a.is_empty()).then_some(a)
    });
    if let Some(spec) = pod.spec.take() {
        pod.spec = Some(PodSpec {
            containers: spec
                .containers
                .into_iter()
                .map(|c| Container {
                    name: c.name,
                    ..Default::default()
                })
                .collect(),
            ephemeral_containers: spec.ephemeral_containers,
            node_name: spec.node_name,
            restart_policy: spec.restart_policy,
            scheduler_name: spec.scheduler_name,
            service_account_name: spec.service_account_name,
            host_network: spec.host_network,
            host_pid: spec.host_pid,
            share_process_namespace: spec.share_process_namespace,
            ..Default::default()
        });
    }
    if let Some(status) = pod.status.take() {
        pod.status = Some(PodStatus {
            phase: status.phase,
            pod_ip: status.pod_ip,
            nominated_node_name: status.nominated_node_name,
            ephemeral_container_statuses: status.ephemeral_container_statuses,
            ..Default::default()
        });
    }
}

struct Inner {
    store: Store<Pod>,
    synced: AtomicBool,
    log: Mutex<Log>,
    /// The newest version of every cached pod, as its changes carried it (the same `Arc`s as
    /// the history, so this costs a map entry per pod, not a copy).
    last: Mutex<HashMap<(String, String), Arc<Pod>>>,
    tx: broadcast::Sender<Change>,
}

/// The shared pod cache (cheap to clone).
#[derive(Clone)]
pub struct PodCache {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PodCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodCache")
            .field("pods", &self.inner.store.len())
            .field("synced", &self.is_synced())
            .finish()
    }
}

/// A resourceVersion the cache can no longer serve from.
#[derive(Debug)]
pub(crate) struct TooOld;

impl PodCache {
    /// Start the reflector over every pod `client` can see (the server's own identity). The
    /// task runs as long as the process, retrying with kube-runtime's default backoff.
    pub fn start(client: kube::Client) -> PodCache {
        let (store, writer) = reflector::store();
        let (tx, _) = broadcast::channel(BROADCAST);
        let cache = PodCache {
            inner: Arc::new(Inner {
                store,
                synced: AtomicBool::new(false),
                log: Mutex::new(Log::default()),
                last: Mutex::new(HashMap::new()),
                tx,
            }),
        };
        let api: Api<Pod> = Api::all(client);
        let counter = cache.clone();
        let events = watcher(api, watcher::Config::default().page_size(500))
            .modify(strip)
            .filter(move |ev| {
                // A pod without debug containers changes nothing the cache serves, but its
                // resourceVersion is the newest the cache is at: every earlier event has gone
                // through the whole stream already (it is pulled one event at a time). During a
                // (re-)list it only counts once the list is complete.
                let keep = match ev {
                    Ok(watcher::Event::Apply(p) | watcher::Event::Delete(p))
                        if !has_debug_containers(p) =>
                    {
                        counter.advance(rv_of(p));
                        false
                    }
                    Ok(watcher::Event::InitApply(p)) if !has_debug_containers(p) => {
                        counter.note_listed(rv_of(p));
                        false
                    }
                    _ => true,
                };
                futures::future::ready(keep)
            })
            .default_backoff()
            .reflect(writer);
        let me = cache.clone();
        tokio::spawn(async move {
            futures::pin_mut!(events);
            let mut before_init: Vec<Arc<Pod>> = Vec::new();
            let mut listed: Vec<Arc<Pod>> = Vec::new();
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(watcher::Event::Init) => {
                        before_init = me.inner.store.state();
                        listed.clear();
                    }
                    Ok(watcher::Event::InitApply(p)) => listed.push(Arc::new(p)),
                    Ok(watcher::Event::InitDone) => {
                        me.resynced(&before_init, &listed);
                        before_init.clear();
                        listed.clear();
                    }
                    Ok(watcher::Event::Apply(p)) => me.record(Arc::new(p), false),
                    Ok(watcher::Event::Delete(p)) => me.record(Arc::new(p), true),
                    Err(e) => tracing::warn!(error = %e, "pod watch failed; retrying"),
                }
            }
        });
        cache
    }

    /// Whether the first list completed (readiness waits for it).
    pub fn is_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.inner
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn last(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Pod>>> {
        self.inner
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remember `pod` as the newest version (or forget it, deleted); the version it replaces.
    fn replace_last(&self, pod: &Arc<Pod>, deleted: bool) -> Option<Arc<Pod>> {
        let key = (
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.name.clone().unwrap_or_default(),
        );
        let mut last = self.last();
        if deleted {
            last.remove(&key)
        } else {
            last.insert(key, pod.clone())
        }
    }

    /// Number a change, keep it in the history, and tell running watches.
    fn record(&self, pod: Arc<Pod>, deleted: bool) {
        let rv = rv_of(&pod);
        let before = self.replace_last(&pod, deleted);
        let change = Change {
            rv,
            pod,
            deleted,
            before,
        };
        {
            let mut log = self.log();
            log.rv = log.rv.max(rv);
            log.changes.push_back(change.clone());
            while log.changes.len() > HISTORY {
                if let Some(old) = log.changes.pop_front() {
                    log.oldest = log.oldest.max(old.rv);
                }
            }
        }
        let _ = self.inner.tx.send(change);
    }

    /// After a (re-)list: the history restarts at the list, and running watches are told
    /// what changed meanwhile.
    fn resynced(&self, before: &[Arc<Pod>], listed: &[Arc<Pod>]) {
        let rv = listed.iter().map(|p| rv_of(p)).max().unwrap_or(0);
        let first = !self.is_synced();
        {
            let mut log = self.log();
            log.rv = log.rv.max(rv).max(log.listing);
            log.listing = 0;
            log.oldest = log.rv;
            log.changes.clear();
        }
        if first {
            for p in listed {
                self.replace_last(p, false);
            }
        } else {
            let present: HashSet<(Option<&str>, Option<&str>)> = listed
                .iter()
                .map(|p| (p.metadata.namespace.as_deref(), p.metadata.name.as_deref()))
                .collect();
            for gone in before.iter().filter(|p| {
                !present.contains(&(p.metadata.namespace.as_deref(), p.metadata.name.as_deref()))
            }) {
                let before = self.replace_last(gone, true);
                let _ = self.inner.tx.send(Change {
                    rv,
                    pod: gone.clone(),
                    deleted: true,
                    before,
                });
            }
            for p in listed {
                let before = self.replace_last(p, false);
                let _ = self.inner.tx.send(Change {
                    rv,
                    pod: p.clone(),
                    deleted: false,
                    before,
                });
            }
        }
        self.inner.synced.store(true, Ordering::Release);
        tracing::info!(pods = listed.len(), "pod cache synced");
    }

    /// The cached pods and a resourceVersion they are at least as new as.
    pub(crate) fn snapshot(&self) -> (Vec<Arc<Pod>>, u64) {
        // The resourceVersion first: the store is then at least that new.
        let rv = self.resource_version();
        (self.inner.store.state(), rv)
    }

    /// The newest resourceVersion seen.
    pub(crate) fn resource_version(&self) -> u64 {
        self.log().rv
    }

    /// A pod of a list in progress that is not kept: the list is at least at `rv`.
    fn note_listed(&self, rv: u64) {
        let mut log = self.log();
        log.listing = log.listing.max(rv);
    }

    /// The cache is at least at `rv` (a change it does not keep).
    fn advance(&self, rv: u64) {
        let mut log = self.log();
        log.rv = log.rv.max(rv);
    }

    /// Live changes from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.inner.tx.subscribe()
    }

    /// Changes after `rv`, for a watch resuming there; call after [`Self::subscribe`] so that
    /// nothing falls between the two (a change in both is harmless: watches diff).
    pub(crate) fn since(&self, rv: u64) -> Result<Vec<Change>, TooOld> {
        let log = self.log();
        if rv < log.oldest {
            return Err(TooOld);
        }
        Ok(log.changes.iter().filter(|c| c.rv > rv).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::pod;

    #[test]
    fn stripping_keeps_what_debug_containers_need() {
        let mut p = pod("web", &[("dbg", None, "running")]);
        p.metadata.annotations = Some(
            [
                ("big".to_owned(), "x".repeat(1000)),
                (STOP_REQUESTS_ANNOTATION.to_owned(), "{}".to_owned()),
            ]
            .into(),
        );
        let before = crate::read::objects_of(&p, None);
        strip(&mut p);
        assert_eq!(crate::read::objects_of(&p, None), before);
        let annotations = p.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.len(), 1);
        assert!(has_debug_containers(&p));
        assert!(!has_debug_containers(&pod("plain", &[])));
    }
}
