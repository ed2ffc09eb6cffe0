//! The portal in headless Chromium through the real `kubectl proxy` (on a non-default port,
//! as `alice` by `--as`): load, create, a real shell in the terminal, resize, exit code, stop;
//! and a user without the `portal` grant sees kube-apiserver's refusal.
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
        let port = poddebug_tests::server::free_port();
        let log = std::env::temp_dir().join(format!("poddebug-live-kubectl-proxy-{port}.log"));
        let file = std::fs::File::create(&log).expect("the kubectl proxy log");
        let child = Command::new("kubectl")
            .args([
                "proxy",
                "-v=4",
                &format!("--port={port}"),
                &format!("--as={user}"),
                "--as-group=system:authenticated",
            ])
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
    // edit for the core pod reads the portal makes; poddebug-debugger is bound on its own (it is
    // not aggregated into edit).
    sb.bind("edit", PORTAL_USER);
    sb.bind("poddebug-debugger", PORTAL_USER);
    sb.bind_cluster("poddebug-viewer", PORTAL_USER);
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
    b.wait_text("#terminal .xterm-rows", "portal-42").await;

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
    b.wait_text("#terminal .xterm-rows", &size).await;

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
