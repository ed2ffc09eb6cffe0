//! Audit records as OCSF events (Open Cybersecurity Schema Framework, version
//! [`OCSF_VERSION`]): every record is an **API Activity** event (class 6003), and every command
//! derived from a recorded session is a **Process Activity** event (class 1007, Launch).
//!
//! What goes where (docs/operator-guide.md, "Audit export", has the table): the user and their
//! groups are the `actor`; the operation is `api.operation` (`create`, `stop`, `expire`,
//! `attach`, `join`, `terminate`, `debugrequest.approved`, `recording.finished`, ...); the
//! debug container (or request) is the one entry of `resources`; times are milliseconds since
//! the epoch; what OCSF has no attribute for (profile, image, bytes, the recording, the
//! request's reason and ticket) is under `unmapped`. `metadata.uid` is the event's id, the
//! same on every try of a webhook (its `X-Poddebug-Event-Id`). The peer poddebug sees is
//! kube-apiserver's aggregator, never the user's own address: `src_endpoint` says so.

use jiff::Timestamp;
use poddebug_types::recording::RecordingCommand;
use serde_json::{Map, Value, json};

use super::{Action, AuditRecord};

/// The OCSF version of the events.
pub const OCSF_VERSION: &str = "1.3.0";

/// OCSF's Application Activity category and its API Activity class.
const API_CATEGORY: u64 = 6;
const API_CLASS: u64 = 6003;
/// OCSF's System Activity category and its Process Activity class.
const SYSTEM_CATEGORY: u64 = 1;
const PROCESS_CLASS: u64 = 1007;
/// Severity "Informational".
const INFORMATIONAL: u64 = 1;

/// The user who makes the server act on its own (time limits, the leader's checks).
fn server_initiated(r: &AuditRecord) -> bool {
    matches!(
        r.action,
        Action::Expire | Action::Unstoppable | Action::Evict
    ) || (r.action == Action::Request && r.outcome.as_deref() == Some("expired"))
}

/// The OCSF activity (id and name) and the operation of a record.
fn activity(r: &AuditRecord) -> (u64, &'static str, String) {
    match r.action {
        Action::Create => (1, "Create", "create".to_owned()),
        Action::Stop => (4, "Delete", "stop".to_owned()),
        Action::Expire => (4, "Delete", "expire".to_owned()),
        Action::Evict => (4, "Delete", "evict".to_owned()),
        Action::Session => {
            let join = r.mode.as_deref().is_some_and(|m| m != "owner");
            (99, "Other", if join { "join" } else { "attach" }.to_owned())
        }
        Action::Terminate => (99, "Other", "terminate".to_owned()),
        Action::Unstoppable => (99, "Other", "unstoppable".to_owned()),
        Action::RecordingFinished => (99, "Other", "recording.finished".to_owned()),
        Action::Request => {
            let outcome = r.outcome.as_deref().unwrap_or("changed");
            let (id, name) = match outcome {
                "created" => (1, "Create"),
                "approved" | "denied" | "revoked" | "used" => (3, "Update"),
                "withdrawn" => (4, "Delete"),
                _ => (99, "Other"),
            };
            (id, name, format!("debugrequest.{outcome}"))
        }
    }
}

fn millis(t: &Timestamp) -> i64 {
    t.as_millisecond()
}

fn actor(r: &AuditRecord) -> Value {
    let groups: Vec<Value> = r.groups.iter().map(|g| json!({"name": g})).collect();
    let mut user = json!({"name": r.user});
    if !groups.is_empty() {
        user["groups"] = Value::Array(groups);
    }
    json!({"user": user})
}

fn metadata(uid: &str) -> Value {
    json!({
        "version": OCSF_VERSION,
        "uid": uid,
        "log_name": "poddebug audit",
        "product": {
            "name": "poddebug",
            "vendor_name": "poddebug",
            "version": env!("CARGO_PKG_VERSION"),
        },
    })
}

