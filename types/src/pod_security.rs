//! The Pod Security Standards level a pod meets, as kube-apiserver v1.36's Pod Security
//! admission judges it at `latest`: `baseline` when it has none of the settings
//! [`pod_privileges`] lists, `restricted` when it also passes the restricted checks here.
//!
//! Where this reading and Pod Security differ, it is stricter: unmasked `/proc` counts against
//! baseline even in a pod with its own user namespace, and the exemptions Pod Security gives
//! Windows pods (`spec.os.name: windows`) from some restricted checks are not made. The live
//! suite checks the two agree on the pods poddebug builds (`tests/tests/live/nodes.rs`).

use k8s_openapi::api::core::v1::Pod;

use crate::privilege::{containers_of, pod_privileges};

/// A Pod Security Standards level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Meets `restricted`.
    Restricted,
    /// Meets `baseline`, not `restricted`.
    Baseline,
    /// Meets neither.
    Privileged,
}

impl Level {
    /// The level's name, as the `pod-security.kubernetes.io/enforce` label spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Restricted => "restricted",
            Level::Baseline => "baseline",
            Level::Privileged => "privileged",
        }
    }
}

/// Volume types `restricted` allows.
const RESTRICTED_VOLUME_TYPES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The level `pod` meets.
pub fn level(pod: &Pod) -> Level {
    if !pod_privileges(pod).is_empty() {
        Level::Privileged
    } else if restricted_violations(pod).is_empty() {
        Level::Restricted
    } else {
        Level::Baseline
    }
}

/// What keeps `pod` from `restricted` besides what keeps it from `baseline`
/// ([`pod_privileges`]), in words, in a stable order.
pub fn restricted_violations(pod: &Pod) -> Vec<String> {
    let mut out = Vec::new();
    let Some(spec) = &pod.spec else {
        return out;
    };
    // Volume types: the field a volume sets, as its JSON names it.
    for v in spec.volumes.iter().flatten() {
        let json = serde_json::to_value(v).unwrap_or_default();
        let kinds: Vec<String> = json
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| k.as_str() != "name" && !v.is_null())
            .map(|(k, _)| k.clone())
            .collect();
        for k in kinds {
            if !RESTRICTED_VOLUME_TYPES.contains(&k.as_str()) {
                out.push(format!("spec.volumes[{}]: {k}", v.name));
            }
        }
    }
    let psc = spec.security_context.as_ref();
    let pod_non_root = psc.and_then(|s| s.run_as_non_root);
    let pod_seccomp = psc
        .and_then(|s| s.seccomp_profile.as_ref())
        .map(|p| p.type_.as_str());
    if psc.and_then(|s| s.run_as_user) == Some(0) {
        out.push("spec.securityContext.runAsUser: 0".to_owned());
    }
    let confined = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    for c in containers_of(spec) {
        let sc = c.security_context;
        let name = c.name;
        if sc.and_then(|s| s.allow_privilege_escalation) != Some(false) {
            out.push(format!(
                "container {name:?}: securityContext.allowPrivilegeEscalation must be false"
            ));
        }
        match sc.and_then(|s| s.run_as_non_root) {
            Some(true) => {}
            Some(false) => out.push(format!(
                "container {name:?}: securityContext.runAsNonRoot: false"
            )),
            None if pod_non_root == Some(true) => {}
            None => out.push(format!(
                "container {name:?}: securityContext.runAsNonRoot must be true"
            )),
        }
        if sc.and_then(|s| s.run_as_user) == Some(0) {
            out.push(format!("container {name:?}: securityContext.runAsUser: 0"));
        }
        match sc
            .and_then(|s| s.seccomp_profile.as_ref())
            .map(|p| p.type_.as_str())
        {
            Some(t) if confined(t) => {}
            None if pod_seccomp.is_some_and(confined) => {}
            _ => out.push(format!(
                "container {name:?}: securityContext.seccompProfile.type must be RuntimeDefault or Localhost"
            )),
        }
        let caps = sc.and_then(|s| s.capabilities.as_ref());
        if !caps
            .and_then(|c| c.drop.as_ref())
            .is_some_and(|d| d.iter().any(|d| d == "ALL"))
        {
            out.push(format!(
                "container {name:?}: securityContext.capabilities.drop must include ALL"
            ));
        }
        for add in caps.and_then(|c| c.add.as_ref()).into_iter().flatten() {
            if add != "NET_BIND_SERVICE" {
                out.push(format!(
                    "container {name:?}: securityContext.capabilities.add: {add}"
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn with_container(c: serde_json::Value) -> Pod {
        pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [c]}}))
    }

    const RESTRICTED_SC: &str = r#"{"runAsNonRoot": true, "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}"#;

    fn restricted_sc() -> serde_json::Value {
        serde_json::from_str(RESTRICTED_SC).unwrap()
    }

    #[test]
    fn a_plain_pod_is_baseline_and_a_hardened_one_restricted() {
        let plain = with_container(json!({"name": "c", "image": "busybox"}));
        assert_eq!(level(&plain), Level::Baseline);
        assert_eq!(
            restricted_violations(&plain).len(),
            4,
            "{:?}",
            restricted_violations(&plain)
        );
        let hardened = with_container(
            json!({"name": "c", "image": "busybox", "securityContext": restricted_sc()}),
        );
        assert_eq!(level(&hardened), Level::Restricted);
        // Pod-level runAsNonRoot and seccomp count for every container that sets none.
        let pod_level = pod(json!({"spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "Localhost", "localhostProfile": "x"}},
            "containers": [{"name": "c", "image": "busybox", "securityContext":
                {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}}));
        assert_eq!(level(&pod_level), Level::Restricted);
    }

    #[test]
    fn what_restricted_refuses_on_top_of_baseline() {
        let mut sc = restricted_sc();
        sc["runAsUser"] = json!(0);
        sc["capabilities"] = json!({"drop": ["all"], "add": ["CHOWN"]});
        let p = pod(json!({"spec": {
            "volumes": [{"name": "g", "gitRepo": {"repository": "x"}}, {"name": "e", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "busybox", "securityContext": sc}]}}));
        assert_eq!(level(&p), Level::Baseline);
        assert_eq!(
            restricted_violations(&p),
            [
                "spec.volumes[g]: gitRepo",
                "container \"c\": securityContext.runAsUser: 0",
                "container \"c\": securityContext.capabilities.drop must include ALL",
                "container \"c\": securityContext.capabilities.add: CHOWN",
            ]
        );
    }

    #[test]
    fn anything_baseline_forbids_makes_a_pod_privileged() {
        for c in [
            json!({"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}),
            json!({"name": "c", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}),
            json!({"name": "c", "livenessProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 1}}}),
        ] {
            assert_eq!(level(&with_container(c.clone())), Level::Privileged, "{c}");
        }
        let host = pod(json!({"spec": {"hostPID": true, "containers": [{"name": "c"}]}}));
        assert_eq!(level(&host), Level::Privileged);
    }
}
