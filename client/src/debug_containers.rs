//! `DebugContainers`: the handle every verb hangs off, like kube-rs's `Api<K>`.

use std::time::Duration;

use futures::{AsyncBufRead, Stream, StreamExt};
use kube::api::{ListParams, WatchEvent, WatchParams};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use poddebug_types::api::KIND_POD_DEBUG_CONTAINER;
use poddebug_types::{
    API_VERSION, DebugPhase, DebugProfileList, PodDebugContainer, PodDebugContainerList,
};
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::params::{CreateParams, LogParams};
use crate::streams::DebugPod;

/// Prefix of every path of the API.
const GV: &str = "/apis/poddebug.dev/v1alpha1";

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

/// Escape one path segment or query value.
fn esc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
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
        let mut req = http::Request::builder().method(method).uri(uri);
        if !body.is_empty() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(body)
            .map_err(|e| Error::InvalidParams(e.to_string()))?;
        let text = self.client.request_text(req).await?;
        serde_json::from_str(&text).map_err(Error::Decode)
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

    /// Watch the debug containers of the namespace (or all namespaces) from `resource_version`
    /// (`"0"` for "any"; resume with the last event's `metadata.resourceVersion`). A version too
    /// old arrives as a `WatchEvent::Error` with code 410: list again and watch from there.
    pub async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<impl Stream<Item = Result<WatchEvent<PodDebugContainer>>> + use<>> {
        let req = kube::api::Request::new(self.list_path())
            .watch(params, resource_version)
            .map_err(|e| Error::InvalidParams(e.to_string()))?;
        let events = self.client.request_events::<PodDebugContainer>(req).await?;
        Ok(events.map(|e| e.map_err(Error::from)))
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
    /// `ErrImagePull`; objects seen on the watch are named `POD.NAME`, as `poddebugcontainers`
    /// names them). Answers the object as [`get`](Self::get) does. Ends with
    /// [`Error::Timeout`] carrying the last waiting reason.
    pub async fn wait_started(
        &self,
        pod: &str,
        name: &str,
        timeout: Duration,
        mut on_change: impl FnMut(&PodDebugContainer),
    ) -> Result<PodDebugContainer> {
        let mut last: Option<PodDebugContainer> = None;
        let waited = tokio::time::timeout(timeout, async {
            let current = self.get(pod, name).await?;
            on_change(&current);
            if started(&current) {
                return Ok(current);
            }
            let mut rv = current
                .metadata
                .resource_version
                .clone()
                .unwrap_or_else(|| "0".to_owned());
            last = Some(current);
            let params = WatchParams::default()
                .fields(&format!("metadata.name={pod}.{name}"))
                .timeout(timeout.as_secs().clamp(1, 290) as u32);
            // Each watch ends at its timeout or when the server closes it: resume from the
            // last version seen, until the outer timeout.
            loop {
                let events = self.watch(&params, &rv).await?;
                futures::pin_mut!(events);
                while let Some(event) = events.next().await {
                    let event = match event {
                        Ok(e) => e,
                        // The connection broke mid-watch: watch again from the last version.
                        Err(Error::Kube(_)) => {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            break;
                        }
                        Err(e) => return Err(e),
                    };
                    match event {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                            if let Some(v) = &o.metadata.resource_version {
                                rv.clone_from(v);
                            }
                            on_change(&o);
                            if started(&o) {
                                // As `get` names it (NAME, not the watch's POD.NAME).
                                return self.get(pod, name).await;
                            }
                            last = Some(o);
                        }
                        WatchEvent::Bookmark(b) => rv = b.metadata.resource_version,
                        WatchEvent::Deleted(_) => {
                            // The pod went away: the GET says how.
                            return self.get(pod, name).await;
                        }
                        WatchEvent::Error(s) if s.code == 410 => {
                            let o = self.get(pod, name).await?;
                            if started(&o) {
                                return Ok(o);
                            }
                            rv = o
                                .metadata
                                .resource_version
                                .clone()
                                .unwrap_or_else(|| "0".to_owned());
                            last = Some(o);
                            break;
                        }
                        WatchEvent::Error(s) => return Err(Error::Api(s)),
                    }
                }
            }
        })
        .await;
        match waited {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                name: name.to_owned(),
                after: timeout,
                waiting: last.as_ref().and_then(waiting_reason),
            }),
        }
    }
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
