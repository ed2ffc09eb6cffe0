//! The fake's own reimplementation of kube-apiserver's ephemeral-container rules
//! (`SetDefaults_Container`, `validateEphemeralContainers`, `ValidatePodEphemeralContainersUpdate`
//! of k/k `pkg/apis/core`), and of the parts of `ValidatePodCreate` a new pod meets (its name, its
//! containers), on JSON values, with the exact field paths and texts.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::godump;
use super::status::FieldError;

/// Annotation of a mirror (static) pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

const FORBIDDEN_TEXT: &str = "cannot be set for an Ephemeral Container";

const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The tag `parsers.ParseImageName` finds (`latest` when there is neither tag nor digest).
fn image_tag(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last_slash = name.rfind('/').map(|i| i + 1).unwrap_or(0);
    match name[last_slash..].rsplit_once(':') {
        Some((_, tag)) => tag.to_owned(),
        None if digest => String::new(),
        None => "latest".to_owned(),
    }
}

/// `SetDefaults_Container`: imagePullPolicy, terminationMessagePath, terminationMessagePolicy.
pub fn apply_defaults(c: &mut Value) {
    let Some(m) = c.as_object_mut() else { return };
    let empty = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_str() == Some(""));
    if empty(m.get("imagePullPolicy")) {
        let tag = image_tag(m.get("image").and_then(Value::as_str).unwrap_or(""));
        let policy = if tag == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        m.insert("imagePullPolicy".into(), json!(policy));
    }
    if empty(m.get("terminationMessagePath")) {
        m.insert(
            "terminationMessagePath".into(),
            json!("/dev/termination-log"),
        );
    }
    if empty(m.get("terminationMessagePolicy")) {
        m.insert("terminationMessagePolicy".into(), json!("File"));
    }
}

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// `ValidateDNS1123Label`: one Invalid per message.
fn validate_dns1123_label(value: &str, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(FieldError::invalid(
            field,
            value,
            "must be no more than 63 characters",
        ));
    }
    if !is_label(value) {
        let subdomain = value.split('.').all(is_label) && value.len() <= 253;
        let msg = if subdomain {
            "must not contain dots"
        } else {
            DNS1123_LABEL_ERR
        };
        errs.push(FieldError::invalid(field, value, msg));
    }
    errs
}

/// `ValidateObjectMeta`'s name check for a kind named by a DNS subdomain (`IsDNS1123Subdomain`).
fn validate_dns1123_subdomain(value: &str, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(FieldError::invalid(
            field,
            value,
            "must be no more than 253 characters",
        ));
    }
    if !value.split('.').all(is_label) {
        errs.push(FieldError::invalid(field, value, DNS1123_SUBDOMAIN_ERR));
    }
    errs
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

fn set(v: &Value, key: &str) -> bool {
    !v[key].is_null()
}

