//! Session recordings end to end: attach sessions through the real `poddebug-apiserver` binary
//! (WebSocket and SPDY) against the fake kube-apiserver are recorded, listed and served back;
//! the recording replays the session's output byte for byte; `get pods/recordings` is its own
//! permission; the size cap, retention and id checks hold; each session leaves one audit record.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

// Only the /metrics readers of the shared test module are used here.
#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use http::{Method, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use poddebug_tests::channel::{ChannelClient, Transcript, ch};
use poddebug_tests::spdy::AttachSession;
use poddebug_tests::{ContainerState, FakeKube, PodDebugServer, TestClient, TestPki};
use serde_json::{Value, json};

const NS: &str = "default";
const POD: &str = "web";
const T: Duration = Duration::from_secs(10);
const TTY: &str = "container=dbg&stdin=true&stdout=true&tty=true";
const NO_TTY: &str = "container=dbg&stdin=true&stdout=true&stderr=true";
const BASE: &str = "/apis/poddebug.dev/v1alpha1/namespaces/default/pods/web";

type Io = TokioIo<Upgraded>;

struct Env {
    _fake: FakeKube,
    server: PodDebugServer,
    client: TestClient,
    dir: TempDir,
}

/// A directory removed when the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("poddebug-recordings-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn env_in(dir: TempDir, extra: &[&str]) -> Env {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    fake.add_pod_json(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true, "tty": true}],
        },
    }));
    assert!(fake.set_ec_state(NS, POD, "dbg", ContainerState::Running));
    // bob may attach but not read recordings.
    fake.set_policy(|a| !(a.user == "bob" && a.is("get", "pods/recordings")));
    let pki = fake.pki().clone();
    let flag = format!("--recording-dir={}", dir.0.display());
    let mut args = vec![flag.as_str()];
    args.extend_from_slice(extra);
    let server = PodDebugServer::start(&fake, &pki, &args).await;
    let client = server.front_proxy_client("alice", &["system:authenticated", "devs"]);
    Env {
        _fake: fake,
        server,
        client,
        dir,
    }
}

async fn env(extra: &[&str]) -> Env {
    env_in(TempDir::new(), extra).await
}

async fn ws(client: &TestClient, query: &str) -> ChannelClient<Io> {
    ws_at(client, BASE, query).await
}

/// A WebSocket v5 attach to the pod at `pod_path` (`…/namespaces/NS/pods/POD`).
async fn ws_at(client: &TestClient, pod_path: &str, query: &str) -> ChannelClient<Io> {
    client
        .attach_v5(&format!("{pod_path}/attach?{query}"))
        .await
}

async fn spdy(client: &TestClient, query: &str, tty: bool) -> AttachSession<Io> {
    let headers = [
        ("connection", "Upgrade"),
        ("upgrade", "SPDY/3.1"),
        ("x-stream-protocol-version", "v4.channel.k8s.io"),
    ];
    let resp = client
        .upgrade(Method::POST, &format!("{BASE}/attach?{query}"), &headers)
        .await
        .expect("upgrade request");
    assert_eq!(resp.status, StatusCode::SWITCHING_PROTOCOLS, "{resp:?}");
    AttachSession::open(resp.io.expect("upgraded"), true, true, !tty, tty)
        .await
        .expect("streams open")
}

/// The pod's recordings once `n` of them have ended (bounded wait).
async fn ended_recordings(client: &TestClient, n: usize) -> Vec<Value> {
    ended_recordings_within(client, n, T).await
}

