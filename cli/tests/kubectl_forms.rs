//! Every documented `kubectl debug` ephemeral-container command line, with `debug` replaced
//! by `poddebug`, and kubectl's flags in every position it accepts them: the debug container
//! the cluster receives is asserted for each (the real server, the fake kube-apiserver, no
//! kubectl).
//!
//! Needs the server binary: `cargo build -p poddebug-apiserver` first.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use poddebug_tests::{FakeKube, PodDebugServer, TempDir};
use serde_json::{Value, json};

/// Runs the plugin with an empty stdin; (exit code, stdout, stderr).
async fn run(kc: &Path, cwd: &Path, args: &[String]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-poddebug"));
    cmd.env("KUBECONFIG", kc)
        .env("PATH", "")
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("task")
        .expect("plugin");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

/// The one ephemeral container of pod `pod` in `ns`, as the cluster stored it.
fn debug_container_of(fake: &FakeKube, ns: &str, pod: &str) -> Value {
    let p = fake
        .pod_json(ns, pod)
        .unwrap_or_else(|| panic!("pod {ns}/{pod}"));
    let ecs = p["spec"]["ephemeralContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(ecs.len(), 1, "{pod}: {ecs:?}");
    ecs[0].clone()
}

fn add_pod(fake: &FakeKube, ns: &str, name: &str, container: &str) {
    fake.add_pod_json(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": container, "image": "busybox", "command": ["sleep", "3600"]}]},
    }));
}

