//! `Copies`: copies of pods made to debug them (`pods/POD/copy`, `pods/POD/copies`), and
//! attaching to a container of a copy.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ContainerStatus;
use poddebug_types::copy::{KIND_POD_DEBUG_COPY, PodDebugCopy, PodDebugCopyList};

use crate::attach::{AttachOutcome, AttachedDebugContainer, OutcomeReader};
use crate::debug_containers::{DebugContainers, GV, esc, request_json};
use crate::error::{Error, Result};
use crate::params::AttachParams;

/// The copies of pods in one namespace.
#[derive(Clone, Debug)]
pub struct Copies {
    debug: DebugContainers,
    namespace: String,
}

impl Copies {
    /// The copies in namespace `ns`.
    pub fn new(client: kube::Client, ns: &str) -> Self {
        Copies {
            debug: DebugContainers::new(client, ns),
            namespace: ns.to_owned(),
        }
    }

    fn path(&self, pod: &str, rest: &str) -> String {
        format!(
            "{GV}/namespaces/{}/pods/{}/{rest}",
            esc(&self.namespace),
            esc(pod)
        )
    }

    /// Makes a copy of pod `pod` as `copy` asks (`metadata.name` the copy's name; without one the
    /// server generates `POD-debug-xxxxx`). `dry_run`: everything checked, nothing made.
    pub async fn create(
        &self,
        pod: &str,
        copy: &PodDebugCopy,
        dry_run: bool,
    ) -> Result<PodDebugCopy> {
        let mut body = copy.clone();
        if body.api_version.is_empty() {
            body.api_version = poddebug_types::API_VERSION.to_owned();
        }
        if body.kind.is_empty() {
            body.kind = KIND_POD_DEBUG_COPY.to_owned();
        }
        let q = if dry_run { "?dryRun=All" } else { "" };
        let bytes = serde_json::to_vec(&body).map_err(Error::Decode)?;
        request_json(
            self.debug.client(),
            http::Method::POST,
            format!("{}{q}", self.path(pod, "copy")),
            bytes,
        )
        .await
    }

    /// One copy of `pod`.
    pub async fn get(&self, pod: &str, name: &str) -> Result<PodDebugCopy> {
        let uri = self.path(pod, &format!("copies/{}", esc(name)));
        request_json(self.debug.client(), http::Method::GET, uri, Vec::new()).await
    }

    /// The copies of `pod`.
    pub async fn list(&self, pod: &str) -> Result<PodDebugCopyList> {
        let uri = self.path(pod, "copies");
        request_json(self.debug.client(), http::Method::GET, uri, Vec::new()).await
    }

    /// Deletes a copy of `pod`.
    pub async fn delete(&self, pod: &str, name: &str) -> Result<PodDebugCopy> {
        let uri = self.path(pod, &format!("copies/{}", esc(name)));
        request_json(self.debug.client(), http::Method::DELETE, uri, Vec::new()).await
    }

    /// Waits (at most `timeout`) until container `container` of copy `name` runs, or has
    /// ended, and returns the copy as it then is.
    pub async fn wait_running(
        &self,
        pod: &str,
        name: &str,
        container: &str,
        timeout: Duration,
    ) -> Result<PodDebugCopy> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let copy = self.get(pod, name).await?;
            let state = container_status(&copy, container).and_then(|s| s.state.clone());
            if state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
            {
                return Ok(copy);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout {
                    name: format!("{container} of copy {name}"),
                    after: timeout,
                    waiting: state.and_then(|s| s.waiting).map(|w| {
                        format!(
                            "{}: {}",
                            w.reason.unwrap_or_default(),
                            w.message.unwrap_or_default()
                        )
                    }),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Attaches to container `container` of copy `copy` (made of `pod`); the outcome is read
    /// from the copy's container status.
    pub async fn attach(
        &self,
        pod: &str,
        copy: &str,
        container: &str,
        params: &AttachParams,
    ) -> Result<AttachedDebugContainer> {
        // A copy keeps the original's restart policy: a container that ended may already run
        // again when its status is read, its end then in `lastState` with a higher restart count.
        let before = self.get(pod, copy).await?;
        let restarts = container_status(&before, container).map_or(0, |s| s.restart_count);
        let (this, p, c, n) = (
            self.clone(),
            pod.to_owned(),
            copy.to_owned(),
            container.to_owned(),
        );
        let outcome: OutcomeReader = Arc::new(move || {
            let (this, p, c, n) = (this.clone(), p.clone(), c.clone(), n.clone());
            Box::pin(async move {
                let copy = this.get(&p, &c).await?;
                Ok(container_status(&copy, &n).and_then(|s| ended_since(s, restarts)))
            })
        });
        self.debug
            .attach_with(copy, container, params, outcome)
            .await
    }
}

/// The status of container `name` of a copy.
pub fn container_status<'a>(copy: &'a PodDebugCopy, name: &str) -> Option<&'a ContainerStatus> {
    copy.status
        .as_ref()?
        .container_statuses
        .iter()
        .find(|s| s.name == name)
}

/// How the container ended, if it did since it had restarted `restarts` times: terminated
/// now, or restarted since, its end in `lastState`.
fn ended_since(s: &ContainerStatus, restarts: i32) -> Option<AttachOutcome> {
    let t = match s.state.as_ref().and_then(|st| st.terminated.as_ref()) {
        Some(t) => t,
        None if s.restart_count > restarts => s.last_state.as_ref()?.terminated.as_ref()?,
        None => return None,
    };
    Some(AttachOutcome::Exited {
        exit_code: t.exit_code,
        reason: t.reason.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn status(v: serde_json::Value) -> ContainerStatus {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn an_end_the_kubelet_already_restarted_counts() {
        let running = status(
            serde_json::json!({"name": "app", "image": "i", "imageID": "",
            "ready": true, "restartCount": 1, "state": {"running": {}}}),
        );
        assert_eq!(ended_since(&running, 1), None);
        let restarted = status(
            serde_json::json!({"name": "app", "image": "i", "imageID": "",
            "ready": true, "restartCount": 2, "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 5}}}),
        );
        assert_eq!(
            ended_since(&restarted, 1),
            Some(AttachOutcome::Exited {
                exit_code: 5,
                reason: None
            })
        );
        let ended = status(
            serde_json::json!({"name": "app", "image": "i", "imageID": "",
            "ready": false, "restartCount": 1, "state": {"terminated": {"exitCode": 3}}}),
        );
        assert_eq!(
            ended_since(&ended, 1),
            Some(AttachOutcome::Exited {
                exit_code: 3,
                reason: None
            })
        );
    }
}
