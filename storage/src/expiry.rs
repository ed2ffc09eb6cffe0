//! Expiry: stop the debug containers whose time limit passed.
//!
//! One round ([`KubeBackend::expire_due`](crate::KubeBackend::expire_due)) finds the running
//! debug containers whose deadline ([`EXPIRES_AT_ENV`](poddebug_types::convert::EXPIRES_AT_ENV))
//! is past and stops each with the same stop as `DELETE` (the stop script, the record in the
//! termination message), recording the Event `DebugContainerExpired` instead of
//! `DebugContainerStopped`. Because the deadline lives in the pod, a round finds every container
//! that expired while no server ran.
//!
//! Where it looks: in the server's pod cache ([`PodCache`], the reflector lists and watches are
//! served from; it keeps only pods with ephemeral containers), so a round costs no request to
//! kube-apiserver until something is due. Without a cache, a paged LIST of running pods.
//!
//! What it stops: exactly the ephemeral container whose deadline passed, by its own name. The
//! stop reads the pod again and acts only if, on that read, the container is still running and
//! past its deadline ([`StorageError::NotDue`] otherwise): a container that ended meanwhile, and
//! a later container that reuses its debug name, are left alone.
//!
//! A container the stop signalled but that still runs when the stop ends is not stopped again
//! by the same leader: one that does not end within its bound is reported unstoppable (see
//! `unstoppable`), and is then skipped by every leader.
//!
//! Containers that never started have no process to stop and are left alone until they run (or
//! stay waiting for good). A due container that cannot be stopped — its main process is PID 1 of
//! its own PID namespace (`status.stoppable: false`), or the stop is refused once tried (no `sh`
//! or `/proc` in its image) — is reported once ([`ExpiryResult::Refused`]): the caller writes a
//! `Warning` Event `DebugContainerNotStoppable`, an audit record and a metric, and skips it from
//! then on.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use poddebug_types::convert::{debug_containers_of, expires_at_of};
use poddebug_types::stoppable::stop_blocker;

use crate::cache::PodCache;
use crate::cluster::Cluster;
use crate::events::REASON_NOT_STOPPABLE;
use crate::state::{EcState, ec_state};
use crate::stop::{StopKind, stop_as};
use crate::{Caller, StopOutcome, StopRequest, StorageError};

/// The user named as the requester in the stop record of an expired debug container.
pub const EXPIRY_USER: &str = "system:poddebug:expiry";

/// How many expired containers are stopped at once.
const CONCURRENT_STOPS: usize = 4;
/// Grace period between SIGTERM and SIGKILL of an expiry stop.
pub(crate) const EXPIRY_GRACE: Duration = Duration::from_secs(10);
/// Time one expiry stop may take.
const EXPIRY_STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Page size of the LIST a round makes without a pod cache.
const LIST_PAGE: u32 = 500;
/// Time the Warning Event of a container that cannot be stopped may take.
const WARNING_EVENT_TIMEOUT: Duration = Duration::from_secs(5);

/// How the stop of one expired debug container went.
#[derive(Clone, Debug)]
pub enum ExpiryResult {
    /// It terminated; its exit code when the kubelet reported one.
    Terminated {
        /// `terminated.exitCode`.
        exit_code: Option<i32>,
    },
    /// Signalled, not terminated yet when the stop ended. The caller does not stop it again (a
    /// stop that did not end it would only repeat its Event): if it still runs past its bound,
    /// `unstoppable` reports it.
    InProgress,
    /// The stop failed (it is tried again on the next round); the error's message.
    Failed(String),
    /// The container cannot be stopped: its main process is its own PID 1 (found before any
    /// stop), or the stop was refused with 409 Conflict (no `sh` or `/proc` in its image); the
    /// message says which. Trying again would change nothing; a `Warning` Event
    /// `DebugContainerNotStoppable` was recorded on the pod.
    Refused(String),
}

/// One expired debug container a round acted on.
#[derive(Clone, Debug)]
pub struct Expired {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// Debug name.
    pub name: String,
    /// The ephemeral container's name in the pod.
    pub container: String,
    /// Its image.
    pub image: String,
    /// When it started, when known.
    pub started_at: Option<jiff::Timestamp>,
    /// Its deadline.
    pub expires_at: jiff::Timestamp,
    /// What the stop did.
    pub result: ExpiryResult,
    /// The pod's UID: with `container`, what [`expire_due`](crate::KubeBackend::expire_due)
    /// takes in its `skip` set.
    pub pod_uid: String,
}

/// A running debug container of a pod whose deadline is at or before `now`.
struct Due {
    pod: Arc<Pod>,
    pod_uid: String,
    namespace: String,
    pod_name: String,
    name: String,
    container: String,
    image: String,
    started_at: Option<jiff::Timestamp>,
    expires_at: jiff::Timestamp,
    /// Why no stop can end it, when none can.
    blocked: Option<&'static str>,
}

