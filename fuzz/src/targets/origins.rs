//! Origins as clients send them (`Origin`, `--allowed-origins`) and as the cluster publishes
//! its API server (a kubeconfig's `server`, a host and port).

use poddebug_apiserver::origin::Origin;

/// Invariants: parsing never panics; what parses serializes to a form that parses to the same
/// origin (canonical: a second round changes nothing), holds no path, query, fragment, user
/// information or whitespace, and keeps the scheme; a server URL's origin is an `https`
/// origin; `https(host, port)` of a parsed origin's host and port is that origin when it is an
/// `https` one.
pub fn run(input: &[u8]) {
    let s = String::from_utf8_lossy(input);
    if let Some(o) = Origin::parse(&s) {
        let text = o.to_string();
        assert_eq!(Origin::parse(&text).as_ref(), Some(&o), "{s:?} -> {text:?}");
        let (scheme, rest) = text.split_once("://").expect("scheme://");
        assert!(matches!(scheme, "http" | "https"), "{text:?}");
        assert_eq!(scheme, o.scheme());
        assert!(
            !rest.contains(['/', '?', '#', '@', '\\']) && !rest.chars().any(char::is_whitespace),
            "{s:?} -> {text:?}"
        );
        if scheme == "https" {
            let (host, port) = match rest.rsplit_once(':') {
                Some((h, p)) if !p.contains(']') => (h, p.parse::<u16>().expect("a port")),
                _ => (rest, 443),
            };
            assert_eq!(Origin::https(host, port).as_ref(), Some(&o), "{text:?}");
        }
    }
    if let Some(o) = Origin::of_server_url(&s) {
        assert_eq!(o.scheme(), "https", "{s:?}");
        assert_eq!(Origin::parse(&o.to_string()), Some(o));
    }
    let port = input.iter().take(2).fold(0u16, |acc, &b| {
        acc.wrapping_mul(256).wrapping_add(u16::from(b))
    });
    if let Some(o) = Origin::https(&s, port) {
        assert_eq!(Origin::parse(&o.to_string()), Some(o));
    }
}

/// Spellings of one origin, look-alikes, and what is no origin.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        "https://127.0.0.1:6443",
        "HTTPS://API.Example:443",
        "http://tools.example:80",
        "https://[FD00:0:0::0001]:6443",
        "https://[::1]",
        "https://bücher.example",
        "https://127.0.0.1:6443.evil.example",
        "https://evil.example@127.0.0.1:6443",
        "https://127.0.0.1:6443/apis",
        "https://127.0.0.1:6443\\@x",
        "https://0x7f.1:6443",
        "https://127.1",
        "https://%65vil.example",
        "https://rancher.example/k8s/clusters/c-1",
        "kubernetes.default.svc",
        "10.96.0.1",
        "null",
        "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
