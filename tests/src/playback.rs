//! The recording player of the portal, checked in a real browser: shared by the fake-cluster
//! suite (`tests/tests/portal_player.rs`) and the live one (`tests/tests/live/portal.rs`),
//! which reach the portal through a stand-in for `kubectl proxy` and the real one.
//!
//! On the twelve-minute session [`crate::synthetic::write_session`] writes: jumping to a
//! command shows the screen at that time, the scrubber seeks, pause and resume work, speed
//! and skip-idle carry playback to the end, an address with `?t=` opens the recording there,
//! a search hit opens it where the text was typed, and every read of the recording the browser made named a range (its own record of its
//! fetches, `performance.getEntriesByType('resource')`), never the whole recording.

use std::time::Duration;

use serde_json::Value;

use crate::browser::Browser;
use crate::synthetic::Step;

/// The player's screen.
pub const SCREEN: &str = "#replay .xterm-rows";
/// Bound of every wait here (a guard against hanging, never a measured time).
const GUARD: Duration = Duration::from_secs(60);

/// Waits (bounded) until the expression `script` is true in the page.
pub async fn wait_js(b: &Browser, script: &str) {
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

/// The player's `data-KEY`.
pub async fn player(b: &Browser, key: &str) -> Value {
    b.eval(&format!(
        "const p = document.querySelector('#player'); return p ? p.dataset.{key} || null : null"
    ))
    .await
}

/// Every URL the page fetched of recording `id` (not its commands), in order.
pub async fn recording_fetches(b: &Browser, id: &str) -> Vec<String> {
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

/// Sets the control `css` (a select, the scrubber) to `value` as a user does.
pub async fn choose(b: &Browser, css: &str, value: &str) {
    b.eval(&format!(
        "const s = document.querySelector('{css}'); s.value = '{value}'; \
         s.dispatchEvent(new Event('change')); return null"
    ))
    .await;
}

/// The scenario of the module docs: `portal` is the portal's URL (…/portal/) through the
/// user's proxy, `ns`/`pod`/`id` the recording, `steps` its commands. With `screenshot`, the
/// player at the eighth command is saved there as a PNG.
pub async fn check_player(
    b: &Browser,
    portal: &str,
    (ns, pod, id): (&str, &str, &str),
    steps: &[Step],
    screenshot: Option<&std::path::Path>,
) {
    b.goto(&format!("{portal}#/namespaces/{ns}/pods/{pod}"))
        .await;
    b.click(&format!("#recordings button.replay[data-id='{id}']"))
        .await;
    b.wait_text_on_screen(SCREEN, "echo step-0").await;
    wait_js(b, "document.querySelector('#player-commands')").await;

    // Paused, then to the eighth command: the screen as it was when it was submitted (the
    // part's keyframe, the earlier commands and their output, then the command typed).
    b.click("#player-play").await;
    wait_js(
        b,
        "document.querySelector('#player').dataset.state === 'paused'",
    )
    .await;
    let at = steps[7].at;
    b.click(&format!("#player-commands button[data-offset='{at}']"))
        .await;
    wait_js(
        b,
        &format!("document.querySelector('#player').dataset.seeked === '{at:.3}'"),
    )
    .await;
    let screen = b.wait_text_on_screen(SCREEN, "$ echo step-7").await;
    assert!(
        screen.contains("echo step-6\nstep-6\n$ $ echo step-7")
            && !screen.contains("step-7\nstep-7"),
        "{screen}"
    );
    assert_eq!(player(b, "state").await, "paused");
    let fetches = recording_fetches(b, id).await;
    assert!(
        fetches
            .last()
            .is_some_and(|u| u.ends_with(&format!("?start={at}&end={}", at + 120.0))),
        "the seek fetched a window from the command: {fetches:?}"
    );
    if let Some(path) = screenshot {
        b.eval(
            "window.scrollTo(0, document.querySelector('#session').offsetTop - 10); return null",
        )
        .await;
        std::fs::write(path, b.screenshot().await).expect("write the screenshot");
    }

    // The scrubber, to 2m10s: the screen then (minute 2's output, nothing later).
    choose(b, "#player-scrubber", "130").await;
    wait_js(
        b,
        "document.querySelector('#player').dataset.seeked === '130.000'",
    )
    .await;
    let screen = b.wait_text_on_screen(SCREEN, "step-2\n$").await;
    assert!(
        screen.contains("step-1") && !screen.contains("step-3"),
        "{screen}"
    );

    // 8×, pauses over a second cut to it: resumed, playback reaches the end (the next
    // windows fetched as it goes), the last command's output on the screen.
    choose(b, "#player-speed", "8").await;
    choose(b, "#player-idle", "1").await;
    assert_eq!(player(b, "speed").await, "8");
    assert_eq!(player(b, "idle").await, "1");
    b.click("#player-play").await;
    wait_js(
        b,
        "document.querySelector('#player').dataset.state === 'ended'",
    )
    .await;
    let screen = b.wait_text_on_screen(SCREEN, "End of recording").await;
    assert!(screen.contains("step-11"), "{screen}");

    // An address with a time, as a link to a moment of the session: opened there.
    b.goto(&format!(
        "{portal}#/namespaces/{ns}/pods/{pod}/recordings/{id}?t=605"
    ))
    .await;
    wait_js(
        b,
        "document.querySelector('#player') && document.querySelector('#player').dataset.seeked === '605.000'",
    )
    .await;
    b.wait_text_on_screen(SCREEN, "$ echo step-10").await;

    // A search hit: the ninth command found by its text, the player opened where it was typed.
    let at = steps[9].at;
    b.fill("#recording-search input[name='search']", "ECHO STEP-9")
        .await;
    b.click("#recording-search button[type='submit']").await;
    b.wait_for(&format!("#search-hits button.hit[data-offset='{at}']"))
        .await;
    b.click(&format!("#search-hits button.hit[data-offset='{at}']"))
        .await;
    wait_js(
        b,
        &format!("document.querySelector('#player') && document.querySelector('#player').dataset.seeked === '{at:.3}'"),
    )
    .await;
    b.wait_text_on_screen(SCREEN, "$ echo step-9").await;

    // Never the whole recording: every fetch of it named a range.
    let fetches = recording_fetches(b, id).await;
    assert!(fetches.len() >= 2, "{fetches:?}");
    assert!(
        fetches
            .iter()
            .all(|u| u.contains("?start=") && u.contains("&end=")),
        "{fetches:?}"
    );
}