/// `validateContainerCommon` (the parts that can fail for an ephemeral container).
fn validate_container_common(
    c: &Value,
    path: &str,
    volumes: &BTreeSet<String>,
    claim_names: &BTreeSet<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_of(c, "name");
    if name.is_empty() {
        errs.push(FieldError::required(&format!("{path}.name"), ""));
    } else {
        errs.extend(validate_dns1123_label(name, &format!("{path}.name")));
    }
    if str_of(c, "image").is_empty() {
        errs.push(FieldError::required(&format!("{path}.image"), ""));
    }
    match str_of(c, "terminationMessagePolicy") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(
            &format!("{path}.terminationMessagePolicy"),
            "",
        )),
        other => errs.push(FieldError::not_supported(
            &format!("{path}.terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    for (i, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
        let f = format!("{path}.ports[{i}].containerPort");
        match p["containerPort"].as_i64().unwrap_or(0) {
            0 => errs.push(FieldError::required(&f, "")),
            n if !(1..=65535).contains(&n) => errs.push(FieldError::invalid_raw(
                &f,
                n.to_string(),
                "must be between 1 and 65535, inclusive",
            )),
            _ => {}
        }
    }
    for (i, e) in c["env"].as_array().into_iter().flatten().enumerate() {
        if str_of(e, "name").is_empty() {
            errs.push(FieldError::required(&format!("{path}.env[{i}].name"), ""));
        }
    }
    let mut mount_paths = BTreeSet::new();
    for (i, m) in c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("{path}.volumeMounts[{i}]");
        let vol = str_of(m, "name");
        if vol.is_empty() {
            errs.push(FieldError::required(&format!("{p}.name"), ""));
        }
        if !volumes.contains(vol) {
            errs.push(FieldError::not_found(&format!("{p}.name"), vol));
        }
        let mount_path = str_of(m, "mountPath");
        if mount_path.is_empty() {
            errs.push(FieldError::required(&format!("{p}.mountPath"), ""));
        }
        if !mount_paths.insert(mount_path.to_owned()) {
            errs.push(FieldError::invalid(
                &format!("{p}.mountPath"),
                mount_path,
                "must be unique",
            ));
        }
    }
    for (i, d) in c["volumeDevices"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("{path}.volumeDevices[{i}]");
        let vol = str_of(d, "name");
        if vol.is_empty() {
            errs.push(FieldError::required(&format!("{p}.name"), ""));
        } else if !volumes.contains(vol) {
            errs.push(FieldError::not_found(&format!("{p}.name"), vol));
        }
        if str_of(d, "devicePath").is_empty() {
            errs.push(FieldError::required(&format!("{p}.devicePath"), ""));
        }
    }
    match str_of(c, "imagePullPolicy") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(&format!("{path}.imagePullPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &format!("{path}.imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    errs.extend(validate_resources(
        &c["resources"],
        &format!("{path}.resources"),
        claim_names,
    ));
    errs
}

/// A quantity as a number, for comparisons (`100m`, `1`, `10Mi`, `1G`); `None` if malformed.
fn quantity(q: &Value) -> Option<f64> {
    let s = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(n * scale)
}

/// The parts of `ValidateContainerResourceRequirements` a debug container can trip: a request
/// above its limit (reported on `requests`, valued with the request) and claims that name no
/// entry of `spec.resourceClaims`. kube-apiserver validates the block even though an ephemeral
/// container may not set it, so these causes come with the Forbidden one.
fn validate_resources(r: &Value, path: &str, claim_names: &BTreeSet<String>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (name, req) in r["requests"].as_object().into_iter().flatten() {
        let limit = &r["limits"][name.as_str()];
        if let (Some(rq), Some(lq)) = (quantity(req), quantity(limit))
            && rq > lq
        {
            errs.push(FieldError::invalid(
                &format!("{path}.requests"),
                req.as_str().unwrap_or_default(),
                &format!(
                    "must be less than or equal to {name} limit of {}",
                    limit.as_str().unwrap_or_default()
                ),
            ));
        }
    }
    for (i, claim) in r["claims"].as_array().into_iter().flatten().enumerate() {
        let name = str_of(claim, "name");
        let f = format!("{path}.claims[{i}]");
        if name.is_empty() {
            errs.push(FieldError::required(&f, ""));
        } else if !claim_names.contains(name) {
            let mut e = FieldError::not_found(&f, name);
            e.detail = if claim_names.is_empty() {
                "must be one of the names in pod.spec.resourceClaims which is empty".to_owned()
            } else {
                let names: Vec<&str> = claim_names.iter().map(String::as_str).collect();
                format!(
                    "must be one of the names in pod.spec.resourceClaims: {}",
                    names.join(", ")
                )
            };
            errs.push(e);
        }
    }
    errs
}

/// `dropDisabledFields` for a new ephemeral container, with the gates of kube-apiserver 1.36 at
/// their defaults: `ContainerStopSignals` is off, so `lifecycle.stopSignal` is dropped, and a
/// lifecycle it leaves empty is dropped too.
pub fn drop_disabled_fields(c: &mut Value) {
    let Some(lc) = c.get_mut("lifecycle").and_then(Value::as_object_mut) else {
        return;
    };
    if lc.remove("stopSignal").is_some()
        && lc.values().all(Value::is_null)
        && let Some(m) = c.as_object_mut()
    {
        m.remove("lifecycle");
    }
}

/// Whether a field of `EphemeralContainerCommon` differs from its Go zero value.
fn non_zero(c: &Value, key: &str) -> bool {
    match key {
        // A value struct: set when any of its maps/lists is non-nil.
        "resources" => ["limits", "requests", "claims"]
            .iter()
            .any(|k| set(&c["resources"], k)),
        _ => set(c, key),
    }
}

/// The fields of `EphemeralContainerCommon` that are not allowed, in Go struct order.
const NOT_ALLOWED: [&str; 9] = [
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "restartPolicyRules",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];

/// `validateEphemeralContainers` for the list `ecs` in the pod spec `spec`.
pub fn validate_ephemeral_containers(spec: &Value, ecs: &[Value]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let volumes: BTreeSet<String> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| str_of(v, "name").to_owned())
        .collect();
    let claim_names: BTreeSet<String> = spec["resourceClaims"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| str_of(v, "name").to_owned())
        .collect();
    let mut other_names = BTreeSet::new();
    for list in ["containers", "initContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            other_names.insert(str_of(c, "name").to_owned());
        }
    }
    let mut all_names = other_names.clone();
    for (i, ec) in ecs.iter().enumerate() {
        let path = format!("spec.ephemeralContainers[{i}]");
        errs.extend(validate_container_common(ec, &path, &volumes, &claim_names));
        let image = str_of(ec, "image");
        if image.trim() != image {
            errs.push(FieldError::invalid(
                &format!("{path}.image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
        let name = str_of(ec, "name");
        if !all_names.insert(name.to_owned()) {
            errs.push(FieldError::duplicate(&format!("{path}.name"), name));
        }
        let target = str_of(ec, "targetContainerName");
        if !target.is_empty() && !other_names.contains(target) {
            errs.push(FieldError::not_found(
                &format!("{path}.targetContainerName"),
                target,
            ));
        }
        for key in NOT_ALLOWED {
            if non_zero(ec, key) {
                errs.push(FieldError::forbidden(
                    &format!("{path}.{key}"),
                    FORBIDDEN_TEXT,
                ));
            }
        }
        for (j, m) in ec["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            for key in ["subPath", "subPathExpr"] {
                if !str_of(m, key).is_empty() {
                    errs.push(FieldError::forbidden(
                        &format!("{path}.volumeMounts[{j}].{key}"),
                        FORBIDDEN_TEXT,
                    ));
                }
            }
        }
    }
    errs
}

fn names_of(spec: &Value, list: &str) -> BTreeSet<String> {
    spec[list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| str_of(v, "name").to_owned())
        .collect()
}

/// The parts of `ValidatePodCreate` the fake checks on a new pod (named, defaulted): its name,
/// that it has containers, and each container's common fields and unique name.
pub fn validate_new_pod(pod: &Value) -> Vec<FieldError> {
    let mut errs = validate_dns1123_subdomain(str_of(&pod["metadata"], "name"), "metadata.name");
    let spec = &pod["spec"];
    let volumes = names_of(spec, "volumes");
    let claim_names = names_of(spec, "resourceClaims");
    if spec["containers"].as_array().is_none_or(Vec::is_empty) {
        errs.push(FieldError::required("spec.containers", ""));
    }
    let mut seen = BTreeSet::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let path = format!("spec.{list}[{i}]");
            errs.extend(validate_container_common(c, &path, &volumes, &claim_names));
            let name = str_of(c, "name");
            if !name.is_empty() && !seen.insert(name.to_owned()) {
                errs.push(FieldError::duplicate(&format!("{path}.name"), name));
            }
        }
    }
    errs
}

/// `ValidatePodEphemeralContainersUpdate`: the new list `ecs` (already defaulted) against the
/// stored pod `old`.
pub fn validate_update(old: &Value, ecs: &[Value]) -> Result<(), Vec<FieldError>> {
    let mut errs = validate_ephemeral_containers(&old["spec"], ecs);
    if old["metadata"]["annotations"]
        .get(MIRROR_POD_ANNOTATION)
        .is_some()
    {
        return Err(vec![FieldError::forbidden(
            "[]",
            "static pods do not support ephemeral containers",
        )]);
    }
    for old_ec in old["spec"]["ephemeralContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = str_of(old_ec, "name");
        match ecs.iter().find(|e| str_of(e, "name") == name) {
            None => errs.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                &format!(
                    "existing ephemeral containers {} may not be removed\n",
                    super::status::go_quote(name)
                ),
            )),
            Some(new_ec) if godump::normalize(old_ec) != godump::normalize(new_ec) => {
                let diff = godump::unified_diff(
                    &godump::dump_ephemeral_container(old_ec),
                    &godump::dump_ephemeral_container(new_ec),
                );
                errs.push(FieldError::forbidden(
                    "spec.ephemeralContainers",
                    &format!(
                        "existing ephemeral containers {} may not be changed\n{diff}",
                        super::status::go_quote(name)
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_tag() {
        for (image, policy) in [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("registry:5000/busybox", "Always"),
            ("registry:5000/busybox:1", "IfNotPresent"),
            ("busybox@sha256:abc", "IfNotPresent"),
        ] {
            let mut c = json!({"image": image});
            apply_defaults(&mut c);
            assert_eq!(c["imagePullPolicy"], policy, "{image}");
            assert_eq!(c["terminationMessagePolicy"], "File");
        }
    }

    #[test]
    fn a_new_pod_needs_a_subdomain_name_and_containers_with_images() {
        let mut pod =
            json!({"metadata": {"name": "Fk_X"}, "spec": {"containers": [{"name": "a"}]}});
        apply_defaults(&mut pod["spec"]["containers"][0]);
        let errs = validate_new_pod(&pod);
        let messages: Vec<String> = errs.iter().map(FieldError::message).collect();
        // As kube-apiserver 1.36 answered a dry-run create of this pod (its `Fk_X` and its
        // `image` were tried one at a time).
        assert_eq!(
            messages,
            [
                format!("metadata.name: Invalid value: \"Fk_X\": {DNS1123_SUBDOMAIN_ERR}"),
                "spec.containers[0].image: Required value".to_owned(),
            ]
        );
        assert!(DNS1123_SUBDOMAIN_ERR.ends_with(r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
        let empty = json!({"metadata": {"name": "node-1.dbg"}, "spec": {"containers": []}});
        assert_eq!(
            validate_new_pod(&empty)
                .iter()
                .map(FieldError::message)
                .collect::<Vec<_>>(),
            ["spec.containers: Required value"]
        );
    }

    #[test]
    fn label_messages() {
        assert_eq!(
            validate_dns1123_label("a.b", "f")[0].detail,
            "must not contain dots"
        );
        assert_eq!(
            validate_dns1123_label("Bad_Name", "f")[0].detail,
            DNS1123_LABEL_ERR
        );
        assert_eq!(validate_dns1123_label(&"a".repeat(64), "f").len(), 1);
        assert!(validate_dns1123_label("ok-1", "f").is_empty());
    }
}
