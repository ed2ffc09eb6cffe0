//! Stop (`DELETE`): end a debug container's processes without touching the target's, within
//! the request's deadline.
//!
//! 1. Read the pod; find the newest ephemeral container of the debug name (404 if none).
//! 2. Already terminated: answer its object, nothing else (idempotent). Not started yet
//!    (waiting, no status): 409 Conflict, there is no process to stop. Its main process is PID 1
//!    of its own PID namespace (`status.stoppable: false`, see `poddebug_types::stoppable`):
//!    409 Conflict explaining that it ends only by its own exit, before anything is done.
//! 3. Record the stop in the cluster (`DELETE` only; see `stop_lease`): a signed Lease in the
//!    server's namespace, which from then on refuses attach and log follow of the container on
//!    every replica, and bounds how long it may take to end (see `unstoppable`). Not recorded:
//!    503, nothing done. A stop that then changes nothing (no `sh`, no `/proc`, nothing to
//!    signal, its own PID 1 survives) removes the record it wrote. A container that an earlier
//!    stop or its time limit did not end within its bound: 409, nothing tried again.
//! 4. Exec [`STOP_SCRIPT`](crate::STOP_SCRIPT) in the debug container itself. Before its first
//!    signal the script appends the stop record (who, when, grace period) to the container's
//!    termination message file (see `stop_record`), so nothing is written on the pod object. An
//!    image without `sh` (or `/proc`) gives 409 naming that, and nothing was changed.
//!    The script's exit code is the container's to fake (a `/bin/sh` of its own): a stop that
//!    did not end the container within its bound is found by the leader, whatever the script
//!    said.
//! 5. Wait for the kubelet to report it terminated: `Terminated`, else `InProgress` (202).
//! 6. Record the Event `DebugContainerStopped` (server identity) whenever signals were or may
//!    have been sent, a stop cut short by the deadline included.
//!
//! Time: the request's `timeout` is split by [`budget`]: a share kept for the Event, the grace
//! period cut so that the script can finish, every kube call bounded by what is left.

use std::time::Duration;

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, Time};
use kube::Api;
use kube::api::AttachParams;
use poddebug_types::convert::expires_at_of;
use poddebug_types::stoppable::stop_blocker;
use poddebug_types::{ApiError, GROUP, PodDebugContainer, StopRequest as StopRecord};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

use crate::cluster::Cluster;
use crate::events::{REASON_EXPIRED, REASON_STOPPED, expired_message, stopped_message};
use crate::policy::RESOURCE;
use crate::state::{EcState, ec_state, ephemeral_container};
use crate::stop_lease::{StopLease, StopLeases, StopOrigin};
use crate::stop_record::{DEFAULT_TERMINATION_MESSAGE_PATH, record_line};
use crate::stop_script::{ScriptOutcome, StopInvocation, interpret, is_missing_shell};
use crate::unstoppable::stopping;
use crate::wait::{Waited, wait_for};
use crate::{BackendConfig, StopOutcome, StopRequest, StorageError, read};

/// Output kept from the script, per stream.
const OUTPUT_CAP: usize = 16 * 1024;
/// How long to look at the status after the script reported a problem.
const SHORT_STATUS_WAIT: Duration = Duration::from_secs(2);

/// How one stop spends the request's time (offsets from its start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The grace period the script gets, in whole seconds.
    pub(crate) grace: Duration,
    /// Reads, exec and status wait end by then.
    pub(crate) work: Duration,
    /// Kept after `work` for the Event.
    pub(crate) event: Duration,
}

/// The budget of a stop that may take `timeout`, asked for with grace period `requested`: a
/// sixth of it (at most the Event timeout) is kept for the Event; the grace period is cut to
/// the configured maximum and to half of the rest, so that the script can still SIGKILL and
/// the status be read.
pub(crate) fn budget(timeout: Duration, requested: Duration, config: &BackendConfig) -> Budget {
    let event = config.event_timeout.min(timeout / 6);
    let work = timeout.saturating_sub(event);
    let grace = requested.min(config.max_grace_period).min(work / 2);
    Budget {
        grace: Duration::from_secs(grace.as_secs()),
        work,
        event,
    }
}

