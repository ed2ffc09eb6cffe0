//! `pods/{name}/attach` the way kube-apiserver and the kubelet answer it: the container checks
//! (unknown container 400, not running 500 in plain text like the kubelet), then a real
//! WebSocket endpoint (`v5.channel.k8s.io`, `v4.channel.k8s.io` and their base64 variants, with
//! v5 CLOSE) or a real SPDY/3.1 endpoint (`X-Stream-Protocol-Version` negotiation, streams opened
//! by the client with `streamType`).
//!
//! The attached "process" is `cat`: stdin is echoed to stdout (to stderr without stdout; empty
//! stdin frames are echoed as empty frames), every resize is reported as a line `resize WxH` on
//! stdout, and end of input (v5 CLOSE of stdin, SPDY FIN on stdin, or a `0x04` byte as a TTY's
//! Ctrl-D) ends it: the exit status goes on the error channel as a v4 Status.
//!
//! With [`SHARED_ANNOTATION`], WebSocket streams attached to one container share its "process",
//! as the kubelet's attach does: what one stream's input echoes, every other one sees too (SPDY
//! streams see only their own). Without it each stream has a `cat` of its own, so the stream
//! tests can tell many concurrent streams apart.
//!
//! Knobs are pod annotations, so a test sets them with `FakeKube::update_pod`:
//! - [`EXIT_CODE_ANNOTATION`]: the exit code (default 0, Success);
//! - [`REFUSE_ANNOTATION`]: answer the upgrade with this code instead (`403`, `500`: a Status;
//!   `text:500`: plain text; `200`: a 200 with a JSON body and no upgrade);
//! - [`DROP_AFTER_ANNOTATION`]: drop the connection (no close frame, no FIN on the streams) once
//!   this many stdin bytes were echoed;
//! - [`EXIT_TERMINATES_ANNOTATION`]: the end of input ends the container itself, as a shell's
//!   `exit` does: its status becomes `terminated` with the exit code, and the error channel says
//!   `Success` whatever the code, as containerd's attach does (the live reference, §7.1).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Message, Role};

use super::http::{Resp, empty, json_response, text_response};
use super::kubelet::container_state;
use super::logs::resolve_container;
use super::router::Ctx;
use super::state::Kind;
use super::status::{self, KubeStatus};
use crate::channel::{self, Decoded, ch};
use crate::spdy::{self, Frame};

/// Pod annotation: exit code of the attached process.
pub const EXIT_CODE_ANNOTATION: &str = "fake.poddebug.dev/attach-exit-code";
/// Pod annotation: refuse the upgrade (`403`, `500`, `text:500`, `200`).
pub const REFUSE_ANNOTATION: &str = "fake.poddebug.dev/attach-refuse";
/// Pod annotation: drop the connection after this many echoed bytes.
pub const DROP_AFTER_ANNOTATION: &str = "fake.poddebug.dev/attach-drop-after-bytes";

/// Pod annotation: the WebSocket streams attached to a container share its output.
pub const SHARED_ANNOTATION: &str = "fake.poddebug.dev/attach-shared";

/// Pod annotation: the end of input terminates the container (exit code in its status only).
pub const EXIT_TERMINATES_ANNOTATION: &str = "fake.poddebug.dev/attach-exit-terminates";

/// WebSocket subprotocols, in the kubelet's order of preference is irrelevant: the client's
/// first supported offer wins (wsstream).
const WS_PROTOCOLS: [&str; 5] = [
    "v5.channel.k8s.io",
    "v5.base64.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
];
/// SPDY protocols of the kubelet (`SupportedStreamingProtocols`).
const SPDY_PROTOCOLS: [&str; 4] = [
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];
/// The longest session.
const MAX_SESSION: Duration = Duration::from_secs(1800);

