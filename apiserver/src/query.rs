//! The query string as kube-apiserver reads it: the first value of each parameter.

use std::collections::BTreeMap;

use axum::extract::Request;

/// Query parameters as a map (first value wins).
pub fn query_map(query: Option<&str>) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Some(q) = query {
        for (k, v) in form_urlencoded_pairs(q) {
            m.entry(k).or_insert(v);
        }
    }
    m
}

/// A boolean query parameter as kube-apiserver converts it into its options
/// (`runtime.Convert_Slice_string_To_bool`): only an absent parameter, `false` (any case) and
/// `0` are false; any other value, the empty one included, is true. `follow=` follows.
pub fn kube_bool(value: Option<&String>) -> bool {
    value.is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

fn form_urlencoded_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

/// Drop every repeated query parameter but its first occurrence, before anything reads the
/// query. kube-apiserver (Go's `url.Values.Get`) and our authorizer take the first value, while
/// axum's `Query` would take the last: `?watch=false&watch=true` must not be authorized as a
/// list and served as a watch.
pub fn keep_first_query_values(req: &mut Request) {
    let Some(q) = req.uri().query() else { return };
    let mut seen = std::collections::HashSet::new();
    let kept: Vec<&str> = q
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            let key = percent_encoding::percent_decode_str(&key.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned();
            seen.insert(key)
        })
        .collect();
    let new_query = kept.join("&");
    if new_query == q {
        return;
    }
    let path = req.uri().path();
    let pq = if new_query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{new_query}")
    };
    let mut parts = req.uri().clone().into_parts();
    if let Ok(pq) = http::uri::PathAndQuery::try_from(pq) {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_query_parameters_keep_their_first_value() {
        let mut req = Request::builder()
            .uri("/apis/x?watch=false&labelSelector=a%3Db&watch=true&w%61tch=1")
            .body(axum::body::Body::empty())
            .unwrap();
        keep_first_query_values(&mut req);
        assert_eq!(req.uri().query(), Some("watch=false&labelSelector=a%3Db"));
        let mut plain = Request::builder()
            .uri("/healthz")
            .body(axum::body::Body::empty())
            .unwrap();
        keep_first_query_values(&mut plain);
        assert_eq!(plain.uri(), "/healthz");
    }

    #[test]
    fn booleans_are_read_as_kube_apiserver_converts_them() {
        let q = query_map(Some("a=&b=0&c=FALSE&d=true&e=yes&f=False&g=1"));
        let got: Vec<bool> = ["a", "b", "c", "d", "e", "f", "g", "absent"]
            .iter()
            .map(|k| kube_bool(q.get(*k)))
            .collect();
        assert_eq!(got, [true, false, false, true, true, false, true, false]);
    }

    #[test]
    fn query_parsing_decodes() {
        let q = query_map(Some("labelSelector=app%3Dweb&watch=true&x=a+b&watch=false"));
        assert_eq!(q["labelSelector"], "app=web");
        assert_eq!(q["watch"], "true");
        assert_eq!(q["x"], "a b");
    }
}
