//! Debug containers that a stop did not end, and what poddebug then does: nothing it must be able
//! to do depends on a program inside the user's container.
//!
//! A stop (`DELETE`, or the expiry at a time limit) runs the stop script inside the debug
//! container, which is that container's to sabotage: a `/bin/sh` replaced by one that exits 0, a
//! `PATH` of its own. So poddebug does not take the script's word. Once a stop was requested —
//! its stop record says so ([`StopLeases`], written before any signal) or its deadline
//! ([`EXPIRES_AT_ENV`](poddebug_types::convert::EXPIRES_AT_ENV), in the immutable pod spec)
//! passed — the debug container is no longer reached through poddebug: new attach sessions
//! (joining someone's included) and log follows are refused with 409 Conflict, on every
//! replica, before and after any restart ([`refusal`]). A plain log read (without `follow`)
//! stays allowed: it shows what the container printed and reaches nothing inside it.
//!
//! Each stop has a bound ([`Stopping::bound`]): for `DELETE`, its request time plus its grace
//! period plus `--unstoppable-after`; for a time limit, the deadline plus one
//! `--debug-ttl-check-interval` (the round that stops it may come that late), plus the expiry's
//! grace period, plus `--unstoppable-after`. A debug container still running past its bound is
//! unstoppable. The leader looks for those every round ([`find`]) and reports each once, through
//! its stop record (made then for a time limit): a `Warning` Event `DebugContainerStopFailed` on
//! the pod, the `Unstoppable` condition in the container's status ([`condition`]), and — by its
//! caller — an audit record, a metric, the end of the container's live sessions on every replica,
//! and with `--unstoppable-action=evict` the eviction of its pod ([`crate::eviction`]).
//!
//! The leader also removes the stop records that are no longer needed ([`collect_records`]):
//! those of pods that are gone (or made again under the same name) and of containers that
//! terminated.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::Api;
use poddebug_types::api::{
    CONDITION_UNSTOPPABLE, REASON_EXPIRY_DID_NOT_END, REASON_STOP_DID_NOT_END,
};
use poddebug_types::convert::{debug_containers_of, expires_at_of};
use poddebug_types::{ApiError, GROUP};

use crate::cache::PodCache;
use crate::cluster::Cluster;
use crate::config::UnstoppableAction;
use crate::events::REASON_STOP_FAILED;
use crate::expiry::{EXPIRY_GRACE, EXPIRY_USER};
use crate::policy::RESOURCE;
use crate::state::{EcState, ec_state};
use crate::stop_lease::{Reported, StopLease, StopLeases, StopOrigin};
use crate::{BackendConfig, StorageError};

/// Why a debug container is no longer reached through poddebug: a stop was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stopping {
    /// What asked.
    pub(crate) origin: StopOrigin,
    /// Who asked (`DELETE`).
    pub(crate) requested_by: String,
    /// When it was asked (a time limit: the deadline).
    pub(crate) at: jiff::Timestamp,
    /// The grace period the stop gave.
    pub(crate) grace_secs: u64,
    /// When it should have ended by.
    pub(crate) bound: jiff::Timestamp,
    /// When the leader reported it unstoppable, if it did.
    pub(crate) since: Option<jiff::Timestamp>,
}

fn plus(t: jiff::Timestamp, d: std::time::Duration) -> jiff::Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(jiff::Timestamp::MAX)
}

/// The stop asked of ephemeral container `ec`, if any, at `now`: its verified stop `record`
/// (`DELETE`), or its deadline once passed; of both, the one whose bound comes first.
pub(crate) fn stopping(
    ec: &EphemeralContainer,
    record: Option<&StopLease>,
    now: jiff::Timestamp,
    config: &BackendConfig,
) -> Option<Stopping> {
    let expiry = expires_at_of(ec)
        .filter(|at| *at <= now)
        .map(|at| Stopping {
            origin: StopOrigin::Expiry,
            requested_by: EXPIRY_USER.to_owned(),
            at,
            grace_secs: EXPIRY_GRACE.as_secs(),
            bound: plus(
                plus(plus(at, config.expiry_check_interval), EXPIRY_GRACE),
                config.unstoppable_after,
            ),
            since: None,
        });
    let delete = record
        .filter(|r| r.origin == StopOrigin::Delete)
        .map(|r| Stopping {
            origin: StopOrigin::Delete,
            requested_by: r.requested_by.clone(),
            at: r.requested_at,
            grace_secs: r.grace_period_seconds,
            bound: plus(
                plus(
                    r.requested_at,
                    std::time::Duration::from_secs(r.grace_period_seconds),
                ),
                config.unstoppable_after,
            ),
            since: None,
        });
    let mut s = match (expiry, delete) {
        (Some(e), Some(d)) => {
            if d.bound <= e.bound {
                d
            } else {
                e
            }
        }
        (e, d) => e.or(d)?,
    };
    s.since = record.and_then(|r| r.unstoppable_since);
    Some(s)
}

