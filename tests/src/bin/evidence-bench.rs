//! What tamper evidence costs a recorded stream: the recording path a relay feeds (its tap, the
//! writer escaping output into parts, the store) driven in-process with output as fast as it
//! takes it, once with the evidence on (every part hashed with SHA-256, the metadata signed with
//! Ed25519 at each part) and once with it off (no hash, no signature), side by side: each run
//! records `--mib` MiB both ways, the order alternating between runs.
//!
//! Recording is in strict mode with no rate bound and no size cap, so the tap waits for the
//! writer and every byte is recorded: the throughput is that of the recording path itself,
//! which is what a recorded stream runs at when the recorder is its bottleneck (in best-effort
//! mode, with the default rate bound, a stream does not wait for the recorder at all). The
//! relay's own socket work is the same either way and is measured by `stream-bench`.
//!
//! Usage (release build; a directory under /tmp, removed after each run; ends by itself):
//! `target/release/evidence-bench [--mib 64] [--runs 5] [--chunk 32768] [--store URL]`
//! (`--store s3://BUCKET/PREFIX` with the `AWS_*` environment: an S3-compatible server).

use poddebug_tests::bench::{self, median, num};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use poddebug_recording::keys::{Keys, SharedKeys};
use poddebug_recording::recorder::{RecordingMode, RecordingOptions};
use poddebug_recording::{Recorder, SessionInfo};
use poddebug_storage::UntrustedRecords;
use poddebug_storage::record_key::{RecordKey, SharedRecordKey};
use poddebug_stream::{EndSignal, Recorded};
use prometheus_client::metrics::gauge::Gauge;

struct Args {
    mib: usize,
    runs: usize,
    chunk: usize,
    store: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        mib: 64,
        runs: 5,
        chunk: 32768,
        store: None,
    };
    bench::flags(|k, v| {
        match k {
            "--mib" => a.mib = num(v)?,
            "--runs" => a.runs = num(v)?,
            "--chunk" => a.chunk = num(v)?,
            "--store" => a.store = Some(v.to_owned()),
            _ => return None,
        }
        Some(())
    });
    a
}

fn recorder(store: &str, signed: bool) -> Arc<Recorder> {
    let dir = store.strip_prefix("file://").map(std::path::PathBuf::from);
    Recorder::from_options(
        &RecordingOptions {
            recording_store: dir.is_none().then(|| store.to_owned()),
            recording_sse: None,
            recording_dir: dir,
            recording_mode: RecordingMode::Strict,
            record_input: false,
            max_recording_bytes: 0,
            max_recording_rate: 0,
            recording_part_interval: Duration::from_secs(5),
            recording_retention: Duration::ZERO,
            max_recording_memory: 0,
            recording_quota_per_user: 0,
            recording_keys_resync_period: Duration::from_secs(30),
            recording_signing: true,
        },
        SharedRecordKey::loaded(RecordKey::generate()),
        UntrustedRecords::default(),
        Gauge::default(),
        signed.then(|| SharedKeys::loaded(Keys::generate().expect("a signing key"))),
    )
    .expect("a recorder")
}

fn info(run: usize, signed: bool) -> SessionInfo {
    SessionInfo {
        namespace: "bench".into(),
        pod: format!("pod-{run}-{signed}"),
        container: "dbg".into(),
        user: "bench".into(),
        protocol: "websocket/v5.channel.k8s.io".into(),
        session_id: format!("s{run:015}"),
        mode: "owner".into(),
        justification: Default::default(),
    }
}

/// Record `mib` MiB of printable output in `chunk`-byte reads; MB/s, and the verdict of the
/// recording.
async fn one(r: &Recorder, a: &Args, run: usize, signed: bool, data: &Bytes) -> (f64, String) {
    let s = r
        .start(info(run, signed), &EndSignal::default())
        .await
        .expect("a session");
    let id = s.id().to_owned();
    let total = a.mib << 20;
    let t = Instant::now();
    let mut sent = 0;
    while sent < total {
        let n = a.chunk.min(total - sent);
        poddebug_stream::Recorder::record(s.tap(), vec![Recorded::Output(data.slice(..n))]).await;
        sent += n;
    }
    let f = s.finish(async { Some(0) }).await;
    let secs = t.elapsed().as_secs_f64();
    assert!(!f.truncated, "the recording was truncated");
    let v = r
        .store()
        .verification("bench", &info(run, signed).pod, &id)
        .await
        .expect("the store")
        .map(|v| v.result.as_str().to_owned())
        .unwrap_or_else(|| "unsigned".into());
    (total as f64 / secs / 1e6, v)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The S3 client's TLS uses the process's provider, as the server installs it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let a = args();
    // Printable text with a newline now and then, as a shell's output.
    let data = Bytes::from(
        (0..a.chunk)
            .map(|i| {
                if i % 80 == 79 {
                    b'\n'
                } else {
                    b'a' + (i % 26) as u8
                }
            })
            .collect::<Vec<u8>>(),
    );
    println!(
        "evidence-bench: {} MiB recorded per run, {}-byte reads, {} runs, store {}",
        a.mib,
        a.chunk,
        a.runs,
        a.store.as_deref().unwrap_or("a directory under /tmp")
    );
    println!("run  order        on (MB/s)  off (MB/s)  on/off   verdicts");
    let (mut on, mut off, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..a.runs {
        let dir =
            std::env::temp_dir().join(format!("pd-evidence-bench-{}-{run}", std::process::id()));
        let url = a
            .store
            .clone()
            .unwrap_or_else(|| format!("file://{}", dir.display()));
        let order = if run % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        let mut got = [(0.0, String::new()), (0.0, String::new())];
        for signed in order {
            let r = recorder(&url, signed);
            got[usize::from(!signed)] = one(&r, &a, run, signed, &data).await;
        }
        let _ = std::fs::remove_dir_all(&dir);
        let (s, u) = (&got[0], &got[1]);
        println!(
            "{run:>3}  {:<11}  {:>9.1}  {:>10.1}  {:>5.1} %  {} / {}",
            if order[0] { "on, off" } else { "off, on" },
            s.0,
            u.0,
            100.0 * s.0 / u.0,
            s.1,
            u.1
        );
        on.push(s.0);
        off.push(u.0);
        ratio.push(s.0 / u.0);
    }
    println!(
        "median: on {:.1} MB/s, off {:.1} MB/s, on/off {:.1} % (median of the runs' ratios)",
        median(on),
        median(off),
        100.0 * median(ratio)
    );
}
