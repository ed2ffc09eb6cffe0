//! Parameters of the verbs, each with a `Default`, as kube-rs shapes them.

use std::time::Duration;

/// How [`DebugContainers::create`](crate::DebugContainers::create) behaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateParams {
    /// Answer only once the container runs or has terminated (`?wait=true`). A container that
    /// does not start in time is a 504 whose message carries its waiting reason.
    pub wait: bool,
    /// How long the server waits when `wait` is set (`timeoutSeconds`; the server's default,
    /// 30s, when unset; kube-apiserver's request deadline bounds it in any case).
    pub timeout: Option<Duration>,
    /// Ask for a dry run (`dryRun=All`). The server refuses it with a 400: a debug container
    /// can neither be simulated nor removed.
    pub dry_run: bool,
}

/// How [`DebugContainers::attach`](crate::DebugContainers::attach) attaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachParams {
    /// Send input to the container (it must have been created with `stdin: true`).
    pub stdin: bool,
    /// Receive the container's standard output.
    pub stdout: bool,
    /// Receive its standard error separately (not with a TTY, where it is part of stdout).
    pub stderr: bool,
    /// The container has a TTY: raw input, resize events, one output stream.
    pub tty: bool,
    /// Once the stream ends by itself, how long to wait for the container's status to show
    /// it terminated (the kubelet reports an exit a moment after the stream closes) before
    /// calling the outcome [`AttachOutcome::Detached`](crate::AttachOutcome::Detached).
    pub exit_status_wait: Duration,
    /// How to take part in the session on a debug container another user created (`mode=`):
    /// a peer (needs `join` on `pods/debug`), an observer (`observe`; no stdin) or a moderator
    /// (`moderate` on `pods/sessions`; no stdin). `None`: the owner on one's own container,
    /// else the server picks peer or observer by what one may do.
    pub mode: Option<poddebug_types::SessionMode>,
}

impl Default for AttachParams {
    fn default() -> Self {
        AttachParams {
            stdin: false,
            stdout: true,
            stderr: true,
            tty: false,
            exit_status_wait: Duration::from_secs(10),
            mode: None,
        }
    }
}

impl AttachParams {
    /// An interactive terminal: stdin, stdout and a TTY (no separate stderr).
    pub fn interactive_tty() -> Self {
        AttachParams {
            stdin: true,
            stdout: true,
            stderr: false,
            tty: true,
            ..Default::default()
        }
    }
}

/// Which part of a debug container's output [`DebugContainers::logs`](crate::DebugContainers::logs)
/// reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogParams {
    /// Keep the stream open and follow new output.
    pub follow: bool,
    /// Only output newer than this (whole seconds).
    pub since: Option<Duration>,
    /// Only this many lines from the end.
    pub tail_lines: Option<i64>,
    /// Prefix every line with its RFC 3339 timestamp.
    pub timestamps: bool,
}

impl LogParams {
    pub(crate) fn to_kube(&self, container: &str) -> kube::api::LogParams {
        kube::api::LogParams {
            container: Some(container.to_owned()),
            follow: self.follow,
            since_seconds: self
                .since
                .map(|d| i64::try_from(d.as_secs().max(1)).unwrap_or(i64::MAX)),
            tail_lines: self.tail_lines,
            timestamps: self.timestamps,
            ..Default::default()
        }
    }
}
