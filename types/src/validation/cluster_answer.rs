//! The cluster's 422 for a new ephemeral container, told in `PodDebugContainer` terms.
//!
//! kube-apiserver is the authority on what a pod accepts: when it refuses the appended
//! ephemeral container it answers `Pod "P" is invalid` with causes at
//! `spec.ephemeralContainers[N].X`. The caller asked for a `PodDebugContainer`, so every cause
//! is moved onto the field of that object which holds the value:
//!
//! | cluster field | PodDebugContainer field |
//! |---|---|
//! | `spec.ephemeralContainers[N]` | `container` |
//! | `spec.ephemeralContainers[N].name` | `metadata.name` (the debug name is the container's) |
//! | `spec.ephemeralContainers[N].targetContainerName` | `targetContainerName` |
//! | `spec.ephemeralContainers[N].X` | `container.X` |
//! | anything else (`spec`, `spec.hostNetwork`, `""`…) | unchanged: it is about the pod |
//!
//! The texts (reason, message body) are the cluster's, kept verbatim, and all the causes are
//! answered at once, as `PodDebugContainer.poddebug.dev "NAME" is invalid: ...`, the shape
//! [`validate_pod_debug_container`](super::validate_pod_debug_container)'s errors have.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use crate::GROUP;
use crate::api::KIND_POD_DEBUG_CONTAINER;
use crate::field::{ErrorList, FieldError, FieldErrorKind, FieldValue};
use crate::status::ApiError;

/// The error kind of a Status cause reason (`metav1.CauseType`); `None` for a reason that is
/// not a field error's.
fn kind_of_reason(reason: &str) -> Option<FieldErrorKind> {
    Some(match reason {
        "FieldValueNotFound" => FieldErrorKind::NotFound,
        "FieldValueRequired" => FieldErrorKind::Required,
        "FieldValueDuplicate" => FieldErrorKind::Duplicate,
        "FieldValueInvalid" => FieldErrorKind::Invalid,
        "FieldValueNotSupported" => FieldErrorKind::NotSupported,
        "FieldValueForbidden" => FieldErrorKind::Forbidden,
        "FieldValueTooLong" => FieldErrorKind::TooLong,
        "FieldValueTooMany" => FieldErrorKind::TooMany,
        "InternalError" => FieldErrorKind::Internal,
        "FieldValueTypeInvalid" => FieldErrorKind::TypeInvalid,
        _ => return None,
    })
}

/// A field error whose body renders exactly as `message` (the cluster's `ErrorBody`).
fn error_with_body(kind: FieldErrorKind, field: String, message: &str) -> FieldError {
    let rest = message
        .strip_prefix(kind.text())
        .map(|r| r.strip_prefix(": ").unwrap_or(r));
    match rest {
        // "Required value", "Forbidden", ...: nothing after the type.
        Some("") => FieldError::new(kind, field, FieldValue::Omit, ""),
        // Types that never show a value keep the remainder as their detail; the others as an
        // already formatted value (it may hold value and detail together, which renders the
        // same).
        Some(r)
            if matches!(
                kind,
                FieldErrorKind::Required
                    | FieldErrorKind::Forbidden
                    | FieldErrorKind::TooLong
                    | FieldErrorKind::Internal
            ) =>
        {
            FieldError::new(kind, field, FieldValue::Omit, r)
        }
        Some(r) => FieldError::new(kind, field, FieldValue::Raw(r.to_owned()), ""),
        // A body that does not start with its type's text (a webhook's own wording): kept
        // whole, after that text.
        None => FieldError::new(kind, field, FieldValue::Omit, message),
    }
}

/// Move a cluster field path onto the `PodDebugContainer` (see the module table). `index` is
/// the position of the new entry in `spec.ephemeralContainers`.
pub fn debug_container_field(cluster_field: &str, index: usize) -> String {
    let prefix = format!("spec.ephemeralContainers[{index}]");
    let Some(rest) = cluster_field.strip_prefix(&prefix) else {
        return cluster_field.to_owned();
    };
    if rest.is_empty() {
        return "container".to_owned();
    }
    if let Some(sub) = rest.strip_prefix('.') {
        if sub == "name" {
            return "metadata.name".to_owned();
        }
        if sub == "targetContainerName" {
            return sub.to_owned();
        }
        return format!("container.{sub}");
    }
    // `spec.ephemeralContainers[1]` against `spec.ephemeralContainers[10]`: another entry.
    cluster_field.to_owned()
}

