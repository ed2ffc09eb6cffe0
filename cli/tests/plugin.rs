//! The plugin's other subcommands end to end (no terminal): the real server, the fake
//! kube-apiserver, and no kubectl anywhere.
//!
//! Needs the server binary: `cargo build -p poddebug-apiserver` first.

mod piped;

use piped::run;
use poddebug_tests::fake::ATTACH_EXIT_CODE_ANNOTATION;
use poddebug_tests::{FakeKube, PodDebugServer, TempDir};
use std::path::Path;
use std::process::{Command, Stdio};

#[tokio::test]
async fn run_get_list_attach_logs_stop_and_profiles() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("plugin");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");

    // Without -i: create, wait when asked, print one line.
    let (code, out, err) = run(
        &kc,
        &[
            "web",
            "-c",
            "dbg",
            "--image",
            "busybox:1.36",
            "--target",
            "app",
            "--wait",
            "--",
            "sh",
            "-c",
            "sleep 1000",
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        "debug container dbg in pod web (busybox:1.36): Running",
        "{err}"
    );
    assert!(
        err.contains("kubectl poddebug stop -n shop web dbg"),
        "{err}"
    );
    let ec = &fake
        .pod("shop", "web")
        .and_then(|p| p.spec?.ephemeral_containers)
        .expect("an ephemeral container")[0];
    assert_eq!(
        ec.command.as_deref(),
        Some(&["sh".to_owned(), "-c".to_owned(), "sleep 1000".to_owned()][..])
    );
    assert_eq!(ec.target_container_name.as_deref(), Some("app"));

    let (code, out, err) = run(&kc, &["get", "web", "-o", "json"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(list["items"][0]["metadata"]["name"], "dbg");

    let (code, out, err) = run(&kc, &["get", "web", "dbg", "-o", "yaml"], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("name: dbg") && out.contains("phase: Running"),
        "{out}"
    );

    // The server's Table, as `kubectl get poddebugcontainers` prints it: its columns, not the
    // plugin's.
    let (code, out, err) = run(&kc, &["list", "-o", "wide"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let mut lines = out.lines();
    let header: Vec<_> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "POD", "IMAGE", "TARGET", "STATE", "AGE", "EXPIRES"]
    );
    let row: Vec<_> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..5],
        ["web.dbg", "web", "busybox:1.36", "app", "Running"],
        "{out}"
    );
    let (code, out, err) = run(&kc, &["get", "web"], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("NAME"), "{out}");
    assert!(
        out.lines().nth(1).is_some_and(|l| l.starts_with("dbg ")),
        "{out}"
    );

    let (code, out, err) = run(&kc, &["list", "-A"], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("NAMESPACE"), "{out}");
    assert!(out.contains("shop") && out.contains("web.dbg"), "{out}");

    // A console without a terminal: input goes in, output comes back, the end of our input
    // ends the session and the container keeps running.
    let (code, out, err) = run(
        &kc,
        &["attach", "web", "dbg", "-i"],
        Some("hello through poddebug\n"),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("hello through poddebug"), "{out}{err}");
    assert!(
        err.contains("still running: reattach with 'kubectl poddebug attach -n shop web dbg -i'"),
        "{err}"
    );
    // An exit code on the error channel becomes the plugin's.
    fake.update_pod("shop", "web", |p| {
        p["metadata"]["annotations"][ATTACH_EXIT_CODE_ANNOTATION] = "7".into();
    });
    let (code, _, err) = run(&kc, &["attach", "web", "dbg", "-i"], Some("x\n")).await;
    assert_eq!(code, Some(7), "{err}");

    fake.append_log("shop", "web", "dbg", "first\nsecond\n");
    let (code, out, err) = run(&kc, &["logs", "web", "dbg", "--tail", "1"], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "second\n");

    let (code, out, err) = run(&kc, &["stop", "web", "dbg", "--grace-period", "1"], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("debug container dbg in pod web") && out.contains("Terminated"),
        "{out}"
    );

    let (code, out, err) = run(&kc, &["profiles"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let sysadmin = out
        .lines()
        .find(|l| l.starts_with("sysadmin"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(sysadmin.split_whitespace().nth(2), Some("true"), "{out}");

    // A refusal keeps kubectl's wording and a non-zero exit.
    let (code, _, err) = run(&kc, &["nosuchpod", "-c", "x"], None).await;
    assert_eq!(code, Some(1));
    assert_eq!(
        err.trim(),
        "Error from server (NotFound): pods \"nosuchpod\" not found"
    );
    // --context picks a context of the kubeconfig; an unknown one is an error before any request.
    let (code, _, err) = run(&kc, &["--context", "nope", "list"], None).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("nope"), "{err}");
    // -n and --kubeconfig as kubectl has them.
    let (code, out, err) = run(
        &kc,
        &[
            "--kubeconfig",
            kc.to_str().unwrap_or_default(),
            "-n",
            "default",
            "list",
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.trim(), "No resources found in default namespace.");
}

#[tokio::test]
async fn too_late_to_attach_shows_the_output_and_the_exit_code() {
    use poddebug_tests::ContainerState;
    use poddebug_tests::fake::ATTACH_REFUSE_ANNOTATION;
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("plugin-late");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");

    // The container ends while the plugin waits for it: its output, then its exit code.
    fake.set_kubelet_simulation(false);
    fake.append_log("shop", "web", "done", "last words\n");
    let kc1 = kc.clone();
    let plugin_run = tokio::spawn(async move {
        run(
            &kc1,
            &["web", "-i", "-c", "done", "--", "sh", "-c", "exit 5"],
            None,
        )
        .await
    });
    let created = fake
        .wait_until(std::time::Duration::from_secs(30), |f| {
            f.pod("shop", "web")
                .and_then(|p| p.spec?.ephemeral_containers)
                .is_some_and(|ecs| !ecs.is_empty())
        })
        .await;
    assert!(created, "the plugin created the debug container");
    assert!(fake.set_ec_state(
        "shop",
        "web",
        "done",
        ContainerState::terminated(5, "Error")
    ));
    let (code, out, err) = plugin_run.await.expect("plugin");
    assert_eq!(code, Some(5), "{out}{err}");
    assert_eq!(out, "last words\n", "{err}");

    // An attach that fails falls back to the output, as kubectl debug does.
    fake.set_kubelet_simulation(true);
    fake.update_pod("shop", "web", |p| {
        p["metadata"]["annotations"][ATTACH_REFUSE_ANNOTATION] = "text:500".into();
    });
    fake.append_log("shop", "web", "fb", "from the log\n");
    let (code, out, err) = run(&kc, &["web", "-i", "-c", "fb", "--", "sh"], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(
            "warning: couldn't attach to debug container fb, falling back to streaming logs"
        ),
        "{err}"
    );
    assert_eq!(out, "from the log\n", "{err}");
}

#[tokio::test]
async fn the_target_the_server_chose_is_shown() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("plugin-target");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");
    let (code, _, err) = run(
        &kc,
        &["web", "-c", "dbg", "--wait", "--", "sleep", "1000"],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("Defaulting debug container target to \"app\""),
        "{err}"
    );
    let ec = &fake
        .pod("shop", "web")
        .and_then(|p| p.spec?.ephemeral_containers)
        .expect("an ephemeral container")[0];
    assert_eq!(ec.target_container_name.as_deref(), Some("app"));
}

#[tokio::test]
async fn sessions_are_listed_joined_and_terminated() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_pod_json(serde_json::json!({
        "metadata": {"name": "web", "namespace": "shop",
            "annotations": {poddebug_tests::fake::ATTACH_SHARED_ANNOTATION: "true"}},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true, "tty": true,
                "env": [{"name": "PODDEBUG_OWNER", "value": "alice"}]}],
        },
    }));
    assert!(fake.set_ec_state(
        "shop",
        "web",
        "dbg",
        poddebug_tests::ContainerState::Running
    ));
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &["--session-lease-duration=3s"]).await;
    let dir = TempDir::new("plugin-sessions");
    let bob = server.write_kubeconfig(dir.path(), "bob", &["devs"], "shop");
    let carol = server.write_kubeconfig(dir.path(), "carol", &["devs"], "shop");

    // alice's session, from a client of her own.
    let alice = server.front_proxy_client("alice", &["devs"]);
    let mut owner = alice.attach_v5("/apis/poddebug.dev/v1alpha1/namespaces/shop/pods/web/attach?container=dbg&stdin=true&stdout=true&tty=true").await;

    // `sessions` prints the server's Table; `-o name` the ids.
    let (code, out, err) = run(&bob, &["sessions"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header[..5],
        ["NAME", "POD", "CONTAINER", "USER", "MODE"],
        "{out}"
    );
    assert!(out.contains("alice") && out.contains("owner"), "{out}");
    let (_, names, _) = run(&bob, &["sessions", "-o", "name"], None).await;
    let id = names
        .trim()
        .strip_prefix("debugsession.poddebug.dev/")
        .expect("one session")
        .to_owned();

    // bob joins as an observer and sees what alice types.
    let mut joiner = Command::new(env!("CARGO_BIN_EXE_kubectl-poddebug"))
        .env("KUBECONFIG", &bob)
        .env("PATH", "")
        .args(["join", &id, "--observe"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("join");
    let Some((_, out, _)) = poll_plugin(&carol, &["sessions"], |o| o.contains("observer")).await
    else {
        let _ = joiner.kill();
        let out = joiner.wait_with_output().expect("join output");
        panic!(
            "bob's session never appeared; join said: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
    };
    assert!(out.contains("bob"), "{out}");
    owner.stdin(b"hello-bob\n").await.expect("type");
    // carol ends bob's session; his plugin exits, saying who did it.
    let (_, names, _) = run(&carol, &["sessions", "-o", "json"], None).await;
    let list: serde_json::Value = serde_json::from_str(&names).expect("json");
    let bobs = list["items"]
        .as_array()
        .and_then(|i| i.iter().find(|s| s["spec"]["user"] == "bob"))
        .and_then(|s| s["metadata"]["name"].as_str())
        .expect("bob's session")
        .to_owned();
    let (code, out, err) = run(&carol, &["terminate", &bobs], None).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("terminated"), "{out}");
    let status = tokio::task::spawn_blocking(move || joiner.wait_with_output())
        .await
        .expect("task")
        .expect("join exits");
    let mut seen = String::from_utf8_lossy(&status.stdout).into_owned();
    seen.push_str(&String::from_utf8_lossy(&status.stderr));
    assert!(seen.contains("hello-bob"), "{seen}");
    assert!(seen.contains("session terminated by carol"), "{seen}");
    assert_ne!(status.status.code(), Some(0));
}

/// Run the plugin until its output satisfies `ok` (bounded); `None` if it never did.
async fn poll_plugin(
    kc: &Path,
    args: &[&str],
    ok: impl Fn(&str) -> bool,
) -> Option<(Option<i32>, String, String)> {
    for _ in 0..100 {
        let r = run(kc, args, None).await;
        if ok(&r.1) {
            return Some(r);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test]
async fn recordings_search_prints_the_recordings_that_hold_the_text() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_pod_json(serde_json::json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": true,
                "tty": true}],
        },
    }));
    assert!(fake.set_ec_state(
        "shop",
        "web",
        "dbg",
        poddebug_tests::ContainerState::Running
    ));
    let pki = fake.pki().clone();
    let store = TempDir::new("plugin-recordings");
    let flag = format!("--recording-dir={}", store.path().display());
    let server = PodDebugServer::start(&fake, &pki, &[flag.as_str(), "--record-input"]).await;
    let dir = TempDir::new("plugin-search");
    let kc = server.write_kubeconfig(dir.path(), "bob", &["devs"], "shop");

    // A session that typed a command (the fake echoes it as output).
    let alice = server.front_proxy_client("alice", &["devs"]);
    let mut c = alice.attach_v5("/apis/poddebug.dev/v1alpha1/namespaces/shop/pods/web/attach?container=dbg&stdin=true&stdout=true&tty=true").await;
    c.stdin(b"cat /etc/Shadow\r").await.expect("send");
    let t = std::time::Duration::from_secs(10);
    c.read_until(t, |t| t.stdout_text().contains("Shadow"))
        .await;
    c.close_channel(poddebug_tests::channel::ch::STDIN)
        .await
        .expect("close");
    c.finish(t).await;

    // Bounded wait for the recording's end (its index is complete then).
    let deadline = std::time::Instant::now() + t;
    let list = loop {
        let (code, out, err) = run(
            &kc,
            &["recordings", "search", "etc/shadow", "-o", "json"],
            None,
        )
        .await;
        assert_eq!(code, Some(0), "{err}");
        let list: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        if list["items"][0]["status"]["end"].is_string() {
            break list;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let matches = &list["items"][0]["status"]["matches"];
    assert_eq!(matches[0]["source"], "Command", "{list}");
    assert_eq!(matches[0]["text"], "cat /etc/Shadow");
    assert_eq!(matches[1]["source"], "Output");

    // The table: the server's columns, the first match last.
    let (code, out, err) = run(
        &kc,
        &["recordings", "search", "ETC/SHADOW", "--pod", "web"],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let header = out.lines().next().unwrap_or("");
    assert!(
        header.starts_with("NAME") && header.trim_end().ends_with("MATCH"),
        "{out}"
    );
    assert!(
        out.contains("Command@") && out.contains("cat /etc/Shadow"),
        "{out}"
    );
    let (code, out, err) = run(&kc, &["recordings", "search", "nowhere-said", "-A"], None).await;
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");
    assert!(err.contains("No resources found"), "{err}");
    // Text the server refuses: its Status, and a failure.
    let (code, _, err) = run(&kc, &["recordings", "search", "ab"], None).await;
    assert_eq!(code, Some(1));
    assert!(
        err.contains("search") && err.contains("at least 3 bytes"),
        "{err}"
    );
}
