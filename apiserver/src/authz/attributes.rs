//! The authorization attributes of a request, computed the way kube-apiserver's `RequestInfo`
//! does for the same path (so a SubjectAccessReview asks exactly what RBAC rules name).

use std::collections::BTreeMap;

use poddebug_types::{GROUP, VERSION};

/// What a request does, for the authorizer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attributes {
    /// A request on an API resource.
    Resource {
        /// get, list, watch, create, delete, use…
        verb: String,
        /// API group.
        group: String,
        /// API version.
        version: String,
        /// Resource (`pods`, `poddebugcontainers`, `debugprofiles`).
        resource: String,
        /// Subresource (`debug`, `attach`, `log`) or empty.
        subresource: String,
        /// Namespace or empty.
        namespace: String,
        /// Object name or empty.
        name: String,
    },
    /// Any other path (discovery, OpenAPI, metrics, health).
    NonResource {
        /// The URL path.
        path: String,
        /// The verb from the method (`get`, `post`, …).
        verb: String,
    },
}

impl Attributes {
    /// The verb.
    pub fn verb(&self) -> &str {
        match self {
            Attributes::Resource { verb, .. } | Attributes::NonResource { verb, .. } => verb,
        }
    }

    /// A short resource label for metrics and logs (`pods/debug`, `nonresource`).
    pub fn resource_label(&self) -> String {
        match self {
            Attributes::Resource {
                resource,
                subresource,
                ..
            } if !subresource.is_empty() => {
                format!("{resource}/{subresource}")
            }
            Attributes::Resource { resource, .. } => resource.clone(),
            Attributes::NonResource { .. } => "nonresource".to_owned(),
        }
    }

    /// The same resource attributes with another verb (e.g. the extra `create` check on a
    /// WebSocket attach, or `use` on a debug profile).
    pub fn with_verb(&self, v: &str) -> Attributes {
        let mut a = self.clone();
        match &mut a {
            Attributes::Resource { verb, .. } | Attributes::NonResource { verb, .. } => {
                *verb = v.to_owned()
            }
        }
        a
    }
}

/// The attributes of `method path?query`, as kube-apiserver's RequestInfoFactory computes them
/// for paths under `/apis/poddebug.dev/v1alpha1`. Anything else is a non-resource request.
pub fn request_attributes(
    method: &http::Method,
    path: &str,
    query: &BTreeMap<String, String>,
) -> Attributes {
    let lower_method = method.as_str().to_ascii_lowercase();
    let prefix = format!("/apis/{GROUP}/{VERSION}/");
    let Some(rest) = path.strip_prefix(&prefix) else {
        return Attributes::NonResource {
            path: path.to_owned(),
            verb: lower_method,
        };
    };
    // Segments are percent-decoded, as kube-apiserver's RequestInfo sees them, so the name
    // authorized is the name the handlers use.
    let decoded: Vec<String> = rest
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let mut parts: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let mut namespace = String::new();
    if parts.len() >= 2 && parts[0] == "namespaces" {
        namespace = parts[1].to_owned();
        parts.drain(..2);
        if parts.is_empty() {
            // `/namespaces/NS` names the namespace object itself.
            parts.push("namespaces");
        }
    }
    let resource = parts.first().copied().unwrap_or_default().to_owned();
    let name = parts.get(1).copied().unwrap_or_default().to_owned();
    // Only parts[2] becomes the subresource; later parts are ignored (as upstream).
    let subresource = parts.get(2).copied().unwrap_or_default().to_owned();
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    let verb = match *method {
        http::Method::POST => "create",
        http::Method::GET | http::Method::HEAD => {
            if name.is_empty() {
                if watch { "watch" } else { "list" }
            } else {
                "get"
            }
        }
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => {
            if name.is_empty() {
                "deletecollection"
            } else {
                "delete"
            }
        }
        _ => lower_method.as_str(),
    }
    .to_owned();
    // A list or watch narrowed to one object by `fieldSelector=metadata.name=X` is authorized with
    // that name, as kube-apiserver's RequestInfo does, so `resourceNames` rules apply to it.
    let name = if (verb == "list" || verb == "watch") && name.is_empty() {
        query
            .get("fieldSelector")
            .and_then(|fs| exact_name(fs))
            .unwrap_or(name)
    } else {
        name
    };
    Attributes::Resource {
        verb,
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        resource,
        subresource,
        namespace,
        name,
    }
}

