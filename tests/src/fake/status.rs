//! The fake's own `metav1.Status` and `field.Error` builders, written from apimachinery's
//! `pkg/api/errors` and `pkg/util/validation/field` (not shared with poddebug-types, so the
//! fake checks poddebug's wording instead of repeating it).

use serde_json::{Map, Value, json};

use super::http::{Resp, json_response};

/// A failed request as kube-apiserver reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct KubeStatus {
    /// HTTP code, also `Status.code`.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Invalid`, ... or empty).
    pub reason: String,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, if any (`{}` counts as present).
    pub details: Option<Value>,
}

impl KubeStatus {
    /// A Status with no details.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> KubeStatus {
        KubeStatus {
            code,
            reason: reason.to_owned(),
            message: message.into(),
            details: None,
        }
    }

    /// Adds `details`.
    pub fn with_details(mut self, details: Value) -> KubeStatus {
        self.details = Some(details);
        self
    }

    /// The JSON body (`kind: Status`).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("metadata".into(), json!({}));
        m.insert("status".into(), json!("Failure"));
        if !self.message.is_empty() {
            m.insert("message".into(), json!(self.message));
        }
        if !self.reason.is_empty() {
            m.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }

    /// The response kube-apiserver writes for it (`application/json`).
    pub fn into_response(self) -> Resp {
        json_response(self.code, &self.to_json())
    }
}

/// `details` of an error about one object: empty values are left out, as Go's `omitempty` does.
pub fn details(group: &str, kind: &str, name: &str) -> Value {
    let mut m = Map::new();
    if !name.is_empty() {
        m.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        m.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        m.insert("kind".into(), json!(kind));
    }
    Value::Object(m)
}

/// `GroupResource.String()`: `pods` or `events.events.k8s.io`.
pub fn group_resource(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

/// 401 as the authentication filter writes it.
pub fn unauthorized() -> KubeStatus {
    KubeStatus::new(401, "Unauthorized", "Unauthorized")
}

/// 404 `pods "x" not found`, details `{name, kind: <resource>}`.
pub fn not_found(group: &str, resource: &str, name: &str) -> KubeStatus {
    KubeStatus::new(
        404,
        "NotFound",
        format!(
            "{} {} not found",
            group_resource(group, resource),
            go_quote(name)
        ),
    )
    .with_details(details(group, resource, name))
}

/// 404 for a path nothing serves (details `{}`; kubectl reads the empty name as "disabled").
pub fn path_not_found() -> KubeStatus {
    KubeStatus::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
    .with_details(json!({}))
}

/// 405 for a method the path does not serve.
pub fn method_not_allowed() -> KubeStatus {
    KubeStatus::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
    .with_details(json!({}))
}

/// 403 `<resource> "<name>" is forbidden: <why>` (`NewForbidden`).
pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> KubeStatus {
    let message = if resource.is_empty() && group.is_empty() {
        format!("forbidden: {why}")
    } else if name.is_empty() {
        format!("{} is forbidden: {why}", group_resource(group, resource))
    } else {
        format!(
            "{} {} is forbidden: {why}",
            group_resource(group, resource),
            go_quote(name)
        )
    };
    KubeStatus::new(403, "Forbidden", message).with_details(details(group, resource, name))
}

/// 409 `Operation cannot be fulfilled on <resource> "<name>": <why>`.
pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> KubeStatus {
    KubeStatus::new(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} {}: {why}",
            group_resource(group, resource),
            go_quote(name)
        ),
    )
    .with_details(details(group, resource, name))
}

/// The registry's optimistic-lock message (`registry/generic/registry/store.go`).
pub const OPTIMISTIC_LOCK_ERROR_MSG: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// 409 AlreadyExists.
pub fn already_exists(group: &str, resource: &str, name: &str) -> KubeStatus {
    KubeStatus::new(
        409,
        "AlreadyExists",
        format!(
            "{} {} already exists",
            group_resource(group, resource),
            go_quote(name)
        ),
    )
    .with_details(details(group, resource, name))
}

/// 400 BadRequest; the text is the whole message.
pub fn bad_request(message: impl Into<String>) -> KubeStatus {
    KubeStatus::new(400, "BadRequest", message)
}

/// 500 InternalError (`Internal error occurred: <err>` with one cause).
pub fn internal(err: &str) -> KubeStatus {
    KubeStatus::new(
        500,
        "InternalError",
        format!("Internal error occurred: {err}"),
    )
    .with_details(json!({"causes": [{"message": err}]}))
}

/// 503 ServiceUnavailable.
pub fn service_unavailable(message: &str) -> KubeStatus {
    KubeStatus::new(503, "ServiceUnavailable", message)
}

/// 410 Expired (a watch from a compacted resourceVersion).
pub fn expired(message: String) -> KubeStatus {
    KubeStatus::new(410, "Expired", message)
}

/// `NewGenericServerResponse(422, ...)`, what a JSON patch that fails to apply gets.
pub fn unprocessable_patch(server_message: &str) -> KubeStatus {
    KubeStatus::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
    .with_details(
        json!({"causes": [{"reason": "UnexpectedServerResponse", "message": server_message}]}),
    )
}

/// The media types `PATCH` accepts, in kube-apiserver's order.
pub const PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// 415 for any other `Content-Type` of a PATCH.
pub fn unsupported_patch_type() -> KubeStatus {
    KubeStatus::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            PATCH_TYPES.join(", ")
        ),
    )
}

