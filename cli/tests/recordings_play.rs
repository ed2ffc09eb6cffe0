//! `kubectl poddebug recordings play` against the real server and the fake kube-apiserver: a
//! twelve-minute recording (written into the server's store with synthetic session times)
//! played at 8× with pauses cut short, from minute ten: the screen as it was then (the part's
//! keyframe), then what the part holding that time and the ones after it recorded, in order; bad flags and a missing recording are
//! refused as kubectl refuses. Without `--pod`, the recording's pod is read from the recording.
//!
//! Needs the binaries: `cargo build -p poddebug-apiserver -p kubectl-poddebug` first.

mod piped;

use poddebug_tests::synthetic::{fake_server_store, write_session};
use poddebug_tests::{FakeKube, PodDebugServer, TempDir};

/// The plugin with nothing on its stdin.
async fn run(kc: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    piped::run(kc, args, None).await
}

#[tokio::test]
async fn a_recording_plays_from_a_time_fast_with_pauses_cut() {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace("shop", &[]);
    fake.add_simple_pod("shop", "web");
    let dir = TempDir::new("play");
    let flag = format!("--recording-dir={}", dir.path().join("store").display());
    let server = PodDebugServer::start(&fake, fake.pki(), &[flag.as_str()]).await;
    let store = fake_server_store(&fake, &dir.path().join("store")).await;
    let (id, _) = write_session(&store, "shop", "web", "alice", 12).await;
    let kc = server.write_kubeconfig(dir.path(), "alice", &["devs"], "shop");

    // From 10m 30s: the part of minute 10 holds it; minute 11 plays on at 8×, its 55 s of
    // idle time cut to a tenth of a second.
    let (code, out, err) = run(
        &kc,
        &[
            "recordings",
            "play",
            &id,
            "--pod",
            "web",
            "--speed",
            "8",
            "--skip-idle",
            "100ms",
            "--start",
            "10m30s",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    // The screen as minute 10 began (its keyframe: the earlier commands), then minute 10
    // from its start and minute 11.
    let played = "$ echo step-10\r\nstep-10\r\n$ $ echo step-11\r\nstep-11\r\n$ ";
    assert!(out.ends_with(played), "{out:?} {err}");
    let screen = &out[..out.len() - played.len()];
    assert!(
        screen.contains("step-9") && screen.contains("step-0") && !screen.contains("step-10"),
        "{screen:?}"
    );

    // The whole recording, in order, named by its id alone (its pod read from the recording).
    let (code, out, err) = run(
        &kc,
        &[
            "recordings",
            "play",
            &id,
            "--speed",
            "8",
            "--skip-idle",
            "50ms",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let at = |s: &str| out.find(s).unwrap_or(usize::MAX);
    assert!(
        at("step-0") < at("step-5") && at("step-5") < at("step-11") && at("step-11") < usize::MAX,
        "{out}"
    );

    // Refusals.
    let (code, _, err) = run(
        &kc,
        &["recordings", "play", &id, "--pod", "web", "--speed", "16"],
    )
    .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("the speed must be from 0.5 to 8"), "{err}");
    let (code, _, err) = run(
        &kc,
        &[
            "recordings",
            "play",
            "20260101T000000Z-0000000000000000",
            "--pod",
            "web",
        ],
    )
    .await;
    assert_eq!(code, Some(1));
    assert!(err.contains("not found"), "{err}");
    let (code, _, err) = run(
        &kc,
        &["recordings", "play", "20260101t000000z-0000000000000000"],
    )
    .await;
    assert_eq!(code, Some(1));
    assert!(err.contains("not found"), "{err}");
}