/// 504 for a stop whose deadline passed before `what`.
fn too_late(what: &str) -> StorageError {
    ApiError::Timeout(format!(
        "the stop did not {what} within the request's deadline"
    ))
    .into()
}

/// Read a stream to its end, keeping at most [`OUTPUT_CAP`] bytes (the rest is drained, so the
/// exec's relay never blocks on a full pipe).
async fn drain(reader: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut reader) = reader else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = reader.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = OUTPUT_CAP.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Run the stop script in container `ec_name` until `end`; the outcome and the script's
/// output. An exec that could not even start by `end` is a 504 (nothing was run); one that
/// started and did not finish is [`ScriptOutcome::Ended`] (signals may have been sent).
async fn run_script(
    api: &Api<Pod>,
    pod: &str,
    ec_name: &str,
    invocation: &StopInvocation,
    end: Instant,
) -> Result<(ScriptOutcome, String), StorageError> {
    let ap = AttachParams::default()
        .container(ec_name)
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let started = tokio::time::timeout_at(end, api.exec(pod, invocation.command(), &ap)).await;
    let mut process = match started {
        Err(_) => return Err(too_late("get its script started")),
        Ok(Ok(p)) => p,
        Ok(Err(kube::Error::Api(s))) if is_missing_shell(&s.message) => {
            return Ok((ScriptOutcome::NoShell(s.message.clone()), String::new()));
        }
        Ok(Err(e)) => return Err(StorageError::from(e)),
    };
    let run = async {
        let status = process.take_status();
        let (stdout, stderr) = (process.stdout(), process.stderr());
        let (out, err, status): (String, String, Option<Status>) =
            tokio::join!(drain(stdout), drain(stderr), async {
                match status {
                    Some(s) => s.await,
                    None => None,
                }
            });
        (interpret(status.as_ref()), format!("{out}{err}"))
    };
    let result = match tokio::time::timeout_at(end, run).await {
        Ok(done) => done,
        // Signals may have been sent: let the status decide.
        Err(_) => (
            ScriptOutcome::Ended,
            "the stop script did not finish within the request's deadline".to_owned(),
        ),
    };
    // The stream is done or abandoned: close it without waiting on the connection.
    process.abort();
    Ok(result)
}

/// 409 Conflict on debug container `name`.
fn conflict(name: &str, reason: String) -> StorageError {
    ApiError::conflict(RESOURCE, GROUP, name, reason).into()
}

/// The explanation of an unkillable PID 1 found by the script.
fn own_init_reason() -> String {
    "the debug container's main process is PID 1 of its own PID namespace and ignores signals \
     sent from inside the container; its other processes were stopped. End its main process from \
     its own session (for example `exit` in an attached shell)"
        .to_owned()
}

/// The object to answer, showing the stop record (when the script ran) even if the pod does not
/// carry it yet (it shows there once the container has terminated).
fn answer(
    b: &Cluster,
    pod: &Pod,
    ec_name: &str,
    record: Option<&StopRecord>,
) -> Result<PodDebugContainer, ApiError> {
    let mut obj = read::object_by_ec_name(pod, ec_name, b.stop_leases())?;
    if let (Some(status), Some(record)) = (obj.status.as_mut(), record) {
        status.stop_requested.get_or_insert_with(|| record.clone());
    }
    Ok(obj)
}

/// The termination message file of `ec`, where the record goes.
fn message_path(ec: &EphemeralContainer) -> String {
    ec.termination_message_path
        .clone()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_TERMINATION_MESSAGE_PATH.to_owned())
}

