//! Notifications of debug requests (`--notify-webhook`): a JSON event POSTed for every change
//! of a request, with a Slack-compatible `text` (Slack's and Mattermost's incoming webhooks
//! show it; anything else reads the rest).
//!
//! Events are sent by the replica that made the change (the one that served the create, the
//! review or the delete, or, for an expiry, the replica that wrote it: the leader), so each is
//! sent once whatever the number of replicas. They leave through the bounded, retrying queue
//! of [`crate::webhook`]; each carries an id (`X-Poddebug-Event-Id`, and `id` in the body) a
//! receiver can deduplicate retries with.

use poddebug_types::request::{DebugRequest, Made, RequestMode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};

use crate::webhook::{OutcomeLabels, WebhookQueue};

/// What happened to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// It was made.
    Created,
    /// A reviewer approved it (it may need more approvals).
    Approved,
    /// A reviewer denied it.
    Denied,
    /// A reviewer revoked it.
    Revoked,
    /// Its requester (or an approver) deleted it.
    Withdrawn,
    /// Someone else deleted it: the namespace controller (its namespace was deleted), the
    /// garbage collector, an administrator.
    Deleted,
    /// Its window (or its pending lifetime) passed.
    Expired,
    /// Something was made under it.
    Used,
}

impl EventKind {
    /// The `event` field.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Created => "created",
            EventKind::Approved => "approved",
            EventKind::Denied => "denied",
            EventKind::Revoked => "revoked",
            EventKind::Withdrawn => "withdrawn",
            EventKind::Deleted => "deleted",
            EventKind::Expired => "expired",
            EventKind::Used => "used",
        }
    }
}

/// One event.
#[derive(Clone, Debug)]
pub struct Notification {
    /// What happened.
    pub kind: EventKind,
    /// The request after it.
    pub request: DebugRequest,
    /// Who did it (the server itself for an expiry).
    pub actor: String,
    /// The reviewer's comment.
    pub comment: Option<String>,
    /// What was made, for `used`.
    pub made: Option<Made>,
    /// When.
    pub time: jiff::Timestamp,
}

/// The sender (module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Notifier {
    queue: WebhookQueue,
}

fn target(r: &DebugRequest) -> String {
    match r.spec.mode {
        RequestMode::Node => format!("node {}", r.target()),
        _ => format!("pod {}/{}", r.namespace(), r.target()),
    }
}

fn what(r: &DebugRequest) -> String {
    let mode = match r.spec.mode {
        RequestMode::Debug => "a debug container",
        RequestMode::Copy => "a copy",
        RequestMode::Node => "a node debug container",
    };
    format!(
        "{} ({} in {}, profile {})",
        r.name(),
        mode,
        target(r),
        r.spec.profile
    )
}

/// The Slack-compatible line of an event.
pub fn text(n: &Notification) -> String {
    let r = &n.request;
    let requester = r.spec.requester.as_deref().unwrap_or_default();
    let duration = r.spec.duration.as_deref().unwrap_or("1h");
    let comment = n
        .comment
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(|c| format!(": {c:?}"))
        .unwrap_or_default();
    let ticket = r
        .spec
        .ticket
        .as_deref()
        .map(|t| format!(" (ticket {t})"))
        .unwrap_or_default();
    let st = r.status.clone().unwrap_or_default();
    match n.kind {
        EventKind::Created => format!(
            "{requester} requests {} {} in {} for {duration}: {:?}{ticket}. It grants {}. Review with `kubectl poddebug approve {} -n {}` (or deny).",
            r.spec.profile,
            match r.spec.mode {
                RequestMode::Debug => "debug container",
                RequestMode::Copy => "copy",
                RequestMode::Node => "node debug container",
            },
            target(r),
            r.spec.reason,
            r.grants(),
            r.name(),
            r.namespace()
        ),
        EventKind::Approved => {
            let got = r.approvers().len();
            let need = st.approvals_required.max(1) as usize;
            if got >= need {
                let until = st
                    .expires_at
                    .map(|t| format!(" until {}", t.0))
                    .unwrap_or_default();
                format!(
                    "{} approved debug request {} of {requester}{comment}: usable{until}.",
                    n.actor,
                    what(r)
                )
            } else {
                format!(
                    "{} approved debug request {} of {requester}{comment} ({got} of {need} approvals).",
                    n.actor,
                    what(r)
                )
            }
        }
        EventKind::Denied => format!(
            "{} denied debug request {} of {requester}{comment}.",
            n.actor,
            what(r)
        ),
        EventKind::Revoked => format!(
            "{} revoked debug request {} of {requester}{comment}: its sessions end now.",
            n.actor,
            what(r)
        ),
        EventKind::Withdrawn => format!("{} withdrew debug request {}.", n.actor, what(r)),
        EventKind::Deleted => format!(
            "{} deleted debug request {} of {requester}: its sessions end now.",
            n.actor,
            what(r)
        ),
        EventKind::Expired => format!("Debug request {} of {requester} expired.", what(r)),
        EventKind::Used => {
            let m = n
                .made
                .as_ref()
                .map(|m| format!("{} {} in pod {}/{}", m.kind, m.name, m.namespace, m.pod))
                .unwrap_or_default();
            format!("{requester} made {m} under debug request {}.", what(r))
        }
    }
}

