//! `limit` and `continue` on lists, as kube-apiserver pages them.
//!
//! Items are ordered by namespace and pod (debug containers of a pod in their spec order,
//! which only grows at its end). A continue token is opaque to clients (base64url JSON) and
//! names the last item returned, the list's resourceVersion and when the list began: a later
//! page starts right after that item, so no item is skipped or repeated across pages, and it
//! shows the item's current state (the pages are not one snapshot; kube-apiserver's own
//! lists continued past compaction behave the same way). Every page carries the first page's
//! resourceVersion. A token older than [`CONTINUE_TTL`] (kube-apiserver's default etcd
//! compaction interval) is 410 Expired; one that does not decode is 400.

use std::time::Duration;

use base64::Engine;
use poddebug_types::{ApiError, PodDebugContainer, PodDebugContainerList};
use serde::{Deserialize, Serialize};

/// How long a continue token stays usable.
pub const CONTINUE_TTL: Duration = Duration::from_secs(5 * 60);

/// What a continue token holds.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Token {
    /// Format version.
    v: u8,
    /// The first page's resourceVersion.
    rv: String,
    /// Unix seconds when the first page was served.
    at: i64,
    /// Namespace, pod and name of the last item returned.
    ns: String,
    pod: String,
    name: String,
}

fn key(p: &PodDebugContainer) -> (String, String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.status
            .as_ref()
            .map(|s| s.pod_name.clone())
            .unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

fn encode(t: &Token) -> String {
    let json = serde_json::to_vec(t).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

fn invalid(why: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "invalid continue token: continue key is not valid: {why}"
    ))
}

fn decode(s: &str) -> Result<Token, ApiError> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|e| invalid(&e.to_string()))?;
    let t: Token = serde_json::from_slice(&raw).map_err(|e| invalid(&e.to_string()))?;
    if t.v != 1 {
        return Err(invalid(&format!("unrecognized version {}", t.v)));
    }
    Ok(t)
}

/// The `limit` parameter: none, or 0, means everything; anything but a number is 400.
pub fn parse_limit(value: Option<&str>) -> Result<Option<usize>, ApiError> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => {
            let n: i64 = v
                .parse()
                .map_err(|_| ApiError::BadRequest(format!("limit: invalid value {v:?}")))?;
            Ok(usize::try_from(n).ok().filter(|n| *n > 0))
        }
    }
}

