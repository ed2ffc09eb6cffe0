//! Stop (`DELETE`): end a debug container's processes without touching the target's.
//!
//! 1. Read the pod; find the newest ephemeral container of the debug name (404 if none).
//! 2. Already terminated: answer its object, nothing else (idempotent). Not started yet
//!    (waiting, no status): 409 Conflict, there is no process to stop. Its main process is PID 1
//!    of its own PID namespace and was not wrapped at create (no target, no shared process
//!    namespace, the image's entrypoint): 409 Conflict explaining why, before anything is done,
//!    since the kernel would drop the signals (kubernetes.md §7.2).
//! 3. Exec [`STOP_SCRIPT`](crate::STOP_SCRIPT) in the debug container itself, bounded by grace
//!    period + `stop_exec_timeout`. An image without `sh` (or `/proc`) gives 409 naming that,
//!    and nothing was changed.
//! 4. Once signals were sent, record the request in the pod annotation
//!    `poddebug.dev/stop-requests` (server identity, failures logged).
//! 5. Wait up to `stop_status_wait` for the kubelet to report it terminated: `Terminated`, else
//!    `InProgress`. A main process that is PID 1 of its own namespace and survived gives 409
//!    Conflict with an explanation.
//! 6. Record the Event `DebugContainerStopped` when signals were sent.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, Time};
use kube::Api;
use kube::api::{AttachParams, Patch, PatchParams};
use poddebug_types::convert::{STOP_WRAPPER, runs_as_own_pid1};
use poddebug_types::{ApiError, GROUP, PodDebugContainer, StopRequest as StopRecord};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::annotation::record_patch;
use crate::events::{REASON_STOPPED, stopped_message};
use crate::kube_backend::KubeBackend;
use crate::policy::RESOURCE;
use crate::state::{EcState, ec_state};
use crate::stop_script::{ScriptOutcome, command, interpret, is_missing_shell};
use crate::wait::{Waited, wait_for};
use crate::{StopOutcome, StopRequest, StorageError, read};

/// Output kept from the script, per stream.
const OUTPUT_CAP: usize = 16 * 1024;
/// How long to look at the status after the script reported a problem.
const SHORT_STATUS_WAIT: Duration = Duration::from_secs(2);
/// Attempts at writing the stop record when the pod keeps changing.
const RECORD_ATTEMPTS: usize = 3;

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

/// Run the stop script in container `ec_name`; the outcome and the script's output.
async fn run_script(
    api: &Api<Pod>,
    pod: &str,
    ec_name: &str,
    grace: Duration,
    bound: Duration,
) -> Result<(ScriptOutcome, String), StorageError> {
    let ap = AttachParams::default()
        .container(ec_name)
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let run = async {
        let mut process = match api.exec(pod, command(grace.as_secs()), &ap).await {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if is_missing_shell(&s.message) => {
                return Ok((ScriptOutcome::NoShell(s.message.clone()), String::new()));
            }
            Err(e) => return Err(StorageError::from(e)),
        };
        let status = process.take_status();
        let (stdout, stderr) = (process.stdout(), process.stderr());
        let (out, err, status): (String, String, Option<Status>) =
            tokio::join!(drain(stdout), drain(stderr), async {
                match status {
                    Some(s) => s.await,
                    None => None,
                }
            });
        if let Err(e) = process.join().await {
            tracing::debug!(pod, container = ec_name, error = %e, "stop exec stream ended with an error");
        }
        Ok((interpret(status.as_ref()), format!("{out}{err}")))
    };
    match tokio::time::timeout(bound, run).await {
        Ok(result) => result,
        // Signals may have been sent: let the status decide.
        Err(_) => Ok((
            ScriptOutcome::Ended,
            "the stop script did not finish in time".to_owned(),
        )),
    }
}

/// 409 Conflict on debug container `name`.
fn conflict(name: &str, reason: String) -> StorageError {
    ApiError::conflict(RESOURCE, GROUP, name, reason).into()
}

/// The explanation of an unkillable PID 1.
fn own_init_reason() -> String {
    "the debug container's main process is PID 1 of its own PID namespace (the container has no \
     targetContainerName and the pod does not share its process namespace), and the kernel \
     ignores signals sent to it from inside the container; its other processes were stopped. End \
     its main process from its own session (for example `exit` in an attached shell), or create \
     debug containers with targetContainerName set, or with a command run under a shell that \
     stays PID 1 and exits with it (`sh -c '\"$@\"; exit $?' sh CMD...`), so that stop can end them"
        .to_owned()
}

