//! An attach or log request as the relay serves it, parsed once: which upgrade it asks for, its
//! options and the session mode it asks for ([`AttachRequest`]), the log options
//! ([`LogRequest`]); which headers cross the proxy in each direction (an allowlist: nothing else
//! ever reaches the upstream, so the client's `Authorization`, `Impersonate-*` and `X-Remote-*`
//! cannot); and what the upstream's 101 says about the framing ([`Negotiated`]).

use std::collections::BTreeMap;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Version};
use poddebug_types::{ApiError, SessionMode};

/// `X-Stream-Protocol-Version` (SPDY negotiation).
pub const X_STREAM_PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static("x-stream-protocol-version");
/// `X-Accepted-Stream-Protocol-Versions` (the 403 of a failed SPDY negotiation).
pub const X_ACCEPTED_STREAM_PROTOCOL_VERSIONS: HeaderName =
    HeaderName::from_static("x-accepted-stream-protocol-versions");

/// The upgrade a client asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeKind {
    /// RFC 6455 WebSocket (GET), k8s channel subprotocols.
    WebSocket,
    /// SPDY/3.1 (client-go's POST, or GET).
    Spdy,
}

fn tokens(headers: &HeaderMap, name: &HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// What upgrade the request asks for; 400 with a clear message when it cannot be served.
pub fn classify(
    method: &Method,
    version: Version,
    headers: &HeaderMap,
) -> Result<UpgradeKind, ApiError> {
    if version != Version::HTTP_11 && version != Version::HTTP_10 {
        return Err(ApiError::BadRequest(format!(
            "attach needs a connection upgrade, which {version:?} cannot carry: connect over HTTP/1.1 (ALPN http/1.1)"
        )));
    }
    let connection_upgrade = tokens(headers, &header::CONNECTION)
        .iter()
        .any(|t| t.eq_ignore_ascii_case("upgrade"));
    let upgrade = tokens(headers, &header::UPGRADE);
    if !connection_upgrade || upgrade.is_empty() {
        return Err(ApiError::BadRequest("Upgrade request required".to_owned()));
    }
    if upgrade.iter().any(|u| u.eq_ignore_ascii_case("websocket")) {
        if method != Method::GET {
            return Err(ApiError::BadRequest(format!(
                "a WebSocket upgrade must use GET, not {method}"
            )));
        }
        if headers.get(header::SEC_WEBSOCKET_KEY).is_none() {
            return Err(ApiError::BadRequest(
                "the WebSocket upgrade has no Sec-WebSocket-Key header".to_owned(),
            ));
        }
        return Ok(UpgradeKind::WebSocket);
    }
    if upgrade.iter().any(|u| u.eq_ignore_ascii_case("SPDY/3.1")) {
        return Ok(UpgradeKind::Spdy);
    }
    Err(ApiError::BadRequest(format!(
        "unsupported upgrade {:?}: attach speaks WebSocket (subprotocols v5.channel.k8s.io, \
         v4.channel.k8s.io and their base64 variants) or SPDY/3.1",
        upgrade.join(", ")
    )))
}

/// Copy every line of `name` from `from` to `to`, unchanged.
fn copy_all(from: &HeaderMap, to: &mut HeaderMap, name: &HeaderName) {
    for v in from.get_all(name) {
        to.append(name.clone(), v.clone());
    }
}

/// Whether `p` is one of the remote-command subprotocols (`v5.channel.k8s.io`,
/// `v4.base64.channel.k8s.io`, `channel.k8s.io`, ...).
fn is_channel_protocol(p: &str) -> bool {
    let rest = match p.split_once('.') {
        Some((v, rest))
            if v.len() > 1 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            rest
        }
        _ => p,
    };
    let rest = rest.strip_prefix("base64.").unwrap_or(rest);
    rest == "channel.k8s.io"
}

/// Copy the offered WebSocket subprotocols that are remote-command ones: never a bearer-token
/// one (authentication removes it already, and a credential must not reach kube-apiserver even
/// if that ever changed), an attach ticket (meant for this server alone), or one poddebug could
/// not terminate.
fn copy_subprotocols(from: &HeaderMap, to: &mut HeaderMap) {
    let offered: Vec<&str> = from
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| is_channel_protocol(p))
        .collect();
    if !offered.is_empty()
        && let Ok(v) = HeaderValue::from_str(&offered.join(", "))
    {
        to.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
    }
}

