//! The portal in a real browser (headless Chromium through chromedriver) against the real
//! `poddebug-apiserver` and the fake kube-apiserver, reached the way a user reaches it: through a
//! stand-in for `kubectl proxy` that sends every request on with that user's credentials
//! (`UserProxy`). Skipped without Chromium and chromedriver, except in CI.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first. With `PODDEBUG_SCREENSHOT_DIR`
//! set, the main test saves `portal.png` there (the user guide's screenshot).

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use common::{Env, NS, POD, env_with};
use poddebug_tests::browser::{self, Browser};
use poddebug_tests::fake::{
    ATTACH_EXIT_CODE_ANNOTATION, ATTACH_EXIT_TERMINATES_ANNOTATION, ATTACH_SHARED_ANNOTATION,
};
use poddebug_tests::{FakeKube, UserProxy};
use serde_json::json;

const PORTAL: &str = "/apis/poddebug.dev/v1alpha1/portal/";

/// Who may do what: alice everything but the gated profiles, bob nothing but open the portal,
/// carol not even that.
fn policy(fake: &FakeKube) {
    fake.set_policy(|a| match a.user.as_str() {
        "alice" => !(a.verb == "use" && matches!(a.name.as_str(), "sysadmin" | "netadmin")),
        "bob" => {
            a.resource == "portal"
                || a.is("create", "selfsubjectaccessreviews")
                || a.is("create", "selfsubjectreviews")
        }
        "carol" => a.resource != "portal",
        _ => true,
    });
}

/// The text of the terminal's rows.
async fn terminal_text(b: &Browser) -> String {
    b.wait_text_on_screen("#terminal .xterm-rows", "").await
}

/// Waits (bounded) until the terminal shows `needle`.
async fn wait_terminal(b: &Browser, needle: &str) -> String {
    b.wait_text_on_screen("#terminal .xterm-rows", needle).await
}

