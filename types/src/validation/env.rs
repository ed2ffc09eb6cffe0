//! `ValidateEnv` and `ValidateEnvFrom` (k/k `pkg/apis/core/validation/validation.go`).
//!
//! Env var names and prefixes follow `RelaxedEnvironmentVariableValidation`, GA (and locked on)
//! since 1.34; `fileKeyRef` follows `EnvFiles`, on by default in kube-apiserver 1.36.

use k8s_openapi::api::core::v1::{
    ConfigMapKeySelector, EnvFromSource, EnvVar, FileKeySelector, ObjectFieldSelector,
    ResourceFieldSelector, SecretKeySelector,
};

use super::{child, index, validate_path_no_backsteps};
use crate::field::{ErrorList, FieldError};
use crate::names::{
    config_map_key_errors, dns1123_label_errors, name_is_dns_subdomain, qualified_name_errors,
    relaxed_env_var_name_errors,
};

/// Downward-API fields an env var may read (`validEnvDownwardAPIFieldPathExpressions`), sorted
/// as Go's `sets.List` returns them.
const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Container resources an env var may read (`validContainerResourceFieldPathExpressions`),
/// sorted.
const RESOURCE_FIELD_PATHS: [&str; 6] = [
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

const HUGEPAGES_PREFIXES: [&str; 2] = ["limits.hugepages-", "requests.hugepages-"];

/// Labels `ConvertDownwardAPIFieldLabel` knows for pods (`spec.host` is the legacy spelling of
/// `spec.nodeName`).
const POD_FIELD_LABELS: [&str; 14] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['key']` → (`metadata.labels`, `key`).
fn split_maybe_subscripted(path: &str) -> Option<(&str, &str)> {
    let s = path.strip_suffix("']")?;
    let (head, subscript) = s.split_once("['")?;
    if head.is_empty() {
        None
    } else {
        Some((head, subscript))
    }
}

/// `podshelper.ConvertDownwardAPIFieldLabel` for a field reference.
fn convert_downward_api_field_label(version: &str, label: &str) -> Result<String, String> {
    if version != "v1" {
        return Err(format!("unsupported pod version: {version}"));
    }
    if let Some((path, _)) = split_maybe_subscripted(label) {
        return match path {
            "metadata.annotations" | "metadata.labels" => Ok(label.to_owned()),
            _ => Err(format!("field label does not support subscript: {label}")),
        };
    }
    if label == "spec.host" {
        return Ok("spec.nodeName".to_owned());
    }
    if POD_FIELD_LABELS.contains(&label) {
        Ok(label.to_owned())
    } else {
        Err(format!("field label not supported: {label}"))
    }
}

/// `ValidateEnv`.
pub(super) fn validate_env(vars: Option<&Vec<EnvVar>>, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, ev) in vars.into_iter().flatten().enumerate() {
        let idx = index(path, i);
        if ev.name.is_empty() {
            errs.push(FieldError::required(child(&idx, "name"), ""));
        } else {
            for msg in relaxed_env_var_name_errors(&ev.name) {
                errs.push(FieldError::invalid(
                    child(&idx, "name"),
                    ev.name.as_str(),
                    msg,
                ));
            }
        }
        errs.extend(validate_env_var_value_from(ev, &child(&idx, "valueFrom")));
    }
    errs
}

/// `validateEnvVarValueFrom`. Note that the "one source" errors are reported on `valueFrom`
/// itself with the value `""`, as in Go.
fn validate_env_var_value_from(ev: &EnvVar, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(from) = ev.value_from.as_ref() else {
        return errs;
    };
    let mut sources = 0;
    if let Some(fr) = from.field_ref.as_ref() {
        sources += 1;
        errs.extend(validate_object_field_selector(fr, &child(path, "fieldRef")));
    }
    if let Some(rfr) = from.resource_field_ref.as_ref() {
        sources += 1;
        errs.extend(validate_resource_field_selector(
            rfr,
            &child(path, "resourceFieldRef"),
        ));
    }
    if let Some(cm) = from.config_map_key_ref.as_ref() {
        sources += 1;
        errs.extend(validate_config_map_key_selector(
            cm,
            &child(path, "configMapKeyRef"),
        ));
    }
    if let Some(s) = from.secret_key_ref.as_ref() {
        sources += 1;
        errs.extend(validate_secret_key_selector(
            s,
            &child(path, "secretKeyRef"),
        ));
    }
    if let Some(f) = from.file_key_ref.as_ref() {
        sources += 1;
        errs.extend(validate_file_key_selector(f, &child(path, "fileKeyRef")));
    }
    if sources == 0 {
        errs.push(FieldError::invalid(
            path,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`",
        ));
    } else if ev.value.as_deref().is_some_and(|v| !v.is_empty()) {
        errs.push(FieldError::invalid(
            path,
            "",
            "may not be specified when `value` is not empty",
        ));
    } else if sources > 1 {
        errs.push(FieldError::invalid(
            path,
            "",
            "may not have more than one field specified at a time",
        ));
    }
    errs
}

