//! Attaching to a debug container's console, and what became of the container afterwards.
//!
//! The stream is kube-rs's own (`kube::api::AttachedProcess`: WebSocket `v5.channel.k8s.io`,
//! else v4) pointed at poddebug's attach path. The exit code does not come from the stream:
//! container runtimes report `Success` on the error channel whatever the exit status, so once
//! the stream ends the outcome is read from the debug container's status.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::SinkExt;
use futures::channel::mpsc;
use kube::api::{AttachedProcess, TerminalSize};
use poddebug_types::{DebugPhase, PodDebugContainer, SessionMode};
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, SimplexStream, WriteHalf};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::debug_containers::DebugContainers;
use crate::error::{Error, Result, Status};
use crate::params::AttachParams;
use crate::streams::DebugPod;

/// What an attach session came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachOutcome {
    /// The debug container has terminated (ephemeral containers are never restarted).
    Exited {
        /// Its exit code.
        exit_code: i32,
        /// The kubelet's reason (`Completed`, `Error`, `OOMKilled`...), when known.
        reason: Option<String>,
    },
    /// The session ended (detached, or input closed) and the container still runs: it can be
    /// attached to again, or stopped.
    Detached,
}

impl AttachOutcome {
    /// The exit code a command-line tool should end with: the container's, or 0 when detached.
    pub fn exit_code(&self) -> i32 {
        match self {
            AttachOutcome::Exited { exit_code, .. } => *exit_code,
            AttachOutcome::Detached => 0,
        }
    }
}

/// The outcome a debug container's status shows: `Exited` once terminated.
pub fn outcome_of(o: &PodDebugContainer) -> Option<AttachOutcome> {
    let status = o.status.as_ref()?;
    outcome_of_state(status.phase, status.state.as_ref())
}

/// `Exited` (with the kubelet's exit code and reason) once `phase` is Terminated.
pub(crate) fn outcome_of_state(
    phase: DebugPhase,
    state: Option<&k8s_openapi::api::core::v1::ContainerState>,
) -> Option<AttachOutcome> {
    if phase != DebugPhase::Terminated {
        return None;
    }
    let t = state.and_then(|s| s.terminated.as_ref());
    Some(AttachOutcome::Exited {
        exit_code: t.map(|t| t.exit_code).unwrap_or(0),
        reason: t.and_then(|t| t.reason.clone()),
    })
}

/// The exit code a v4/v5 error-channel Status carries: `Ok(None)` for `Success`,
/// `Ok(Some(code))` for `NonZeroExitCode`, [`Error::Api`] with the Status for any other failure.
pub fn exit_code_of(status: &Status) -> Result<Option<i32>> {
    if status.is_success() {
        return Ok(None);
    }
    if status.reason == "NonZeroExitCode"
        && let Some(code) = status
            .details
            .as_ref()
            .into_iter()
            .flat_map(|d| d.causes.iter())
            .find(|c| c.reason == "ExitCode")
            .and_then(|c| c.message.parse::<i32>().ok())
    {
        return Ok(Some(code));
    }
    Err(Error::Api(Box::new(status.clone())))
}

/// Ends an attach session from elsewhere (a key sequence, a signal) without ending the
/// container; [`AttachedDebugContainer::join`] then answers [`AttachOutcome::Detached`]
/// (or `Exited` if the container happened to terminate meanwhile).
#[derive(Clone, Debug, Default)]
pub struct Detacher(CancellationToken);

impl Detacher {
    /// Detach now.
    pub fn detach(&self) {
        self.0.cancel();
    }
}

