//! Pod Security admission (`pod-security-admission`) for an update that adds ephemeral
//! containers: the whole pod is checked against the namespace's `enforce` level, with the check
//! texts of `policy/check_*.go` and the 403 wording of `admission.go`.

use std::collections::BTreeSet;

use serde_json::Value;

use super::status::{self, KubeStatus};

/// Baseline's allowed added capabilities (`check_capabilities_baseline.go`).
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn pluralize(n: usize) -> &'static str {
    if n == 1 { "container" } else { "containers" }
}

fn join_quote(items: &[String]) -> String {
    items
        .iter()
        .map(|i| status::go_quote(i))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `visitContainers`: init containers, containers, ephemeral containers.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |l| spec[l].as_array().into_iter().flatten())
}

fn name(c: &Value) -> String {
    c["name"].as_str().unwrap_or("").to_owned()
}

type Finding = (String, String);

fn privileged(spec: &Value) -> Option<Finding> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| c["securityContext"]["privileged"] == true)
        .map(name)
        .collect();
    (!bad.is_empty()).then(|| {
        (
            "privileged".to_owned(),
            format!(
                "{} {} must not set securityContext.privileged=true",
                pluralize(bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

fn host_namespaces(spec: &Value) -> Option<Finding> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .filter(|k| spec[**k] == true)
        .map(|k| format!("{k}=true"))
        .collect();
    (!set.is_empty()).then(|| ("host namespaces".to_owned(), set.join(", ")))
}

fn capabilities_baseline(spec: &Value) -> Option<Finding> {
    let mut bad = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(spec) {
        let mut valid = true;
        for cap in c["securityContext"]["capabilities"]["add"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let cap = cap.as_str().unwrap_or("");
            if !BASELINE_CAPABILITIES.contains(&cap) {
                valid = false;
                caps.insert(cap.to_owned());
            }
        }
        if !valid {
            bad.push(name(c));
        }
    }
    (!bad.is_empty()).then(|| {
        let caps: Vec<String> = caps.into_iter().collect();
        (
            "non-default capabilities".to_owned(),
            format!(
                "{} {} must not include {} in securityContext.capabilities.add",
                pluralize(bad.len()),
                join_quote(&bad),
                join_quote(&caps)
            ),
        )
    })
}

fn seccomp_baseline(spec: &Value) -> Option<Finding> {
    let mut setters = Vec::new();
    if spec["securityContext"]["seccompProfile"]["type"] == "Unconfined" {
        setters.push("pod".to_owned());
    }
    let bad: Vec<String> = containers(spec)
        .filter(|c| c["securityContext"]["seccompProfile"]["type"] == "Unconfined")
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(format!("{} {}", pluralize(bad.len()), join_quote(&bad)));
    }
    (!setters.is_empty()).then(|| {
        (
            "seccompProfile".to_owned(),
            format!(
                "{} must not set securityContext.seccompProfile.type to \"Unconfined\"",
                setters.join(" and ")
            ),
        )
    })
}

fn allow_privilege_escalation(spec: &Value) -> Option<Finding> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| c["securityContext"]["allowPrivilegeEscalation"] != false)
        .map(name)
        .collect();
    (!bad.is_empty()).then(|| {
        (
            "allowPrivilegeEscalation != false".to_owned(),
            format!(
                "{} {} must set securityContext.allowPrivilegeEscalation=false",
                pluralize(bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

fn capabilities_restricted(spec: &Value) -> Option<Finding> {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(spec) {
        let capabilities = &c["securityContext"]["capabilities"];
        if capabilities.is_null() {
            missing_drop.push(name(c));
            continue;
        }
        if !capabilities["drop"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|d| d == "ALL")
        {
            missing_drop.push(name(c));
        }
        let mut forbidden = false;
        for cap in capabilities["add"].as_array().into_iter().flatten() {
            let cap = cap.as_str().unwrap_or("");
            if cap != "NET_BIND_SERVICE" {
                forbidden = true;
                caps.insert(cap.to_owned());
            }
        }
        if forbidden {
            adding.push(name(c));
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} {} must set securityContext.capabilities.drop=[\"ALL\"]",
            pluralize(missing_drop.len()),
            join_quote(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        let caps: Vec<String> = caps.into_iter().collect();
        details.push(format!(
            "{} {} must not include {} in securityContext.capabilities.add",
            pluralize(adding.len()),
            join_quote(&adding),
            join_quote(&caps)
        ));
    }
    (!details.is_empty()).then(|| ("unrestricted capabilities".to_owned(), details.join("; ")))
}

fn run_as_non_root(spec: &Value) -> Option<Finding> {
    let mut setters = Vec::new();
    let pod_value = &spec["securityContext"]["runAsNonRoot"];
    let pod_true = *pod_value == true;
    if *pod_value == false {
        setters.push("pod".to_owned());
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match &c["securityContext"]["runAsNonRoot"] {
            Value::Bool(false) => explicit.push(name(c)),
            Value::Bool(true) => {}
            _ if !pod_true => implicit.push(name(c)),
            _ => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize(explicit.len()),
            join_quote(&explicit)
        ));
    }
    if !setters.is_empty() {
        return Some((
            "runAsNonRoot != true".to_owned(),
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        (
            "runAsNonRoot != true".to_owned(),
            format!(
                "pod or {} {} must set securityContext.runAsNonRoot=true",
                pluralize(implicit.len()),
                join_quote(&implicit)
            ),
        )
    })
}

fn run_as_user(spec: &Value) -> Option<Finding> {
    let mut setters = Vec::new();
    if spec["securityContext"]["runAsUser"] == 0 {
        setters.push("pod".to_owned());
    }
    let bad: Vec<String> = containers(spec)
        .filter(|c| c["securityContext"]["runAsUser"] == 0)
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(format!("{} {}", pluralize(bad.len()), join_quote(&bad)));
    }
    (!setters.is_empty()).then(|| {
        (
            "runAsUser=0".to_owned(),
            format!("{} must not set runAsUser=0", setters.join(" and ")),
        )
    })
}

fn seccomp_restricted(spec: &Value) -> Option<Finding> {
    let valid = |t: &Value| t == "RuntimeDefault" || t == "Localhost";
    let mut setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    let pod_profile = &spec["securityContext"]["seccompProfile"];
    let mut pod_set = false;
    if !pod_profile.is_null() {
        if valid(&pod_profile["type"]) {
            pod_set = true;
        } else {
            setters.push("pod".to_owned());
            bad_values.insert(pod_profile["type"].as_str().unwrap_or("").to_owned());
        }
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        let profile = &c["securityContext"]["seccompProfile"];
        if !profile.is_null() {
            if !valid(&profile["type"]) {
                explicit.push(name(c));
                bad_values.insert(profile["type"].as_str().unwrap_or("").to_owned());
            }
        } else if !pod_set {
            implicit.push(name(c));
        }
    }
    if !explicit.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize(explicit.len()),
            join_quote(&explicit)
        ));
    }
    if !setters.is_empty() {
        let values: Vec<String> = bad_values.into_iter().collect();
        return Some((
            "seccompProfile".to_owned(),
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters.join(" and "),
                join_quote(&values)
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        (
            "seccompProfile".to_owned(),
            format!(
                "pod or {} {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                pluralize(implicit.len()),
                join_quote(&implicit)
            ),
        )
    })
}

/// Evaluates `pod` against the namespace labels; 403 on a violation of the enforce level.
pub fn admit(namespace_labels: &Value, pod: &Value, name: &str) -> Result<(), KubeStatus> {
    let level = namespace_labels["pod-security.kubernetes.io/enforce"]
        .as_str()
        .unwrap_or("privileged");
    let version = namespace_labels["pod-security.kubernetes.io/enforce-version"]
        .as_str()
        .unwrap_or("latest");
    let spec = &pod["spec"];
    let checks: Vec<fn(&Value) -> Option<Finding>> = match level {
        "baseline" => vec![
            host_namespaces,
            privileged,
            capabilities_baseline,
            seccomp_baseline,
        ],
        "restricted" => vec![
            host_namespaces,
            privileged,
            allow_privilege_escalation,
            capabilities_restricted,
            run_as_non_root,
            run_as_user,
            seccomp_restricted,
        ],
        _ => return Ok(()),
    };
    let findings: Vec<String> = checks
        .iter()
        .filter_map(|check| check(spec))
        .map(|(reason, detail)| {
            if detail.is_empty() {
                reason
            } else {
                format!("{reason} ({detail})")
            }
        })
        .collect();
    if findings.is_empty() {
        return Ok(());
    }
    Err(status::forbidden(
        "",
        "pods",
        name,
        &format!(
            "violates PodSecurity {}: {}",
            status::go_quote(&format!("{level}:{version}")),
            findings.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn baseline_rejects_sys_ptrace() {
        let labels = json!({"pod-security.kubernetes.io/enforce": "baseline"});
        let pod = json!({"spec": {"containers": [{"name": "app"}], "ephemeralContainers": [
            {"name": "dbg", "securityContext": {"capabilities": {"add": ["SYS_PTRACE", "NET_ADMIN"]}}}]}});
        let st = admit(&labels, &pod, "p").expect_err("denied").to_json();
        assert_eq!(
            st["message"],
            "pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities (container \"dbg\" must not include \"NET_ADMIN\", \"SYS_PTRACE\" in securityContext.capabilities.add)"
        );
        assert!(admit(&json!({}), &pod, "p").is_ok());
    }

    #[test]
    fn restricted_lists_every_missing_setting() {
        let labels = json!({"pod-security.kubernetes.io/enforce": "restricted"});
        let pod = json!({"spec": {"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "app", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
            "ephemeralContainers": [{"name": "dbg"}]}});
        let st = admit(&labels, &pod, "p").expect_err("denied").to_json();
        assert_eq!(
            st["message"],
            "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"dbg\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"dbg\" must set securityContext.capabilities.drop=[\"ALL\"])"
        );
    }
}