impl Stopping {
    /// Whether the container outlived its stop.
    pub(crate) fn outlived(&self, now: jiff::Timestamp) -> bool {
        self.since.is_some() || now >= self.bound
    }

    /// "alice asked to stop debug container "dbg" at T" / "the time limit of … passed at T".
    pub(crate) fn what(&self, debug_name: &str) -> String {
        match self.origin {
            StopOrigin::Delete => format!(
                "{:?} asked to stop debug container {debug_name:?} at {}",
                self.requested_by, self.at
            ),
            StopOrigin::Expiry => format!(
                "the time limit of debug container {debug_name:?} passed at {}",
                self.at
            ),
        }
    }
}

/// The refusal of an attach or log follow of debug container `debug_name`, stopped as `s`.
pub(crate) fn refusal(debug_name: &str, s: &Stopping, now: jiff::Timestamp) -> ApiError {
    let state = if s.outlived(now) {
        "it did not end when stopped, so it is unusable through poddebug"
    } else {
        "it is being stopped"
    };
    ApiError::conflict(
        RESOURCE,
        GROUP,
        debug_name,
        format!(
            "{} and {state}: new attach sessions and log follows are refused (its log can still \
             be read without follow); create a new debug container",
            s.what(debug_name)
        ),
    )
}

/// The `Unstoppable` condition of a container whose stop `record` was reported.
pub(crate) fn condition(record: &StopLease) -> Option<Condition> {
    let since = record.unstoppable_since?;
    Some(Condition {
        type_: CONDITION_UNSTOPPABLE.to_owned(),
        status: "True".to_owned(),
        reason: match record.origin {
            StopOrigin::Delete => REASON_STOP_DID_NOT_END,
            StopOrigin::Expiry => REASON_EXPIRY_DID_NOT_END,
        }
        .to_owned(),
        message: record.message.clone().unwrap_or_default(),
        last_transition_time: Time(since),
        observed_generation: None,
    })
}

/// Where an attach or log follow of ephemeral container `ec` (as `debug_name`) is refused:
/// `Err` when a stop was asked of it (module docs). The stop record is read from the cluster
/// (the server's identity), so a stop through any replica counts at once; a record that
/// cannot be read refuses too (503), rather than letting a stopped container be reached.
pub(crate) async fn gate(
    b: &Cluster,
    pod: &Pod,
    ec: &EphemeralContainer,
    debug_name: &str,
) -> Result<(), StorageError> {
    if ec_state(pod, &ec.name).is_terminated() {
        return Ok(());
    }
    let record = match (b.stop_leases(), pod.metadata.uid.as_deref()) {
        (Some(leases), Some(uid)) => leases.fetch(uid, &ec.name).await.map_err(|e| {
            tracing::warn!(error = %e, "the stop records cannot be read; attach and log follow refused");
            ApiError::ServiceUnavailable(
                "the server cannot read the stop records of its namespace, so it refuses to \
                 reach debug containers for now; try again"
                    .to_owned(),
            )
        })?,
        _ => None,
    };
    let now = jiff::Timestamp::now();
    match stopping(ec, record.as_ref(), now, b.config()) {
        Some(s) => Err(refusal(debug_name, &s, now).into()),
        None => Ok(()),
    }
}

/// A debug container that its stop did not end (module docs), as the leader found it.
#[derive(Clone, Debug)]
pub struct Unstoppable {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// The pod's UID.
    pub pod_uid: String,
    /// Debug name.
    pub name: String,
    /// The ephemeral container's own name.
    pub container: String,
    /// Its image.
    pub image: String,
    /// What asked for the stop.
    pub origin: StopOrigin,
    /// Who asked (a time limit: `system:poddebug:expiry`).
    pub requested_by: String,
    /// When (a time limit: the deadline).
    pub requested_at: jiff::Timestamp,
    /// When it was reported unstoppable.
    pub since: jiff::Timestamp,
    /// The report.
    pub message: String,
    /// Reported by this round (Event written): the caller's audit record and count are due.
    pub newly_reported: bool,
    /// Its pod is being deleted already (an eviction is under way, or someone deleted it).
    pub pod_deleting: bool,
}

