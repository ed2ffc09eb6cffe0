//! The portal in headless Chromium through the real `kubectl proxy` (on a non-default port,
//! as a user by `--as`, or as the kubeconfig's admin): load, create, a real shell in the
//! terminal, resize, exit code, stop; a copy of a pod debugged from its page; a node debug
//! container started, typed into and deleted from the Nodes page; and a user without the
//! `portal` grant sees kube-apiserver's refusal.
//!
//! Needs `manifests/rbac.yaml` as of the portal (the user roles grant `get`/`list` on
//! `portal`), and Debian's chromium and chromium-driver.

use super::support::*;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use poddebug_tests::browser::{self, Browser};

const PORTAL: &str = "/apis/poddebug.dev/v1alpha1/portal/";

/// The portal's user: no rights but the ones bound here.
const PORTAL_USER: &str = "portal-user";

/// `kubectl proxy` on a free port as `user` (`-v=4`: it logs every proxied request and its
/// errors); killed on drop, and when the test failed its log is printed.
struct Proxy {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Proxy {
    fn start(user: &str) -> Proxy {
        Proxy::spawn(&[&format!("--as={user}"), "--as-group=system:authenticated"])
    }

    /// As the kubeconfig's own user (the cluster's admin).
    fn admin() -> Proxy {
        Proxy::spawn(&[])
    }

