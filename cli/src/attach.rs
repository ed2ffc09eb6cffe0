//! `kubectl poddebug attach`: a console on a debug container through the poddebug.dev attach
//! endpoint, over WebSocket (`v5.channel.k8s.io`, else v4) with the user's kubeconfig.
//!
//! Channel framing: every binary message starts with its channel (0 stdin, 1 stdout, 2 stderr,
//! 3 error, 4 resize); v5 half-closes stdin with `[255, 0]`. The error channel carries a Status
//! at the end: `Success`, or `NonZeroExitCode` with the exit code as a cause.

use std::io::Write;
use std::process::{Command, Stdio};

use futures::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Message;

use crate::request::attach_path;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// Where and how to attach.
pub struct AttachSpec {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// Debug container.
    pub container: String,
    /// Send our stdin.
    pub stdin: bool,
    /// Terminal mode (raw local terminal, resize events, no separate stderr).
    pub tty: bool,
    /// `--context`.
    pub context: Option<String>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<String>,
}

/// Puts the local terminal in raw mode with `stty` and restores it when dropped.
struct RawTerminal {
    saved: Option<String>,
}

impl RawTerminal {
    fn enter() -> RawTerminal {
        let saved = Command::new("stty")
            .arg("-g")
            .stdin(Stdio::inherit())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        if saved.is_some() {
            let _ = Command::new("stty")
                .args(["raw", "-echo"])
                .stdin(Stdio::inherit())
                .status();
        }
        RawTerminal { saved }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if let Some(s) = &self.saved {
            let _ = Command::new("stty").arg(s).stdin(Stdio::inherit()).status();
        }
    }
}

/// The local terminal's size as the resize channel's JSON (`{"Width":W,"Height":H}`).
fn terminal_size() -> Option<Vec<u8>> {
    let out = Command::new("stty")
        .arg("size")
        .stdin(Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text
        .split_whitespace()
        .filter_map(|v| v.parse::<u16>().ok());
    let (rows, cols) = (it.next()?, it.next()?);
    let mut msg = vec![RESIZE];
    msg.extend(
        serde_json::json!({"Width": cols, "Height": rows})
            .to_string()
            .into_bytes(),
    );
    Some(msg)
}

/// The exit code the error channel's Status says.
pub fn exit_code_of(status: &serde_json::Value) -> Result<i32, String> {
    if status["status"] == "Success" {
        return Ok(0);
    }
    if status["reason"] == "NonZeroExitCode"
        && let Some(code) = status["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["reason"] == "ExitCode")
            .and_then(|c| c["message"].as_str())
            .and_then(|m| m.parse::<i32>().ok())
    {
        return Ok(code);
    }
    Err(status["message"]
        .as_str()
        .unwrap_or("the stream ended with an error")
        .to_owned())
}

async fn kube_client(spec: &AttachSpec) -> Result<kube::Client, String> {
    let options = kube::config::KubeConfigOptions {
        context: spec.context.clone(),
        ..Default::default()
    };
    let config = match &spec.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("reading {path}: {e}"))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| e.to_string())?
        }
        None => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string())?,
    };
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Attach and relay until the stream ends; the container's exit code when known.
pub async fn attach(spec: AttachSpec) -> Result<i32, String> {
    let client = kube_client(&spec).await?;
    let path = attach_path(
        &spec.namespace,
        &spec.pod,
        &spec.container,
        spec.stdin,
        spec.tty,
    );
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let conn = client.connect(req).await.map_err(|e| match e {
        kube::Error::Api(s) => format!("Error from server ({}): {}", s.reason, s.message),
        other => format!("attach failed: {other}"),
    })?;
    let can_close = conn.supports_stream_close();
    let (mut sink, mut stream) = conn.into_stream().split();
    let _raw = spec.tty.then(RawTerminal::enter);

    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    if spec.tty {
        if let Some(size) = terminal_size() {
            let _ = tx.send(size).await;
        }
        let tx = tx.clone();
        tokio::spawn(async move {
            let Ok(mut winch) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            else {
                return;
            };
            while winch.recv().await.is_some() {
                if let Some(size) = terminal_size()
                    && tx.send(size).await.is_err()
                {
                    return;
                }
            }
        });
    }
    if spec.stdin {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut input = tokio::io::stdin();
            let mut buf = vec![0u8; 8192];
            loop {
                match input.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut msg = Vec::with_capacity(n + 1);
                        msg.push(STDIN);
                        msg.extend_from_slice(&buf[..n]);
                        if tx.send(msg).await.is_err() {
                            return;
                        }
                    }
                }
            }
            // End of our input: half-close the container's stdin where the protocol can.
            if can_close {
                let _ = tx.send(vec![CLOSE, STDIN]).await;
            }
        });
    }
    drop(tx);

    let mut outcome: Option<Result<i32, String>> = None;
    let mut sending = true;
    loop {
        tokio::select! {
            msg = rx.recv(), if sending => match msg {
                Some(m) => {
                    if sink.send(Message::Binary(m.into())).await.is_err() {
                        break;
                    }
                }
                None => sending = false,
            },
            frame = stream.next() => match frame {
                Some(Ok(Message::Binary(data))) => {
                    let Some((&channel, payload)) = data.split_first() else { continue };
                    match channel {
                        STDOUT => {
                            let mut out = std::io::stdout().lock();
                            let _ = out.write_all(payload);
                            let _ = out.flush();
                        }
                        STDERR => {
                            let _ = std::io::stderr().write_all(payload);
                        }
                        ERROR if !payload.is_empty() => {
                            outcome = Some(match serde_json::from_slice::<serde_json::Value>(payload) {
                                Ok(status) => exit_code_of(&status),
                                Err(_) => Err(String::from_utf8_lossy(payload).into_owned()),
                            });
                        }
                        _ => {}
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = sink.close().await;
    outcome.unwrap_or(Ok(0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exit_codes_from_the_error_channel() {
        assert_eq!(
            exit_code_of(&json!({"metadata": {}, "status": "Success"})),
            Ok(0)
        );
        let nz = json!({"status": "Failure", "reason": "NonZeroExitCode",
                        "details": {"causes": [{"reason": "ExitCode", "message": "7"}]}});
        assert_eq!(exit_code_of(&nz), Ok(7));
        let other =
            json!({"status": "Failure", "message": "the poddebug API server is shutting down"});
        assert_eq!(
            exit_code_of(&other),
            Err("the poddebug API server is shutting down".to_owned())
        );
    }
}