/// The report of a container stopped as `s`, found running at `now`.
fn report_message(
    s: &Stopping,
    debug_name: &str,
    ec_name: &str,
    now: jiff::Timestamp,
    action: UnstoppableAction,
) -> String {
    let note = if debug_name == ec_name {
        String::new()
    } else {
        format!(" (ephemeral container {ec_name:?})")
    };
    let what = match s.origin {
        StopOrigin::Delete => format!(
            "Debug container {debug_name:?}{note} did not end although {:?} asked to stop it at \
             {} with a grace period of {}s",
            s.requested_by, s.at, s.grace_secs
        ),
        StopOrigin::Expiry => format!(
            "The time limit of debug container {debug_name:?}{note} passed at {} and its stop \
             did not end it",
            s.at
        ),
    };
    let end = match action {
        UnstoppableAction::None => "delete or evict the pod to end it",
        UnstoppableAction::Evict => "the pod is evicted (--unstoppable-action=evict)",
    };
    format!(
        "{what}: it still ran at {now} (its image may have replaced what the stop runs). \
         poddebug refuses new attach sessions and log follows to it and ends its live sessions; \
         {end}"
    )
}

/// One round of the leader at `now` (module docs): every running debug container past its bound,
/// each reported once (stop record marked, Event written). Only the listing of pods can fail.
pub(crate) async fn find(
    b: &Cluster,
    cache: Option<&PodCache>,
    now: jiff::Timestamp,
) -> Result<Vec<Unstoppable>, StorageError> {
    let Some(leases) = b.stop_leases() else {
        return Ok(Vec::new());
    };
    let pods = crate::expiry::candidates(b, cache).await?;
    let mut out = Vec::new();
    for pod in &pods {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if uid.is_empty() {
            continue;
        }
        for (name, ec) in debug_containers_of(pod) {
            if ec_state(pod, &ec.name) != EcState::Running {
                continue;
            }
            let record = leases.cached(&uid, &ec.name);
            let Some(s) = stopping(ec, record.as_ref(), now, b.config()) else {
                continue;
            };
            if !s.outlived(now) {
                continue;
            }
            if let Some(u) = report(b, leases, pod, &uid, &name, ec, &s, record, now).await {
                out.push(u);
            }
        }
    }
    Ok(out)
}

/// Report one container found unstoppable: mark its record (once), and write the Event when
/// this call did. `None` when another writer raced this one (the next round looks again) or the
/// record cannot be written now (logged).
#[allow(clippy::too_many_arguments)]
async fn report(
    b: &Cluster,
    leases: &StopLeases,
    pod: &Arc<Pod>,
    uid: &str,
    name: &str,
    ec: &EphemeralContainer,
    s: &Stopping,
    record: Option<StopLease>,
    now: jiff::Timestamp,
) -> Option<Unstoppable> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let message = report_message(s, name, &ec.name, now, b.config().unstoppable_action);
    let found = |record: StopLease, message: String, newly: bool| Unstoppable {
        namespace: namespace.clone(),
        pod: pod_name.clone(),
        pod_uid: uid.to_owned(),
        name: name.to_owned(),
        container: ec.name.clone(),
        image: ec.image.clone().unwrap_or_default(),
        origin: record.origin,
        requested_by: record.requested_by,
        requested_at: record.requested_at,
        since: record.unstoppable_since.unwrap_or(now),
        message,
        newly_reported: newly,
        pod_deleting: pod.metadata.deletion_timestamp.is_some(),
    };
    // Reported before, as this replica's watch shows: nothing to write.
    if let Some(r) = record.as_ref().filter(|r| r.unstoppable_since.is_some()) {
        let message = r.message.clone().unwrap_or(message);
        return Some(found(r.clone(), message, false));
    }
    let wanted = match record {
        Some(r) => StopLease {
            unstoppable_since: Some(now),
            message: Some(message.clone()),
            ..r
        },
        None => StopLease {
            namespace: namespace.clone(),
            pod: pod_name.clone(),
            pod_uid: uid.to_owned(),
            name: name.to_owned(),
            container: ec.name.clone(),
            origin: s.origin,
            requested_by: s.requested_by.clone(),
            requested_at: s.at,
            grace_period_seconds: s.grace_secs,
            unstoppable_since: Some(now),
            message: Some(message.clone()),
        },
    };
    let (record, newly) = match leases.report(&wanted).await {
        Ok(Reported::Now(r)) => (r, true),
        Ok(Reported::Already(r)) => (r, false),
        Ok(Reported::Raced) => return None,
        Err(e) => {
            tracing::warn!(namespace = %namespace, pod = %pod_name, container = %ec.name, error = %e,
                "an unstoppable debug container cannot be reported yet; trying again next round");
            return None;
        }
    };
    let message = record.message.clone().unwrap_or(message);
    if newly {
        b.record_event_within(
            pod,
            &ec.name,
            REASON_STOP_FAILED,
            message.clone(),
            b.config().event_timeout,
        )
        .await;
    }
    Some(found(record, message, newly))
}

