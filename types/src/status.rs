//! The error model of the API: every failure a client can see, and the one function that turns
//! it into a Kubernetes `Status` (apimachinery `pkg/api/errors`), so that kubectl prints our
//! errors exactly as it prints core ones.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

use crate::field::{ErrorList, go_quote};

/// A "group/resource" or "resource" name as apimachinery prints `GroupResource.String()`:
/// `pods`, `pods.poddebug.dev`, `debugprofiles.poddebug.dev`.
pub fn group_resource(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

/// Every error the API answers with. Each variant maps to one HTTP code and `Status.reason`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// 400 BadRequest: the request itself is malformed. The text is the whole message.
    #[error("{0}")]
    BadRequest(String),
    /// 400 BadRequest about request parameters: the message aggregates the field errors, one
    /// cause per field error in `details.causes` (as kube-apiserver's 422 Invalid does for a
    /// body).
    #[error("{}", .0.aggregate().unwrap_or_default())]
    BadParameters(ErrorList),
    /// 401 Unauthorized: no valid credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 Forbidden on an object: `<resource> "<name>" is forbidden: <reason>`.
    #[error("{resource} {name:?} is forbidden: {reason}")]
    Forbidden {
        /// Group-qualified resource (`pods.poddebug.dev`).
        resource: String,
        /// Object name; may be empty.
        name: String,
        /// Why.
        reason: String,
        /// The Status `details.kind` (the plain resource), `details.group`.
        kind: String,
        /// API group of the resource.
        group: String,
    },
    /// 403 Forbidden with a fully formed message (non-resource URLs, authorizer wording).
    #[error("{0}")]
    ForbiddenMessage(String),
    /// 404 NotFound: `<resource> "<name>" not found`.
    #[error("{resource} {name:?} not found")]
    NotFound {
        /// Group-qualified resource.
        resource: String,
        /// The missing object.
        name: String,
        /// `details.kind` (plain resource).
        kind: String,
        /// `details.group`.
        group: String,
    },
    /// 404 for a path that serves nothing.
    #[error("the server could not find the requested resource")]
    PathNotFound,
    /// 409 AlreadyExists, with an optional explanation after kube-apiserver's message.
    #[error("{resource} {name:?} already exists{}", because.as_deref().map(|b| format!(": {b}")).unwrap_or_default())]
    AlreadyExists {
        /// Group-qualified resource.
        resource: String,
        /// The clashing name.
        name: String,
        /// Why the name is still held, when it is not plain (appended to the message).
        because: Option<String>,
        /// `details.kind`.
        kind: String,
        /// `details.group`.
        group: String,
    },
    /// 409 Conflict: `Operation cannot be fulfilled on <resource> "<name>": <reason>`.
    #[error("Operation cannot be fulfilled on {resource} {name:?}: {reason}")]
    Conflict {
        /// Group-qualified resource.
        resource: String,
        /// The object.
        name: String,
        /// Why.
        reason: String,
        /// `details.kind`.
        kind: String,
        /// `details.group`.
        group: String,
    },
    /// 422 Invalid: `<Kind> "<name>" is invalid: <aggregate>` with one cause per field error.
    #[error("{kind} {name:?} is invalid")]
    Invalid {
        /// API group of the kind ("" for core `Pod`).
        group: String,
        /// The kind (`Pod`, `PodDebugContainer`).
        kind: String,
        /// Object name.
        name: String,
        /// The field errors, all of them.
        errors: ErrorList,
    },
    /// 405 MethodNotAllowed.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 406 NotAcceptable.
    #[error("{0}")]
    NotAcceptable(String),
    /// 413 RequestEntityTooLarge.
    #[error("{0}")]
    RequestEntityTooLarge(String),
    /// 415 UnsupportedMediaType.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429 TooManyRequests, with `Retry-After`.
    #[error("{message}")]
    TooManyRequests {
        /// Message.
        message: String,
        /// Seconds the client should wait.
        retry_after_seconds: i32,
    },
    /// 500 InternalError: `Internal error occurred: <msg>`. The message must not leak internals.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 503 ServiceUnavailable.
    #[error("{0}")]
    ServiceUnavailable(String),
    /// 504 Timeout: `Timeout: <msg>`.
    #[error("Timeout: {0}")]
    Timeout(String),
    /// 500 ServerTimeout-like wait failures are not used; upstream Status errors pass through
    /// with their code, reason, message and details unchanged.
    #[error("{}", .0.message.clone().unwrap_or_default())]
    Upstream(Box<Status>),
}

