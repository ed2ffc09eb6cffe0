//! Web origins (RFC 6454): a scheme, a host and a port, in one canonical form so that two
//! spellings of the same origin compare equal and nothing else does.
//!
//! Canonical means what a browser would serialize: the scheme and a host name lower-cased (a
//! host name in IDNA form), an IPv4 address in dotted decimal, an IPv6 address compressed and
//! bracketed, and the port always known (`https://h` and `https://h:443` are one origin). Only
//! `http` and `https` origins exist here; anything else (`null`, a path, user information, a
//! port that is not a number, as in `https://127.0.0.1:6443.evil.example`) is not an origin.

use std::fmt;
use std::net::IpAddr;

/// A canonical web origin.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// An origin as a client sends it in an `Origin` header or as `--allowed-origins` names
    /// it: `scheme://host[:port]` and nothing more. `None` for anything else.
    pub fn parse(text: &str) -> Option<Origin> {
        let text = text.trim();
        // The URL parser forgives what an origin never holds (tabs and newlines are removed,
        // `\` is read as `/`); refuse them before it sees them.
        if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return None;
        }
        let (_, rest) = text.split_once("://")?;
        if rest.is_empty() || rest.contains(['/', '\\', '?', '#', '@']) {
            return None;
        }
        Origin::of_url(&url::Url::parse(text).ok()?)
    }

    /// The origin of a server URL such as a kubeconfig's `server` (`https://host[:port][/path]`;
    /// a path prefix is not part of the origin). `None` unless it is an `https` URL with a host
    /// and without user information.
    pub fn of_server_url(text: &str) -> Option<Origin> {
        let url = url::Url::parse(text.trim()).ok()?;
        if url.scheme() != "https" || url.query().is_some() || url.fragment().is_some() {
            return None;
        }
        Origin::of_url(&url.join("/").ok()?)
    }

    /// `https://host:port` for a host name or an IP address (IPv6 with or without brackets).
    pub fn https(host: &str, port: u16) -> Option<Origin> {
        let bare = host.trim().trim_start_matches('[').trim_end_matches(']');
        let host = match bare.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
            Ok(IpAddr::V4(ip)) => ip.to_string(),
            Err(_) => bare.to_owned(),
        };
        Origin::parse(&format!("https://{host}:{port}"))
    }

    fn of_url(url: &url::Url) -> Option<Origin> {
        let scheme = url.scheme();
        if !matches!(scheme, "http" | "https")
            || !url.username().is_empty()
            || url.password().is_some()
            || url.path() != "/"
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return None;
        }
        let host = url.host_str().filter(|h| !h.is_empty())?;
        Some(Origin {
            scheme: scheme.to_owned(),
            host: host.to_owned(),
            port: url.port_or_known_default()?,
        })
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }
}

/// The serialization browsers send: the port left out when it is the scheme's default.
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = if self.scheme == "https" { 443 } else { 80 };
        if self.port == default {
            write!(f, "{}://{}", self.scheme, self.host)
        } else {
            write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(s: &str) -> Origin {
        Origin::parse(s).unwrap_or_else(|| panic!("{s:?} is an origin"))
    }

    #[test]
    fn spellings_of_one_origin_are_equal() {
        for (a, b) in [
            ("https://127.0.0.1:6443", "HTTPS://127.0.0.1:6443"),
            ("https://api.example", "https://API.Example:443"),
            ("https://api.example", " https://api.example "),
            ("http://tools.example", "HTTP://Tools.Example:80"),
            ("https://[fd00::1]:6443", "https://[FD00:0:0::0001]:6443"),
            ("https://[::1]", "https://[0:0:0:0:0:0:0:1]:443"),
            ("https://xn--bcher-kva.example", "https://bücher.example"),
        ] {
            assert_eq!(o(a), o(b), "{a} = {b}");
        }
        assert_eq!(
            o("https://API.example:443").to_string(),
            "https://api.example"
        );
        assert_eq!(
            o("https://[FD00::1]:6443").to_string(),
            "https://[fd00::1]:6443"
        );
        assert_eq!(
            o("http://x.example:8080").to_string(),
            "http://x.example:8080"
        );
    }

    #[test]
    fn different_origins_differ() {
        let api = o("https://127.0.0.1:6443");
        for other in [
            "http://127.0.0.1:6443",
            "https://127.0.0.1",
            "https://127.0.0.1:6444",
            "https://127.0.0.2:6443",
            "https://localhost:6443",
            "https://[::1]:6443",
        ] {
            assert_ne!(api, o(other), "{other}");
        }
        // A default port belongs to its scheme only.
        assert_ne!(o("https://x.example:80"), o("http://x.example"));
        assert_ne!(o("http://x.example:443"), o("https://x.example"));
    }

    #[test]
    fn what_is_not_an_origin() {
        for bad in [
            "",
            "null",
            "127.0.0.1:6443",
            "https://127.0.0.1:6443.evil.example",
            "https://127.0.0.1:6443/",
            "https://127.0.0.1:6443/apis",
            "https://127.0.0.1:6443?x",
            "https://127.0.0.1:6443#x",
            "https://evil.example@127.0.0.1:6443",
            "https://127.0.0.1:6443\\@evil.example",
            "https://127.0.0.1\t:6443",
            "https://127.0.0.1:6443\nx",
            "https://127.0.0.1:99999",
            "https://",
            "https://:6443",
            "file:///etc/passwd",
            "ws://127.0.0.1:6443",
            "chrome-extension://abcdef",
        ] {
            assert_eq!(Origin::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_origin_of_a_server_url() {
        for (url, origin) in [
            ("https://127.0.0.1:6443", "https://127.0.0.1:6443"),
            ("https://API.example:443/", "https://api.example"),
            (
                "https://rancher.example/k8s/clusters/c-1",
                "https://rancher.example",
            ),
            ("https://[fd00::1]:6443", "https://[fd00::1]:6443"),
        ] {
            assert_eq!(Origin::of_server_url(url), Some(o(origin)), "{url}");
        }
        for bad in [
            "http://127.0.0.1:8080",
            "https://user:pw@api.example",
            "api.example:6443",
            "",
        ] {
            assert_eq!(Origin::of_server_url(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn https_of_a_host_and_port() {
        assert_eq!(
            Origin::https("10.96.0.1", 443),
            Some(o("https://10.96.0.1"))
        );
        assert_eq!(
            Origin::https("FD00::0010", 6443),
            Some(o("https://[fd00::10]:6443"))
        );
        assert_eq!(
            Origin::https("[fd00::10]", 6443),
            Some(o("https://[fd00::10]:6443"))
        );
        assert_eq!(
            Origin::https("kubernetes.default.svc", 443),
            Some(o("https://kubernetes.default.svc"))
        );
        assert_eq!(Origin::https("evil.example/x", 443), None);
        assert_eq!(Origin::https("", 443), None);
    }
}