    fn spawn(identity: &[&str]) -> Proxy {
        let port = poddebug_tests::server::free_port();
        let log = std::env::temp_dir().join(format!("poddebug-live-kubectl-proxy-{port}.log"));
        let file = std::fs::File::create(&log).expect("the kubectl proxy log");
        let child = Command::new("kubectl")
            .args(["proxy", "-v=4", &format!("--port={port}")])
            .args(identity)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("kubectl proxy");
        let proxy = Proxy { child, port, log };
        poll(
            "kubectl proxy listening",
            Duration::from_secs(20),
            Duration::from_millis(200),
            || {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        );
        proxy
    }

    fn url(&self, fragment: &str) -> String {
        format!("http://127.0.0.1:{}{PORTAL}{fragment}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let alive = matches!(self.child.try_wait(), Ok(None));
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!(
                "kubectl proxy on port {} ({}), last lines of its log:",
                self.port,
                if alive { "still running" } else { "exited" }
            );
            for line in tail.iter().rev() {
                eprintln!("  {line}");
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Types a line into the terminal (Enter is WebDriver's U+E007).
async fn type_line(b: &Browser, line: &str) {
    b.fill("#terminal textarea", &format!("{line}\u{E007}"))
        .await;
}

#[tokio::test]
#[ignore]
async fn portal_debugs_a_pod_through_kubectl_proxy() {
    if !enabled() || !browser::available() {
        return;
    }
    let sb = Sandbox::new("portal");
    // Its own user (kubectl proxy impersonates it): other tests grant alice cluster-wide
    // profile rights while this one runs.
    // edit for the core pod reads the portal makes; poddebug:debugger is bound on its own (it is
    // not aggregated into edit).
    sb.bind("edit", PORTAL_USER);
    sb.bind("poddebug:debugger", PORTAL_USER);
    sb.bind_cluster("poddebug:viewer", PORTAL_USER);
    let proxy = Proxy::start(PORTAL_USER);
    let b = Browser::start(1100, 800).await;

    // The user may not list namespaces: the page says so, and her deep link works.
    b.goto(&proxy.url("")).await;
    b.wait_text("#namespaces", "cannot list resource").await;
    b.goto(&proxy.url(&format!("#/namespaces/{}", sb.ns))).await;
    b.wait_text("#pods", "web").await;
    b.goto(&proxy.url(&format!("#/namespaces/{}/pods/web", sb.ns)))
        .await;
    b.wait_text("#debug-containers", "No debug containers yet")
        .await;
    let profiles = b.wait_text("#profile", "general").await;
    assert!(!profiles.contains("sysadmin"), "{profiles}");

    // Create a shell and use it.
    b.set("#create-form input[name=name]", "dbg").await;
    b.set("#create-form input[name=image]", BUSYBOX).await;
    b.set("#create-form input[name=command]", "sh").await;
    b.click("#create-form select[name=target] option[value=app]")
        .await;
    b.click("#create-button").await;
    // Typed once the session is open (keys typed earlier are kept and sent then, but the
    // runtime may not have subscribed the attach's output at that instant).
    b.wait_for("#terminal[data-state=open] .xterm-rows").await;
    type_line(&b, "echo portal-$((6*7))").await;
    b.wait_text_on_screen("#terminal .xterm-rows", "portal-42")
        .await;

    // Resize: the shell sees the terminal's new size.
    b.resize(700, 600).await;
    b.eval("document.getElementById('terminal').scrollIntoView(); return null")
        .await;
    let size = poll_async(
        "the terminal refits",
        Duration::from_secs(10),
        Duration::from_millis(200),
        || async {
            let s = b
                .eval("return document.getElementById('terminal').dataset.size || ''")
                .await;
            match s.as_str().and_then(|s| s.split_once('x')) {
                Some((c, r)) if c.parse::<u32>().is_ok_and(|c| c < 100) => Ok(format!("{r} {c}")),
                _ => Err(format!("{s}")),
            }
        },
    )
    .await;
    type_line(&b, "stty size").await;
    b.wait_text_on_screen("#terminal .xterm-rows", &size).await;

    // Exit with a code: the end-of-session line has it.
    type_line(&b, "exit 3").await;
    // The line first shows what the stream said, then the container's own exit code.
    let end = b.wait_text("#session-end", "exit code 3").await;
    assert_eq!(end, "Session ended: exit code 3");

    // Stop a second, long-running one (no TTY: its logs open instead of a terminal).
    b.set("#create-form input[name=name]", "idle").await;
    b.set("#create-form input[name=command]", "sleep 3600")
        .await;
    b.click("#create-form input[name=tty]").await;
    b.click("#create-button").await;
    b.wait_for("#logs").await;
    b.wait_text("#debug-containers tr[data-name=idle]", "Running")
        .await;
    b.click("button.stop[data-name=idle]").await;
    b.wait_text("#debug-containers tr[data-name=idle]", "Terminated")
        .await;
    b.close().await;
}

#[tokio::test]
#[ignore]
async fn portal_refuses_a_user_without_the_grant() {
    if !enabled() || !browser::available() {
        return;
    }
    let proxy = Proxy::start("pdlive-nobody");
    let b = Browser::start(1000, 700).await;
    b.goto(&proxy.url("")).await;
    let page = b
        .wait_text("body", "portal.poddebug.dev is forbidden")
        .await;
    assert!(page.contains("pdlive-nobody"), "{page}");
    b.close().await;
}

/// The attacker's page: from its own origin it tries what a page can do with the user's
/// `kubectl proxy` at `proxy` — a `no-cors` POST creating a debug container, a WebSocket attach
/// to `victim` typing a command, a form POST and a link to the pod's recordings (both top-level
/// navigations, whose answers the test reads) — and logs each outcome in `#log`.
fn attacker_page(proxy: u16, ns: &str, node_debug: &str, node_victim: &str) -> String {
    let base =
        format!("http://127.0.0.1:{proxy}/apis/poddebug.dev/v1alpha1/namespaces/{ns}/pods/web");
    let node = format!(
        "http://127.0.0.1:{proxy}/apis/poddebug.dev/v1alpha1/nodes/localhost/debug/{node_debug}"
    );
    format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>free cat pictures</title></head><body>
<pre id="log"></pre>
<form id="post" method="POST" enctype="text/plain" action="{base}/debug/pwn-form">
  <input type="hidden" name='{{"container":{{"command":["sh"],"stdin":true,"a":"' value='"}}}}'>
  <button id="post-button" type="submit">post</button>
</form>
<a id="read" href="{base}/recordings">recordings</a>
<script>
const log = (s) => {{ document.getElementById('log').textContent += s + '\n'; }};
const base = '{base}';
fetch(base + '/debug/pwn', {{
  method: 'POST', mode: 'no-cors',
  body: new Blob([JSON.stringify({{container: {{image: 'busybox:1.36', command: ['sh'], stdin: true, tty: true}}}})]),
}}).then(() => log('fetch:sent'), (e) => log('fetch:error:' + e));
// A copy of the pod (which would run the pod's service account) and a root shell on the node.
fetch(base + '/copy', {{
  method: 'POST', mode: 'no-cors',
  body: new Blob([JSON.stringify({{metadata: {{name: 'pwn-copy'}}, container: {{image: 'busybox:1.36', command: ['sh'], stdin: true}}}})]),
}}).then(() => log('copy:sent'), (e) => log('copy:error:' + e));
fetch('{node}', {{
  method: 'POST', mode: 'no-cors',
  body: new Blob([JSON.stringify({{container: {{image: 'busybox:1.36', command: ['sh'], stdin: true}}}})]),
}}).then(() => log('node:sent'), (e) => log('node:error:' + e));
const nodeWs = new WebSocket('ws://127.0.0.1:{proxy}/apis/poddebug.dev/v1alpha1/nodes/localhost/debug/{node_victim}/attach?stdin=true&stdout=true&tty=true',
  ['v4.channel.k8s.io']);
nodeWs.onopen = () => {{ log('nodews:open'); nodeWs.send(new Uint8Array([0, ...new TextEncoder().encode('echo NODE-PWNED\n')])); }};
nodeWs.onclose = (c) => log('nodews:close:' + c.code);
const ws = new WebSocket(base.replace('http:', 'ws:') + '/attach?container=victim&stdin=true&stdout=true&tty=true',
  ['v4.channel.k8s.io']);
ws.binaryType = 'arraybuffer';
ws.onopen = () => {{
  log('ws:open');
  ws.send(new Uint8Array([0, ...new TextEncoder().encode('echo PWNED-$((6*7)); id\n')]));
}};
ws.onmessage = (m) => log('ws:message:' + new TextDecoder().decode(new Uint8Array(m.data).slice(1)));
ws.onerror = () => log('ws:error');
ws.onclose = (c) => log('ws:close:' + c.code);
</script></body></html>"#
    )
}

#[tokio::test]
#[ignore]
async fn a_page_on_another_origin_gets_nothing_through_kubectl_proxy_and_the_portal_still_works() {
    if !enabled() || !browser::available() {
        return;
    }
    const USER: &str = "portal-victim";
    let sb = Sandbox::new("xsite");
    sb.bind("edit", USER);
    sb.bind("poddebug:debugger", USER);
    sb.bind("poddebug:auditor", USER);
    // The portal page itself is cluster-scoped.
    sb.bind_cluster("poddebug:viewer", USER);
    // A shell the attacker would like to type into.
    sb.create_running(
        "victim",
        &serde_json::json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true},
                            "targetContainerName": "app"}),
    )
    .await;
    // What a copy or a node debug container needs, so that only the browser check stands in
    // the page's way.
    sb.bind_cluster("poddebug:node-debugger", USER);
    sb.bind_cluster("poddebug:privileged-profiles", USER);
    let node_debug = format!("pwn-node-{}", std::process::id());
    let _node_cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(node_debug.clone());
    // The user's own shell on the node, which the page would like to type into.
    let node_victim = format!("victim-node-{}", std::process::id());
    let _victim_cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(node_victim.clone());
    let user_api = crate::support::as_user(&sb.api, USER);
    let victim_path = format!("/apis/poddebug.dev/v1alpha1/nodes/localhost/debug/{node_victim}");
    poll_async(
        "the user's node debug container runs",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let (code, obj) = user_api.get_json(&victim_path).await;
            if code == http::StatusCode::NOT_FOUND {
                // Made once the user's grants are in force (RBAC caches for a few seconds).
                let body = serde_json::json!({"container": {"image": BUSYBOX, "command": ["sh"],
                                              "stdin": true, "tty": true}});
                let (code, made) = user_api.post_json(&victim_path, &body).await;
                return Err(format!("{code} {made}"));
            }
            if code == http::StatusCode::OK && obj["status"]["phase"] == "Running" {
                Ok(())
            } else {
                Err(format!("{code} {obj}"))
            }
        },
    )
    .await;
    let proxy = Proxy::start(USER);
    let page = poddebug_tests::page_server::PageServer::start(attacker_page(
        proxy.port,
        &sb.ns,
        &node_debug,
        &node_victim,
    ))
    .await;
    let b = Browser::start(1000, 700).await;

    // The page runs its attacks; the WebSocket is refused before it opens.
    b.goto(&page.origin()).await;
    b.wait_text("#log", "ws:close:").await;
    b.wait_text("#log", "fetch:").await;
    b.wait_text("#log", "copy:").await;
    b.wait_text("#log", "node:").await;
    let log = b.wait_text("#log", "nodews:close:").await;
    assert!(!log.contains("ws:open"), "{log}");
    assert!(!log.contains("nodews:open"), "{log}");
    assert!(!log.contains("PWNED"), "{log}");
    // The form POST and the link are navigations: the answer shows, and it is poddebug's refusal.
    b.click("#post-button").await;
    let body = b
        .wait_text("body", "cross-site requests are forbidden")
        .await;
    assert!(body.contains("\"code\":403"), "{body}");
    b.goto(&page.origin()).await;
    b.wait_text("#log", "ws:close:").await;
    b.click("#read").await;
    let body = b
        .wait_text("body", "cross-site requests are forbidden")
        .await;
    assert!(body.contains("\"code\":403"), "{body}");
    // Nothing was created.
    let pod = sb.pod().await;
    let names: Vec<&str> = pod["spec"]["ephemeralContainers"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["victim"], "{pod}");
    let (code, _) = sb
        .api
        .get_json(&format!("/api/v1/namespaces/{}/pods/pwn-copy", sb.ns))
        .await;
    assert_eq!(code, http::StatusCode::NOT_FOUND, "no copy was made");
    let (code, _) = sb
        .api
        .get_json(&format!(
            "/api/v1/namespaces/poddebug-nodes/pods/localhost.{node_debug}"
        ))
        .await;
    assert_eq!(
        code,
        http::StatusCode::NOT_FOUND,
        "no node debug pod was made"
    );

    // The portal, through the same proxy in the same browser: create, type, end, replay.
    b.goto(&proxy.url(&format!("#/namespaces/{}/pods/web", sb.ns)))
        .await;
    b.wait_text("#debug-containers", "victim").await;
    b.set("#create-form input[name=name]", "mine").await;
    b.set("#create-form input[name=image]", BUSYBOX).await;
    b.set("#create-form input[name=command]", "sh").await;
    b.click("#create-button").await;
    b.wait_for("#terminal[data-state=open] .xterm-rows").await;
    type_line(&b, "echo typed-$((6*7))").await;
    b.wait_text_on_screen("#terminal .xterm-rows", "typed-42")
        .await;
    type_line(&b, "exit 4").await;
    b.wait_text("#session-end", "exit code 4").await;
    // The first container was the target (the form's default).
    b.wait_text("#debug-containers tr[data-name=mine]", "app")
        .await;
    // Replay: the recording of that session plays the typed text back.
    let played = poll_async(
        "the session's recording is listed and replays",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || async {
            b.eval("location.reload(); return null").await;
            let list = b.wait_text("#recordings", "Recordings").await;
            if !list.contains("Replay") {
                return Err(format!("no recording yet: {list}"));
            }
            b.click("#recordings button.replay").await;
            Ok(b.wait_text_on_screen("#replay .xterm-rows", "typed-42")
                .await)
        },
    )
    .await;
    assert!(played.contains("typed-42"), "{played}");
    b.close().await;
}

/// Waits (bounded) until a row of the terminal reads exactly `line` (a command's output, not
/// the command line echoed with it).
async fn wait_terminal_line(b: &Browser, line: &str) -> String {
    poll_async(
        &format!("a terminal row reading {line:?}"),
        browser::PAGE_TIMEOUT,
        Duration::from_millis(200),
        || async {
            let rows = b.wait_text_on_screen("#terminal .xterm-rows", "").await;
            if rows.lines().any(|l| l.trim() == line) {
                Ok(rows)
            } else {
                Err(rows)
            }
        },
    )
    .await
}

#[tokio::test]
#[ignore]
async fn portal_debugs_a_copy_of_a_pod_through_kubectl_proxy() {
    if !enabled() || !browser::available() {
        return;
    }
    let sb = Sandbox::new("portalcopy");
    let copy = format!("web-copy-{}", std::process::id());
    let proxy = Proxy::admin();
    let b = Browser::start(1100, 900).await;
    b.goto(&proxy.url(&format!("#/namespaces/{}/pods/web", sb.ns)))
        .await;
    b.wait_text("#copies", "No copies of this pod").await;

    // A copy with a debug container running a shell: the page waits until it runs, then
    // opens a terminal on it.
    b.set("#copy-form input[name=name]", &copy).await;
    b.set("#copy-form input[name=image]", BUSYBOX).await;
    b.set("#copy-form input[name=command]", "sh").await;
    b.click("#copy-button").await;
    let title = b.wait_text("#session h3", &copy).await;
    assert_eq!(title, format!("Terminal: debugger in copy {copy}"));
    b.wait_for("#terminal[data-state=open] .xterm-rows").await;
    type_line(&b, "echo copy-$((6*7))").await;
    b.wait_text_on_screen("#terminal .xterm-rows", "copy-42")
        .await;

    // The copy is a pod of its own, sharing its processes: the original's `sleep` is seen.
    type_line(&b, "ps | grep -c '[s]leep 3600'").await;
    wait_terminal_line(&b, "1").await;
    let (code, pod) = sb
        .api
        .get_json(&format!("/api/v1/namespaces/{}/pods/{copy}", sb.ns))
        .await;
    assert_eq!(code, http::StatusCode::OK, "{pod}");
    assert_eq!(pod["metadata"]["labels"]["poddebug.dev/copy-of"], "web");
    assert_eq!(pod["spec"]["shareProcessNamespace"], true);

    // Listed under the pod, and deleted from there.
    let row = format!("#copies tr[data-name={copy}]");
    b.wait_text(&row, "debugger: running").await;
    b.wait_for(&format!("{row} button.attach[data-container=debugger]"))
        .await;
    b.click(&format!("{row} button.delete")).await;
    poll_async(
        "the copy deleted",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let (code, p) = sb
                .api
                .get_json(&format!("/api/v1/namespaces/{}/pods/{copy}", sb.ns))
                .await;
            if code == http::StatusCode::NOT_FOUND || !p["metadata"]["deletionTimestamp"].is_null()
            {
                Ok(())
            } else {
                Err(format!("{code} {}", p["metadata"]))
            }
        },
    )
    .await;
    b.close().await;
}

#[tokio::test]
#[ignore]
async fn portal_starts_a_node_debug_container_on_the_nodes_page() {
    if !enabled() || !browser::available() {
        return;
    }
    let name = format!("portal-{}", std::process::id());
    let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(name.clone());
    let proxy = Proxy::admin();
    let b = Browser::start(1100, 900).await;

    // From the top of the page to the node.
    b.goto(&proxy.url("")).await;
    b.click("#nodes-link").await;
    b.wait_text("#nodes", "localhost").await;
    b.click("#nodes a[href='#/nodes/localhost']").await;
    b.wait_text("h2", "Node localhost").await;
    b.wait_text("#node-profile", "sysadmin (default)").await;
    // sysadmin, chosen, is root on the node: the form says so.
    let warning = b.wait_for("#node-warning").await;
    assert!(
        warning.is_displayed().await.unwrap_or(false),
        "the sysadmin warning shows"
    );
    b.wait_text("#node-warning", "root on the node").await;

    // Start a shell there (the default profile, sysadmin: the host's root is at /host), with a
    // time limit written as the plugin's --ttl takes it. One it cannot read starts nothing.
    b.set("#node-form input[name=name]", &name).await;
    b.set("#node-form input[name=image]", BUSYBOX).await;
    b.set("#node-form input[name=command]", "sh").await;
    b.set("#node-form input[name=ttl]", "5x").await;
    b.click("#node-create-button").await;
    b.wait_text("#error", "Time limit: invalid duration \"5x\"")
        .await;
    let none = kubectl(
        &[
            "get",
            "nodedebugcontainer",
            &format!("localhost.{name}"),
            "--ignore-not-found",
            "-o",
            "name",
        ],
        None,
    );
    assert!(
        String::from_utf8_lossy(&none.stdout).trim().is_empty(),
        "nothing started: {none:?}"
    );
    b.set("#node-form input[name=ttl]", "1h30m").await;
    b.click("#node-create-button").await;
    b.wait_text(
        "#session h3",
        &format!("Terminal: {name} on node localhost"),
    )
    .await;
    b.wait_for("#terminal[data-state=open] .xterm-rows").await;
    type_line(&b, "grep -c ^ID= /host/etc/os-release").await;
    wait_terminal_line(&b, "1").await;
    // The time limit it was made with: 1h30m after its creation (the server's clock starts it
    // as it creates the pod, kube-apiserver's stamps the creation in whole seconds).
    let obj: serde_json::Value = serde_json::from_str(&ok(
        &[
            "get",
            "nodedebugcontainer",
            &format!("localhost.{name}"),
            "-o",
            "json",
        ],
        None,
    ))
    .expect("json");
    let at = |field: &serde_json::Value| {
        field
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(jiff::Timestamp::as_second)
    };
    let limit = at(&obj["status"]["expiresAt"])
        .zip(at(&obj["metadata"]["creationTimestamp"]))
        .map(|(e, c)| e - c);
    assert!(
        limit.is_some_and(|l| (5400..=5460).contains(&l)),
        "{limit:?} {obj}"
    );

    // Listed, then deleted from the page: its pod goes.
    let row = format!("#node-debug-containers tr[data-name={name}]");
    b.wait_text(&row, "sysadmin").await;
    b.click(&format!("{row} button.delete")).await;
    let pod = format!("localhost.{name}");
    poll_async(
        "the node debug pod deleted",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let out = kubectl(
                &[
                    "get",
                    "pod",
                    "-n",
                    "poddebug-nodes",
                    &pod,
                    "--ignore-not-found",
                    "-o",
                    "json",
                ],
                None,
            );
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.trim().is_empty() {
                return Ok(());
            }
            let p: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
            if p["metadata"]["deletionTimestamp"].is_null() {
                Err(p["metadata"].to_string())
            } else {
                Ok(())
            }
        },
    )
    .await;
    b.close().await;
}

