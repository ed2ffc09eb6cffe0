//! The plugin against a real cluster with poddebug deployed (`kubectl apply -k manifests/`),
//! under a pseudo-terminal. Ignored by default; run with
//!
//! ```sh
//! KUBECONFIG=~/.kube/config cargo test -p kubectl-poddebug --test live_plugin -- --ignored --test-threads=1
//! ```
//!
//! kubectl only sets the stage (a namespace with a running pod `web`, deleted at the end); the
//! plugin itself runs with no kubectl on its `PATH`.

mod common;

use common::Terminal;
use poddebug_tests::kubectl::{PodSandbox, live_cluster_given};

/// A namespace with one running pod `web` (container `app` running `sleep 3600`), deleted on drop.
struct Sandbox {
    ns: String,
    _stage: PodSandbox,
}

impl Sandbox {
    fn new(tag: &str) -> Option<Sandbox> {
        if !live_cluster_given("the live plugin suite") {
            return None;
        }
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]}]
            }
        });
        let stage = PodSandbox::new(format!("poddebug-plugin-{tag}-{}", std::process::id()), pod);
        Some(Sandbox {
            ns: stage.ns().to_owned(),
            _stage: stage,
        })
    }

    /// The plugin on a terminal, in this namespace, without kubectl on its PATH.
    fn plugin(&self, args: &[&str]) -> Terminal {
        let mut all = vec!["-n", self.ns.as_str()];
        all.extend_from_slice(args);
        Terminal::spawn_with_path(&all, "")
    }

    /// `kubectl poddebug web -it -c NAME --image busybox:1.36 --target app -- sh`, once the
    /// plugin has said the shell is there.
    fn shell(&self, name: &str) -> Terminal {
        let t = self.plugin(&[
            "web",
            "-it",
            "-c",
            name,
            "--image",
            "busybox:1.36",
            "--target",
            "app",
            "--",
            "sh",
        ]);
        t.expect("If you don't see a command prompt, try pressing enter.");
        t
    }
}

#[test]
#[ignore = "needs a live cluster with poddebug deployed"]
fn exit_7_becomes_the_plugins_exit_code() {
    let Some(s) = Sandbox::new("exit") else {
        return;
    };
    let mut t = s.plugin(&[
        "web",
        "-it",
        "--image",
        "busybox:1.36",
        "--target",
        "app",
        "--",
        "sh",
        "-c",
        "exit 7",
    ]);
    assert_eq!(t.exit_code(), 7, "{}", t.text());
    assert!(t.cooked(), "the terminal is restored");
}

#[test]
#[ignore = "needs a live cluster with poddebug deployed"]
fn interactive_shell_sees_the_target_and_resizes() {
    let Some(s) = Sandbox::new("shell") else {
        return;
    };
    let mut t = s.shell("shell");
    t.type_bytes(b"\r");
    // The target's processes are visible: the PID namespace is shared.
    t.type_bytes(b"ps\r");
    t.expect("sleep 3600");
    t.resize(100, 40);
    t.type_bytes(b"stty size\r");
    t.expect("40 100");
    t.type_bytes(b"exit 3\r");
    assert_eq!(t.exit_code(), 3, "{}", t.text());
    assert!(t.cooked(), "the terminal is restored");
}

#[test]
#[ignore = "needs a live cluster with poddebug deployed"]
fn detach_then_stop() {
    let Some(s) = Sandbox::new("detach") else {
        return;
    };
    let mut t = s.shell("bg");
    t.type_bytes(b"echo attached\r");
    t.expect("attached");
    t.type_bytes(b"\x10\x11");
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    assert!(t.cooked(), "the terminal is restored");
    assert!(t.text().contains("still running"), "{}", t.text());

    let mut stop = s.plugin(&["stop", "web", "bg", "--grace-period", "2"]);
    assert_eq!(stop.exit_code(), 0, "{}", stop.text());
    let mut get = s.plugin(&["get", "web", "bg"]);
    assert_eq!(get.exit_code(), 0, "{}", get.text());
    assert!(get.text().contains("Terminated"), "{}", get.text());
}

