//! A fake kube-apiserver on 127.0.0.1 over TLS, written from the reference notes and the live
//! answers in `live-ephemeral-statuses.md`: bearer-token and client-certificate authentication,
//! impersonation, RBAC through one policy closure, TokenReview, SubjectAccessReview, the
//! authentication ConfigMap, pods (create, get, list, watch, delete with preconditions,
//! ephemeral containers with kube's exact validation errors and Pod Security), nodes, events,
//! exec and logs, and where the API server is (the `kubernetes` Service, its EndpointSlices,
//! kubeadm's `cluster-info`).
//!
//! Dropping the [`FakeKube`] stops the listener, every connection and every stream.

mod apiservices;
mod attach;
mod authn;
mod authz;
mod configmaps;
mod discovery;
mod ephemeral;
mod events;
mod eviction;
mod exec;
mod faults;
mod godump;
mod http;
mod kubelet;
mod leases;
mod logs;
mod nodes;
mod pod_create;
mod pods;
mod psa;
mod router;
mod sar;
mod secrets;
mod selector;
mod services;
mod smp;
mod state;
mod status;
mod tls;
mod tokenreview;
mod validation;
mod watch;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;

pub use attach::{
    DROP_AFTER_ANNOTATION as ATTACH_DROP_AFTER_ANNOTATION,
    EXIT_CODE_ANNOTATION as ATTACH_EXIT_CODE_ANNOTATION,
    EXIT_TERMINATES_ANNOTATION as ATTACH_EXIT_TERMINATES_ANNOTATION,
    REFUSE_ANNOTATION as ATTACH_REFUSE_ANNOTATION, SHARED_ANNOTATION as ATTACH_SHARED_ANNOTATION,
};
pub use authn::{ADMIN_TOKEN, PODDEBUG_TOKEN, PODDEBUG_UID, PODDEBUG_USER, UserInfo};
pub use authz::{Attributes, Policy};
pub use configmaps::{AUTH_NAME, AUTH_NAMESPACE};
pub use eviction::Pdb;
pub use exec::{ExecBehaviour, ExecRecord};
pub use kubelet::ContainerState;
pub use nodes::FAKE_NODE;
pub use sar::SarRecord;
pub use services::KUBERNETES_SERVICE_IP;
pub use status::{FieldError, FieldErrorType, KubeStatus};
pub use tls::{certs, provider};
pub use validation::MIRROR_POD_ANNOTATION;

use crate::pki::{TempDir, TestPki};
use state::{Kind, Shared, State};

/// Resolves when the fake shuts down (the flag turns `true` or its sender is gone).
pub(crate) async fn stopped(rx: &mut tokio_watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// How an authentication/authorization service of the fake misbehaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outage {
    /// Answers normally.
    #[default]
    None,
    /// 503 ServiceUnavailable Status.
    Unavailable,
    /// Closes the connection without an answer.
    CloseConnection,
    /// Answers 503 only after 60 s (or at shutdown): for client timeouts.
    Hang,
}

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct RequestRecord {
    /// Method.
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    /// Effective user (after impersonation); empty if authentication failed.
    pub user: String,
    /// Effective groups.
    pub groups: Vec<String>,
    /// The authenticated caller before impersonation.
    pub authenticated_as: String,
    /// Every `Impersonate-*` header (lower-case name, value).
    pub impersonation: Vec<(String, String)>,
    /// `Content-Type` as sent.
    pub content_type: Option<String>,
    /// HTTP version.
    pub version: ::http::Version,
    /// Status code answered (101 for upgrades).
    pub status: u16,
    /// When it arrived, on the fake's request clock (which ticks at every arrival and every
    /// answer, so only the order of these counts, never the time between them).
    pub arrived: u64,
    /// When it was answered, on the same clock.
    pub answered: u64,
}

impl RequestRecord {
    /// Whether the two were in flight together: each arrived before the other was answered.
    pub fn overlaps(&self, other: &RequestRecord) -> bool {
        self.arrived < other.answered && other.arrived < self.answered
    }
}

/// The fake kube-apiserver. See the module documentation.
pub struct FakeKube {
    shared: Arc<Shared>,
    addr: SocketAddr,
    pki: TestPki,
    dir: TempDir,
    shutdown: tokio_watch::Sender<bool>,
}

impl std::fmt::Debug for FakeKube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeKube")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

