//! `pods/{name}/exec` over WebSocket (`v5.channel.k8s.io` / `v4.channel.k8s.io`, the way kube-rs
//! sends it): records the exec, plays the configured outcome, and reports on the error channel.
//!
//! The only command with an effect is poddebug's stop script, recognised exactly
//! ([`StopInvocation::parse`]): the fake plays what the script does in a real container. It
//! appends the record to the container's termination message file, then signals the debug
//! container's processes: with a target or a shared PID namespace they end (`terminated`, exit
//! code 143, the termination message reported); when the main process is PID 1 of its own PID
//! namespace the kernel drops the signals and the script exits 3, unless PID 1 is the wrapper
//! shell of earlier versions, which ends with its child. Any other command, `sh -c` included,
//! succeeds and changes nothing. Whether the real script really stops real processes is proved
//! by its namespace tests (`poddebug-storage`) and by the live suite, not here.
//! [`ExecBehaviour::Sabotaged`] plays a container that replaced its `sh`: the stop script's
//! exec answers success (exit 0) and nothing changes, as a live container whose `/bin/sh` is
//! `#!/bin/busybox true` answers.

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use poddebug_storage::StopInvocation;
use poddebug_types::stoppable::LEGACY_STOP_WRAPPER;
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Message, Role};

use super::http::{Resp, empty};
use super::kubelet::{ContainerState, container_state, find_container, set_container_state};
use super::logs::resolve_container;
use super::router::Ctx;
use super::state::{Kind, Shared};
use super::status::{self, KubeStatus};

/// What an exec does in the fake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecBehaviour {
    /// The stop script does what it does in a real container (see the module docs); any other
    /// command succeeds and changes nothing.
    Stops,
    /// The image has no shell: `sh`/`bash` commands fail like containerd's exec does.
    NoShell,
    /// Success. The stop script writes its record, but the container keeps running (a kubelet
    /// that has not reported the end yet); nothing else changes.
    Ignores,
    /// The command exits with this code (`NonZeroExitCode`); nothing changes.
    ExitCode(i32),
    /// The exec starts and never reports an end (a command that does not finish) until the
    /// client closes the stream.
    Hangs,
    /// A container that replaced its `/bin/sh` with one that exits 0 (`#!/bin/busybox true`):
    /// every command succeeds and does nothing, the stop script included (no record written,
    /// nothing signalled); the container runs on.
    Sabotaged,
}

/// One exec the fake accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRecord {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// Container (after defaulting).
    pub container: String,
    /// `command` query values in order.
    pub command: Vec<String>,
    /// Effective user.
    pub user: String,
    /// `stdin` flag.
    pub stdin: bool,
    /// `stdout` flag.
    pub stdout: bool,
    /// `stderr` flag.
    pub stderr: bool,
    /// `tty` flag.
    pub tty: bool,
    /// Negotiated subprotocol.
    pub protocol: String,
}

const SUPPORTED: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

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

fn is_websocket_upgrade(ctx: &Ctx) -> bool {
    let upgrade = header_list(&ctx.headers, header::UPGRADE)
        .iter()
        .any(|u| u.eq_ignore_ascii_case("websocket"));
    let connection = header_list(&ctx.headers, header::CONNECTION)
        .iter()
        .any(|c| c.eq_ignore_ascii_case("upgrade"));
    upgrade && connection && ctx.version == http::Version::HTTP_11
}

/// The handler: checks, 101, then the session in a task.
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
    let command = q.all("command");
    let (stdin, stdout, stderr, tty) = (
        q.flag("stdin"),
        q.flag("stdout"),
        q.flag("stderr"),
        q.flag("tty"),
    );
    let container = {
        let state = ctx.shared.lock();
        let pod = state
            .get(Kind::Pod, ns, name)
            .ok_or_else(|| status::not_found("", "pods", name))?;
        let container = resolve_container(pod, q.get("container"), name)?;
        if command.is_empty() {
            return Err(status::bad_request(
                "you must specify at least one command for the container",
            ));
        }
        if !stdin && !stdout && !stderr {
            return Err(status::bad_request(
                "you must specify at least 1 of stdin, stdout, stderr",
            ));
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        if phase == "Succeeded" || phase == "Failed" {
            return Err(status::bad_request(format!(
                "cannot exec into a container in a completed pod; current phase is {phase}"
            )));
        }
        if pod["spec"]["nodeName"].as_str().unwrap_or("").is_empty() {
            return Err(status::bad_request(format!(
                "pod {name} does not have a host assigned"
            )));
        }
        if container_state(pod, &container) != Some("running") {
            return Err(status::internal(
                "error executing command in container: container is not created or running",
            ));
        }
        container
    };
    if !is_websocket_upgrade(ctx) {
        if ctx.method == Method::POST {
            return Err(status::bad_request(
                "the fake kube-apiserver serves exec over WebSocket only (no SPDY)",
            ));
        }
        return Err(status::bad_request("Upgrade request required"));
    }
    let key = ctx
        .headers
        .get(header::SEC_WEBSOCKET_KEY)
        .ok_or_else(|| status::bad_request("missing Sec-WebSocket-Key"))?
        .as_bytes()
        .to_vec();
    let offered = header_list(&ctx.headers, header::SEC_WEBSOCKET_PROTOCOL);
    let protocol = offered
        .iter()
        .find(|p| SUPPORTED.contains(&p.as_str()))
        .cloned()
        .ok_or_else(|| {
            status::bad_request(format!(
                "requested protocol(s) are not supported: {offered:?}; supports {SUPPORTED:?}"
            ))
        })?;

    let record = ExecRecord {
        namespace: ns.to_owned(),
        pod: name.to_owned(),
        container: container.clone(),
        command: command.clone(),
        user: ctx.user.name.clone(),
        stdin,
        stdout,
        stderr,
        tty,
        protocol: protocol.clone(),
    };
    ctx.shared.lock().execs.push(record.clone());

    let on_upgrade = hyper::upgrade::on(&mut req);
    let shared = ctx.shared.clone();
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        session(shared, ws, record).await;
    });

    let mut resp = Response::new(empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(&key)) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Ok(v) = HeaderValue::from_str(&protocol) {
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
    }
    Ok(resp)
}