/// Why a stop is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StopKind {
    /// `DELETE` by the caller (as the caller with `--impersonate`); Event `DebugContainerStopped`.
    /// The newest ephemeral container of the request's debug name is stopped.
    Requested,
    /// The time limit of ephemeral container `container` (exactly that one, not the newest of
    /// its debug name) passed at `at`, by the clock of `now`: the server's own identity, Event
    /// `DebugContainerExpired`. The stop re-checks on the pod it reads that this container is
    /// still running and due, and does nothing otherwise ([`StorageError::NotDue`]).
    Expired {
        /// The ephemeral container's own name.
        container: String,
        /// The deadline that passed.
        at: jiff::Timestamp,
        /// The time the deadline is judged at.
        now: jiff::Timestamp,
    },
}

/// Stop a debug container (the whole flow in the module docs).
pub(crate) async fn stop(b: &Cluster, req: StopRequest) -> Result<StopOutcome, StorageError> {
    stop_as(b, req, StopKind::Requested).await
}

/// The Event of a stop that sent (or may have sent) its signals.
fn stop_event(
    kind: &StopKind,
    req: &StopRequest,
    ec_name: &str,
    record: &StopRecord,
    terminated: bool,
) -> (&'static str, String) {
    match kind {
        StopKind::Requested => (
            REASON_STOPPED,
            stopped_message(&req.caller, &req.name, ec_name, record, terminated),
        ),
        StopKind::Expired { at, .. } => (
            REASON_EXPIRED,
            expired_message(&req.name, ec_name, *at, record, terminated),
        ),
    }
}

