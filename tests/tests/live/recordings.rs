//! Session recordings on the real cluster: a WebSocket attach through the aggregator is
//! recorded, replays its output byte for byte, and is readable only with `get pods/recordings`
//! (`poddebug:auditor`). Needs the server under test to run with `--recording-dir` (the
//! `manifests/components/recordings` component, or the flag on a local server).

use super::support::*;

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);
/// Reads one line, answers it on stdout a second later, and exits 3 a second after that. The
/// pauses: CI saw, under load, sessions whose stdout lacked what the shell printed just after
/// the line arrived (nothing at all) or just before it exited (the last line). The relay
/// forwards every byte up to the upstream's close, so the likely cause is the runtime's attach:
/// its stdout subscribed a moment after stdin reached the process, and ended as the process
/// exited, before the last output was copied. The test is about recording, so it keeps its
/// output clear of both edges.
pub(super) const ONE_LINE: &str =
    "read line; sleep 1; echo \"out:$line\"; printf 'caf\\303\\251\\n'; sleep 1; exit 3";

/// Attaches (WebSocket v5, through the aggregator) to the running debug container `name`
/// that runs [`ONE_LINE`], sends `line`, and waits (bounded) for the session's recording to be
/// listed as ended: the session's transcript and that recording.
pub(super) async fn one_line_session(
    sb: &Sandbox,
    name: &str,
    line: &[u8],
) -> (poddebug_tests::channel::Transcript, Value) {
    let mut c = sb
        .api
        .attach_v5(&sb.path(&format!(
            "attach?container={name}&stdin=true&stdout=true&stderr=true"
        )))
        .await;
    c.stdin(line).await.expect("send");
    let t = c.finish(T).await.clone();
    // The recording is finished shortly after the stream ends.
    let list_path = sb.path("recordings");
    let item = poll_async("the recording is listed as ended", T, Duration::from_millis(500), || async {
        let (code, list) = sb.api.get_json(&list_path).await;
        if code == StatusCode::NOT_FOUND {
            panic!("the server under test does not record sessions (run it with --recording-dir): {list}");
        }
        let ended = list["items"].as_array().into_iter().flatten().find(|i| {
            i["spec"]["container"] == name && i["status"]["end"].is_string()
        });
        match ended {
            Some(item) if code == StatusCode::OK => Ok(item.clone()),
            _ => Err(format!("{code} {list}")),
        }
    })
    .await;
    (t, item)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG) and a server with --recording-dir"]
async fn a_recorded_session_replays_byte_for_byte_and_needs_its_own_permission() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("rec");
    sb.create_running(
        "dbg",
        &json!({"container": {"image": BUSYBOX, "command": ["sh", "-c", ONE_LINE], "stdin": true},
                "targetContainerName": "app"}),
    )
    .await;

    let (t, item) = one_line_session(&sb, "dbg", b"hello\n").await;
    assert_eq!(t.stdout_text(), "out:hello\ncafé\n");
    // The stream's own exit code: containerd reports Success whatever the code, so only a
    // non-zero one is checked here; the recording's exit code comes from the container's status.
    assert!(
        matches!(t.exit_code(), Some(0) | Some(3)),
        "{:?}",
        t.status()
    );
    let list_path = sb.path("recordings");
    assert_eq!(item["spec"]["container"], "dbg");
    assert_eq!(item["status"]["exitCode"], 3);
    assert_eq!(item["status"]["truncated"], false);
    let id = item["metadata"]["name"].as_str().expect("an id").to_owned();

    let (code, headers, body) = sb
        .api
        .request(
            Method::GET,
            &sb.path(&format!("recordings/{id}")),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("get the recording");
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/x-asciicast")
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&body)
        .lines()
        .map(|l| serde_json::from_str(l).expect("asciicast lines are JSON"))
        .collect();
    assert_eq!(lines[0]["version"], 2);
    assert_eq!(lines[0]["poddebug"]["pod"], "web");
    let replayed: String = lines[1..]
        .iter()
        .filter(|e| e[1] == "o")
        .filter_map(|e| e[2].as_str())
        .collect();
    assert_eq!(replayed.as_bytes(), t.stdout.as_slice(), "byte for byte");

    // kubectl (the admin) lists it as a Table through the aggregator, like any resource.
    let table = poddebug_tests::kubectl::kubectl_ok(
        &["get", "debugrecordings", "-n", &sb.ns, "-o", "wide"],
        None,
    );
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "POD",
            "CONTAINER",
            "USER",
            "BYTES",
            "EXIT",
            "TRUNCATED",
            "PROTOCOL",
            "ENDED",
            "VERIFIED",
            "AGE"
        ],
        "{table}"
    );
    assert!(table.contains(&id), "{table}");
    let one = poddebug_tests::kubectl::kubectl_ok(
        &[
            "get",
            "debugrecordings",
            "-n",
            &sb.ns,
            &id,
            "-o",
            "jsonpath={.spec.container}",
        ],
        None,
    );
    assert_eq!(one, "dbg");

    // A user without pods/recordings is refused; poddebug:auditor grants it.
    let alice = as_user(&sb.api, ALICE);
    let (code, status) = alice.get_json(&list_path).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(message(&status).contains("pods/recordings"), "{status}");
    let auditor = "pdlive-auditor";
    sb.bind("poddebug:auditor", auditor);
    let reader = as_user(&sb.api, auditor);
    poll_async(
        "the auditor can read the recording",
        T,
        Duration::from_millis(500),
        || async {
            let (code, body) = reader.get_json(&list_path).await;
            match body["items"].as_array() {
                Some(items)
                    if code == StatusCode::OK
                        && items.iter().any(|i| i["metadata"]["name"] == id.as_str()) =>
                {
                    Ok(())
                }
                _ => Err(format!("{code} {body}")),
            }
        },
    )
    .await;
}

