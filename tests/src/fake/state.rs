//! The fake's storage, shared by every connection: objects keyed like etcd keys, one global
//! resourceVersion counter, a bounded event history for watches, and the knobs tests turn.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::authn::UserInfo;
use super::authz::Policy;
use super::exec::{ExecBehaviour, ExecRecord};
use super::logs::LogLine;
use super::sar::SarRecord;
use super::{Outage, RequestRecord};

/// The kinds the fake stores and can list or watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// core/v1 Namespace (cluster-scoped).
    Namespace,
    /// core/v1 Pod.
    Pod,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// coordination.k8s.io/v1 Lease.
    Lease,
    /// core/v1 Node (cluster-scoped).
    Node,
    /// core/v1 Secret.
    Secret,
    /// core/v1 Service.
    Service,
    /// discovery.k8s.io/v1 EndpointSlice.
    EndpointSlice,
    /// apiregistration.k8s.io/v1 APIService (cluster-scoped).
    ApiService,
}

impl Kind {
    /// The resource name in URLs.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Namespace => "namespaces",
            Kind::Pod => "pods",
            Kind::ConfigMap => "configmaps",
            Kind::Lease => "leases",
            Kind::Node => "nodes",
            Kind::Secret => "secrets",
            Kind::Service => "services",
            Kind::EndpointSlice => "endpointslices",
            Kind::ApiService => "apiservices",
        }
    }

    /// The kind of a resource name in URLs.
    pub fn from_resource(resource: &str) -> Option<Kind> {
        [
            Kind::Namespace,
            Kind::Pod,
            Kind::ConfigMap,
            Kind::Lease,
            Kind::Node,
            Kind::Secret,
            Kind::Service,
            Kind::EndpointSlice,
            Kind::ApiService,
        ]
        .into_iter()
        .find(|k| k.resource() == resource)
    }

    /// `kind` of one object.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::Pod => "Pod",
            Kind::ConfigMap => "ConfigMap",
            Kind::Lease => "Lease",
            Kind::Node => "Node",
            Kind::Secret => "Secret",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::ApiService => "APIService",
        }
    }

    /// `apiVersion` of the kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Lease => "coordination.k8s.io/v1",
            Kind::EndpointSlice => "discovery.k8s.io/v1",
            Kind::ApiService => "apiregistration.k8s.io/v1",
            _ => "v1",
        }
    }

    /// The API group (`""` for core).
    pub fn group(self) -> &'static str {
        self.api_version()
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// Whether objects live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Namespace | Kind::Node | Kind::ApiService)
    }
}

/// One entry of the watch history (what etcd's watch would replay).
#[derive(Clone, Debug)]
pub struct HistoryEntry {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// Kind of object.
    pub kind: Kind,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub event_type: &'static str,
    /// The object after the change (for DELETED: the last state, with the new rv).
    pub object: Value,
    /// The object before the change, for MODIFIED/DELETED (watch filters need it).
    pub old: Option<Value>,
}

/// An Event object stored by `POST .../events`.
#[derive(Clone, Debug)]
pub struct StoredEvent {
    /// `v1` or `events.k8s.io/v1`.
    pub api_version: String,
    /// Namespace from the URL.
    pub namespace: String,
    /// The object as stored (with name, uid, resourceVersion filled).
    pub object: Value,
}

/// Behaviour switches.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `pods/ephemeralcontainers` answers 404 with empty details.
    pub ec_disabled: bool,
    /// Play kubelet: give new ECs a status and start them.
    pub simulate_kubelet: bool,
    /// Delay between ContainerCreating and running (or the pull error).
    pub start_delay: Duration,
    /// Images that fail to pull.
    pub bad_images: BTreeSet<String>,
    /// SubjectAccessReview availability.
    pub authorizer: Outage,
    /// TokenReview availability.
    pub authenticator: Outage,
    /// What an exec does.
    pub exec: ExecBehaviour,
    /// Period of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// How many changes the watch history keeps.
    pub history_limit: usize,
    /// The minor version `/version` reports (major 1); the rules stay those of 1.36.
    pub reported_minor: u32,
    /// `ContainerStopSignals` is on: `lifecycle.stopSignal` is kept (and then forbidden).
    pub stop_signals_gate: bool,
    /// Armed faults ([`super::FakeKube::inject_faults`]).
    pub faults: Vec<super::faults::Fault>,
    /// Armed delays ([`super::FakeKube::delay_requests`]).
    pub delays: Vec<super::faults::Delay>,
    /// Kinds whose changes open watches do not deliver yet
    /// ([`super::FakeKube::hold_watch_events`]): a watch cache that lags the store.
    pub held_watches: BTreeSet<Kind>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            ec_disabled: false,
            simulate_kubelet: true,
            start_delay: Duration::from_millis(50),
            bad_images: BTreeSet::new(),
            authorizer: Outage::None,
            authenticator: Outage::None,
            exec: ExecBehaviour::Stops,
            bookmark_interval: Duration::from_secs(1),
            history_limit: 1000,
            reported_minor: 36,
            stop_signals_gate: false,
            faults: Vec::new(),
            delays: Vec::new(),
            held_watches: BTreeSet::new(),
        }
    }
}

