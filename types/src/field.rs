//! Field errors, as apimachinery's `field.Error` / `field.ErrorList` word them.
//!
//! kubectl and users match on these texts, so the formatting follows
//! `k8s.io/apimachinery/pkg/util/validation/field/errors.go` exactly: `ErrorBody` is the type
//! string, then the bad value (strings quoted, numbers and booleans plain) unless the type omits
//! it, then `: detail`.

use std::fmt;

/// The kind of a field error (apimachinery `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// A referenced object or value does not exist.
    NotFound,
    /// A required value is missing.
    Required,
    /// A value must be unique and is not.
    Duplicate,
    /// A value is malformed.
    Invalid,
    /// A value is not one of the supported ones.
    NotSupported,
    /// A value may not be set or changed.
    Forbidden,
    /// A value is too long.
    TooLong,
    /// A list has too many items.
    TooMany,
    /// An internal error while validating.
    Internal,
    /// A value has the wrong type.
    TypeInvalid,
}

impl FieldErrorKind {
    /// The cause `reason` in a Status (`metav1.CauseType`).
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "FieldValueNotFound",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Internal => "InternalError",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human text of the type (`ErrorType.String()`).
    pub fn text(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "Not found",
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Internal => "Internal error",
            FieldErrorKind::TypeInvalid => "Invalid value",
        }
    }

    /// Types whose body never shows the bad value.
    fn omits_value(self) -> bool {
        matches!(
            self,
            FieldErrorKind::Required
                | FieldErrorKind::Forbidden
                | FieldErrorKind::TooLong
                | FieldErrorKind::Internal
        )
    }
}

/// The bad value of a field error, formatted as Go's `%q` / `%v` would print it.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue {
    /// No value is shown.
    Omit,
    /// A string, printed quoted.
    Str(String),
    /// An integer, printed plain.
    Int(i64),
    /// A boolean, printed plain.
    Bool(bool),
    /// Already formatted text, printed as is.
    Raw(String),
}

impl FieldValue {
    /// A value Go prints through `json.Marshal`: a named string type or a `*string`.
    pub fn json_str(s: &str) -> Self {
        FieldValue::Raw(go_json_quote(s))
    }
}

impl From<&str> for FieldValue {
    fn from(s: &str) -> Self {
        FieldValue::Str(s.to_owned())
    }
}

impl From<String> for FieldValue {
    fn from(s: String) -> Self {
        FieldValue::Str(s)
    }
}

impl From<i64> for FieldValue {
    fn from(v: i64) -> Self {
        FieldValue::Int(v)
    }
}

impl From<bool> for FieldValue {
    fn from(v: bool) -> Self {
        FieldValue::Bool(v)
    }
}

/// Quote a string the way Go's `%q` does for the characters that occur in Kubernetes values.
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
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Quote a string the way Go's `encoding/json` marshals it.
///
/// apimachinery renders a bad value that is not a plain Go `string` (a named string type such as
/// `PullPolicy`, or a `*string`) with `json.Marshal`, not `%q`. The two differ for a few
/// characters: JSON escapes `<`, `>` and `&` as `\u003c`-style sequences and control characters
/// as `\u00XX`.
pub fn go_json_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One field error (apimachinery `field.Error`).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The error type.
    pub kind: FieldErrorKind,
    /// The field path, e.g. `spec.ephemeralContainers[0].ports`.
    pub field: String,
    /// The bad value.
    pub value: FieldValue,
    /// Extra detail; may be empty.
    pub detail: String,
}