#[test]
#[ignore = "needs a live cluster with poddebug deployed"]
fn kubectl_command_lines_with_flags_before_the_pod_and_impersonation() {
    let Some(s) = Sandbox::new("forms") else {
        return;
    };
    let ns = s.ns.as_str();
    // The form of every tutorial: flags first, -n between them, the pod, then more flags.
    let mut t = Terminal::spawn_with_path(
        &[
            "-it",
            "-n",
            ns,
            "web",
            "--image=busybox:1.36",
            "--target=app",
            "-c",
            "form",
            "--",
            "sh",
            "-c",
            "echo form-$((40+2)); exit 4",
        ],
        "",
    );
    assert_eq!(t.exit_code(), 4, "{}", t.text());
    assert!(t.text().contains("form-42"), "{}", t.text());
    assert!(t.cooked(), "the terminal is restored");

    // --as: kube-apiserver impersonates, and poddebug authorizes the impersonated user.
    let mut t = Terminal::spawn_with_path(
        &[
            "--image",
            "busybox:1.36",
            "-n",
            ns,
            "web",
            "--as=alice",
            "--dry-run=server",
        ],
        "",
    );
    assert_eq!(t.exit_code(), 1, "{}", t.text());
    assert!(
        t.text()
            .contains("User \"alice\" cannot create resource \"pods/debug\""),
        "{}",
        t.text()
    );
    // --as-group too: as a member of system:masters alice may, and a server dry run says so
    // without creating anything.
    let mut t = Terminal::spawn_with_path(
        &[
            "-n",
            ns,
            "--as=alice",
            "--as-group=system:masters",
            "web",
            "-c",
            "dry",
            "--image=busybox:1.36",
            "--dry-run=server",
        ],
        "",
    );
    assert_eq!(t.exit_code(), 0, "{}", t.text());
    assert!(
        t.text()
            .contains("poddebugcontainer.poddebug.dev/web.dry created (server dry run)"),
        "{}",
        t.text()
    );
    let mut get = s.plugin(&["get", "web", "-o", "name"]);
    assert_eq!(get.exit_code(), 0, "{}", get.text());
    assert!(!get.text().contains(".dry"), "{}", get.text());
    // The name `kubectl get poddebugcontainers` takes: POD.NAME.
    assert!(
        get.text()
            .contains("poddebugcontainer.poddebug.dev/web.form"),
        "{}",
        get.text()
    );
}

#[test]
#[ignore = "needs a live cluster with poddebug deployed"]
fn copy_to_debugs_a_crashing_pods_copy_and_exits_with_the_shells_code() {
    let Some(s) = Sandbox::new("copy") else {
        return;
    };
    // A pod whose only container exits 1 at once (CrashLoopBackOff): no attach to it can work.
    poddebug_tests::kubectl::kubectl_ok(
        &[
            "run",
            "crash",
            "-n",
            &s.ns,
            "--image=busybox:1.36",
            "--restart=Always",
            "--",
            "sh",
            "-c",
            "exit 1",
        ],
        None,
    );
    let mut t = s.plugin(&[
        "crash",
        "-it",
        "--copy-to=crash-debug",
        "--container=crash",
        "--",
        "sh",
    ]);
    t.expect("If you don't see a command prompt, try pressing enter.");
    t.type_bytes(b"\r");
    t.type_bytes(b"echo in-the-$((6*7))-copy\r");
    t.expect("in-the-42-copy");
    t.type_bytes(b"exit 5\r");
    assert_eq!(t.exit_code(), 5, "{}", t.text());
    assert!(t.cooked(), "the terminal is restored");
    let hint = format!(
        "delete the copy with: kubectl poddebug delete -n {} crash --copy-to=crash-debug",
        s.ns
    );
    assert!(t.text().contains(&hint), "the delete hint: {}", t.text());
    // The hint, as printed, deletes the copy.
    let mut d = s.plugin(&["delete", "crash", "--copy-to=crash-debug"]);
    assert_eq!(d.exit_code(), 0, "{}", d.text());
    assert!(
        d.text()
            .contains("pod/crash-debug deleted (a copy of pod crash)"),
        "{}",
        d.text()
    );
}