/// Decides the outcome (and applies its effect on the pod) and returns the error-channel Status.
fn outcome(shared: &Shared, r: &ExecRecord) -> Value {
    let success = json!({"metadata": {}, "status": "Success"});
    let behaviour = shared.lock().settings.exec;
    match behaviour {
        ExecBehaviour::ExitCode(code) => exit_code(r, code),
        ExecBehaviour::NoShell => {
            let program = r.command.first().cloned().unwrap_or_default();
            if matches!(
                program.rsplit('/').next().unwrap_or(""),
                "sh" | "bash" | "ash" | "dash"
            ) {
                let err = format!(
                    "error executing command in container: failed to exec in container: failed to start exec \"{}\": OCI runtime exec failed: exec failed: unable to start container process: exec: \"{program}\": executable file not found in $PATH: unknown",
                    super::state::new_uid().replace('-', "")
                );
                json!({
                    "metadata": {},
                    "status": "Failure",
                    "message": format!("Internal error occurred: {err}"),
                    "reason": "InternalError",
                    "details": {"causes": [{"message": err}]},
                    "code": 500,
                })
            } else {
                success
            }
        }
        ExecBehaviour::Stops | ExecBehaviour::Ignores => match StopInvocation::parse(&r.command) {
            Some(inv) => play_stop_script(shared, r, &inv),
            None => success,
        },
        ExecBehaviour::Hangs | ExecBehaviour::Sabotaged => success,
    }
}

/// What the stop script does in container `r.container`: its record, then its signals. The
/// Status it ends with.
fn play_stop_script(shared: &Shared, r: &ExecRecord, inv: &StopInvocation) -> Value {
    let success = json!({"metadata": {}, "status": "Success"});
    let ignores = shared.lock().settings.exec == ExecBehaviour::Ignores;
    let mut own_init_survives = false;
    shared.mutate(|s| {
        let Some(pod) = s.get(Kind::Pod, &r.namespace, &r.pod) else {
            return;
        };
        let is_running_ec = find_container(pod, &r.container)
            .is_some_and(|(list, _)| list == "ephemeralContainers")
            && container_state(pod, &r.container) == Some("running");
        if !is_running_ec {
            return;
        }
        let ec = pod["spec"]["ephemeralContainers"]
            .as_array()
            .and_then(|ecs| ecs.iter().find(|c| c["name"] == r.container.as_str()))
            .cloned()
            .unwrap_or_default();
        let shares = pod["spec"]["shareProcessNamespace"] == true || pod["spec"]["hostPID"] == true;
        let targeted = ec["targetContainerName"]
            .as_str()
            .is_some_and(|t| !t.is_empty());
        let legacy_wrapped = ec["command"].as_array().is_some_and(|c| {
            c.iter()
                .map(|v| v.as_str().unwrap_or_default())
                .eq(LEGACY_STOP_WRAPPER)
        });
        // The record goes first, appended to the termination message file.
        if !inv.record.is_empty() {
            let key = (r.namespace.clone(), r.pod.clone(), r.container.clone());
            let log = s.termination_logs.entry(key).or_default();
            log.push_str(&inv.record);
            log.push('\n');
        }
        if ignores {
            return;
        }
        if !shares && !targeted && !legacy_wrapped {
            own_init_survives = true;
            return;
        }
        set_container_state(
            s,
            &r.namespace,
            &r.pod,
            &r.container,
            &ContainerState::terminated(143, "Error"),
        );
    });
    if own_init_survives {
        return exit_code(r, 3);
    }
    success
}

/// The Status of a command that exited with `code`.
fn exit_code(r: &ExecRecord, code: i32) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command [{}], exit code {code}", r.command.join(" ")),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

async fn session<S>(shared: std::sync::Arc<Shared>, mut ws: WebSocketStream<S>, r: ExecRecord)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let first = if r.stdout {
        1u8
    } else if r.stderr {
        2
    } else {
        3
    };
    if ws
        .send(Message::Binary(Bytes::from(vec![first])))
        .await
        .is_err()
    {
        return;
    }
    if shared.lock().settings.exec == ExecBehaviour::Hangs {
        // No end is ever reported; wait for the client to go (or the fake to stop).
        let mut shutdown = shared.shutdown.clone();
        let drain = async {
            while let Some(Ok(msg)) = ws.next().await {
                if msg.is_close() {
                    break;
                }
            }
        };
        tokio::select! {
            _ = drain => {}
            _ = crate::fake::stopped(&mut shutdown) => {}
        }
        return;
    }
    let status = outcome(&shared, &r);
    let mut frame = vec![3u8];
    frame.extend_from_slice(&serde_json::to_vec(&status).unwrap_or_default());
    if ws.send(Message::Binary(Bytes::from(frame))).await.is_err() {
        return;
    }
    // A normal closure (1000): client-go treats any other close code as a stream error.
    let _ = ws
        .close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        }))
        .await;
    let mut shutdown = shared.shutdown.clone();
    let drain = async {
        while let Some(Ok(msg)) = ws.next().await {
            if msg.is_close() {
                break;
            }
        }
    };
    tokio::select! {
        _ = drain => {}
        _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
        _ = crate::fake::stopped(&mut shutdown) => {}
    }
}