/// `validateObjectFieldSelector` with the env var expressions.
fn validate_object_field_selector(fs: &ObjectFieldSelector, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let api_version = fs.api_version.as_deref().unwrap_or("");
    if api_version.is_empty() {
        errs.push(FieldError::required(child(path, "apiVersion"), ""));
        return errs;
    }
    if fs.field_path.is_empty() {
        errs.push(FieldError::required(child(path, "fieldPath"), ""));
        return errs;
    }
    let internal = match convert_downward_api_field_label(api_version, &fs.field_path) {
        Ok(p) => p,
        Err(e) => {
            errs.push(FieldError::invalid(
                child(path, "fieldPath"),
                fs.field_path.as_str(),
                format!("error converting fieldPath: {e}"),
            ));
            return errs;
        }
    };
    if let Some((p, subscript)) = split_maybe_subscripted(&internal) {
        match p {
            "metadata.annotations" => {
                let key = subscript.to_lowercase();
                for msg in qualified_name_errors(&key) {
                    errs.push(FieldError::invalid(path, key.as_str(), msg));
                }
            }
            "metadata.labels" => {
                for msg in qualified_name_errors(subscript) {
                    errs.push(FieldError::invalid(path, subscript, msg));
                }
            }
            _ => errs.push(FieldError::invalid(path, p, "does not support subscript")),
        }
    } else if !ENV_FIELD_PATHS.contains(&internal.as_str()) {
        errs.push(FieldError::not_supported(
            child(path, "fieldPath"),
            internal.as_str(),
            &ENV_FIELD_PATHS,
        ));
    }
    errs
}

/// Whether a quantity is zero, which Go treats as "no divisor".
fn is_zero_quantity(q: &str) -> bool {
    let digits: String = q
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '+' || *c == '-')
        .collect();
    !digits.is_empty() && digits.chars().all(|c| matches!(c, '0' | '.' | '+' | '-'))
}

/// `validateContainerResourceFieldSelector` (for env vars, so `containerName` is optional) and
/// `validateContainerResourceDivisor`. The divisor is compared as written: Go compares its
/// canonical form, so `1000m` passes there and fails here.
fn validate_resource_field_selector(fs: &ResourceFieldSelector, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let r = fs.resource.as_str();
    if r.is_empty() {
        errs.push(FieldError::required(child(path, "resource"), ""));
    } else if !RESOURCE_FIELD_PATHS.contains(&r)
        && !HUGEPAGES_PREFIXES.iter().any(|p| r.starts_with(p))
    {
        errs.push(FieldError::not_supported(
            child(path, "resource"),
            r,
            &RESOURCE_FIELD_PATHS,
        ));
    }
    let Some(divisor) = fs.divisor.as_ref().map(|q| q.0.as_str()) else {
        return errs;
    };
    if is_zero_quantity(divisor) {
        return errs;
    }
    const BINARY_AND_DECIMAL: [&str; 13] = [
        "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei",
    ];
    const UNITS: &str = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei";
    let divisor_path = child(path, "divisor");
    match r {
        "limits.cpu" | "requests.cpu" if !["1m", "1"].contains(&divisor) => {
            errs.push(FieldError::invalid(
                &divisor_path,
                r,
                "only divisor's values 1m and 1 are supported with the cpu resource",
            ));
        }
        "limits.memory" | "requests.memory" if !BINARY_AND_DECIMAL.contains(&divisor) => {
            errs.push(FieldError::invalid(
                &divisor_path,
                r,
                format!("only divisor's values {UNITS} are supported with the memory resource"),
            ));
        }
        "limits.ephemeral-storage" | "requests.ephemeral-storage"
            if !BINARY_AND_DECIMAL.contains(&divisor) =>
        {
            errs.push(FieldError::invalid(
                &divisor_path,
                r,
                format!("only divisor's values {UNITS} are supported with the local ephemeral storage resource"),
            ));
        }
        _ => {}
    }
    if HUGEPAGES_PREFIXES.iter().any(|p| r.starts_with(p)) && !BINARY_AND_DECIMAL.contains(&divisor)
    {
        errs.push(FieldError::invalid(
            &divisor_path,
            r,
            format!("only divisor's values {UNITS} are supported with the hugepages resource"),
        ));
    }
    errs
}