/// The id of an event: the request's uid, the event, and how far the request got (reviews,
/// things made), so retries of one event share it and two events never do.
pub fn event_id(n: &Notification) -> String {
    let st = n.request.status.clone().unwrap_or_default();
    format!(
        "{}/{}/{}.{}",
        n.request.metadata.uid.as_deref().unwrap_or_default(),
        n.kind.as_str(),
        st.reviews.len(),
        st.made.len()
    )
}

/// The body POSTed for an event.
pub fn body(n: &Notification) -> Value {
    json!({
        "id": event_id(n),
        "event": n.kind.as_str(),
        "text": text(n),
        "time": n.time.to_string(),
        "actor": n.actor,
        "comment": n.comment,
        "request": n.request,
        "made": n.made,
    })
}

impl Notifier {
    /// Start the sender of `url`.
    pub fn start(url: url::Url) -> Notifier {
        Notifier {
            queue: WebhookQueue::start(url, "notification"),
        }
    }

    /// Queue an event; never waits (a full queue drops it).
    pub fn send(&self, n: Notification) {
        let payload = serde_json::to_vec(&body(&n)).unwrap_or_default();
        self.queue.send(event_id(&n), payload);
    }

    /// The counter of notifications by outcome, to register in a metrics registry.
    pub fn counts(&self) -> Family<OutcomeLabels, Counter> {
        self.queue.outcomes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use poddebug_types::request::DebugRequestSpec;

    fn request() -> DebugRequest {
        let mut r = DebugRequest {
            spec: DebugRequestSpec {
                pod: Some("web".into()),
                profile: "sysadmin".into(),
                reason: "INC-7: disk full".into(),
                ticket: Some("INC-7".into()),
                duration: Some("30m".into()),
                requester: Some("alice".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        r.metadata.name = Some("web-sysadmin".into());
        r.metadata.namespace = Some("shop".into());
        r.metadata.uid = Some("u1".into());
        r
    }

    #[test]
    fn events_read_as_a_line_and_carry_the_request() {
        let n = Notification {
            kind: EventKind::Created,
            request: request(),
            actor: "alice".into(),
            comment: None,
            made: None,
            time: "2026-01-01T00:00:00Z".parse().unwrap(),
        };
        assert_eq!(
            text(&n),
            "alice requests sysadmin debug container in pod shop/web for 30m: \"INC-7: disk full\" (ticket INC-7). It grants a debug container in pod shop/web with the sysadmin profile: any container: the request does not say what runs. Review with `kubectl poddebug approve web-sysadmin -n shop` (or deny)."
        );
        // A request that names its container shows all of it, and its target.
        let mut bound = n.clone();
        bound.request.spec.container = Some(poddebug_types::request::RequestedContainer {
            image: Some("busybox:1.36".into()),
            command: Some(vec!["sh".into()]),
            env: Some(vec![k8s_openapi::api::core::v1::EnvVar {
                name: "PATH".into(),
                value: Some("/data".into()),
                ..Default::default()
            }]),
            stdin: Some(true),
            tty: Some(true),
            ..Default::default()
        });
        bound.request.spec.target_container_name = Some("app".into());
        assert!(
            text(&bound).contains(
                "It grants a debug container in pod shop/web with the sysadmin profile: exactly \
                 the container {\"image\":\"busybox:1.36\",\"command\":[\"sh\"],\"env\":[{\"name\":\"PATH\",\"value\":\"/data\"}],\"stdin\":true,\"tty\":true}, \
                 joining container \"app\"'s namespaces."
            ),
            "{}",
            text(&bound)
        );
        let b = body(&n);
        assert_eq!(b["event"], "created");
        assert_eq!(b["id"], "u1/created/0.0");
        assert_eq!(b["request"]["spec"]["reason"], "INC-7: disk full");
        let denied = Notification {
            kind: EventKind::Denied,
            actor: "bob".into(),
            comment: Some("use the runbook".into()),
            ..n
        };
        assert_eq!(
            text(&denied),
            "bob denied debug request web-sysadmin (a debug container in pod shop/web, profile sysadmin) of alice: \"use the runbook\"."
        );
        assert_ne!(event_id(&denied), "u1/created/0.0");
    }
}
