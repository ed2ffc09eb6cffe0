//! Waiting for a pod to reach a condition: a watch on the one pod
//! (`fieldSelector=metadata.name=POD`, as kubectl's `waitForContainer`), resumed from the last
//! resourceVersion seen, re-read after a 410 or a broken stream, and bounded by a deadline.
//! When the watch itself cannot be opened the pod is polled once a second instead.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{WatchEvent, WatchParams};
use poddebug_types::ApiError;
use tokio::time::Instant;

use crate::StorageError;

/// Pause before re-reading after an error, so a failing upstream is not hammered.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// Longest single upstream watch (kube-rs' default is 290s).
const MAX_WATCH_SECS: u64 = 290;

/// How a wait ended.
#[derive(Debug)]
pub(crate) enum Waited {
    /// The condition holds for this pod.
    Done(Pod),
    /// The deadline passed; the last pod seen.
    TimedOut(Pod),
}

/// Wait until `done(&pod)` holds or `timeout` passes, starting from `pod` (already read). A pod
/// that is deleted meanwhile answers 404 `pods "P" not found`.
pub(crate) async fn wait_for(
    api: &Api<Pod>,
    mut pod: Pod,
    timeout: Duration,
    mut done: impl FnMut(&Pod) -> bool,
) -> Result<Waited, StorageError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let deadline = Instant::now() + timeout;
    let mut rv = pod.metadata.resource_version.clone().unwrap_or_default();
    loop {
        if done(&pod) {
            return Ok(Waited::Done(pod));
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(Waited::TimedOut(pod));
        }
        let wp = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(u32::try_from(remaining.as_secs().clamp(1, MAX_WATCH_SECS)).unwrap_or(1));
        let mut stream = match api.watch(&wp, &rv).await {
            Ok(s) => s.boxed(),
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, "watch failed; polling");
                if !refresh(api, &name, deadline, &mut pod, &mut rv).await? {
                    return Ok(Waited::TimedOut(pod));
                }
                continue;
            }
        };
        loop {
            let next = match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(next) => next,
                Err(_) => return Ok(Waited::TimedOut(pod)),
            };
            match next {
                Some(Ok(WatchEvent::Added(p) | WatchEvent::Modified(p))) => {
                    rv = p.metadata.resource_version.clone().unwrap_or_default();
                    pod = p;
                    if done(&pod) {
                        return Ok(Waited::Done(pod));
                    }
                }
                Some(Ok(WatchEvent::Deleted(_))) => return Err(pod_gone(&name)),
                Some(Ok(WatchEvent::Bookmark(b))) => rv = b.metadata.resource_version,
                Some(Ok(WatchEvent::Error(status))) => {
                    // 410 Expired (or anything else): start again from a fresh read.
                    tracing::debug!(pod = %name, code = status.code, "watch error; re-reading");
                    if !refresh(api, &name, deadline, &mut pod, &mut rv).await? {
                        return Ok(Waited::TimedOut(pod));
                    }
                    break;
                }
                Some(Err(e)) => {
                    tracing::debug!(pod = %name, error = %e, "watch stream broke; re-reading");
                    if !refresh(api, &name, deadline, &mut pod, &mut rv).await? {
                        return Ok(Waited::TimedOut(pod));
                    }
                    break;
                }
                // The upstream watch timed out: watch again from where it ended, after a pause
                // (no hot loop when it keeps closing at once).
                None => {
                    tokio::time::sleep(
                        std::time::Duration::from_millis(250)
                            .min(deadline.saturating_duration_since(Instant::now())),
                    )
                    .await;
                    break;
                }
            }
        }
    }
}

/// After a short pause, read the pod again into `pod` and `rv`; `false` when the deadline passes
/// first. A pod deleted meanwhile is kube-apiserver's 404.
async fn refresh(
    api: &Api<Pod>,
    name: &str,
    deadline: Instant,
    pod: &mut Pod,
    rv: &mut String,
) -> Result<bool, StorageError> {
    if tokio::time::timeout_at(deadline, tokio::time::sleep(RETRY_PAUSE))
        .await
        .is_err()
    {
        return Ok(false);
    }
    match tokio::time::timeout_at(deadline, api.get(name)).await {
        Ok(Ok(p)) => {
            *rv = p.metadata.resource_version.clone().unwrap_or_default();
            *pod = p;
            Ok(true)
        }
        Ok(Err(e)) => Err(StorageError::Kube(e)),
        Err(_) => Ok(false),
    }
}

/// 404 for a pod deleted while waited on, worded as kube-apiserver words it.
fn pod_gone(name: &str) -> StorageError {
    StorageError::Api(ApiError::not_found("pods", "", name))
}