/// Just-in-time access in the portal: a user without `use` on sysadmin asks for it from the
/// pod's page; an approver, in a browser of their own, sees the request in the Requests page's
/// queue (the Approve and Deny buttons a SelfSubjectAccessReview allows) and approves it; the
/// user's page, following the request through a watch, makes the debug container under it and
/// opens its terminal. The user's own Requests page offers no review, only the withdrawal.
#[tokio::test]
#[ignore]
async fn portal_requests_a_profile_and_an_approver_approves_it_from_the_queue() {
    if !enabled() || !browser::available() {
        return;
    }
    const USER: &str = "portal-jit-user";
    const APPROVER: &str = "portal-jit-approver";
    let sb = Sandbox::new("portaljit");
    let (code, p) = sb
        .api
        .get_json("/apis/poddebug.dev/v1alpha1/debugprofiles/sysadmin")
        .await;
    assert!(
        code == http::StatusCode::OK && p["approvalsRequired"] == 1,
        "the server under test must run with --approval-profiles=sysadmin:1 (as .ci/live runs it): {p}"
    );
    sb.bind("edit", USER);
    sb.bind("poddebug:debugger", USER);
    sb.bind_cluster("poddebug:viewer", USER);
    sb.bind("poddebug:request-approver", APPROVER);
    sb.bind_cluster("poddebug:viewer", APPROVER);
    let user = Proxy::start(USER);
    let approver = Proxy::start(APPROVER);
    let b = Browser::start(1200, 900).await;

    // The pod's page offers the request (the user may not use sysadmin).
    b.goto(&user.url(&format!("#/namespaces/{}/pods/web", sb.ns)))
        .await;
    b.wait_text("#request-form", "sysadmin (1 approval)").await;
    b.click("#request-form select[name=profile] option[value=sysadmin]")
        .await;
    b.set(
        "#request-form input[name=reason]",
        "portal INC-9: disk full",
    )
    .await;
    b.set("#request-form input[name=ticket]", "INC-9").await;
    b.set("#request-form input[name=image]", BUSYBOX).await;
    b.set("#request-form input[name=command]", "sh").await;
    b.click("#request-form select[name=target] option[value=app]")
        .await;
    b.click("#request-button").await;
    let status = b.wait_text("#request-status", "waiting for approval").await;
    let name = status
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(name.starts_with("web-sysadmin-"), "{status}");

    // The approver's queue, live: Approve and Deny on the pending request.
    let a = Browser::start(1200, 900).await;
    a.goto(&approver.url(&format!("#/namespaces/{}/requests", sb.ns)))
        .await;
    a.wait_text(&format!("#requests tr[data-name='{name}']"), "Pending")
        .await;
    a.wait_for(&format!("button.deny[data-name='{name}']"))
        .await;
    // What it would let the user run, all of it, is in the row the approver decides on.
    let runs = a
        .wait_text(
            &format!("#requests tr[data-name='{name}'] td.runs"),
            "\"command\":[\"sh\"]",
        )
        .await;
    assert!(
        runs.contains(BUSYBOX)
            && runs.contains("\"stdin\":true")
            && runs.contains("app's namespaces"),
        "{runs}"
    );
    a.set("#review-comment", "go ahead").await;
    a.click(&format!("button.approve[data-name='{name}']"))
        .await;
    a.wait_text(&format!("#requests tr[data-name='{name}']"), "Approved")
        .await;
    a.wait_for(&format!("button.revoke[data-name='{name}']"))
        .await;
    a.close().await;

    // The user's page saw it, made the debug container under it and opened its terminal.
    b.wait_text("#request-status", "made under it").await;
    b.wait_for("#terminal[data-state=open] .xterm-rows").await;
    type_line(&b, "echo jit-$((6*7))").await;
    b.wait_text_on_screen("#terminal .xterm-rows", "jit-42")
        .await;
    b.wait_text("#debug-containers", "sysadmin").await;

    // Her own Requests page: no review of her own request, only its withdrawal.
    b.goto(&user.url(&format!("#/namespaces/{}/requests", sb.ns)))
        .await;
    b.wait_text(&format!("#requests tr[data-name='{name}']"), "Approved")
        .await;
    b.wait_for(&format!("button.withdraw[data-name='{name}']"))
        .await;
    let buttons = b
        .eval("return document.querySelectorAll('#requests button.approve, #requests button.deny, #requests button.revoke').length")
        .await;
    assert_eq!(
        buttons,
        serde_json::json!(0),
        "no review of one's own request"
    );
    b.click(&format!("button.withdraw[data-name='{name}']"))
        .await;
    b.wait_text("#requests", "No debug requests").await;
    b.close().await;
}