/// `field.ErrorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorType {
    /// Not found.
    NotFound,
    /// Required value.
    Required,
    /// Duplicate value.
    Duplicate,
    /// Invalid value.
    Invalid,
    /// Unsupported value.
    NotSupported,
    /// Forbidden.
    Forbidden,
    /// Too long.
    TooLong,
}

impl FieldErrorType {
    fn reason(self) -> &'static str {
        match self {
            FieldErrorType::NotFound => "FieldValueNotFound",
            FieldErrorType::Required => "FieldValueRequired",
            FieldErrorType::Duplicate => "FieldValueDuplicate",
            FieldErrorType::Invalid => "FieldValueInvalid",
            FieldErrorType::NotSupported => "FieldValueNotSupported",
            FieldErrorType::Forbidden => "FieldValueForbidden",
            FieldErrorType::TooLong => "FieldValueTooLong",
        }
    }

    fn text(self) -> &'static str {
        match self {
            FieldErrorType::NotFound => "Not found",
            FieldErrorType::Required => "Required value",
            FieldErrorType::Duplicate => "Duplicate value",
            FieldErrorType::Invalid => "Invalid value",
            FieldErrorType::NotSupported => "Unsupported value",
            FieldErrorType::Forbidden => "Forbidden",
            FieldErrorType::TooLong => "Too long",
        }
    }
}

/// One `field.Error`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// Type.
    pub kind: FieldErrorType,
    /// Path, e.g. `spec.ephemeralContainers[0].name`.
    pub field: String,
    /// The bad value already printed the way Go prints it (`"x"` for strings), if shown.
    pub value: Option<String>,
    /// Detail text.
    pub detail: String,
}

impl FieldError {
    fn new(kind: FieldErrorType, field: &str, value: Option<String>, detail: &str) -> FieldError {
        FieldError {
            kind,
            field: field.to_owned(),
            value,
            detail: detail.to_owned(),
        }
    }

    /// `field.Required`.
    pub fn required(field: &str, detail: &str) -> FieldError {
        Self::new(FieldErrorType::Required, field, None, detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: &str, detail: &str) -> FieldError {
        Self::new(FieldErrorType::Forbidden, field, None, detail)
    }

    /// `field.NotFound` with a string value.
    pub fn not_found(field: &str, value: &str) -> FieldError {
        Self::new(FieldErrorType::NotFound, field, Some(go_quote(value)), "")
    }

    /// `field.Duplicate` with a string value.
    pub fn duplicate(field: &str, value: &str) -> FieldError {
        Self::new(FieldErrorType::Duplicate, field, Some(go_quote(value)), "")
    }

    /// `field.Invalid` with a string value.
    pub fn invalid(field: &str, value: &str, detail: &str) -> FieldError {
        Self::new(
            FieldErrorType::Invalid,
            field,
            Some(go_quote(value)),
            detail,
        )
    }

    /// `field.Invalid` with a value printed as is (numbers, booleans).
    pub fn invalid_raw(field: &str, value: String, detail: &str) -> FieldError {
        Self::new(FieldErrorType::Invalid, field, Some(value), detail)
    }

    /// `field.NotSupported` with a string value and the supported ones.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldError {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = format!("supported values: {}", list.join(", "));
        Self::new(
            FieldErrorType::NotSupported,
            field,
            Some(go_quote(value)),
            &detail,
        )
    }

    /// `ErrorBody()`: type text, then the value (if shown), then the detail.
    pub fn body(&self) -> String {
        let mut s = self.kind.text().to_owned();
        let shows_value = !matches!(
            self.kind,
            FieldErrorType::Required | FieldErrorType::Forbidden | FieldErrorType::TooLong
        );
        if shows_value && let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `Error()`: `<field>: <body>`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// `NewInvalid(GroupKind{group, kind}, name, errs)`: 422 with one cause per error and the
/// deduplicated aggregate message.
pub fn invalid(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> KubeStatus {
    let mut seen = Vec::<String>::new();
    for e in errs {
        let m = e.message();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    let aggregate = match seen.len() {
        0 => String::new(),
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    };
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    let causes: Vec<Value> = errs
        .iter()
        .map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.field}))
        .collect();
    let mut d = details(group, kind, name);
    if let Value::Object(m) = &mut d {
        m.insert("causes".into(), Value::Array(causes));
    }
    KubeStatus::new(
        422,
        "Invalid",
        format!("{qualified} {} is invalid: {aggregate}", go_quote(name)),
    )
    .with_details(d)
}

/// Go's `%q` for a string: double quotes, Go escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_aggregates_like_apimachinery() {
        let errs = [
            FieldError::forbidden(
                "spec.ephemeralContainers[0].ports",
                "cannot be set for an Ephemeral Container",
            ),
            FieldError::forbidden(
                "spec.ephemeralContainers[0].resources",
                "cannot be set for an Ephemeral Container",
            ),
        ];
        let s = invalid("", "Pod", "target", &errs).to_json();
        assert_eq!(
            s["message"],
            "Pod \"target\" is invalid: [spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container, spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container]"
        );
        assert_eq!(s["details"]["causes"][1]["reason"], "FieldValueForbidden");
        assert_eq!(s["code"], 422);
    }

    #[test]
    fn bodies() {
        assert_eq!(FieldError::required("x", "").body(), "Required value");
        assert_eq!(
            FieldError::not_found("x", "nope").body(),
            "Not found: \"nope\""
        );
        assert_eq!(
            FieldError::duplicate("x", "app").message(),
            "x: Duplicate value: \"app\""
        );
    }
}