/// [`stop`], for `kind`.
pub(crate) async fn stop_as(
    b: &Cluster,
    req: StopRequest,
    kind: StopKind,
) -> Result<StopOutcome, StorageError> {
    let start = Instant::now();
    let budget = budget(req.timeout, req.grace_period, b.config());
    let work_end = start + budget.work;
    let deadline = start + req.timeout;

    let api: Api<Pod> = match kind {
        StopKind::Requested => b.pods(&req.namespace, &req.caller)?,
        StopKind::Expired { .. } => Api::namespaced(b.server_client(), &req.namespace),
    };
    let pod = tokio::time::timeout_at(work_end, api.get(&req.pod))
        .await
        .map_err(|_| too_late("read the pod"))??;
    let ec = match &kind {
        StopKind::Requested => read::newest(&pod, &req.name)?,
        StopKind::Expired { container, now, .. } => {
            // The pod this stop acts on, not the one the expiry round listed, decides.
            match ephemeral_container(&pod, container) {
                Some(ec)
                    if expires_at_of(ec).is_some_and(|at| at <= *now)
                        && ec_state(&pod, &ec.name) == EcState::Running =>
                {
                    ec
                }
                _ => return Err(StorageError::NotDue),
            }
        }
    };
    let ec_name = ec.name.clone();
    match ec_state(&pod, &ec_name) {
        EcState::Terminated { .. } => {
            return Ok(StopOutcome::Terminated(read::object_by_ec_name(
                &pod,
                &ec_name,
                b.stop_leases(),
            )?));
        }
        s @ EcState::Waiting { .. } => {
            return Err(conflict(
                &req.name,
                format!(
                    "the debug container has not started ({}), so it has no process to stop",
                    s.describe()
                ),
            ));
        }
        EcState::Running => {
            if let Some(why) = stop_blocker(&pod, ec) {
                return Err(conflict(
                    &req.name,
                    format!("the debug container cannot be stopped: {why}; nothing was done"),
                ));
            }
        }
    }

    let record = StopRecord {
        requested_at: Time(jiff::Timestamp::now()),
        requested_by: req.caller.user.clone(),
        grace_period_seconds: Some(budget.grace.as_secs()),
    };
    // A DELETE is recorded in the cluster before anything is signalled (see `stop_lease`).
    let lease = match kind {
        StopKind::Requested => record_in_cluster(b, &req, &pod, ec, &record, work_end).await?,
        StopKind::Expired { .. } => None,
    };
    let invocation = StopInvocation {
        grace_secs: budget.grace.as_secs(),
        record: record_line(&record),
        message_path: message_path(ec),
    };
    let exec_end = (Instant::now() + budget.grace + b.config().stop_exec_timeout).min(work_end);
    let ran = run_script(&api, &req.pod, &ec_name, &invocation, exec_end).await;
    let nothing_done = match &ran {
        Err(_) => true,
        Ok((o, _)) => matches!(
            o,
            ScriptOutcome::NoShell(_)
                | ScriptOutcome::NoProc
                | ScriptOutcome::NothingToSignal
                | ScriptOutcome::OwnInitSurvives
        ),
    };
    // A stop that changed nothing (or, its main process surviving, asks the user to end it from
    // a session) does not keep the container from its sessions.
    if nothing_done && let Some((leases, name)) = &lease {
        leases.remove(name, None).await;
    }
    let (outcome, output) = ran?;
    tracing::info!(
        namespace = %req.namespace, pod = %req.pod, container = %ec_name, user = %req.caller.user,
        ?outcome, output = %output.trim(), "stop script ran"
    );
    let status_wait = match &outcome {
        ScriptOutcome::NoShell(msg) => {
            return Err(conflict(
                &req.name,
                format!(
                    "the debug container's image has no `sh`, which stopping it requires ({}); \
                     nothing was done",
                    msg.trim()
                ),
            ));
        }
        ScriptOutcome::NoProc => {
            return Err(conflict(
                &req.name,
                "/proc is not available inside the debug container, so its processes cannot be \
                 found; nothing was done"
                    .to_owned(),
            ));
        }
        ScriptOutcome::Failed(msg) => {
            return Err(ApiError::Internal(format!(
                "the stop script failed in debug container {:?}: {}",
                req.name,
                msg.trim()
            ))
            .into());
        }
        ScriptOutcome::OwnInitSurvives | ScriptOutcome::NothingToSignal => SHORT_STATUS_WAIT,
        ScriptOutcome::Signalled | ScriptOutcome::Ended => b.config().stop_status_wait,
    };
    // The script records and signals together: a refused stop changed nothing.
    let signalled = !matches!(outcome, ScriptOutcome::NothingToSignal);
    let wait_end = (Instant::now() + status_wait).min(work_end);
    let waited = wait_for(&api, pod.clone(), remaining(wait_end), |p| {
        ec_state(p, &ec_name).is_terminated()
    })
    .await;
    let (terminated, pod) = match waited {
        Ok(Waited::Done(p)) => (true, p),
        Ok(Waited::TimedOut(p)) => (false, p),
        // The signals are out whatever the status read says: keep the record before answering.
        Err(e) => {
            if signalled {
                let (reason, message) = stop_event(&kind, &req, &ec_name, &record, false);
                b.record_event_within(&pod, &ec_name, reason, message, remaining(deadline))
                    .await;
            }
            return Err(e);
        }
    };
    if signalled {
        let (reason, message) = stop_event(&kind, &req, &ec_name, &record, terminated);
        b.record_event_within(&pod, &ec_name, reason, message, remaining(deadline))
            .await;
    }
    if !terminated {
        match outcome {
            ScriptOutcome::OwnInitSurvives => return Err(conflict(&req.name, own_init_reason())),
            ScriptOutcome::NothingToSignal => {
                return Err(conflict(
                    &req.name,
                    "found no process of the debug container to signal (they may run as another user)".to_owned(),
                ));
            }
            _ => {}
        }
    }
    let obj = answer(b, &pod, &ec_name, signalled.then_some(&record))?;
    Ok(if terminated {
        StopOutcome::Terminated(obj)
    } else {
        StopOutcome::InProgress(obj)
    })
}