/// `validateConfigMapKeySelector` / `validateSecretKeySelector`: the name is checked even when
/// empty (Go calls the name validator unconditionally).
fn validate_key_selector(name: &str, key: &str, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    for msg in name_is_dns_subdomain(name, false) {
        errs.push(FieldError::invalid(child(path, "name"), name, msg));
    }
    if key.is_empty() {
        errs.push(FieldError::required(child(path, "key"), ""));
    } else {
        for msg in config_map_key_errors(key) {
            errs.push(FieldError::invalid(child(path, "key"), key, msg));
        }
    }
    errs
}

fn validate_config_map_key_selector(s: &ConfigMapKeySelector, path: &str) -> ErrorList {
    validate_key_selector(&s.name, &s.key, path)
}

fn validate_secret_key_selector(s: &SecretKeySelector, path: &str) -> ErrorList {
    validate_key_selector(&s.name, &s.key, path)
}

/// `validateFileKeySelector`.
fn validate_file_key_selector(s: &FileKeySelector, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    if s.key.is_empty() {
        errs.push(FieldError::required(child(path, "key"), ""));
    } else {
        for msg in relaxed_env_var_name_errors(&s.key) {
            errs.push(FieldError::invalid(child(path, "key"), s.key.as_str(), msg));
        }
    }
    if s.volume_name.is_empty() {
        errs.push(FieldError::required(child(path, "volumeName"), ""));
    } else {
        for msg in dns1123_label_errors(&s.volume_name) {
            errs.push(FieldError::invalid(
                child(path, "volumeName"),
                s.volume_name.as_str(),
                msg,
            ));
        }
    }
    if s.path.is_empty() {
        errs.push(FieldError::required(child(path, "path"), ""));
    } else {
        errs.extend(validate_path_no_backsteps(&s.path, &child(path, "path")));
    }
    errs
}

/// `ValidateEnvFrom`. The "one source" errors name the `envFrom` list, not the entry: a Go
/// quirk kept for fidelity.
pub(super) fn validate_env_from(vars: Option<&Vec<EnvFromSource>>, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, ev) in vars.into_iter().flatten().enumerate() {
        let idx = index(path, i);
        if let Some(prefix) = ev.prefix.as_deref().filter(|p| !p.is_empty()) {
            for msg in relaxed_env_var_name_errors(prefix) {
                errs.push(FieldError::invalid(child(&idx, "prefix"), prefix, msg));
            }
        }
        let mut sources = 0;
        let refs = [
            (
                ev.config_map_ref.as_ref().map(|r| r.name.as_str()),
                "configMapRef",
            ),
            (ev.secret_ref.as_ref().map(|r| r.name.as_str()), "secretRef"),
        ];
        for (name, field) in refs {
            let Some(name) = name else { continue };
            sources += 1;
            let name_path = child(&child(&idx, field), "name");
            if name.is_empty() {
                errs.push(FieldError::required(name_path, ""));
            } else {
                for msg in name_is_dns_subdomain(name, true) {
                    errs.push(FieldError::invalid(&name_path, name, msg));
                }
            }
        }
        if sources == 0 {
            errs.push(FieldError::invalid(
                path,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                path,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscripted_paths() {
        assert_eq!(
            split_maybe_subscripted("metadata.labels['a']"),
            Some(("metadata.labels", "a"))
        );
        assert_eq!(
            split_maybe_subscripted("metadata.annotations['a[b]c']"),
            Some(("metadata.annotations", "a[b]c"))
        );
        assert_eq!(
            split_maybe_subscripted("metadata.labels['']"),
            Some(("metadata.labels", ""))
        );
        assert_eq!(split_maybe_subscripted("metadata.labels"), None);
        assert_eq!(split_maybe_subscripted("['x']"), None);
    }

    #[test]
    fn downward_api_labels() {
        assert_eq!(
            convert_downward_api_field_label("v1", "spec.host"),
            Ok("spec.nodeName".into())
        );
        assert_eq!(
            convert_downward_api_field_label("v2", "metadata.name"),
            Err("unsupported pod version: v2".into())
        );
        assert_eq!(
            convert_downward_api_field_label("v1", "spec.containers['x']"),
            Err("field label does not support subscript: spec.containers['x']".into())
        );
        assert_eq!(
            convert_downward_api_field_label("v1", "spec.foo"),
            Err("field label not supported: spec.foo".into())
        );
        assert_eq!(
            convert_downward_api_field_label("v1", "status.phase"),
            Ok("status.phase".into())
        );
    }

    #[test]
    fn zero_quantities() {
        for q in ["0", "0m", "0.0", "0Ki"] {
            assert!(is_zero_quantity(q), "{q}");
        }
        for q in ["1", "1m", "0.5", "Ki", ""] {
            assert!(!is_zero_quantity(q), "{q}");
        }
    }
}