/// The Status cause of a field error.
fn cause(e: &crate::field::FieldError) -> StatusCause {
    StatusCause {
        reason: Some(e.kind.reason().to_owned()),
        message: Some(e.body()),
        // Go's StatusCause.Field is `omitempty`: the static-pod error (path "") has no
        // `field` key at all.
        field: non_empty(&e.field),
    }
}

impl ApiError {
    /// 404 for an object of `resource` in `group`.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        ApiError::NotFound {
            resource: group_resource(resource, group),
            name: name.to_owned(),
            kind: resource.to_owned(),
            group: group.to_owned(),
        }
    }

    /// 409 AlreadyExists for an object of `resource` in `group`.
    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        ApiError::AlreadyExists {
            resource: group_resource(resource, group),
            name: name.to_owned(),
            because: None,
            kind: resource.to_owned(),
            group: group.to_owned(),
        }
    }

    /// [`ApiError::already_exists`] saying why the name is still held:
    /// `<resource> "<name>" already exists: <because>`.
    pub fn already_exists_because(
        resource: &str,
        group: &str,
        name: &str,
        because: impl Into<String>,
    ) -> Self {
        ApiError::AlreadyExists {
            resource: group_resource(resource, group),
            name: name.to_owned(),
            because: Some(because.into()),
            kind: resource.to_owned(),
            group: group.to_owned(),
        }
    }

    /// 409 Conflict for an object of `resource` in `group`.
    pub fn conflict(resource: &str, group: &str, name: &str, reason: impl Into<String>) -> Self {
        ApiError::Conflict {
            resource: group_resource(resource, group),
            name: name.to_owned(),
            reason: reason.into(),
            kind: resource.to_owned(),
            group: group.to_owned(),
        }
    }

    /// 403 on an object of `resource` in `group`.
    pub fn forbidden(resource: &str, group: &str, name: &str, reason: impl Into<String>) -> Self {
        ApiError::Forbidden {
            resource: group_resource(resource, group),
            name: name.to_owned(),
            reason: reason.into(),
            kind: resource.to_owned(),
            group: group.to_owned(),
        }
    }

    /// 422 Invalid for kind `kind` of `group`.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: ErrorList) -> Self {
        ApiError::Invalid {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            errors,
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) | ApiError::BadParameters(_) => 400,
            ApiError::Unauthorized(_) => 401,
            ApiError::Forbidden { .. } | ApiError::ForbiddenMessage(_) => 403,
            ApiError::NotFound { .. } | ApiError::PathNotFound => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::NotAcceptable(_) => 406,
            ApiError::RequestEntityTooLarge(_) => 413,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::TooManyRequests { .. } => 429,
            ApiError::Internal(_) => 500,
            ApiError::ServiceUnavailable(_) => 503,
            ApiError::Timeout(_) => 504,
            ApiError::Upstream(s) => s
                .code
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| *c >= 400)
                .unwrap_or(500),
        }
    }

    /// The `Status.reason`.
    pub fn reason(&self) -> &str {
        match self {
            ApiError::BadRequest(_) | ApiError::BadParameters(_) => "BadRequest",
            ApiError::Unauthorized(_) => "Unauthorized",
            ApiError::Forbidden { .. } | ApiError::ForbiddenMessage(_) => "Forbidden",
            ApiError::NotFound { .. } | ApiError::PathNotFound => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::RequestEntityTooLarge(_) => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::Internal(_) => "InternalError",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::Timeout(_) => "Timeout",
            ApiError::Upstream(s) => s.reason.as_deref().unwrap_or(""),
        }
    }

    /// Seconds for `Retry-After`, when the error asks the client to come back.
    pub fn retry_after_seconds(&self) -> Option<i32> {
        match self {
            ApiError::TooManyRequests {
                retry_after_seconds,
                ..
            } => Some(*retry_after_seconds),
            ApiError::Upstream(s) => s.details.as_ref().and_then(|d| d.retry_after_seconds),
            _ => None,
        }
    }

    /// The complete `Status` object (kind, apiVersion, status, message, reason, details, code).
    pub fn to_status(&self) -> Status {
        if let ApiError::Upstream(s) = self {
            let mut s = (**s).clone();
            s.status = Some("Failure".to_owned());
            s.code = Some(i32::from(self.code()));
            return s;
        }
        let details = match self {
            ApiError::NotFound {
                name, kind, group, ..
            }
            | ApiError::AlreadyExists {
                name, kind, group, ..
            }
            | ApiError::Conflict {
                name, kind, group, ..
            }
            | ApiError::Forbidden {
                name, kind, group, ..
            } => Some(StatusDetails {
                name: non_empty(name),
                group: non_empty(group),
                kind: non_empty(kind),
                ..Default::default()
            }),
            ApiError::Invalid {
                group,
                kind,
                name,
                errors,
            } => Some(StatusDetails {
                name: non_empty(name),
                group: non_empty(group),
                kind: non_empty(kind),
                causes: Some(errors.iter().map(cause).collect()),
                ..Default::default()
            }),
            ApiError::BadParameters(errors) => Some(StatusDetails {
                causes: Some(errors.iter().map(cause).collect()),
                ..Default::default()
            }),
            ApiError::TooManyRequests {
                retry_after_seconds,
                ..
            } => Some(StatusDetails {
                retry_after_seconds: Some(*retry_after_seconds),
                ..Default::default()
            }),
            ApiError::Internal(msg) => Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    message: Some(msg.clone()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            _ => None,
        };
        Status {
            code: Some(i32::from(self.code())),
            details,
            message: Some(self.message()),
            metadata: Default::default(),
            reason: non_empty(self.reason()),
            status: Some("Failure".to_owned()),
        }
    }

    /// The `Status.message`.
    pub fn message(&self) -> String {
        match self {
            ApiError::Invalid {
                group,
                kind,
                name,
                errors,
            } => {
                let qualified = if group.is_empty() {
                    kind.clone()
                } else {
                    format!("{kind}.{group}")
                };
                match errors.aggregate() {
                    Some(agg) => format!("{qualified} {} is invalid: {agg}", go_quote(name)),
                    None => format!("{qualified} {} is invalid", go_quote(name)),
                }
            }
            ApiError::NotFound { resource, name, .. } => {
                format!("{resource} {} not found", go_quote(name))
            }
            ApiError::AlreadyExists {
                resource,
                name,
                because,
                ..
            } => match because {
                Some(b) => format!("{resource} {} already exists: {b}", go_quote(name)),
                None => format!("{resource} {} already exists", go_quote(name)),
            },
            ApiError::Conflict {
                resource,
                name,
                reason,
                ..
            } => {
                format!(
                    "Operation cannot be fulfilled on {resource} {}: {reason}",
                    go_quote(name)
                )
            }
            ApiError::Forbidden {
                resource,
                name,
                reason,
                ..
            } => {
                // apimachinery NewForbidden: no resource, no name, or both.
                if resource.is_empty() {
                    format!("forbidden: {reason}")
                } else if name.is_empty() {
                    format!("{resource} is forbidden: {reason}")
                } else {
                    format!("{resource} {} is forbidden: {reason}", go_quote(name))
                }
            }
            other => other.to_string(),
        }
    }

    /// The Status as JSON bytes, ready to send with `Content-Type: application/json`.
    pub fn to_json(&self) -> Vec<u8> {
        status_json(&self.to_status())
    }

    /// kube-apiserver's 410 `Expired` (a resourceVersion or continue token too old to serve).
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::from_upstream(Status {
            code: Some(410),
            message: Some(message.into()),
            reason: Some("Expired".to_owned()),
            status: Some("Failure".to_owned()),
            ..Default::default()
        })
    }

    /// Rebuild an error from a Status answered by kube-apiserver, keeping its reason,
    /// message and details.
    pub fn from_upstream(status: Status) -> Self {
        ApiError::Upstream(Box::new(status))
    }
}

