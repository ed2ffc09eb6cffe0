//! The audit trail: one structured log record per governance event — a debug container
//! created, stopped or expired, an attach session ended — with tracing target
//! [`TARGET`] (`poddebug::audit`), always logged at `info` whatever `-v` says. With
//! `--log-format=json` every field is a JSON field of the line, so a log pipeline can keep these
//! records apart by target and query them. The matching Events on the pod
//! (`DebugContainerCreated`, `DebugContainerStopped`, `DebugContainerExpired`) are written by
//! the storage; this record is the server-side copy, with what an Event cannot carry (groups,
//! bytes, the recording).
//!
//! Build one with [`AuditRecord::new`], fill in what is known, and [`AuditRecord::emit`] it:
//!
//! ```
//! use poddebug_apiserver::audit::{Action, AuditRecord};
//! let caller = poddebug_storage::Caller { user: "alice".into(), ..Default::default() };
//! let mut r = AuditRecord::new(Action::Session, &caller, "ns", "web", "dbg");
//! r.protocol = Some("v5.channel.k8s.io".into());
//! r.bytes_in = Some(12);
//! r.emit();
//! ```

use jiff::Timestamp;
use poddebug_storage::Caller;

pub mod export;
pub mod ocsf;

/// The tracing target of every audit record.
pub const TARGET: &str = "poddebug::audit";

/// What the record is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A debug container was created (`POST`).
    Create,
    /// A debug container was stopped (`DELETE`).
    Stop,
    /// The server stopped a debug container whose time limit passed.
    Expire,
    /// An attach session through poddebug ended.
    Session,
    /// Someone terminated a live session.
    Terminate,
    /// A debug request was made, reviewed (approved, denied, revoked), withdrawn or expired
    /// (`outcome` says which; `namespace` is the request's, `pod` the pod or node it names).
    Request,
    /// The leader found a debug container still running past the bound of its stop or time
    /// limit (it is now unusable through poddebug).
    Unstoppable,
    /// The leader evicted the pod of such a container (`--unstoppable-action=evict`).
    Evict,
    /// A session's recording was finished (`recording_id` names it).
    RecordingFinished,
}

impl Action {
    /// The action as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Stop => "stop",
            Action::Expire => "expire",
            Action::Session => "session",
            Action::Terminate => "terminate",
            Action::Request => "request",
            Action::Unstoppable => "unstoppable",
            Action::Evict => "evict",
            Action::RecordingFinished => "recording finished",
        }
    }
}

/// One audit record. Fields that are not known for an action stay `None` and are left out of
/// the log line.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRecord {
    /// What happened.
    pub action: Action,
    /// The user who acted (for an expiry, `system:poddebug:expiry`).
    pub user: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Namespace of the pod.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The debug container (its debug name).
    pub container: String,
    /// The debug profile it was created with.
    pub profile: Option<String>,
    /// Its image.
    pub image: Option<String>,
    /// The stream protocol of a session (`v5.channel.k8s.io`, `SPDY/3.1+portforward…`).
    pub protocol: Option<String>,
    /// When the container (or session) started.
    pub start: Option<Timestamp>,
    /// When it ended.
    pub end: Option<Timestamp>,
    /// Its time limit's deadline.
    pub expires_at: Option<Timestamp>,
    /// Bytes from the client into the container (sessions).
    pub bytes_in: Option<u64>,
    /// Bytes from the container to the client (sessions).
    pub bytes_out: Option<u64>,
    /// The container's exit code, once known.
    pub exit_code: Option<i32>,
    /// The session's recording, when one was made.
    pub recording_id: Option<String>,
    /// The session id (sessions, terminations).
    pub session: Option<String>,
    /// How the user took part in the session (`owner`, `peer`, `observer`, `moderator`).
    pub mode: Option<String>,
    /// How it went, when it did not simply succeed (`in progress`, an error's message).
    pub outcome: Option<String>,
    /// The debug request it was made under (or that the record is about).
    pub debug_request: Option<String>,
    /// The reason it carries.
    pub reason: Option<String>,
    /// The ticket it carries.
    pub ticket: Option<String>,
    /// Who approved the debug request.
    pub approvers: Vec<String>,
}

