//! What the plugin tells a new user: its help, the names it prints (each one what `kubectl get`
//! takes), `delete` for what it made, and what it says when the API is not served. The real
//! server and the fake kube-apiserver; the real kubectl where installed, to fetch the printed
//! names.
//!
//! Needs the server binary: `cargo build -p poddebug-apiserver` first.

use std::path::Path;
use std::process::{Command, Stdio};

use poddebug_tests::{ADMIN_TOKEN, FakeKube, PodDebugServer, TempDir};

/// The server's default `--node-debug-namespace`.
const NODE_NS: &str = "poddebug-nodes";

/// Runs the plugin; (exit code, stdout, stderr). `PATH` is emptied so that no kubectl answers.
fn plugin(kc: Option<&Path>, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-poddebug"));
    if let Some(kc) = kc {
        cmd.env("KUBECONFIG", kc);
    }
    let out = cmd
        .env("PATH", "")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("plugin");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn run(kc: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let kc = kc.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        plugin(Some(&kc), &args)
    })
    .await
    .expect("plugin task")
}

/// `kubectl get NAME -o name` against the server; `None` where no kubectl is installed.
async fn kubectl_get(kc: &Path, ns: &str, name: &str) -> Option<(bool, String, String)> {
    let kc = kc.to_path_buf();
    let (ns, name) = (ns.to_owned(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        let cache = TempDir::new("front-kubecache");
        let out = Command::new("kubectl")
            .env("KUBECONFIG", &kc)
            .env("KUBECACHEDIR", cache.path())
            .args(["get", "-n", &ns, &name, "-o", "name"])
            .output()
            .ok()?;
        Some((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    })
    .await
    .expect("kubectl task")
}

#[test]
fn the_help_describes_and_shows_every_form() {
    let (code, out, err) = plugin(None, &["--help"]);
    assert_eq!(code, Some(0), "{err}");
    // kubectl's layout: the description, the examples, then usage and flags.
    let examples = out.find("\nExamples:\n").expect("an Examples section");
    let usage = out.find("\nUsage:\n").expect("a Usage section");
    assert!(examples < usage, "{out}");
    let description = &out[..examples];
    for said in [
        "Debug pods and nodes through the poddebug.dev API",
        "Ctrl-P Ctrl-Q",
        "'general'",
        "'sysadmin'",
    ] {
        assert!(description.contains(said), "{said:?} missing:\n{out}");
    }
    let examples = &out[examples..usage];
    for form in [
        "kubectl poddebug web -it --image=busybox:1.36 --target=app -- sh",
        "--profile=netadmin",
        "--copy-to=web-debug --image=busybox:1.36",
        "--copy-to=web-debug --container=app",
        "kubectl poddebug node/worker-1 -it",
        "profile general, the pods' default",
        "profile sysadmin, the nodes' default",
        "kubectl poddebug sessions -A",
        "kubectl poddebug join SESSION --observe",
        "kubectl poddebug terminate SESSION",
        "kubectl poddebug delete web --copy-to=web-debug",
        "kubectl poddebug delete node/worker-1",
        "kubectl poddebug profiles",
    ] {
        assert!(examples.contains(form), "{form:?} missing:\n{examples}");
    }
    // -h is short: the summary and the same examples.
    let (code, short, _) = plugin(None, &["-h"]);
    assert_eq!(code, Some(0));
    assert!(short.starts_with("Debug pods and nodes"), "{short}");
    assert!(short.contains("\nExamples:\n  # Debug pod web"), "{short}");
    // run and delete have examples of their own.
    for (sub, want) in [
        ("run", "kubectl poddebug run node/worker-1 -it"),
        (
            "delete",
            "kubectl poddebug delete nodedebugcontainer/worker-1.",
        ),
    ] {
        let (code, out, err) = plugin(None, &[sub, "--help"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("\nExamples:\n") && out.contains(want), "{out}");
    }
}

#[tokio::test]
async fn printed_names_are_what_kubectl_get_takes_and_delete_removes_what_was_made() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_namespace(NODE_NS, &[]);
    fake.add_node("worker-1", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("front-names");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");

    // Dry runs name the object as the collection does: POD.NAME.
    let (code, out, err) = run(&kc, &["web", "-c", "dbg", "--dry-run", "--", "sh"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        "poddebugcontainer.poddebug.dev/web.dbg created (dry run)"
    );
    let (code, out, err) = run(&kc, &["web", "-c", "dbg", "--dry-run=server", "--", "sh"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        "poddebugcontainer.poddebug.dev/web.dbg created (server dry run)"
    );

    let (code, _, err) = run(
        &kc,
        &[
            "web",
            "-c",
            "dbg",
            "--image=busybox:1.36",
            "--wait",
            "--",
            "sleep",
            "1000",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    // -o name of a pod's debug containers, of one, and of the namespace's: the same name.
    let mut printed = Vec::new();
    for args in [
        &["get", "web", "-o", "name"][..],
        &["get", "web", "dbg", "-o", "name"],
        &["list", "-o", "name"],
    ] {
        let (code, out, err) = run(&kc, args).await;
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            out.trim(),
            "poddebugcontainer.poddebug.dev/web.dbg",
            "{args:?}"
        );
        printed.push(out.trim().to_owned());
    }

    // A node debug container, named as nodedebugcontainers lists it; how to delete it.
    let (code, out, err) = run(
        &kc,
        &[
            "node/worker-1",
            "-c",
            "nd",
            "--image=busybox:1.36",
            "--",
            "sleep",
            "1000",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        "nodedebugcontainer.poddebug.dev/worker-1.nd created on node worker-1"
    );
    assert!(
        err.contains("Creating debugging pod worker-1.nd in namespace poddebug-nodes"),
        "{err}"
    );
    assert!(
        err.contains("delete it with: kubectl poddebug delete node/worker-1 nd"),
        "{err}"
    );
    printed.push(out.split_whitespace().next().unwrap_or_default().to_owned());

    // A copy is a Pod: pod/NAME.
    let (code, out, err) = run(
        &kc,
        &["web", "--copy-to=web-debug", "--set-image=app=busybox:1.36"],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "pod/web-debug created (a copy of pod web)");
    assert!(
        err.contains(
            "delete the copy with: kubectl poddebug delete -n shop web --copy-to=web-debug"
        ),
        "{err}"
    );
    assert!(fake.pod("shop", "web-debug").is_some(), "the copy is a pod");

    // What poddebug serves, kubectl fetches by the printed name (the copy's pod is
    // kube-apiserver's, checked above).
    for name in &printed {
        let Some((ok, out, err)) = kubectl_get(&kc, "shop", name).await else {
            poddebug_tests::capability::missing("kubectl");
            break;
        };
        assert!(ok, "kubectl get {name}: {err}");
        assert_eq!(out.trim(), name.as_str(), "{err}");
    }

    // delete, as the hints say and by the printed names.
    let (code, out, err) = run(&kc, &["delete", "-n", "shop", "web", "--copy-to=web-debug"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "pod/web-debug deleted (a copy of pod web)");
    assert!(fake.pod("shop", "web-debug").is_none(), "the copy is gone");

    let (code, out, err) = run(
        &kc,
        &["delete", "nodedebugcontainer.poddebug.dev/worker-1.nd"],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        "nodedebugcontainer.poddebug.dev/worker-1.nd deleted"
    );
    assert!(
        fake.pod_json(NODE_NS, "worker-1.nd").is_none(),
        "its pod is gone"
    );

    let (code, out, err) = run(
        &kc,
        &[
            "delete",
            "poddebugcontainer.poddebug.dev/web.dbg",
            "--grace-period=1",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "poddebugcontainer.poddebug.dev/web.dbg stopped");
    assert_eq!(
        fake.container_state("shop", "web", "dbg"),
        Some("terminated")
    );

    // What is not there is the server's NotFound, as kubectl prints it.
    let (code, _, err) = run(&kc, &["delete", "node/worker-1", "nd"]).await;
    assert_eq!(code, Some(1));
    assert!(err.starts_with("Error from server (NotFound)"), "{err}");
    let (code, _, err) = run(&kc, &["delete", "web"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("--copy-to=NAME"), "{err}");
}

#[tokio::test]
async fn an_api_not_served_is_explained() {
    // The fake alone: kube-apiserver without poddebug's APIService.
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let kc = fake.write_kubeconfig(ADMIN_TOKEN);

    let (code, out, err) = run(&kc, &["list"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.starts_with(
            "error: the poddebug.dev/v1alpha1 API is not served by this cluster: its \
             APIService is not registered"
        ),
        "{err}"
    );
    assert!(
        err.contains("kubectl get apiservice v1alpha1.poddebug.dev"),
        "{err}"
    );
    // The server's own words come last, once.
    assert_eq!(
        err.matches("the server could not find the requested resource")
            .count(),
        1,
        "{err}"
    );
    let (code, _, err) = run(&kc, &["web", "-c", "dbg", "--", "sh"]).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("is not served by this cluster"), "{err}");
    // Registered but unavailable: the aggregator answers 503, discovery too; the plugin says so
    // at once (no retries).
    fake.inject_faults(http::Method::GET, "/apis/poddebug.dev", 503, 1000);
    let (code, _, err) = run(&kc, &["list"]).await;
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("error: the poddebug.dev/v1alpha1 API is registered but not available"),
        "{err}"
    );
    assert!(
        err.contains("MissingEndpoints") && err.contains("docs/troubleshooting.md"),
        "{err}"
    );
}