/// Serialize a Status with `kind` and `apiVersion` first, as kube-apiserver does.
pub fn status_json(status: &Status) -> Vec<u8> {
    let mut value = serde_json::to_value(status).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(obj) = value.as_object_mut() {
        let mut ordered = serde_json::Map::new();
        ordered.insert("kind".into(), "Status".into());
        ordered.insert("apiVersion".into(), "v1".into());
        ordered.insert(
            "metadata".into(),
            obj.remove("metadata")
                .unwrap_or_else(|| serde_json::json!({})),
        );
        for key in ["status", "message", "reason", "details", "code"] {
            if let Some(v) = obj.remove(key) {
                ordered.insert(key.into(), v);
            }
        }
        value = serde_json::Value::Object(ordered);
    }
    serde_json::to_vec(&value).unwrap_or_default()
}

fn non_empty(s: &str) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::FieldError;

    #[test]
    fn invalid_matches_live_kube_apiserver() {
        let errors: ErrorList = ["ports", "resources", "readinessProbe"]
            .iter()
            .map(|f| {
                FieldError::forbidden(
                    format!("spec.ephemeralContainers[0].{f}"),
                    "cannot be set for an Ephemeral Container",
                )
            })
            .collect();
        let err = ApiError::invalid("", "Pod", "target", errors);
        let v: serde_json::Value = serde_json::from_slice(&err.to_json()).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["status"], "Failure");
        assert_eq!(v["code"], 422);
        assert_eq!(v["reason"], "Invalid");
        assert_eq!(
            v["message"],
            "Pod \"target\" is invalid: [spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container]"
        );
        assert_eq!(v["details"]["name"], "target");
        assert_eq!(v["details"]["kind"], "Pod");
        assert!(v["details"].get("group").is_none());
        assert_eq!(v["details"]["causes"][1]["reason"], "FieldValueForbidden");
        assert_eq!(
            v["details"]["causes"][1]["field"],
            "spec.ephemeralContainers[0].resources"
        );
        assert_eq!(v["metadata"], serde_json::json!({}));
    }

    #[test]
    fn not_found_matches_live_kube_apiserver() {
        let v: serde_json::Value =
            serde_json::from_slice(&ApiError::not_found("pods", "", "nosuchpod").to_json())
                .unwrap();
        assert_eq!(v["message"], "pods \"nosuchpod\" not found");
        assert_eq!(
            v["details"],
            serde_json::json!({"name": "nosuchpod", "kind": "pods"})
        );
        assert_eq!(v["code"], 404);
    }

    #[test]
    fn grouped_resources_are_qualified() {
        let e = ApiError::already_exists("pods/debug", "poddebug.dev", "dbg");
        assert_eq!(
            e.message(),
            "pods/debug.poddebug.dev \"dbg\" already exists"
        );
        assert_eq!(e.code(), 409);
        let e = ApiError::invalid("poddebug.dev", "PodDebugContainer", "x", ErrorList::new());
        assert_eq!(
            e.message(),
            "PodDebugContainer.poddebug.dev \"x\" is invalid"
        );
    }

    #[test]
    fn internal_errors_say_internal_error_occurred() {
        let v: serde_json::Value =
            serde_json::from_slice(&ApiError::Internal("upstream unreachable".into()).to_json())
                .unwrap();
        assert_eq!(
            v["message"],
            "Internal error occurred: upstream unreachable"
        );
        assert_eq!(v["reason"], "InternalError");
        assert_eq!(v["code"], 500);
    }

    #[test]
    fn upstream_status_passes_through() {
        let s = Status {
            code: Some(403),
            message: Some(
                "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": x".into(),
            ),
            reason: Some("Forbidden".into()),
            status: Some("Failure".into()),
            ..Default::default()
        };
        let e = ApiError::from_upstream(s);
        assert_eq!(e.code(), 403);
        assert_eq!(e.reason(), "Forbidden");
        assert!(e.message().contains("violates PodSecurity"));
    }
}