fn header_list(headers: &http::HeaderMap, name: header::HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

/// What the attached process does, shared by both protocols.
#[derive(Clone, Debug)]
struct Process {
    stdout: bool,
    stderr: bool,
    exit_code: i32,
    drop_after: Option<u64>,
    echoed: u64,
    /// The protocol carries a JSON Status on the error channel.
    status_errors: bool,
    /// Set when the end of input terminates the container.
    terminates: Option<Terminates>,
}

/// The container an attach session ends, and where its status lives.
#[derive(Clone)]
struct Terminates {
    shared: std::sync::Arc<super::state::Shared>,
    ns: String,
    pod: String,
    container: String,
}

impl std::fmt::Debug for Terminates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.ns, self.pod, self.container)
    }
}

enum Step {
    /// Write this on the output channel (1 or 2).
    Output(u8, Vec<u8>),
    /// End of input: finish.
    Finish,
    /// Drop the connection now.
    Drop,
}

impl Process {
    fn output_channel(&self) -> Option<u8> {
        if self.stdout {
            Some(ch::STDOUT)
        } else if self.stderr {
            Some(ch::STDERR)
        } else {
            None
        }
    }

    fn stdin(&mut self, data: &[u8]) -> Vec<Step> {
        let (data, eof) = match data.iter().position(|b| *b == 0x04) {
            Some(i) => (&data[..i], true),
            None => (data, false),
        };
        let mut steps = Vec::new();
        if let Some(c) = self.output_channel()
            && (!data.is_empty() || !eof)
        {
            steps.push(Step::Output(c, data.to_vec()));
        }
        self.echoed += data.len() as u64;
        if self.drop_after.is_some_and(|n| self.echoed >= n) {
            steps.push(Step::Drop);
        } else if eof {
            steps.push(Step::Finish);
        }
        steps
    }

    fn resize(&self, data: &[u8]) -> Vec<Step> {
        let Some(c) = self.output_channel() else {
            return Vec::new();
        };
        serde_json::Deserializer::from_slice(data)
            .into_iter::<Value>()
            .filter_map(Result::ok)
            .map(|v| {
                let get = |k: &str| {
                    v.get(k)
                        .or_else(|| v.get(k.to_ascii_lowercase()))
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                };
                Step::Output(
                    c,
                    format!("resize {}x{}\n", get("Width"), get("Height")).into_bytes(),
                )
            })
            .collect()
    }

    /// At the end of input: a terminating process records its exit in the pod's status.
    fn end(&self) {
        if let Some(t) = &self.terminates {
            let reason = if self.exit_code == 0 {
                "Completed"
            } else {
                "Error"
            };
            let state = super::kubelet::ContainerState::terminated(self.exit_code, reason);
            t.shared.mutate(|s| {
                super::kubelet::set_container_state(s, &t.ns, &t.pod, &t.container, &state)
            });
        }
    }

    /// The error-channel payload at the end (empty for success on pre-v4 protocols); always
    /// `Success` for a terminating process, as containerd reports it.
    fn exit_status(&self) -> Vec<u8> {
        if self.exit_code == 0 || self.terminates.is_some() {
            if self.status_errors {
                return serde_json::to_vec(&json!({"metadata": {}, "status": "Success"}))
                    .unwrap_or_default();
            }
            return Vec::new();
        }
        let message = format!(
            "command terminated with non-zero exit code: error executing command [cat], exit code {}",
            self.exit_code
        );
        if !self.status_errors {
            return message.into_bytes();
        }
        serde_json::to_vec(&json!({
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": self.exit_code.to_string()}]},
        }))
        .unwrap_or_default()
    }
}

fn refusal(spec: &str, pod: &str) -> Resp {
    if let Some(code) = spec.strip_prefix("text:") {
        let code = code.parse().unwrap_or(500);
        return text_response(
            code,
            format!("fake kubelet refused the attach to pod {pod}"),
        );
    }
    match spec.parse::<u16>().unwrap_or(403) {
        200 => json_response(
            200,
            &json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": pod}}),
        ),
        code => {
            let reason = match code {
                400 => "BadRequest",
                401 => "Unauthorized",
                403 => "Forbidden",
                404 => "NotFound",
                503 => "ServiceUnavailable",
                _ => "InternalError",
            };
            KubeStatus::new(
                code,
                reason,
                format!("attach refused by the fake for pod {pod}"),
            )
            .into_response()
        }
    }
}