/// Adds the debug container `shell`, an interactive `sh`, and waits until it runs.
async fn create_shell(e: &Env) {
    e.create_running(
        "shell",
        &json!({"container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true}}),
    )
    .await;
}

/// alice opens the pod's page through her proxy and clicks Terminal on `shell`.
async fn alice_attaches_to_the_shell(e: &Env) -> (UserProxy, Browser) {
    let proxy = UserProxy::start(&e.fake, &e.server, "alice", &["system:authenticated"]).await;
    let b = terminal_on_the_shell(&proxy.url()).await;
    (proxy, b)
}

/// A browser on the pod's page of the portal served under `base`, Terminal clicked on `shell`.
async fn terminal_on_the_shell(base: &str) -> Browser {
    let b = Browser::start(1100, 800).await;
    b.goto(&format!("{base}{PORTAL}#/namespaces/{NS}/pods/{POD}"))
        .await;
    b.click("button.attach[data-name=shell]").await;
    b
}

#[tokio::test]
async fn a_user_lists_creates_types_resizes_and_stops_from_the_browser() {
    if !browser::available() {
        return;
    }
    let e = env_with(&[], |f| {
        policy(f);
        f.add_namespace("other", &[]);
    })
    .await;
    // The attached "process" of the fake exits 3 at the end of input.
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"] = json!({ATTACH_EXIT_CODE_ANNOTATION: "3"});
    });
    let proxy = UserProxy::start(&e.fake, &e.server, "alice", &["system:authenticated"]).await;
    let b = Browser::start(1100, 800).await;

    // Load: the namespaces alice may list, then her pods.
    b.goto(&format!("{}{PORTAL}", proxy.url())).await;
    b.wait_text("#namespaces", "other").await;
    b.click(&format!("#namespaces a[href='#/namespaces/{NS}']"))
        .await;
    b.wait_text("#pods", POD).await;
    b.click(&format!("#pods a[href='#/namespaces/{NS}/pods/{POD}']"))
        .await;
    b.wait_text("#debug-containers", "No debug containers yet")
        .await;

    // Only the profiles she may use are offered (SelfSubjectAccessReview per gated profile).
    let profiles = b.wait_text("#profile", "general").await;
    assert!(profiles.contains("restricted"), "{profiles}");
    assert!(!profiles.contains("sysadmin"), "{profiles}");
    assert!(!profiles.contains("netadmin"), "{profiles}");

    // Create: name, image, target, command, TTY.
    b.set("#create-form input[name=name]", "dbg").await;
    b.set("#create-form input[name=image]", "busybox:1.36")
        .await;
    b.set("#create-form input[name=command]", "sh").await;
    b.click("#create-form select[name=target] option[value=app]")
        .await;
    b.click("#create-button").await;

    // The terminal opens on the new container; it sent its size first.
    let first = wait_terminal(&b, "resize ").await;
    let row = b
        .wait_text("#debug-containers tr[data-name=dbg]", "Running")
        .await;
    assert!(row.contains("busybox:1.36"), "{row}");
    // The profile the server applied (its default) is recorded and shown as such.
    assert!(
        row.contains("general") && !row.contains("(default)"),
        "the server's default profile, as recorded: {row}"
    );
    let ec = common::ec_of(&e.fake, POD, "dbg");
    assert_eq!(ec["command"], json!(["sh"]), "{ec}");
    assert_eq!(ec["targetContainerName"], "app", "{ec}");
    assert_eq!(ec["tty"], true, "{ec}");

    // Type into the terminal: the fake's process echoes stdin.
    let input = b.wait_for("#terminal textarea").await;
    input
        .send_keys("hello-from-the-browser")
        .await
        .expect("type");
    wait_terminal(&b, "hello-from-the-browser").await;

    // Resize: the window shrinks, the terminal refits, and the new size reaches the process.
    let resizes_before = first.matches("resize ").count();
    b.resize(700, 600).await;
    // xterm renders only while it is on screen: bring it back into view.
    b.eval("document.getElementById('terminal').scrollIntoView(); return null")
        .await;
    let deadline = tokio::time::Instant::now() + browser::PAGE_TIMEOUT;
    loop {
        let t = terminal_text(&b).await;
        if t.matches("resize ").count() > resizes_before {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no new size reached the process:\n{t}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    b.resize(1100, 1000).await;

    if let Some(dir) = std::env::var_os("PODDEBUG_SCREENSHOT_DIR") {
        b.eval("window.scrollTo(0, 0); return null").await;
        wait_terminal(&b, "resize 1").await;
        let png = b.screenshot().await;
        std::fs::write(std::path::Path::new(&dir).join("portal.png"), png)
            .expect("write the screenshot");
    }

    // End of input (Ctrl-D): the end-of-session line carries the exit code.
    input.send_keys("\u{E009}d\u{E000}").await.expect("Ctrl-D");
    let end = b.wait_text("#session-end", "exit code").await;
    assert_eq!(end, "Session ended: exit code 3");

    // Logs of the container.
    b.click("button.logs[data-name=dbg]").await;
    b.wait_for("#logs").await;

    // Stop: the row turns Terminated.
    b.click("button.stop[data-name=dbg]").await;
    b.wait_text("#debug-containers tr[data-name=dbg]", "Terminated")
        .await;
    let err = b
        .eval("return document.getElementById('error').hidden")
        .await;
    assert_eq!(err, json!(true), "{}", b.body_text().await);

    // A deep link opens the pod directly.
    b.goto(&format!(
        "{}{PORTAL}#/namespaces/{NS}/pods/{POD}",
        proxy.url()
    ))
    .await;
    b.wait_text("#debug-containers", "dbg").await;

    // The page's own calls to kube-apiserver were made as alice (through the proxy): the
    // namespace and pod lists, and the SelfSubjectAccessReviews for the gated profiles.
    let requests = e.fake.requests();
    for path in [
        "/api/v1/namespaces".to_owned(),
        format!("/api/v1/namespaces/{NS}/pods"),
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".to_owned(),
    ] {
        assert!(
            requests.iter().any(|r| r.path == path && r.user == "alice"),
            "no {path} as alice: {requests:?}"
        );
    }
    b.close().await;
}

#[tokio::test]
async fn users_without_rights_see_the_refusal() {
    if !browser::available() {
        return;
    }
    let e = env_with(&[], policy).await;
    let b = Browser::start(1000, 700).await;

    // carol may not open the portal: the Status of the refusal is what she sees.
    let carol = UserProxy::start(&e.fake, &e.server, "carol", &["system:authenticated"]).await;
    b.goto(&format!("{}{PORTAL}", carol.url())).await;
    let page = b
        .wait_text("body", "portal.poddebug.dev is forbidden")
        .await;
    assert!(page.contains("\"reason\":\"Forbidden\""), "{page}");
    assert!(page.contains("carol"), "{page}");

    // bob may open it but nothing else: each view says why, with the server's message.
    let bob = UserProxy::start(&e.fake, &e.server, "bob", &["system:authenticated"]).await;
    b.goto(&format!("{}{PORTAL}", bob.url())).await;
    b.wait_text("#namespaces", "cannot list resource \"namespaces\"")
        .await;
    b.goto(&format!("{}{PORTAL}#/namespaces/{NS}", bob.url()))
        .await;
    b.wait_text("#error", "cannot list resource \"pods\"").await;
    b.goto(&format!(
        "{}{PORTAL}#/namespaces/{NS}/pods/{POD}",
        bob.url()
    ))
    .await;
    let msg = b.wait_text("#error", "forbidden").await;
    assert!(msg.contains("bob"), "{msg}");
    b.close().await;
}

#[tokio::test]
async fn the_end_of_session_line_reads_the_exit_code_from_the_container() {
    if !browser::available() {
        return;
    }
    let e = env_with(&[], policy).await;
    // As containerd: the attach stream says Success, the container's status has the code.
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"] = json!({
            ATTACH_EXIT_CODE_ANNOTATION: "7",
            ATTACH_EXIT_TERMINATES_ANNOTATION: "true",
        });
    });
    create_shell(&e).await;
    let (_proxy, b) = alice_attaches_to_the_shell(&e).await;
    wait_terminal(&b, "resize ").await;
    b.fill("#terminal textarea", "\u{E009}d\u{E000}").await;
    let end = b.wait_text("#session-end", "exit code 7").await;
    assert_eq!(end, "Session ended: exit code 7");
    b.wait_text(
        "#debug-containers tr[data-name=shell]",
        "Terminated (exit 7",
    )
    .await;
    b.close().await;
}

