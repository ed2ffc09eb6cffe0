//! Request lines: the method, path and query a client sends, as the authorizer and the
//! handlers parse them.

use http::Method;
use poddebug_apiserver::authz::{Attributes, request_attributes};
use poddebug_apiserver::handlers::selection::split_field_selector;
use poddebug_apiserver::query::query_map;
use poddebug_stream::request::{AttachOptions, LogRequest};

const METHODS: [Method; 7] = [
    Method::GET,
    Method::POST,
    Method::DELETE,
    Method::PUT,
    Method::PATCH,
    Method::HEAD,
    Method::OPTIONS,
];

const LOG_PARAMS: [&str; 6] = [
    "follow",
    "tailLines",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "limitBytes",
];

/// The first byte picks the method, the rest is `path?query` (lossily UTF-8, as a URI the
/// server received would be after its own checks).
///
/// Invariants: resource requests get one of the verbs kube-apiserver uses; attach options
/// re-encoded for the upstream parse back to the same options; the log query sent upstream
/// carries the container and every log parameter unchanged.
pub fn run(input: &[u8]) {
    let Some((&m, rest)) = input.split_first() else {
        return;
    };
    let method = &METHODS[usize::from(m) % METHODS.len()];
    let line = String::from_utf8_lossy(rest);
    let (path, query) = match line.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (&*line, None),
    };
    let q = query_map(query);
    let attrs = request_attributes(method, path, &q);
    if let Attributes::Resource { verb, .. } = &attrs {
        assert!(
            matches!(
                verb.as_str(),
                "get"
                    | "list"
                    | "watch"
                    | "create"
                    | "update"
                    | "patch"
                    | "delete"
                    | "deletecollection"
                    | "options"
            ),
            "verb {verb:?}"
        );
    }
    let _ = attrs.resource_label();

    if let Ok(opts) = AttachOptions::parse(&q) {
        let upstream = opts.upstream_query(&opts.container);
        let back = AttachOptions::parse(&query_map(Some(&upstream)))
            .expect("upstream attach query refused by our own parser");
        assert_eq!(back, opts, "attach options changed on the way upstream");
    }
    if let Ok(log) = LogRequest::parse(&q) {
        let container = log.container.clone();
        let upstream = query_map(Some(&log.upstream_query(&container)));
        assert_eq!(upstream.get("container"), Some(&container));
        for k in LOG_PARAMS {
            assert_eq!(upstream.get(k), q.get(k), "log parameter {k} changed");
        }
    }
    if let Some(fs) = q.get("fieldSelector") {
        let (_names, rest) = split_field_selector(fs);
        if let Some(rest) = rest {
            assert!(!rest.is_empty());
        }
    }
}

/// Paths and queries of every route, with encodings that matter.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        "\0/apis/poddebug.dev/v1alpha1/namespaces/default/pods/web/debug/dbg",
        "\x01/apis/poddebug.dev/v1alpha1/namespaces/default/pods/web/debug/dbg?dryRun=All",
        "\0/apis/poddebug.dev/v1alpha1/namespaces/default/pods/web/debug/dbg/attach?container=dbg&stdin=true&stdout=1&tty=T",
        "\0/apis/poddebug.dev/v1alpha1/namespaces/default/pods/web/debug/dbg/log?container=dbg&follow=true&tailLines=10&sinceTime=2024-01-01T00:00:00Z",
        "\0/apis/poddebug.dev/v1alpha1/namespaces/default/poddebugcontainers?watch=1&fieldSelector=metadata.name%3Dweb.dbg,spec.nodeName!=n",
        "\0/apis/poddebug.dev/v1alpha1/poddebugcontainers?watch=false&watch=true&resourceVersion=0",
        "\x02/apis/poddebug.dev/v1alpha1/namespaces/default/pods/web/debug/dbg",
        "\0/apis/poddebug.dev/v1alpha1/namespaces/a%2Fb/pods/%2e%2e/debug/x%00y",
        "\0/apis/poddebug.dev/v1alpha1/debugprofiles/general",
        "\0/apis/poddebug.dev/v1alpha1/namespaces/ns",
        "\0/apis/poddebug.dev/v1alpha1/namespaces/default/pods/web/debug/dbg/attach?container=a+b%2Bc&stdin=yes",
        "\0/openapi/v2?timeout=32s",
        "\0/healthz",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