/// The container's stdout or stderr. It ends when the session ends, however it ends
/// (output still buffered is read first).
pub struct DebugOutput {
    inner: ReadHalf<SimplexStream>,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl AsyncRead for DebugOutput {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Poll::Ready(r) = Pin::new(&mut self.inner).poll_read(cx, buf) {
            return Poll::Ready(r);
        }
        // Nothing buffered: a session that ended (even without closing its streams, as an
        // aborted one does) is the end of this stream.
        match self.ended.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Sends terminal sizes to a TTY session.
#[derive(Clone, Debug)]
pub struct Resizer(mpsc::Sender<TerminalSize>);

impl Resizer {
    /// Tell the container's terminal its new size in columns and rows.
    pub async fn resize(&mut self, width: u16, height: u16) -> Result<()> {
        self.0
            .send(TerminalSize { width, height })
            .await
            .map_err(|e| Error::Stream(Box::new(e)))
    }
}

/// The container's standard input. Shutting it down (or dropping it) closes the container's
/// stdin (a v5 CLOSE; with v4 the whole stream closes), which ends the session.
pub struct DebugStdin {
    inner: WriteHalf<SimplexStream>,
    closed: Arc<AtomicBool>,
}

impl Drop for DebugStdin {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // The pipe's end does not follow from dropping it: shut it down. This never waits
        // (the pipe is in memory); should the other side hold its lock at this very moment,
        // call `shutdown` before dropping to be sure.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let _ = Pin::new(&mut self.inner).poll_shutdown(&mut cx);
    }
}

impl AsyncWrite for DebugStdin {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.closed.store(true, Ordering::SeqCst);
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Reads what became of the attached container: `Some` once it terminated.
pub(crate) type OutcomeReader = Arc<
    dyn Fn() -> Pin<Box<dyn std::future::Future<Output = Result<Option<AttachOutcome>>> + Send>>
        + Send
        + Sync,
>;

/// A live attach session: the container's stdin, stdout, stderr and terminal size, and
/// [`join`](Self::join), the future of its outcome.
pub struct AttachedDebugContainer {
    process: AttachedProcess,
    outcome: OutcomeReader,
    pod: String,
    name: String,
    exit_status_wait: Duration,
    has_stdin: bool,
    stdin_closed: Arc<AtomicBool>,
    /// Cancelled when the session ends: by a detach, or once the stream is over.
    ended: CancellationToken,
}

impl std::fmt::Debug for AttachedDebugContainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachedDebugContainer")
            .field("pod", &self.pod)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl DebugContainers {
    /// Attach to the console of debug container `name` of pod `pod`.
    pub async fn attach(
        &self,
        pod: &str,
        name: &str,
        params: &AttachParams,
    ) -> Result<AttachedDebugContainer> {
        check_params(params)?;
        let ns = self.namespace().ok_or(Error::NamespaceRequired("attach"))?;
        let client = match params.mode {
            Some(mode) => with_query(&self.client, "mode", mode.as_str()),
            None => self.client.clone(),
        };
        let api = kube::Api::<DebugPod>::namespaced(client, ns);
        let process = api.attach(pod, &kube_params(name, params)).await?;
        let (this, p, n) = (self.clone(), pod.to_owned(), name.to_owned());
        let outcome: OutcomeReader = Arc::new(move || {
            let (api, pod, name) = (this.clone(), p.clone(), n.clone());
            Box::pin(async move { Ok(outcome_of(&api.get(&pod, &name).await?)) })
        });
        Ok(AttachedDebugContainer::new(
            process, outcome, pod, name, params,
        ))
    }

    /// [`attach`](Self::attach) to any container of a pod poddebug made (a copy), its outcome
    /// read by `outcome`.
    pub(crate) async fn attach_with(
        &self,
        pod: &str,
        name: &str,
        params: &AttachParams,
        outcome: OutcomeReader,
    ) -> Result<AttachedDebugContainer> {
        check_params(params)?;
        let ns = self.namespace().ok_or(Error::NamespaceRequired("attach"))?;
        let api = kube::Api::<DebugPod>::namespaced(self.client.clone(), ns);
        let process = api.attach(pod, &kube_params(name, params)).await?;
        Ok(AttachedDebugContainer::new(
            process, outcome, pod, name, params,
        ))
    }

    /// Join the session on debug container `name` (another user's) as a peer, who may type:
    /// needs `join` on `pods/debug`. `tty` as the session has it (`DebugSession.spec.tty`).
    pub async fn join(&self, pod: &str, name: &str, tty: bool) -> Result<AttachedDebugContainer> {
        let params = AttachParams {
            stdin: true,
            stdout: true,
            stderr: !tty,
            tty,
            mode: Some(SessionMode::Peer),
            ..Default::default()
        };
        self.attach(pod, name, &params).await
    }

    /// Watch the session on debug container `name` as an observer, who sees its output and
    /// never types: needs `observe` on `pods/debug`.
    pub async fn observe(
        &self,
        pod: &str,
        name: &str,
        tty: bool,
    ) -> Result<AttachedDebugContainer> {
        let params = AttachParams {
            stdin: false,
            stdout: true,
            stderr: !tty,
            tty,
            mode: Some(SessionMode::Observer),
            ..Default::default()
        };
        self.attach(pod, name, &params).await
    }
}

/// Parameters no attach can have.
pub(crate) fn check_params(params: &AttachParams) -> Result<()> {
    if params.tty && params.stderr {
        return Err(Error::InvalidParams(
            "a TTY has no separate stderr: set stderr to false".into(),
        ));
    }
    if params.stdin
        && matches!(
            params.mode,
            Some(SessionMode::Observer | SessionMode::Moderator)
        )
    {
        return Err(Error::InvalidParams(
            "observers and moderators do not send input: set stdin to false".into(),
        ));
    }
    Ok(())
}

/// kube-rs's attach parameters for container `name`.
pub(crate) fn kube_params(name: &str, params: &AttachParams) -> kube::api::AttachParams {
    kube::api::AttachParams {
        container: Some(name.to_owned()),
        stdin: params.stdin,
        stdout: params.stdout,
        stderr: params.stderr,
        tty: params.tty,
        ..Default::default()
    }
}

/// `client`, with `key=value` added to the query of every request it sends: kube-rs builds the
/// attach URL from its own parameters only, and a session's `mode` is one more.
fn with_query(client: &kube::Client, key: &'static str, value: &'static str) -> kube::Client {
    let inner = client.clone();
    let service = tower::service_fn(move |mut req: http::Request<kube::client::Body>| {
        let inner = inner.clone();
        async move {
            let uri = req.uri().clone();
            let sep = if uri.query().is_some() { "&" } else { "?" };
            let rewritten = format!(
                "{}{sep}{key}={value}",
                uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
            );
            let mut parts = uri.into_parts();
            parts.path_and_query = rewritten.parse().ok();
            if let Ok(u) = http::Uri::from_parts(parts) {
                *req.uri_mut() = u;
            }
            inner.send(req).await
        }
    });
    kube::Client::new(service, client.default_namespace().to_owned())
}

impl AttachedDebugContainer {
    pub(crate) fn new(
        process: AttachedProcess,
        outcome: OutcomeReader,
        pod: &str,
        name: &str,
        params: &AttachParams,
    ) -> Self {
        AttachedDebugContainer {
            process,
            outcome,
            pod: pod.to_owned(),
            name: name.to_owned(),
            exit_status_wait: params.exit_status_wait,
            has_stdin: params.stdin,
            stdin_closed: Arc::new(AtomicBool::new(false)),
            ended: CancellationToken::new(),
        }
    }

