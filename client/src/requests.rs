//! Debug requests (just-in-time access): ask for a gated debug profile on one pod or node for a
//! while, with a reason; wait for someone else's decision; review others' requests.
//!
//! [`DebugRequest`] implements `kube::Resource` as the `debugrequests` resource, so
//! `kube::Api<DebugRequest>` and kube-runtime's `watcher`, `reflector` and `await_condition`
//! work on it directly ([`DebugRequests::api`]).
//!
//! ```no_run
//! use poddebug_client::DebugRequests;
//! use poddebug_client::types::request::{DebugRequest, DebugRequestSpec, RequestPhase};
//!
//! # async fn run() -> poddebug_client::Result<()> {
//! let client = kube::Client::try_default().await?;
//! let requests = DebugRequests::new(client, "shop");
//! let mut ask = DebugRequest::default();
//! ask.metadata.generate_name = Some("web-sysadmin-".into());
//! ask.spec = DebugRequestSpec {
//!     pod: Some("web".into()),
//!     profile: "sysadmin".into(),
//!     reason: "INC-7: the disk is full".into(),
//!     duration: Some("30m".into()),
//!     ..Default::default()
//! };
//! let made = requests.create(&ask).await?;
//! let name = made.metadata.name.clone().unwrap_or_default();
//! let decided = requests
//!     .wait_decided(&name, std::time::Duration::from_secs(600), |_| {})
//!     .await?;
//! if decided.status.map(|s| s.phase) == Some(RequestPhase::Approved) {
//!     // create the debug container with `debugRequest: name`
//! }
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectList, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use poddebug_types::request::{Approval, DebugRequest, Decision, RequestPhase};

use crate::error::{Error, Result};

/// The debug requests of a namespace, or of all namespaces (`DebugRequest`s).
#[derive(Clone)]
pub struct DebugRequests {
    api: Api<DebugRequest>,
    namespace: Option<String>,
}

impl std::fmt::Debug for DebugRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugRequests")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl DebugRequests {
    /// The requests of namespace `ns` (a pod's namespace; node requests live in the server's
    /// node-debug namespace).
    pub fn new(client: kube::Client, ns: &str) -> Self {
        DebugRequests {
            api: Api::namespaced(client, ns),
            namespace: Some(ns.to_owned()),
        }
    }

    /// The requests of every namespace (list and watch only).
    pub fn all(client: kube::Client) -> Self {
        DebugRequests {
            api: Api::all(client),
            namespace: None,
        }
    }

    /// The kube-rs handle, for `watcher`, `reflector` and `await_condition`.
    pub fn api(&self) -> &Api<DebugRequest> {
        &self.api
    }

    fn ns(&self, verb: &'static str) -> Result<()> {
        self.namespace
            .as_ref()
            .map(|_| ())
            .ok_or(Error::NamespaceRequired(verb))
    }

    /// File a request (`metadata.name` or `generateName`, and `spec`); the server sets its
    /// requester and state.
    pub async fn create(&self, request: &DebugRequest) -> Result<DebugRequest> {
        self.ns("create")?;
        Ok(self.api.create(&PostParams::default(), request).await?)
    }

    /// Request `name`.
    pub async fn get(&self, name: &str) -> Result<DebugRequest> {
        self.ns("get")?;
        Ok(self.api.get(name).await?)
    }

    /// The requests of the namespace (or of all namespaces).
    pub async fn list(&self, params: &ListParams) -> Result<ObjectList<DebugRequest>> {
        Ok(self.api.list(params).await?)
    }

    async fn review(
        &self,
        name: &str,
        decision: Decision,
        comment: Option<&str>,
        uid: Option<&str>,
    ) -> Result<DebugRequest> {
        self.ns("review")?;
        let body = Approval {
            decision: decision.as_str().to_owned(),
            comment: comment.map(str::to_owned),
            preconditions: uid.map(|u| Preconditions {
                uid: Some(u.to_owned()),
                resource_version: None,
            }),
            ..Default::default()
        };
        Ok(self
            .api
            .create_subresource("approval", name, &PostParams::default(), &body)
            .await?)
    }

    /// Approve request `name` (someone else's: a requester never reviews their own; needs
    /// `approve` on `debugrequests` named after its profile).
    pub async fn approve(&self, name: &str, comment: Option<&str>) -> Result<DebugRequest> {
        self.review(name, Decision::Approve, comment, None).await
    }

    /// Approve `seen`, the request as the approver read it: refused (409) if the request of
    /// its name is no longer that one (withdrawn and filed again), so what is approved is what
    /// was shown.
    pub async fn approve_seen(
        &self,
        seen: &DebugRequest,
        comment: Option<&str>,
    ) -> Result<DebugRequest> {
        let name = seen.metadata.name.as_deref().unwrap_or_default();
        let uid = seen.metadata.uid.as_deref();
        self.review(name, Decision::Approve, comment, uid).await
    }

    /// Deny a pending request.
    pub async fn deny(&self, name: &str, comment: Option<&str>) -> Result<DebugRequest> {
        self.review(name, Decision::Deny, comment, None).await
    }

    /// Revoke an approved request: what it opened ends at once.
    pub async fn revoke(&self, name: &str, comment: Option<&str>) -> Result<DebugRequest> {
        self.review(name, Decision::Revoke, comment, None).await
    }

    /// Withdraw (delete) request `name`: what it opened ends at once. Answers it as it was.
    pub async fn withdraw(&self, name: &str) -> Result<DebugRequest> {
        self.ns("withdraw")?;
        // The server answers the request as it was (never a bare Status).
        let answered = self.api.delete(name, &DeleteParams::default()).await?;
        answered.left().ok_or_else(|| {
            Error::InvalidParams(format!("the withdrawal of {name} answered no request"))
        })
    }

    /// Wait (at most `timeout`) until request `name` is decided (no longer `Pending`), calling
    /// `on_change` with every version seen; the request as decided.
    pub async fn wait_decided(
        &self,
        name: &str,
        timeout: Duration,
        mut on_change: impl FnMut(&DebugRequest),
    ) -> Result<DebugRequest> {
        self.ns("wait")?;
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let events = watcher(self.api.clone(), config).applied_objects();
        futures::pin_mut!(events);
        let wait = async {
            while let Some(ev) = events.next().await {
                let r = ev.map_err(Error::from)?;
                on_change(&r);
                let phase = r.status.as_ref().map(|s| s.phase).unwrap_or_default();
                if phase != RequestPhase::Pending {
                    return Ok(r);
                }
            }
            Err(Error::InvalidParams(format!(
                "the watch of debug request {name} ended"
            )))
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(r) => r,
            Err(_) => Err(Error::NotDecided {
                name: name.to_owned(),
                after: timeout,
            }),
        }
    }
}
