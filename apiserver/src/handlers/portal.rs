//! The debugging portal: a single-page app under `/apis/poddebug.dev/v1alpha1/portal/`, built
//! from `portal/` and embedded in the binary. The page holds no credentials: every call it makes
//! goes back through the origin that served it (kubectl proxy, or an authenticating proxy), so
//! kube-apiserver and this server authorize each one as the user.
//!
//! kube-apiserver authorizes these paths as resource `portal` of `poddebug.dev`: `list` for
//! `portal/` (no name), `get` for `portal/FILE`, and the handler chain asks the same of its
//! SubjectAccessReview, so the user roles grant both.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use poddebug_types::ApiError;
use sha2::{Digest, Sha256};

use crate::error::Error;

/// The Content-Security-Policy of every portal response: scripts, styles and connections only
/// to the page's own origin (WebSockets included: CSP 3 lets `'self'` match `ws:`/`wss:` on
/// the same host), nothing inline, no frames, no forms posted anywhere, no plugins.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; font-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Assets are revalidated on every load (their names carry no version), answered 304 when the
/// ETag still matches; `private` because the answer depends on who is authorized.
const CACHE_CONTROL: &str = "private, no-cache";

/// One embedded file.
pub struct Asset {
    /// The file name under `portal/`.
    pub name: &'static str,
    /// Its media type.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

/// Every file the portal serves, from `portal/dist/` (built by `npm run build` in `portal/`).
pub const ASSETS: [Asset; 4] = [
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../../../portal/dist/index.html"),
    },
    Asset {
        name: "portal.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../portal/dist/portal.js"),
    },
    Asset {
        name: "portal.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../../portal/dist/portal.css"),
    },
    Asset {
        name: "licenses.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../../../portal/dist/licenses.txt"),
    },
];

/// Strong ETags of [`ASSETS`], in the same order.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
            format!("\"{hex}\"")
        })
        .collect()
});

/// `GET …/portal`: the page lives at `…/portal/` (relative URLs of its assets need the slash).
/// The redirect is relative, so it holds behind any proxy prefix.
pub async fn redirect() -> Response {
    let mut resp = StatusCode::MOVED_PERMANENTLY.into_response();
    resp.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("portal/"));
    security_headers(resp.headers_mut());
    resp
}

/// `GET …/portal/`: the page.
pub async fn index(headers: HeaderMap) -> Result<Response, Error> {
    serve("index.html", &headers)
}

/// `GET …/portal/FILE`: an asset.
pub async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Result<Response, Error> {
    serve(&file, &headers)
}

fn serve(file: &str, headers: &HeaderMap) -> Result<Response, Error> {
    let Some(i) = ASSETS.iter().position(|a| a.name == file) else {
        return Err(Error::Api(ApiError::not_found(
            "portal",
            "poddebug.dev",
            file,
        )));
    };
    let asset = &ASSETS[i];
    let etag = &ETAGS[i];
    let fresh = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/") == etag
        });
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, asset.body).into_response()
    };
    let h = resp.headers_mut();
    if !fresh {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
    }
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    security_headers(h);
    Ok(resp)
}

fn security_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sources `portal/build.mjs` digests, in the same order and framing.
    fn source_digest(root: &std::path::Path) -> String {
        let mut files: Vec<String> = vec![
            "build.mjs".to_owned(),
            "package.json".to_owned(),
            "package-lock.json".to_owned(),
        ];
        let src = std::fs::read_dir(root.join("src")).expect("portal/src");
        for entry in src {
            let entry = entry.expect("a portal/src entry");
            files.push(format!("src/{}", entry.file_name().to_string_lossy()));
        }
        files.sort();
        let mut hash = Sha256::new();
        for f in &files {
            let bytes = std::fs::read(root.join(f)).unwrap_or_else(|e| panic!("read {f}: {e}"));
            hash.update(format!("{f}\n{}\n", bytes.len()).as_bytes());
            hash.update(&bytes);
        }
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn built_assets_match_their_sources() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../portal");
        let recorded = include_str!("../../../portal/dist/SOURCES.sha256").trim();
        assert_eq!(
            source_digest(&root),
            recorded,
            "portal/dist is stale: run `npm ci && npm run build` in portal/ and commit portal/dist"
        );
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        let index = std::str::from_utf8(ASSETS[0].body).expect("index.html is UTF-8");
        assert!(index.contains("src=\"portal.js\""), "{index}");
        assert!(index.contains("href=\"portal.css\""), "{index}");
        // No inline script or style, nothing from another origin.
        assert!(!index.contains("<style"), "{index}");
        assert_eq!(index.matches("<script").count(), 1, "{index}");
        assert!(
            !index.contains("//"),
            "no absolute or protocol-relative URLs: {index}"
        );
    }

    #[tokio::test]
    async fn assets_carry_type_policy_and_validators() {
        let resp = serve("portal.js", &HeaderMap::new()).expect("portal.js");
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(h[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
        assert_eq!(h[header::CACHE_CONTROL], CACHE_CONTROL);
        let etag = h[header::ETAG].clone();

        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        let resp = serve("portal.js", &again).expect("portal.js revalidated");
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED);

        let err = serve("nothing.js", &HeaderMap::new()).expect_err("an unknown file");
        assert_eq!(err.api_error().code(), 404);
    }
}