/// [`ended_recordings`], waiting at most `within`.
async fn ended_recordings_within(client: &TestClient, n: usize, within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let (code, list) = client.get_json(&format!("{BASE}/recordings")).await;
        assert_eq!(code, StatusCode::OK, "{list}");
        assert_eq!(list["kind"], "DebugRecordingList");
        assert_eq!(list["apiVersion"], "poddebug.dev/v1alpha1");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if items.len() >= n && items.iter().all(|i| i["status"]["end"].is_string()) {
            return items;
        }
        assert!(Instant::now() < deadline, "recordings not finished: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The recording as asciicast lines (header first), checking the media type.
async fn cast(client: &TestClient, id: &str) -> Vec<Value> {
    cast_sized(client, id).await.0
}

/// [`cast`], with the size of the body.
async fn cast_sized(client: &TestClient, id: &str) -> (Vec<Value>, usize) {
    let (code, headers, body) = client
        .request(
            Method::GET,
            &format!("{BASE}/recordings/{id}"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("get recording");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/x-asciicast")
    );
    let lines = String::from_utf8_lossy(&body)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    (lines, body.len())
}

/// What a player would print: the output events' data, concatenated.
fn replay(lines: &[Value]) -> String {
    lines[1..]
        .iter()
        .filter(|e| e[1] == "o")
        .map(|e| e[2].as_str().unwrap_or_default())
        .collect()
}

fn events<'a>(lines: &'a [Value], code: &str) -> Vec<&'a str> {
    lines[1..]
        .iter()
        .filter(|e| e[1] == code)
        .map(|e| e[2].as_str().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_websocket_session_is_recorded_and_replays_its_output() {
    let e = env(&[]).await;
    let mut c = ws(&e.client, TTY).await;
    c.resize(120, 40).await.expect("resize");
    c.read_until(T, |t| t.stdout_text().contains("resize 120x40\n"))
        .await;
    c.stdin("héllo €\n".as_bytes()).await.expect("send");
    c.read_until(T, |t| t.stdout_text().ends_with("héllo €\n"))
        .await;
    c.resize(90, 20).await.expect("resize");
    c.read_until(T, |t| t.stdout_text().contains("resize 90x20\n"))
        .await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    let t = c.finish(T).await.clone();
    assert_eq!(t.exit_code(), Some(0));

    let items = ended_recordings(&e.client, 1).await;
    let item = &items[0];
    assert_eq!(item["spec"]["container"], "dbg");
    assert_eq!(item["spec"]["user"], "alice");
    assert_eq!(item["status"]["exitCode"], 0);
    assert_eq!(item["status"]["truncated"], false);
    assert_eq!(
        item["status"]["verified"], true,
        "the server's own metadata"
    );
    let id = item["metadata"]["name"].as_str().expect("id");
    let (lines, size) = cast_sized(&e.client, id).await;
    assert_eq!(
        item["status"]["bytes"].as_u64(),
        Some(size as u64),
        "the list tells the size"
    );
    let header = &lines[0];
    assert_eq!(header["version"], 2);
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(120), Some(40))
    );
    assert_eq!(header["poddebug"]["pod"], POD);
    assert_eq!(header["poddebug"]["namespace"], NS);
    assert_eq!(header["poddebug"]["container"], "dbg");
    assert_eq!(header["poddebug"]["user"], "alice");
    assert_eq!(replay(&lines), t.stdout_text(), "byte for byte");
    assert_eq!(events(&lines, "r"), vec!["90x20"]);
    assert!(events(&lines, "i").is_empty(), "input is off by default");
    let mut last = 0.0;
    for l in &lines[1..] {
        let at = l[0].as_f64().expect("time");
        assert!(at >= last, "times never go back");
        last = at;
    }

    // One audit record for the session, naming the recording, in the schema of every other.
    assert!(e.server.wait_for_log("\"action\":\"session\"", T).await);
    let audit = e
        .server
        .logs()
        .into_iter()
        .find(|l| l.contains("\"action\":\"session\""))
        .unwrap_or_default();
    let record: Value = serde_json::from_str(&audit).expect("one JSON line");
    assert_eq!(record["target"], "poddebug::audit");
    let groups: Vec<String> =
        serde_json::from_str(record["groups"].as_str().expect("groups")).expect("a JSON array");
    assert!(groups.contains(&"devs".to_owned()), "{groups:?}");
    for needle in [
        "poddebug::audit",
        "alice",
        "devs",
        "\"exit_code\":0",
        id,
        "bytes_in",
        "bytes_out",
    ] {
        assert!(audit.contains(needle), "{needle} in {audit}");
    }
}

#[tokio::test]
async fn a_spdy_session_is_recorded_with_input_when_asked() {
    let e = env(&["--record-input"]).await;
    let mut s = spdy(&e.client, NO_TTY, false).await;
    s.send_stdin(b"over spdy\n").await.expect("send");
    s.read_until(T, |t| t.stdout.ends_with(b"over spdy\n"))
        .await;
    s.close_stdin().await.expect("FIN");
    let t = s.finish(T).await.clone();
    drop(s);
    let mut s = spdy(&e.client, TTY, true).await;
    s.resize(100, 30).await.expect("resize");
    s.read_until(T, |t| t.stdout_text().contains("resize 100x30\n"))
        .await;
    s.close_stdin().await.expect("FIN");
    let t2 = s.finish(T).await.clone();
    drop(s);

    let items = ended_recordings(&e.client, 2).await;
    assert_eq!(items.len(), 2);
    let first = cast(
        &e.client,
        items[0]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    assert_eq!(replay(&first), t.stdout_text());
    assert_eq!(events(&first, "i").concat(), "over spdy\n");
    assert_eq!(first[0]["poddebug"]["protocol"], "spdy/v4.channel.k8s.io");
    let second = cast(
        &e.client,
        items[1]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    assert_eq!(replay(&second), t2.stdout_text());
    assert_eq!(
        (second[0]["width"].as_u64(), second[0]["height"].as_u64()),
        (Some(100), Some(30)),
        "the first resize sizes the terminal"
    );
    assert_eq!(items[1]["status"]["exitCode"], 0);
}

#[tokio::test]
async fn the_commands_typed_are_derived_from_the_input_counted_and_served() {
    let e = env(&["--record-input"]).await;
    let mut c = ws(&e.client, TTY).await;
    // A line edited with Backspace and Ctrl-W, one abandoned with Ctrl-C, one recalled from
    // history and extended: sent in pieces, as a terminal sends keys.
    for keys in [
        &b"cat /etc/pas"[..],
        b"swdd\x7f\r",
        b"rm -rf / tmp\x17\x17\x03",
        b"\x1b[A | wc -l\r",
        b"echo done\r",
    ] {
        c.stdin(keys).await.expect("send");
    }
    c.read_until(T, |t| t.stdout_text().contains("echo done"))
        .await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;

    let items = ended_recordings(&e.client, 1).await;
    assert_eq!(items[0]["status"]["commandCount"], 3, "{}", items[0]);
    let id = items[0]["metadata"]["name"].as_str().expect("id");
    let (code, list) = e
        .client
        .get_json(&format!("{BASE}/recordings/{id}/commands"))
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "DebugRecordingCommandList");
    assert_eq!(list["apiVersion"], "poddebug.dev/v1alpha1");
    assert_eq!(list["verified"], true);
    assert_eq!(list["dropped"], 0);
    let got: Vec<(String, bool)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|c| {
            assert!(c["offset"].as_f64().is_some_and(|o| o >= 0.0), "{c}");
            (
                c["line"].as_str().unwrap_or_default().to_owned(),
                c["recalled"].as_bool().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("cat /etc/passwd".to_owned(), false),
            (" | wc -l".to_owned(), true),
            ("echo done".to_owned(), false),
        ]
    );
    // A recording that is not there, and an id that is not one.
    for id in ["20260101t000000z-0123456789abcdef", "..%2F..%2Fsecret"] {
        let (code, status) = e
            .client
            .get_json(&format!("{BASE}/recordings/{id}/commands"))
            .await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{id}: {status}");
        assert_eq!(status["reason"], "NotFound");
    }
}

#[tokio::test]
async fn without_recorded_input_a_recording_has_no_commands() {
    let e = env(&[]).await;
    let mut c = ws(&e.client, TTY).await;
    c.stdin(b"id\r").await.expect("send");
    c.read_until(T, |t| t.stdout_text().contains("id")).await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;
    let items = ended_recordings(&e.client, 1).await;
    assert!(
        items[0]["status"].get("commandCount").is_none(),
        "{}",
        items[0]
    );
    let id = items[0]["metadata"]["name"].as_str().expect("id");
    let (code, status) = e
        .client
        .get_json(&format!("{BASE}/recordings/{id}/commands"))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    assert_eq!(status["kind"], "Status");
}

#[tokio::test]
async fn reading_recordings_is_its_own_permission() {
    let e = env(&[]).await;
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    // bob can attach (and is recorded) but cannot read recordings.
    let mut c = ws(&bob, TTY).await;
    c.close_channel(ch::STDIN).await.expect("close");
    c.finish(T).await;
    let items = ended_recordings(&e.client, 1).await;
    assert_eq!(items[0]["spec"]["user"], "bob");
    let id = items[0]["metadata"]["name"].as_str().expect("id");
    for path in [
        format!("{BASE}/recordings"),
        format!("{BASE}/recordings/{id}"),
        format!("{BASE}/recordings/{id}/commands"),
    ] {
        let (code, status) = bob.get_json(&path).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{path}: {status}");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "Forbidden");
        let msg = status["message"].as_str().unwrap_or_default();
        assert!(msg.contains("pods/recordings"), "{msg}");
    }
}

#[tokio::test]
async fn ids_that_are_not_ids_are_refused() {
    let e = env(&[]).await;
    // A file the ids must never reach.
    std::fs::write(e.dir.0.join("secret"), b"x").expect("write");
    for id in [
        "..%2F..%2Fsecret",
        "..%2F..",
        "secret",
        "20260101T000000Z-0123456789abcdef",
        "20260101T000000Z-0123456789abcdef.json",
        "%2E%2E",
    ] {
        let (code, status) = e.client.get_json(&format!("{BASE}/recordings/{id}")).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{id}: {status}");
        assert_eq!(status["reason"], "NotFound", "{id}");
    }
    let (code, list) = e
        .client
        .get_json("/apis/poddebug.dev/v1alpha1/namespaces/default/pods/other/recordings")
        .await;
    assert_eq!(
        (code, list["items"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0))
    );
}

/// A session that echoes 40 lines of 200 `fill` characters, in full: the session itself is
/// whole whatever its recording keeps.
async fn forty_lines(e: &Env, fill: &str) -> Transcript {
    let mut c = ws(&e.client, TTY).await;
    let line = fill.repeat(200) + "\n";
    for _ in 0..40 {
        c.stdin(line.as_bytes()).await.expect("send");
    }
    c.read_until(T, |t| t.stdout.len() >= 40 * line.len()).await;
    c.close_channel(ch::STDIN).await.expect("close");
    let t = c.finish(T).await.clone();
    assert_eq!(
        t.stdout.len(),
        40 * line.len(),
        "the session itself is whole"
    );
    t
}

#[tokio::test]
async fn the_size_cap_truncates_the_recording_not_the_session() {
    let e = env(&["--max-recording-bytes=4096"]).await;
    let t = forty_lines(&e, "x").await;
    let items = ended_recordings(&e.client, 1).await;
    assert_eq!(items[0]["status"]["truncated"], true);
    assert!(
        items[0]["status"]["bytes"].as_u64().unwrap_or(u64::MAX) <= 4096,
        "{}",
        items[0]
    );
    let lines = cast(
        &e.client,
        items[0]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    let last = lines.last().expect("lines");
    assert_eq!(last[1], "m");
    assert_eq!(last[2], "recording truncated: size limit reached");
    let played = replay(&lines);
    assert!(!played.is_empty() && t.stdout_text().starts_with(&played));
}

#[tokio::test]
async fn output_over_the_rate_bound_leaves_a_marked_gap_and_the_session_whole() {
    // 128 bytes/s: a burst of 1024 bytes is recorded, the rest of the flood is skipped.
    let e = env(&["--max-recording-rate=128"]).await;
    let t = forty_lines(&e, "y").await;
    let items = ended_recordings(&e.client, 1).await;
    assert_eq!(
        items[0]["status"]["truncated"], false,
        "a gap is not a truncation"
    );
    let lines = cast(
        &e.client,
        items[0]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    let played = replay(&lines);
    assert!(
        !played.is_empty() && played.len() <= 1024,
        "only the burst is recorded: {} bytes",
        played.len()
    );
    assert!(t.stdout_text().starts_with(&played));
    let gap = lines
        .iter()
        .find(|l| l[1] == "m")
        .unwrap_or_else(|| panic!("a gap marker: {lines:?}"));
    let skipped = t.stdout.len() - played.len();
    assert_eq!(
        gap[2],
        format!("{skipped} bytes not recorded: over --max-recording-rate")
    );
}

#[tokio::test]
async fn strict_mode_slows_a_flood_to_the_rate_and_records_every_byte() {
    // 768 bytes/s: a burst of 6144 bytes, and 8040 bytes of output. best-effort would skip
    // the rest (the test above); strict makes the stream wait instead.
    let e = env(&["--recording-mode=strict", "--max-recording-rate=768"]).await;
    let t = forty_lines(&e, "s").await;
    let items = ended_recordings(&e.client, 1).await;
    assert_eq!(items[0]["status"]["truncated"], false);
    let lines = cast(
        &e.client,
        items[0]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    assert_eq!(lines[0]["poddebug"]["recordingMode"], "strict");
    assert!(
        events(&lines, "m").is_empty(),
        "no gap: {:?}",
        events(&lines, "m")
    );
    assert_eq!(replay(&lines), t.stdout_text(), "every byte the client got");
}

#[tokio::test]
async fn strict_mode_ends_the_session_when_its_recording_cannot_go_on() {
    let e = env(&["--recording-mode=strict", "--max-recording-bytes=4096"]).await;
    let mut c = ws(&e.client, TTY).await;
    let line = "z".repeat(200) + "\n";
    // One line at a time, each echoed before the next: the output passes the cap at line 21.
    let mut sent = 0;
    for i in 1..=40 {
        let t = c.transcript();
        if t.ended || t.error_done || c.stdin(line.as_bytes()).await.is_err() {
            break;
        }
        sent = i;
        c.read_until(T, |t| t.stdout.len() >= i * line.len() || t.error_done)
            .await;
    }
    let t = c.finish(T).await.clone();
    assert!(
        (20..40).contains(&sent),
        "{sent} lines sent; stdout {} bytes, error {:?}, close {:?}\n{}",
        t.stdout.len(),
        t.status(),
        t.close,
        e.server.logs_text()
    );
    // Ended by the server, with a Status on the error channel and a policy close.
    let status = t
        .status()
        .unwrap_or_else(|| panic!("a Status on the error channel: {t:?}"));
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["code"], 503);
    assert_eq!(status["reason"], "ServiceUnavailable");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "its recording cannot go on (its size limit (--max-recording-bytes) was reached)"
        ) && message.contains("--recording-mode=strict"),
        "{message}"
    );
    assert_eq!(t.close.as_ref().map(|c| c.0), Some(1008), "{:?}", t.close);
    assert!(
        t.stdout.len() < 40 * line.len(),
        "the session was cut short"
    );
    // Everything the client got is in the recording, which says how the session ended.
    let items = ended_recordings(&e.client, 1).await;
    let lines = cast(
        &e.client,
        items[0]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    assert_eq!(replay(&lines), t.stdout_text());
    assert_eq!(
        events(&lines, "m"),
        ["session ended by the server: its size limit (--max-recording-bytes) was reached"]
    );
    // The session's audit record says so too.
    assert!(e.server.wait_for_log("\"action\":\"session\"", T).await);
    let audit = e
        .server
        .logs()
        .into_iter()
        .find(|l| l.contains("\"action\":\"session\""))
        .unwrap_or_default();
    assert!(audit.contains("ended by the server"), "{audit}");
}

#[tokio::test]
async fn strict_mode_needs_a_recording_dir() {
    // The flags are checked before anything else is started.
    let mut server = PodDebugServer::spawn_raw(&["--recording-mode=strict".to_owned()]);
    let status = server.wait_exit(T).await.expect("the server exits");
    assert!(!status.success());
    assert!(
        server
            .logs_text()
            .contains("--recording-mode=strict needs a place to record: set --recording-store"),
        "{}",
        server.logs_text()
    );
}

fn backdate(path: &Path, age: Duration) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open")
        .set_modified(SystemTime::now() - age)
        .expect("set mtime");
}

#[tokio::test]
async fn recordings_past_their_retention_are_deleted() {
    let dir = TempDir::new();
    let pod = dir.0.join(NS).join(POD);
    std::fs::create_dir_all(&pod).expect("dir");
    let old = "20200101T000000Z-00000000000000aa";
    let young = "20200101T000000Z-00000000000000bb";
    for id in [old, young] {
        let meta = json!({"id": id, "namespace": NS, "pod": POD, "container": "dbg", "user": "u",
            "protocol": "websocket", "start": "2020-01-01T00:00:00Z", "bytes": 1});
        std::fs::write(pod.join(format!("{id}.json")), meta.to_string()).expect("write");
        std::fs::write(pod.join(format!("{id}.cast")), b"{}\n").expect("write");
    }
    for ext in ["json", "cast"] {
        backdate(
            &pod.join(format!("{old}.{ext}")),
            Duration::from_secs(2 * 3600),
        );
    }
    let e = env_in(dir, &["--recording-retention=1h"]).await;
    let deadline = Instant::now() + T;
    let items = loop {
        let (code, list) = e.client.get_json(&format!("{BASE}/recordings")).await;
        assert_eq!(code, StatusCode::OK);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 1 {
            break items;
        }
        assert!(Instant::now() < deadline, "not swept: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(items[0]["metadata"]["name"], young);
    assert!(!pod.join(format!("{old}.cast")).exists());
    assert!(pod.join(format!("{young}.cast")).exists());
    // The leader (this server alone leads) counts what it deleted.
    let (code, _, body) = e
        .client
        .request(Method::GET, "/metrics", &[], bytes::Bytes::new())
        .await
        .expect("metrics");
    assert_eq!(code, StatusCode::OK);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.lines()
            .any(|l| l == "poddebug_recordings_deleted_total 1"),
        "{text}"
    );
}

#[tokio::test]
async fn without_a_recording_dir_there_are_no_recordings() {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let client = server.front_proxy_client("alice", &["system:authenticated"]);
    let (code, status) = client.get_json(&format!("{BASE}/recordings")).await;
    assert_eq!(
        (code, status["kind"].as_str()),
        (StatusCode::NOT_FOUND, Some("Status"))
    );
}

#[tokio::test]
async fn a_detached_session_has_no_exit_code() {
    let e = env(&[]).await;
    let mut c = ws(&e.client, TTY).await;
    c.stdin(b"still here\n").await.expect("send");
    c.read_until(T, |t| t.stdout.ends_with(b"still here\n"))
        .await;
    // The client goes away; the process goes on running.
    c.close().await.expect("close");
    let items = ended_recordings(&e.client, 1).await;
    assert!(items[0]["status"].get("exitCode").is_none(), "{}", items[0]);
    let lines = cast(
        &e.client,
        items[0]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    assert_eq!(replay(&lines), "still here\n");
}

/// Writes a finished recording the way the store lays one out (metadata and one part).
fn seed(dir: &Path, ns: &str, pod: &str, id: &str, user: &str, start: &str, text: &str) {
    let pod_dir = dir.join(ns).join(pod);
    std::fs::create_dir_all(pod_dir.join(id)).expect("dir");
    let meta = json!({"id": id, "namespace": ns, "pod": pod, "container": "dbg", "user": user,
        "protocol": "websocket/v5.channel.k8s.io", "start": start,
        "end": start, "bytes": text.len(), "exitCode": 0});
    std::fs::write(pod_dir.join(format!("{id}.json")), meta.to_string()).expect("write");
    std::fs::write(pod_dir.join(id).join("00000000.part"), text).expect("write");
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

const GV: &str = "/apis/poddebug.dev/v1alpha1";

#[tokio::test]
async fn recordings_are_api_objects_listed_per_pod_namespace_and_cluster() {
    let dir = TempDir::new();
    let ids = [
        "20260101t000001z-00000000000000a1",
        "20260101t000002z-00000000000000a2",
        "20260101t000003z-00000000000000a3",
        "20260101t000004z-00000000000000b1",
    ];
    seed(
        &dir.0,
        NS,
        POD,
        ids[0],
        "alice",
        "2026-01-01T00:00:01Z",
        "{}\n",
    );
    seed(
        &dir.0,
        NS,
        POD,
        ids[1],
        "bob",
        "2026-01-01T00:00:02Z",
        "{}\n",
    );
    seed(
        &dir.0,
        NS,
        "api",
        ids[2],
        "system:serviceaccount:ci:bot",
        "2026-01-01T00:00:03Z",
        "{}\n",
    );
    seed(
        &dir.0,
        "shop",
        "cart",
        ids[3],
        "alice",
        "2026-01-01T00:00:04Z",
        "{}\n",
    );
    // A recording of an earlier version: one file beside its metadata.
    let legacy = "20260101T000000Z-00000000000000f0";
    let meta = json!({"id": legacy, "namespace": NS, "pod": POD, "container": "dbg",
        "user": "alice", "protocol": "spdy/v4.channel.k8s.io", "start": "2026-01-01T00:00:00Z",
        "end": "2026-01-01T00:00:09Z", "bytes": 3});
    std::fs::write(
        dir.0.join(NS).join(POD).join(format!("{legacy}.json")),
        meta.to_string(),
    )
    .expect("write");
    std::fs::write(
        dir.0.join(NS).join(POD).join(format!("{legacy}.cast")),
        "old",
    )
    .expect("write");
    let e = env_in(dir, &[]).await;
    // carol may list recordings in shop only.
    e._fake.set_policy(|a| {
        if a.user == "carol" && a.is("list", "pods/recordings") {
            return a.namespace == "shop";
        }
        !(a.user == "bob" && a.is("get", "pods/recordings"))
    });

    // One pod's: Recording objects, oldest first.
    let (code, list) = e.client.get_json(&format!("{BASE}/recordings")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "DebugRecordingList");
    assert_eq!(names(&list), [legacy, ids[0], ids[1]]);
    let first = &list["items"][1];
    assert_eq!(first["apiVersion"], "poddebug.dev/v1alpha1");
    assert_eq!(first["kind"], "DebugRecording");
    assert_eq!(first["metadata"]["namespace"], NS);
    assert_eq!(
        first["metadata"]["creationTimestamp"],
        "2026-01-01T00:00:01Z"
    );
    assert_eq!(
        first["metadata"]["labels"],
        json!({"poddebug.dev/pod": POD, "poddebug.dev/container": "dbg", "poddebug.dev/user": "alice"})
    );
    assert_eq!(first["spec"]["protocol"], "websocket/v5.channel.k8s.io");
    assert_eq!(first["status"]["exitCode"], 0);
    // Metadata the server did not sign (written here, as anyone with access to the store
    // could) is listed as not vouched for.
    assert_eq!(first["status"]["verified"], false);
    let (code, _, body) = e
        .client
        .request(
            Method::GET,
            &format!("{BASE}/recordings/{legacy}"),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("legacy");
    assert_eq!((code, &body[..]), (StatusCode::OK, &b"old"[..]));

    // A namespace's, every namespace's, and by label.
    let (code, list) = e
        .client
        .get_json(&format!("{GV}/namespaces/{NS}/debugrecordings"))
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(names(&list), [legacy, ids[0], ids[1], ids[2]]);
    let (code, all) = e.client.get_json(&format!("{GV}/debugrecordings")).await;
    assert_eq!(code, StatusCode::OK, "{all}");
    assert_eq!(names(&all), [legacy, ids[0], ids[1], ids[2], ids[3]]);
    let (_, by_user) = e
        .client
        .get_json(&format!(
            "{GV}/debugrecordings?labelSelector=poddebug.dev%2Fuser%3Dalice"
        ))
        .await;
    assert_eq!(names(&by_user), [legacy, ids[0], ids[3]]);
    let bot = &list["items"][3];
    assert_eq!(bot["spec"]["user"], "system:serviceaccount:ci:bot");
    assert!(
        bot["metadata"]["labels"]["poddebug.dev/user"]
            .as_str()
            .is_some_and(|v| !v.contains(':')),
        "{bot}"
    );
    let (code, bad) = e
        .client
        .get_json(&format!("{GV}/debugrecordings?labelSelector=a%3D%3D%3D"))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{bad}");

    // Pages: limit and continue walk the list once, in order.
    let mut seen = Vec::new();
    let mut token = String::new();
    for _ in 0..5 {
        let q = if token.is_empty() {
            "limit=2".to_owned()
        } else {
            format!("limit=2&continue={token}")
        };
        let (code, page) = e
            .client
            .get_json(&format!("{GV}/debugrecordings?{q}"))
            .await;
        assert_eq!(code, StatusCode::OK, "{page}");
        seen.extend(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, names(&all));
    let (code, bad) = e
        .client
        .get_json(&format!("{GV}/debugrecordings?continue=garbage"))
        .await;
    assert_eq!(
        (code, bad["reason"].as_str()),
        (StatusCode::BAD_REQUEST, Some("BadRequest"))
    );

    // One by name; a Table; no watch.
    let (code, one) = e
        .client
        .get_json(&format!("{GV}/namespaces/{NS}/debugrecordings/{}", ids[1]))
        .await;
    assert_eq!(
        (code, one["kind"].as_str()),
        (StatusCode::OK, Some("DebugRecording")),
        "{one}"
    );
    assert_eq!(one["spec"]["user"], "bob");
    let (code, missing) = e
        .client
        .get_json(&format!("{GV}/namespaces/shop/debugrecordings/{}", ids[1]))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{missing}");
    let table = e.client.get_table(&format!("{GV}/debugrecordings")).await;
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        [
            "Name",
            "Pod",
            "Container",
            "User",
            "Bytes",
            "Exit",
            "Truncated",
            "Protocol",
            "Ended",
            "Verified",
            "Age"
        ]
    );
    assert_eq!(table["rows"].as_array().map(Vec::len), Some(5));
    assert_eq!(table["rows"][4]["object"]["metadata"]["namespace"], "shop");
    let (code, status) = e
        .client
        .get_json(&format!("{GV}/debugrecordings?watch=true"))
        .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED, "{status}");

    // One permission decides, whichever path: carol lists shop's, nobody else's.
    let carol = e
        .server
        .front_proxy_client("carol", &["system:authenticated"]);
    let (code, list) = carol
        .get_json(&format!("{GV}/namespaces/shop/debugrecordings"))
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(names(&list), [ids[3]]);
    for path in [
        format!("{GV}/debugrecordings"),
        format!("{GV}/namespaces/{NS}/debugrecordings"),
    ] {
        let (code, status) = carol.get_json(&path).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{path}: {status}");
        assert!(
            status["message"]
                .as_str()
                .unwrap_or("")
                .contains("pods/recordings"),
            "{status}"
        );
    }
}

#[tokio::test]
async fn a_second_replica_lists_and_replays_the_firsts_recordings_and_a_killed_one_reads_truncated()
{
    let dir = TempDir::new();
    let store = format!("--recording-store=file://{}", dir.0.display());
    let mut e = env_in(dir, &["--recording-part-interval=1s"]).await;
    let pki = e._fake.pki().clone();
    let two = PodDebugServer::start(&e._fake, &pki, &[&store]).await;
    let alice2 = two.front_proxy_client("alice", &["system:authenticated", "devs"]);

    // Recorded by the first, ended: listed and replayed by the second.
    let mut c = ws(&e.client, TTY).await;
    c.stdin(b"through one\n").await.expect("send");
    c.read_until(T, |t| t.stdout.ends_with(b"through one\n"))
        .await;
    c.close().await.expect("close");
    let items = ended_recordings(&alice2, 1).await;
    let first = items[0]["metadata"]["name"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(replay(&cast(&alice2, &first).await), "through one\n");

    // A running session: its output reaches the store within a part interval, readable
    // through the second; then the first is killed and the recording reads truncated.
    let mut c = ws(&e.client, TTY).await;
    c.stdin(b"before the kill\n").await.expect("send");
    c.read_until(T, |t| t.stdout.ends_with(b"before the kill\n"))
        .await;
    let deadline = Instant::now() + T;
    let running = loop {
        let (_, list) = alice2.get_json(&format!("{BASE}/recordings")).await;
        let found = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["metadata"]["name"] != first.as_str())
            .and_then(|i| i["metadata"]["name"].as_str())
            .map(str::to_owned);
        if let Some(id) = found {
            let (code, _, body) = alice2
                .request(
                    Method::GET,
                    &format!("{BASE}/recordings/{id}"),
                    &[],
                    bytes::Bytes::new(),
                )
                .await
                .expect("read");
            if code == StatusCode::OK && String::from_utf8_lossy(&body).contains("before the kill")
            {
                break id;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the running session's part never arrived: {list}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &e.server.pid().to_string()])
        .status();
    assert!(
        e.server.wait_exit(T).await.is_some(),
        "the replica survived SIGKILL"
    );
    drop(c);
    // Six part intervals without a renewal, plus the poll.
    let deadline = Instant::now() + Duration::from_secs(6 + 10);
    let item = loop {
        let (_, list) = alice2.get_json(&format!("{BASE}/recordings")).await;
        let item = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["metadata"]["name"] == running.as_str())
            .cloned()
            .expect("still listed");
        if item["status"]["truncated"] == true {
            break item;
        }
        assert!(Instant::now() < deadline, "never truncated: {item}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(item["status"]["end"].is_string(), "{item}");
    let lines = cast(&alice2, &running).await;
    assert!(replay(&lines).contains("before the kill"), "{lines:?}");
}

#[tokio::test]
async fn recording_store_urls_are_checked_at_start() {
    for (flag, want) in [
        ("--recording-store=gopher://x", "unsupported store"),
        ("--recording-store=file://relative", "absolute path"),
        (
            "--recording-part-interval=0s",
            "--recording-part-interval must be between 1s and 60s",
        ),
    ] {
        let mut args = vec![flag.to_owned()];
        if !flag.starts_with("--recording-store") {
            args.push("--recording-dir=/tmp/poddebug-never-used".to_owned());
        }
        let mut server = PodDebugServer::spawn_raw(&args);
        let status = server.wait_exit(T).await.expect("the server exits");
        assert!(!status.success(), "{flag}");
        // Its last lines may still be on their way from the pipe when it has exited.
        let deadline = Instant::now() + T;
        while !server.logs_text().contains(want) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            server.logs_text().contains(want),
            "{flag}: {}",
            server.logs_text()
        );
    }
}

/// The gauge `poddebug_recording_memory_bytes` of the server `client` talks to.
async fn recording_memory(client: &TestClient) -> u64 {
    common::metric(
        &common::metrics(client).await,
        "poddebug_recording_memory_bytes",
    )
    .expect("the gauge") as u64
}

/// Send `n` bytes of `fill` (16 KiB at a time) and read their echo whole.
async fn echo(c: &mut ChannelClient<Io>, fill: u8, n: usize) {
    echo_by(c, fill, n, 16 << 10).await;
}

/// [`echo`], `chunk` bytes at a time.
async fn echo_by(c: &mut ChannelClient<Io>, fill: u8, n: usize, chunk: usize) {
    let chunk = vec![fill; chunk];
    let mut sent = 0;
    while sent < n {
        let len = chunk.len().min(n - sent);
        c.stdin(&chunk[..len]).await.expect("send");
        sent += len;
    }
    let before = c.transcript().stdout.len();
    c.read_until(T, |t| t.stdout.len() >= before + n).await;
    assert_eq!(
        c.transcript().stdout.len(),
        before + n,
        "the session is whole"
    );
}

/// Sessions of `e` end with exit code 3 on their error channel: their recordings finish at
/// once, without waiting for the container's status to report an exit code.
fn ending_with_a_code(e: &Env) {
    e._fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"] =
            json!({poddebug_tests::fake::ATTACH_EXIT_CODE_ANNOTATION: "3"});
    });
}

/// Flags that keep what a session records in the replica's memory until it ends: parts are
/// written at 1 MiB or each minute.
const HOLD: [&str; 3] = [
    "--max-recording-memory=1048576",
    "--recording-part-interval=60s",
    "--max-recording-rate=0",
];

#[tokio::test]
async fn a_best_effort_recording_stops_when_the_replicas_recording_memory_is_full() {
    let e = env(&HOLD).await;
    ending_with_a_code(&e);
    // The first session holds 700 KiB of the replica's 1 MiB; the second finds room for less
    // than its 500 KiB: its recording stops there, its session goes on.
    let mut a = ws(&e.client, TTY).await;
    echo(&mut a, b'a', 700 << 10).await;
    let mut b = ws(&e.client, TTY).await;
    echo(&mut b, b'b', 500 << 10).await;
    let held = recording_memory(&e.client).await;
    assert!(held <= (1 << 20) + (64 << 10), "{held}");
    for c in [&mut a, &mut b] {
        c.close_channel(ch::STDIN).await.expect("close");
        c.finish(T).await;
    }
    // A recording that stopped early does not see the exit code on the stream: its end waits
    // (5 s) for the container's status to tell one.
    let items = ended_recordings_within(&e.client, 2, 3 * T).await;
    let (first, second) = (&items[0], &items[1]);
    assert_eq!(first["status"]["truncated"], false, "{first}");
    assert_eq!(second["status"]["truncated"], true, "{second}");
    let lines = cast(&e.client, second["metadata"]["name"].as_str().expect("id")).await;
    let played = replay(&lines);
    assert!(
        !played.is_empty() && played.len() < 500 << 10 && played.bytes().all(|c| c == b'b'),
        "{} bytes",
        played.len()
    );
    assert_eq!(
        lines.last().map(|l| l[2].clone()),
        Some(json!(
            "recording truncated: the replica's recording memory (--max-recording-memory) was full"
        ))
    );
    let lines = cast(&e.client, first["metadata"]["name"].as_str().expect("id")).await;
    assert_eq!(replay(&lines).len(), 700 << 10);
    // Once both are written, the memory is free again.
    let deadline = Instant::now() + T;
    while recording_memory(&e.client).await != 0 {
        assert!(Instant::now() < deadline, "memory given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_strict_stream_waits_for_the_replicas_recording_memory_and_loses_nothing() {
    let mut flags = vec!["--recording-mode=strict"];
    flags.extend(HOLD);
    let e = env(&flags).await;
    ending_with_a_code(&e);
    let mut a = ws(&e.client, TTY).await;
    echo(&mut a, b'a', 700 << 10).await;
    // The second session's output waits for room: it cannot all be recorded while the first
    // holds its 700 KiB.
    let mut b = ws(&e.client, TTY).await;
    let second = tokio::spawn(async move {
        echo(&mut b, b'b', 500 << 10).await;
        b.close_channel(ch::STDIN).await.expect("close");
        b.finish(T).await.clone()
    });
    let deadline = Instant::now() + T;
    while recording_memory(&e.client).await < (1 << 20) - (64 << 10) {
        assert!(Instant::now() < deadline, "the memory fills");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!second.is_finished(), "the second stream waits for room");
    // The first ends and is written: the second goes on, and nothing of either is lost.
    a.close_channel(ch::STDIN).await.expect("close");
    a.finish(T).await;
    let t = tokio::time::timeout(T * 2, second)
        .await
        .expect("the second stream went on")
        .expect("its task");
    assert_eq!(t.stdout.len(), 500 << 10);
    let items = ended_recordings(&e.client, 2).await;
    for (item, n) in items.iter().zip([700 << 10, 500 << 10]) {
        assert_eq!(item["status"]["truncated"], false, "{item}");
        let lines = cast(&e.client, item["metadata"]["name"].as_str().expect("id")).await;
        assert_eq!(replay(&lines).len(), n);
    }
}

/// `client`'s attach, or the refusal's code and Status.
async fn try_ws(
    client: &TestClient,
    query: &str,
) -> Result<ChannelClient<Io>, (StatusCode, Value)> {
    let headers = TestClient::websocket_headers("v5.channel.k8s.io");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = client
        .upgrade(Method::GET, &format!("{BASE}/attach?{query}"), &headers)
        .await
        .expect("upgrade request");
    if resp.status != StatusCode::SWITCHING_PROTOCOLS {
        return Err((
            resp.status,
            serde_json::from_slice(&resp.body).unwrap_or(Value::Null),
        ));
    }
    Ok(ChannelClient::new(resp.io.expect("upgraded"), "v5.channel.k8s.io").await)
}

#[tokio::test]
async fn strict_mode_refuses_a_user_whose_recordings_fill_their_quota() {
    let e = env(&[
        "--recording-mode=strict",
        "--recording-quota-per-user=16384",
        "--max-recording-rate=0",
    ])
    .await;
    ending_with_a_code(&e);
    // alice's session is ended once her recordings reach 16 KiB.
    let mut c = ws(&e.client, TTY).await;
    let line = "q".repeat(1000) + "\n";
    for _ in 0..40 {
        let t = c.transcript();
        if t.ended || t.error_done || c.stdin(line.as_bytes()).await.is_err() {
            break;
        }
        let want = c.transcript().stdout.len() + line.len();
        c.read_until(T, |t| t.stdout.len() >= want || t.error_done)
            .await;
    }
    let t = c.finish(T).await.clone();
    let status = t
        .status()
        .unwrap_or_else(|| panic!("a Status on the error channel: {t:?}"));
    assert_eq!(status["code"], 503);
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("its user's recording quota (--recording-quota-per-user) was reached"),
        "{status}"
    );
    assert!(t.stdout.len() < 40 * line.len(), "cut short");
    // Once the store's usage is scanned again, she is refused before the container is
    // reached; bob is not.
    let deadline = Instant::now() + T;
    let (code, status) = loop {
        match try_ws(&e.client, TTY).await {
            Err(refused) => break refused,
            Ok(mut c) => {
                assert!(Instant::now() < deadline, "alice is refused");
                c.close_channel(ch::STDIN).await.expect("close");
                c.finish(T).await;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("exceeded quota: the recordings of user \"alice\" hold ")
            && message.contains("at or over --recording-quota-per-user (16 KiB)"),
        "{message}"
    );
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    let mut c = try_ws(&bob, TTY).await.expect("bob attaches");
    c.close_channel(ch::STDIN).await.expect("close");
}

#[tokio::test]
async fn a_best_effort_recording_stops_at_its_users_quota_and_the_session_goes_on() {
    let e = env(&["--recording-quota-per-user=16384", "--max-recording-rate=0"]).await;
    ending_with_a_code(&e);
    let mut c = ws(&e.client, TTY).await;
    echo_by(&mut c, b'q', 24 << 10, 1 << 10).await;
    c.close_channel(ch::STDIN).await.expect("close");
    c.finish(T).await;
    let items = ended_recordings_within(&e.client, 1, 3 * T).await;
    assert_eq!(items[0]["status"]["truncated"], true);
    let bytes = items[0]["status"]["bytes"].as_u64().unwrap_or(u64::MAX);
    assert!((12 << 10..=16 << 10).contains(&bytes), "{bytes}");
    let lines = cast(
        &e.client,
        items[0]["metadata"]["name"].as_str().expect("id"),
    )
    .await;
    assert_eq!(
        lines.last().map(|l| l[2].clone()),
        Some(json!(
            "recording truncated: its user's recordings reached --recording-quota-per-user"
        ))
    );
    // Once the store's usage is scanned again, alice's next recording is its header and the
    // marker; her session is whole all the same.
    let deadline = Instant::now() + T;
    loop {
        let mut c = ws(&e.client, TTY).await;
        echo(&mut c, b'r', 100).await;
        c.close_channel(ch::STDIN).await.expect("close");
        c.finish(T).await;
        let items = ended_recordings_within(&e.client, 1, 3 * T).await;
        let last = items.last().expect("the session's recording");
        let lines = cast(&e.client, last["metadata"]["name"].as_str().expect("id")).await;
        if events(&lines, "o").is_empty() {
            assert_eq!(lines.len(), 2, "{lines:?}");
            assert_eq!(last["status"]["truncated"], true);
            assert_eq!(
                lines[1][2],
                "recording truncated: its user's recordings reached --recording-quota-per-user"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the quota holds: {lines:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The audit trail as OCSF: a create and a recorded session reach `--audit-webhook` as API
/// Activity events (the session's, and its recording's end) and Process Activity events (its
/// commands), each once although the receiver refused the first POST; `--audit-stdout` writes
/// the same events as lines. With `PODDEBUG_OCSF_PYTHON` (a Python with the PyPI packages
/// `ocsf-json-schema` and `jsonschema`, as CI installs), every event is validated against the
/// OCSF schema of its class (`tests/ocsf/validate.py`).
#[tokio::test]
async fn audit_events_reach_the_webhook_once_as_valid_ocsf() {
    let hook = poddebug_tests::webhook::WebhookReceiver::start(1).await;
    let flag = format!("--audit-webhook={}", hook.url());
    let e = env(&["--record-input", &flag, "--audit-stdout"]).await;
    let (code, dc) = e
        .client
        .post_json(
            &format!("{BASE}/debug/probe"),
            &json!({"container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    let mut c = ws(&e.client, TTY).await;
    for keys in [&b"ls /ett\x7fc\r"[..], b"echo done\r"] {
        c.stdin(keys).await.expect("send");
    }
    c.read_until(T, |t| t.stdout_text().contains("echo done"))
        .await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;

    let op = |e: &Value| {
        e["api"]["operation"]
            .as_str()
            .or_else(|| e["process"]["cmd_line"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let want = [
        "create",
        "attach",
        "recording.finished",
        "ls /etc",
        "echo done",
    ];
    // The session's events leave once its exit code is known (a bounded lookup after the end).
    let events = hook
        .wait_for(3 * T, |got| {
            want.iter().all(|w| got.iter().any(|e| op(e) == *w))
        })
        .await
        .unwrap_or_else(|got| panic!("not every event arrived: {got:?}"));
    assert_eq!(
        hook.refused(),
        1,
        "the first POST was refused and tried again"
    );
    let ops: Vec<String> = events.iter().map(op).collect();
    for w in want {
        assert_eq!(
            ops.iter().filter(|o| *o == w).count(),
            1,
            "{w} once: {ops:?}"
        );
    }
    let uids: std::collections::BTreeSet<&str> = events
        .iter()
        .filter_map(|e| e["metadata"]["uid"].as_str())
        .collect();
    assert_eq!(uids.len(), events.len(), "distinct ids");
    let create = events.iter().find(|e| op(e) == "create").expect("create");
    assert_eq!(create["class_uid"], 6003);
    assert_eq!(create["activity_id"], 1);
    assert_eq!(create["actor"]["user"]["name"], "alice");
    assert_eq!(create["resources"][0]["name"], "probe");
    assert_eq!(create["unmapped"]["pod"], POD);
    // The same event, with the same id, is a line of stdout.
    let uid = create["metadata"]["uid"].as_str().expect("uid");
    let on_stdout = e.server.logs().iter().any(|l| {
        serde_json::from_str::<Value>(l)
            .is_ok_and(|v| v["metadata"]["uid"] == uid && op(&v) == "create")
    });
    assert!(
        on_stdout,
        "the create's event on stdout: {:?}",
        e.server.logs()
    );
    let cmd = events.iter().find(|e| op(e) == "ls /etc").expect("command");
    assert_eq!(cmd["class_uid"], 1007);
    assert_eq!(cmd["type_uid"], 100701);
    let attach = events.iter().find(|e| op(e) == "attach").expect("attach");
    // A command's time is the recording's start plus its offset: within the session.
    assert!(
        cmd["time"].as_i64() <= attach["end_time"].as_i64(),
        "{cmd} {attach}"
    );

    poddebug_tests::ocsf::assert_valid(&events);
}

/// `poddebug_audit_webhook_events_total{outcome=…}`.
async fn webhook_events(client: &TestClient, outcome: &str) -> u64 {
    let name = format!("poddebug_audit_webhook_events_total{{outcome=\"{outcome}\"}}");
    common::metric(&common::metrics(client).await, &name).unwrap_or(0.0) as u64
}

#[tokio::test]
async fn a_receiver_that_never_answers_makes_the_export_drop_and_count_never_wait() {
    // A receiver that accepts connections and never answers: every POST hangs until its
    // timeout, so the export's queue fills.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hung = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let flag = format!("--audit-webhook=http://127.0.0.1:{port}/hook");
    let e = env(&["--record-input", &flag]).await;
    // One session whose recorded input holds more commands than the queue holds events
    // (each a Process Activity event at the session's end).
    const COMMANDS: usize = 1500;
    let mut c = ws(&e.client, TTY).await;
    for _ in 0..COMMANDS / 100 {
        c.stdin(&b"x\r".repeat(100)).await.expect("send");
    }
    c.stdin(b"echo last\r").await.expect("send");
    c.read_until(T, |t| t.stdout_text().contains("echo last"))
        .await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;
    let items = ended_recordings(&e.client, 1).await;
    assert_eq!(
        items[0]["status"]["commandCount"].as_u64(),
        Some(COMMANDS as u64 + 1),
        "{items:?}"
    );
    // What did not fit is dropped and counted: at least the events past the queue and the
    // one POST in flight.
    const QUEUE: usize = 1024; // the webhook's queue (apiserver/src/webhook.rs)
    let least = (COMMANDS + 1 - QUEUE - 1) as u64;
    let deadline = Instant::now() + 3 * T;
    let dropped = loop {
        let d = webhook_events(&e.client, "dropped").await;
        if d >= least {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "dropped {d}, expected at least {least}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(dropped <= COMMANDS as u64 + 3, "{dropped}");
    // Meanwhile requests are answered (the export never holds them): a create, and another
    // recorded session.
    let (code, dc) = e
        .client
        .post_json(
            &format!("{BASE}/debug/after-flood"),
            &json!({"container": {"image": "busybox:1.36"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{dc}");
    let mut c = ws(&e.client, TTY).await;
    c.stdin(b"echo still here\r").await.expect("send");
    c.read_until(T, |t| t.stdout_text().contains("still here"))
        .await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;
    assert_eq!(webhook_events(&e.client, "sent").await, 0);
    hung.abort();
}

/// A session on `ns/pod` typing `keys` (a terminal's keys; the fake echoes them), ended once
/// `until` is echoed.
async fn typed(client: &TestClient, ns: &str, pod: &str, keys: &[&[u8]], until: &str) {
    let mut c = ws_at(client, &format!("{GV}/namespaces/{ns}/pods/{pod}"), TTY).await;
    for k in keys {
        c.stdin(k).await.expect("send");
    }
    c.read_until(T, |t| t.stdout_text().contains(until)).await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;
}

/// `(namespace/pod, [(source, text)])` of each item of a search's answer.
fn found(list: &Value) -> Vec<(String, Vec<(String, String)>)> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let matches = i["status"]["matches"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| {
                    assert!(m["offset"].as_f64().is_some_and(|o| o >= 0.0), "{m}");
                    (
                        m["source"].as_str().unwrap_or_default().to_owned(),
                        m["text"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            (
                format!(
                    "{}/{}",
                    i["metadata"]["namespace"].as_str().unwrap_or_default(),
                    i["spec"]["pod"].as_str().unwrap_or_default()
                ),
                matches,
            )
        })
        .collect()
}

fn pair(source: &str, text: &str) -> (String, String) {
    (source.to_owned(), text.to_owned())
}

/// The value of `poddebug_untrusted_records_total{kind="recording"}`.
async fn untrusted_recordings(client: &TestClient) -> f64 {
    common::metric(
        &common::metrics(client).await,
        "poddebug_untrusted_records_total{kind=\"recording\"}",
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn search_finds_recordings_by_their_commands_and_output_per_pod_namespace_and_cluster() {
    let e = env(&["--record-input"]).await;
    for (ns, pod) in [(NS, "api"), ("shop", "cart")] {
        e._fake.add_pod_json(json!({
            "metadata": {"name": pod, "namespace": ns},
            "spec": {
                "containers": [{"name": "app", "image": "busybox"}],
                "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true,
                    "tty": true}],
            },
        }));
        assert!(
            e._fake
                .set_ec_state(ns, pod, "dbg", ContainerState::Running)
        );
    }
    // bob may neither get nor list recordings, carol may list them in shop only.
    e._fake.set_policy(|a| {
        if a.user == "carol" && a.is("list", "pods/recordings") {
            return a.namespace == "shop";
        }
        !(a.user == "bob" && (a.is("get", "pods/recordings") || a.is("list", "pods/recordings")))
    });
    // An edited line (Backspace, cursor moves) is found as it was submitted.
    typed(
        &e.client,
        NS,
        POD,
        &[
            b"echo Alpha-Marker wrongg\x7f\x7f\x7f\x7f\x7f\x7f",
            b"one\r",
        ],
        "one",
    )
    .await;
    typed(&e.client, NS, "api", &[b"echo beta-marker\r"], "beta").await;
    typed(
        &e.client,
        "shop",
        "cart",
        &[b"\x1b[1;32mgreen\x1b[0m alpha-marker two\r"],
        "two",
    )
    .await;
    for (ns, pod) in [(NS, POD), (NS, "api"), ("shop", "cart")] {
        let deadline = Instant::now() + T;
        loop {
            let (_, list) = e
                .client
                .get_json(&format!("{GV}/namespaces/{ns}/pods/{pod}/recordings"))
                .await;
            if list["items"][0]["status"]["end"].is_string() {
                break;
            }
            assert!(Instant::now() < deadline, "{list}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let search = |path: String| {
        let client = e.client.clone();
        async move {
            let (code, list) = client.get_json(&path).await;
            assert_eq!(code, StatusCode::OK, "{path}: {list}");
            assert_eq!(list["kind"], "DebugRecordingList");
            list
        }
    };
    let all = search(format!("{GV}/debugrecordings?search=ALPHA-marker")).await;
    assert_eq!(
        found(&all),
        [
            (
                "default/web".to_owned(),
                vec![
                    pair("Command", "echo Alpha-Marker one"),
                    // The fake echoes the keys as they came (a terminal would have echoed
                    // Backspace as "\x08 \x08"): the output shows what was printed.
                    pair("Output", "echo Alpha-Marker wronggone")
                ]
            ),
            (
                "shop/cart".to_owned(),
                // Escape sequences are left out of both.
                vec![
                    pair("Command", "green alpha-marker two"),
                    pair("Output", "green alpha-marker two")
                ]
            ),
        ],
        "{all}"
    );
    assert_eq!(all["items"][0]["status"]["matchCount"], 2);
    // What was edited away is in no command (only in the output that printed it).
    let edited = search(format!("{GV}/debugrecordings?search=wrongg")).await;
    assert_eq!(
        found(&edited),
        [(
            "default/web".to_owned(),
            vec![pair("Output", "echo Alpha-Marker wronggone")]
        )]
    );
    let ns = search(format!(
        "{GV}/namespaces/{NS}/debugrecordings?search=marker"
    ))
    .await;
    let pods: Vec<String> = found(&ns).into_iter().map(|(p, _)| p).collect();
    assert_eq!(pods, ["default/web", "default/api"]);
    let pod = search(format!("{BASE}/recordings?search=beta-marker")).await;
    assert_eq!(found(&pod), []);
    let pod = search(format!(
        "{GV}/namespaces/{NS}/pods/api/recordings?search=beta-marker"
    ))
    .await;
    assert_eq!(found(&pod).len(), 1);
    // The label selector and paging hold as without search.
    let sel = search(format!(
        "{GV}/debugrecordings?search=marker&labelSelector=poddebug.dev%2Fpod%3Dcart"
    ))
    .await;
    assert_eq!(names(&sel).len(), 1);
    let first = search(format!("{GV}/debugrecordings?search=alpha-marker&limit=1")).await;
    assert_eq!(found(&first)[0].0, "default/web");
    let token = first["metadata"]["continue"].as_str().expect("continue");
    let next = search(format!(
        "{GV}/debugrecordings?search=alpha-marker&limit=1&continue={token}"
    ))
    .await;
    assert_eq!(found(&next)[0].0, "shop/cart");
    // The Table has a column for the first match.
    let table = e
        .client
        .get_table(&format!("{GV}/debugrecordings?search=beta-marker"))
        .await;
    let columns = table["columnDefinitions"].as_array().expect("columns");
    assert_eq!(columns.last().expect("a column")["name"], "Match");
    let cells = table["rows"][0]["cells"].as_array().expect("cells");
    let cell = cells.last().and_then(Value::as_str).unwrap_or_default();
    assert!(cell.starts_with("Command@"), "{cell}");
    assert!(cell.ends_with(": echo beta-marker"), "{cell}");

    // Text too short or too long: 400 with a cause on the field.
    for bad in ["ab".to_owned(), "x".repeat(257)] {
        let (code, status) = e
            .client
            .get_json(&format!("{GV}/debugrecordings?search={bad}"))
            .await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
        assert_eq!(status["reason"], "BadRequest");
        assert_eq!(
            status["details"]["causes"][0]["field"], "search",
            "{status}"
        );
    }
    // Search is authorized as the list is.
    let bob = e
        .server
        .front_proxy_client("bob", &["system:authenticated"]);
    let carol = e
        .server
        .front_proxy_client("carol", &["system:authenticated"]);
    for (who, path) in [
        (&bob, format!("{GV}/debugrecordings?search=marker")),
        (
            &bob,
            format!("{GV}/namespaces/{NS}/debugrecordings?search=marker"),
        ),
        (&bob, format!("{BASE}/recordings?search=marker")),
        (&carol, format!("{GV}/debugrecordings?search=marker")),
        (
            &carol,
            format!("{GV}/namespaces/{NS}/debugrecordings?search=marker"),
        ),
    ] {
        let (code, status) = who.get_json(&path).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{path}: {status}");
        assert_eq!(status["reason"], "Forbidden");
    }
    let (code, list) = carol
        .get_json(&format!(
            "{GV}/namespaces/shop/debugrecordings?search=marker"
        ))
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(found(&list).len(), 1);

    // An index someone with access to the store changed, or copied from another recording,
    // is ignored (and counted), not searched.
    let index_of = |ns: &str, pod: &str| {
        let dir = e.dir.0.join(ns).join(pod);
        let id = std::fs::read_dir(&dir)
            .expect("pod dir")
            .filter_map(|d| d.ok())
            .find(|d| d.path().is_dir())
            .expect("recording dir")
            .file_name();
        dir.join(id).join("index")
    };
    let before = untrusted_recordings(&e.client).await;
    let web = index_of(NS, POD);
    let text = std::fs::read_to_string(&web).expect("index");
    std::fs::write(&web, text.replace("Alpha-Marker", "Alpha-Markex")).expect("write");
    std::fs::copy(index_of(NS, "api"), index_of("shop", "cart")).expect("copy");
    let all = search(format!("{GV}/debugrecordings?search=marke")).await;
    let pods: Vec<String> = found(&all).into_iter().map(|(p, _)| p).collect();
    assert_eq!(pods, ["default/api"]);
    assert!(untrusted_recordings(&e.client).await >= before + 2.0);
}

/// The active key's id and every key's public key (base64) as `recordingkeys` lists them.
async fn recording_keys(client: &TestClient) -> (String, Vec<(String, String)>) {
    let (code, list) = client.get_json(&format!("{GV}/recordingkeys")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let name = |k: &Value| {
        k["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let active = items
        .iter()
        .find(|k| k["active"] == true)
        .map(name)
        .unwrap_or_default();
    let all = items
        .iter()
        .map(|k| {
            (
                name(k),
                k["publicKey"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (active, all)
}

/// The newest ended recording's id, once `n` have ended.
async fn newest_ended(client: &TestClient, n: usize) -> String {
    let items = ended_recordings(client, n).await;
    let mut ids: Vec<String> = items
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids.pop().expect("a recording")
}

/// `status.verification` of recording `id` (result, key id).
async fn verified_by(client: &TestClient, id: &str) -> (String, String) {
    let (code, one) = client
        .get_json(&format!("{GV}/namespaces/{NS}/debugrecordings/{id}"))
        .await;
    assert_eq!(code, StatusCode::OK, "{one}");
    let v = &one["status"]["verification"];
    (
        v["result"].as_str().unwrap_or_default().to_owned(),
        v["keyId"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn the_signing_keys_are_rotated_in_their_secret_without_a_restart() {
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    const SECRET: &str = "poddebug-recording-signing-keys";
    const SERVER_NS: &str = "poddebug-system";
    let e = env(&["--recording-keys-resync-period=1s"]).await;
    typed(&e.client, NS, POD, &[b"echo before\r"], "before").await;
    let before = newest_ended(&e.client, 1).await;
    let (old, keys) = recording_keys(&e.client).await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(
        verified_by(&e.client, &before).await,
        ("Verified".into(), old.clone())
    );

    // An operator adds a new key and makes it the active one.
    let fresh = poddebug_recording::keys::Keys::new_entries().expect("a key");
    let new = String::from_utf8(fresh["active"].clone()).expect("an id");
    let mut secret = e._fake.secret(SERVER_NS, SECRET).expect("the Secret");
    for (k, v) in &fresh {
        secret["data"][k] = json!(b64(v));
    }
    e._fake.put_secret(secret.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while recording_keys(&e.client).await.0 != new {
        assert!(Instant::now() < deadline, "the new key was never taken");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // New recordings are signed with it; the old ones still verify with the old key.
    typed(&e.client, NS, POD, &[b"echo after\r"], "after").await;
    let after = newest_ended(&e.client, 2).await;
    assert_ne!(after, before);
    assert_eq!(
        verified_by(&e.client, &after).await,
        ("Verified".into(), new.clone())
    );
    assert_eq!(
        verified_by(&e.client, &before).await,
        ("Verified".into(), old.clone())
    );

    // A Secret that holds no valid keys is reported, and the keys held are kept.
    let mut broken = secret.clone();
    broken["data"]["active"] = json!(b64(b"0000000000000000"));
    e._fake.put_secret(broken);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !e
        .server
        .logs_text()
        .contains("could not be read again; the keys loaded are kept")
    {
        assert!(Instant::now() < deadline, "{}", e.server.logs_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(recording_keys(&e.client).await.0, new);

    // The documented retirement: the old key's private key replaced by its public key
    // (as `recordingkeys` publishes it). Taken at the next read (the log says so a second
    // time); what the old key signed still verifies.
    let taken = |e: &Env| {
        e.server
            .logs_text()
            .matches("recording signing keys changed in their Secret")
            .count()
    };
    assert_eq!(taken(&e), 1);
    let mut retired = secret;
    let data = retired["data"].as_object_mut().expect("data");
    data.remove(&format!("{old}.pk8"));
    data.insert(format!("{old}.pub"), json!(keys[0].1));
    e._fake.put_secret(retired.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    while taken(&e) < 2 {
        assert!(Instant::now() < deadline, "the retirement was never taken");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(recording_keys(&e.client).await.1.len(), 2);
    assert_eq!(
        verified_by(&e.client, &before).await,
        ("Verified".into(), old.clone())
    );

    // The old key dropped from the Secret altogether (not what the documented rotation does):
    // a recording it signed no longer verifies, and the verdict reached with the old keys is
    // not reused.
    let mut dropped = retired;
    dropped["data"]
        .as_object_mut()
        .expect("data")
        .remove(&format!("{old}.pub"));
    e._fake.put_secret(dropped);
    let deadline = Instant::now() + Duration::from_secs(30);
    while recording_keys(&e.client).await.1.len() != 1 {
        assert!(Instant::now() < deadline, "the old key was never dropped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (result, _) = verified_by(&e.client, &before).await;
    assert_eq!(result, "Tampered");
    assert_eq!(
        verified_by(&e.client, &after).await,
        ("Verified".into(), new)
    );
}

/// Adds a fresh key to the signing keys' Secret of `fake` and makes it the active one: its id.
fn rotate_to_a_new_key(fake: &FakeKube) -> String {
    use base64::Engine as _;
    let fresh = poddebug_recording::keys::Keys::new_entries().expect("a key");
    let mut secret = fake
        .secret("poddebug-system", "poddebug-recording-signing-keys")
        .expect("the Secret");
    for (k, v) in &fresh {
        secret["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(v));
    }
    fake.put_secret(secret);
    String::from_utf8(fresh["active"].clone()).expect("an id")
}

#[tokio::test]
async fn a_replica_that_has_not_read_a_rotation_reads_it_at_once_rather_than_call_a_recording_tampered()
 {
    let dir = TempDir::new();
    let store = format!("--recording-store=file://{}", dir.0.display());
    // One replica reads the keys again every second, the other only every hour.
    let e = env_in(dir, &["--recording-keys-resync-period=1s"]).await;
    let pki = e._fake.pki().clone();
    let two = PodDebugServer::start(
        &e._fake,
        &pki,
        &[&store, "--recording-keys-resync-period=1h"],
    )
    .await;
    let alice2 = two.front_proxy_client("alice", &["system:authenticated", "devs"]);
    let (old, _) = recording_keys(&alice2).await;

    let new = rotate_to_a_new_key(&e._fake);
    let deadline = Instant::now() + Duration::from_secs(30);
    while recording_keys(&e.client).await.0 != new {
        assert!(
            Instant::now() < deadline,
            "the first replica never took the new key"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    typed(&e.client, NS, POD, &[b"echo signed-anew\r"], "signed-anew").await;
    let id = newest_ended(&e.client, 1).await;
    // The second has not read the Secret again: it still holds the old key alone ...
    let (active2, all2) = recording_keys(&alice2).await;
    assert_eq!((active2, all2.len()), (old, 1));
    // ... and meeting a recording signed by a key it does not hold, it reads them at once.
    assert_eq!(
        verified_by(&alice2, &id).await,
        ("Verified".into(), new.clone())
    );
    let (active, all) = recording_keys(&alice2).await;
    assert_eq!(active, new);
    assert_eq!(all.len(), 2);
}

/// Threads of process `pid` waiting in the kernel for a FIFO's other end to open it.
fn waiting_on_a_fifo(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("wchan"))
                        .is_ok_and(|w| w.contains("wait_for_partner"))
                })
                .count()
        })
        .unwrap_or(0)
}

async fn wait_for_fifo_readers(e: &Env, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while waiting_on_a_fifo(e.server.pid()) < n {
        assert!(
            Instant::now() < deadline,
            "{n} searches never reached the index: {}",
            waiting_on_a_fifo(e.server.pid())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_users_third_search_at_once_is_refused_with_429_and_another_users_is_not() {
    let e = env(&["--record-input"]).await;
    typed(&e.client, NS, POD, &[b"echo stalled-marker\r"], "stalled").await;
    let items = ended_recordings(&e.client, 1).await;
    let id = items[0]["metadata"]["name"]
        .as_str()
        .expect("id")
        .to_owned();
    // The recording's index becomes a FIFO: a search that reads it waits, holding its slot,
    // until something opens the other end.
    let index = e.dir.0.join(NS).join(POD).join(&id).join("index");
    assert!(index.is_file(), "{}", index.display());
    std::fs::remove_file(&index).expect("remove the index");
    let made = std::process::Command::new("mkfifo")
        .arg(&index)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let path = format!("{BASE}/recordings?search=stalled");
    let search = |client: &TestClient| {
        let (client, path) = (client.clone(), path.clone());
        tokio::spawn(async move { client.get_json(&path).await })
    };
    let first = [search(&e.client), search(&e.client)];
    wait_for_fifo_readers(&e, 2).await;

    // alice's third: refused at once, before the store is read.
    let (code, headers, body) = e
        .client
        .request(Method::GET, &path, &[], bytes::Bytes::new())
        .await
        .expect("answered");
    let status: Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{status}");
    assert_eq!(status["reason"], "TooManyRequests", "{status}");
    assert_eq!(status["code"], 429);
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("by this user (at most 2)")),
        "{status}"
    );
    assert_eq!(headers.get("retry-after").expect("Retry-After"), "1");
    assert_eq!(waiting_on_a_fifo(e.server.pid()), 2);

    // Another user's search is not refused: it reaches the index too.
    let carol = e
        .server
        .front_proxy_client("carol", &["system:authenticated", "devs"]);
    let third = search(&carol);
    wait_for_fifo_readers(&e, 3).await;

    // The other end opens and closes at once: the waiting reads end (with an index that is
    // empty, so ignored), and every slot is given back.
    drop(
        std::fs::OpenOptions::new()
            .write(true)
            .open(&index)
            .expect("open the FIFO"),
    );
    std::fs::remove_file(&index).expect("remove the FIFO");
    for s in first.into_iter().chain([third]) {
        let (code, list) = tokio::time::timeout(T, s)
            .await
            .expect("the search ended")
            .expect("joined");
        assert_eq!(code, StatusCode::OK, "{list}");
        assert_eq!(list["items"], json!([]), "{list}");
    }
    let (code, list) = e.client.get_json(&path).await;
    assert_eq!(code, StatusCode::OK, "alice searches again: {list}");
}

#[tokio::test]
async fn without_a_recording_dir_there_is_no_search() {
    let fake = FakeKube::start_with_pki(TestPki::new()).await;
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let client = server.front_proxy_client("alice", &["system:authenticated"]);
    for path in [
        format!("{BASE}/recordings?search=abc"),
        format!("{BASE}/recordings?search=ab"),
        format!("{GV}/debugrecordings?search=abc"),
        format!("{GV}/namespaces/{NS}/debugrecordings?search=abc"),
    ] {
        let (code, status) = client.get_json(&path).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{path}: {status}");
    }
}

/// Files of recording `id` of the test pod in the store directory whose names end in `ext`.
fn stored_with(dir: &Path, id: &str, ext: &str) -> usize {
    std::fs::read_dir(dir.join(NS).join(POD).join(id))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|f| f.file_name().to_string_lossy().ends_with(ext))
                .count()
        })
        .unwrap_or(0)
}

/// A session of two parts through `client`: a line, its part written to `dir` (the part
/// interval is 1 s), then a second line. Returns the recording's id.
async fn two_parts(client: &TestClient, dir: &Path, first: &str, second: &str) -> String {
    let mut c = ws_at(client, BASE, TTY).await;
    c.stdin(format!("echo {first}\r").as_bytes())
        .await
        .expect("send");
    c.read_until(T, |t| t.stdout_text().contains(first)).await;
    let (code, list) = client.get_json(&format!("{BASE}/recordings")).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    let id = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["status"]["end"].is_null())
        .find_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .expect("the open session's recording");
    let deadline = Instant::now() + T;
    while stored_with(dir, &id, ".part") == 0 {
        assert!(Instant::now() < deadline, "no part of {id} written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.stdin(format!("echo {second}\r").as_bytes())
        .await
        .expect("send");
    c.read_until(T, |t| t.stdout_text().contains(second)).await;
    c.close_channel(ch::STDIN).await.expect("close stdin");
    c.finish(T).await;
    let deadline = Instant::now() + T;
    loop {
        let (code, one) = client
            .get_json(&format!("{GV}/namespaces/{NS}/debugrecordings/{id}"))
            .await;
        assert_eq!(code, StatusCode::OK, "{one}");
        if one["status"]["end"].is_string() {
            return id;
        }
        assert!(Instant::now() < deadline, "{id} never ended: {one}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn with_signing_off_new_recordings_are_unsigned_without_keyframes_and_signed_ones_still_verify()
 {
    let dir = TempDir::new();
    let path = dir.0.clone();
    let store = format!("--recording-store=file://{}", dir.0.display());
    let e = env_in(dir, &["--recording-part-interval=1s"]).await;
    let pki = e._fake.pki().clone();
    let off = PodDebugServer::start(
        &e._fake,
        &pki,
        &[
            &store,
            "--recording-part-interval=1s",
            "--recording-signing=false",
        ],
    )
    .await;
    let alice_off = off.front_proxy_client("alice", &["system:authenticated", "devs"]);

    // Signed (the default): the second part has its keyframe beside it.
    let signed = two_parts(&e.client, &path, "signed-one", "signed-two").await;
    assert!(stored_with(&path, &signed, ".part") >= 2);
    assert!(stored_with(&path, &signed, ".key") >= 1, "no keyframe");

    // Through the replica with signing off: no statement, no keyframe; it reads Unsigned on
    // either replica, and its output replays whole.
    let unsigned = two_parts(&alice_off, &path, "plain-one", "plain-two").await;
    assert!(stored_with(&path, &unsigned, ".part") >= 2);
    assert_eq!(stored_with(&path, &unsigned, ".key"), 0, "a keyframe drawn");
    let meta: Value = serde_json::from_slice(
        &std::fs::read(path.join(NS).join(POD).join(format!("{unsigned}.json")))
            .expect("the metadata"),
    )
    .expect("JSON");
    assert!(meta.get("evidence").is_none_or(Value::is_null), "{meta}");
    for client in [&e.client, &alice_off] {
        assert_eq!(verified_by(client, &unsigned).await.0, "Unsigned");
    }
    let out = replay(&cast(&alice_off, &unsigned).await);
    assert!(
        out.contains("plain-one") && out.contains("plain-two"),
        "{out}"
    );

    // The keys are still read there: what was signed before verifies, and they are served.
    let (active, _) = recording_keys(&alice_off).await;
    assert_eq!(
        verified_by(&alice_off, &signed).await,
        ("Verified".into(), active)
    );
}
