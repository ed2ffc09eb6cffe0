//! The plugin end to end: real kubectl, the real server, the fake kube-apiserver.

use std::path::PathBuf;
use std::process::Command;

use poddebug_tests::{FakeKube, PodDebugServer, TempDir};

/// Runs the plugin with `input` on its stdin; (exit code, stdout, stderr).
fn plugin_with_input(kc: &PathBuf, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-poddebug"))
        .env("KUBECONFIG", kc)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("plugin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("plugin");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn plugin(kc: &PathBuf, cache: &TempDir, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-poddebug"))
        .env("KUBECONFIG", kc)
        .env("KUBECACHEDIR", cache.path())
        .args(args)
        .output()
        .expect("plugin");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn run_get_list_stop_and_profiles() {
    if !Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        poddebug_tests::capability::missing("kubectl");
        return;
    }
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("plugin");
    let cache = TempDir::new("plugin-cache");
    let kc = server.write_kubeconfig(dir.path(), "plugin-user", &["devs"], "shop");

    let (kc1, c1) = (kc.clone(), TempDir::new("c1"));
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        plugin(
            &kc1,
            &c1,
            &[
                "run",
                "web",
                "-c",
                "dbg",
                "--image",
                "busybox:1.36",
                "--target",
                "app",
                "--wait",
                "10",
                "--",
                "sh",
                "-c",
                "sleep 1000",
            ],
        )
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
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
        .unwrap()
        .spec
        .unwrap()
        .ephemeral_containers
        .unwrap()[0];
    assert_eq!(ec.command.as_deref().unwrap(), &["sh", "-c", "sleep 1000"]);
    assert_eq!(ec.target_container_name.as_deref(), Some("app"));

    let (kc1, c1) = (kc.clone(), TempDir::new("c2"));
    let (ok, out, err) =
        tokio::task::spawn_blocking(move || plugin(&kc1, &c1, &["get", "web", "-o", "json"]))
            .await
            .unwrap();
    assert!(ok, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(list["items"][0]["metadata"]["name"], "dbg");

    let (kc1, c1) = (kc.clone(), TempDir::new("c3"));
    let (ok, out, err) = tokio::task::spawn_blocking(move || plugin(&kc1, &c1, &["list"]))
        .await
        .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.contains("web.dbg") && out.contains("busybox:1.36"),
        "{out}"
    );

    // A console on it: stdin goes in, the container's output comes back, and the end of our
    // input half-closes its stdin (v5), which ends the session with its exit status.
    let kc1 = kc.clone();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        plugin_with_input(
            &kc1,
            &["attach", "web", "dbg", "-i"],
            "hello through poddebug\n",
        )
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("hello through poddebug"), "{out}{err}");
    assert!(
        err.contains("may be reattached using 'kubectl poddebug attach -n shop web dbg -i'"),
        "{err}"
    );
    // The container's exit code becomes the plugin's.
    fake.update_pod("shop", "web", |p| {
        p["metadata"]["annotations"][poddebug_tests::fake::ATTACH_EXIT_CODE_ANNOTATION] =
            serde_json::json!("7");
    });
    let kc1 = kc.clone();
    let (code, _, err) = tokio::task::spawn_blocking(move || {
        plugin_with_input(&kc1, &["attach", "web", "dbg", "-i"], "x\n")
    })
    .await
    .unwrap();
    assert_eq!(code, Some(7), "{err}");

    let (kc1, c1) = (kc.clone(), TempDir::new("c4"));
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        plugin(&kc1, &c1, &["stop", "web", "dbg", "--grace-period", "1"])
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.contains("debug container dbg in pod web") && out.contains("Terminated"),
        "{out}"
    );
    assert!(
        fake.execs().iter().all(|e| e.container == "dbg"),
        "only the debug container is touched"
    );

    let (ok, out, err) = tokio::task::spawn_blocking(move || plugin(&kc, &cache, &["profiles"]))
        .await
        .unwrap();
    assert!(ok, "{err}");
    assert!(out.contains("sysadmin"), "{out}");

    // A refusal keeps kubectl's wording and a non-zero exit.
    let dir2 = TempDir::new("c5");
    let kc2 = server.write_kubeconfig(dir2.path(), "plugin-user", &["devs"], "shop");
    let (ok, _, err) = tokio::task::spawn_blocking(move || {
        let c = TempDir::new("c6");
        plugin(&kc2, &c, &["run", "nosuchpod", "-c", "x", "--wait", "0"])
    })
    .await
    .unwrap();
    assert!(!ok);
    assert!(err.contains("pods \"nosuchpod\" not found"), "{err}");
}
