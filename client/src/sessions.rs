//! Live sessions: who is attached to which debug container now, through any replica of the
//! server; ending one.

use futures::{Stream, StreamExt};
use kube::api::{WatchEvent, WatchParams};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use poddebug_types::{DebugSession, DebugSessionList};
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

const GV: &str = "/apis/poddebug.dev/v1alpha1";

fn esc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// The live sessions of a namespace, or of all namespaces (`DebugSession`s).
#[derive(Clone)]
pub struct Sessions {
    client: kube::Client,
    namespace: Option<String>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// The sessions of namespace `ns`.
    pub fn new(client: kube::Client, ns: &str) -> Self {
        Sessions {
            client,
            namespace: Some(ns.to_owned()),
        }
    }

    /// The sessions of every namespace (list and watch only).
    pub fn all(client: kube::Client) -> Self {
        Sessions {
            client,
            namespace: None,
        }
    }

    fn ns(&self, verb: &'static str) -> Result<&str> {
        self.namespace
            .as_deref()
            .ok_or(Error::NamespaceRequired(verb))
    }

    fn list_path(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{GV}/namespaces/{}/debugsessions", esc(ns)),
            None => format!("{GV}/debugsessions"),
        }
    }

    async fn request<T: DeserializeOwned>(&self, method: http::Method, uri: String) -> Result<T> {
        let req = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(Vec::new())
            .map_err(|e| Error::InvalidParams(e.to_string()))?;
        let text = self.client.request_text(req).await?;
        serde_json::from_str(&text).map_err(Error::Decode)
    }

    /// The live sessions of the namespace (or of all namespaces).
    pub async fn list(&self) -> Result<DebugSessionList> {
        self.request(http::Method::GET, self.list_path()).await
    }

    /// The live sessions on the debug containers of pod `pod`.
    pub async fn list_in_pod(&self, pod: &str) -> Result<DebugSessionList> {
        let path = format!(
            "{GV}/namespaces/{}/pods/{}/sessions",
            esc(self.ns("list")?),
            esc(pod)
        );
        self.request(http::Method::GET, path).await
    }

    /// Session `id`.
    pub async fn get(&self, id: &str) -> Result<DebugSession> {
        let path = format!(
            "{GV}/namespaces/{}/debugsessions/{}",
            esc(self.ns("get")?),
            esc(id)
        );
        self.request(http::Method::GET, path).await
    }

    /// End session `id` on pod `pod`, whichever replica relays it: its client is told
    /// "session terminated by" the caller. Answers the session as it was.
    pub async fn terminate(&self, pod: &str, id: &str) -> Result<DebugSession> {
        let path = format!(
            "{GV}/namespaces/{}/pods/{}/sessions/{}",
            esc(self.ns("terminate")?),
            esc(pod),
            esc(id)
        );
        self.request(http::Method::DELETE, path).await
    }

    /// Watch the sessions of the namespace (or all namespaces) from `resource_version` (`"0"`:
    /// the current ones first).
    pub async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<impl Stream<Item = Result<WatchEvent<DebugSession>>> + use<>> {
        let req = kube::api::Request::new(self.list_path())
            .watch(params, resource_version)
            .map_err(|e| Error::InvalidParams(e.to_string()))?;
        let events = self.client.request_events::<DebugSession>(req).await?;
        Ok(events.map(|e| e.map_err(Error::from)))
    }
}