/// The headers of the upstream upgrade request: `Connection: Upgrade`, the client's `Upgrade`,
/// and the protocol's negotiation headers unchanged. Nothing else of the client's request.
pub fn upstream_headers(client: &HeaderMap, kind: UpgradeKind) -> HeaderMap {
    let mut out = HeaderMap::new();
    out.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    copy_all(client, &mut out, &header::UPGRADE);
    match kind {
        UpgradeKind::WebSocket => {
            copy_all(client, &mut out, &header::SEC_WEBSOCKET_KEY);
            copy_all(client, &mut out, &header::SEC_WEBSOCKET_VERSION);
            copy_subprotocols(client, &mut out);
        }
        UpgradeKind::Spdy => copy_all(client, &mut out, &X_STREAM_PROTOCOL_VERSION),
    }
    copy_all(client, &mut out, &header::USER_AGENT);
    out
}

/// The headers of our 101 to the client, taken from the upstream's 101.
pub fn switching_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in [
        header::CONNECTION,
        header::UPGRADE,
        header::SEC_WEBSOCKET_ACCEPT,
        header::SEC_WEBSOCKET_PROTOCOL,
        X_STREAM_PROTOCOL_VERSION,
    ] {
        copy_all(upstream, &mut out, &name);
    }
    out
}

/// The headers of a refused upgrade (or failed log request) worth passing on with its body.
pub fn refusal_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in [
        header::RETRY_AFTER,
        header::WARNING,
        X_ACCEPTED_STREAM_PROTOCOL_VERSIONS,
    ] {
        copy_all(upstream, &mut out, &name);
    }
    out
}

/// The framing the stream will carry, from the upstream's 101.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The upgrade.
    pub kind: UpgradeKind,
    /// The chosen subprotocol (`v5.channel.k8s.io`, ...), empty if none was named.
    pub protocol: String,
}

impl Negotiated {
    /// Read the upstream's choice.
    pub fn from_switching(kind: UpgradeKind, upstream: &HeaderMap) -> Negotiated {
        let name = match kind {
            UpgradeKind::WebSocket => header::SEC_WEBSOCKET_PROTOCOL,
            UpgradeKind::Spdy => X_STREAM_PROTOCOL_VERSION,
        };
        let protocol = upstream
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .trim()
            .to_owned();
        Negotiated { kind, protocol }
    }

    /// Whether WebSocket messages are base64 text frames.
    pub fn base64(&self) -> bool {
        self.kind == UpgradeKind::WebSocket && self.protocol.contains("base64.")
    }

    /// Whether the error channel carries a JSON `Status` (v4 and v5), else plain text.
    pub fn status_errors(&self) -> bool {
        self.protocol.starts_with("v4.") || self.protocol.starts_with("v5.")
    }

    /// `websocket/v5.channel.k8s.io`, `spdy/v4.channel.k8s.io` (for logs).
    pub fn label(&self) -> String {
        let kind = match self.kind {
            UpgradeKind::WebSocket => "websocket",
            UpgradeKind::Spdy => "spdy",
        };
        if self.protocol.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}/{}", self.protocol)
        }
    }
}

/// A boolean query parameter as kube-apiserver converts it into its options
/// (`runtime.Convert_Slice_string_To_bool`): only an absent parameter, `false` (any case) and
/// `0` are false; any other value, the empty one included, is true. `follow=` follows.
pub fn kube_bool(value: Option<&str>) -> bool {
    value.is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Go's `strconv.ParseBool`.
fn parse_bool(key: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(ApiError::BadRequest(format!(
            "invalid value {value:?} for query parameter {key}: must be a boolean"
        ))),
    }
}

fn container_param(query: &BTreeMap<String, String>, what: &str) -> Result<String, ApiError> {
    match query
        .get("container")
        .map(|c| c.trim())
        .filter(|c| !c.is_empty())
    {
        Some(c) => Ok(c.to_owned()),
        None => Err(ApiError::BadRequest(format!(
            "a container name must be specified with ?container=NAME: {what} works only on debug (ephemeral) containers"
        ))),
    }
}

fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, crate::URL_COMPONENT).to_string()
}

/// `PodAttachOptions` from the query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachOptions {
    /// The debug container the client named.
    pub container: String,
    /// Attach stdin.
    pub stdin: bool,
    /// Attach stdout.
    pub stdout: bool,
    /// Attach stderr.
    pub stderr: bool,
    /// The container has a TTY.
    pub tty: bool,
}

impl AttachOptions {
    /// Parse and check the options.
    pub fn parse(query: &BTreeMap<String, String>) -> Result<AttachOptions, ApiError> {
        let flag = |k: &str| parse_bool(k, query.get(k).map(String::as_str).unwrap_or(""));
        let opts = AttachOptions {
            container: container_param(query, "attach")?,
            stdin: flag("stdin")?,
            stdout: flag("stdout")?,
            stderr: flag("stderr")?,
            tty: flag("tty")?,
        };
        if !opts.stdin && !opts.stdout && !opts.stderr {
            return Err(ApiError::BadRequest(
                "you must specify at least 1 of stdin, stdout, stderr".to_owned(),
            ));
        }
        Ok(opts)
    }

