//! The plugin end to end under a pseudo-terminal, as a user runs it: `kubectl poddebug POD -it`
//! against the real server and the fake kube-apiserver, whose attached "process" echoes its
//! input and reports every resize as a line `resize WxH`.
//!
//! Needs the server binary: `cargo build -p poddebug-apiserver` first.

mod common;

use std::path::PathBuf;

use common::Terminal;
use poddebug_tests::fake::{ATTACH_EXIT_CODE_ANNOTATION, ATTACH_EXIT_TERMINATES_ANNOTATION};
use poddebug_tests::{FakeKube, PodDebugServer, TempDir};

const NS: &str = "shop";
const POD: &str = "web";

struct Env {
    fake: FakeKube,
    _server: PodDebugServer,
    _dir: TempDir,
    kubeconfig: PathBuf,
}

async fn env() -> Env {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("plugin-pty");
    let kubeconfig = server.write_kubeconfig(dir.path(), "alice", &["devs"], NS);
    Env {
        fake,
        _server: server,
        _dir: dir,
        kubeconfig,
    }
}

#[tokio::test]
async fn interactive_shell_resize_and_exit_code() {
    let e = env().await;
    // The shell exits 7: the stream says Success (as containerd's does), the status says 7.
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"][ATTACH_EXIT_CODE_ANNOTATION] = "7".into();
        p["metadata"]["annotations"][ATTACH_EXIT_TERMINATES_ANNOTATION] = "true".into();
    });
    let kc = e.kubeconfig.clone();
    let (code, text, cooked) = tokio::task::spawn_blocking(move || {
        let mut t = Terminal::spawn(
            Some(&kc),
            &[
                POD,
                "-it",
                "-c",
                "dbg",
                "--image",
                "busybox:1.36",
                "--target",
                "app",
                "--",
                "sh",
                "-c",
                "exit 7",
            ],
        );
        t.expect("If you don't see a command prompt, try pressing enter.");
        // The terminal's size reaches the container, then every change of it.
        t.expect("resize 80x24");
        t.resize(100, 40);
        t.expect("resize 100x40");
        t.type_bytes(b"echo hi\r");
        t.expect("echo hi");
        // Ctrl-C is the container's in a raw terminal: the session goes on.
        t.type_bytes(b"\x03after\r");
        t.expect("after");
        // Ctrl-D ends the fake's shell, with exit code 7.
        t.type_bytes(b"\x04");
        let code = t.exit_code();
        (code, t.text(), t.cooked())
    })
    .await
    .expect("pty task");
    assert_eq!(code, 7, "{text}");
    assert!(cooked, "the terminal is restored");
    assert!(
        !text.contains("still running"),
        "a terminated container is not offered for reattach: {text}"
    );
    assert!(text.contains("Targeting container \"app\""), "{text}");
    assert_eq!(e.fake.container_state(NS, POD, "dbg"), Some("terminated"));
}

#[tokio::test]
async fn detaching_leaves_it_running() {
    let e = env().await;
    let kc = e.kubeconfig.clone();
    let (code, text, cooked) = tokio::task::spawn_blocking(move || {
        let mut t = Terminal::spawn(
            Some(&kc),
            &[POD, "-it", "--image", "busybox:1.36", "--", "sh"],
        );
        t.expect("Defaulting debug container name to debugger-");
        // How to leave it running is said before the session starts.
        t.expect("Detach with Ctrl-P Ctrl-Q: the container keeps running.");
        t.expect("resize 80x24");
        t.type_bytes(b"ls\r");
        t.expect("ls");
        // Ctrl-P Ctrl-Q detaches.
        t.type_bytes(b"\x10\x11");
        let code = t.exit_code();
        (code, t.text(), t.cooked())
    })
    .await
    .expect("pty task");
    assert_eq!(code, 0, "{text}");
    assert!(cooked, "the terminal is restored");
    let hint = text
        .lines()
        .find(|l| l.contains("still running"))
        .unwrap_or_else(|| panic!("no hint: {text}"));
    assert!(
        hint.contains("kubectl poddebug attach -n shop web debugger-") && hint.contains(" -it'"),
        "{hint}"
    );
    let pod = e.fake.pod_json(NS, POD).expect("pod");
    let name = pod["spec"]["ephemeralContainers"][0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(e.fake.container_state(NS, POD, &name), Some("running"));
}

#[tokio::test]
async fn waiting_reason_and_timeout() {
    let e = env().await;
    e.fake.add_bad_image("example.invalid/nosuch:1");
    let kc = e.kubeconfig.clone();
    let (code, text, cooked) = tokio::task::spawn_blocking(move || {
        let mut t = Terminal::spawn(
            Some(&kc),
            &[
                POD,
                "-it",
                "-c",
                "pull",
                "--image",
                "example.invalid/nosuch:1",
                "--timeout",
                "3s",
            ],
        );
        let code = t.exit_code();
        (code, t.text(), t.cooked())
    })
    .await
    .expect("pty task");
    assert_eq!(code, 1, "{text}");
    assert!(cooked);
    assert!(text.contains("container pull: ErrImagePull"), "{text}");
    assert!(
        text.contains("timed out after 3s waiting for debug container pull to start"),
        "{text}"
    );
}

#[tokio::test]
async fn a_kill_restores_the_terminal() {
    let e = env().await;
    let kc = e.kubeconfig.clone();
    let (code, text, cooked) = tokio::task::spawn_blocking(move || {
        let mut t = Terminal::spawn(Some(&kc), &[POD, "-it", "-c", "term", "--", "sh"]);
        t.expect("resize 80x24");
        t.terminate();
        let code = t.exit_code();
        (code, t.text(), t.cooked())
    })
    .await
    .expect("pty task");
    assert_eq!(code, 0, "{text}");
    assert!(cooked, "the terminal is restored");
    assert!(text.contains("still running"), "{text}");
    assert_eq!(e.fake.container_state(NS, POD, "term"), Some("running"));
}