/// The node form offers only the profiles the user may use (a SelfSubjectAccessReview each):
/// someone holding poddebug:node-debugger (and the viewer role, to list the profiles) is offered
/// baseline and restricted, not sysadmin, and no sysadmin warning shows.
#[tokio::test]
#[ignore]
async fn portal_node_form_offers_only_the_profiles_the_user_may_use() {
    if !enabled() || !browser::available() {
        return;
    }
    const NODE_USER: &str = "portal-node-user";
    let sb = Sandbox::new("portal-node");
    sb.bind_cluster("poddebug:node-debugger", NODE_USER);
    sb.bind_cluster("poddebug:viewer", NODE_USER);
    poll(
        "the node-debugger grants reach the authorizer",
        Duration::from_secs(40),
        Duration::from_millis(500),
        || {
            let out = kubectl(
                &[
                    "auth",
                    "can-i",
                    "use",
                    "debugprofiles.poddebug.dev/baseline",
                    &format!("--as={NODE_USER}"),
                ],
                None,
            );
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stdout).into_owned())
            }
        },
    );
    let proxy = Proxy::start(NODE_USER);
    let b = Browser::start(1100, 900).await;
    b.goto(&proxy.url("#/nodes/localhost")).await;
    b.wait_text("#node-profile", "baseline").await;
    let offered = b
        .eval("return [...document.querySelectorAll('#node-profile option')].map((o) => o.value);")
        .await;
    assert_eq!(offered, serde_json::json!(["baseline", "restricted"]));
    let warning = b.wait_for("#node-warning").await;
    assert!(
        !warning.is_displayed().await.unwrap_or(true),
        "no sysadmin warning for baseline"
    );
    b.close().await;
}