impl FakeKube {
    /// Starts a fake with a fresh [`TestPki`].
    pub async fn start() -> FakeKube {
        FakeKube::start_with_pki(TestPki::new()).await
    }

    /// Starts a fake whose serving certificate comes from `pki`'s cluster CA, which trusts
    /// client certificates of `pki`'s client CA, and whose authentication ConfigMap
    /// publishes `pki`'s CAs.
    pub async fn start_with_pki(pki: TestPki) -> FakeKube {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let config = tls::server_config(&pki.localhost_serving_cert(), pki.client_ca_pem());
        let (shutdown, shutdown_rx) = tokio_watch::channel(false);
        let state = State::new(authn::default_tokens(), authz::allow_all());
        let shared = Arc::new(Shared::new(state, shutdown_rx.clone()));
        tokio::spawn(tls::serve(listener, config, shared.clone(), shutdown_rx));
        let fake = FakeKube {
            shared,
            addr,
            pki,
            dir: TempDir::new("fake-kube"),
            shutdown,
        };
        for ns in ["default", "kube-public", "kube-system", "poddebug-system"] {
            fake.add_namespace(ns, &[]);
        }
        fake.add_node(FAKE_NODE, &[]);
        fake.shared
            .mutate(|s| s.put(Kind::Service, services::kubernetes_service(addr.port())));
        let data = fake.pki.auth_configmap_data();
        fake.set_auth_configmap(data);
        fake
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// PEM of the CA that signed the serving certificate (the PKI's cluster CA).
    pub fn ca_pem(&self) -> &str {
        self.pki.cluster_ca_pem()
    }

    /// The PKI the fake uses.
    pub fn pki(&self) -> &TestPki {
        &self.pki
    }

    /// Writes a kubeconfig that points at the fake with its CA and `token`; returns its path
    /// (inside a directory removed with the fake).
    pub fn write_kubeconfig(&self, token: &str) -> PathBuf {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem());
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url(), "certificate-authority-data": ca}}],
            "users": [{"name": "fake-user", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake-user", "namespace": "default"}}],
            "current-context": "fake",
            "preferences": {},
        });
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.dir.path().join(format!("kubeconfig-{n}.json"));
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(&config).unwrap_or_default(),
        )
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// A client for the fake that authenticates with `token`.
    pub fn client(&self, token: &str) -> crate::client::TestClient {
        crate::client::TestClient::builder(&self.url())
            .ca_pem(self.ca_pem())
            .bearer_token(token)
            .build()
    }

    // ---- identities and policy ----

    /// Adds (or replaces) a bearer token.
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.shared.lock().tokens.insert(token.to_owned(), user);
    }

    /// Sets the RBAC policy for the fake's own endpoints and its SubjectAccessReview answers.
    pub fn set_policy(&self, policy: impl Fn(&Attributes) -> bool + Send + Sync + 'static) {
        self.shared.lock().policy = Arc::new(policy);
    }

    /// Back to "allow everything".
    pub fn allow_all(&self) {
        self.shared.lock().policy = authz::allow_all();
    }

    /// `true`: SubjectAccessReviews get 503.
    pub fn set_authorizer_down(&self, down: bool) {
        self.set_authorizer_outage(if down {
            Outage::Unavailable
        } else {
            Outage::None
        });
    }

    /// How SubjectAccessReviews fail.
    pub fn set_authorizer_outage(&self, outage: Outage) {
        self.shared.lock().settings.authorizer = outage;
    }

    /// Answers the next `count` requests `method` on a path containing `path_contains` with
    /// an error Status of `code` (429 adds `Retry-After: 1`) instead of serving them.
    pub fn inject_faults(
        &self,
        method: ::http::Method,
        path_contains: &str,
        code: u16,
        count: usize,
    ) {
        self.shared.lock().settings.faults.push(faults::Fault {
            method,
            path_contains: path_contains.to_owned(),
            code,
            remaining: count,
        });
    }

    /// From now on, every request with `method` whose path (with query) contains
    /// `path_contains` is answered `delay` later (a slow kubelet, a slow events API).
    pub fn delay_requests(&self, method: ::http::Method, path_contains: &str, delay: Duration) {
        self.shared.lock().settings.delays.push(faults::Delay {
            method,
            path_contains: path_contains.to_owned(),
            delay,
        });
    }

    /// Faults armed by [`FakeKube::inject_faults`] that were not used up yet.
    pub fn pending_faults(&self) -> usize {
        self.shared
            .lock()
            .settings
            .faults
            .iter()
            .map(|f| f.remaining)
            .sum()
    }

    /// How TokenReviews fail.
    pub fn set_authenticator_outage(&self, outage: Outage) {
        self.shared.lock().settings.authenticator = outage;
    }

    // ---- configmaps and namespaces ----

    /// Replaces the data of `kube-system/extension-apiserver-authentication` (new
    /// resourceVersion, MODIFIED event).
    pub fn set_auth_configmap(&self, data: BTreeMap<String, String>) {
        self.set_configmap(AUTH_NAMESPACE, AUTH_NAME, data);
    }

    /// Creates or replaces a ConfigMap.
    pub fn set_configmap(&self, namespace: &str, name: &str, data: BTreeMap<String, String>) {
        self.shared.mutate(|s| {
            let previous = s.get(Kind::ConfigMap, namespace, name).cloned();
            let cm = configmaps::configmap(namespace, name, &data, previous.as_ref());
            s.put(Kind::ConfigMap, cm);
        });
    }

    /// Deletes a ConfigMap (DELETED event).
    pub fn delete_configmap(&self, namespace: &str, name: &str) -> bool {
        self.shared
            .mutate(|s| s.remove(Kind::ConfigMap, namespace, name).is_some())
    }

    /// Publishes `kube-public/cluster-info` as kubeadm does, naming `server` (absent until
    /// then, as on a cluster kubeadm did not set up).
    pub fn set_cluster_info(&self, server: &str) {
        let data = services::cluster_info_data(server, self.ca_pem());
        self.set_configmap("kube-public", "cluster-info", data);
    }

    // ---- where the API server is ----

    /// Creates or replaces an EndpointSlice of the `kubernetes` Service (`name` is `kubernetes`,
    /// or `kubernetes-v4`/`-v6`), as kube-apiserver's endpoint reconciler writes it. There is
    /// none at first: the fake, like the real test cluster, listens on loopback only.
    pub fn set_kubernetes_endpoint_slice(
        &self,
        name: &str,
        address_type: &str,
        addresses: &[&str],
        port: u16,
    ) {
        let slice = services::kubernetes_endpoint_slice(name, address_type, addresses, port);
        self.shared.mutate(|s| s.put(Kind::EndpointSlice, slice));
    }

    /// Deletes an EndpointSlice of the `kubernetes` Service.
    pub fn delete_kubernetes_endpoint_slice(&self, name: &str) -> bool {
        self.shared
            .mutate(|s| s.remove(Kind::EndpointSlice, "default", name).is_some())
    }

    /// Creates or replaces a namespace with labels (e.g. `pod-security.kubernetes.io/enforce`).
    pub fn add_namespace(&self, name: &str, labels: &[(&str, &str)]) {
        self.shared
            .mutate(|s| s.put(Kind::Namespace, pods::namespace_object(name, labels)));
    }

    // ---- nodes ----

    /// Creates or replaces a Ready node with labels (besides the kubelet's own). [`FAKE_NODE`],
    /// where the fake runs every pod that names no node, is there from the start.
    pub fn add_node(&self, name: &str, labels: &[(&str, &str)]) -> Value {
        self.shared
            .mutate(|s| s.put(Kind::Node, nodes::node_object(name, labels)))
    }

    // ---- pods ----

    /// Stores a pod the way it would look once running: uid, resourceVersion,
    /// creationTimestamp, container defaults, node, and (unless `status` is set) phase Running
    /// with running container statuses. The namespace is created if missing.
    pub fn add_pod(&self, pod: Pod) -> Pod {
        let value = serde_json::to_value(pod).expect("Pod serializes");
        serde_json::from_value(self.add_pod_json(value)).expect("stored Pod deserializes")
    }

    /// [`FakeKube::add_pod`] for a JSON pod.
    pub fn add_pod_json(&self, pod: Value) -> Value {
        let pod = kubelet::complete_new_pod(pod);
        let ns = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        self.shared.mutate(|s| {
            if s.get(Kind::Namespace, "", &ns).is_none() {
                s.put(Kind::Namespace, pods::namespace_object(&ns, &[]));
            }
            s.put(Kind::Pod, pod)
        })
    }

    /// A simple running pod: containers `app` (image busybox) and volume `data` (emptyDir),
    /// like the live test's pod `target`.
    pub fn add_simple_pod(&self, namespace: &str, name: &str) -> Value {
        self.add_pod_json(json!({
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {
                "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
                "volumes": [{"name": "data", "emptyDir": {}}],
            },
        }))
    }

    /// Changes a stored pod with `f` (new resourceVersion, MODIFIED event). `None` if missing.
    pub fn update_pod(
        &self,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        self.shared.mutate(|s| {
            let mut pod = s.get(Kind::Pod, namespace, name)?.clone();
            f(&mut pod);
            Some(s.put(Kind::Pod, pod))
        })
    }

    /// Deletes a pod (DELETED event).
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        self.shared
            .mutate(|s| s.remove(Kind::Pod, namespace, name).is_some())
    }

    /// A stored pod.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.pod_json(namespace, name)
            .and_then(|v| serde_json::from_value(v).ok())
    }

    /// A stored pod as JSON.
    pub fn pod_json(&self, namespace: &str, name: &str) -> Option<Value> {
        self.shared.lock().get(Kind::Pod, namespace, name).cloned()
    }

    /// Every stored pod of `namespace` (or of every namespace), by namespace and name.
    pub fn pods_json(&self, namespace: Option<&str>) -> Vec<Value> {
        self.shared.lock().list(Kind::Pod, namespace)
    }

    /// Sets a container's state (regular, init or ephemeral); `false` if there is no such
    /// pod or container.
    pub fn set_ec_state(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        state: ContainerState,
    ) -> bool {
        self.shared
            .mutate(|s| kubelet::set_container_state(s, namespace, pod, container, &state))
    }

    /// The current state key (`waiting`, `running`, `terminated`) of a container.
    pub fn container_state(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Option<&'static str> {
        let s = self.shared.lock();
        kubelet::container_state(s.get(Kind::Pod, namespace, pod)?, container)
    }

    // ---- behaviour ----

    /// Whether the fake plays the kubelet for new ephemeral containers (default on).
    pub fn set_kubelet_simulation(&self, on: bool) {
        self.shared.lock().settings.simulate_kubelet = on;
    }

    /// Delay from `ContainerCreating` to running (default 50 ms).
    pub fn set_start_delay(&self, delay: Duration) {
        self.shared.lock().settings.start_delay = delay;
    }

    /// Makes pulls of `image` fail (`ErrImagePull`, then `ImagePullBackOff`).
    pub fn add_bad_image(&self, image: &str) {
        self.shared
            .lock()
            .settings
            .bad_images
            .insert(image.to_owned());
    }

    /// Makes `/version` report `1.<minor>`; the fake's own rules stay those of 1.36, as on a
    /// cluster whose feature gates differ from its version's defaults.
    pub fn set_reported_minor_version(&self, minor: u32) {
        self.shared.lock().settings.reported_minor = minor;
    }

    /// Turns the `ContainerStopSignals` feature gate on (it is off by default on 1.36).
    pub fn set_stop_signals_gate(&self, on: bool) {
        self.shared.lock().settings.stop_signals_gate = on;
    }

    /// `true`: `pods/ephemeralcontainers` does not exist (404 with empty details.name).
    pub fn set_ephemeral_containers_disabled(&self, disabled: bool) {
        self.shared.lock().settings.ec_disabled = disabled;
    }

    /// What exec does.
    pub fn set_exec_behaviour(&self, behaviour: ExecBehaviour) {
        self.shared.lock().settings.exec = behaviour;
    }

    /// While `hold`, open watches of `resource` (such as `"leases"`) deliver none of its
    /// changes: the watchers' caches lag the store, as a replica's does behind another's
    /// write. Releasing sends what was held, in order. Reads and writes answer as ever.
    pub fn hold_watch_events(&self, resource: &str, hold: bool) {
        let kind = state::Kind::from_resource(resource)
            .unwrap_or_else(|| panic!("the fake stores no {resource:?}"));
        let mut s = self.shared.lock();
        if hold {
            s.settings.held_watches.insert(kind);
        } else {
            s.settings.held_watches.remove(&kind);
        }
        drop(s);
        self.shared.notify();
    }

    /// Period of BOOKMARK events (default 1 s).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.shared.lock().settings.bookmark_interval = interval;
    }

    /// How many changes the watch history keeps (default 1000).
    pub fn set_history_limit(&self, limit: usize) {
        self.shared.lock().settings.history_limit = limit;
    }

    /// Forgets the whole watch history: a watch from any older resourceVersion gets 410.
    pub fn compact(&self) {
        self.shared.lock().compact();
    }

    /// The current (last handed out) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    /// Appends text to a container's log (followers get it at once).
    pub fn append_log(&self, namespace: &str, pod: &str, container: &str, text: &str) {
        self.shared.mutate(|s| {
            s.logs
                .entry((namespace.to_owned(), pod.to_owned(), container.to_owned()))
                .or_default()
                .extend(logs::lines(text))
        });
    }

    // ---- records ----

    /// Every request so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().requests.clone()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// Every SubjectAccessReview so far.
    pub fn sars(&self) -> Vec<SarRecord> {
        self.shared.lock().sars.clone()
    }

    /// Forgets the recorded SubjectAccessReviews.
    pub fn clear_sars(&self) {
        self.shared.lock().sars.clear();
    }

    /// Number of TokenReviews answered.
    pub fn token_reviews_count(&self) -> u64 {
        self.shared.lock().token_reviews
    }

    /// The Lease `namespace/name`, if any.
    pub fn lease(&self, namespace: &str, name: &str) -> Option<Value> {
        self.shared
            .lock()
            .get(Kind::Lease, namespace, name)
            .cloned()
    }

    /// APIService `name`, if it exists.
    pub fn apiservice(&self, name: &str) -> Option<Value> {
        self.shared.lock().get(Kind::ApiService, "", name).cloned()
    }

    /// Store an APIService as an operator's `kubectl apply` would.
    pub fn put_apiservice(&self, apiservice: Value) -> Value {
        self.shared.mutate(|s| s.put(Kind::ApiService, apiservice))
    }

    /// Secret `namespace/name`, if it exists.
    pub fn secret(&self, namespace: &str, name: &str) -> Option<Value> {
        self.shared
            .lock()
            .get(Kind::Secret, namespace, name)
            .cloned()
    }

    /// Store `secret` as an operator's `kubectl apply` would (a new resourceVersion).
    pub fn put_secret(&self, secret: Value) -> Value {
        self.shared.mutate(|s| s.put(Kind::Secret, secret))
    }

    /// Every Lease of `namespace`.
    pub fn leases(&self, namespace: &str) -> Vec<Value> {
        self.shared.lock().list(Kind::Lease, Some(namespace))
    }

    /// Store `lease` as another client would have created or changed it.
    pub fn put_lease(&self, lease: Value) -> Value {
        self.shared.mutate(|s| s.put(Kind::Lease, lease))
    }

    /// Make `holder` the holder of Lease `namespace/name`, renewed now, as another replica
    /// taking it over would (a new resourceVersion, so a stale update conflicts).
    pub fn set_lease_holder(&self, namespace: &str, name: &str, holder: &str) -> bool {
        self.shared.mutate(|s| {
            let Some(mut lease) = s.get(Kind::Lease, namespace, name).cloned() else {
                return false;
            };
            lease["spec"]["holderIdentity"] = Value::from(holder);
            lease["spec"]["renewTime"] = Value::from(jiff::Timestamp::now().to_string());
            lease["spec"]["leaseDurationSeconds"] = Value::from(3600);
            s.put(Kind::Lease, lease);
            true
        })
    }

    /// Every event object posted (both APIs).
    pub fn events(&self) -> Vec<Value> {
        self.shared
            .lock()
            .events
            .iter()
            .map(|e| e.object.clone())
            .collect()
    }

    /// Add (or replace, by namespace and name) a PodDisruptionBudget that the Eviction API
    /// honours, as its status says.
    pub fn set_pdb(&self, pdb: Pdb) {
        let mut s = self.shared.lock();
        s.pdbs
            .retain(|p| (&p.namespace, &p.name) != (&pdb.namespace, &pdb.name));
        s.pdbs.push(pdb);
    }

    /// Remove a PodDisruptionBudget; whether there was one.
    pub fn delete_pdb(&self, namespace: &str, name: &str) -> bool {
        let mut s = self.shared.lock();
        let before = s.pdbs.len();
        s.pdbs
            .retain(|p| (p.namespace.as_str(), p.name.as_str()) != (namespace, name));
        s.pdbs.len() != before
    }

    /// Every exec accepted.
    pub fn execs(&self) -> Vec<ExecRecord> {
        self.shared.lock().execs.clone()
    }

    /// Polls `condition` every 10 ms until it holds or `timeout` passes.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        condition: impl Fn(&FakeKube) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if condition(self) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
