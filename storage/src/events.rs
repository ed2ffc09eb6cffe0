//! Kubernetes Events recorded on the pod (core/v1 `Event`, the kind `kubectl describe pod` and
//! `kubectl events` show), so the pod's history says who debugged it. Written with the server's
//! own identity (RBAC: `create` on `events` in group `""`); a failure is logged, never returned.
//!
//! kube-runtime's `events::Recorder` is not used: it writes `events.k8s.io/v1` Events (`note`,
//! `regarding`) and folds repeats into a series with a per-process cache, while every Event here
//! happens once per container (one create, at most one effective stop) and readers of this API —
//! `kubectl describe pod`, the docs, the tests — use the core/v1 shape built below.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Api;
use kube::api::PostParams;
use poddebug_types::StopRequest as StopRecord;

use crate::Caller;

/// Reason of the Event recorded when a debug container is added.
pub const REASON_CREATED: &str = "DebugContainerCreated";
/// Reason of the Event recorded when a debug container is stopped.
pub const REASON_STOPPED: &str = "DebugContainerStopped";
/// Reason of the Event recorded when the server stops a debug container whose time limit
/// (`ttlSeconds`) passed.
pub const REASON_EXPIRED: &str = "DebugContainerExpired";
/// Reason of the `Warning` Event recorded when the time limit of a debug container passed and
/// the server cannot stop it.
pub const REASON_NOT_STOPPABLE: &str = "DebugContainerNotStoppable";
/// Reason of the Event recorded when someone terminates a live session on a debug container.
pub const REASON_SESSION_TERMINATED: &str = "DebugSessionTerminated";
/// Reason of the `Warning` Event recorded once when a debug container that was stopped (or
/// whose time limit passed) still runs past the bound its stop allowed it.
pub const REASON_STOP_FAILED: &str = "DebugContainerStopFailed";
/// Reason of the `Warning` Event recorded when the server evicted a pod because one of its
/// debug containers did not end when stopped (`--unstoppable-action=evict`).
pub const REASON_POD_EVICTED: &str = "DebugContainerPodEvicted";
/// Reason of the `Warning` Event recorded when such an eviction is refused (a
/// PodDisruptionBudget); it is tried again.
pub const REASON_EVICTION_BLOCKED: &str = "DebugContainerEvictionBlocked";

/// The reasons recorded as `Warning` Events; every other one is `Normal`.
const WARNINGS: [&str; 4] = [
    REASON_NOT_STOPPABLE,
    REASON_STOP_FAILED,
    REASON_POD_EVICTED,
    REASON_EVICTION_BLOCKED,
];

/// Who records the Events.
#[derive(Clone, Debug)]
pub(crate) struct Reporter {
    /// `source.component` / `reportingComponent`.
    pub(crate) component: String,
    /// `reportingInstance`; empty = unset.
    pub(crate) instance: String,
}

/// A `Normal` Event about ephemeral container `ec_name` of `pod`, at `now`. Named
/// `<pod>.<hex nanoseconds>` like client-go's recorder.
pub(crate) fn build_event(
    reporter: &Reporter,
    pod: &Pod,
    ec_name: &str,
    reason: &str,
    message: String,
    now: jiff::Timestamp,
) -> Event {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let nanos = u128::try_from(now.as_nanosecond()).unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{pod_name}.{nanos:x}")),
            namespace: pod.metadata.namespace.clone(),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            name: Some(pod_name),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            field_path: Some(format!("spec.ephemeralContainers{{{ec_name}}}")),
        },
        reason: Some(reason.to_owned()),
        message: Some(message),
        type_: Some(
            if WARNINGS.contains(&reason) {
                "Warning"
            } else {
                "Normal"
            }
            .to_owned(),
        ),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        action: Some(
            match reason {
                REASON_STOPPED | REASON_EXPIRED | REASON_NOT_STOPPABLE | REASON_STOP_FAILED => {
                    "Stop"
                }
                REASON_POD_EVICTED | REASON_EVICTION_BLOCKED => "Evict",
                _ => "Create",
            }
            .to_owned(),
        ),
        source: Some(EventSource {
            component: Some(reporter.component.clone()),
            host: None,
        }),
        reporting_component: Some(reporter.component.clone()),
        // kube-apiserver requires reportingInstance on every Event that has an eventTime.
        reporting_instance: Some(if reporter.instance.is_empty() {
            reporter.component.clone()
        } else {
            reporter.instance.clone()
        }),
        ..Default::default()
    }
}