/// The explanation of a debug container that can never be stopped from inside: its main
/// process is its own PID 1 and runs the image's entrypoint, which could not be wrapped.
fn unwrapped_own_init_reason() -> String {
    "the debug container's main process is PID 1 of its own PID namespace (the container has no \
     targetContainerName, the pod does not share its process namespace, and it was not created \
     with a command that poddebug runs under a stoppable shell), and the kernel ignores signals \
     sent to it from inside the container, so it cannot be stopped; nothing was done. End its \
     main process from its own session (for example `exit` in an attached shell), or create \
     debug containers with targetContainerName set, or with a command"
        .to_owned()
}

/// Whether the container's command is the wrapper that keeps PID 1 a waiting shell.
fn is_stop_wrapped(ec: &k8s_openapi::api::core::v1::EphemeralContainer) -> bool {
    ec.command
        .as_deref()
        .is_some_and(|c| c.iter().map(String::as_str).eq(STOP_WRAPPER))
}

/// Write the stop record on the pod with the server's identity; failures are logged only.
async fn record_request(b: &KubeBackend, pod: &Pod, ec_name: &str, record: &StopRecord) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(b.server_client(), &ns);
    let mut current = pod.clone();
    for _ in 0..RECORD_ATTEMPTS {
        let Some(patch) = record_patch(&current, ec_name, record.clone()) else {
            return;
        };
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => match api.get(&name).await {
                Ok(p) => current = p,
                Err(e) => {
                    tracing::warn!(namespace = %ns, pod = %name, error = %e, "could not re-read pod to record stop");
                    return;
                }
            },
            Err(e) => {
                tracing::warn!(namespace = %ns, pod = %name, error = %e, "could not record stop request on the pod");
                return;
            }
        }
    }
    tracing::warn!(namespace = %ns, pod = %name, "pod kept changing; stop request not recorded");
}

/// The object to answer, showing the stop record (when one was written) even if the pod read
/// predates it.
fn answer(
    pod: &Pod,
    ec_name: &str,
    record: Option<&StopRecord>,
) -> Result<PodDebugContainer, ApiError> {
    let mut obj = read::object_by_ec_name(pod, ec_name)?;
    if let (Some(status), Some(record)) = (obj.status.as_mut(), record) {
        status.stop_requested.get_or_insert_with(|| record.clone());
    }
    Ok(obj)
}

/// Stop a debug container (the whole flow in the module docs).
pub(crate) async fn stop(b: &KubeBackend, req: StopRequest) -> Result<StopOutcome, StorageError> {
    let api: Api<Pod> = b.pods(&req.namespace, &req.caller)?;
    let pod = api.get(&req.pod).await?;
    let ec = read::newest(&pod, &req.name)?;
    let ec_name = ec.name.clone();
    let unstoppable = runs_as_own_pid1(&pod, ec) && !is_stop_wrapped(ec);
    match ec_state(&pod, &ec_name) {
        EcState::Terminated { .. } => {
            return Ok(StopOutcome::Terminated(read::object_by_ec_name(
                &pod, &ec_name,
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
        EcState::Running if unstoppable => {
            return Err(conflict(&req.name, unwrapped_own_init_reason()));
        }
        EcState::Running => {}
    }

    let record = StopRecord {
        requested_at: Time(jiff::Timestamp::now()),
        requested_by: req.caller.user.clone(),
    };
    let grace = req.grace_period.min(b.config().max_grace_period);
    let bound = grace + b.config().stop_exec_timeout;
    let (outcome, output) = run_script(&api, &req.pod, &ec_name, grace, bound).await?;
    tracing::info!(
        namespace = %req.namespace, pod = %req.pod, container = %ec_name, user = %req.caller.user,
        ?outcome, output = %output.trim(), "stop script ran"
    );
    let status_wait = match &outcome {
        ScriptOutcome::NoShell(msg) => {
            return Err(conflict(
                &req.name,
                format!(
                    "the debug container's image has no `sh`, which stopping it requires ({})",
                    msg.trim()
                ),
            ));
        }
        ScriptOutcome::NoProc => {
            return Err(conflict(
                &req.name,
                "/proc is not available inside the debug container, so its processes cannot be found".to_owned(),
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
    // Recorded only once signals were (or may have been) sent: a refused stop changes nothing.
    let signalled = !matches!(outcome, ScriptOutcome::NothingToSignal);
    if signalled {
        record_request(b, &pod, &ec_name, &record).await;
    }
    let waited = wait_for(&api, pod, status_wait, |p| {
        ec_state(p, &ec_name).is_terminated()
    })
    .await?;
    let (terminated, pod) = match waited {
        Waited::Done(p) => (true, p),
        Waited::TimedOut(p) => (false, p),
    };
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
    if signalled {
        b.record_event(
            &pod,
            &ec_name,
            REASON_STOPPED,
            stopped_message(&req.caller, &req.name, &ec_name),
        )
        .await;
    }
    let obj = answer(&pod, &ec_name, signalled.then_some(&record))?;
    Ok(if terminated {
        StopOutcome::Terminated(obj)
    } else {
        StopOutcome::InProgress(obj)
    })
}