/// Everything behind the mutex.
pub struct State {
    /// Last resourceVersion handed out.
    pub rv: u64,
    /// Highest resourceVersion dropped from the history (watches from below it get 410).
    pub compacted_rv: u64,
    objects: BTreeMap<(Kind, String, String), Value>,
    /// Watch history, oldest first.
    pub history: VecDeque<HistoryEntry>,
    /// Events posted by clients.
    pub events: Vec<StoredEvent>,
    /// Bearer tokens.
    pub tokens: BTreeMap<String, UserInfo>,
    /// RBAC.
    pub policy: Policy,
    /// Every request seen.
    pub requests: Vec<RequestRecord>,
    /// Every SubjectAccessReview answered.
    pub sars: Vec<SarRecord>,
    /// TokenReviews answered.
    pub token_reviews: u64,
    /// The request clock: ticks once at each request's arrival and once at its answer.
    pub clock: u64,
    /// Every exec started.
    pub execs: Vec<ExecRecord>,
    /// Container logs by (namespace, pod, container).
    pub logs: BTreeMap<(String, String, String), Vec<LogLine>>,
    /// What each container wrote to its termination message file, by (namespace, pod,
    /// container): reported as `terminated.message` once it terminates, as the kubelet does.
    pub termination_logs: BTreeMap<(String, String, String), String>,
    /// PodDisruptionBudgets the Eviction API honours.
    pub pdbs: Vec<super::eviction::Pdb>,
    /// Switches.
    pub settings: Settings,
}

impl State {
    /// Empty storage with the given tokens and policy.
    pub fn new(tokens: BTreeMap<String, UserInfo>, policy: Policy) -> State {
        State {
            rv: 100,
            compacted_rv: 0,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            events: Vec::new(),
            tokens,
            policy,
            requests: Vec::new(),
            sars: Vec::new(),
            token_reviews: 0,
            clock: 0,
            execs: Vec::new(),
            logs: BTreeMap::new(),
            termination_logs: BTreeMap::new(),
            pdbs: Vec::new(),
            settings: Settings::default(),
        }
    }

    /// Ticks the request clock; its new time.
    pub fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Hands out the next resourceVersion.
    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// One object.
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&(kind, namespace.to_owned(), name.to_owned()))
    }

    /// Every object of a kind, in one namespace or all, sorted by namespace and name.
    pub fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((k, ns, _), _)| *k == kind && namespace.is_none_or(|n| n == ns))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Stores `object` (its metadata names it), stamps a new resourceVersion and records
    /// ADDED or MODIFIED. Returns the stored object.
    pub fn put(&mut self, kind: Kind, mut object: Value) -> Value {
        let rv = self.next_rv();
        let (namespace, name) = names(&object);
        set_rv(&mut object, rv);
        let key = (
            kind,
            if kind.namespaced() {
                namespace.clone()
            } else {
                String::new()
            },
            name,
        );
        let old = self.objects.insert(key, object.clone());
        let event_type = if old.is_some() { "MODIFIED" } else { "ADDED" };
        self.record(HistoryEntry {
            rv,
            kind,
            event_type,
            object: object.clone(),
            old,
        });
        object
    }

    /// Removes an object and records DELETED.
    pub fn remove(&mut self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        let mut old = self
            .objects
            .remove(&(kind, namespace.to_owned(), name.to_owned()))?;
        let previous = old.clone();
        let rv = self.next_rv();
        set_rv(&mut old, rv);
        self.record(HistoryEntry {
            rv,
            kind,
            event_type: "DELETED",
            object: old.clone(),
            old: Some(previous),
        });
        Some(old)
    }

    fn record(&mut self, entry: HistoryEntry) {
        self.history.push_back(entry);
        while self.history.len() > self.settings.history_limit.max(1) {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted_rv = dropped.rv;
            }
        }
    }

    /// Drops the whole watch history, as an etcd compaction would.
    pub fn compact(&mut self) {
        if let Some(last) = self.history.back() {
            self.compacted_rv = last.rv;
        }
        self.history.clear();
    }
}

fn set_rv(object: &mut Value, rv: u64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
    }
}

/// `(namespace, name)` of an object.
pub fn names(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_owned(),
        meta["name"].as_str().unwrap_or_default().to_owned(),
    )
}

/// What one attached stream echoed, for the other streams attached to the same container:
/// (the stream that wrote it, the bytes).
pub type TerminalOutput = (u64, Vec<u8>);

/// The state plus the signals around it.
pub struct Shared {
    state: Mutex<State>,
    changes: watch::Sender<u64>,
    /// Becomes `true` when the FakeKube is dropped.
    pub shutdown: watch::Receiver<bool>,
    /// The output of each attached container's "process", which every stream attached to it
    /// sees (as the kubelet's attach shares a process's stdout), by (namespace, pod, container).
    terminals:
        Mutex<BTreeMap<(String, String, String), tokio::sync::broadcast::Sender<TerminalOutput>>>,
}

impl Shared {
    /// Wraps a state.
    pub fn new(state: State, shutdown: watch::Receiver<bool>) -> Shared {
        Shared {
            state: Mutex::new(state),
            changes: watch::Sender::new(0),
            shutdown,
            terminals: Mutex::new(BTreeMap::new()),
        }
    }

    /// The output bus of an attached container (made on first use).
    pub fn terminal(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> tokio::sync::broadcast::Sender<TerminalOutput> {
        self.terminals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((namespace.to_owned(), pod.to_owned(), container.to_owned()))
            .or_insert_with(|| tokio::sync::broadcast::channel(1024).0)
            .clone()
    }

    /// Locks the state (a panic in another holder does not poison it for the tests).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` under the lock, then wakes every watcher and log follower.
    pub fn mutate<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = f(&mut self.lock());
        self.notify();
        r
    }

    /// Wakes every watcher and log follower.
    pub fn notify(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes whenever the state does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// `metav1.Time` now (`2006-01-02T15:04:05Z`).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A random-looking UUID (v4 layout) that is unique within the process.
pub fn new_uid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    let mut x = t ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id()) << 32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let a = next();
    let b = next();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
}
