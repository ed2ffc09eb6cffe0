//! Authorization: every request (but `--authorization-always-allow-paths`) is checked with a
//! SubjectAccessReview carrying the user and the exact attributes kube-apiserver would compute.

pub mod attributes;
pub mod core_equivalent;
pub mod sar;

pub use attributes::{Attributes, request_attributes};
pub use sar::{Decision, SarAuthorizer};

use poddebug_storage::Caller;
use poddebug_types::ApiError;

/// The group whose members are always allowed, as in the generic apiserver's delegating
/// authorizer (the aggregator's availability checks come as `system:masters`).
pub const ALWAYS_ALLOWED_GROUP: &str = "system:masters";

/// kube-apiserver's `forbiddenMessage`, plus `: reason` when the authorizer gave one, wrapped
/// the way `responsewriters.Forbidden` wraps it.
pub fn forbidden(user: &Caller, attrs: &Attributes, reason: &str) -> ApiError {
    let mut msg = match attrs {
        Attributes::NonResource { path, verb } => {
            format!("User {:?} cannot {verb} path {:?}", user.user, path)
        }
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            ..
        } => {
            let res = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            if namespace.is_empty() {
                format!(
                    "User {:?} cannot {verb} resource {res:?} in API group {group:?} at the cluster scope",
                    user.user
                )
            } else {
                format!(
                    "User {:?} cannot {verb} resource {res:?} in API group {group:?} in the namespace {namespace:?}",
                    user.user
                )
            }
        }
    };
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    match attrs {
        Attributes::NonResource { .. } => ApiError::forbidden("", "", "", msg),
        Attributes::Resource {
            group,
            resource,
            name,
            ..
        } => ApiError::forbidden(resource, group, name, msg),
    }
}

/// `use` on `debugprofiles/<p>`: the permission a gated profile needs, at create, attach and
/// log alike.
pub fn profile_use(p: poddebug_types::Profile) -> Attributes {
    Attributes::Resource {
        verb: "use".to_owned(),
        group: poddebug_types::GROUP.to_owned(),
        version: poddebug_types::VERSION.to_owned(),
        resource: "debugprofiles".to_owned(),
        subresource: String::new(),
        namespace: String::new(),
        name: p.as_str().to_owned(),
    }
}

/// Whether a path is in the always-allow list (exact, or prefix with a trailing `*`).
pub fn always_allowed_path(paths: &[String], path: &str) -> bool {
    paths.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p == path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bob() -> Caller {
        Caller {
            user: "bob".into(),
            ..Default::default()
        }
    }

    #[test]
    fn forbidden_messages_match_kube_apiserver() {
        let a = Attributes::Resource {
            verb: "create".into(),
            group: "poddebug.dev".into(),
            version: "v1alpha1".into(),
            resource: "pods".into(),
            subresource: "debug".into(),
            namespace: "default".into(),
            name: "web".into(),
        };
        let e = forbidden(&bob(), &a, "");
        assert_eq!(
            e.message(),
            "pods.poddebug.dev \"web\" is forbidden: User \"bob\" cannot create resource \"pods/debug\" in API group \"poddebug.dev\" in the namespace \"default\""
        );
        let v: serde_json::Value = serde_json::from_slice(&e.to_json()).unwrap();
        assert_eq!(v["details"]["kind"], "pods");
        assert_eq!(v["details"]["group"], "poddebug.dev");
        assert_eq!(v["details"]["name"], "web");
        let n = Attributes::NonResource {
            path: "/metrics".into(),
            verb: "get".into(),
        };
        assert_eq!(
            forbidden(&bob(), &n, "").message(),
            "forbidden: User \"bob\" cannot get path \"/metrics\""
        );
        let c = Attributes::Resource {
            verb: "list".into(),
            group: "poddebug.dev".into(),
            version: "v1alpha1".into(),
            resource: "debugprofiles".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
        };
        assert_eq!(
            forbidden(&bob(), &c, "no RBAC policy matched").message(),
            "debugprofiles.poddebug.dev is forbidden: User \"bob\" cannot list resource \"debugprofiles\" in API group \"poddebug.dev\" at the cluster scope: no RBAC policy matched"
        );
    }

    #[test]
    fn always_allow_paths_match_exactly_or_by_prefix() {
        let paths = vec!["/healthz".to_owned(), "/debug/*".to_owned()];
        assert!(always_allowed_path(&paths, "/healthz"));
        assert!(!always_allowed_path(&paths, "/healthz/extra"));
        assert!(always_allowed_path(&paths, "/debug/pprof"));
        assert!(!always_allowed_path(&paths, "/metrics"));
    }
}