/// The debug containers of `pod` due at `now`: every running ephemeral container past its
/// deadline (by its own name; an older container of a reused debug name has terminated).
fn due_in(pod: &Arc<Pod>, now: jiff::Timestamp) -> Vec<Due> {
    let mut out = Vec::new();
    for (name, ec) in debug_containers_of(pod) {
        let Some(at) = expires_at_of(ec) else {
            continue;
        };
        if at > now || ec_state(pod, &ec.name) != EcState::Running {
            continue;
        }
        let started_at = pod
            .status
            .as_ref()
            .and_then(|s| s.ephemeral_container_statuses.as_ref())
            .and_then(|v| v.iter().find(|s| s.name == ec.name))
            .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.clone())
            .map(|t| t.0);
        out.push(Due {
            pod: pod.clone(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            name,
            container: ec.name.clone(),
            image: ec.image.clone().unwrap_or_default(),
            started_at,
            expires_at: at,
            blocked: stop_blocker(pod, ec),
        });
    }
    out
}

/// The exit code shown in a stopped debug container's object.
fn exit_code(outcome: &StopOutcome) -> Option<i32> {
    let StopOutcome::Terminated(obj) = outcome else {
        return None;
    };
    obj.status
        .as_ref()?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// How long a round waits for a pod cache that has not finished its first list before it
/// lists the pods itself (a server that has just started syncs in well under this).
const CACHE_SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The pods a round looks at: the cache's (pods with ephemeral containers only), else every
/// running pod, listed a page at a time. A cache still on its first list is waited for (up
/// to [`CACHE_SYNC_WAIT`]) rather than doubled by a LIST of every running pod.
pub(crate) async fn candidates(
    b: &Cluster,
    cache: Option<&PodCache>,
) -> Result<Vec<Arc<Pod>>, StorageError> {
    if let Some(cache) = cache {
        let deadline = tokio::time::Instant::now() + CACHE_SYNC_WAIT;
        while !cache.is_synced() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        if cache.is_synced() {
            return Ok(cache.snapshot().0);
        }
    }
    let api: Api<Pod> = Api::all(b.server_client());
    // Only running pods can hold a running debug container.
    let mut params = ListParams::default()
        .fields("status.phase=Running")
        .limit(LIST_PAGE);
    let mut pods = Vec::new();
    loop {
        let page = api.list(&params).await?;
        pods.extend(page.items.into_iter().map(Arc::new));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(pods),
        }
    }
}

/// Stop one due container, or report why it cannot be; `None` when the stop's own read found
/// it no longer due (nothing was done).
async fn expire_one(b: &Cluster, d: Due, now: jiff::Timestamp) -> Option<Expired> {
    let result = match d.blocked {
        Some(why) => ExpiryResult::Refused(format!("the debug container cannot be stopped: {why}")),
        None => {
            let req = StopRequest {
                namespace: d.namespace.clone(),
                pod: d.pod_name.clone(),
                name: d.name.clone(),
                grace_period: EXPIRY_GRACE,
                caller: Caller {
                    user: EXPIRY_USER.to_owned(),
                    ..Caller::default()
                },
                timeout: EXPIRY_STOP_TIMEOUT,
            };
            let kind = StopKind::Expired {
                container: d.container.clone(),
                at: d.expires_at,
                now,
            };
            match stop_as(b, req, kind).await {
                Ok(o @ StopOutcome::Terminated(_)) => ExpiryResult::Terminated {
                    exit_code: exit_code(&o),
                },
                Ok(StopOutcome::InProgress(_)) => ExpiryResult::InProgress,
                Err(StorageError::NotDue) => return None,
                Err(e) if e.to_api_error().code() == 409 => {
                    ExpiryResult::Refused(e.to_api_error().message().to_owned())
                }
                Err(e) => ExpiryResult::Failed(e.to_string()),
            }
        }
    };
    if let ExpiryResult::Refused(why) = &result {
        let message = format!(
            "The time limit of debug container {:?} (ephemeral container {:?}) passed at {}, \
             and the server cannot stop it: {why}. It ends with its own exit or with the pod.",
            d.name, d.container, d.expires_at
        );
        b.record_event_within(
            &d.pod,
            &d.container,
            REASON_NOT_STOPPABLE,
            message,
            WARNING_EVENT_TIMEOUT,
        )
        .await;
    }
    Some(Expired {
        pod_uid: d.pod_uid,
        namespace: d.namespace,
        pod: d.pod_name,
        name: d.name,
        container: d.container,
        image: d.image,
        started_at: d.started_at,
        expires_at: d.expires_at,
        result,
    })
}