/// Record the stop `record` of `ec` in the cluster, by `end` (see `stop_lease`); the records and
/// the record's name when this stop wrote it (an earlier stop's record is kept as it is). Not
/// recorded: 503, and nothing was done.
async fn record_in_cluster(
    b: &Cluster,
    req: &StopRequest,
    pod: &Pod,
    ec: &EphemeralContainer,
    record: &StopRecord,
    end: Instant,
) -> Result<Option<(StopLeases, String)>, StorageError> {
    let (Some(leases), Some(uid)) = (b.stop_leases(), pod.metadata.uid.as_deref()) else {
        return Ok(None);
    };
    let unreadable = |e: StorageError| -> StorageError {
        tracing::warn!(namespace = %req.namespace, pod = %req.pod, container = %ec.name,
            error = %e, "a stop could not be recorded; nothing was done");
        ApiError::ServiceUnavailable(format!(
            "the stop of debug container {:?} could not be recorded in the cluster, so nothing \
             was done; try again",
            req.name
        ))
        .into()
    };
    // A container that an earlier stop (or its time limit) did not end: running the same
    // program inside it again would change nothing.
    let existing = tokio::time::timeout_at(end, leases.fetch(uid, &ec.name))
        .await
        .map_err(|_| too_late("read its stop record"))?
        .map_err(unreadable)?;
    let now = jiff::Timestamp::now();
    if let Some(earlier) = stopping(ec, existing.as_ref(), now, b.config())
        && earlier.outlived(now)
    {
        return Err(conflict(
            &req.name,
            format!(
                "{} and it did not end when stopped: its image may have replaced what a stop runs \
                 inside it, so poddebug does not try again. It is unusable through poddebug; \
                 delete or evict the pod to end it",
                earlier.what(&req.name)
            ),
        ));
    }
    if existing.is_some_and(|r| r.origin == StopOrigin::Delete) {
        // An earlier stop's record stands: the earliest request bounds the stop.
        return Ok(None);
    }
    let lease = StopLease {
        namespace: req.namespace.clone(),
        pod: req.pod.clone(),
        pod_uid: uid.to_owned(),
        name: req.name.clone(),
        container: ec.name.clone(),
        origin: StopOrigin::Delete,
        requested_by: record.requested_by.clone(),
        requested_at: record.requested_at.0,
        grace_period_seconds: record.grace_period_seconds.unwrap_or_default(),
        unstoppable_since: None,
        message: None,
    };
    match tokio::time::timeout_at(end, leases.record_stop(&lease)).await {
        Err(_) => Err(too_late("record the stop")),
        Ok(Err(e)) => Err(unreadable(e)),
        Ok(Ok((_, true))) => Ok(Some((leases.clone(), lease.lease_name()))),
        Ok(Ok((_, false))) => Ok(None),
    }
}

/// Time left until `deadline`.
fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use poddebug_types::Profile;

    fn config() -> BackendConfig {
        BackendConfig::new(Policy {
            allowed_images: vec![],
            default_image: "busybox".into(),
            default_profile: Profile::General,
            max_debug_containers_per_pod: 0,
            default_target: crate::DefaultTarget::None,
        })
    }

    #[test]
    fn the_budget_follows_the_request_timeout() {
        let s = Duration::from_secs;
        // What the handler passes with kube-apiserver's default of 1m: the Event keeps its
        // configured 3s, and the grace period leaves the script half of the rest.
        let b = budget(s(50), s(60), &config());
        assert_eq!(
            b,
            Budget {
                grace: s(23),
                work: s(47),
                event: s(3)
            }
        );
        let b = budget(s(600), s(60), &config());
        assert_eq!(b.grace, s(25), "the configured maximum");
        let b = budget(s(50), s(10), &config());
        assert_eq!(b.grace, s(10));
        // A short request timeout cuts everything down with it.
        let b = budget(s(6), s(30), &config());
        assert_eq!(
            b,
            Budget {
                grace: s(2),
                work: s(5),
                event: s(1)
            }
        );
        assert!(b.work + b.event <= s(6));
        let b = budget(Duration::from_millis(1500), s(30), &config());
        assert_eq!(b.grace, Duration::ZERO);
        assert_eq!(b.work + b.event, Duration::from_millis(1500));
        assert_eq!(budget(Duration::ZERO, s(1), &config()).work, Duration::ZERO);
    }
}
