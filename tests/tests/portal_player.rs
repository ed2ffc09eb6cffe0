//! The portal's recording player in a real browser (headless Chromium through chromedriver),
//! through a stand-in for `kubectl proxy`, against the real server and the fake
//! kube-apiserver, on a twelve-minute recording written into the server's store with
//! synthetic session times: jumping to a command shows the screen at that time, the scrubber
//! seeks, pause and resume, speed and skip-idle carry playback to the end, an address with
//! `?t=` opens the recording at that time; and every read of the recording is a range, never
//! the whole recording (the browser's own record of its fetches). Skipped without Chromium and
//! chromedriver, except in CI.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first. With `PODDEBUG_SCREENSHOT_DIR`
//! set, it saves `player.png` there (the user guide's screenshot).

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use std::time::Duration;

use common::{NS, POD, env_with};
use poddebug_tests::browser::{self, Browser};
use poddebug_tests::synthetic::{fake_server_store, write_session};
use poddebug_tests::{TempDir, UserProxy};
use serde_json::Value;

const PORTAL: &str = "/apis/poddebug.dev/v1alpha1/portal/";
/// Bound of every wait here (a guard against hanging, never a measured time).
const GUARD: Duration = Duration::from_secs(60);
const SCREEN: &str = "#replay .xterm-rows";

/// Waits (bounded) until `script` (an expression) is true in the page.
async fn wait_js(b: &Browser, script: &str) {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        if b.eval(&format!("return !!({script})")).await == Value::Bool(true) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not {script} within {GUARD:?}; player: {}\npage:\n{}",
            b.eval("const p = document.querySelector('#player'); return p ? JSON.stringify(p.dataset) : null").await,
            b.body_text().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn player(b: &Browser, key: &str) -> Value {
    b.eval(&format!(
        "const p = document.querySelector('#player'); return p ? p.dataset.{key} || null : null"
    ))
    .await
}

/// Every URL the page fetched of the recording (not its commands), in order.
async fn recording_fetches(b: &Browser, id: &str) -> Vec<String> {
    let v = b
        .eval(&format!(
            "return performance.getEntriesByType('resource').map((e) => e.name)\
             .filter((n) => n.includes('/recordings/{id}') && !n.includes('/commands'))"
        ))
        .await;
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets the select `css` to `value` as a user picking it does.
async fn choose(b: &Browser, css: &str, value: &str) {
    b.eval(&format!(
        "const s = document.querySelector('{css}'); s.value = '{value}'; \
         s.dispatchEvent(new Event('change')); return null"
    ))
    .await;
}

#[tokio::test]
async fn the_player_seeks_by_range_to_commands_and_times_and_plays_fast() {
    if !browser::available() {
        return;
    }
    let dir = TempDir::new("player");
    let flag = format!("--recording-dir={}", dir.path().display());
    let e = env_with(&[flag.as_str()], |f| f.allow_all()).await;
    let store = fake_server_store(&e.fake, dir.path()).await;
    let (id, steps) = write_session(&store, NS, POD, "alice", 12).await;
    let proxy = UserProxy::start(&e.fake, &e.server, "alice", &["system:authenticated"]).await;
    let b = Browser::start(1100, 900).await;
    b.goto(&format!(
        "{}{PORTAL}#/namespaces/{NS}/pods/{POD}",
        proxy.url()
    ))
    .await;
    b.click(&format!("#recordings button.replay[data-id='{id}']"))
        .await;
    b.wait_text(SCREEN, "echo step-0").await;
    wait_js(&b, "document.querySelector('#player-commands')").await;

    // Jump to the eighth command: the screen as it was then (the command typed, minute 7's
    // part only), paused there.
    b.click("#player-play").await;
    wait_js(
        &b,
        "document.querySelector('#player').dataset.state === 'paused'",
    )
    .await;
    let at = steps[7].at;
    b.click(&format!("#player-commands button[data-offset='{at}']"))
        .await;
    wait_js(
        &b,
        &format!("document.querySelector('#player').dataset.seeked === '{at:.3}'"),
    )
    .await;
    let screen = b.wait_text(SCREEN, "$ echo step-7").await;
    assert!(!screen.contains("step-6"), "{screen}");
    assert_eq!(player(&b, "state").await, "paused");
    let fetches = recording_fetches(&b, &id).await;
    assert!(
        fetches
            .last()
            .is_some_and(|u| u.ends_with(&format!("?start={at}&end={}", at + 120.0))),
        "the seek fetched a window from the command: {fetches:?}"
    );
    if let Some(dir) = std::env::var_os("PODDEBUG_SCREENSHOT_DIR") {
        b.eval(
            "window.scrollTo(0, document.querySelector('#session').offsetTop - 10); return null",
        )
        .await;
        let png = b.screenshot().await;
        std::fs::write(std::path::Path::new(&dir).join("player.png"), png)
            .expect("write the screenshot");
    }

    // The scrubber: to 2m10s, minute 2's part draws the screen.
    b.eval(
        "const s = document.querySelector('#player-scrubber'); s.value = '130'; \
         s.dispatchEvent(new Event('change')); return null",
    )
    .await;
    wait_js(
        &b,
        "document.querySelector('#player').dataset.seeked === '130.000'",
    )
    .await;
    let screen = b.wait_text(SCREEN, "step-2").await;
    assert!(
        !screen.contains("step-1\n") && !screen.contains("step-3"),
        "{screen}"
    );

    // 8×, pauses over a second cut to it: resumed, playback reaches the end (windows fetched
    // as it goes), and the screen has the last command's output.
    choose(&b, "#player-speed", "8").await;
    choose(&b, "#player-idle", "1").await;
    assert_eq!(player(&b, "speed").await, "8");
    assert_eq!(player(&b, "idle").await, "1");
    b.click("#player-play").await;
    wait_js(
        &b,
        "document.querySelector('#player').dataset.state === 'ended'",
    )
    .await;
    let screen = b.wait_text(SCREEN, "End of recording").await;
    assert!(screen.contains("step-11"), "{screen}");

    // An address with a time, as a search hit links to it: opened there.
    b.goto(&format!(
        "{}{PORTAL}#/namespaces/{NS}/pods/{POD}/recordings/{id}?t=605",
        proxy.url()
    ))
    .await;
    wait_js(&b, "document.querySelector('#player') && document.querySelector('#player').dataset.seeked === '605.000'").await;
    b.wait_text(SCREEN, "$ echo step-10").await;

    // Never the whole recording: every fetch of it named a range.
    let fetches = recording_fetches(&b, &id).await;
    assert!(!fetches.is_empty());
    assert!(
        fetches
            .iter()
            .all(|u| u.contains("?start=") && u.contains("&end=")),
        "{fetches:?}"
    );
    b.close().await;
}
