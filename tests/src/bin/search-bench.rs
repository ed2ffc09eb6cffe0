//! Recording search benchmark: the real `poddebug-apiserver` binary over the fake
//! kube-apiserver, with `--recordings` recordings (metadata and search index, written into its
//! recording directory by the recording crate as the server writes them, signed with the record
//! key the server made) in `--namespaces` namespaces, each index `--lines` lines of output and
//! commands.
//!
//! Measured, through the server (`GET …?search=TEXT`, one page per request):
//! - a text in one recording, over every namespace: each page's latency (p50, p99, max) and a
//!   whole walk through the pages (`continue`);
//! - a text in every recording, `limit=50`: the first page's latency;
//! - a text in one recording of one namespace;
//! - for comparison, a page of the list without search;
//! - in the crate alone: loading one index and searching it.
//!
//! Usage (release build recommended; loopback only, bounded, ends by itself):
//! `PODDEBUG_APISERVER_BIN=target/release/poddebug-apiserver target/release/search-bench
//!  [--recordings 1000] [--namespaces 10] [--lines 2000] [--searches 20]`

use poddebug_tests::bench::{self, num, pct};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use poddebug_recording::index::{IndexBuilder, Needle, Searchable};
use poddebug_recording::recorder::store::{Metadata, Store, new_id};
use poddebug_storage::UntrustedRecords;
use poddebug_storage::record_key::{RecordKey, SECRET_KEY, SECRET_NAME, SharedRecordKey};
use poddebug_tests::{FakeKube, PodDebugServer, TestClient};
use poddebug_types::RecordingCommand;
use serde_json::Value;

const GV: &str = "/apis/poddebug.dev/v1alpha1";
const SERVER_NS: &str = "poddebug-system";

struct Args {
    recordings: usize,
    namespaces: usize,
    lines: usize,
    searches: usize,
}

fn args() -> Args {
    let mut a = Args {
        recordings: 1_000,
        namespaces: 10,
        lines: 2_000,
        searches: 20,
    };
    bench::flags(|k, v| {
        match k {
            "--recordings" => a.recordings = num(v)?,
            "--namespaces" => a.namespaces = num::<usize>(v)?.max(1),
            "--lines" => a.lines = num(v)?,
            "--searches" => a.searches = num::<usize>(v)?.max(1),
            _ => return None,
        }
        Some(())
    });
    a
}

fn ms(d: Duration) -> String {
    bench::ms(d, 2)
}

fn line(d: &[Duration]) -> String {
    format!(
        "p50 {} ms, p99 {} ms, max {} ms ({} requests)",
        ms(pct(d, 0.5)),
        ms(pct(d, 0.99)),
        ms(pct(d, 1.0)),
        d.len()
    )
}

/// The index of recording `i`: `lines` lines of a shell session (listings, logs, commands),
/// one command with the recording's own marker.
fn index_of(i: usize, lines: usize) -> Vec<u8> {
    let mut b = IndexBuilder::new();
    let mut t = 0.0;
    for j in 0..lines {
        t += 0.05;
        if j % 20 == 0 {
            b.command(&RecordingCommand {
                offset: t,
                line: format!("ls -la /var/lib/app/data-{j}"),
                recalled: false,
            });
        }
        let out = match j % 3 {
            0 => format!(
                "drwxr-xr-x 2 root root 4096 Jan {} 12:{:02} data-{i}-{j}\r\n",
                j % 28 + 1,
                j % 60
            ),
            1 => format!(
                "\x1b[32mINFO\x1b[0m request id={i:05}{j:05} served in {} ms\r\n",
                j % 97
            ),
            _ => format!(
                "-rw-r--r-- 1 app app {} config-{j}.yaml\r\n",
                j * 37 % 100_000
            ),
        };
        b.output(t, out.as_bytes());
    }
    b.command(&RecordingCommand {
        offset: t + 1.0,
        line: format!("cat /etc/marker-{i:05}"),
        recalled: false,
    });
    b.finish();
    b.to_json()
}