/// Bytes of output the flood test makes: twice the 8 seconds' burst of the
/// `--max-recording-rate=262144` CI's strict server runs with.
const FLOOD: usize = 4_194_304;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG) and a server with --recording-dir"]
async fn a_flood_of_output_is_recorded_whole_in_strict_mode_and_leaves_a_marked_gap_otherwise() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("flood");
    // Waits for a line (so that the attach's stdout is connected), then floods stdout.
    let script = format!(
        "read line; sleep 1; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {FLOOD}; sleep 2"
    );
    sb.create_running(
        "flood",
        &json!({"container": {"image": BUSYBOX, "command": ["sh", "-c", script], "stdin": true},
                "targetContainerName": "app"}),
    )
    .await;
    let mut c = sb
        .api
        .attach_v5(&sb.path("attach?container=flood&stdin=true&stdout=true&stderr=true"))
        .await;
    c.stdin(b"go\n").await.expect("send");
    let t = c.finish(Duration::from_secs(120)).await.clone();
    assert_eq!(t.stdout.len(), FLOOD, "the session itself is whole");

    // The end waits for the writer to write what the session queued (on a busy machine, well
    // after the stream ended): whole in strict mode, never cut off at a fixed time.
    let item = poll_async(
        "the recording is listed as ended",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let (code, list) = sb.api.get_json(&sb.path("recordings")).await;
            match list["items"].as_array().and_then(|i| i.first()) {
                Some(item) if code == StatusCode::OK && item["status"]["end"].is_string() => {
                    Ok(item.clone())
                }
                _ => Err(format!("{code} {list}")),
            }
        },
    )
    .await;
    let id = item["metadata"]["name"].as_str().expect("an id").to_owned();
    let (code, _, body) = sb
        .api
        .request(
            Method::GET,
            &sb.path(&format!("recordings/{id}")),
            &[],
            bytes::Bytes::new(),
        )
        .await
        .expect("get the recording");
    assert_eq!(code, StatusCode::OK);
    let lines: Vec<Value> = String::from_utf8_lossy(&body)
        .lines()
        .map(|l| serde_json::from_str(l).expect("asciicast lines are JSON"))
        .collect();
    let recorded: usize = lines[1..]
        .iter()
        .filter(|e| e[1] == "o")
        .filter_map(|e| e[2].as_str())
        .map(str::len)
        .sum();
    let markers: Vec<&str> = lines[1..]
        .iter()
        .filter(|e| e[1] == "m")
        .filter_map(|e| e[2].as_str())
        .collect();
    match lines[0]["poddebug"]["recordingMode"].as_str() {
        Some("strict") => {
            // Every byte, no gap: the stream was slowed to the recorder's pace instead.
            assert!(markers.is_empty(), "{markers:?}");
            assert_eq!(recorded, FLOOD);
            let replayed: String = lines[1..]
                .iter()
                .filter(|e| e[1] == "o")
                .filter_map(|e| e[2].as_str())
                .collect();
            assert_eq!(replayed.as_bytes(), t.stdout.as_slice(), "byte for byte");
        }
        mode => {
            // best-effort: output over the rate (if the flood outran it; that depends on the
            // server's rate and the machine) leaves marked gaps, and recorded and skipped add up.
            assert_eq!(mode, Some("best-effort"), "{}", lines[0]);
            let skipped: usize = markers
                .iter()
                .filter_map(|m| m.strip_suffix(" bytes not recorded: over --max-recording-rate"))
                .map(|n| n.parse::<usize>().expect("a count"))
                .sum();
            assert_eq!(!markers.is_empty(), skipped > 0, "{markers:?}");
            assert_eq!(recorded + skipped, FLOOD, "{markers:?}");
        }
    }
}
