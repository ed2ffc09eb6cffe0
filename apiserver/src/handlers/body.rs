//! Reading request bodies within the size limit.

use axum::body::Body;
use bytes::Bytes;
use http::HeaderMap;
use poddebug_types::ApiError;

/// Read the whole body, or 413 if it is larger than `limit` bytes.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
            || e.to_string().contains("length limit");
        if too_large {
            ApiError::RequestEntityTooLarge(format!(
                "the request body is larger than the limit of {limit} bytes"
            ))
        } else {
            ApiError::BadRequest("reading the request body failed".to_owned())
        }
    })
}

/// Bodies are JSON and must say so: a body of any other declared type, or of none, is answered
/// 415 as kube-apiserver answers an unknown media type.
///
/// A body without `Content-Type` is what a page on another origin can make a browser send with
/// no preflight (`fetch(url, {method: 'POST', mode: 'no-cors', body: blob})`), so it is not
/// taken as JSON. One exception keeps `kubectl create --raw -f FILE` working: kubectl (1.32
/// observed) sends that body without a `Content-Type`, so a request whose `User-Agent` is
/// kubectl's and that carries neither `Origin` nor `Sec-Fetch-Site` (which every browser
/// request with a body has, and no page can remove or forge) is read as JSON.
pub fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(ct) = headers.get(http::header::CONTENT_TYPE) else {
        if is_kubectl_raw(headers) {
            return Ok(());
        }
        return Err(unsupported("no Content-Type was sent"));
    };
    let media = ct
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media == "application/json" {
        return Ok(());
    }
    Err(unsupported(&format!("got {media:?}")))
}

/// [`require_json`] for a body that may be absent (a `DELETE`'s options): an empty body needs
/// no type.
pub fn require_json_if_any(headers: &HeaderMap, body: &[u8]) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    require_json(headers)
}

/// kubectl's raw requests (module docs of [`require_json`]).
fn is_kubectl_raw(headers: &HeaderMap) -> bool {
    let from_kubectl = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("kubectl/"));
    from_kubectl && !headers.contains_key("origin") && !headers.contains_key("sec-fetch-site")
}

fn unsupported(what: &str) -> ApiError {
    ApiError::UnsupportedMediaType(format!(
        "the body of the request was in an unknown format - accepted media types include: \
         application/json ({what})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_declared_json_bodies_are_accepted() {
        assert!(
            require_json(&headers(&[(
                "content-type",
                "application/json; charset=utf-8"
            )]))
            .is_ok()
        );
        assert!(require_json(&headers(&[("content-type", "Application/JSON")])).is_ok());
        for other in [
            "application/yaml",
            "text/plain",
            "*/*",
            "application/x-www-form-urlencoded",
            "",
        ] {
            let e = require_json(&headers(&[("content-type", other)])).unwrap_err();
            assert_eq!(
                (e.code(), e.reason()),
                (415, "UnsupportedMediaType"),
                "{other}"
            );
        }
        let e = require_json(&HeaderMap::new()).unwrap_err();
        assert_eq!(e.code(), 415);
        assert!(
            e.message().ends_with("(no Content-Type was sent)"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn kubectl_raw_bodies_without_a_type_are_json_unless_a_browser_sent_them() {
        let kubectl = [(
            "user-agent",
            "kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07",
        )];
        assert!(require_json(&headers(&kubectl)).is_ok());
        for browser in [
            ("origin", "http://127.0.0.1:9999"),
            ("sec-fetch-site", "same-origin"),
        ] {
            let e = require_json(&headers(&[kubectl[0], browser])).unwrap_err();
            assert_eq!(e.code(), 415, "{browser:?}");
        }
        assert!(require_json(&headers(&[("user-agent", "curl/8.0")])).is_err());
    }

    #[test]
    fn an_empty_optional_body_needs_no_type() {
        assert!(require_json_if_any(&HeaderMap::new(), b"").is_ok());
        assert!(require_json_if_any(&HeaderMap::new(), b" \n").is_ok());
        assert!(require_json_if_any(&HeaderMap::new(), b"{}").is_err());
    }
}