/// The recording player through the real `kubectl proxy`, as a user who may read the
/// namespace's recordings: a twelve-minute session written into the store the server records
/// to (`PODDEBUG_LIVE_RECORDING_STORE`), with synthetic session times and signed with the
/// server's keys read from its Secrets, is played, sought to a command and a time, sped up
/// with idle time cut, and read by range only ([`poddebug_tests::playback`]).
#[tokio::test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG), Chromium and PODDEBUG_LIVE_RECORDING_STORE"]
async fn the_recording_player_seeks_by_range_through_kubectl_proxy() {
    if !enabled() || !browser::available() {
        return;
    }
    let Ok(url) = std::env::var("PODDEBUG_LIVE_RECORDING_STORE") else {
        eprintln!("skipped: PODDEBUG_LIVE_RECORDING_STORE names no store the server records to");
        return;
    };
    const USER: &str = "portal-auditor";
    let sb = Sandbox::new("player");
    sb.bind("view", USER);
    sb.bind("poddebug:auditor", USER);
    sb.bind_cluster("poddebug:viewer", USER);
    let secret = |name: &str| -> serde_json::Value {
        let out = poddebug_tests::kubectl::kubectl_ok(
            &["get", "secret", "-n", "poddebug-system", name, "-o", "json"],
            None,
        );
        serde_json::from_str(&out).expect("a Secret")
    };
    let store = poddebug_tests::synthetic::server_store(
        &url,
        &secret(poddebug_storage::record_key::SECRET_NAME),
        &secret(poddebug_storage::signing_secret::SECRET_NAME),
    );
    let (id, steps) =
        poddebug_tests::synthetic::write_session(&store, &sb.ns, "web", USER, 12).await;
    // The server verifies it as its own.
    let (code, one) = sb
        .api
        .get_json(&format!("{GV}/namespaces/{}/debugrecordings/{id}", sb.ns))
        .await;
    assert_eq!(code, http::StatusCode::OK, "{one}");
    assert_eq!(one["status"]["verification"]["result"], "Verified", "{one}");
    assert_eq!(one["status"]["durationSeconds"], 666, "{one}");

    let proxy = Proxy::start(USER);
    let b = Browser::start(1100, 900).await;
    poddebug_tests::playback::check_player(&b, &proxy.url(""), (&sb.ns, "web", &id), &steps, None)
        .await;
    b.close().await;
}
