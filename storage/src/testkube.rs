//! A minimal in-memory kube-apiserver for the unit tests of [`KubeBackend`](crate::KubeBackend):
//! a `tower` service behind a real `kube::Client`, answering the few pod, event and watch calls
//! the backend makes, with kube-apiserver's Status texts and optimistic concurrency on the
//! `pods/ephemeralcontainers` PUT. Every request is recorded (method, path and query, headers).
//! The full fake kube-apiserver of the end-to-end suite lives in `poddebug-tests`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::future::BoxFuture;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod};
use serde_json::{Value, json};

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub(crate) method: Method,
    /// Path and query.
    pub(crate) uri: String,
    pub(crate) headers: HeaderMap,
}

/// The sending side of one watch response body.
type WatchTx = mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>;

#[derive(Default)]
struct State {
    pods: BTreeMap<(String, String), Pod>,
    rv: u64,
    requests: Vec<Recorded>,
    events: Vec<Value>,
    watchers: Vec<(Option<String>, WatchTx)>,
    /// Delay before answering a pod GET (to make concurrent creates interleave).
    get_delay: Duration,
    /// What a `resourceVersion=0` GET sees (kube-apiserver's watch cache, behind): pods as
    /// they were when [`FakeKube::freeze_watch_cache`] was called; none = current.
    watch_cache: Option<BTreeMap<(String, String), Pod>>,
    /// Delay before storing and answering an Event (a slow events API).
    events_delay: Duration,
    /// Answer 410 to the next watch.
    gone_once: bool,
    /// What an exec is answered (no WebSocket here): code and message.
    exec_error: Option<(u16, String)>,
    /// Never answer execs (a kubelet that does not respond).
    exec_hangs: bool,
    /// Answer lists and watches of pods 403 (a caller with `get` only).
    refuse_lists: bool,
}

/// The fake; cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct FakeKube {
    state: Arc<Mutex<State>>,
}

type Body = BoxBody<Bytes, Infallible>;

fn full(v: &Value) -> Body {
    http_body_util::Full::new(Bytes::from(serde_json::to_vec(v).unwrap_or_default())).boxed()
}

fn reply(code: StatusCode, v: &Value) -> Response<Body> {
    let mut r = Response::new(full(v));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn status(code: u16, reason: &str, message: &str, details: Value) -> Response<Body> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": code});
    reply(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &body,
    )
}

fn not_found(name: &str) -> Response<Body> {
    status(
        404,
        "NotFound",
        &format!("pods \"{name}\" not found"),
        json!({"name": name, "kind": "pods"}),
    )
}

fn query(uri: &http::Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.replace("%3D", "=").replace("%2C", ",")))
        .collect()
}

impl FakeKube {
    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A `kube::Client` talking to this fake.
    pub(crate) fn client(&self) -> kube::Client {
        let fake = self.clone();
        let svc = tower::service_fn(move |req: Request<kube::client::Body>| {
            let fake = fake.clone();
            async move { Ok::<_, Infallible>(fake.handle(req).await) }
        });
        kube::Client::new(svc, "default")
    }

    /// Add a pod (its resourceVersion is set).
    pub(crate) fn add_pod(&self, mut pod: Pod) {
        let mut s = self.lock();
        s.rv += 1;
        pod.metadata.resource_version = Some(s.rv.to_string());
        let key = (
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.name.clone().unwrap_or_default(),
        );
        s.pods.insert(key, pod);
    }

