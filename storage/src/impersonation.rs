//! Calls made as the caller (`--impersonate`): `Impersonate-User`, one `Impersonate-Group` per
//! group, `Impersonate-Uid` and `Impersonate-Extra-<key>` (key percent-encoded as client-go's
//! `headerKeyEscape` does) on every request to kube-apiserver.
//!
//! kube-rs puts a `tower::buffer::Buffer` in front of every `Client`'s service stack, so a layer
//! inside a shared client runs on the buffer's worker task and cannot see a task-local of the
//! request's task. Instead each call gets a light per-caller `Client` whose stack is
//! [`ImpersonationLayer`] over the shared client's `send` (same connection pool, TLS and
//! credentials); typed `Api` calls, watches and exec upgrades all go through it.
//!
//! Besides the caller's identity, every such call carries the extra `poddebug.dev/via:
//! poddebug-apiserver` (the caller's own value of that key, if any, is dropped): admission tells
//! the server's calls as the caller from the caller's own by it
//! (`manifests/components/only-way-in`).
//!
//! Only `Impersonate-*` headers are added; the shared client's own credentials (the server's
//! service account) authenticate the request, and nothing of the original client request (its
//! `Authorization` in particular) is ever forwarded. RBAC the server's service account needs:
//! `impersonate` on `users`, `groups`, `serviceaccounts` (for service-account callers),
//! `uids` and `userextras/<key>` in group `authentication.k8s.io`.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue, Request};
use poddebug_types::ApiError;
use tower::{Layer, Service};

use crate::Caller;

/// `Impersonate-User`.
const USER: &str = "impersonate-user";
/// `Impersonate-Group`.
const GROUP: &str = "impersonate-group";
/// `Impersonate-Uid`.
const UID: &str = "impersonate-uid";
/// `Impersonate-Extra-` prefix.
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// client-go's `headerKeyEscape`: percent-encode (upper-case hex) every byte that is not an HTTP
/// token character, and `%` itself, so `authentication.kubernetes.io/credential-id` becomes
/// `authentication.kubernetes.io%2Fcredential-id`.
fn escape_extra_key(key: &str) -> String {
    const TCHAR_SPECIALS: &[u8] = b"!#$&'*+-.^_`|~";
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || TCHAR_SPECIALS.contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A header value carrying `value` as raw UTF-8 bytes (as client-go sends it); refuses control
/// characters, which no authenticated identity can carry.
fn value(what: &str, value: &str) -> Result<HeaderValue, ApiError> {
    HeaderValue::from_bytes(value.as_bytes()).map_err(|_| {
        ApiError::Internal(format!(
            "cannot impersonate the caller: its {what} cannot be sent in an HTTP header"
        ))
    })
}

/// The impersonation headers for `caller`, in a stable order. Fails only on an identity that
/// cannot be sent as a header (control characters), or one without a user name.
pub fn impersonation_headers(caller: &Caller) -> Result<Vec<(HeaderName, HeaderValue)>, ApiError> {
    if caller.user.is_empty() {
        return Err(ApiError::Internal(
            "cannot impersonate a request without a user name".into(),
        ));
    }
    let mut headers = vec![(
        HeaderName::from_static(USER),
        value("user name", &caller.user)?,
    )];
    for group in &caller.groups {
        headers.push((HeaderName::from_static(GROUP), value("group", group)?));
    }
    if let Some(uid) = caller.uid.as_deref().filter(|u| !u.is_empty()) {
        headers.push((HeaderName::from_static(UID), value("uid", uid)?));
    }
    let via = poddebug_types::only_way_in::VIA_EXTRA;
    for (key, values) in &caller.extra {
        // What says "made by poddebug as this caller" is the server's to say, never the caller's.
        if key.eq_ignore_ascii_case(via) {
            continue;
        }
        let name = format!(
            "{EXTRA_PREFIX}{}",
            escape_extra_key(&key.to_ascii_lowercase())
        );
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ApiError::Internal("cannot impersonate the caller: bad extra key".into())
        })?;
        for v in values {
            headers.push((name.clone(), value("extra value", v)?));
        }
    }
    // Admission (the component only-way-in) tells the server's calls made as the caller from
    // the caller's own by this extra, which only the server's account may impersonate.
    headers.push((
        HeaderName::from_bytes(format!("{EXTRA_PREFIX}{}", escape_extra_key(via)).as_bytes())
            .map_err(|_| {
                ApiError::Internal("cannot impersonate the caller: bad extra key".into())
            })?,
        HeaderValue::from_static(poddebug_types::only_way_in::VIA_VALUE),
    ));
    Ok(headers)
}

/// Whether `name` is an impersonation header.
fn is_impersonation(name: &HeaderName) -> bool {
    name.as_str().starts_with("impersonate-")
}

/// A tower layer that sets a fixed set of impersonation headers on every request, after
/// removing any `Impersonate-*` header already present.
#[derive(Clone, Debug)]
pub struct ImpersonationLayer {
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl ImpersonationLayer {
    /// A layer impersonating `caller`.
    pub fn new(caller: &Caller) -> Result<Self, ApiError> {
        Ok(ImpersonationLayer {
            headers: Arc::new(impersonation_headers(caller)?),
        })
    }
}

impl<S> Layer<S> for ImpersonationLayer {
    type Service = Impersonate<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Impersonate {
            inner,
            headers: self.headers.clone(),
        }
    }
}