/// One expiry round at `now` (see the module docs): every due container is stopped, except
/// those in `skip` (pod UID, ephemeral container name: earlier [`ExpiryResult::Refused`] and
/// [`ExpiryResult::InProgress`]) and those reported unstoppable (their stop record says so, see
/// `unstoppable`), and the list of what was done is returned. Entries of `skip` that are no
/// longer running past their deadline are dropped from it. Only the listing of pods can fail
/// the round.
pub(crate) async fn expire_due(
    b: &Cluster,
    cache: Option<&PodCache>,
    now: jiff::Timestamp,
    skip: &mut BTreeSet<(String, String)>,
) -> Result<Vec<Expired>, StorageError> {
    let pods = candidates(b, cache).await?;
    // What is no longer running past its deadline (ended, pod gone) leaves the set.
    let running: BTreeSet<(String, String)> = pods
        .iter()
        .flat_map(|p| due_in(p, now))
        .map(|d| (d.pod_uid, d.container))
        .collect();
    skip.retain(|k| running.contains(k));
    // Containers already reported unstoppable (by any leader) are not stopped again.
    let reported = |d: &Due| {
        b.stop_leases().is_some_and(|l| {
            l.cached(&d.pod_uid, &d.container)
                .is_some_and(|r| r.unstoppable_since.is_some())
        })
    };
    let due: Vec<Due> = pods
        .iter()
        .flat_map(|p| due_in(p, now))
        .filter(|d| !skip.contains(&(d.pod_uid.clone(), d.container.clone())))
        .filter(|d| !reported(d))
        .collect();
    let done: Vec<Option<Expired>> =
        futures::stream::iter(due.into_iter().map(|d| expire_one(b, d, now)))
            .buffer_unordered(CONCURRENT_STOPS)
            .collect()
            .await;
    // Containers the stop's own read found no longer due did nothing and are not reported.
    Ok(done.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_with(expires_at: &str, state: serde_json::Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "ns"},
                "spec": {
                    "shareProcessNamespace": true,
                    "containers": [{"name": "app", "image": "nginx"}],
                    "ephemeralContainers": [{"name": "dbg", "image": "busybox",
                        "env": [{"name": "PODDEBUG_EXPIRES_AT", "value": expires_at}]}]
                },
                "status": {"phase": "Running", "ephemeralContainerStatuses": [
                    {"name": "dbg", "image": "busybox", "imageID": "", "ready": false,
                     "restartCount": 0, "state": state}
                ]}
            }))
            .expect("pod"),
        )
    }

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn only_running_containers_past_their_deadline_are_due() {
        let running = json!({"running": {"startedAt": "2026-01-02T03:00:00Z"}});
        let p = pod_with("2026-01-02T03:04:05Z", running.clone());
        let due = due_in(&p, ts("2026-01-02T03:04:05Z"));
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].name, "dbg");
        assert_eq!(due[0].started_at, Some(ts("2026-01-02T03:00:00Z")));
        assert!(due_in(&p, ts("2026-01-02T03:04:04Z")).is_empty(), "not yet");
        let done = pod_with(
            "2026-01-02T03:04:05Z",
            json!({"terminated": {"exitCode": 0}}),
        );
        assert!(due_in(&done, ts("2026-01-03T00:00:00Z")).is_empty());
        let waiting = pod_with("2026-01-02T03:04:05Z", json!({"waiting": {}}));
        assert!(due_in(&waiting, ts("2026-01-03T00:00:00Z")).is_empty());
        let garbage = pod_with("tomorrow", running);
        assert!(due_in(&garbage, ts("2026-01-03T00:00:00Z")).is_empty());
    }

    #[test]
    fn a_container_that_is_its_own_pid_1_is_due_and_reported_blocked() {
        let running = json!({"running": {"startedAt": "2026-01-02T03:00:00Z"}});
        let mut pod = (*pod_with("2026-01-02T03:04:05Z", running)).clone();
        if let Some(spec) = pod.spec.as_mut() {
            spec.share_process_namespace = None;
        }
        let due = due_in(&Arc::new(pod), ts("2026-01-03T00:00:00Z"));
        assert_eq!(due.len(), 1);
        assert!(due[0].blocked.is_some());
    }

    #[test]
    fn a_reused_debug_name_is_judged_by_each_containers_own_deadline() {
        // dbg (ended, deadline passed long ago) and its successor dbg-xyz reusing the debug
        // name (running, deadline tomorrow): nothing is due.
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {
                "shareProcessNamespace": true,
                "containers": [{"name": "app", "image": "nginx"}],
                "ephemeralContainers": [
                    {"name": "dbg", "image": "busybox",
                     "env": [{"name": "PODDEBUG_EXPIRES_AT", "value": "2026-01-01T00:00:00Z"}]},
                    {"name": "dbg-xyz", "image": "busybox",
                     "env": [{"name": "PODDEBUG_NAME", "value": "dbg"},
                             {"name": "PODDEBUG_EXPIRES_AT", "value": "2026-01-04T00:00:00Z"}]}
                ]
            },
            "status": {"phase": "Running", "ephemeralContainerStatuses": [
                {"name": "dbg", "image": "busybox", "imageID": "", "ready": false,
                 "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                {"name": "dbg-xyz", "image": "busybox", "imageID": "", "ready": false,
                 "restartCount": 0, "state": {"running": {}}}
            ]}
        }))
        .expect("pod");
        let pod = Arc::new(pod);
        assert!(due_in(&pod, ts("2026-01-03T00:00:00Z")).is_empty());
        let due = due_in(&pod, ts("2026-01-04T00:00:00Z"));
        assert_eq!(due.len(), 1);
        assert_eq!(
            (due[0].name.as_str(), due[0].container.as_str()),
            ("dbg", "dbg-xyz")
        );
    }
}