/// What OCSF has no attribute for, under `unmapped`.
fn unmapped(r: &AuditRecord) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        if !v.is_null() {
            m.insert(k.to_owned(), v);
        }
    };
    put("namespace", json!(r.namespace));
    put("pod", json!(r.pod));
    put("container", json!(r.container));
    put("profile", json!(r.profile));
    put("image", json!(r.image));
    put("protocol", json!(r.protocol));
    put("bytes_in", json!(r.bytes_in));
    put("bytes_out", json!(r.bytes_out));
    put("exit_code", json!(r.exit_code));
    put("expires_at", json!(r.expires_at.map(|t| t.to_string())));
    put("recording_id", json!(r.recording_id));
    put("session", json!(r.session));
    put("mode", json!(r.mode));
    put("outcome", json!(r.outcome));
    put("debug_request", json!(r.debug_request));
    put("reason", json!(r.reason));
    put("ticket", json!(r.ticket));
    if !r.approvers.is_empty() {
        put("approvers", json!(r.approvers));
    }
    Value::Object(m)
}

/// The API Activity event of `r`, with id `uid`, as of `now`.
pub fn api_activity(r: &AuditRecord, uid: &str, now: Timestamp) -> Value {
    let (activity_id, activity_name, operation) = activity(r);
    let resource_type = match r.action {
        Action::Request => "debugrequest",
        Action::RecordingFinished => "recording",
        // A copy of a pod is a pod of its own, named by `pod`.
        _ if r.container.is_empty() => "pod",
        _ => "debug container",
    };
    let resource_name = match (r.action, &r.recording_id, &r.debug_request) {
        (Action::RecordingFinished, Some(id), _) => id.clone(),
        (Action::Request, _, Some(name)) => name.clone(),
        _ if r.container.is_empty() => r.pod.clone(),
        _ => r.container.clone(),
    };
    let src = if server_initiated(r) {
        json!({"svc_name": "poddebug-apiserver"})
    } else {
        json!({"svc_name": "kube-apiserver"})
    };
    let mut ev = json!({
        "category_uid": API_CATEGORY,
        "category_name": "Application Activity",
        "class_uid": API_CLASS,
        "class_name": "API Activity",
        "activity_id": activity_id,
        "activity_name": activity_name,
        "type_uid": API_CLASS * 100 + activity_id,
        "severity_id": INFORMATIONAL,
        "status_id": 1,
        "status": "Success",
        "time": millis(&now),
        "metadata": metadata(uid),
        "actor": actor(r),
        "api": {
            "operation": operation,
            "service": {"name": "poddebug.dev"},
            "version": "v1alpha1",
        },
        "src_endpoint": src,
        "resources": [{
            "type": resource_type,
            "name": resource_name,
            "namespace": r.namespace,
        }],
        "unmapped": unmapped(r),
    });
    if let Some(outcome) = &r.outcome {
        ev["status_detail"] = json!(outcome);
    }
    if let Some(s) = &r.start {
        ev["start_time"] = json!(millis(s));
    }
    if let Some(e) = &r.end {
        ev["end_time"] = json!(millis(e));
    }
    if let (Some(s), Some(e)) = (&r.start, &r.end) {
        ev["duration"] = json!((millis(e) - millis(s)).max(0));
    }
    ev
}

