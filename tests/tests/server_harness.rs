//! The `PodDebugServer` harness itself: flags, log capture, the `/readyz` wait, SIGTERM and
//! kill-on-drop, exercised with a tiny stand-in HTTPS server (python3) so the harness is
//! tested before poddebug-apiserver exists. The last test runs the real binary and is ignored
//! until it is built.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_tests::{FakeKube, PodDebugServer, TempDir, TestPki};

const STAND_IN: &str = r#"
import http.server, json, os, signal, ssl, sys
args = dict(a[2:].split('=', 1) for a in sys.argv[1:] if a.startswith('--') and '=' in a)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'ok'
        self.send_response(200 if self.path == '/readyz' else 404)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer((args['bind-address'], int(args['secure-port'])), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(args['tls-cert-file'], args['tls-private-key-file'])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
def term(*_):
    print(json.dumps({"msg": "shutting down"}), flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, term)
print(json.dumps({"msg": "serving", "args": sys.argv[1:]}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
srv.serve_forever()
"#;

fn python() -> Option<String> {
    let ok = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        poddebug_tests::capability::missing("python3");
    }
    ok.then(|| "python3".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_waits_for_readyz_captures_logs_and_terminates() {
    let Some(python) = python() else { return };
    let dir = TempDir::new("stand-in");
    let script = dir.path().join("server.py");
    std::fs::write(&script, STAND_IN).expect("write script");
    let fake = FakeKube::start().await;
    let pki = TestPki::new();
    let mut server = PodDebugServer::start_command(
        &[python, script.display().to_string()],
        &fake,
        &pki,
        &["--shutdown-grace-period=1s"],
    )
    .await;

    assert!(
        server
            .wait_for_log("\"serving\"", Duration::from_secs(5))
            .await
    );
    assert!(
        server
            .wait_for_log("to stderr", Duration::from_secs(5))
            .await,
        "stderr is captured too"
    );
    let args = server.args().to_vec();
    assert!(
        args.iter()
            .any(|a| a == "--requestheader-allowed-names=front-proxy-client")
    );
    assert!(args.iter().any(|a| a.starts_with("--kubeconfig=")));
    assert_eq!(
        args.last().map(String::as_str),
        Some("--shutdown-grace-period=1s"),
        "extra args come last"
    );

    let client = server.front_proxy_client("alice", &["dev"]);
    let (code, _, body) = client
        .request(Method::GET, "/readyz", &[], Bytes::new())
        .await
        .expect("readyz");
    assert_eq!((code, body.as_ref()), (StatusCode::OK, b"ok".as_slice()));

    let status = server.terminate().await.expect("exited");
    assert!(status.success());
    assert!(
        server
            .wait_for_log("shutting down", Duration::from_secs(5))
            .await
    );
}

#[tokio::test]
async fn spawn_raw_does_not_wait_and_drop_kills() {
    let mut quick = PodDebugServer::spawn_command(
        &[
            "sh".to_owned(),
            "-c".to_owned(),
            "echo started; exit 3".to_owned(),
        ],
        &[],
    );
    let status = quick
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("exited");
    assert_eq!(status.code(), Some(3));
    assert!(quick.wait_for_log("started", Duration::from_secs(5)).await);

    let slow = PodDebugServer::spawn_command(&["sleep".to_owned(), "60".to_owned()], &[]);
    let pid = slow.pid();
    drop(slow);
    let mut gone = false;
    for _ in 0..100 {
        let alive = std::process::Command::new("kill")
            .arg("-0")
            .arg(pid.to_string())
            .status()
            .is_ok_and(|s| s.success());
        let zombie =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"));
        if !alive || zombie {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "drop kills the process");
}

#[tokio::test]
#[ignore = "needs the real poddebug-apiserver: cargo build -p poddebug-apiserver"]
async fn real_binary_serves_against_the_fake_and_stops_on_sigterm() {
    let fake = FakeKube::start().await;
    let pki = TestPki::new();
    let mut server = PodDebugServer::start(&fake, &pki, &[]).await;
    fake.add_namespace("ephdemo", &[]);
    fake.add_simple_pod("ephdemo", "target");
    let client = server.front_proxy_client("alice", &["system:authenticated"]);
    let (code, body) = client.get_json("/apis/poddebug.dev/v1alpha1").await;
    assert_eq!(code, StatusCode::OK, "{body}\n{}", server.logs_text());
    let (code, body) = client
        .post_json(
            "/apis/poddebug.dev/v1alpha1/namespaces/ephdemo/pods/target/debug/dbg",
            &serde_json::json!({"apiVersion": "poddebug.dev/v1alpha1", "kind": "PodDebugContainer",
                "metadata": {"name": "dbg"}, "container": {"image": "busybox"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}\n{}", server.logs_text());
    let pod = fake.pod_json("ephdemo", "target").expect("pod");
    assert_eq!(pod["spec"]["ephemeralContainers"][0]["name"], "dbg");
    assert!(
        fake.sars().iter().any(|s| s.attributes.user == "alice"),
        "the user was authorized by SAR"
    );
    let status = server.terminate().await.expect("exited after SIGTERM");
    assert!(status.success(), "{status}\n{}", server.logs_text());
}