/// The handler: checks, negotiation, 101, then the session in a task.
pub fn handle(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    mut req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    if ctx.method != Method::GET && ctx.method != Method::POST {
        return Err(status::method_not_allowed());
    }
    // KEP-4006 (on by default since 1.35): a WebSocket GET also needs `create`.
    ctx.authorize("create")?;
    let q = &ctx.query;
    let (stdin, stdout, stderr, tty) = (
        q.flag("stdin"),
        q.flag("stdout"),
        q.flag("stderr"),
        q.flag("tty"),
    );
    let (annotations, container) = {
        let state = ctx.shared.lock();
        let pod = state
            .get(Kind::Pod, ns, name)
            .ok_or_else(|| status::not_found("", "pods", name))?;
        let container = resolve_container(pod, q.get("container"), name)?;
        if !stdin && !stdout && !stderr {
            return Err(status::bad_request(
                "you must specify at least 1 of stdin, stdout, stderr",
            ));
        }
        if pod["spec"]["nodeName"].as_str().unwrap_or("").is_empty() {
            return Err(status::bad_request(format!(
                "pod {name} does not have a host assigned"
            )));
        }
        match container_state(pod, &container) {
            Some("running") => {}
            Some("terminated") => {
                return Ok(text_response(
                    500,
                    "rpc error: code = FailedPrecondition desc = container is in CONTAINER_EXITED state\n",
                ));
            }
            _ => {
                return Ok(text_response(
                    500,
                    format!("container not found ({container:?})\n"),
                ));
            }
        }
        let annotations: BTreeMap<String, String> = pod["metadata"]["annotations"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        (annotations, container)
    };
    if let Some(spec) = annotations.get(REFUSE_ANNOTATION) {
        return Ok(refusal(spec, name));
    }
    let mut process = Process {
        stdout,
        stderr: stderr && !tty,
        exit_code: annotations
            .get(EXIT_CODE_ANNOTATION)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        drop_after: annotations
            .get(DROP_AFTER_ANNOTATION)
            .and_then(|v| v.parse().ok()),
        echoed: 0,
        status_errors: true,
        terminates: annotations
            .contains_key(EXIT_TERMINATES_ANNOTATION)
            .then(|| Terminates {
                shared: ctx.shared.clone(),
                ns: ns.to_owned(),
                pod: name.to_owned(),
                container: container.clone(),
            }),
    };
    let upgrade = header_list(&ctx.headers, header::UPGRADE);
    let connection_upgrade = header_list(&ctx.headers, header::CONNECTION)
        .iter()
        .any(|c| c.eq_ignore_ascii_case("upgrade"));
    if !connection_upgrade || ctx.version != http::Version::HTTP_11 {
        return Err(status::bad_request("Upgrade request required"));
    }
    let on_upgrade = hyper::upgrade::on(&mut req);
    let shared = ctx.shared.clone();
    let mut resp = Response::new(empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if upgrade.iter().any(|u| u.eq_ignore_ascii_case("websocket")) {
        let key = ctx
            .headers
            .get(header::SEC_WEBSOCKET_KEY)
            .ok_or_else(|| status::bad_request("missing Sec-WebSocket-Key"))?
            .as_bytes()
            .to_vec();
        let offered = header_list(&ctx.headers, header::SEC_WEBSOCKET_PROTOCOL);
        let protocol = offered.iter().find(|p| WS_PROTOCOLS.contains(&p.as_str())).cloned().ok_or_else(|| {
            status::bad_request(format!("requested protocol(s) are not supported: {offered:?}; supports {WS_PROTOCOLS:?}"))
        })?;
        process.status_errors = protocol.starts_with("v4.") || protocol.starts_with("v5.");
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        if let Ok(v) = HeaderValue::from_str(&derive_accept_key(&key)) {
            h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
        }
        if let Ok(v) = HeaderValue::from_str(&protocol) {
            h.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
        }
        let terminal = annotations
            .contains_key(SHARED_ANNOTATION)
            .then(|| shared.terminal(ns, name, &container));
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let ws =
                WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
            let mut shutdown = shared.shutdown.clone();
            tokio::select! {
                _ = websocket_session(ws, &protocol, stdin, process, terminal) => {}
                _ = shutdown.wait_for(|s| *s) => {}
                _ = tokio::time::sleep(MAX_SESSION) => {}
            }
        });
        return Ok(resp);
    }
    if upgrade.iter().any(|u| u.eq_ignore_ascii_case("SPDY/3.1")) {
        let offered = header_list(
            &ctx.headers,
            header::HeaderName::from_static("x-stream-protocol-version"),
        );
        if offered.is_empty() {
            return Err(status::bad_request(
                "unable to upgrade: unable to negotiate protocol: client did not request a protocol",
            ));
        }
        let Some(protocol) = offered
            .iter()
            .find(|p| SPDY_PROTOCOLS.contains(&p.as_str()))
            .cloned()
        else {
            let mut r = text_response(
                403,
                format!(
                    "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts {SPDY_PROTOCOLS:?}"
                ),
            );
            for p in SPDY_PROTOCOLS {
                r.headers_mut().append(
                    "x-accepted-stream-protocol-versions",
                    HeaderValue::from_static(p),
                );
            }
            return Ok(r);
        };
        process.status_errors = protocol.starts_with("v4.");
        h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        if let Ok(v) = HeaderValue::from_str(&protocol) {
            h.insert("x-stream-protocol-version", v);
        }
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let conn = spdy::Connection::new(TokioIo::new(upgraded));
            let mut shutdown = shared.shutdown.clone();
            tokio::select! {
                _ = spdy_session(conn, process) => {}
                _ = shutdown.wait_for(|s| *s) => {}
                _ = tokio::time::sleep(MAX_SESSION) => {}
            }
        });
        return Ok(resp);
    }
    Err(status::bad_request("Upgrade request required"))
}