/// How the caller is named in messages.
fn who(caller: &Caller) -> String {
    if caller.user.is_empty() {
        "An unknown user".to_owned()
    } else {
        format!("User {:?}", caller.user)
    }
}

/// " (ephemeral container X)" when the debug name was reused, else nothing.
fn ec_note(debug_name: &str, ec_name: &str) -> String {
    if debug_name == ec_name {
        String::new()
    } else {
        format!(" (ephemeral container {ec_name:?})")
    }
}

/// Message of [`REASON_CREATED`].
pub(crate) fn created_message(
    caller: &Caller,
    debug_name: &str,
    ec_name: &str,
    image: &str,
    profile: &str,
    why: &poddebug_types::request::Justification,
) -> String {
    format!(
        "{} created debug container {debug_name:?}{} with image {image:?} and profile {profile:?}{}",
        who(caller),
        ec_note(debug_name, ec_name),
        justification_note(why),
    )
}

/// `, under debug request R approved by bob, reason "…", ticket "…"` (empty for none).
pub(crate) fn justification_note(why: &poddebug_types::request::Justification) -> String {
    let d = why.describe();
    if d.is_empty() { d } else { format!(", {d}") }
}

/// Message of [`REASON_STOPPED`]: who, which container and the grace period (the Event's
/// time is when); `terminated` says whether the kubelet reported it terminated before the
/// request was answered.
pub(crate) fn stopped_message(
    caller: &Caller,
    debug_name: &str,
    ec_name: &str,
    record: &StopRecord,
    terminated: bool,
) -> String {
    let grace = record
        .grace_period_seconds
        .map(|g| format!(" with a grace period of {g}s"))
        .unwrap_or_default();
    let (verb, tail) = if terminated {
        ("stopped", "")
    } else {
        (
            "asked to stop",
            "; it had not terminated yet when the request was answered",
        )
    };
    format!(
        "{} {verb} debug container {debug_name:?}{}{grace}{tail}",
        who(caller),
        ec_note(debug_name, ec_name)
    )
}

/// Message of [`REASON_EXPIRED`]: which container, its deadline and the grace period;
/// `terminated` as for [`stopped_message`].
pub(crate) fn expired_message(
    debug_name: &str,
    ec_name: &str,
    at: jiff::Timestamp,
    record: &StopRecord,
    terminated: bool,
) -> String {
    let grace = record
        .grace_period_seconds
        .map(|g| format!(" with a grace period of {g}s"))
        .unwrap_or_default();
    let (verb, tail) = if terminated {
        ("stopped", "")
    } else {
        (
            "asked to stop",
            "; it had not terminated yet when the stop ended",
        )
    };
    format!(
        "Time limit of debug container {debug_name:?}{} passed at {at}: poddebug {verb} it{grace}{tail}",
        ec_note(debug_name, ec_name)
    )
}

