//! Who is calling the fake: bearer tokens from a table, or a client certificate signed by the
//! client CA (CN = user, O = groups); then kube's impersonation filter (`Impersonate-*`).

use std::collections::BTreeMap;

use http::HeaderMap;

use super::authz::{Attributes, Policy, forbidden_status};
use super::status::{self, KubeStatus};

/// An authenticated user (`user.Info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// UID (may be empty).
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups (`system:authenticated` is not added).
    pub fn new(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..UserInfo::default()
        }
    }

    /// Sets the UID.
    pub fn with_uid(mut self, uid: &str) -> UserInfo {
        self.uid = uid.to_owned();
        self
    }

    /// Adds an extra value.
    pub fn with_extra(mut self, key: &str, value: &str) -> UserInfo {
        self.extra
            .entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
        self
    }

    /// A service account's user as kube-apiserver sees it.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> UserInfo {
        UserInfo {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            uid: uid.to_owned(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ],
            extra: BTreeMap::new(),
        }
    }
}

/// The token of `admin` (group `system:masters`).
pub const ADMIN_TOKEN: &str = "fake-admin-token";
/// The token of poddebug's service account `poddebug-system/poddebug`.
pub const PODDEBUG_TOKEN: &str = "fake-poddebug-token";
/// The user `PODDEBUG_TOKEN` maps to.
pub const PODDEBUG_USER: &str = "system:serviceaccount:poddebug-system:poddebug";
/// UID of that service account.
pub const PODDEBUG_UID: &str = "6f0c0a3e-5b3c-4f7e-9a3d-0d1e2f3a4b5c";

/// The default token table.
pub fn default_tokens() -> BTreeMap<String, UserInfo> {
    let mut t = BTreeMap::new();
    t.insert(
        ADMIN_TOKEN.to_owned(),
        UserInfo::new("admin", &["system:masters", "system:authenticated"]),
    );
    t.insert(
        PODDEBUG_TOKEN.to_owned(),
        UserInfo::service_account("poddebug-system", "poddebug", PODDEBUG_UID),
    );
    t
}

/// Identity from the TLS handshake (verified against the client CA by rustls).
#[derive(Clone, Debug, Default)]
pub struct PeerIdentity {
    /// `CN` and `O`s of a verified client certificate.
    pub cert_user: Option<(String, Vec<String>)>,
}

/// The bearer token of a request, if any.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Authenticates a request: a bearer token wins over a client certificate; neither → 401.
pub fn authenticate(
    headers: &HeaderMap,
    peer: &PeerIdentity,
    tokens: &BTreeMap<String, UserInfo>,
) -> Result<UserInfo, KubeStatus> {
    if let Some(token) = bearer_token(headers) {
        return tokens.get(token).cloned().ok_or_else(status::unauthorized);
    }
    if let Some((cn, orgs)) = &peer.cert_user {
        let mut groups = orgs.clone();
        groups.push("system:authenticated".to_owned());
        return Ok(UserInfo {
            name: cn.clone(),
            groups,
            ..UserInfo::default()
        });
    }
    Err(status::unauthorized())
}

/// The `Impersonate-*` headers of a request, as (header name, value) pairs.
pub fn impersonation_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("impersonate-"))
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// kube's impersonation filter: every requested attribute needs verb `impersonate` on it; the
/// effective user is built from the headers (with the groups kube adds).
pub fn impersonate(
    caller: &UserInfo,
    headers: &HeaderMap,
    policy: &Policy,
) -> Result<Option<UserInfo>, KubeStatus> {
    let pairs = impersonation_headers(headers);
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut user: Option<String> = None;
    let mut uid: Option<String> = None;
    let mut groups = Vec::new();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in &pairs {
        match k.as_str() {
            "impersonate-user" => user = Some(v.clone()),
            "impersonate-uid" => uid = Some(v.clone()),
            "impersonate-group" => groups.push(v.clone()),
            other => {
                if let Some(key) = other.strip_prefix("impersonate-extra-") {
                    let key = percent_encoding::percent_decode_str(key)
                        .decode_utf8_lossy()
                        .to_lowercase();
                    extra.entry(key).or_default().push(v.clone());
                }
            }
        }
    }
    let Some(user) = user else {
        let what: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        return Err(status::bad_request(format!(
            "requested [{}] without impersonating a user",
            what.join(" ")
        )));
    };

    let check = |attrs: Attributes| -> Result<(), KubeStatus> {
        if policy(&attrs) {
            Ok(())
        } else {
            Err(forbidden_status(&attrs, ""))
        }
    };
    let base = Attributes::for_user(caller, "impersonate");
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, name)) = rest.split_once(':')
    {
        check(base.resource("", "serviceaccounts", "", ns, name))?;
    } else {
        check(base.resource("", "users", "", "", &user))?;
    }
    for g in &groups {
        check(base.resource("", "groups", "", "", g))?;
    }
    for (key, values) in &extra {
        for v in values {
            check(base.resource("authentication.k8s.io", "userextras", key, "", v))?;
        }
    }
    if let Some(uid) = &uid {
        check(base.resource("authentication.k8s.io", "uids", "", "", uid))?;
    }

    let mut effective_groups = groups;
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
        && effective_groups.is_empty()
    {
        effective_groups.push("system:serviceaccounts".to_owned());
        effective_groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if user != "system:anonymous" && !effective_groups.iter().any(|g| g == "system:authenticated") {
        effective_groups.push("system:authenticated".to_owned());
    }
    Ok(Some(UserInfo {
        name: user,
        uid: uid.unwrap_or_default(),
        groups: effective_groups,
        extra,
    }))
}