async fn websocket_session<S>(
    mut ws: WebSocketStream<S>,
    protocol: &str,
    stdin: bool,
    mut process: Process,
    terminal: Option<tokio::sync::broadcast::Sender<super::state::TerminalOutput>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let base64 = channel::is_base64(protocol);
    let v5 = protocol.starts_with("v5.");
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let me = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut others = terminal
        .as_ref()
        .map(tokio::sync::broadcast::Sender::subscribe);
    let first = process.output_channel().unwrap_or(ch::ERROR);
    if ws.send(channel::encode(first, &[], base64)).await.is_err() {
        return;
    }
    let mut finished = false;
    loop {
        let msg = tokio::select! {
            msg = ws.next() => match msg {
                Some(m) => m,
                None => break,
            },
            // What another stream's input echoed: this stream sees it too.
            out = async { match others.as_mut() { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                if let Ok((from, data)) = out
                    && from != me
                    && let Some(c) = process.output_channel()
                    && ws.send(channel::encode(c, &data, base64)).await.is_err()
                {
                    return;
                }
                continue;
            }
        };
        let data = match msg {
            Ok(Message::Binary(b)) => b.to_vec(),
            Ok(Message::Text(t)) => t.as_bytes().to_vec(),
            Ok(Message::Close(_)) | Err(_) => return,
            Ok(_) => continue,
        };
        let steps = match channel::decode(&data, base64) {
            // Closing a stdin that was never asked for closes nothing, as the kubelet ignores it.
            Decoded::Close(c) if v5 && c == ch::STDIN && stdin => vec![Step::Finish],
            Decoded::Data(ch::STDIN, d) if stdin => {
                if let Some(t) = terminal.as_ref().filter(|_| !d.is_empty()) {
                    let _ = t.send((me, d.iter().copied().take_while(|b| *b != 0x04).collect()));
                }
                process.stdin(&d)
            }
            Decoded::Data(ch::RESIZE, d) => process.resize(&d),
            _ => Vec::new(),
        };
        for step in steps {
            match step {
                Step::Output(c, d) => {
                    if ws.send(channel::encode(c, &d, base64)).await.is_err() {
                        return;
                    }
                }
                Step::Drop => return,
                Step::Finish => finished = true,
            }
        }
        if finished {
            break;
        }
    }
    if !finished {
        return;
    }
    process.end();
    let status = process.exit_status();
    if !status.is_empty()
        && ws
            .send(channel::encode(ch::ERROR, &status, base64))
            .await
            .is_err()
    {
        return;
    }
    let _ = ws
        .close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        }))
        .await;
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(msg)) = ws.next().await {
            if msg.is_close() {
                break;
            }
        }
    })
    .await;
}