/// Cut `list` to the page `continue_token` and `limit` select, setting `metadata.continue`
/// (and `remainingItemCount`) when items remain. `now` is Unix seconds.
pub fn page(
    list: &mut PodDebugContainerList,
    limit: Option<usize>,
    continue_token: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    let token = continue_token
        .filter(|t| !t.is_empty())
        .map(decode)
        .transpose()?;
    let (rv, at) = match &token {
        Some(t) => {
            let ttl = i64::try_from(CONTINUE_TTL.as_secs()).unwrap_or(i64::MAX);
            if now.saturating_sub(t.at) > ttl {
                return Err(ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list \
                     result. You can start a new list without the continue parameter.",
                ));
            }
            list.metadata.resource_version = Some(t.rv.clone());
            let last = (t.ns.clone(), t.pod.clone(), t.name.clone());
            let start = match list.items.iter().position(|p| key(p) == last) {
                Some(i) => i + 1,
                // The item is gone with its pod: resume at the next pod.
                None => list
                    .items
                    .iter()
                    .position(|p| {
                        let k = key(p);
                        (k.0, k.1) > (last.0.clone(), last.1.clone())
                    })
                    .unwrap_or(list.items.len()),
            };
            list.items.drain(..start);
            (t.rv.clone(), t.at)
        }
        None => (
            list.metadata.resource_version.clone().unwrap_or_default(),
            now,
        ),
    };
    list.metadata.continue_ = None;
    list.metadata.remaining_item_count = None;
    if let Some(limit) = limit
        && list.items.len() > limit
    {
        let remaining = list.items.len() - limit;
        list.items.truncate(limit);
        if let Some(last) = list.items.last() {
            let (ns, pod, name) = key(last);
            list.metadata.continue_ = Some(encode(&Token {
                v: 1,
                rv,
                at,
                ns,
                pod,
                name,
            }));
            list.metadata.remaining_item_count = i64::try_from(remaining).ok();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(ns: &str, pod: &str, name: &str) -> PodDebugContainer {
        let mut p = PodDebugContainer::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(name.into());
        p.status = Some(poddebug_types::PodDebugContainerStatus {
            pod_name: pod.into(),
            ..Default::default()
        });
        p
    }

    fn list(items: &[(&str, &str, &str)]) -> PodDebugContainerList {
        PodDebugContainerList::new(
            items.iter().map(|(n, p, d)| item(n, p, d)).collect(),
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta {
                resource_version: Some("42".into()),
                ..Default::default()
            },
        )
    }

    fn names(l: &PodDebugContainerList) -> Vec<String> {
        l.items.iter().map(|p| key(p).2).collect()
    }

    #[test]
    fn pages_cover_every_item_once_and_keep_the_first_resource_version() {
        let all = [
            ("a", "p1", "x"),
            ("a", "p1", "y"),
            ("a", "p2", "z"),
            ("b", "p1", "w"),
        ];
        let mut first = list(&all);
        page(&mut first, Some(2), None, 1000).unwrap();
        assert_eq!(names(&first), ["x", "y"]);
        assert_eq!(first.metadata.remaining_item_count, Some(2));
        let token = first.metadata.continue_.clone().unwrap();

        // Meanwhile a new item appears before the cut and the list moved on: nothing repeats.
        let mut second = list(&[
            ("a", "p0", "new"),
            ("a", "p1", "x"),
            ("a", "p1", "y"),
            ("a", "p2", "z"),
            ("b", "p1", "w"),
        ]);
        second.metadata.resource_version = Some("50".into());
        page(&mut second, Some(2), Some(&token), 1010).unwrap();
        assert_eq!(names(&second), ["z", "w"]);
        assert_eq!(second.metadata.continue_, None);
        assert_eq!(second.metadata.resource_version.as_deref(), Some("42"));

        // The same token gives the same page again (tokens are stable).
        let mut again = list(&all);
        page(&mut again, Some(2), Some(&token), 1020).unwrap();
        assert_eq!(names(&again), ["z", "w"]);

        // The last item's pod is gone: the next pod follows.
        let mut gone = list(&[("a", "p2", "z"), ("b", "p1", "w")]);
        page(&mut gone, Some(5), Some(&token), 1020).unwrap();
        assert_eq!(names(&gone), ["z", "w"]);
    }

    #[test]
    fn stale_and_malformed_tokens() {
        let mut first = list(&[("a", "p", "x"), ("a", "p", "y")]);
        page(&mut first, Some(1), None, 1000).unwrap();
        let token = first.metadata.continue_.clone().unwrap();
        let err = page(&mut list(&[]), None, Some(&token), 1000 + 301).unwrap_err();
        assert_eq!((err.code(), err.reason()), (410, "Expired"));
        let err = page(&mut list(&[]), None, Some("%%%"), 1000).unwrap_err();
        assert_eq!((err.code(), err.reason()), (400, "BadRequest"));
        assert!(err.message().starts_with("invalid continue token"));
        let err = page(&mut list(&[]), None, Some("e30"), 1000).unwrap_err();
        assert_eq!(err.code(), 400, "{{}} is not a token");
    }

    #[test]
    fn limits() {
        assert_eq!(parse_limit(None).unwrap(), None);
        assert_eq!(parse_limit(Some("0")).unwrap(), None);
        assert_eq!(parse_limit(Some("-3")).unwrap(), None);
        assert_eq!(parse_limit(Some("7")).unwrap(), Some(7));
        assert_eq!(parse_limit(Some("x")).unwrap_err().code(), 400);
    }
}