    /// The container's stdin (once; only when attached with `stdin`).
    pub fn stdin(&mut self) -> Option<DebugStdin> {
        self.process.stdin().map(|inner| DebugStdin {
            inner,
            closed: self.stdin_closed.clone(),
        })
    }

    /// The container's stdout (once; with a TTY, everything the terminal shows).
    pub fn stdout(&mut self) -> Option<DebugOutput> {
        let ended = Box::pin(self.ended.clone().cancelled_owned());
        self.process
            .stdout()
            .map(|inner| DebugOutput { inner, ended })
    }

    /// The container's stderr (once; only without a TTY).
    pub fn stderr(&mut self) -> Option<DebugOutput> {
        let ended = Box::pin(self.ended.clone().cancelled_owned());
        self.process
            .stderr()
            .map(|inner| DebugOutput { inner, ended })
    }

    /// Where terminal sizes go (once; only with a TTY).
    pub fn resizer(&mut self) -> Option<Resizer> {
        self.process.terminal_size().map(Resizer)
    }

    /// A handle that ends the session without ending the container.
    pub fn detacher(&self) -> Detacher {
        Detacher(self.ended.clone())
    }

    /// Wait for the session to end, then say what became of the container: its exit code
    /// once it terminated, or [`AttachOutcome::Detached`] while it still runs.
    ///
    /// Read stdout and stderr meanwhile (from other tasks): the stream waits for them. They
    /// end (after what is buffered) once the session is over.
    pub async fn join(mut self) -> Result<AttachOutcome> {
        let status = self.process.take_status();
        let detach = self.ended.clone();
        let ended = tokio::select! {
            () = detach.cancelled() => None,
            r = self.process.join() => Some(r),
        };
        // However it ended, the output streams end once drained.
        detach.cancel();
        let outcome = self.outcome.clone();
        let Some(ended) = ended else {
            // Dropping the process above aborted the stream.
            return Ok(outcome().await?.unwrap_or(AttachOutcome::Detached));
        };
        ended.map_err(|e| Error::Stream(Box::new(e)))?;
        let status = match status {
            Some(s) => s.await.and_then(|s| {
                // k8s-openapi's Status into kube's, which errors keep.
                serde_json::to_value(s)
                    .and_then(serde_json::from_value::<Status>)
                    .ok()
            }),
            None => None,
        };
        if let Some(s) = &status {
            match exit_code_of(s) {
                Ok(Some(code)) => {
                    // The stream says so; the kubelet's reason is not known yet.
                    return Ok(AttachOutcome::Exited {
                        exit_code: code,
                        reason: None,
                    });
                }
                Ok(None) => {}
                Err(e) => return Err(e),
            }
        }
        // The stream ended cleanly. When we closed the container's input that is why; else
        // the container's process most likely ended, and the kubelet says so shortly.
        let wait = if self.has_stdin && self.stdin_closed.load(Ordering::SeqCst) {
            Duration::ZERO
        } else {
            self.exit_status_wait
        };
        let o = if wait.is_zero() {
            outcome().await?
        } else {
            wait_terminated(&outcome, wait).await?
        };
        Ok(o.unwrap_or(AttachOutcome::Detached))
    }
}

/// The container's outcome once terminated, or none after `wait`.
async fn wait_terminated(outcome: &OutcomeReader, wait: Duration) -> Result<Option<AttachOutcome>> {
    let mut last = outcome().await?;
    if last.is_some() {
        return Ok(last);
    }
    let deadline = tokio::time::Instant::now() + wait;
    // Poll: the status lags the stream's end by a kubelet status sync (about a second).
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    while tokio::time::Instant::now() < deadline {
        tick.tick().await;
        last = outcome().await?;
        if last.is_some() {
            break;
        }
    }
    Ok(last)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(v: serde_json::Value) -> Status {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn exit_codes_from_the_error_channel() {
        assert_eq!(
            exit_code_of(&status(json!({"status": "Success"}))).unwrap(),
            None
        );
        let nz = status(json!({"status": "Failure", "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code",
            "details": {"causes": [{"reason": "ExitCode", "message": "7"}]}}));
        assert_eq!(exit_code_of(&nz).unwrap(), Some(7));
        let other = status(json!({"status": "Failure", "code": 500,
            "message": "the poddebug API server is shutting down"}));
        let err = exit_code_of(&other).unwrap_err();
        assert_eq!(err.code(), Some(500));
        assert_eq!(
            err.to_string(),
            "Error from server: the poddebug API server is shutting down"
        );
    }

    #[test]
    fn outcomes_from_the_status() {
        let running: PodDebugContainer = serde_json::from_value(json!({
            "container": {}, "status": {"podName": "web", "ephemeralContainerName": "dbg",
            "phase": "Running", "state": {"running": {}}}}))
        .unwrap();
        assert_eq!(outcome_of(&running), None);
        let done: PodDebugContainer = serde_json::from_value(json!({
            "container": {}, "status": {"podName": "web", "ephemeralContainerName": "dbg",
            "phase": "Terminated", "state": {"terminated": {"exitCode": 7, "reason": "Error"}}}}))
        .unwrap();
        let o = outcome_of(&done).unwrap();
        assert_eq!(o.exit_code(), 7);
        assert_eq!(
            o,
            AttachOutcome::Exited {
                exit_code: 7,
                reason: Some("Error".into())
            }
        );
        assert_eq!(AttachOutcome::Detached.exit_code(), 0);
    }
}