    /// The core attach query for the ephemeral container `container`.
    pub fn upstream_query(&self, container: &str) -> String {
        let mut q = format!("container={}", encode(container));
        for (k, on) in [
            ("stdin", self.stdin),
            ("stdout", self.stdout),
            ("stderr", self.stderr),
            ("tty", self.tty),
        ] {
            if on {
                q.push_str(&format!("&{k}=true"));
            }
        }
        q
    }
}

/// An attach request, parsed once: the handler authorizes it, the relay serves it.
#[derive(Clone, Debug)]
pub struct AttachRequest {
    /// The upgrade asked for.
    pub upgrade: UpgradeKind,
    /// `GET` (WebSocket, or SPDY) or `POST` (SPDY).
    pub method: Method,
    /// `PodAttachOptions`.
    pub options: AttachOptions,
    /// The session mode asked for with `mode=` (none: the server decides).
    pub mode: Option<SessionMode>,
    /// The headers of the upstream upgrade request ([`upstream_headers`]).
    pub upstream_headers: HeaderMap,
}

impl AttachRequest {
    /// Parse and check an attach request: an upgrade over HTTP/1.1, valid options, a valid
    /// mode.
    pub fn parse(
        method: &Method,
        version: Version,
        headers: &HeaderMap,
        query: &BTreeMap<String, String>,
    ) -> Result<AttachRequest, ApiError> {
        let upgrade = classify(method, version, headers)?;
        let options = AttachOptions::parse(query)?;
        let mode = match query.get("mode").map(String::as_str).filter(|m| !m.is_empty()) {
            None => None,
            Some(m) => Some(SessionMode::parse_requested(m).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "mode: unsupported value {m:?}: supported values: \"peer\", \"observer\", \"moderator\""
                ))
            })?),
        };
        Ok(AttachRequest {
            upgrade,
            method: method.clone(),
            options,
            mode,
            upstream_headers: upstream_headers(headers, upgrade),
        })
    }

    /// The core attach query for the ephemeral container `container`.
    pub fn upstream_query(&self, container: &str) -> String {
        self.options.upstream_query(container)
    }
}

/// A log request, parsed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRequest {
    /// The container the client named.
    pub container: String,
    /// Whether the client follows the log (`follow=true`).
    pub follow: bool,
    /// The `pods/log` options passed upstream.
    params: Vec<(&'static str, String)>,
}

impl LogRequest {
    /// Parse the query of a log request.
    pub fn parse(query: &BTreeMap<String, String>) -> Result<LogRequest, ApiError> {
        let container = container_param(query, "log")?;
        let follow = kube_bool(query.get("follow").map(String::as_str));
        let params = LOG_PARAMS
            .iter()
            .filter_map(|k| query.get(*k).map(|v| (*k, v.clone())))
            .collect();
        Ok(LogRequest {
            container,
            follow,
            params,
        })
    }

    /// The core log query for the container `container`.
    pub fn upstream_query(&self, container: &str) -> String {
        let mut q = format!("container={}", encode(container));
        for (k, v) in &self.params {
            q.push_str(&format!("&{k}={}", encode(v)));
        }
        q
    }
}

/// The `pods/log` parameters passed upstream unchanged (the upstream validates them).
const LOG_PARAMS: [&str; 6] = [
    "follow",
    "tailLines",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "limitBytes",
];