#[test]
#[ignore = "needs a live cluster with poddebug deployed"]
fn node_form_debugs_the_node_and_exits_with_the_shells_code() {
    if !live_cluster_given("the live plugin suite") {
        return;
    }
    let name = format!("plugin-{}", std::process::id());
    // Whatever happens, the node debug pod goes.
    let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
    let mut t = Terminal::spawn_with_path(
        &[
            "node/localhost",
            "-it",
            "-c",
            &name,
            "--image=busybox:1.36",
            "--profile=sysadmin",
            "--",
            "sh",
        ],
        "",
    );
    t.expect("If you don't see a command prompt, try pressing enter.");
    t.type_bytes(b"\r");
    t.type_bytes(b"grep -c '^ID=' /host/etc/os-release\r");
    t.expect("\n1");
    t.type_bytes(b"exit 4\r");
    assert_eq!(t.exit_code(), 4, "{}", t.text());
    assert!(t.cooked(), "the terminal is restored");
}

/// `kubectl poddebug request`: a user without `use` on sysadmin asks for it and waits; another
/// user approves it with `kubectl poddebug approve`; the first plugin then makes the debug
/// container under the request, attaches, and exits with its exit code. A second request is
/// denied (`kubectl poddebug deny --comment`): the waiting plugin says by whom and why, and
/// exits 1. Needs the server to run with `--approval-profiles=sysadmin:1` (as CI runs it).
#[test]
#[ignore = "needs a live cluster with poddebug deployed"]
fn a_request_waits_for_approval_then_attaches_and_a_denial_ends_it() {
    let Some(s) = Sandbox::new("request") else {
        return;
    };
    let ns = s.ns.as_str();
    let alice = format!("jit-plugin-alice-{}", std::process::id());
    let bob = format!("jit-plugin-bob-{}", std::process::id());
    for (role, user) in [
        ("poddebug:debugger", alice.as_str()),
        ("poddebug:request-approver", bob.as_str()),
    ] {
        poddebug_tests::kubectl::kubectl_ok(
            &[
                "create",
                "rolebinding",
                &format!("{user}-binding"),
                "-n",
                ns,
                &format!("--clusterrole={role}"),
                &format!("--user={user}"),
            ],
            None,
        );
    }
    let as_alice = format!("--as={alice}");
    let as_bob = format!("--as={bob}");
    // The name of the one request of the namespace, once there is one (bounded).
    let wait_request = |skip: &[String]| -> String {
        for _ in 0..120 {
            let out = poddebug_tests::kubectl::kubectl_ok(
                &[
                    "get",
                    "debugrequests",
                    "-n",
                    ns,
                    "-o",
                    "jsonpath={.items[*].metadata.name}",
                ],
                None,
            );
            if let Some(n) = out
                .split_whitespace()
                .find(|n| !skip.iter().any(|s| s == n))
            {
                return n.to_owned();
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        panic!("no debug request appeared in {ns}");
    };

    let mut t = s.plugin(&[
        &as_alice,
        "--as-group=system:authenticated",
        "request",
        "web",
        "--profile=sysadmin",
        "--reason=plugin INC-5: inspect the volume",
        "--ticket=INC-5",
        "--duration=5m",
        "-it",
        "--image=busybox:1.36",
        "--target=app",
        "--",
        "sh",
    ]);
    t.expect("waiting for debugrequest/");
    let name = wait_request(&[]);
    assert!(name.starts_with("web-sysadmin-"), "{name}");
    let mut approve = s.plugin(&[
        &as_bob,
        "--as-group=system:authenticated",
        "approve",
        &name,
        "--comment",
        "go ahead",
    ]);
    assert_eq!(approve.exit_code(), 0, "{}", approve.text());
    assert!(
        approve.text().contains("approved: Approved"),
        "{}",
        approve.text()
    );
    // The approver is shown all that the approval binds before it is given: the container
    // field by field, and the container it joins.
    let shown = approve.text();
    assert!(
        shown.contains(&format!("approving debugrequest/{name} of {alice}"))
            && shown.contains("with the sysadmin profile: exactly the container")
            && shown.contains("\"command\":[\"sh\"]")
            && shown.contains("\"stdin\":true")
            && shown.contains("joining container \"app\"'s namespaces"),
        "{shown}"
    );
    t.expect(&format!("approved by {bob}: \"go ahead\""));
    t.expect("If you don't see a command prompt, try pressing enter.");
    t.type_bytes(b"echo $PODDEBUG_TICKET-ok\r");
    t.expect("INC-5-ok");
    t.type_bytes(b"exit 4\r");
    assert_eq!(t.exit_code(), 4, "{}", t.text());
    assert!(t.cooked(), "the terminal is restored");

    let mut t = s.plugin(&[
        &as_alice,
        "--as-group=system:authenticated",
        "request",
        "web",
        "--profile=sysadmin",
        "--reason=plugin INC-6",
        "-it",
        "--image=busybox:1.36",
        "--",
        "sh",
    ]);
    t.expect("waiting for debugrequest/");
    let second = wait_request(std::slice::from_ref(&name));
    let mut deny = s.plugin(&[
        &as_bob,
        "--as-group=system:authenticated",
        "deny",
        &second,
        "--comment",
        "use the runbook",
    ]);
    assert_eq!(deny.exit_code(), 0, "{}", deny.text());
    assert_eq!(t.exit_code(), 1, "{}", t.text());
    assert!(
        t.text()
            .contains(&format!("is Denied by {bob}: \"use the runbook\"")),
        "{}",
        t.text()
    );
    let _ = poddebug_tests::kubectl::kubectl(&["delete", "debugrequests", "--all", "-n", ns], None);
}

/// A session through the plugin is recorded (pass 1 records to the S3 store CI names in
/// `PODDEBUG_LIVE_RECORDING_STORE`); `recordings search` finds it by what the shell printed,
/// `recordings verify` checks it on this side, and `recordings play` plays it named by its id
/// alone, as a user copies it from the search.
#[test]
#[ignore = "needs a live cluster with poddebug deployed, recording (PODDEBUG_LIVE_RECORDING_STORE)"]
fn a_recorded_session_is_found_verified_and_played_by_its_id_alone() {
    if std::env::var_os("PODDEBUG_LIVE_RECORDING_STORE").is_none() {
        eprintln!("skipped: PODDEBUG_LIVE_RECORDING_STORE names no store the server records to");
        return;
    }
    let Some(s) = Sandbox::new("rec") else {
        return;
    };
    let mut t = s.shell("rec");
    // What the shell prints is not what was typed: found, it was recorded as output.
    let printed = format!("played-{}-42", std::process::id());
    t.type_bytes(format!("echo played-{}-$((6*7))\r", std::process::id()).as_bytes());
    t.expect(&printed);
    t.type_bytes(b"exit 0\r");
    assert_eq!(t.exit_code(), 0, "{}", t.text());

    // The index is written when the recording ends: searched until it is there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let id = loop {
        let mut search = s.plugin(&["recordings", "search", &printed, "-o", "name"]);
        let code = search.exit_code();
        let out = search.text();
        assert_eq!(code, 0, "{out}");
        if let Some(name) = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("debugrecording.poddebug.dev/"))
        {
            break name.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the recording never found: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };

    let mut verify = s.plugin(&["recordings", "verify", &id]);
    assert_eq!(verify.exit_code(), 0, "{}", verify.text());
    assert!(verify.text().contains(": Verified"), "{}", verify.text());

    let mut play = s.plugin(&[
        "recordings",
        "play",
        &id,
        "--speed",
        "8",
        "--skip-idle",
        "100ms",
    ]);
    assert_eq!(play.exit_code(), 0, "{}", play.text());
    assert!(play.text().contains(&printed), "{}", play.text());
}
