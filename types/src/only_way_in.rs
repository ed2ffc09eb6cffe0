//! poddebug as the only way in, by admission: what the component
//! `manifests/components/only-way-in` enforces, and what the server answers as its validating
//! admission webhook for core `pods/attach` and `pods/exec` (`CONNECT`).
//!
//! Admission of a `CONNECT` sees the options (`PodAttachOptions`, `PodExecOptions`: the
//! container), never the pod, so the webhook reads the pod and decides here whether the container
//! is one poddebug governs ([`governed`]): an ephemeral container poddebug made (its reserved
//! environment, which only poddebug writes — a create setting it is refused, and the component's
//! policy refuses every other `pods/ephemeralcontainers` update), or any container of a pod
//! poddebug made (a copy, a node debug pod: labelled `poddebug.dev/kind`; whoever labels a pod of
//! their own so only locks themselves out of it).
//!
//! Who may still connect ([`Caller::passes`]): the server itself (its own identity, learned at
//! start), a request the server makes as its caller under `--impersonate` (it carries the extra
//! [`VIA_EXTRA`] = [`VIA_VALUE`], which only the server's account may impersonate), and members
//! of the break-glass groups.

use k8s_openapi::api::core::v1::Pod;

use crate::convert::{owner_of, profile_of};

/// The user extra the server adds when it impersonates its caller (`Impersonate-Extra-…`), so
/// that admission can tell its calls from the caller's own.
pub const VIA_EXTRA: &str = "poddebug.dev/via";
/// Its value.
pub const VIA_VALUE: &str = "poddebug-apiserver";
/// The groups allowed through by default: cluster administrators (who could remove the policy
/// anyway) and a group an operator binds for emergencies.
pub const DEFAULT_BREAK_GLASS_GROUPS: &[&str] = &["system:masters", "poddebug:break-glass"];

/// The container a `CONNECT` names, or the one the kubelet defaults to: the only container of a
/// pod that has one (an ephemeral container is never a default).
fn named_or_default<'a>(pod: &'a Pod, container: Option<&'a str>) -> Option<&'a str> {
    match container.filter(|c| !c.is_empty()) {
        Some(c) => Some(c),
        None => match pod.spec.as_ref().map(|s| s.containers.as_slice()) {
            Some([only]) => Some(only.name.as_str()),
            _ => None,
        },
    }
}

/// Why a `CONNECT` into `container` of `pod` reaches what poddebug governs (module docs), or
/// `None` when it does not.
pub fn governed(pod: &Pod, container: Option<&str>) -> Option<String> {
    if let Some(kind) = crate::copy::label(pod, crate::copy::LABEL_KIND) {
        return Some(format!(
            "pod {:?} was made by poddebug (a {} pod): its containers are reached through poddebug",
            pod.metadata.name.as_deref().unwrap_or_default(),
            if kind == "node" { "node debug" } else { "copy" }
        ));
    }
    let name = named_or_default(pod, container)?;
    let ec = pod
        .spec
        .as_ref()?
        .ephemeral_containers
        .iter()
        .flatten()
        .find(|e| e.name == name)?;
    (profile_of(ec).is_some() || owner_of(ec).is_some()).then(|| {
        format!(
            "container {name:?} is a debug container made by poddebug: attach to it, read its \
             log and stop it through /apis/poddebug.dev/v1alpha1 (pods/attach, pods/log, \
             pods/debug)"
        )
    })
}

/// Who asks, as admission names them.
#[derive(Clone, Debug, Default)]
pub struct Caller<'a> {
    /// The user name.
    pub user: &'a str,
    /// The groups.
    pub groups: &'a [String],
    /// The value(s) of the [`VIA_EXTRA`] extra.
    pub via: &'a [String],
}

impl Caller<'_> {
    /// Whether the caller passes whatever it connects to: the server itself (`server`, when
    /// known), the server acting as its caller, or a member of `break_glass`.
    pub fn passes(&self, server: Option<&str>, break_glass: &[String]) -> bool {
        server.is_some_and(|s| s == self.user)
            || self.via.iter().any(|v| v == VIA_VALUE)
            || self.groups.iter().any(|g| break_glass.contains(g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("a pod")
    }

    #[test]
    fn poddebugs_containers_and_pods_are_governed_others_are_not() {
        let p = pod(json!({"metadata": {"name": "web"}, "spec": {
            "containers": [{"name": "app"}, {"name": "side"}],
            "ephemeralContainers": [
                {"name": "dbg", "env": [{"name": "PODDEBUG_PROFILE", "value": "general"}]},
                {"name": "owned", "env": [{"name": "PODDEBUG_OWNER", "value": "alice"}]},
                {"name": "kubectl-debug"}]}}));
        assert!(governed(&p, Some("dbg")).is_some_and(|w| w.contains("made by poddebug")));
        assert!(governed(&p, Some("owned")).is_some());
        assert_eq!(governed(&p, Some("kubectl-debug")), None);
        assert_eq!(governed(&p, Some("app")), None);
        assert_eq!(governed(&p, None), None, "no default of two containers");
        let copy = pod(json!({"metadata": {"name": "web-debug",
            "labels": {"poddebug.dev/kind": "copy"}}, "spec": {"containers": [{"name": "app"}]}}));
        assert!(governed(&copy, Some("app")).is_some_and(|w| w.contains("copy")));
        assert!(governed(&copy, None).is_some());
        let single = pod(json!({"metadata": {"name": "one"}, "spec": {
            "containers": [{"name": "app"}],
            "ephemeralContainers": [{"name": "app2", "env": [{"name": "PODDEBUG_OWNER", "value": "a"}]}]}}));
        assert_eq!(
            governed(&single, None),
            None,
            "the default is the regular container"
        );
    }

    #[test]
    fn the_server_its_impersonations_and_break_glass_pass() {
        let groups = vec!["system:authenticated".to_owned()];
        let break_glass: Vec<String> = DEFAULT_BREAK_GLASS_GROUPS
            .iter()
            .map(|g| (*g).to_owned())
            .collect();
        let alice = Caller {
            user: "alice",
            groups: &groups,
            via: &[],
        };
        assert!(!alice.passes(
            Some("system:serviceaccount:poddebug-system:poddebug-apiserver"),
            &break_glass
        ));
        assert!(alice.passes(Some("alice"), &break_glass));
        let via = vec![VIA_VALUE.to_owned()];
        assert!(
            Caller {
                via: &via,
                ..alice.clone()
            }
            .passes(None, &break_glass)
        );
        let other = vec!["something-else".to_owned()];
        assert!(
            !Caller {
                via: &other,
                ..alice.clone()
            }
            .passes(None, &break_glass)
        );
        let admins = vec!["system:masters".to_owned()];
        assert!(
            Caller {
                groups: &admins,
                ..alice.clone()
            }
            .passes(None, &break_glass)
        );
        assert!(
            !Caller {
                groups: &admins,
                ..alice
            }
            .passes(None, &[])
        );
    }
}
