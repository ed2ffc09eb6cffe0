//! The real kubectl (v1.32 on this machine) pointed straight at poddebug with a client
//! certificate: discovery, `kubectl explain` (OpenAPI v3) and `kubectl get` of our resources.
//! Skipped, with a message, where no kubectl is installed.

use std::path::PathBuf;
use std::process::Command;

use poddebug_tests::{FakeKube, PodDebugServer, TempDir};

fn kubectl_available() -> bool {
    let found = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        poddebug_tests::capability::missing("kubectl");
    }
    found
}

fn run(kc: &PathBuf, cache: &TempDir, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kc)
        .env("KUBECACHEDIR", cache.path())
        .args(args)
        .output()
        .expect("kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn kubectl_discovers_explains_and_lists_our_resources() {
    if !kubectl_available() {
        return;
    }
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &["--approval-profiles=sysadmin:1"]).await;
    let dir = TempDir::new("kubectl");
    let cache = TempDir::new("kubecache");
    let kc = server.write_kubeconfig(dir.path(), "kim", &["devs"], "shop");
    let kc2 = kc.clone();
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let cache = TempDir::new("kubecache-inner");
        run(
            &kc2,
            &cache,
            &["api-resources", "--api-group=poddebug.dev", "--no-headers"],
        )
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.contains("poddebugcontainers")
            && out.contains("pdc")
            && out.contains("PodDebugContainer"),
        "{out}"
    );
    assert!(
        out.contains("debugprofiles") && out.contains("DebugProfile"),
        "{out}"
    );

    let kc2 = kc.clone();
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let cache = TempDir::new("kubecache-explain");
        run(&kc2, &cache, &["explain", "poddebugcontainers.status"])
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.contains("KIND:") && out.contains("PodDebugContainer"),
        "{out}"
    );
    assert!(
        out.contains("phase") && out.contains("ephemeralContainerName"),
        "{out}"
    );

    let kc2 = kc.clone();
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let cache = TempDir::new("kubecache-profiles");
        run(&kc2, &cache, &["get", "debugprofiles"])
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.contains("REQUIRES-USE") && out.contains("sysadmin"),
        "{out}{err}"
    );

    // Debug requests: explained, created with kubectl, and listed as the server's Table.
    let kc2 = kc.clone();
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let cache = TempDir::new("kubecache-requests");
        let explained = run(&kc2, &cache, &["explain", "debugrequests.spec"]);
        let file = cache.path().join("request.yaml");
        std::fs::write(
            &file,
            "apiVersion: poddebug.dev/v1alpha1\nkind: DebugRequest\nmetadata: {name: web-sysadmin}\n\
             spec: {pod: web, profile: sysadmin, reason: INC-7 disk full, duration: 30m}\n",
        )
        .expect("write the request");
        // Without kubectl's validation: for a kind it cannot patch (debug requests are not
        // patched) kubectl validates from OpenAPI v2 in protobuf, which kube-apiserver's
        // aggregator serves but poddebug pointed at straight does not (it serves v2 as JSON, as
        // the aggregator reads it). The server decodes strictly whatever kubectl asks.
        let created = run(
            &kc2,
            &cache,
            &["create", "--validate=false", "-n", "shop", "-f", &file.display().to_string()],
        );
        let listed = run(&kc2, &cache, &["get", "debugrequests", "-n", "shop"]);
        (
            explained.0 && created.0 && listed.0,
            format!("{}\n{}\n{}", explained.1, created.1, listed.1),
            format!("{}{}{}", explained.2, created.2, listed.2),
        )
    })
    .await
    .unwrap();
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("KIND:") && out.contains("DebugRequest") && out.contains("reason"),
        "{out}"
    );
    assert!(
        out.contains("debugrequest.poddebug.dev/web-sysadmin created"),
        "{out}"
    );
    assert!(
        out.contains("REQUESTER")
            && out.contains("pod/web")
            && out.contains("Pending")
            && out.contains("INC-7 disk full"),
        "{out}"
    );

    let (ok, out, err) =
        tokio::task::spawn_blocking(move || run(&kc, &cache, &["get", "pdc", "-n", "shop"]))
            .await
            .unwrap();
    assert!(ok, "{err}");
    // kubectl prints the empty-list notice on stderr.
    assert!(
        err.contains("No resources found in shop namespace"),
        "{out}{err}"
    );
}