/// Create `event` with `client` (the server's identity), waiting at most `timeout`. Failures are
/// logged only.
pub(crate) async fn record(client: kube::Client, event: Event, timeout: Duration) {
    let ns = event.metadata.namespace.clone().unwrap_or_default();
    let reason = event.reason.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client, &ns);
    match tokio::time::timeout(timeout, api.create(&PostParams::default(), &event)).await {
        Ok(Ok(_)) => tracing::debug!(namespace = %ns, %reason, "event recorded"),
        Ok(Err(e)) => {
            tracing::warn!(namespace = %ns, %reason, error = %e, "could not record event")
        }
        Err(_) => tracing::warn!(namespace = %ns, %reason, "recording event timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::pod;

    fn reporter() -> Reporter {
        Reporter {
            component: "poddebug".into(),
            instance: String::new(),
        }
    }

    #[test]
    fn created_event_points_at_the_container() {
        let caller = Caller {
            user: "alice".into(),
            ..Default::default()
        };
        let now: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().expect("timestamp");
        let msg = created_message(
            &caller,
            "dbg",
            "dbg",
            "busybox:1.36",
            "general",
            &Default::default(),
        );
        let ev = build_event(
            &reporter(),
            &pod("web", &[]),
            "dbg",
            REASON_CREATED,
            msg,
            now,
        );
        let v = serde_json::to_value(&ev).expect("json");
        assert_eq!(v["reason"], "DebugContainerCreated");
        assert_eq!(v["type"], "Normal");
        assert_eq!(v["involvedObject"]["kind"], "Pod");
        assert_eq!(v["involvedObject"]["name"], "web");
        assert_eq!(v["involvedObject"]["namespace"], "ns");
        assert_eq!(v["involvedObject"]["uid"], "uid-1");
        assert_eq!(
            v["involvedObject"]["fieldPath"],
            "spec.ephemeralContainers{dbg}"
        );
        assert_eq!(v["source"]["component"], "poddebug");
        assert_eq!(v["reportingComponent"], "poddebug");
        // Required by kube-apiserver whenever eventTime is set; the component stands in when no
        // instance was configured.
        assert_eq!(v["reportingInstance"], "poddebug");
        assert!(v["eventTime"].is_string());
        assert!(!v["action"].as_str().unwrap_or("").is_empty());
        assert_eq!(v["metadata"]["namespace"], "ns");
        assert_eq!(
            v["metadata"]["name"],
            format!("web.{:x}", now.as_nanosecond())
        );
        assert_eq!(v["count"], 1);
        assert_eq!(
            v["message"],
            "User \"alice\" created debug container \"dbg\" with image \"busybox:1.36\" and profile \"general\""
        );
    }

    #[test]
    fn expired_message_names_the_deadline() {
        let record = StopRecord {
            grace_period_seconds: Some(10),
            ..Default::default()
        };
        let at: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().expect("timestamp");
        assert_eq!(
            expired_message("dbg", "dbg", at, &record, true),
            "Time limit of debug container \"dbg\" passed at 2026-01-02T03:04:05Z: poddebug stopped it with a grace period of 10s"
        );
        assert_eq!(
            expired_message("dbg", "dbg-x", at, &record, false),
            "Time limit of debug container \"dbg\" (ephemeral container \"dbg-x\") passed at 2026-01-02T03:04:05Z: poddebug asked to stop it with a grace period of 10s; it had not terminated yet when the stop ended"
        );
    }

    #[test]
    fn stopped_message_names_a_reused_container() {
        let caller = Caller {
            user: "bob".into(),
            ..Default::default()
        };
        let record = StopRecord {
            grace_period_seconds: Some(3),
            ..Default::default()
        };
        assert_eq!(
            stopped_message(&caller, "dbg", "dbg-bcdfg", &record, true),
            "User \"bob\" stopped debug container \"dbg\" (ephemeral container \"dbg-bcdfg\") with a grace period of 3s"
        );
        assert_eq!(
            stopped_message(
                &Caller::default(),
                "dbg",
                "dbg",
                &StopRecord::default(),
                true
            ),
            "An unknown user stopped debug container \"dbg\""
        );
        assert_eq!(
            stopped_message(&caller, "dbg", "dbg", &record, false),
            "User \"bob\" asked to stop debug container \"dbg\" with a grace period of 3s; it had not terminated yet when the request was answered"
        );
    }
}