async fn spdy_session<S>(mut conn: spdy::Connection<S>, mut process: Process)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut streams: BTreeMap<String, u32> = BTreeMap::new();
    let mut resize_buf: Vec<u8> = Vec::new();
    let mut finished = false;
    while !finished {
        let frame = match conn.recv().await {
            Ok(Some(f)) => f,
            _ => return,
        };
        let mut steps = Vec::new();
        match frame {
            Frame::SynStream {
                stream_id,
                fin,
                headers,
                ..
            } => {
                // As the kubelet reads it (`Headers().Get`): the first of the values spdystream
                // joins with NUL, so `stdin\0` is stdin. Any stdin stream is attached, whatever
                // the attach's query said, as the kubelet attaches it.
                let kind = spdy::header(&headers, "streamtype")
                    .unwrap_or("")
                    .split('\0')
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let reply = Frame::SynReply {
                    stream_id,
                    fin: false,
                    headers: Vec::new(),
                };
                if conn.send(&reply).await.is_err() {
                    return;
                }
                if fin && kind == "stdin" {
                    steps.push(Step::Finish);
                }
                streams.insert(kind, stream_id);
            }
            Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                if Some(&stream_id) == streams.get("stdin") {
                    steps.extend(process.stdin(&data));
                    if fin {
                        steps.push(Step::Finish);
                    }
                } else if Some(&stream_id) == streams.get("resize") {
                    resize_buf.extend_from_slice(&data);
                    if let Some(end) = resize_buf.iter().rposition(|b| *b == b'}') {
                        let whole: Vec<u8> = resize_buf.drain(..=end).collect();
                        steps.extend(process.resize(&whole));
                    }
                }
            }
            Frame::Ping(id) if conn.send(&Frame::Ping(id)).await.is_err() => return,
            Frame::RstStream { .. } | Frame::GoAway { .. } => return,
            _ => {}
        }
        for step in steps {
            match step {
                Step::Output(c, data) => {
                    let kind = if c == ch::STDOUT { "stdout" } else { "stderr" };
                    if let Some(&id) = streams.get(kind)
                        && conn
                            .send(&Frame::Data {
                                stream_id: id,
                                fin: false,
                                data,
                            })
                            .await
                            .is_err()
                    {
                        return;
                    }
                }
                Step::Drop => return,
                Step::Finish => finished = true,
            }
        }
    }
    process.end();
    for kind in ["stdout", "stderr"] {
        if let Some(&id) = streams.get(kind) {
            let _ = conn
                .send(&Frame::Data {
                    stream_id: id,
                    fin: true,
                    data: Vec::new(),
                })
                .await;
        }
    }
    if let Some(&id) = streams.get("error") {
        let status = process.exit_status();
        if !status.is_empty() {
            let _ = conn
                .send(&Frame::Data {
                    stream_id: id,
                    fin: false,
                    data: status,
                })
                .await;
        }
        let _ = conn
            .send(&Frame::Data {
                stream_id: id,
                fin: true,
                data: Vec::new(),
            })
            .await;
    }
    // The kubelet closes the connection once the streams are done; give the client a moment to
    // read, then go.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(_)) = conn.recv().await {}
    })
    .await;
    let _ = conn.shutdown().await;
}
