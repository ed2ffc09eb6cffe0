//! `DebugContainers`: the handle every verb hangs off, like kube-rs's `Api<K>`.

use std::time::Duration;

use futures::{AsyncBufRead, Stream, StreamExt};
use kube::api::ListParams;
use kube::runtime::wait::{self, await_condition};
use kube::runtime::{WatchStreamExt, watcher};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use poddebug_types::api::KIND_POD_DEBUG_CONTAINER;
use poddebug_types::resource;
use poddebug_types::{
    API_VERSION, DebugPhase, DebugProfileList, PodDebugContainer, PodDebugContainerList,
};
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::params::{CreateParams, LogParams};
use crate::streams::DebugPod;

/// Prefix of every path of the API.
pub(crate) const GV: &str = "/apis/poddebug.dev/v1alpha1";

/// A cheap, cloneable handle on the debug containers of one namespace, or of all namespaces
/// (then only [`list`](Self::list), [`watch`](Self::watch) and [`profiles`](Self::profiles)
/// work).
#[derive(Clone)]
pub struct DebugContainers {
    pub(crate) client: kube::Client,
    namespace: Option<String>,
}

impl std::fmt::Debug for DebugContainers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugContainers")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// One JSON request and its decoded answer (a refusal is [`Error::Api`]).
pub(crate) async fn request_json<T: DeserializeOwned>(
    client: &kube::Client,
    method: http::Method,
    uri: String,
    body: Vec<u8>,
) -> Result<T> {
    let mut req = http::Request::builder().method(method).uri(uri);
    if !body.is_empty() {
        req = req.header(http::header::CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(body)
        .map_err(|e| Error::InvalidParams(e.to_string()))?;
    let text = client.request_text(req).await?;
    serde_json::from_str(&text).map_err(Error::Decode)
}

/// What [`esc`] escapes: everything but RFC 3986's unreserved characters, so that names (DNS
/// labels and subdomains) go as they are.
const ESCAPED: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Escape one path segment or query value (`.` and `..`, which would walk the path, entirely).
pub(crate) fn esc(s: &str) -> String {
    if s == "." || s == ".." {
        return s.replace('.', "%2E");
    }
    utf8_percent_encode(s, ESCAPED).to_string()
}

impl DebugContainers {
    /// The debug containers of namespace `ns`.
    pub fn new(client: kube::Client, ns: &str) -> Self {
        DebugContainers {
            client,
            namespace: Some(ns.to_owned()),
        }
    }

    /// The debug containers of every namespace (list and watch only).
    pub fn all(client: kube::Client) -> Self {
        DebugContainers {
            client,
            namespace: None,
        }
    }

    /// The debug containers of the client's default namespace (the kubeconfig context's).
    pub fn default_namespaced(client: kube::Client) -> Self {
        let ns = client.default_namespace().to_owned();
        DebugContainers::new(client, &ns)
    }

    /// The namespace, `None` for all namespaces.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The underlying client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The live sessions on the debug containers of the same namespace (or of all namespaces):
    /// list, watch, terminate.
    pub fn sessions(&self) -> crate::Sessions {
        match &self.namespace {
            Some(ns) => crate::Sessions::new(self.client.clone(), ns),
            None => crate::Sessions::all(self.client.clone()),
        }
    }

    fn ns(&self, verb: &'static str) -> Result<&str> {
        self.namespace
            .as_deref()
            .ok_or(Error::NamespaceRequired(verb))
    }

    fn pod_path(&self, verb: &'static str, pod: &str) -> Result<String> {
        Ok(format!(
            "{GV}/namespaces/{}/pods/{}",
            esc(self.ns(verb)?),
            esc(pod)
        ))
    }

    fn list_path(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{GV}/namespaces/{}/poddebugcontainers", esc(ns)),
            None => format!("{GV}/poddebugcontainers"),
        }
    }

    async fn request<T: DeserializeOwned>(
        &self,
        method: http::Method,
        uri: String,
        body: Vec<u8>,
    ) -> Result<T> {
        request_json(&self.client, method, uri, body).await
    }

    /// Adds a debug container to running pod `pod`. Its name is `debug.metadata.name`; without
    /// one the server generates `debugger-xxxxx`, as `kubectl debug` does. `apiVersion` and
    /// `kind` are filled in when empty.
    pub async fn create(
        &self,
        pod: &str,
        debug: &PodDebugContainer,
        params: &CreateParams,
    ) -> Result<PodDebugContainer> {
        let mut path = format!("{}/debug", self.pod_path("create", pod)?);
        if let Some(name) = debug.metadata.name.as_deref().filter(|n| !n.is_empty()) {
            path.push('/');
            path.push_str(&esc(name));
        }
        let mut query = Vec::new();
        if params.wait {
            query.push("wait=true".to_owned());
            if let Some(t) = params.timeout {
                query.push(format!("timeoutSeconds={}", t.as_secs().max(1)));
            }
        }
        if params.dry_run {
            query.push("dryRun=All".to_owned());
        }
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query.join("&"));
        }
        let mut body = debug.clone();
        if body.api_version.is_empty() {
            body.api_version = API_VERSION.to_owned();
        }
        if body.kind.is_empty() {
            body.kind = KIND_POD_DEBUG_CONTAINER.to_owned();
        }
        let body = serde_json::to_vec(&body).map_err(Error::Decode)?;
        self.request(http::Method::POST, path, body).await
    }

    /// Debug container `name` of pod `pod`, with its current status.
    pub async fn get(&self, pod: &str, name: &str) -> Result<PodDebugContainer> {
        let path = format!("{}/debug/{}", self.pod_path("get", pod)?, esc(name));
        self.request(http::Method::GET, path, Vec::new()).await
    }

    /// Every debug container of pod `pod` (including those other tools such as `kubectl debug`
    /// added). Object names are the debug containers' names.
    pub async fn list_in_pod(&self, pod: &str) -> Result<PodDebugContainerList> {
        let path = format!("{}/debug", self.pod_path("list", pod)?);
        self.request(http::Method::GET, path, Vec::new()).await
    }

    /// The debug containers of the namespace, or of all namespaces. Label selectors apply to
    /// the pods; object names are `POD.NAME`.
    pub async fn list(&self, params: &ListParams) -> Result<PodDebugContainerList> {
        let req = kube::api::Request::new(self.list_path())
            .list(params)
            .map_err(|e| Error::InvalidParams(e.to_string()))?;
        let text = self.client.request_text(req).await?;
        serde_json::from_str(&text).map_err(Error::Decode)
    }

    /// kube-rs's `Api` over the `poddebugcontainers` collection of the namespace (or of all
    /// namespaces): `get`, `list`, `watch` and kube-runtime's `watcher`, `reflector` and
    /// `await_condition` work on it. Objects there are named `POD.NAME` (see
    /// [`poddebug_types::resource`]); create, stop, attach and logs are this handle's.
    pub fn api(&self) -> kube::Api<PodDebugContainer> {
        match &self.namespace {
            Some(ns) => kube::Api::namespaced(self.client.clone(), ns),
            None => kube::Api::all(self.client.clone()),
        }
    }

    /// Watch the debug containers of the namespace (or of all namespaces) with kube-runtime's
    /// [`watcher`](kube::runtime::watcher()): the current objects first (`Init`, `InitApply`
    /// for each, `InitDone`), then every change (`Apply`, `Delete`). It resumes by itself when
    /// a watch ends, lists again when its version is too old (410), and retries failed
    /// requests with kube-runtime's default backoff, so the stream does not end; errors are
    /// passed on as they happen (a 403 keeps its `Status`). Objects are named `POD.NAME`.
    pub fn watch(
        &self,
        config: watcher::Config,
    ) -> impl Stream<Item = Result<watcher::Event<PodDebugContainer>>> + Send + use<> {
        watcher(self.api(), config)
            .default_backoff()
            .map(|e| e.map_err(Error::from))
    }

    /// Stop debug container `name`: SIGTERM to its processes, SIGKILL after `grace` (the
    /// server's default, 10s, when `None`). Kubernetes never removes an ephemeral container, so
    /// it stays in the pod as terminated. The object answered shows `Terminated` when the
    /// kubelet reported it in time.
    pub async fn stop(
        &self,
        pod: &str,
        name: &str,
        grace: Option<Duration>,
    ) -> Result<PodDebugContainer> {
        let mut path = format!("{}/debug/{}", self.pod_path("stop", pod)?, esc(name));
        if let Some(g) = grace {
            path.push_str(&format!("?gracePeriodSeconds={}", g.as_secs()));
        }
        self.request(http::Method::DELETE, path, Vec::new()).await
    }

    /// The output of debug container `name`, read whole (do not `follow` here; see
    /// [`log_stream`](Self::log_stream)).
    pub async fn logs(&self, pod: &str, name: &str, params: &LogParams) -> Result<String> {
        let api = kube::Api::<DebugPod>::namespaced(self.client.clone(), self.ns("logs")?);
        Ok(api.logs(pod, &params.to_kube(name)).await?)
    }

    /// The output of debug container `name` as a stream (with `follow`, until it terminates).
    pub async fn log_stream(
        &self,
        pod: &str,
        name: &str,
        params: &LogParams,
    ) -> Result<impl AsyncBufRead + use<>> {
        let api = kube::Api::<DebugPod>::namespaced(self.client.clone(), self.ns("logs")?);
        Ok(api.log_stream(pod, &params.to_kube(name)).await?)
    }

    /// The debug profiles and the policy in force (cluster-wide).
    pub async fn profiles(&self) -> Result<DebugProfileList> {
        self.request(http::Method::GET, format!("{GV}/debugprofiles"), Vec::new())
            .await
    }

    /// Wait until debug container `name` runs or has terminated, for at most `timeout`, calling
    /// `on_change` with every state seen on the way (to show a waiting reason such as
    /// `ErrImagePull`). Answers the object as [`get`](Self::get) names it (`NAME`). Ends with
    /// [`Error::Timeout`] carrying the last waiting reason, or with the `Status` of the pod or
    /// debug container that is not there.
    ///
    /// Built on kube-runtime's `await_condition` over [`api`](Self::api): one watch of the one
    /// object (`fieldSelector=metadata.name=POD.NAME`), no read per event.
    pub async fn wait_started(
        &self,
        pod: &str,
        name: &str,
        timeout: Duration,
        on_change: impl FnMut(&PodDebugContainer),
    ) -> Result<PodDebugContainer> {
        let api = kube::Api::<PodDebugContainer>::namespaced(
            self.client.clone(),
            self.ns("wait_started")?,
        );
        let full = resource::collection_name(pod, name);
        let seen = std::sync::Mutex::new((on_change, None::<PodDebugContainer>));
        let see = |o: &PodDebugContainer| {
            let mut s = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (s.0)(o);
            s.1 = Some(o.clone());
        };
        let waited = tokio::time::timeout(timeout, async {
            loop {
                let found = await_condition(api.clone(), &full, |o: Option<&PodDebugContainer>| {
                    o.is_none_or(|o| {
                        see(o);
                        started(o)
                    })
                })
                .await;
                match found {
                    Ok(Some(o)) => return Ok(as_in_pod(o, name)),
                    // Not in the collection: the pod (or the container) is not there, or the
                    // server's view has not caught up with a create yet. The object's own read
                    // says which.
                    Ok(None) => {
                        let o = self.get(pod, name).await?;
                        see(&o);
                        if started(&o) {
                            return Ok(o);
                        }
                        tokio::time::sleep(LIST_CATCH_UP).await;
                    }
                    Err(wait::Error::ProbeFailed(e)) => match Error::from(e) {
                        e @ (Error::Api(_) | Error::Watch(_)) => return Err(e),
                        // The connection broke: watch again.
                        _ => tokio::time::sleep(Duration::from_secs(1)).await,
                    },
                }
            }
        })
        .await;
        match waited {
            Ok(r) => r,
            Err(_) => {
                let last = seen
                    .into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .1;
                Err(Error::Timeout {
                    name: name.to_owned(),
                    after: timeout,
                    waiting: last.as_ref().and_then(waiting_reason),
                })
            }
        }
    }
}

/// How long [`DebugContainers::wait_started`] lets the collection catch up with a debug
/// container its own read already shows.
const LIST_CATCH_UP: Duration = Duration::from_millis(250);

/// The object as its pod's `debug` subresource names it (`NAME`, not `POD.NAME`).
fn as_in_pod(mut o: PodDebugContainer, name: &str) -> PodDebugContainer {
    o.metadata.name = Some(name.to_owned());
    o
}

fn started(o: &PodDebugContainer) -> bool {
    o.status
        .as_ref()
        .is_some_and(|s| s.phase != DebugPhase::Waiting)
}

/// `REASON: message` of a waiting debug container (`ErrImagePull: ...`), if it says why.
pub fn waiting_reason(o: &PodDebugContainer) -> Option<String> {
    let w = o.status.as_ref()?.state.as_ref()?.waiting.as_ref()?;
    match (w.reason.as_deref(), w.message.as_deref()) {
        (Some(r), Some(m)) if !m.is_empty() => Some(format!("{r}: {m}")),
        (Some(r), _) => Some(r.to_owned()),
        (None, Some(m)) => Some(m.to_owned()),
        (None, None) => None,
    }
}