/// Remove the stop records no longer needed (module docs): of pods gone or made again, of
/// containers that terminated, and Leases under the stop-record label that hold no record at
/// all. A pod absent from the cache is looked up before its records go. The number removed.
pub(crate) async fn collect_records(b: &Cluster, cache: Option<&PodCache>) -> usize {
    let Some(leases) = b.stop_leases() else {
        return 0;
    };
    if !leases.is_synced() {
        return 0;
    }
    let cached: Vec<Arc<Pod>> = match cache {
        Some(c) if c.is_synced() => c.snapshot().0,
        _ => Vec::new(),
    };
    let mut removed = 0;
    for (lease, rv, record) in leases.all() {
        let about = match record {
            Ok(r) => Some(r),
            Err(claimed) => claimed,
        };
        let needed = match about {
            None => false,
            Some(r) => still_needed(b, &cached, &r).await,
        };
        if !needed {
            leases.remove(&lease, Some(&rv)).await;
            removed += 1;
        }
    }
    removed
}

/// Whether the container `r` is about still runs (or may: a read that fails keeps it).
async fn still_needed(b: &Cluster, cached: &[Arc<Pod>], r: &StopLease) -> bool {
    let found = cached.iter().find(|p| {
        p.metadata.namespace.as_deref() == Some(r.namespace.as_str())
            && p.metadata.name.as_deref() == Some(r.pod.as_str())
    });
    let pod = match found {
        Some(p) => p.clone(),
        None => {
            let api: Api<Pod> = Api::namespaced(b.server_client(), &r.namespace);
            match api.get_opt(&r.pod).await {
                Ok(Some(p)) => Arc::new(p),
                Ok(None) => return false,
                Err(_) => return true,
            }
        }
    };
    pod.metadata.uid.as_deref() == Some(r.pod_uid.as_str())
        && !ec_state(&pod, &r.container).is_terminated()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use std::time::Duration;

    fn config() -> BackendConfig {
        let mut c = BackendConfig::new(Policy {
            allowed_images: vec![],
            default_image: "busybox".into(),
            default_profile: poddebug_types::Profile::General,
            max_debug_containers_per_pod: 0,
            default_target: crate::DefaultTarget::None,
        });
        c.unstoppable_after = Duration::from_secs(30);
        c.expiry_check_interval = Duration::from_secs(10);
        c
    }

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().expect("timestamp")
    }

    fn ec(expires_at: Option<&str>) -> EphemeralContainer {
        let mut ec = EphemeralContainer {
            name: "dbg".into(),
            ..Default::default()
        };
        if let Some(at) = expires_at {
            poddebug_types::convert::set_expires_at(&mut ec, ts(at));
        }
        ec
    }

    fn record(at: &str, grace: u64) -> StopLease {
        StopLease {
            namespace: "shop".into(),
            pod: "web".into(),
            pod_uid: "u1".into(),
            name: "dbg".into(),
            container: "dbg".into(),
            origin: StopOrigin::Delete,
            requested_by: "alice".into(),
            requested_at: ts(at),
            grace_period_seconds: grace,
            unstoppable_since: None,
            message: None,
        }
    }

    #[test]
    fn a_container_with_no_stop_asked_is_reached() {
        let now = ts("2026-01-02T03:00:00Z");
        assert_eq!(stopping(&ec(None), None, now, &config()), None);
        assert_eq!(
            stopping(&ec(Some("2026-01-02T03:00:01Z")), None, now, &config()),
            None,
            "before its deadline"
        );
    }

    #[test]
    fn bounds_allow_the_check_interval_the_grace_period_and_the_margin() {
        let c = config();
        let now = ts("2026-01-02T04:00:00Z");
        let s = stopping(&ec(Some("2026-01-02T03:00:00Z")), None, now, &c).expect("expired");
        assert_eq!(s.origin, StopOrigin::Expiry);
        // 10s check interval + 10s expiry grace + 30s.
        assert_eq!(s.bound, ts("2026-01-02T03:00:50Z"));
        let r = record("2026-01-02T03:30:00Z", 5);
        let s = stopping(&ec(None), Some(&r), now, &c).expect("deleted");
        assert_eq!(s.origin, StopOrigin::Delete);
        assert_eq!(s.bound, ts("2026-01-02T03:30:35Z"));
        // Both: the earlier bound holds.
        let s = stopping(&ec(Some("2026-01-02T03:00:00Z")), Some(&r), now, &c).expect("both");
        assert_eq!(s.origin, StopOrigin::Expiry);
        let late = stopping(&ec(Some("2026-01-02T03:59:59Z")), Some(&r), now, &c).expect("both");
        assert_eq!(late.origin, StopOrigin::Delete);
        // A record made for a time limit bounds nothing by itself.
        let mut e = r.clone();
        e.origin = StopOrigin::Expiry;
        assert_eq!(stopping(&ec(None), Some(&e), now, &c), None);
    }

    #[test]
    fn refusals_say_what_stop_was_asked_and_whether_it_failed() {
        let c = config();
        let r = record("2026-01-02T03:00:00Z", 5);
        let soon = ts("2026-01-02T03:00:10Z");
        let s = stopping(&ec(None), Some(&r), soon, &c).expect("stopping");
        let err = refusal("dbg", &s, soon);
        assert_eq!(err.code(), 409);
        assert_eq!(
            err.message(),
            "Operation cannot be fulfilled on pods/debug.poddebug.dev \"dbg\": \"alice\" asked to \
             stop debug container \"dbg\" at 2026-01-02T03:00:00Z and it is being stopped: new \
             attach sessions and log follows are refused (its log can still be read without \
             follow); create a new debug container"
        );
        let later = ts("2026-01-02T03:00:35Z");
        let err = refusal("dbg", &s, later);
        assert!(
            err.message()
                .contains("and it did not end when stopped, so it is unusable through poddebug"),
            "{}",
            err.message()
        );
        let s = stopping(&ec(Some("2026-01-02T03:00:00Z")), None, soon, &c).expect("expired");
        assert!(
            refusal("dbg", &s, soon).message().contains(
                "the time limit of debug container \"dbg\" passed at 2026-01-02T03:00:00Z and it is being stopped"
            )
        );
    }

    #[test]
    fn the_condition_comes_with_the_report() {
        let mut r = record("2026-01-02T03:00:00Z", 5);
        assert_eq!(condition(&r), None);
        r.unstoppable_since = Some(ts("2026-01-02T03:00:40Z"));
        r.message = Some("why".into());
        let c = condition(&r).expect("condition");
        assert_eq!(c.type_, "Unstoppable");
        assert_eq!(c.status, "True");
        assert_eq!(c.reason, "StopDidNotEnd");
        assert_eq!(c.message, "why");
        assert_eq!(c.last_transition_time.0, ts("2026-01-02T03:00:40Z"));
        r.origin = StopOrigin::Expiry;
        assert_eq!(condition(&r).expect("condition").reason, "ExpiryDidNotEnd");
        // Reported: unusable whatever the clock says.
        let s = stopping(
            &ec(None),
            Some(&record_reported()),
            ts("2026-01-02T03:00:01Z"),
            &config(),
        )
        .expect("stopping");
        assert!(s.outlived(ts("2026-01-02T03:00:01Z")));
    }

    fn record_reported() -> StopLease {
        StopLease {
            unstoppable_since: Some(ts("2026-01-02T03:00:00Z")),
            ..record("2026-01-02T03:00:00Z", 5)
        }
    }

    #[test]
    fn the_report_names_the_stop_and_what_happens_next() {
        let c = config();
        let now = ts("2026-01-02T03:01:00Z");
        let s = stopping(&ec(None), Some(&record("2026-01-02T03:00:00Z", 5)), now, &c)
            .expect("stopping");
        assert_eq!(
            report_message(&s, "dbg", "dbg-x", now, UnstoppableAction::None),
            "Debug container \"dbg\" (ephemeral container \"dbg-x\") did not end although \
             \"alice\" asked to stop it at 2026-01-02T03:00:00Z with a grace period of 5s: it \
             still ran at 2026-01-02T03:01:00Z (its image may have replaced what the stop runs). \
             poddebug refuses new attach sessions and log follows to it and ends its live \
             sessions; delete or evict the pod to end it"
        );
        let s = stopping(&ec(Some("2026-01-02T03:00:00Z")), None, now, &c).expect("expired");
        assert!(
            report_message(&s, "dbg", "dbg", now, UnstoppableAction::Evict).starts_with(
                "The time limit of debug container \"dbg\" passed at 2026-01-02T03:00:00Z and its \
                 stop did not end it: "
            )
        );
        assert!(
            report_message(&s, "dbg", "dbg", now, UnstoppableAction::Evict)
                .ends_with("the pod is evicted (--unstoppable-action=evict)")
        );
    }
}