/// Installed in the page: the answer to the next `GET` of the pod's debug-container list is held
/// back (read whole, then kept) until the test calls `window.heldList.release()`, as a slow
/// connection would deliver it after a later read's. `heldList.state` goes `armed`, `holding`
/// (the request was answered and is kept), `delivered`, then `handled` once the page has done
/// what it does with it: a task queued when the page parsed it, so it runs after the
/// microtasks that follow the parse (the page's own code on the answer) have run.
const HOLD_NEXT_LIST_ANSWER: &str = r#"
const held = { state: 'armed', release: null };
window.heldList = held;
const send = window.fetch;
window.fetch = async (url, init) => {
  const list = /\/pods\/[^/?]+\/debug$/.test(String(url)) && (!init || !init.method || init.method === 'GET');
  if (!list || held.state !== 'armed') return send(url, init);
  held.state = 'sending';
  const resp = await send(url, init);
  const body = await resp.text();
  await new Promise((release) => { held.release = release; held.state = 'holding'; });
  const answer = new Response(body, { status: resp.status, headers: resp.headers });
  const parse = answer.json.bind(answer);
  answer.json = async () => {
    const value = await parse();
    setTimeout(() => { held.state = 'handled'; }, 0);
    return value;
  };
  held.state = 'delivered';
  return answer;
};
return null;
"#;

/// Two reads of the list overlap: the one at a session's end, then the stop's own. The older
/// answer arrives last (held back in the page); it must not put the stopped container back as
/// running, with a Stop button that no later read would ever take away.
#[tokio::test]
async fn an_older_answer_does_not_put_a_stopped_container_back() {
    if !browser::available() {
        return;
    }
    let e = env_with(&[], policy).await;
    e.create_running(
        "shell",
        &json!({"targetContainerName": "app", "container": {"image": "busybox:1.36", "command": ["sh"], "stdin": true, "tty": true}}),
    )
    .await;
    let (_proxy, b) = alice_attaches_to_the_shell(&e).await;
    wait_terminal(&b, "resize ").await;
    b.eval(HOLD_NEXT_LIST_ANSWER).await;
    // Ctrl-D: the session ends and the page reads the list again; that answer is held.
    b.fill("#terminal textarea", "\u{E009}d\u{E000}").await;
    b.wait_text("#session-end", "Session ended").await;
    b.wait_until(
        "return window.heldList.state === 'holding'",
        "the list read at the session's end",
    )
    .await;
    // Stop: its own read shows the container terminated.
    b.click("button.stop[data-name=shell]").await;
    b.wait_text("#debug-containers tr[data-name=shell]", "Terminated")
        .await;
    // Now the older answer (the container running) arrives, and the page handles it.
    b.eval("window.heldList.release(); return null").await;
    b.wait_until(
        "return window.heldList.state === 'handled'",
        "the older answer handled",
    )
    .await;
    let row = b
        .wait_text("#debug-containers tr[data-name=shell]", "")
        .await;
    assert!(
        row.contains("Terminated") && !row.contains("Stop"),
        "the older answer put the container back: {row}"
    );
    assert_eq!(
        e.fake.container_state(NS, POD, "shell"),
        Some("terminated"),
        "the stop ended the container"
    );
    b.close().await;
}