impl AuditRecord {
    /// A record of `action` by `caller` on debug container `container` of `namespace/pod`.
    pub fn new(
        action: Action,
        caller: &Caller,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Self {
        AuditRecord {
            action,
            user: caller.user.clone(),
            groups: caller.groups.clone(),
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            container: container.to_owned(),
            profile: None,
            image: None,
            protocol: None,
            start: None,
            end: None,
            expires_at: None,
            bytes_in: None,
            bytes_out: None,
            exit_code: None,
            recording_id: None,
            session: None,
            mode: None,
            outcome: None,
            debug_request: None,
            reason: None,
            ticket: None,
            approvers: Vec::new(),
        }
    }

    /// With the reason, ticket, debug request and approvers of `j`.
    pub fn justified(mut self, j: &poddebug_types::request::Justification) -> Self {
        self.debug_request = j.debug_request.clone();
        self.reason = j.reason.clone();
        self.ticket = j.ticket.clone();
        self.approvers = j.approvers.clone();
        self
    }

    /// A record of `action` by `caller` on the debug container `obj` (as a create or stop
    /// answered it): its pod, name, image, start and end, exit code and deadline.
    pub fn for_object(
        action: Action,
        caller: &Caller,
        namespace: &str,
        pod: &str,
        obj: &poddebug_types::PodDebugContainer,
    ) -> Self {
        let name = obj.metadata.name.as_deref().unwrap_or_default();
        let mut r = AuditRecord::new(action, caller, namespace, pod, name);
        r.image = obj.container.image.clone().filter(|i| !i.is_empty());
        (r.start, r.end) = start_end_of(obj);
        r.exit_code = exit_code_of(obj);
        r.expires_at = obj
            .status
            .as_ref()
            .and_then(|s| s.expires_at.as_ref())
            .map(|t| t.0);
        r
    }

    /// Log the record (target [`TARGET`], level info), and export it as an OCSF event to the
    /// sinks of `--audit-stdout` and `--audit-webhook` ([`export`]).
    pub fn emit(&self) {
        self.log();
        export::record(self);
    }

    fn log(&self) {
        let ts = |t: &Option<Timestamp>| t.as_ref().map(ToString::to_string);
        // JSON, so that group names with commas stay apart.
        let groups = serde_json::to_string(&self.groups).unwrap_or_default();
        let approvers = (!self.approvers.is_empty())
            .then(|| serde_json::to_string(&self.approvers).unwrap_or_default());
        tracing::info!(
            target: TARGET,
            action = self.action.as_str(),
            user = self.user.as_str(),
            groups = groups.as_str(),
            namespace = self.namespace.as_str(),
            pod = self.pod.as_str(),
            container = self.container.as_str(),
            profile = self.profile.as_deref(),
            image = self.image.as_deref(),
            protocol = self.protocol.as_deref(),
            start = ts(&self.start).as_deref(),
            end = ts(&self.end).as_deref(),
            expires_at = ts(&self.expires_at).as_deref(),
            bytes_in = self.bytes_in,
            bytes_out = self.bytes_out,
            exit_code = self.exit_code,
            recording_id = self.recording_id.as_deref(),
            session = self.session.as_deref(),
            mode = self.mode.as_deref(),
            outcome = self.outcome.as_deref(),
            debug_request = self.debug_request.as_deref(),
            reason = self.reason.as_deref(),
            ticket = self.ticket.as_deref(),
            approvers = approvers.as_deref(),
            "audit"
        );
    }
}

/// The exit code shown in a debug container's status, once terminated.
pub fn exit_code_of(obj: &poddebug_types::PodDebugContainer) -> Option<i32> {
    obj.status
        .as_ref()?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// When a debug container started and ended, as its status shows.
pub fn start_end_of(
    obj: &poddebug_types::PodDebugContainer,
) -> (Option<Timestamp>, Option<Timestamp>) {
    let Some(state) = obj.status.as_ref().and_then(|s| s.state.as_ref()) else {
        return (None, None);
    };
    if let Some(r) = &state.running {
        return (r.started_at.as_ref().map(|t| t.0), None);
    }
    match &state.terminated {
        Some(t) => (
            t.started_at.as_ref().map(|t| t.0),
            t.finished_at.as_ref().map(|t| t.0),
        ),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// Log lines written during a test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_record_is_one_json_line_with_its_fields() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(move || writer.clone())
            .finish();
        let caller = Caller {
            user: "alice".into(),
            groups: vec!["dev,ops".into(), "system:authenticated".into()],
            ..Default::default()
        };
        let mut r = AuditRecord::new(Action::Expire, &caller, "ns", "web", "dbg");
        r.image = Some("busybox:1.36".into());
        r.exit_code = Some(137);
        r.expires_at = Some("2026-01-02T03:04:05Z".parse().unwrap());
        tracing::subscriber::with_default(subscriber, || r.log());
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["target"], TARGET);
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["action"], "expire");
        assert_eq!(v["user"], "alice");
        assert_eq!(
            serde_json::from_str::<Vec<String>>(v["groups"].as_str().unwrap()).unwrap(),
            caller.groups
        );
        assert_eq!(v["pod"], "web");
        assert_eq!(v["container"], "dbg");
        assert_eq!(v["image"], "busybox:1.36");
        assert_eq!(v["exit_code"], 137);
        assert_eq!(v["expires_at"], "2026-01-02T03:04:05Z");
        assert!(
            v.get("protocol").is_none(),
            "unknown fields are left out: {v}"
        );
        assert!(v.get("bytes_in").is_none(), "{v}");
    }
}
