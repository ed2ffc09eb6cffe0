//! Checks of a `DebugRequest` received in a create, and of the reason and ticket any create may
//! carry. What depends on the server's flags (which profiles need approval, the longest
//! duration of each) is checked by the server with the same error kinds.

use crate::field::{ErrorList, FieldError};
use crate::profile::Profile;
use crate::request::{
    DebugRequest, MAX_COMMENT_BYTES, MAX_REASON_BYTES, MAX_TICKET_BYTES, RequestMode,
};

/// Why text with control characters is refused: it goes into Events, environment variables,
/// audit records and terminals.
pub const CONTROL_CHARACTERS_DETAIL: &str = "must not contain control characters";

/// Check a free-text field (a reason, ticket or comment): at most `max` bytes and no control
/// characters.
pub fn validate_text(errs: &mut ErrorList, path: &str, value: &str, max: usize) {
    if value.len() > max {
        errs.push(FieldError::too_long(path, max));
    } else if value.chars().any(char::is_control) {
        errs.push(FieldError::invalid(path, value, CONTROL_CHARACTERS_DETAIL));
    }
}

/// The `reason`, `ticket` and `debugRequest` a debug container, copy or node debug container may
/// carry at the top of its body.
pub fn validate_justification_fields(
    reason: Option<&str>,
    ticket: Option<&str>,
    debug_request: Option<&str>,
) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(r) = reason {
        validate_text(&mut errs, "reason", r, MAX_REASON_BYTES);
    }
    if let Some(t) = ticket {
        validate_text(&mut errs, "ticket", t, MAX_TICKET_BYTES);
    }
    if let Some(n) = debug_request.filter(|n| !n.is_empty()) {
        for msg in crate::names::dns1123_subdomain_errors(n) {
            errs.push(FieldError::invalid("debugRequest", n, msg));
        }
    }
    errs
}

/// A review's comment.
pub fn validate_comment(comment: Option<&str>) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(c) = comment {
        validate_text(&mut errs, "comment", c, MAX_COMMENT_BYTES);
    }
    errs
}