/// The environment the user asked for (the server adds its own `PODDEBUG_*` bookkeeping).
fn user_env(ec: &Value) -> Value {
    Value::Array(
        ec["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| !e["name"].as_str().unwrap_or("").starts_with("PODDEBUG_"))
            .cloned()
            .collect(),
    )
}

fn caps(ec: &Value) -> Vec<String> {
    let mut v: Vec<String> = ec["securityContext"]["capabilities"]["add"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect();
    v.sort();
    v
}

struct Case {
    /// The command line after `kubectl`, `poddebug` in place of `debug`.
    line: &'static str,
    /// Namespace and pod the debug container must land in.
    ns: &'static str,
    pod: &'static str,
    /// What the cluster must have received.
    check: fn(&Value),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_debug_command_lines_make_the_debug_container_they_describe() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("default", &[]);
    fake.add_namespace("shop", &[]);
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &["--default-profile=general"]).await;
    let dir = TempDir::new("kubectl-forms");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "default");
    // The files the documented examples name, in the directory they run in.
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: frompod\nspec:\n  containers:\n  - name: app\n    image: busybox\n",
    )
    .expect("pod.yaml");
    std::fs::write(
        dir.path().join("partial_container.json"),
        r#"{
  "env": [{"name": "ENV_VAR_1", "value": "value_1"}, {"name": "ENV_VAR_2", "value": "value_2"}],
  "securityContext": {"capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}}
}"#,
    )
    .expect("partial_container.json");

    let cases = [
        // kubectl debug --help
        Case {
            line: "poddebug mypod -it --image=busybox",
            ns: "default",
            pod: "mypod",
            check: |ec| {
                assert_eq!(ec["image"], "busybox");
                assert_eq!(
                    (ec["stdin"].clone(), ec["tty"].clone()),
                    (json!(true), json!(true))
                );
                assert!(
                    ec["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("debugger-"))
                );
            },
        },
        Case {
            line: "poddebug -f pod.yaml -it --image=busybox",
            ns: "default",
            pod: "frompod",
            check: |ec| assert_eq!(ec["image"], "busybox"),
        },
        Case {
            line: "poddebug --image=myproj/debug-tools -c debugger mypod2",
            ns: "default",
            pod: "mypod2",
            check: |ec| {
                assert_eq!(ec["name"], "debugger");
                assert_eq!(ec["image"], "myproj/debug-tools");
                assert!(ec.get("stdin").is_none_or(|s| s == false));
            },
        },
        // kubernetes.io, "Debugging with an ephemeral debug container"
        Case {
            line: "poddebug -it ephemeral-demo --image=busybox:1.28 --target=ephemeral-demo",
            ns: "default",
            pod: "ephemeral-demo",
            check: |ec| {
                assert_eq!(ec["image"], "busybox:1.28");
                assert_eq!(ec["targetContainerName"], "ephemeral-demo");
            },
        },
        // kubernetes.io, "Custom profile"
        Case {
            line: "poddebug -it example --image=busybox --custom=partial_container.json -- sh",
            ns: "default",
            pod: "example",
            check: |ec| {
                assert_eq!(ec["command"], json!(["sh"]));
                assert_eq!(
                    user_env(ec),
                    json!([{"name": "ENV_VAR_1", "value": "value_1"},
                           {"name": "ENV_VAR_2", "value": "value_2"}])
                );
                // The custom capabilities, and general's SYS_PTRACE applied by the server.
                assert_eq!(caps(ec), ["NET_ADMIN", "SYS_PTRACE", "SYS_TIME"]);
            },
        },
        // kubernetes.io, "Debugging profiles"
        Case {
            line: "poddebug -it prof --image=busybox --target=prof --profile=netadmin",
            ns: "default",
            pod: "prof",
            check: |ec| assert_eq!(caps(ec), ["NET_ADMIN", "NET_RAW"]),
        },
        // Flags before the pod, -n anywhere, --image with its value as the next word.
        Case {
            line: "poddebug -it -n shop web1 --image=busybox:1.36 -- sh",
            ns: "shop",
            pod: "web1",
            check: |ec| {
                assert_eq!(ec["image"], "busybox:1.36");
                assert_eq!(ec["command"], json!(["sh"]));
            },
        },
        Case {
            line: "poddebug --image busybox:1.36 -n shop web2 -- sh",
            ns: "shop",
            pod: "web2",
            check: |ec| assert_eq!(ec["command"], json!(["sh"])),
        },
        Case {
            line: "poddebug -i -t --namespace=shop web3 --image busybox:1.36 --container dbg -q",
            ns: "shop",
            pod: "web3",
            check: |ec| {
                assert_eq!(ec["name"], "dbg");
                assert_eq!(
                    (ec["stdin"].clone(), ec["tty"].clone()),
                    (json!(true), json!(true))
                );
            },
        },
        Case {
            line: "poddebug web4 -n shop --image=busybox:1.36 --image-pull-policy=Never --env=A=1,B=2 --env C=3 --arguments-only --attach=false -- -c date",
            ns: "shop",
            pod: "web4",
            check: |ec| {
                assert_eq!(ec["imagePullPolicy"], "Never");
                assert_eq!(
                    user_env(ec),
                    json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"},
                           {"name": "C", "value": "3"}])
                );
                assert_eq!(ec["args"], json!(["-c", "date"]));
                assert!(ec.get("command").is_none(), "{ec}");
            },
        },
    ];
    for case in &cases {
        if case.line.contains("-f pod.yaml") {
            add_pod(&fake, case.ns, case.pod, "app");
        } else {
            add_pod(&fake, case.ns, case.pod, case.pod);
        }
    }
    for case in &cases {
        let args: Vec<String> = words(case.line).into_iter().skip(1).collect();
        let (code, out, err) = run(&kc, dir.path(), &args).await;
        assert_eq!(code, Some(0), "{}: {out}{err}", case.line);
        let ec = debug_container_of(&fake, case.ns, case.pod);
        (case.check)(&ec);
        if case.line.contains("-it") && !case.line.contains("-q") {
            assert!(
                err.contains("Session ended, debug container"),
                "{}: {err}",
                case.line
            );
        }
        if case.line.contains(" -q") {
            assert!(!err.contains("Defaulting"), "{}: {err}", case.line);
        }
    }
}