impl FieldError {
    /// A new error.
    pub fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: FieldValue,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    /// `field.Required(path, detail)`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, FieldValue::Omit, detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, field, FieldValue::Omit, detail)
    }

    /// `field.NotFound(path, value)`.
    pub fn not_found(field: impl Into<String>, value: impl Into<FieldValue>) -> Self {
        Self::new(FieldErrorKind::NotFound, field, value.into(), "")
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(field: impl Into<String>, value: impl Into<FieldValue>) -> Self {
        Self::new(FieldErrorKind::Duplicate, field, value.into(), "")
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<FieldValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(FieldErrorKind::Invalid, field, value.into(), detail)
    }

    /// `field.NotSupported(path, value, valid)`: the detail lists the supported values quoted.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<FieldValue>,
        valid: &[&str],
    ) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(FieldErrorKind::NotSupported, field, value.into(), detail)
    }

    /// `field.TooLong(path, value, max)`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(
            FieldErrorKind::TooLong,
            field,
            FieldValue::Omit,
            format!("may not be more than {max} bytes"),
        )
    }

    /// The message without the field path (`ErrorBody`): what a Status cause carries.
    pub fn body(&self) -> String {
        let mut s = String::from(self.kind.text());
        if !self.kind.omits_value() {
            match &self.value {
                FieldValue::Omit => {}
                FieldValue::Str(v) => {
                    s.push_str(": ");
                    s.push_str(&go_quote(v));
                }
                FieldValue::Int(v) => s.push_str(&format!(": {v}")),
                FieldValue::Bool(v) => s.push_str(&format!(": {v}")),
                FieldValue::Raw(v) => {
                    s.push_str(": ");
                    s.push_str(v);
                }
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The same error with its path prefixed, e.g. `spec.ephemeralContainers[0]` + `.name`.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        if self.field.is_empty() {
            self.field = prefix.to_owned();
        } else if !prefix.is_empty() {
            self.field = if self.field.starts_with('[') {
                format!("{prefix}{}", self.field)
            } else {
                format!("{prefix}.{}", self.field)
            };
        }
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// A list of field errors (apimachinery `field.ErrorList`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorList(pub Vec<FieldError>);

impl ErrorList {
    /// An empty list.
    pub fn new() -> Self {
        ErrorList(Vec::new())
    }

    /// Add one error.
    pub fn push(&mut self, e: FieldError) {
        self.0.push(e);
    }

    /// Add all errors of another list.
    pub fn extend(&mut self, other: ErrorList) {
        self.0.extend(other.0);
    }

    /// True when there is no error.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of errors.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The errors.
    pub fn iter(&self) -> impl Iterator<Item = &FieldError> {
        self.0.iter()
    }

    /// The aggregate message (`ErrorList.ToAggregate().Error()`): duplicates removed, one
    /// error as is, several as `[a, b, c]`. `None` when empty.
    pub fn aggregate(&self) -> Option<String> {
        let mut seen = std::collections::HashSet::new();
        let msgs: Vec<String> = self
            .0
            .iter()
            .map(|e| e.to_string())
            .filter(|m| seen.insert(m.clone()))
            .collect();
        match msgs.len() {
            0 => None,
            1 => msgs.into_iter().next(),
            _ => Some(format!("[{}]", msgs.join(", "))),
        }
    }
}

impl FromIterator<FieldError> for ErrorList {
    fn from_iter<T: IntoIterator<Item = FieldError>>(iter: T) -> Self {
        ErrorList(iter.into_iter().collect())
    }
}

impl IntoIterator for ErrorList {
    type Item = FieldError;
    type IntoIter = std::vec::IntoIter<FieldError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_follow_apimachinery() {
        assert_eq!(
            FieldError::forbidden("a", "cannot be set for an Ephemeral Container").to_string(),
            "a: Forbidden: cannot be set for an Ephemeral Container"
        );
        assert_eq!(FieldError::required("x.image", "").body(), "Required value");
        assert_eq!(
            FieldError::not_found("t", "nope").body(),
            "Not found: \"nope\""
        );
        assert_eq!(
            FieldError::duplicate("n", "app").body(),
            "Duplicate value: \"app\""
        );
        assert_eq!(
            FieldError::not_supported("p", "Sometimes", &["Always", "Never"]).body(),
            "Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\""
        );
        assert_eq!(
            FieldError::invalid("n", 5i64, "must be positive").body(),
            "Invalid value: 5: must be positive"
        );
    }

    #[test]
    fn aggregate_dedups_and_brackets() {
        let one: ErrorList = [FieldError::required("a", "")].into_iter().collect();
        assert_eq!(one.aggregate().as_deref(), Some("a: Required value"));
        let two: ErrorList = [
            FieldError::required("a", ""),
            FieldError::required("a", ""),
            FieldError::forbidden("b", "no"),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            two.aggregate().as_deref(),
            Some("[a: Required value, b: Forbidden: no]")
        );
        assert_eq!(ErrorList::new().aggregate(), None);
    }

    #[test]
    fn prefixes_join_paths() {
        let e = FieldError::required("image", "").with_prefix("spec.ephemeralContainers[0]");
        assert_eq!(e.field, "spec.ephemeralContainers[0].image");
        let e = FieldError::required("[2]", "").with_prefix("env");
        assert_eq!(e.field, "env[2]");
    }
}
