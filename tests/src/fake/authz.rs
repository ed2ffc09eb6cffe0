//! Authorization attributes (`authorizer.Attributes`), how kube-apiserver derives them from a
//! URL (`endpoints/request/requestinfo.go`), the test's policy, and the 403 wording of
//! `responsewriters.forbiddenMessage`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::authn::UserInfo;
use super::http::Query;
use super::status::{self, KubeStatus};

/// What is asked, by whom: the input of the policy and of every SubjectAccessReview.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// User name.
    pub user: String,
    /// User UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra.
    pub extra: BTreeMap<String, Vec<String>>,
    /// Verb (`get`, `list`, `watch`, `create`, `patch`, `impersonate`, ...).
    pub verb: String,
    /// Resource request (true) or non-resource path (false).
    pub resource_request: bool,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Resource (`pods`).
    pub resource: String,
    /// Subresource (`ephemeralcontainers`).
    pub subresource: String,
    /// Namespace (empty for cluster scope).
    pub namespace: String,
    /// Object name (may be empty).
    pub name: String,
    /// Non-resource path (`/healthz`).
    pub path: String,
}

impl Attributes {
    /// Attributes of `user` doing `verb` on nothing yet.
    pub fn for_user(user: &UserInfo, verb: &str) -> Attributes {
        Attributes {
            user: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            verb: verb.to_owned(),
            ..Attributes::default()
        }
    }

    /// The same user and verb on a resource.
    pub fn resource(
        &self,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            resource_request: true,
            api_group: group.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ..self.clone()
        }
    }

    /// `resource` or `resource/subresource`.
    pub fn full_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Shorthand for policies: a resource request with this verb and `resource[/subresource]`
    /// (any group).
    pub fn is(&self, verb: &str, full_resource: &str) -> bool {
        self.resource_request && self.verb == verb && self.full_resource() == full_resource
    }
}

impl fmt::Display for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.resource_request {
            write!(
                f,
                "{} {} {}/{} ns={:?} name={:?} as {}",
                self.verb,
                self.full_resource(),
                self.api_group,
                self.api_version,
                self.namespace,
                self.name,
                self.user
            )
        } else {
            write!(f, "{} {} as {}", self.verb, self.path, self.user)
        }
    }
}

/// RBAC for the fake and its SubjectAccessReviews: `true` allows.
pub type Policy = Arc<dyn Fn(&Attributes) -> bool + Send + Sync>;

/// The default policy: everything is allowed.
pub fn allow_all() -> Policy {
    Arc::new(|_| true)
}

/// `forbiddenMessage` + `NewForbidden` (the reason is appended after `: ` when not empty).
pub fn forbidden_status(attrs: &Attributes, reason: &str) -> KubeStatus {
    let mut msg = if !attrs.resource_request {
        format!(
            "User {} cannot {} path {}",
            status::go_quote(&attrs.user),
            attrs.verb,
            status::go_quote(&attrs.path)
        )
    } else if !attrs.namespace.is_empty() {
        format!(
            "User {} cannot {} resource {} in API group {} in the namespace {}",
            status::go_quote(&attrs.user),
            attrs.verb,
            status::go_quote(&attrs.full_resource()),
            status::go_quote(&attrs.api_group),
            status::go_quote(&attrs.namespace)
        )
    } else {
        format!(
            "User {} cannot {} resource {} in API group {} at the cluster scope",
            status::go_quote(&attrs.user),
            attrs.verb,
            status::go_quote(&attrs.full_resource()),
            status::go_quote(&attrs.api_group)
        )
    };
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    if attrs.resource_request {
        status::forbidden(&attrs.api_group, &attrs.resource, &attrs.name, &msg)
    } else {
        status::forbidden("", "", "", &msg)
    }
}

/// Derives the attributes of a request from its method and URL, as `RequestInfoFactory` does.
pub fn request_attributes(
    user: &UserInfo,
    method: &http::Method,
    path: &str,
    query: &Query,
) -> Attributes {
    let mut a = Attributes::for_user(user, "");
    a.path = path.to_owned();
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let non_resource = |mut a: Attributes| {
        a.verb = method.as_str().to_ascii_lowercase();
        a
    };
    if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
        return non_resource(a);
    }
    let mut rest = &parts[1..];
    if parts[0] == "apis" {
        if rest.len() < 3 {
            return non_resource(a);
        }
        a.api_group = rest[0].to_owned();
        rest = &rest[1..];
    }
    a.resource_request = true;
    a.api_version = rest[0].to_owned();
    rest = &rest[1..];
    a.verb = match *method {
        http::Method::POST => "create",
        http::Method::GET | http::Method::HEAD => "get",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "",
    }
    .to_owned();
    if rest.first() == Some(&"watch") {
        a.verb = "watch".to_owned();
        rest = &rest[1..];
    }
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        a.namespace = rest[1].to_owned();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    if rest.len() >= 3 {
        a.subresource = rest[2].to_owned();
    }
    if rest.len() >= 2 {
        a.name = rest[1].to_owned();
    }
    if let Some(r) = rest.first() {
        a.resource = (*r).to_owned();
    }
    if a.name.is_empty() && a.verb == "get" {
        a.verb = if query.flag("watch") { "watch" } else { "list" }.to_owned();
        if let Some(name) = query
            .get("fieldSelector")
            .and_then(|fs| fs.split(',').find_map(|t| t.strip_prefix("metadata.name=")))
        {
            a.name = name.trim_start_matches('=').to_owned();
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".to_owned();
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: http::Method, path: &str, query: &str) -> Attributes {
        request_attributes(
            &UserInfo::new("u", &[]),
            &method,
            path,
            &Query::parse(Some(query)),
        )
    }

    #[test]
    fn request_info_like_kube() {
        let a = attrs(
            http::Method::PATCH,
            "/api/v1/namespaces/ns/pods/p/ephemeralcontainers",
            "",
        );
        assert_eq!(
            (
                a.verb.as_str(),
                a.resource.as_str(),
                a.subresource.as_str(),
                a.namespace.as_str(),
                a.name.as_str()
            ),
            ("patch", "pods", "ephemeralcontainers", "ns", "p")
        );
        let a = attrs(
            http::Method::GET,
            "/api/v1/namespaces/ns/pods",
            "watch=1&fieldSelector=metadata.name%3Dp",
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "p"));
        let a = attrs(http::Method::GET, "/api/v1/pods", "");
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("list", ""));
        let a = attrs(http::Method::GET, "/api/v1/namespaces/ns", "");
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.namespace.as_str()),
            ("namespaces", "ns", "ns")
        );
        let a = attrs(
            http::Method::POST,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "",
        );
        assert_eq!(
            (a.verb.as_str(), a.api_group.as_str()),
            ("create", "authorization.k8s.io")
        );
        let a = attrs(http::Method::GET, "/apis", "");
        assert!(!a.resource_request);
        assert_eq!(a.verb, "get");
    }

    #[test]
    fn forbidden_wording() {
        let mut a = attrs(
            http::Method::PATCH,
            "/api/v1/namespaces/ns/pods/P/ephemeralcontainers",
            "",
        );
        a.user = "u".into();
        let s = forbidden_status(&a, "").to_json();
        assert_eq!(
            s["message"],
            "pods \"P\" is forbidden: User \"u\" cannot patch resource \"pods/ephemeralcontainers\" in API group \"\" in the namespace \"ns\""
        );
        assert_eq!(
            s["details"],
            serde_json::json!({"name": "P", "kind": "pods"})
        );
    }
}