#[tokio::test]
async fn dry_runs_print_what_would_be_created_and_create_nothing() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &["--default-profile=general"]).await;
    let dir = TempDir::new("kubectl-dry-run");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");
    let line = |s: &str| words(s);

    let (code, out, err) = run(
        &kc,
        dir.path(),
        &line("web -c dbg --image=busybox:1.36 --target=app --dry-run=server -o json -- sh"),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let o: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(o["metadata"]["name"], "dbg");
    // What the server would create: the profile applied, the target kept.
    assert_eq!(
        o["container"]["securityContext"]["capabilities"]["add"],
        json!(["SYS_PTRACE"])
    );
    assert_eq!(o["targetContainerName"], "app");
    let (code, out, err) = run(
        &kc,
        dir.path(),
        &line("--dry-run=server web -c dbg2 --image=busybox:1.36 -o yaml"),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("name: dbg2"), "{out}");
    let (code, out, err) = run(&kc, dir.path(), &line("web -c dbg3 --dry-run=server")).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        "poddebugcontainer.poddebug.dev/web.dbg3 created (server dry run)"
    );
    // A client dry run prints the request and sends none.
    fake.clear_requests();
    let (code, out, err) = run(
        &kc,
        dir.path(),
        &line("web -c dbg4 --image=busybox:1.36 --env=A=1 --dry-run=client -o json"),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let o: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(o["container"]["env"], json!([{"name": "A", "value": "1"}]));
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.method != "PATCH" && r.method != "PUT"),
        "{:?}",
        fake.requests()
    );
    // A server dry run that the server refuses says why.
    let (code, _, err) = run(&kc, dir.path(), &line("web -c Bad_Name --dry-run=server")).await;
    assert_eq!(code, Some(1));
    assert!(err.starts_with("Error from server (Invalid)"), "{err}");
    // Nothing was created by any of them.
    let pod = fake.pod_json("shop", "web").expect("pod");
    assert!(
        pod["spec"]["ephemeralContainers"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{pod}"
    );
}

#[tokio::test]
async fn bad_command_lines_fail_before_any_request_as_kubectl_does() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("kubectl-bad");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");
    let custom = dir.path().join("bad.json");
    std::fs::write(&custom, r#"{"image": "evil:latest"}"#).expect("file");
    let other_ns = dir.path().join("other.yaml");
    std::fs::write(
        &other_ns,
        "kind: Pod\napiVersion: v1\nmetadata:\n  name: web\n  namespace: prod\n",
    )
    .expect("file");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            words("web -t --image=busybox"),
            "error: -i/--stdin is required for containers with -t/--tty=true",
        ),
        (
            words("web --image-pull-policy=always"),
            "invalid image pull policy: always",
        ),
        (
            words("web --env=NOVALUE"),
            "NOVALUE must be formatted as key=value",
        ),
        (
            vec!["web".into(), format!("--custom={}", custom.display())],
            "error: name, command, image, lifecycle and volume devices are not modifiable via custom profile",
        ),
        (
            vec![
                "-n".into(),
                "shop".into(),
                "-f".into(),
                other_ns.display().to_string(),
            ],
            "error: the namespace from the provided object \"prod\" does not match the namespace \"shop\". You must pass '--namespace=prod' to perform this operation.",
        ),
        (
            words("-it --image=busybox"),
            "error: the following required arguments were not provided",
        ),
    ];
    fake.clear_requests();
    for (args, want) in &cases {
        let (code, _, err) = run(&kc, dir.path(), args).await;
        assert_ne!(code, Some(0), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let pod = fake.pod_json("shop", "web").expect("pod");
    assert!(
        pod["spec"]["ephemeralContainers"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
}

#[tokio::test]
async fn warnings_are_shown_and_stop_hints_only_for_stoppable_containers() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(
        &fake,
        &pki,
        &["--default-target=none", "--default-debug-ttl=0"],
    )
    .await;
    let dir = TempDir::new("kubectl-warnings");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");
    // No target, no shared process namespace: DELETE cannot stop it, and the server says so.
    let (code, _, err) = run(&kc, dir.path(), &words("web -c lone --wait -- sleep 1000")).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("Warning: debug container \"lone\" cannot be stopped with DELETE"),
        "{err}"
    );
    assert!(!err.contains("stop it with"), "{err}");
    // With a target it can be stopped, and the hint says when the server will.
    let (code, _, err) = run(
        &kc,
        dir.path(),
        &words("web -c joined --target=app --ttl=1h --wait -- sleep 1000"),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("Warning:"), "{err}");
    assert!(
        err.contains(
            "stop it with: kubectl poddebug stop -n shop web joined (the server stops it at "
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_request_timeout_gives_up_on_a_server_that_does_not_answer() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("kubectl-timeout");
    let kc: PathBuf = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");
    // kube-apiserver stalls on the update: poddebug's answer cannot begin within the limit.
    fake.delay_requests(
        http::Method::PUT,
        "/ephemeralcontainers",
        std::time::Duration::from_secs(20),
    );
    let (code, _, err) = run(
        &kc,
        dir.path(),
        &words("--request-timeout=1s web -c slow --image=busybox:1.36"),
    )
    .await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("timed out"), "{err}");
}
