//! The portal's recording player in a real browser (headless Chromium through chromedriver),
//! through a stand-in for `kubectl proxy`, against the real server and the fake
//! kube-apiserver, on a twelve-minute recording written into the server's store with synthetic
//! session times ([`poddebug_tests::playback`] says what is checked). Skipped without Chromium
//! and chromedriver, except in CI.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first. With `PODDEBUG_SCREENSHOT_DIR`
//! set, it saves `player.png` there (the user guide's screenshot).

#[allow(dead_code)] // the helpers of every suite; not all are used here
mod common;

use common::{NS, POD, env_with};
use poddebug_tests::browser::{self, Browser};
use poddebug_tests::playback::check_player;
use poddebug_tests::synthetic::{fake_server_store, write_session};
use poddebug_tests::{TempDir, UserProxy};

const PORTAL: &str = "/apis/poddebug.dev/v1alpha1/portal/";

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
    let shot = std::env::var_os("PODDEBUG_SCREENSHOT_DIR")
        .map(|d| std::path::Path::new(&d).join("player.png"));
    check_player(
        &b,
        &format!("{}{PORTAL}", proxy.url()),
        (NS, POD, &id),
        &steps,
        shot.as_deref(),
    )
    .await;
    b.close().await;
}