#[tokio::test]
async fn keys_typed_while_the_terminal_connects_reach_the_process_in_order() {
    if !browser::available() {
        return;
    }
    let e = env_with(&[], policy).await;
    create_shell(&e).await;
    // A slow attach: the user types before the WebSocket is open.
    e.fake.delay_requests(
        http::Method::GET,
        "/attach",
        std::time::Duration::from_secs(2),
    );
    let (_proxy, b) = alice_attaches_to_the_shell(&e).await;
    b.wait_for("#terminal[data-state=connecting] textarea")
        .await;
    b.fill("#terminal textarea", "typed-ahead-1 typed-ahead-2")
        .await;
    let text = wait_terminal(&b, "typed-ahead-1 typed-ahead-2").await;
    // The size went first, then every key in the order typed.
    let resize = text.find("resize ").expect("the size reached the process");
    let typed = text.find("typed-ahead-1").expect("typed text");
    assert!(resize < typed, "{text}");
    assert_eq!(
        b.eval("return document.getElementById('terminal').dataset.state")
            .await,
        json!("open")
    );
    b.close().await;
}

/// Without a browser: what the server answers on the portal's paths, and what it authorizes.
#[tokio::test]
async fn the_portal_is_served_to_whoever_may_list_it_with_a_strict_policy() {
    use http::{Method, StatusCode};
    let e = env_with(&[], policy).await;
    let get = |c: &poddebug_tests::TestClient, path: &str, headers: Vec<(&'static str, String)>| {
        let c = c.clone();
        let path = format!("/apis/poddebug.dev/v1alpha1/{path}");
        async move {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            c.request(Method::GET, &path, &h, bytes::Bytes::new())
                .await
                .expect("request")
        }
    };

    // The page: `list` on portal, as kube-apiserver's RequestInfo derives it.
    e.fake.clear_sars();
    let (code, h, body) = get(&e.alice, "portal/", vec![]).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert_eq!(h["x-content-type-options"], "nosniff");
    let csp = h["content-security-policy"].to_str().expect("CSP");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert!(String::from_utf8_lossy(&body).contains("portal.js"));
    let asked: Vec<(String, String, String)> = e
        .fake
        .sars()
        .into_iter()
        .map(|s| {
            (
                s.attributes.verb,
                s.attributes.resource,
                s.attributes.api_group,
            )
        })
        .collect();
    assert!(
        asked.contains(&("list".into(), "portal".into(), "poddebug.dev".into())),
        "{asked:?}"
    );

    // A file: `get` on portal with the file as name; revalidation answers 304.
    e.fake.clear_sars();
    let (code, h, _) = get(&e.alice, "portal/portal.js", vec![]).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(h["content-type"], "text/javascript; charset=utf-8");
    let sar = e.fake.sars().pop().expect("a SubjectAccessReview");
    assert_eq!(
        (sar.attributes.verb.as_str(), sar.attributes.name.as_str()),
        ("get", "portal.js")
    );
    let etag = h["etag"].to_str().expect("ETag").to_owned();
    let (code, _, body) = get(&e.alice, "portal/portal.js", vec![("if-none-match", etag)]).await;
    assert_eq!(code, StatusCode::NOT_MODIFIED);
    assert!(body.is_empty());

    // Without the slash: a relative redirect. An unknown file: a 404 Status.
    let (code, h, _) = get(&e.alice, "portal", vec![]).await;
    assert_eq!(code, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(h["location"], "portal/");
    let (code, _, body) = get(&e.alice, "portal/nothing.js", vec![]).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");

    // carol may not: a 403 Status naming the resource and verb.
    let carol = e
        .server
        .front_proxy_client("carol", &["system:authenticated"]);
    let (code, _, body) = get(&carol, "portal/", vec![]).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(
        status["message"],
        "portal.poddebug.dev is forbidden: User \"carol\" cannot list resource \"portal\" in API group \"poddebug.dev\" at the cluster scope"
    );
}

#[tokio::test]
async fn the_portal_works_under_a_proxy_prefix() {
    if !browser::available() {
        return;
    }
    let e = env_with(&[], policy).await;
    create_shell(&e).await;
    // As `kubectl proxy --api-prefix=/k8s/`: the page computes every path from its own URL.
    let proxy = UserProxy::start_with_prefix(
        &e.fake,
        &e.server,
        "alice",
        &["system:authenticated"],
        "/k8s/",
    )
    .await;
    let b = terminal_on_the_shell(&format!("{}/k8s", proxy.url())).await;
    b.fill("#terminal textarea", "under-a-prefix").await;
    wait_terminal(&b, "under-a-prefix").await;
    b.click("#crumbs a:nth-of-type(2)").await;
    b.wait_text("#pods", POD).await;
    b.close().await;
}

#[tokio::test]
async fn a_second_user_sees_the_live_session_observes_it_and_terminates_it() {
    if !browser::available() {
        return;
    }
    // dave may do everything but join (type into) another user's session or moderate one.
    let e = env_with(&[], |f| {
        f.set_policy(|a| match a.user.as_str() {
            "dave" => !(a.is("join", "pods/debug") || a.is("moderate", "pods/sessions")),
            _ => true,
        });
    })
    .await;
    // Streams attached to one container share its output, as the kubelet's do.
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"] = json!({ATTACH_SHARED_ANNOTATION: "true"});
    });
    create_shell(&e).await;
    let (_alice_proxy, alice) = alice_attaches_to_the_shell(&e).await;
    wait_terminal(&alice, "resize ").await;

    // dave opens the pod: alice's session is listed with what he may do to it.
    let dave_proxy = UserProxy::start(&e.fake, &e.server, "dave", &["system:authenticated"]).await;
    let dave = Browser::start(1100, 800).await;
    dave.goto(&format!(
        "{}{PORTAL}#/namespaces/{NS}/pods/{POD}",
        dave_proxy.url()
    ))
    .await;
    let row = dave
        .wait_text("#live-sessions tr[data-user=alice]", "owner")
        .await;
    assert!(row.contains("shell"), "{row}");
    let buttons = dave
        .eval(
            "return Array.from(document.querySelectorAll('#live-sessions tr[data-user=alice] button'))\
             .map((b) => b.className)",
        )
        .await;
    assert_eq!(
        buttons,
        json!(["observe", "terminate"]),
        "dave may observe and terminate, not join or moderate"
    );

    // He observes: alice's typing shows on his screen; what he types goes nowhere.
    dave.click("#live-sessions tr[data-user=alice] button.observe")
        .await;
    dave.wait_for("#terminal[data-mode=observer]").await;
    dave.wait_text("#live-sessions", "observer").await;
    let mine = dave.wait_for("#terminal textarea").await;
    mine.send_keys("from-the-observer").await.expect("type");
    let typed = alice.wait_for("#terminal textarea").await;
    typed.send_keys("typed-by-alice").await.expect("type");
    dave.wait_text_on_screen("#terminal .xterm-rows", "typed-by-alice")
        .await;
    let seen = wait_terminal(&alice, "typed-by-alice").await;
    assert!(!seen.contains("from-the-observer"), "{seen}");

    // He terminates her session: her terminal says who ended it.
    dave.click("#live-sessions tr[data-user=alice] button.terminate")
        .await;
    let end = alice.wait_text("#session-end", "terminated").await;
    assert!(end.contains("session terminated by dave"), "{end}");
    let err = dave
        .eval("return document.getElementById('error').hidden")
        .await;
    assert_eq!(err, json!(true), "{}", dave.body_text().await);
    dave.close().await;
    alice.close().await;
}