/// Whether a body is a Kubernetes `Status` object.
pub fn is_status(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .is_some_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        h
    }

    #[test]
    fn classifies_upgrades() {
        let ws = headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-key", "k"),
        ]);
        assert_eq!(
            classify(&Method::GET, Version::HTTP_11, &ws),
            Ok(UpgradeKind::WebSocket)
        );
        assert!(classify(&Method::POST, Version::HTTP_11, &ws).is_err());
        let spdy = headers(&[("connection", "Upgrade"), ("upgrade", "SPDY/3.1")]);
        assert_eq!(
            classify(&Method::POST, Version::HTTP_11, &spdy),
            Ok(UpgradeKind::Spdy)
        );
        let err = classify(&Method::POST, Version::HTTP_11, &HeaderMap::new()).unwrap_err();
        assert_eq!(err.message(), "Upgrade request required");
        let err = classify(&Method::GET, Version::HTTP_2, &ws).unwrap_err();
        assert!(err.message().contains("HTTP/1.1"), "{}", err.message());
        let h2c = headers(&[("connection", "Upgrade"), ("upgrade", "h2c")]);
        assert!(
            classify(&Method::GET, Version::HTTP_11, &h2c)
                .unwrap_err()
                .message()
                .contains("unsupported upgrade")
        );
    }

    #[test]
    fn only_protocol_headers_go_upstream() {
        let client = headers(&[
            ("connection", "Upgrade"),
            ("upgrade", "SPDY/3.1"),
            ("x-stream-protocol-version", "v5.channel.k8s.io"),
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ("authorization", "Bearer secret"),
            ("impersonate-user", "admin"),
            ("x-remote-user", "admin"),
            ("cookie", "a=b"),
            ("user-agent", "kubectl/v1.32"),
        ]);
        let up = upstream_headers(&client, UpgradeKind::Spdy);
        let names: Vec<&str> = up.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "connection",
                "upgrade",
                "x-stream-protocol-version",
                "user-agent"
            ]
        );
        assert_eq!(up.get_all("x-stream-protocol-version").iter().count(), 2);

        let client = headers(&[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-key", "abc"),
            ("sec-websocket-version", "13"),
            (
                "sec-websocket-protocol",
                "v5.channel.k8s.io, v4.channel.k8s.io",
            ),
            ("sec-websocket-extensions", "permessage-deflate"),
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
        ]);
        let up = upstream_headers(&client, UpgradeKind::WebSocket);
        assert_eq!(
            up.get("sec-websocket-protocol").map(|v| v.as_bytes()),
            Some(b"v5.channel.k8s.io, v4.channel.k8s.io".as_slice())
        );
        assert!(up.get("sec-websocket-extensions").is_none());
        assert!(up.get("x-stream-protocol-version").is_none());

        let client = headers(&[
            ("upgrade", "websocket"),
            (
                "sec-websocket-protocol",
                "base64url.bearer.authorization.k8s.io.dG9rZW4, v5.channel.k8s.io, ticket.poddebug.dev.v1.1.x, v4.base64.channel.k8s.io, x.channel.k8s.io, channel.k8s.io",
            ),
        ]);
        let up = upstream_headers(&client, UpgradeKind::WebSocket);
        assert_eq!(
            up.get("sec-websocket-protocol").map(|v| v.as_bytes()),
            Some(b"v5.channel.k8s.io, v4.base64.channel.k8s.io, channel.k8s.io".as_slice()),
            "only remote-command subprotocols go upstream"
        );
    }

    #[test]
    fn attach_options() {
        let q = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let o = AttachOptions::parse(&q(&[("container", "dbg"), ("stdin", "true"), ("tty", "1")]))
            .expect("valid");
        assert_eq!(
            o.upstream_query("dbg-x y"),
            "container=dbg-x%20y&stdin=true&tty=true"
        );
        assert!(AttachOptions::parse(&q(&[("stdin", "true")])).is_err());
        let err = AttachOptions::parse(&q(&[("container", "d")])).unwrap_err();
        assert_eq!(
            err.message(),
            "you must specify at least 1 of stdin, stdout, stderr"
        );
        assert!(AttachOptions::parse(&q(&[("container", "d"), ("stdout", "yes")])).is_err());
        let lr = LogRequest::parse(&q(&[
            ("follow", "true"),
            ("tailLines", "10"),
            ("command", "x"),
            ("container", "d"),
        ]))
        .expect("valid");
        assert!(lr.follow);
        assert_eq!(
            lr.upstream_query("d"),
            "container=d&follow=true&tailLines=10"
        );
        // Passed on as is, and read as kube-apiserver reads it: anything but false and 0.
        for (v, follows) in [("yes", true), ("", true), ("FALSE", false), ("0", false)] {
            let lr = LogRequest::parse(&q(&[("follow", v), ("container", "d")])).expect("valid");
            assert_eq!(lr.follow, follows, "{v:?}");
        }
        let mode = |m: &str| {
            let mut h = HeaderMap::new();
            h.insert("connection", HeaderValue::from_static("Upgrade"));
            h.insert("upgrade", HeaderValue::from_static("SPDY/3.1"));
            AttachRequest::parse(
                &Method::POST,
                Version::HTTP_11,
                &h,
                &q(&[("container", "d"), ("stdout", "1"), ("mode", m)]),
            )
            .map(|r| r.mode)
        };
        assert_eq!(mode("observer").ok(), Some(Some(SessionMode::Observer)));
        assert_eq!(mode("").ok(), Some(None));
        assert!(mode("owner").is_err());
    }

    #[test]
    fn negotiated_framing() {
        let h = headers(&[("sec-websocket-protocol", "v4.base64.channel.k8s.io")]);
        let n = Negotiated::from_switching(UpgradeKind::WebSocket, &h);
        assert!(n.base64() && n.status_errors());
        assert_eq!(n.label(), "websocket/v4.base64.channel.k8s.io");
        let h = headers(&[("x-stream-protocol-version", "channel.k8s.io")]);
        let n = Negotiated::from_switching(UpgradeKind::Spdy, &h);
        assert!(!n.base64() && !n.status_errors());
        assert!(is_status(br#"{"kind":"Status","code":403}"#));
        assert!(!is_status(b"container not found"));
    }
}
