//! The record of stop requests, kept on the pod itself because the server is stateless: the
//! annotation [`STOP_REQUESTS_ANNOTATION`] holds a JSON object
//! `{"<ephemeral container name>": {"requestedAt": "<RFC 3339>", "requestedBy": "<user>"}}`.
//!
//! It is written with a JSON merge patch on the pod (RBAC: `patch` on `pods`) by the server's own
//! identity; a failure to write it is logged and the stop goes on. Garbage in the annotation
//! (written by someone else) reads as "no record" and is replaced on the next write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use poddebug_types::StopRequest as StopRecord;

/// Annotation on the pod recording who asked to stop which ephemeral container, and when.
pub const STOP_REQUESTS_ANNOTATION: &str = "poddebug.dev/stop-requests";

/// Every stop record on the pod, by ephemeral container name.
pub(crate) fn stop_records(pod: &Pod) -> BTreeMap<String, StopRecord> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STOP_REQUESTS_ANNOTATION))
        .and_then(|raw| serde_json::from_str(raw).ok())
        .unwrap_or_default()
}

/// The merge patch that adds `record` for `ec_name` to the records already on `pod`, with the
/// pod's resourceVersion as a precondition; `None` when a stop is already recorded for it (the
/// first request is kept).
pub(crate) fn record_patch(
    pod: &Pod,
    ec_name: &str,
    record: StopRecord,
) -> Option<serde_json::Value> {
    let mut records = stop_records(pod);
    if records.contains_key(ec_name) {
        return None;
    }
    records.insert(ec_name.to_owned(), record);
    let value = serde_json::to_string(&records).ok()?;
    let mut metadata = serde_json::json!({ "annotations": { STOP_REQUESTS_ANNOTATION: value } });
    if let Some(rv) = pod.metadata.resource_version.as_deref() {
        metadata["resourceVersion"] = rv.into();
    }
    Some(serde_json::json!({ "metadata": metadata }))
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
        }
    }

    fn with_annotation(raw: &str) -> Pod {
        let mut p = pod("web", &[]);
        p.metadata.annotations =
            Some([(STOP_REQUESTS_ANNOTATION.to_owned(), raw.to_owned())].into());
        p
    }

    #[test]
    fn patch_adds_to_existing_records() {
        let p = with_annotation(
            r#"{"old":{"requestedAt":"2026-01-01T00:00:00Z","requestedBy":"bob"}}"#,
        );
        let patch = record_patch(&p, "dbg", record("alice")).expect("new record");
        assert_eq!(patch["metadata"]["resourceVersion"], "100");
        let raw = patch["metadata"]["annotations"][STOP_REQUESTS_ANNOTATION]
            .as_str()
            .expect("string value");
        let parsed: serde_json::Value = serde_json::from_str(raw).expect("json");
        assert_eq!(parsed["old"]["requestedBy"], "bob");
        assert_eq!(parsed["dbg"]["requestedBy"], "alice");
        assert_eq!(parsed["dbg"]["requestedAt"], "2026-01-02T03:04:05Z");
    }

    #[test]
    fn first_request_is_kept() {
        let p = with_annotation(
            r#"{"dbg":{"requestedAt":"2026-01-01T00:00:00Z","requestedBy":"bob"}}"#,
        );
        assert!(record_patch(&p, "dbg", record("alice")).is_none());
        assert_eq!(stop_records(&p)["dbg"].requested_by, "bob");
    }

    #[test]
    fn garbage_reads_as_empty_and_is_replaced() {
        let p = with_annotation("not json");
        assert!(stop_records(&p).is_empty());
        assert!(record_patch(&p, "dbg", record("alice")).is_some());
        assert!(stop_records(&pod("web", &[])).is_empty());
    }
}
