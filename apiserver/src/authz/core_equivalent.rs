//! `--require-core-permissions`: the core (group `""`) permissions that doing the same thing
//! without poddebug would take, checked in addition to the poddebug.dev ones.
//!
//! Without it, RBAC in group `poddebug.dev` alone decides: a user allowed `create pods/debug`
//! gets a debug container even in a pod they could not `kubectl debug` into, because the
//! server acts with its own identity. With it, poddebug can only ever narrow what core RBAC
//! already allows (no confused deputy), and its policy (images, profiles, limits) applies on
//! top.

use super::Attributes;

fn core(verb: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes::Resource {
        verb: verb.to_owned(),
        group: String::new(),
        version: "v1".to_owned(),
        resource: resource.to_owned(),
        subresource: subresource.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

/// The core attributes a poddebug request also needs (empty for requests that have no core
/// counterpart: discovery, profiles, health).
pub fn core_equivalents(attrs: &Attributes) -> Vec<Attributes> {
    let Attributes::Resource {
        verb,
        group,
        resource,
        subresource,
        namespace,
        name,
        ..
    } = attrs
    else {
        return Vec::new();
    };
    if group != poddebug_types::GROUP {
        return Vec::new();
    }
    match (resource.as_str(), subresource.as_str(), verb.as_str()) {
        // kubectl debug: patch pods/ephemeralcontainers.
        ("pods", "debug", "create") => vec![core(
            "patch",
            "pods",
            "ephemeralcontainers",
            namespace,
            name,
        )],
        // Stopping runs a command in the container: what kubectl exec takes.
        ("pods", "debug", "delete") => vec![core("create", "pods", "exec", namespace, name)],
        ("pods", "debug", _) => vec![core("get", "pods", "", namespace, name)],
        ("pods", "attach", "get") => vec![
            core("get", "pods", "attach", namespace, name),
            core("create", "pods", "attach", namespace, name),
        ],
        ("pods", "attach", _) => vec![core("create", "pods", "attach", namespace, name)],
        ("pods", "log", _) => vec![core("get", "pods", "log", namespace, name)],
        ("poddebugcontainers", "", "get") => vec![core("get", "pods", "", namespace, "")],
        ("poddebugcontainers", "", v) => vec![core(v, "pods", "", namespace, "")],
        // A copy is a pod: reading copies is reading pods.
        ("poddebugcopies", "", v) => vec![core(v, "pods", "", namespace, name)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pd(verb: &str, resource: &str, sub: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: "poddebug.dev".into(),
            version: "v1alpha1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: "ns".into(),
            name: "web".into(),
        }
    }

    fn label(a: &[Attributes]) -> Vec<String> {
        a.iter()
            .map(|a| match a {
                Attributes::Resource {
                    verb,
                    group,
                    resource,
                    subresource,
                    name,
                    ..
                } => {
                    format!("{verb} {group}/{resource}/{subresource} {name}")
                }
                Attributes::NonResource { path, verb } => format!("{verb} {path}"),
            })
            .collect()
    }

    #[test]
    fn each_request_maps_to_what_kubectl_would_need() {
        assert_eq!(
            label(&core_equivalents(&pd("create", "pods", "debug"))),
            ["patch /pods/ephemeralcontainers web"]
        );
        assert_eq!(
            label(&core_equivalents(&pd("delete", "pods", "debug"))),
            ["create /pods/exec web"]
        );
        assert_eq!(
            label(&core_equivalents(&pd("get", "pods", "debug"))),
            ["get /pods/ web"]
        );
        assert_eq!(
            label(&core_equivalents(&pd("get", "pods", "attach"))),
            ["get /pods/attach web", "create /pods/attach web"]
        );
        assert_eq!(
            label(&core_equivalents(&pd("create", "pods", "attach"))),
            ["create /pods/attach web"]
        );
        assert_eq!(
            label(&core_equivalents(&pd("get", "pods", "log"))),
            ["get /pods/log web"]
        );
        assert_eq!(
            label(&core_equivalents(&pd("watch", "poddebugcontainers", ""))),
            ["watch /pods/ "]
        );
        // A copy is a pod of that name.
        assert_eq!(
            label(&core_equivalents(&pd("get", "poddebugcopies", ""))),
            ["get /pods/ web"]
        );
        assert!(core_equivalents(&pd("list", "debugprofiles", "")).is_empty());
        assert!(
            core_equivalents(&Attributes::NonResource {
                path: "/apis".into(),
                verb: "get".into()
            })
            .is_empty()
        );
    }
}