/// The service of [`ImpersonationLayer`].
#[derive(Clone, Debug)]
pub struct Impersonate<S> {
    inner: S,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl<S, B> Service<Request<B>> for Impersonate<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let h = req.headers_mut();
        let stale: Vec<HeaderName> = h.keys().filter(|n| is_impersonation(n)).cloned().collect();
        for name in stale {
            h.remove(name);
        }
        for (name, value) in self.headers.iter() {
            h.append(name.clone(), value.clone());
        }
        self.inner.call(req)
    }
}

/// A client that makes every call of `base` as `caller`. Cheap: it shares `base`'s connection
/// pool and credentials; it spawns one buffer task that ends when the client is dropped.
pub(crate) fn impersonating_client(
    base: &kube::Client,
    caller: &Caller,
) -> Result<kube::Client, ApiError> {
    let layer = ImpersonationLayer::new(caller)?;
    let shared = base.clone();
    let send = tower::service_fn(move |req: Request<kube::client::Body>| {
        let shared = shared.clone();
        async move { shared.send(req).await }
    });
    Ok(kube::Client::new(
        layer.layer(send),
        base.default_namespace().to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn caller() -> Caller {
        Caller {
            user: "alice@example.com".into(),
            uid: Some("1234".into()),
            groups: vec!["system:authenticated".into(), "devs".into()],
            extra: BTreeMap::from([
                (
                    "authentication.kubernetes.io/credential-id".to_owned(),
                    vec!["X509SHA256=ab".to_owned()],
                ),
                ("scopes".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
                ("100%".to_owned(), vec!["p".to_owned()]),
            ]),
        }
    }

    fn pairs(h: &[(HeaderName, HeaderValue)]) -> Vec<(String, String)> {
        h.iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn headers_for_a_full_identity() {
        let h = impersonation_headers(&caller()).expect("valid identity");
        assert_eq!(
            pairs(&h),
            vec![
                ("impersonate-user".into(), "alice@example.com".into()),
                ("impersonate-group".into(), "system:authenticated".into()),
                ("impersonate-group".into(), "devs".into()),
                ("impersonate-uid".into(), "1234".into()),
                ("impersonate-extra-100%25".into(), "p".into()),
                (
                    "impersonate-extra-authentication.kubernetes.io%2fcredential-id".into(),
                    "X509SHA256=ab".into()
                ),
                ("impersonate-extra-scopes".into(), "a".into()),
                ("impersonate-extra-scopes".into(), "b".into()),
                (
                    "impersonate-extra-poddebug.dev%2fvia".into(),
                    "poddebug-apiserver".into()
                ),
            ]
        );
        // A caller's own value of the server's extra is dropped, never passed on.
        let mut forged = caller();
        forged.extra.insert(
            "poddebug.dev/via".to_owned(),
            vec!["poddebug-apiserver".to_owned()],
        );
        let h = pairs(&impersonation_headers(&forged).expect("valid identity"));
        assert_eq!(
            h.iter()
                .filter(|(n, _)| n.ends_with("poddebug.dev%2fvia"))
                .count(),
            1
        );
    }

    #[test]
    fn escape_matches_client_go() {
        assert_eq!(escape_extra_key("a/b c%d"), "a%2Fb%20c%25d");
        assert_eq!(escape_extra_key("scopes.example.com"), "scopes.example.com");
        assert_eq!(escape_extra_key("é"), "%C3%A9");
    }

    #[test]
    fn minimal_identity_and_unicode_names() {
        let c = Caller {
            user: "jürgen".into(),
            ..Default::default()
        };
        let h = impersonation_headers(&c).expect("utf-8 is sent raw");
        assert_eq!(h.len(), 2, "the user and the server's extra");
        assert_eq!(h[0].1.as_bytes(), "jürgen".as_bytes());
        assert!(impersonation_headers(&Caller::default()).is_err());
        let bad = Caller {
            user: "a\r\nAuthorization: x".into(),
            ..Default::default()
        };
        assert!(impersonation_headers(&bad).is_err());
    }

    #[tokio::test]
    async fn layer_replaces_impersonation_headers_and_keeps_the_rest() {
        let layer = ImpersonationLayer::new(&caller()).expect("layer");
        let seen = Arc::new(std::sync::Mutex::new(None));
        let seen2 = seen.clone();
        let inner = tower::service_fn(move |req: Request<()>| {
            let seen = seen2.clone();
            async move {
                if let Ok(mut s) = seen.lock() {
                    *s = Some(req.headers().clone());
                }
                Ok::<_, std::convert::Infallible>(())
            }
        });
        let mut svc = layer.layer(inner);
        let req = Request::builder()
            .header("impersonate-user", "mallory")
            .header("impersonate-group", "system:masters")
            .header("accept", "application/json")
            .body(())
            .expect("request");
        let _ = tower::ServiceExt::ready(&mut svc).await;
        let _ = svc.call(req).await;
        let headers = seen.lock().ok().and_then(|s| s.clone()).expect("called");
        let users: Vec<_> = headers.get_all("impersonate-user").iter().collect();
        assert_eq!(users, vec!["alice@example.com"]);
        let groups: Vec<_> = headers.get_all("impersonate-group").iter().collect();
        assert_eq!(groups, vec!["system:authenticated", "devs"]);
        assert_eq!(
            headers.get("accept").map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );
        assert!(headers.get("authorization").is_none());
    }
}