/// A label value: at most 63 characters, alphanumerics, `-`, `_` and `.`, beginning and ending
/// with an alphanumeric (or empty).
fn label_value_errors(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    if v.len() > 63 {
        out.push(crate::names::max_len_error(63));
    }
    let ok = v.is_empty()
        || (v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
    if !ok {
        out.push(crate::names::regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    out
}

/// Validate a `DebugRequest` received in a create (the checks that need no flag):
///
/// * `metadata.name` (or `generateName`) is a DNS subdomain, labels are valid;
/// * modes `debug` and `copy` name a `spec.pod` and no node, mode `node` a `spec.node` and no
///   pod (each a DNS subdomain);
/// * `spec.profile` is a profile's name;
/// * `spec.reason` is given, `spec.reason` and `spec.ticket` are short and without control
///   characters;
/// * `spec.duration`, when given, is a positive Go duration;
/// * `spec.container.image`, when given, has no surrounding whitespace.
pub fn validate_debug_request(r: &DebugRequest) -> ErrorList {
    let mut errs = ErrorList::new();
    let name = r.metadata.name.as_deref().filter(|n| !n.is_empty());
    let generate = r
        .metadata
        .generate_name
        .as_deref()
        .filter(|n| !n.is_empty());
    match (name, generate) {
        (Some(n), _) => {
            for msg in crate::names::name_is_dns_subdomain(n, false) {
                errs.push(FieldError::invalid("metadata.name", n, msg));
            }
        }
        (None, Some(g)) => {
            for msg in crate::names::name_is_dns_subdomain(g, true) {
                errs.push(FieldError::invalid("metadata.generateName", g, msg));
            }
        }
        (None, None) => errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
    }
    for (k, v) in r.metadata.labels.iter().flatten() {
        for msg in crate::names::qualified_name_errors(k) {
            errs.push(FieldError::invalid("metadata.labels", k.as_str(), msg));
        }
        for msg in label_value_errors(v) {
            errs.push(FieldError::invalid(
                format!("metadata.labels[{k}]"),
                v.as_str(),
                msg,
            ));
        }
    }
    let spec = &r.spec;
    let (needed, other, other_what) = match spec.mode {
        RequestMode::Debug | RequestMode::Copy => ("pod", spec.node.as_deref(), "node"),
        RequestMode::Node => ("node", spec.pod.as_deref(), "pod"),
    };
    let target = if needed == "pod" {
        spec.pod.as_deref()
    } else {
        spec.node.as_deref()
    };
    match target.filter(|t| !t.is_empty()) {
        None => errs.push(FieldError::required(
            format!("spec.{needed}"),
            format!(
                "a request of mode {} names the {needed} it is for",
                spec.mode.as_str()
            ),
        )),
        Some(t) => {
            for msg in crate::names::dns1123_subdomain_errors(t) {
                errs.push(FieldError::invalid(format!("spec.{needed}"), t, msg));
            }
        }
    }
    if other.is_some_and(|o| !o.is_empty()) {
        errs.push(FieldError::forbidden(
            format!("spec.{other_what}"),
            format!("a request of mode {} names a {needed}", spec.mode.as_str()),
        ));
    }
    if spec.profile.is_empty() {
        errs.push(FieldError::required("spec.profile", ""));
    } else if Profile::parse(&spec.profile).is_none() {
        errs.push(FieldError::not_supported(
            "spec.profile",
            spec.profile.as_str(),
            &Profile::names(),
        ));
    }
    if spec.reason.trim().is_empty() {
        errs.push(FieldError::required(
            "spec.reason",
            "say why the access is needed",
        ));
    } else {
        validate_text(&mut errs, "spec.reason", &spec.reason, MAX_REASON_BYTES);
    }
    if let Some(t) = &spec.ticket {
        validate_text(&mut errs, "spec.ticket", t, MAX_TICKET_BYTES);
    }
    if let Some(d) = &spec.duration {
        match crate::duration::parse(d) {
            Ok(v) if v.as_secs() >= 1 => {}
            Ok(_) => errs.push(FieldError::invalid(
                "spec.duration",
                d.as_str(),
                "must be at least 1s",
            )),
            Err(_) => errs.push(FieldError::invalid(
                "spec.duration",
                d.as_str(),
                "must be a duration such as 30m or 1h30m",
            )),
        }
    }
    if let Some(t) = spec.target_container_name.as_deref() {
        if spec.container.is_none() || spec.mode != RequestMode::Debug {
            errs.push(FieldError::forbidden(
                "spec.targetContainerName",
                "binds a debug container's target: only with spec.container, in mode debug",
            ));
        }
        for msg in crate::names::dns1123_label_errors(t) {
            errs.push(FieldError::invalid("spec.targetContainerName", t, msg));
        }
    }
    if let Some(env) = spec.container.as_ref().and_then(|c| c.env.as_ref()) {
        for (i, e) in env.iter().enumerate() {
            if crate::convert::is_reserved_env(&e.name) {
                errs.push(FieldError::forbidden(
                    format!("spec.container.env[{i}].name"),
                    format!("{} is set by the server", e.name),
                ));
            }
        }
    }
    if let Some(image) = spec.container.as_ref().and_then(|c| c.image.as_deref())
        && image.trim() != image
    {
        errs.push(FieldError::invalid(
            "spec.container.image",
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{DebugRequestSpec, RequestedContainer};

    fn req(spec: DebugRequestSpec) -> DebugRequest {
        let mut r = DebugRequest {
            spec,
            ..Default::default()
        };
        r.metadata.name = Some("web-sysadmin".into());
        r
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn a_complete_request_is_valid() {
        let r = req(DebugRequestSpec {
            pod: Some("web".into()),
            profile: "sysadmin".into(),
            reason: "INC-7: the disk is full".into(),
            ticket: Some("INC-7".into()),
            duration: Some("30m".into()),
            container: Some(RequestedContainer {
                image: Some("busybox:1.36".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(
            validate_debug_request(&r).is_empty(),
            "{:?}",
            messages(&validate_debug_request(&r))
        );
    }

    #[test]
    fn every_problem_is_named_by_its_field() {
        let mut r = req(DebugRequestSpec {
            mode: RequestMode::Node,
            pod: Some("web".into()),
            profile: "root".into(),
            reason: "  ".into(),
            ticket: Some("a\nb".into()),
            duration: Some("soon".into()),
            container: Some(RequestedContainer {
                image: Some(" busybox".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        r.metadata.name = None;
        assert_eq!(
            messages(&validate_debug_request(&r)),
            [
                "metadata.name: Required value: name or generateName is required",
                "spec.node: Required value: a request of mode node names the node it is for",
                "spec.pod: Forbidden: a request of mode node names a node",
                "spec.profile: Unsupported value: \"root\": supported values: \"legacy\", \"general\", \"baseline\", \"restricted\", \"netadmin\", \"sysadmin\"",
                "spec.reason: Required value: say why the access is needed",
                "spec.ticket: Invalid value: \"a\\nb\": must not contain control characters",
                "spec.duration: Invalid value: \"soon\": must be a duration such as 30m or 1h30m",
                "spec.container.image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
            ]
        );
    }

    #[test]
    fn reasons_are_bounded_text() {
        let errs = validate_justification_fields(
            Some(&"x".repeat(MAX_REASON_BYTES + 1)),
            Some("T-1"),
            Some("Bad_Name"),
        );
        assert_eq!(errs.len(), 2, "{:?}", messages(&errs));
        assert_eq!(errs.iter().next().map(|e| e.field.as_str()), Some("reason"));
        assert!(validate_justification_fields(Some("ok"), None, Some("r-1")).is_empty());
        assert_eq!(validate_comment(Some("\u{1b}[2J")).len(), 1);
    }
}