    /// A pod as stored.
    pub(crate) fn pod(&self, ns: &str, name: &str) -> Option<Pod> {
        self.lock()
            .pods
            .get(&(ns.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Set the state of ephemeral container `ec` and tell the watchers.
    pub(crate) fn set_ec_state(&self, ns: &str, name: &str, ec: &str, state: ContainerState) {
        let mut s = self.lock();
        s.rv += 1;
        let rv = s.rv.to_string();
        let Some(pod) = s.pods.get_mut(&(ns.to_owned(), name.to_owned())) else {
            return;
        };
        pod.metadata.resource_version = Some(rv);
        let statuses = pod
            .status
            .get_or_insert_default()
            .ephemeral_container_statuses
            .get_or_insert_default();
        statuses.retain(|st| st.name != ec);
        statuses.push(ContainerStatus {
            name: ec.to_owned(),
            state: Some(state),
            ..Default::default()
        });
        let pod = pod.clone();
        Self::notify(&mut s, "MODIFIED", &pod);
    }

    /// Delete a pod and tell the watchers.
    pub(crate) fn delete_pod(&self, ns: &str, name: &str) {
        let mut s = self.lock();
        s.rv += 1;
        let rv = s.rv.to_string();
        if let Some(mut pod) = s.pods.remove(&(ns.to_owned(), name.to_owned())) {
            pod.metadata.resource_version = Some(rv);
            Self::notify(&mut s, "DELETED", &pod);
        }
    }

    /// Answer pod GETs after `d`.
    pub(crate) fn set_get_delay(&self, d: Duration) {
        self.lock().get_delay = d;
    }

    /// From now on, `resourceVersion=0` reads answer the pods as they are now (a watch cache
    /// that stopped following), while quorum reads answer the current ones.
    pub(crate) fn freeze_watch_cache(&self) {
        let mut s = self.lock();
        s.watch_cache = Some(s.pods.clone());
    }

    pub(crate) fn set_events_delay(&self, d: Duration) {
        self.lock().events_delay = d;
    }

    /// Make the next watch answer an ERROR event 410.
    pub(crate) fn expire_next_watch(&self) {
        self.lock().gone_once = true;
    }

    /// Answer execs with this error Status.
    pub(crate) fn set_exec_error(&self, code: u16, message: &str) {
        self.lock().exec_error = Some((code, message.to_owned()));
    }

    /// Answer lists and watches of pods 403.
    pub(crate) fn set_refuse_lists(&self) {
        self.lock().refuse_lists = true;
    }

    /// Never answer execs.
    pub(crate) fn set_exec_hangs(&self) {
        self.lock().exec_hangs = true;
    }

    /// Requests seen so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// Events created so far.
    pub(crate) fn events(&self) -> Vec<Value> {
        self.lock().events.clone()
    }

    fn notify(s: &mut State, kind: &str, pod: &Pod) {
        let line = json!({"type": kind, "object": pod});
        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
        bytes.push(b'\n');
        let name = pod.metadata.name.clone().unwrap_or_default();
        s.watchers.retain(|(filter, tx)| {
            if filter.as_ref().is_some_and(|f| *f != name) {
                return !tx.is_closed();
            }
            tx.unbounded_send(Ok(Frame::data(Bytes::from(bytes.clone()))))
                .is_ok()
        });
    }

    fn handle(&self, req: Request<kube::client::Body>) -> BoxFuture<'static, Response<Body>> {
        let this = self.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            this.lock().requests.push(Recorded {
                method: parts.method.clone(),
                uri: parts.uri.to_string(),
                headers: parts.headers.clone(),
            });
            let path: Vec<String> = parts
                .uri
                .path()
                .trim_matches('/')
                .split('/')
                .map(str::to_owned)
                .collect();
            let q = query(&parts.uri);
            let p: Vec<&str> = path.iter().map(String::as_str).collect();
            match (parts.method.clone(), p.as_slice()) {
                (Method::GET, ["version"]) => reply(
                    StatusCode::OK,
                    &json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0", "gitCommit": "", "gitTreeState": "",
                        "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}),
                ),
                (Method::GET, ["api", "v1", "namespaces", ns, "pods", name]) => {
                    let delay = this.lock().get_delay;
                    tokio::time::sleep(delay).await;
                    let from_cache = q.get("resourceVersion").is_some_and(|v| v == "0");
                    let cached = this
                        .lock()
                        .watch_cache
                        .as_ref()
                        .map(|pods| pods.get(&((*ns).to_owned(), (*name).to_owned())).cloned());
                    let found = match cached {
                        Some(cached) if from_cache => cached,
                        _ => this.pod(ns, name),
                    };
                    match found {
                        Some(pod) => reply(StatusCode::OK, &json!(pod)),
                        None => not_found(name),
                    }
                }
                (Method::GET, ["api", "v1", "namespaces", ns, "pods"]) => {
                    this.list_or_watch(Some(ns), &q)
                }
                (Method::GET, ["api", "v1", "pods"]) => this.list_or_watch(None, &q),
                (
                    Method::PUT,
                    [
                        "api",
                        "v1",
                        "namespaces",
                        ns,
                        "pods",
                        name,
                        "ephemeralcontainers",
                    ],
                ) => {
                    this.put_ephemeral(ns, name, &body, q.get("dryRun").is_some_and(|v| v == "All"))
                }
                (Method::PATCH, ["api", "v1", "namespaces", ns, "pods", name]) => {
                    this.patch_pod(ns, name, &body)
                }
                (Method::GET, ["api", "v1", "namespaces", _, "pods", _, "exec"]) => {
                    if this.lock().exec_hangs {
                        futures::future::pending::<()>().await;
                    }
                    let (code, message) = this
                        .lock()
                        .exec_error
                        .clone()
                        .unwrap_or((400, "exec is not supported by this fake".to_owned()));
                    status(code, "InternalError", &message, json!({}))
                }
                (Method::POST, ["api", "v1", "namespaces", _, "events"]) => {
                    let delay = this.lock().events_delay;
                    tokio::time::sleep(delay).await;
                    let ev: Value = serde_json::from_slice(&body).unwrap_or_default();
                    this.lock().events.push(ev.clone());
                    reply(StatusCode::CREATED, &ev)
                }
                _ => status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                    json!({}),
                ),
            }
        })
    }

    fn list_or_watch(&self, ns: Option<&str>, q: &BTreeMap<String, String>) -> Response<Body> {
        let name_filter = q
            .get("fieldSelector")
            .and_then(|f| f.strip_prefix("metadata.name="))
            .map(str::to_owned);
        let mut s = self.lock();
        if s.refuse_lists {
            return status(
                403,
                "Forbidden",
                "pods is forbidden: User \"alice\" cannot list resource \"pods\"",
                json!({}),
            );
        }
        if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
            let (tx, rx) = mpsc::unbounded();
            if std::mem::take(&mut s.gone_once) {
                let line = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": "too old resource version: 1 (9)", "reason": "Expired", "code": 410}});
                let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
                bytes.push(b'\n');
                let _ = tx.unbounded_send(Ok(Frame::data(Bytes::from(bytes))));
                drop(tx);
            } else {
                s.watchers.push((name_filter, tx));
            }
            let mut r = Response::new(BodyExt::boxed(StreamBody::new(rx)));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            return r;
        }
        let items: Vec<&Pod> = s
            .pods
            .values()
            .filter(|p| ns.is_none_or(|ns| p.metadata.namespace.as_deref() == Some(ns)))
            .filter(|p| {
                name_filter
                    .as_deref()
                    .is_none_or(|n| p.metadata.name.as_deref() == Some(n))
            })
            .collect();
        reply(
            StatusCode::OK,
            &json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": s.rv.to_string()}, "items": items}),
        )
    }

    /// The update, or with `dry_run` the pod it would store (nothing changes, no event).
    fn put_ephemeral(&self, ns: &str, name: &str, body: &[u8], dry_run: bool) -> Response<Body> {
        let Ok(new) = serde_json::from_slice::<Pod>(body) else {
            return status(400, "BadRequest", "bad body", json!({}));
        };
        let mut s = self.lock();
        if let Some(stored) = s.pods.get(&(ns.to_owned(), name.to_owned()))
            && let Some(refused) = refuse_ephemeral_update(stored, &new, name)
        {
            return refused;
        }
        if dry_run {
            let Some(mut pod) = s.pods.get(&(ns.to_owned(), name.to_owned())).cloned() else {
                return not_found(name);
            };
            pod.spec.get_or_insert_default().ephemeral_containers =
                new.spec.and_then(|s| s.ephemeral_containers);
            return reply(StatusCode::OK, &json!(pod));
        }
        s.rv += 1;
        let rv = s.rv.to_string();
        let Some(pod) = s.pods.get_mut(&(ns.to_owned(), name.to_owned())) else {
            return not_found(name);
        };
        if new.metadata.resource_version.is_some()
            && new.metadata.resource_version != pod.metadata.resource_version
        {
            return status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on pods \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                ),
                json!({"name": name, "kind": "pods"}),
            );
        }
        pod.spec.get_or_insert_default().ephemeral_containers =
            new.spec.and_then(|s| s.ephemeral_containers);
        pod.metadata.resource_version = Some(rv);
        let pod = pod.clone();
        Self::notify(&mut s, "MODIFIED", &pod);
        reply(StatusCode::OK, &json!(pod))
    }

    fn patch_pod(&self, ns: &str, name: &str, body: &[u8]) -> Response<Body> {
        let patch: Value = serde_json::from_slice(body).unwrap_or_default();
        let mut s = self.lock();
        s.rv += 1;
        let rv = s.rv.to_string();
        let Some(pod) = s.pods.get_mut(&(ns.to_owned(), name.to_owned())) else {
            return not_found(name);
        };
        if let Some(want) = patch
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            && Some(want) != pod.metadata.resource_version.as_deref()
        {
            return status(409, "Conflict", "the object has been modified", json!({}));
        }
        let mut doc = json!(pod);
        json_patch::merge(&mut doc, &patch);
        let Ok(mut patched) = serde_json::from_value::<Pod>(doc) else {
            return status(422, "Invalid", "bad patch", json!({}));
        };
        patched.metadata.resource_version = Some(rv);
        *pod = patched.clone();
        Self::notify(&mut s, "MODIFIED", &patched);
        reply(StatusCode::OK, &json!(patched))
    }
}

