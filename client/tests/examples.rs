//! The crate's examples, run as a user would run them, against the real server and the fake
//! kube-apiserver (`cargo test` builds them next to this test).
//!
//! Needs the server binary: `cargo build -p poddebug-apiserver` first.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use poddebug_client::{ConnectOptions, CreateParams, DebugContainers, PodDebugContainer};
use poddebug_tests::fake::{ATTACH_EXIT_CODE_ANNOTATION, ATTACH_EXIT_TERMINATES_ANNOTATION};
use poddebug_tests::{FakeKube, PodDebugServer, TempDir};

const NS: &str = "shop";
const POD: &str = "web";
/// Bound of every wait here (a guard against hanging, never a measured time).
const GUARD: Duration = Duration::from_secs(30);

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    dir.join("examples").join(name)
}

struct Env {
    fake: FakeKube,
    _server: PodDebugServer,
    _dir: TempDir,
    kubeconfig: PathBuf,
    debug: DebugContainers,
}

async fn env() -> Env {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("examples");
    let kubeconfig = server.write_kubeconfig(dir.path(), "alice", &["devs"], NS);
    let (client, _) = poddebug_client::connect(&ConnectOptions {
        kubeconfig: Some(kubeconfig.clone()),
        context: None,
        ..Default::default()
    })
    .await
    .expect("client");
    Env {
        fake,
        _server: server,
        _dir: dir,
        kubeconfig,
        debug: DebugContainers::new(client, NS),
    }
}

async fn run(kc: &Path, name: &str, args: &[&str], input: &[u8]) -> (Option<i32>, String, String) {
    let mut child = Command::new(example(name))
        .env("KUBECONFIG", kc)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example (built by cargo test)");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("input");
    drop(stdin);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("task")
        .expect("example");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn create_and_attach_exits_with_the_containers_code() {
    let e = env().await;
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"][ATTACH_EXIT_CODE_ANNOTATION] = "7".into();
        p["metadata"]["annotations"][ATTACH_EXIT_TERMINATES_ANNOTATION] = "true".into();
    });
    // The fake's shell echoes its input; Ctrl-D is its `exit`.
    let (code, out, err) = run(
        &e.kubeconfig,
        "create_and_attach",
        &[NS, POD, "busybox:1.36", "app"],
        b"hello example\n\x04",
    )
    .await;
    assert_eq!(code, Some(7), "{out}\n{err}");
    assert!(out.contains("hello example"), "{out}\n{err}");
    assert!(err.contains("exited with 7"), "{err}");
}

#[tokio::test]
async fn stop_older_than_an_hour_stops_only_old_ones() {
    let e = env().await;
    let mut spec = PodDebugContainer::default();
    spec.metadata.name = Some("old".into());
    spec.container.command = Some(vec!["sleep".into(), "1000".into()]);
    // Sharing the target's PID namespace is what makes it stoppable with DELETE.
    spec.target_container_name = Some("app".into());
    let wait = CreateParams {
        wait: true,
        timeout: Some(Duration::from_secs(20)),
        dry_run: false,
    };
    e.debug.create(POD, &spec, &wait).await.expect("create");

    let (code, out, err) = run(&e.kubeconfig, "stop_older_than_an_hour", &[], b"").await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "", "a fresh container is left alone");
    let (code, out, err) = run(
        &e.kubeconfig,
        "stop_older_than_an_hour",
        &["--dry-run", "--older-than", "0"],
        b"",
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("would stop shop/web old"), "{out}");
    assert_eq!(e.fake.container_state(NS, POD, "old"), Some("running"));
    let (code, out, err) = run(
        &e.kubeconfig,
        "stop_older_than_an_hour",
        &["--older-than", "0"],
        b"",
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("stopped shop/web old"), "{out}{err}");
    assert_eq!(e.fake.container_state(NS, POD, "old"), Some("terminated"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_all_lists_then_follows() {
    let e = env().await;
    let mut spec = PodDebugContainer::default();
    spec.metadata.name = Some("seen".into());
    spec.target_container_name = Some("app".into());
    let wait = CreateParams {
        wait: true,
        timeout: Some(Duration::from_secs(20)),
        dry_run: false,
    };
    e.debug.create(POD, &spec, &wait).await.expect("create");
    let mut child = Command::new(example("watch_all"))
        .env("KUBECONFIG", &e.kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the example (built by cargo test)");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next_line = |rx: &mpsc::Receiver<String>| rx.recv_timeout(GUARD).ok();
    let first = tokio::task::block_in_place(|| next_line(&rx));
    assert_eq!(first.as_deref(), Some("EXISTING  shop/web.seen Running"));
    e.debug
        .stop(POD, "seen", Some(Duration::from_secs(1)))
        .await
        .expect("stop");
    let mut lines = Vec::new();
    let found = tokio::task::block_in_place(|| {
        while let Some(l) = next_line(&rx) {
            let done = l == "MODIFIED  shop/web.seen Terminated";
            lines.push(l);
            if done {
                return true;
            }
        }
        false
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(found, "{lines:?}");
}