/// The Process Activity (Launch) event of command `index` of the session `r` is the record
/// of, started at `start`, with id `uid`.
pub fn process_activity(
    r: &AuditRecord,
    start: Timestamp,
    index: usize,
    cmd: &RecordingCommand,
    uid: &str,
) -> Value {
    let offset_ms = (cmd.offset.max(0.0) * 1000.0) as i64;
    let name = cmd.line.split_whitespace().next().unwrap_or_default();
    let mut process = json!({
        "uid": format!("{}/{}", r.session.as_deref().unwrap_or_default(), index + 1),
        "cmd_line": cmd.line,
    });
    if !name.is_empty() {
        process["name"] = json!(name);
    }
    let mut extra = unmapped(r);
    extra["offset_seconds"] = json!(cmd.offset);
    extra["recalled"] = json!(cmd.recalled);
    json!({
        "category_uid": SYSTEM_CATEGORY,
        "category_name": "System Activity",
        "class_uid": PROCESS_CLASS,
        "class_name": "Process Activity",
        "activity_id": 1,
        "activity_name": "Launch",
        "type_uid": PROCESS_CLASS * 100 + 1,
        "severity_id": INFORMATIONAL,
        "time": millis(&start) + offset_ms,
        "metadata": metadata(uid),
        "actor": actor(r),
        "device": {
            "type_id": 99,
            "type": "Kubernetes pod",
            "name": format!("{}/{}", r.namespace, r.pod),
            "hostname": r.pod,
        },
        "process": process,
        "message": if cmd.recalled {
            "a command line submitted after a history recall (its start is the shell's, not in the input)"
        } else {
            "a command line submitted in a recorded debug session"
        },
        "unmapped": extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use poddebug_storage::Caller;

    fn record(action: Action) -> AuditRecord {
        let caller = Caller {
            user: "alice".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            ..Default::default()
        };
        AuditRecord::new(action, &caller, "shop", "web", "dbg")
    }

    #[test]
    fn each_action_is_an_api_activity_with_its_operation() {
        let now: Timestamp = "2026-11-27T00:00:00Z".parse().unwrap();
        let mut attach = record(Action::Session);
        attach.mode = Some("owner".into());
        let mut join = record(Action::Session);
        join.mode = Some("observer".into());
        let mut approved = record(Action::Request);
        approved.outcome = Some("approved".into());
        approved.debug_request = Some("web-sysadmin".into());
        for (r, id, op) in [
            (record(Action::Create), 1, "create"),
            (record(Action::Stop), 4, "stop"),
            (attach, 99, "attach"),
            (join, 99, "join"),
            (approved, 3, "debugrequest.approved"),
        ] {
            let ev = api_activity(&r, "e1", now);
            assert_eq!(ev["class_uid"], 6003);
            assert_eq!(ev["activity_id"], id, "{op}");
            assert_eq!(ev["type_uid"], 600300 + id, "{op}");
            assert_eq!(ev["api"]["operation"], op);
            assert_eq!(ev["actor"]["user"]["name"], "alice");
            assert_eq!(ev["actor"]["user"]["groups"][0]["name"], "dev");
            assert_eq!(ev["time"], now.as_millisecond());
            assert_eq!(ev["metadata"]["uid"], "e1");
            assert_eq!(ev["metadata"]["version"], OCSF_VERSION);
        }
        let ev = api_activity(&record(Action::Expire), "e2", now);
        assert_eq!(ev["src_endpoint"]["svc_name"], "poddebug-apiserver");
        // A copy's record names its pod.
        let mut copy = record(Action::Create);
        copy.container = String::new();
        copy.pod = "web-copy".into();
        let ev = api_activity(&copy, "e3", now);
        assert_eq!(ev["resources"][0]["type"], "pod");
        assert_eq!(ev["resources"][0]["name"], "web-copy");
    }

    #[test]
    fn a_command_is_a_process_launch_at_its_time_in_the_session() {
        let start: Timestamp = "2026-11-27T00:00:00Z".parse().unwrap();
        let mut r = record(Action::Session);
        r.session = Some("s1".into());
        let cmd = RecordingCommand {
            offset: 2.5,
            line: "cat /etc/passwd".into(),
            recalled: false,
        };
        let ev = process_activity(&r, start, 0, &cmd, "e3");
        assert_eq!(ev["class_uid"], 1007);
        assert_eq!(ev["type_uid"], 100701);
        assert_eq!(ev["time"], start.as_millisecond() + 2500);
        assert_eq!(ev["process"]["cmd_line"], "cat /etc/passwd");
        assert_eq!(ev["process"]["name"], "cat");
        assert_eq!(ev["process"]["uid"], "s1/1");
        assert_eq!(ev["device"]["name"], "shop/web");
        assert_eq!(ev["unmapped"]["recalled"], false);
    }
}
