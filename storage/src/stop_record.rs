//! Where a stop request is recorded without a write on the pod object.
//!
//! Before it signals anything, the stop script appends one line to the debug container's own
//! termination message file (`terminationMessagePath`, `/dev/termination-log` by default): the
//! marker [`RECORD_MARKER`], a space, and the [`StopRecord`] as JSON (who, when, grace period).
//! Once the container has terminated, the kubelet reports that file in
//! `state.terminated.message`, and `status.stopRequested` is read from its last record line. The
//! Event `DebugContainerStopped`, written with the server's identity, is the record kept while
//! the container still runs, and the one to trust: the container's processes can write the same
//! file (see docs/security.md). The kubelet reads the last 4 KiB of the file and its status
//! manager keeps the first 12 KiB / (containers + init containers) of that: the record is kept
//! short and appended, so it survives unless the container's own message is long in a pod with
//! many containers.
//!
//! Earlier versions kept the records in the pod annotation [`STOP_REQUESTS_ANNOTATION`]
//! (`{"<ephemeral container name>": {"requestedAt": …, "requestedBy": …}}`); it is still read for
//! the containers they stopped, never written.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use poddebug_types::StopRequest as StopRecord;

use crate::state::ec_status;

/// Annotation in which earlier versions recorded stop requests on the pod (read only).
pub const STOP_REQUESTS_ANNOTATION: &str = "poddebug.dev/stop-requests";

/// What starts a stop record line in a termination message.
pub(crate) const RECORD_MARKER: &str = "poddebug.dev/stop-request";

/// The termination message path the kubelet uses when the container names none.
pub(crate) const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// The line the stop script writes for `record` (JSON keeps it on one line whatever the user
/// name holds).
pub(crate) fn record_line(record: &StopRecord) -> String {
    let json = serde_json::to_string(record).unwrap_or_else(|_| "{}".to_owned());
    format!("{RECORD_MARKER} {json}")
}

/// The last stop record in a termination message; lines that are not records (the
/// container's own message) are skipped, and a record that does not parse reads as none.
pub(crate) fn from_termination_message(message: &str) -> Option<StopRecord> {
    message
        .lines()
        .rev()
        .filter_map(|l| l.trim_end().strip_prefix(RECORD_MARKER))
        .find_map(|rest| rest.strip_prefix(' '))
        .and_then(|json| serde_json::from_str(json.trim()).ok())
}

/// Every record of the old annotation, by ephemeral container name; garbage reads as none.
fn annotation_records(pod: &Pod) -> BTreeMap<String, StopRecord> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STOP_REQUESTS_ANNOTATION))
        .and_then(|raw| serde_json::from_str(raw).ok())
        .unwrap_or_default()
}

/// The stop record of ephemeral container `ec_name`: from its termination message, else from
/// the annotation of earlier versions.
pub(crate) fn stop_record(pod: &Pod, ec_name: &str) -> Option<StopRecord> {
    ec_status(pod, ec_name)
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.message.as_deref())
        .and_then(from_termination_message)
        .or_else(|| annotation_records(pod).remove(ec_name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn record(user: &str) -> StopRecord {
        StopRecord {
            requested_at: Time("2026-01-02T03:04:05Z".parse().expect("timestamp")),
            requested_by: user.to_owned(),
            grace_period_seconds: Some(10),
        }
    }

    fn terminated_with(message: &str) -> Pod {
        let mut p = pod("web", &[("dbg", None, "terminated")]);
        if let Some(t) = p
            .status
            .as_mut()
            .and_then(|s| s.ephemeral_container_statuses.as_mut())
            .and_then(|s| s.first_mut())
            .and_then(|s| s.state.as_mut())
            .and_then(|s| s.terminated.as_mut())
        {
            t.message = Some(message.to_owned());
        }
        p
    }

    #[test]
    fn the_line_round_trips_through_the_termination_message() {
        // A user name that would break a naive format.
        let r = record("evil\n\"name\" poddebug.dev/stop-request {}");
        let line = record_line(&r);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.starts_with("poddebug.dev/stop-request {"), "{line}");
        let message = format!("the tool's own last words\n{line}\n");
        assert_eq!(from_termination_message(&message), Some(r.clone()));
        assert_eq!(stop_record(&terminated_with(&message), "dbg"), Some(r));
    }

    #[test]
    fn the_last_record_wins_and_garbage_is_none() {
        let first = record_line(&record("alice"));
        let second = record_line(&record("bob"));
        let got = from_termination_message(&format!("{first}\n{second}")).expect("record");
        assert_eq!(got.requested_by, "bob");
        assert_eq!(from_termination_message("plain message"), None);
        assert_eq!(
            from_termination_message("poddebug.dev/stop-request not json"),
            None
        );
        assert_eq!(
            from_termination_message("poddebug.dev/stop-requestX {}"),
            None
        );
    }

    #[test]
    fn running_containers_have_no_record_on_the_pod() {
        let p = pod("web", &[("dbg", None, "running")]);
        assert_eq!(stop_record(&p, "dbg"), None);
    }

    #[test]
    fn the_annotation_of_earlier_versions_is_still_read() {
        let mut p = pod("web", &[("dbg", None, "terminated")]);
        p.metadata.annotations = Some(
            [(
                STOP_REQUESTS_ANNOTATION.to_owned(),
                r#"{"dbg":{"requestedAt":"2026-01-01T00:00:00Z","requestedBy":"bob"}}"#.to_owned(),
            )]
            .into(),
        );
        let got = stop_record(&p, "dbg").expect("old record");
        assert_eq!(got.requested_by, "bob");
        assert_eq!(got.grace_period_seconds, None);
        assert_eq!(stop_record(&p, "other"), None);
        p.metadata.annotations = Some([(STOP_REQUESTS_ANNOTATION.to_owned(), "x".into())].into());
        assert_eq!(stop_record(&p, "dbg"), None, "garbage reads as none");
    }
}