async fn timed(c: &TestClient, path: &str) -> (Duration, Value) {
    let start = Instant::now();
    let (code, _, body) = c
        .request(Method::GET, path, &[], Bytes::new())
        .await
        .expect("request");
    let took = start.elapsed();
    assert_eq!(code, StatusCode::OK, "{path}");
    (took, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Every page of `path`: each page's latency, the walk's, and the recordings found.
async fn walk(c: &TestClient, path: &str) -> (Vec<Duration>, Duration, usize) {
    let start = Instant::now();
    let mut pages = Vec::new();
    let mut found = 0;
    let mut token: Option<String> = None;
    for _ in 0..100_000 {
        let p = match &token {
            Some(t) => format!("{path}&continue={t}"),
            None => path.to_owned(),
        };
        let (took, v) = timed(c, &p).await;
        pages.push(took);
        found += v["items"].as_array().map_or(0, Vec::len);
        token = v["metadata"]["continue"].as_str().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    (pages, start.elapsed(), found)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let a = args();
    let fake = FakeKube::start().await;
    fake.allow_all();
    let dir = std::env::temp_dir().join(format!("poddebug-search-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let pki = fake.pki().clone();
    let flag = format!("--recording-dir={}", dir.display());
    let server = PodDebugServer::start(&fake, &pki, &[flag.as_str()]).await;
    // The record key the server made, to sign what is written here as the server would.
    let deadline = Instant::now() + Duration::from_secs(30);
    let key = loop {
        if let Some(s) = fake.secret(SERVER_NS, SECRET_NAME)
            && let Some(k) = s["data"][SECRET_KEY].as_str()
        {
            use base64::Engine;
            break base64::engine::general_purpose::STANDARD
                .decode(k)
                .expect("the key");
        }
        assert!(Instant::now() < deadline, "the server made no record key");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let store = Store::dir(&dir).expect("store").authenticated(
        SharedRecordKey::loaded(RecordKey::from_bytes(&key)),
        UntrustedRecords::default(),
    );
    let start = jiff::Timestamp::now();
    let write = Instant::now();
    let mut index_bytes = 0;
    for i in 0..a.recordings {
        let m = Metadata {
            id: new_id(start),
            namespace: format!("ns-{}", i % a.namespaces),
            pod: format!("pod-{}", i % 97),
            container: "dbg".to_owned(),
            user: "alice".to_owned(),
            protocol: "websocket/v5.channel.k8s.io".to_owned(),
            start: start.to_string(),
            end: Some(start.to_string()),
            bytes: 1,
            ..Default::default()
        };
        store.write_meta(&m).await.expect("metadata");
        let body = index_of(i, a.lines);
        index_bytes += body.len();
        store.write_index(&m, &body).await.expect("index");
    }
    println!(
        "store: {} recordings in {} namespaces, {} lines each, indexes {:.1} KiB on average, \
         written in {:.1} s",
        a.recordings,
        a.namespaces,
        a.lines,
        index_bytes as f64 / a.recordings.max(1) as f64 / 1024.0,
        write.elapsed().as_secs_f64()
    );

    // The crate alone: one index loaded and searched.
    let body = index_of(7, a.lines);
    let mut load = Vec::new();
    let mut search = Vec::new();
    for _ in 0..a.searches * 10 {
        let t = Instant::now();
        let s = Searchable::load(&body).expect("index");
        load.push(t.elapsed());
        let t = Instant::now();
        let f = s.search(&Needle::new("marker-00007").expect("needle"), 10);
        search.push(t.elapsed());
        assert_eq!(f.total, 1);
    }
    println!("crate, one index: load {}", line(&load));
    println!("crate, one index: search {}", line(&search));

    let client = server.front_proxy_client("alice", &["system:authenticated"]);
    // What every page of a list costs without search (the metadata of the scope read).
    let mut plain = Vec::new();
    for _ in 0..a.searches {
        let (took, _) = timed(&client, &format!("{GV}/debugrecordings?limit=100")).await;
        plain.push(took);
    }
    println!(
        "server, no search, every namespace, limit=100: {}",
        line(&plain)
    );
    let target = a.recordings / 2;
    let rare = format!("{GV}/debugrecordings?search=marker-{target:05}");
    let (mut pages, mut walks) = (Vec::new(), Vec::new());
    for _ in 0..a.searches {
        let (p, w, found) = walk(&client, &rare).await;
        assert_eq!(found, 1, "{rare}");
        pages.extend(p);
        walks.push(w);
    }
    println!(
        "server, a text in one recording, every namespace: each page {}",
        line(&pages)
    );
    println!(
        "server, a text in one recording, every namespace: whole walk {}",
        line(&walks)
    );
    let common = format!("{GV}/debugrecordings?search=root%20root&limit=50");
    let mut first = Vec::new();
    for _ in 0..a.searches {
        let (took, v) = timed(&client, &common).await;
        assert_eq!(
            v["items"].as_array().map_or(0, Vec::len),
            50.min(a.recordings)
        );
        first.push(took);
    }
    println!(
        "server, a text in every recording, limit=50: first page {}",
        line(&first)
    );
    let ns = format!(
        "{GV}/namespaces/ns-{}/debugrecordings?search=marker-{target:05}",
        target % a.namespaces
    );
    let (mut pages, mut walks) = (Vec::new(), Vec::new());
    for _ in 0..a.searches {
        let (p, w, found) = walk(&client, &ns).await;
        assert_eq!(found, 1, "{ns}");
        pages.extend(p);
        walks.push(w);
    }
    println!(
        "server, a text in one recording, one namespace: each page {}",
        line(&pages)
    );
    println!(
        "server, a text in one recording, one namespace: whole walk {}",
        line(&walks)
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
