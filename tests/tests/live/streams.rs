//! Attach (WebSocket v5 and SPDY/3.1, with and without a TTY) and logs, through the aggregator
//! to the real kubelet.

use std::time::Duration;

use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_tests::channel::{ChannelClient, Transcript};
use poddebug_tests::spdy::AttachSession;
use poddebug_tests::{TestClient, UpgradeResponse};
use serde_json::json;

use crate::support::{BUSYBOX, Sandbox, enabled, poll_async};

type Io = TokioIo<Upgraded>;
const T: Duration = Duration::from_secs(30);
/// Reads one line from stdin, answers on stdout and on stderr, and stays.
const ECHO: &str = "read line; echo \"out:$line\"; echo \"err:$line\" >&2; sleep 3600";

/// A debug container that waits for one line on stdin (`tty`: an interactive shell instead).
async fn interactive(sb: &Sandbox, tty: bool) {
    let container = if tty {
        json!({"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true})
    } else {
        json!({"image": BUSYBOX, "command": ["sh", "-c", ECHO], "stdin": true})
    };
    sb.create_running(
        "dbg",
        &json!({"container": container, "targetContainerName": "app"}),
    )
    .await;
}

fn attach_path(sb: &Sandbox, tty: bool) -> String {
    let streams = if tty {
        "stdin=true&stdout=true&tty=true"
    } else {
        "stdin=true&stdout=true&stderr=true"
    };
    sb.path(&format!("attach?container=dbg&{streams}"))
}

async fn websocket(sb: &Sandbox, tty: bool) -> ChannelClient<Io> {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp: UpgradeResponse = sb
        .api
        .upgrade(Method::GET, &attach_path(sb, tty), &headers)
        .await
        .expect("upgrade request");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    assert_eq!(
        resp.headers
            .get("sec-websocket-protocol")
            .map(|v| v.as_bytes()),
        Some(b"v5.channel.k8s.io".as_slice())
    );
    ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await
}

async fn spdy(sb: &Sandbox, tty: bool) -> AttachSession<Io> {
    let resp = sb
        .api
        .upgrade(
            Method::POST,
            &attach_path(sb, tty),
            &[
                ("connection", "Upgrade"),
                ("upgrade", "SPDY/3.1"),
                ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ],
        )
        .await
        .expect("upgrade request");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    AttachSession::open(resp.io.expect("upgraded"), true, true, !tty, tty)
        .await
        .expect("streams open")
}

fn stdio_done(t: &Transcript) -> bool {
    String::from_utf8_lossy(&t.stdout).contains("out:hello")
        && String::from_utf8_lossy(&t.stderr).contains("err:hello")
}

fn assert_stdio(t: &Transcript) {
    assert!(
        stdio_done(t),
        "stdout {:?}, stderr {:?}, error {:?}",
        String::from_utf8_lossy(&t.stdout),
        String::from_utf8_lossy(&t.stderr),
        String::from_utf8_lossy(&t.error)
    );
    // The streams stay apart.
    assert!(!String::from_utf8_lossy(&t.stdout).contains("err:"));
}

fn sized(t: &Transcript) -> bool {
    String::from_utf8_lossy(&t.stdout).contains("45 123")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn attach_over_websocket_v5_carries_stdin_stdout_and_stderr() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("wsio");
    interactive(&sb, false).await;
    let mut ws = websocket(&sb, false).await;
    ws.stdin(b"hello\n").await.expect("stdin");
    let t = ws.read_until(T, stdio_done).await;
    assert_stdio(t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn attach_over_websocket_v5_with_a_tty_applies_resizes() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("wstty");
    interactive(&sb, true).await;
    let mut ws = websocket(&sb, true).await;
    ws.resize(123, 45).await.expect("resize");
    // The resize and stdin travel on separate streams: ask again until the size shows.
    for _ in 0..15 {
        ws.stdin(b"stty size\n").await.expect("stdin");
        if sized(ws.read_until(Duration::from_secs(2), sized).await) {
            break;
        }
    }
    assert!(
        sized(ws.transcript()),
        "{:?}",
        ws.transcript().stdout_text()
    );
    let _ = ws.stdin(b"exit\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn attach_over_spdy_carries_stdin_stdout_and_stderr() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("spdyio");
    interactive(&sb, false).await;
    let mut s = spdy(&sb, false).await;
    s.send_stdin(b"hello\n").await.expect("stdin");
    let t = s.read_until(T, stdio_done).await;
    assert_stdio(t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn attach_over_spdy_with_a_tty_applies_resizes() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("spdytty");
    interactive(&sb, true).await;
    let mut s = spdy(&sb, true).await;
    s.resize(123, 45).await.expect("resize");
    for _ in 0..15 {
        s.send_stdin(b"stty size\n").await.expect("stdin");
        if sized(s.read_until(Duration::from_secs(2), sized).await) {
            break;
        }
    }
    assert!(sized(s.transcript()), "{:?}", s.transcript().stdout_text());
    let _ = s.send_stdin(b"exit\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn logs_of_a_debug_container_and_only_of_one() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("logs");
    let body = json!({"container": {"image": BUSYBOX,
        "command": ["sh", "-c", "echo first-line; echo hello-from-debug; sleep 3600"]},
        "targetContainerName": "app"});
    sb.create_running("printer", &body).await;
    let path = sb.path("log?container=printer&tailLines=1");
    let text = poll_async(
        "the debug container's output in its log",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || async {
            let (code, _, body) = sb
                .api
                .request(Method::GET, &path, &[], "")
                .await
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&body).into_owned();
            if code == StatusCode::OK && text.contains("hello-from-debug") {
                Ok(text)
            } else {
                Err(format!("{code} {text}"))
            }
        },
    )
    .await;
    assert!(!text.contains("first-line"), "tailLines=1: {text}");
    // Not a debug container: refused before anything is streamed.
    let (code, _, body) = sb
        .api
        .request(Method::GET, &sb.path("log?container=app"), &[], "")
        .await
        .expect("log request");
    assert!(
        code.is_client_error(),
        "{code} {}",
        String::from_utf8_lossy(&body)
    );
}