/// The `X` of a `metadata.name=X` (or `==`) term of a field selector.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let term = term.trim();
        let value = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        (!value.is_empty()).then(|| value.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(m: http::Method, p: &str, q: &[(&str, &str)]) -> Attributes {
        let q = q
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        request_attributes(&m, p, &q)
    }

    fn res(verb: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: "poddebug.dev".into(),
            version: "v1alpha1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn paths_map_like_kube_apiserver_request_info() {
        let base = "/apis/poddebug.dev/v1alpha1";
        use http::Method as M;
        let cases = [
            (
                M::POST,
                format!("{base}/namespaces/ns/pods/web/debug/dbg"),
                res("create", "pods", "debug", "ns", "web"),
            ),
            (
                M::POST,
                format!("{base}/namespaces/ns/pods/web/debug"),
                res("create", "pods", "debug", "ns", "web"),
            ),
            (
                M::DELETE,
                format!("{base}/namespaces/ns/pods/web/debug/dbg"),
                res("delete", "pods", "debug", "ns", "web"),
            ),
            (
                M::GET,
                format!("{base}/namespaces/ns/pods/web/debug"),
                res("get", "pods", "debug", "ns", "web"),
            ),
            (
                M::GET,
                format!("{base}/namespaces/ns/pods/web/attach"),
                res("get", "pods", "attach", "ns", "web"),
            ),
            (
                M::POST,
                format!("{base}/namespaces/ns/pods/web/attach"),
                res("create", "pods", "attach", "ns", "web"),
            ),
            (
                M::GET,
                format!("{base}/namespaces/ns/pods/web/log"),
                res("get", "pods", "log", "ns", "web"),
            ),
            (
                M::GET,
                format!("{base}/namespaces/ns/poddebugcontainers"),
                res("list", "poddebugcontainers", "", "ns", ""),
            ),
            (
                M::GET,
                format!("{base}/poddebugcontainers"),
                res("list", "poddebugcontainers", "", "", ""),
            ),
            (
                M::GET,
                format!("{base}/namespaces/ns/poddebugcontainers/web.dbg"),
                res("get", "poddebugcontainers", "", "ns", "web.dbg"),
            ),
            (
                M::GET,
                format!("{base}/debugprofiles/sysadmin"),
                res("get", "debugprofiles", "", "", "sysadmin"),
            ),
            (
                M::POST,
                format!("{base}/namespaces/ns/pods/web/copy"),
                res("create", "pods", "copy", "ns", "web"),
            ),
            (
                M::DELETE,
                format!("{base}/namespaces/ns/pods/web/copies/web-debug-x"),
                res("delete", "pods", "copies", "ns", "web"),
            ),
            (
                M::POST,
                format!("{base}/nodes/node-1/debug/dbg"),
                res("create", "nodes", "debug", "", "node-1"),
            ),
            (
                M::GET,
                format!("{base}/nodes/node-1/debug/dbg/attach"),
                res("get", "nodes", "debug", "", "node-1"),
            ),
            (
                M::GET,
                format!("{base}/nodedebugcontainers"),
                res("list", "nodedebugcontainers", "", "", ""),
            ),
            (
                M::GET,
                format!("{base}/nodedebugcontainers/a.b.dbg"),
                res("get", "nodedebugcontainers", "", "", "a.b.dbg"),
            ),
        ];
        for (m, p, want) in cases {
            assert_eq!(attrs(m.clone(), &p, &[]), want, "{m} {p}");
        }
        assert_eq!(
            attrs(
                M::GET,
                &format!("{base}/poddebugcontainers"),
                &[("watch", "true")]
            ),
            res("watch", "poddebugcontainers", "", "", "")
        );
        assert_eq!(
            attrs(M::GET, "/apis/poddebug.dev/v1alpha1", &[]),
            Attributes::NonResource {
                path: "/apis/poddebug.dev/v1alpha1".into(),
                verb: "get".into()
            }
        );
        assert_eq!(
            attrs(M::GET, "/metrics", &[]),
            Attributes::NonResource {
                path: "/metrics".into(),
                verb: "get".into()
            }
        );
    }
}
