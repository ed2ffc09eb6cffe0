//! Expiry: stop the debug containers whose time limit passed.
//!
//! One round ([`KubeBackend::expire_due`](crate::KubeBackend::expire_due)) lists the pods of
//! every namespace with the server's own identity, finds the running debug containers whose
//! deadline ([`EXPIRES_AT_ENV`](poddebug_types::convert::EXPIRES_AT_ENV)) is past, and stops
//! each with the same stop as `DELETE` (the stop script, the record in the termination message),
//! recording the Event `DebugContainerExpired` instead of `DebugContainerStopped`. Because the
//! deadline lives in the pod, a round finds every container that expired while no server ran.
//!
//! Containers that never started have no process to stop and are left alone until they run (or
//! stay waiting for good); a container whose main process is PID 1 of its own PID namespace
//! cannot be stopped from inside (`status.stoppable: false`) and is skipped, as `DELETE` refuses
//! it.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use poddebug_types::convert::{debug_containers_of, expires_at_of};
use poddebug_types::stoppable::stop_blocker;

use crate::cluster::Cluster;
use crate::state::{EcState, ec_state};
use crate::stop::{StopKind, stop_as};
use crate::{Caller, StopOutcome, StopRequest, StorageError};

/// The user named as the requester in the stop record of an expired debug container.
pub const EXPIRY_USER: &str = "system:poddebug:expiry";

/// How many expired containers are stopped at once.
const CONCURRENT_STOPS: usize = 4;
/// Grace period between SIGTERM and SIGKILL of an expiry stop.
const EXPIRY_GRACE: Duration = Duration::from_secs(10);
/// Time one expiry stop may take.
const EXPIRY_STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// How the stop of one expired debug container went.
#[derive(Clone, Debug)]
pub enum ExpiryResult {
    /// It terminated; its exit code when the kubelet reported one.
    Terminated {
        /// `terminated.exitCode`.
        exit_code: Option<i32>,
    },
    /// Signalled, not terminated yet when the stop ended (the next round looks again).
    InProgress,
    /// The stop failed (it is tried again on the next round); the error's message.
    Failed(String),
    /// The stop was refused with 409 Conflict: the container cannot be stopped from inside (no
    /// `sh` or `/proc` in its image, or its main process is its own PID 1); the message says
    /// which. Trying again would change nothing.
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

/// A running, stoppable debug container of `pod` whose deadline is at or before `now`.
struct Due {
    pod_uid: String,
    namespace: String,
    pod: String,
    name: String,
    container: String,
    image: String,
    started_at: Option<jiff::Timestamp>,
    expires_at: jiff::Timestamp,
}

/// The debug containers of `pod` due at `now` (the newest of each debug name; older ones have
/// terminated, or the name could not have been reused).
fn due_in(pod: &Pod, now: jiff::Timestamp) -> Vec<Due> {
    let mut out = Vec::new();
    for (name, ec) in debug_containers_of(pod) {
        let Some(at) = expires_at_of(ec) else {
            continue;
        };
        if at > now || ec_state(pod, &ec.name) != EcState::Running {
            continue;
        }
        if let Some(why) = stop_blocker(pod, ec) {
            tracing::debug!(pod = ?pod.metadata.name, container = %ec.name, %why,
                "expired debug container cannot be stopped");
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
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            name,
            container: ec.name.clone(),
            image: ec.image.clone().unwrap_or_default(),
            started_at,
            expires_at: at,
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

/// One expiry round at `now` (see the module docs): every due container is stopped, except
/// those in `skip` (pod UID, ephemeral container name: earlier [`ExpiryResult::Refused`]), and
/// the list of what was done is returned. Only the listing of pods can fail the round.
pub(crate) async fn expire_due(
    b: &Cluster,
    now: jiff::Timestamp,
    skip: &BTreeSet<(String, String)>,
) -> Result<Vec<Expired>, StorageError> {
    let api: Api<Pod> = Api::all(b.server_client());
    // Only running pods can hold a running debug container.
    let pods = api
        .list(&ListParams::default().fields("status.phase=Running"))
        .await?;
    let due: Vec<Due> = pods
        .items
        .iter()
        .flat_map(|p| due_in(p, now))
        .filter(|d| !skip.contains(&(d.pod_uid.clone(), d.container.clone())))
        .collect();
    let stops = due.into_iter().map(|d| async move {
        let req = StopRequest {
            namespace: d.namespace.clone(),
            pod: d.pod.clone(),
            name: d.name.clone(),
            grace_period: EXPIRY_GRACE,
            caller: Caller {
                user: EXPIRY_USER.to_owned(),
                ..Caller::default()
            },
            timeout: EXPIRY_STOP_TIMEOUT,
        };
        let result = match stop_as(b, req, StopKind::Expired { at: d.expires_at }).await {
            Ok(o @ StopOutcome::Terminated(_)) => ExpiryResult::Terminated {
                exit_code: exit_code(&o),
            },
            Ok(StopOutcome::InProgress(_)) => ExpiryResult::InProgress,
            Err(e) if e.to_api_error().code() == 409 => ExpiryResult::Refused(e.to_string()),
            Err(e) => ExpiryResult::Failed(e.to_string()),
        };
        Expired {
            pod_uid: d.pod_uid,
            namespace: d.namespace,
            pod: d.pod,
            name: d.name,
            container: d.container,
            image: d.image,
            started_at: d.started_at,
            expires_at: d.expires_at,
            result,
        }
    });
    Ok(futures::stream::iter(stops)
        .buffer_unordered(CONCURRENT_STOPS)
        .collect()
        .await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_with(expires_at: &str, state: serde_json::Value) -> Pod {
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
        .expect("pod")
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
}
