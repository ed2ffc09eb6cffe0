//! Response bodies of the fake: whole JSON documents, text, and streams fed from a channel
//! (watch events, followed logs) that end when the sender is dropped.

use bytes::Bytes;
use futures::StreamExt;
use futures::channel::mpsc;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use serde_json::Value;

/// Errors a streaming body may end with (the connection is then aborted).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every response body of the fake.
pub type Body = BoxBody<Bytes, BoxError>;

/// Every response of the fake.
pub type Resp = Response<Body>;

/// A body holding `bytes`.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> Body {
    full(Bytes::new())
}

/// A body that fails at once: hyper aborts the connection instead of answering.
pub fn aborting() -> Body {
    let stream = futures::stream::once(async {
        Err::<Frame<Bytes>, BoxError>("connection closed by the fake on purpose".into())
    });
    BodyExt::boxed(StreamBody::new(stream))
}

/// The sending half of a streaming body.
pub type ChunkSender = mpsc::Sender<Bytes>;

/// A body streamed from a channel; it ends when every sender is dropped.
pub fn channel_body(buffer: usize) -> (ChunkSender, Body) {
    let (tx, rx) = mpsc::channel::<Bytes>(buffer);
    let body = BodyExt::boxed(StreamBody::new(
        rx.map(|b| Ok::<_, BoxError>(Frame::data(b))),
    ));
    (tx, body)
}

/// A JSON response with `Content-Type: application/json`.
pub fn json_response(code: u16, value: &Value) -> Resp {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    with_type(code, "application/json", full(bytes))
}

/// A plain-text response.
pub fn text_response(code: u16, text: impl Into<String>) -> Resp {
    with_type(code, "text/plain; charset=utf-8", full(text.into()))
}

/// A response with the given code, content type and body.
pub fn with_type(code: u16, content_type: &'static str, body: Body) -> Resp {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// Query parameters in order (a key may repeat, e.g. `command`).
#[derive(Clone, Debug, Default)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// Parses `a=b&c=d` (percent- and plus-decoded).
    pub fn parse(raw: Option<&str>) -> Query {
        let mut out = Vec::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            out.push((decode(k), decode(v)));
        }
        Query(out)
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// `key` parsed the way Go's `strconv.ParseBool` does; absent or unparsable is `false`.
    pub fn flag(&self, key: &str) -> bool {
        matches!(
            self.get(key),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True")
        )
    }
}

fn decode(s: &str) -> String {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

/// Marks a response the connection layer turns into a dropped connection (no answer at all).
#[derive(Clone, Copy, Debug)]
pub struct AbortConnection;

/// A "response" that makes the fake close the connection without answering.
pub fn abort_connection() -> Resp {
    let mut resp = Response::new(aborting());
    resp.extensions_mut().insert(AbortConnection);
    resp
}