/// The cluster's 422 about the pod, as a 422 about debug container `debug_name` with every cause
/// moved onto the `PodDebugContainer`'s fields. `None` when `status` is not a 422 Invalid with
/// field causes (an admission webhook's own 422 without causes, say), which is then answered
/// as the cluster sent it.
pub fn debug_container_invalid(
    status: &Status,
    index: usize,
    debug_name: &str,
) -> Option<ApiError> {
    if status.code != Some(422) || status.reason.as_deref() != Some("Invalid") {
        return None;
    }
    let causes = status.details.as_ref()?.causes.as_ref()?;
    if causes.is_empty() {
        return None;
    }
    let mut errs = ErrorList::new();
    for cause in causes {
        let kind = kind_of_reason(cause.reason.as_deref().unwrap_or(""))?;
        let field = debug_container_field(cause.field.as_deref().unwrap_or(""), index);
        errs.push(error_with_body(
            kind,
            field,
            cause.message.as_deref().unwrap_or(""),
        ));
    }
    Some(ApiError::invalid(
        GROUP,
        KIND_POD_DEBUG_CONTAINER,
        debug_name,
        errs,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(v: serde_json::Value) -> Status {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn fields_move_onto_the_debug_container() {
        let f = |s| debug_container_field(s, 1);
        assert_eq!(f("spec.ephemeralContainers[1].ports"), "container.ports");
        assert_eq!(
            f("spec.ephemeralContainers[1].volumeMounts[0].subPath"),
            "container.volumeMounts[0].subPath"
        );
        assert_eq!(f("spec.ephemeralContainers[1].name"), "metadata.name");
        assert_eq!(
            f("spec.ephemeralContainers[1].targetContainerName"),
            "targetContainerName"
        );
        assert_eq!(f("spec.ephemeralContainers[1]"), "container");
        assert_eq!(
            f("spec.ephemeralContainers[10].ports"),
            "spec.ephemeralContainers[10].ports"
        );
        assert_eq!(
            f("spec.ephemeralContainers[0].ports"),
            "spec.ephemeralContainers[0].ports"
        );
        assert_eq!(f("spec.hostNetwork"), "spec.hostNetwork");
        assert_eq!(f(""), "");
    }

    /// 17-multi-errors of the live answers (kube-apiserver 1.36.2), at index 0.
    #[test]
    fn the_live_multi_error_answer_is_retold() {
        let live = status(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Pod \"target\" is invalid: [...]",
            "reason": "Invalid",
            "details": {"name": "target", "kind": "Pod", "causes": [
                {"reason": "FieldValueForbidden", "message": "Forbidden: cannot be set for an Ephemeral Container", "field": "spec.ephemeralContainers[0].ports"},
                {"reason": "FieldValueForbidden", "message": "Forbidden: cannot be set for an Ephemeral Container", "field": "spec.ephemeralContainers[0].resources"},
                {"reason": "FieldValueNotFound", "message": "Not found: \"nope\"", "field": "spec.ephemeralContainers[0].targetContainerName"},
                {"reason": "FieldValueDuplicate", "message": "Duplicate value: \"app\"", "field": "spec.ephemeralContainers[0].name"},
                {"reason": "FieldValueInvalid", "message": "Invalid value: \"200m\": must be less than or equal to cpu limit of 100m", "field": "spec.ephemeralContainers[0].resources.requests"},
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.ephemeralContainers[0].image"}
            ]},
            "code": 422
        }));
        let err = debug_container_invalid(&live, 0, "dbg").expect("a 422");
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.message(),
            "PodDebugContainer.poddebug.dev \"dbg\" is invalid: [container.ports: Forbidden: cannot be set for an Ephemeral Container, container.resources: Forbidden: cannot be set for an Ephemeral Container, targetContainerName: Not found: \"nope\", metadata.name: Duplicate value: \"app\", container.resources.requests: Invalid value: \"200m\": must be less than or equal to cpu limit of 100m, container.image: Required value]"
        );
        let s = err.to_status();
        let details = s.details.unwrap();
        assert_eq!(details.kind.as_deref(), Some("PodDebugContainer"));
        assert_eq!(details.group.as_deref(), Some("poddebug.dev"));
        assert_eq!(details.name.as_deref(), Some("dbg"));
        let causes = details.causes.unwrap();
        let original = live.details.unwrap().causes.unwrap();
        assert_eq!(causes.len(), original.len());
        for (ours, theirs) in causes.iter().zip(&original) {
            assert_eq!(ours.reason, theirs.reason);
            assert_eq!(ours.message, theirs.message, "bodies are kept verbatim");
        }
    }

    #[test]
    fn other_answers_are_not_retold() {
        let forbidden = status(
            json!({"code": 403, "reason": "Forbidden", "message": "pods \"p\" is forbidden: violates PodSecurity"}),
        );
        assert!(debug_container_invalid(&forbidden, 0, "d").is_none());
        let no_causes =
            status(json!({"code": 422, "reason": "Invalid", "message": "denied by webhook"}));
        assert!(debug_container_invalid(&no_causes, 0, "d").is_none());
        let odd_reason = status(json!({"code": 422, "reason": "Invalid", "message": "x",
            "details": {"causes": [{"reason": "SomethingNew", "message": "m", "field": "f"}]}}));
        assert!(debug_container_invalid(&odd_reason, 0, "d").is_none());
    }

    #[test]
    fn static_pod_cause_keeps_no_field() {
        let s = status(json!({"code": 422, "reason": "Invalid", "message": "x",
            "details": {"causes": [{"reason": "FieldValueForbidden", "message": "Forbidden: static pods do not support ephemeral containers"}]}}));
        let st = debug_container_invalid(&s, 0, "d").unwrap().to_status();
        let cause = &st.details.unwrap().causes.unwrap()[0];
        assert_eq!(cause.field, None);
        assert_eq!(
            cause.message.as_deref(),
            Some("Forbidden: static pods do not support ephemeral containers")
        );
    }
}