/// What kube-apiserver checks of a `pods/ephemeralcontainers` update against the stored pod
/// besides the resourceVersion: the uid, a precondition (409), and that every existing
/// ephemeral container is kept unchanged (422 on `spec.ephemeralContainers`).
fn refuse_ephemeral_update(stored: &Pod, new: &Pod, name: &str) -> Option<Response<Body>> {
    if let Some(uid) = new.metadata.uid.as_deref().filter(|u| !u.is_empty())
        && Some(uid) != stored.metadata.uid.as_deref()
    {
        return Some(status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on pods \"{name}\": Precondition failed: UID in precondition: {uid}"
            ),
            json!({"name": name, "kind": "pods"}),
        ));
    }
    let list = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.clone())
            .unwrap_or_default()
    };
    let new_list = list(new);
    for old in list(stored) {
        let verb = match new_list.iter().find(|e| e.name == old.name) {
            None => "removed",
            Some(e) if *e != old => "changed",
            Some(_) => continue,
        };
        let message = format!(
            "Forbidden: existing ephemeral containers {:?} may not be {verb}\n",
            old.name
        );
        return Some(status(
            422,
            "Invalid",
            &format!("Pod {name:?} is invalid: spec.ephemeralContainers: {message}"),
            json!({"name": name, "kind": "Pod", "causes": [
                {"reason": "FieldValueForbidden", "message": message, "field": "spec.ephemeralContainers"}
            ]}),
        ));
    }
    None
}
