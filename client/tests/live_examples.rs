//! The crate's examples against a real cluster with poddebug registered (CI's live stage).
//! Ignored by default; run with
//!
//! ```sh
//! PODDEBUG_LIVE=1 KUBECONFIG=... cargo test -p poddebug-client --test live_examples -- --ignored
//! ```
//!
//! kubectl only sets the stage (a namespace with a running pod `web`, deleted at the end).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use poddebug_tests::kubectl::{PodSandbox, live_cluster_given};

/// Bound of every wait here (a guard against hanging, never a measured time).
const GUARD: Duration = Duration::from_secs(120);

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    dir.join("examples").join(name)
}

/// A namespace with a running pod `web` (container `app`), deleted on drop.
struct Sandbox {
    ns: String,
    _stage: PodSandbox,
}

impl Sandbox {
    fn new(tag: &str) -> Option<Sandbox> {
        if !live_cluster_given("the live examples") {
            return None;
        }
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "3600"]}]
            }
        });
        let stage = PodSandbox::new(
            format!("poddebug-examples-{tag}-{}", std::process::id()),
            pod,
        );
        Some(Sandbox {
            ns: stage.ns().to_owned(),
            _stage: stage,
        })
    }
}

#[test]
#[ignore = "needs a live cluster with poddebug registered"]
fn the_examples_create_attach_watch_and_stop() {
    let Some(s) = Sandbox::new("all") else {
        return;
    };
    // create_and_attach: a shell in the target's PID namespace; its exit code is the example's.
    let mut child = Command::new(example("create_and_attach"))
        .args([s.ns.as_str(), "web", "busybox:1.36", "app"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example (built by cargo test)");
    let mut input = child.stdin.take().expect("stdin");
    let stdout = read_in_background(child.stdout.take().expect("stdout"));
    let stderr = read_in_background(child.stderr.take().expect("stderr"));
    // The shell's output reaches an attach only once the runtime has attached its output, which
    // may be a moment after its input (kubectl's "If you don't see a command prompt, try pressing
    // enter"): ask until an answer comes, as a user presses enter, then give the real input.
    let mut attached = false;
    for _ in 0..60 {
        if input.write_all(b"echo ready-$((20+22))\n").is_err() {
            break;
        }
        if wait_for(&stdout, "ready-42", Duration::from_secs(2)) {
            attached = true;
            break;
        }
    }
    assert!(attached, "{}\n{}", text(&stdout), text(&stderr));
    // The output first, then the exit: a shell that prints and exits at once may end before the
    // runtime has copied its last line to the attach (seen once in CI), so the exit is sent once
    // the line has come through.
    input.write_all(b"echo from-the-example\n").expect("input");
    let echoed = wait_for(&stdout, "from-the-example", Duration::from_secs(30));
    input.write_all(b"exit 7\n").expect("input");
    let status = wait_exit(&mut child);
    // The pipes end with the example.
    wait_for(&stdout, "\u{0}", Duration::from_secs(5));
    let (stdout, stderr) = (text(&stdout), text(&stderr));
    assert_eq!(status, Some(7), "{stdout}\n{stderr}");
    assert!(
        echoed && stdout.contains("from-the-example"),
        "{stdout}\n{stderr}"
    );
    let name = stderr
        .lines()
        .find_map(|l| l.strip_prefix("created debug container "))
        .expect("the created name")
        .trim()
        .to_owned();

    // watch_all: the existing (terminated) debug container comes first.
    let mut watch = Command::new(example("watch_all"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("watch_all");
    let stdout = watch.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let want = format!("{}/web.{name}", s.ns);
    let mut seen = Vec::new();
    let found = loop {
        match rx.recv_timeout(GUARD) {
            Ok(l) if l.starts_with("EXISTING") && l.contains(&want) => break Some(l),
            Ok(l) => seen.push(l),
            Err(_) => break None,
        }
    };
    let _ = watch.kill();
    let _ = watch.wait();
    let line = found.unwrap_or_else(|| panic!("{want} not listed: {seen:?}"));
    assert!(line.ends_with("Terminated"), "{line}");

    // stop_older_than_an_hour: nothing that young is touched.
    let out = Command::new(example("stop_older_than_an_hour"))
        .stdin(Stdio::null())
        .output()
        .expect("stop_older_than_an_hour");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(&want),
        "{out:?}"
    );
}

/// What a pipe gave so far, read by a thread of its own; a NUL is appended at its end.
type Pipe = std::sync::Arc<std::sync::Mutex<String>>;

fn read_in_background(mut r: impl std::io::Read + Send + 'static) -> Pipe {
    let text = Pipe::default();
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        sink.lock().unwrap_or_else(|e| e.into_inner()).push('\u{0}');
    });
    text
}

fn text(p: &Pipe) -> String {
    p.lock()
        .unwrap_or_else(|e| e.into_inner())
        .trim_end_matches('\u{0}')
        .to_owned()
}

/// Wait (bounded) until the pipe shows `needle`.
fn wait_for(p: &Pipe, needle: &str, bound: Duration) -> bool {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if p.lock().unwrap_or_else(|e| e.into_inner()).contains(needle) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The child's exit code once it ended (killed past the guard).
fn wait_exit(child: &mut std::process::Child) -> Option<i32> {
    let deadline = std::time::Instant::now() + GUARD;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            return child.wait().ok().and_then(|s| s.code());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
