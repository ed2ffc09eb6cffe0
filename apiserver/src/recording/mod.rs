//! Session recordings: every attach session is written as an asciicast v2 file to the store
//! of `--recording-store` (a directory or an S3 bucket, shared by every replica), and served
//! back by `GET …/pods/POD/recordings[/ID]` through any replica.
//!
//! One concern per file:
//! - [`options`]: the flags (`--recording-store`, `--recording-mode`, the bounds);
//! - [`Recorder`] (here): opening a session's recording;
//! - [`tap`]: the relay's side, taking the messages the relay parsed and forwarded and queueing
//!   what is recorded, without waiting (best-effort) or at the recorder's pace (strict);
//! - [`rate`]: `--max-recording-rate`, a gap (best-effort) or a throttle (strict);
//! - [`writer`]: the session's writer task, turning queued items into asciicast lines and
//!   writing them to the store in parts;
//! - [`session`]: a recording in progress and how it ends (exit code, metadata);
//! - [`asciicast`], [`store`]: the file format and where recordings are (object layout, list,
//!   read, retention).
//!
//! When the session ends, the metadata sidecar gets the end time, the size and the process's
//! exit code.

pub mod asciicast;
pub mod options;
pub mod rate;
pub mod session;
pub mod store;
pub mod tap;
pub mod writer;

use std::sync::Arc;
use std::time::{Duration, Instant};

use asciicast::{Capped, Header, HeaderInfo, Utf8Carry};
pub use options::{RecordingMode, RecordingOptions};
use rate::RateBudget;
pub use session::{Finished, Session, exit_code_of_status};
use store::{Metadata, Store};
pub use tap::{Marker, Tap};
use tap::{TapShared, TapState};
use writer::{Lines, PartSink, Writer};

use poddebug_stream::EndSignal;

/// Terminal size assumed when the client never sent one before the first output.
const DEFAULT_SIZE: (u16, u16) = (80, 24);

/// The recorder of a server with `--recording-store` (or `--recording-dir`) set.
#[derive(Debug)]
pub struct Recorder {
    store: Store,
    mode: RecordingMode,
    record_input: bool,
    max_bytes: u64,
    max_rate: u64,
    retention: Duration,
    part_interval: Duration,
}

/// Who and what a recorded session is.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// Debug container as the client named it.
    pub container: String,
    /// User.
    pub user: String,
    /// Negotiated protocol label.
    pub protocol: String,
    /// The session id.
    pub session_id: String,
    /// How the user takes part (`owner`, `peer`, `observer`, `moderator`).
    pub mode: String,
    /// The reason, ticket, debug request and approvers the debug container carries.
    pub justification: poddebug_types::request::Justification,
}

impl Recorder {
    /// The recorder the flags ask for, if any.
    pub fn from_options(o: &RecordingOptions) -> Option<Arc<Recorder>> {
        // The flags were validated at start-up: a store that cannot be made stopped it there.
        let store = o.store().ok()??;
        Some(Arc::new(Recorder {
            store,
            mode: o.recording_mode,
            record_input: o.record_input,
            max_bytes: o.max_recording_bytes,
            max_rate: o.max_recording_rate,
            retention: o.recording_retention,
            part_interval: o.recording_part_interval,
        }))
    }

    /// The files.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Start the retention sweep: while this replica leads (`leading`), now and then every
    /// quarter of the retention (at most hourly). Nothing is swept with a retention of 0.
    pub fn spawn_sweeper(
        self: &Arc<Self>,
        mut leading: tokio::sync::watch::Receiver<bool>,
        metrics: Arc<crate::metrics::Metrics>,
    ) {
        if self.retention.is_zero() {
            return;
        }
        let every = (self.retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                if leading.wait_for(|l| *l).await.is_err() {
                    return;
                }
                match me.store.sweep(me.retention).await {
                    Ok(0) => {}
                    Ok(n) => {
                        metrics.recordings_deleted.inc_by(n as u64);
                        tracing::info!(recordings = n, "recordings past their retention deleted");
                    }
                    Err(e) => tracing::warn!(error = %e, "the recording retention sweep failed"),
                }
                tokio::time::sleep(every).await;
            }
        });
    }

    /// The recording mode (`--recording-mode`).
    pub fn mode(&self) -> RecordingMode {
        self.mode
    }

    /// Open the recording of a session that has just been switched to the stream protocol.
    /// In strict mode, `end` is how the session is ended when its recording cannot go on.
    pub async fn start(&self, info: SessionInfo, end: &EndSignal) -> std::io::Result<Session> {
        let start = jiff::Timestamp::now();
        let id = store::new_id(start);
        let meta = Metadata {
            id: id.clone(),
            namespace: info.namespace.clone(),
            pod: info.pod.clone(),
            container: info.container.clone(),
            user: info.user.clone(),
            protocol: info.protocol.clone(),
            start: start.to_string(),
            end: None,
            renewed: Some(start.to_string()),
            part_interval_seconds: Some(self.part_interval.as_secs()),
            bytes: 0,
            exit_code: None,
            truncated: false,
            justification: info.justification.clone(),
        };
        self.store
            .write_meta(&meta)
            .await
            .map_err(std::io::Error::other)?;
        let header = Header {
            version: 2,
            width: DEFAULT_SIZE.0,
            height: DEFAULT_SIZE.1,
            timestamp: start.as_second(),
            title: format!("{}/{}/{}", info.namespace, info.pod, info.container),
            poddebug: HeaderInfo {
                id: id.clone(),
                namespace: info.namespace,
                pod: info.pod,
                container: info.container,
                user: info.user,
                start: start.to_string(),
                protocol: info.protocol,
                input_recorded: self.record_input,
                recording_mode: self.mode.as_str().to_owned(),
                session: info.session_id,
                mode: info.mode,
                justification: Some(info.justification).filter(|j| !j.is_empty()),
            },
        };
        let strict = self.mode == RecordingMode::Strict;
        let shared = Arc::new(TapShared {
            end: strict.then(|| end.clone()),
            ..TapShared::default()
        });
        let started = Instant::now();
        let writer = Writer {
            sink: PartSink::new(self.store.clone(), meta.clone(), self.part_interval),
            lines: Lines {
                buf: Vec::new(),
                header,
                header_written: false,
                // strict: the tap counts the cap on recorded bytes and ends the session; the
                // file is never cut.
                capped: Capped::new(if strict { 0 } else { self.max_bytes }),
                out_text: Utf8Carry::default(),
                in_text: Utf8Carry::default(),
                exit_code: None,
            },
            started,
            shared: shared.clone(),
        };
        let writer = tokio::spawn(writer.run());
        Ok(Session {
            tap: Tap {
                shared,
                started,
                state: std::sync::Mutex::new(TapState {
                    budget: RateBudget::new(self.max_rate),
                    record_input: self.record_input,
                    recorded: 0,
                    capped: false,
                }),
                strict_cap: strict.then_some(self.max_bytes),
            },
            writer,
            meta,
            store: self.store.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use options::MIN_CAP;
    use poddebug_stream::Recorded;
    use std::path::PathBuf;

    async fn recorder(cap: u64, input: bool) -> (Recorder, PathBuf) {
        recorder_with_rate(cap, input, 0).await
    }

    async fn recorder_with_rate(cap: u64, input: bool, rate: u64) -> (Recorder, PathBuf) {
        recorder_in_mode(RecordingMode::BestEffort, cap, input, rate).await
    }

    async fn recorder_in_mode(
        mode: RecordingMode,
        cap: u64,
        input: bool,
        rate: u64,
    ) -> (Recorder, PathBuf) {
        let dir = std::env::temp_dir().join(format!("poddebug-rec-{:x}", rand::random::<u64>()));
        let r = Recorder::from_options(&RecordingOptions {
            recording_store: None,
            recording_dir: Some(dir.clone()),
            recording_mode: mode,
            record_input: input,
            max_recording_bytes: cap,
            max_recording_rate: rate,
            recording_part_interval: Duration::from_secs(5),
            recording_retention: Duration::ZERO,
        })
        .unwrap();
        (Arc::into_inner(r).unwrap(), dir)
    }

    async fn cast_text(r: &Recorder, id: &str) -> String {
        use futures::TryStreamExt;
        let parts = r.store().read("ns", "pod", id).await.unwrap().unwrap();
        let chunks: Vec<bytes::Bytes> = parts.try_collect().await.unwrap();
        String::from_utf8(chunks.concat()).unwrap()
    }

    fn info() -> SessionInfo {
        SessionInfo {
            namespace: "ns".into(),
            pod: "pod".into(),
            container: "dbg".into(),
            user: "alice".into(),
            protocol: "websocket/v5.channel.k8s.io".into(),
            session_id: "s0000000000000001".into(),
            mode: "owner".into(),
            justification: Default::default(),
        }
    }

    /// Hand the tap one read's messages, as the relay does.
    async fn rec(s: &Session, events: Vec<Recorded>) {
        poddebug_stream::Recorder::record(s.tap(), events).await;
    }

    fn size(width: u16, height: u16) -> Recorded {
        Recorded::Resize(poddebug_stream::TerminalSize { width, height })
    }

    fn out(b: &[u8]) -> Recorded {
        Recorded::Output(Bytes::copy_from_slice(b))
    }

    #[tokio::test]
    async fn a_session_becomes_an_asciicast_with_metadata() {
        let (r, dir) = recorder(0, false).await;
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        rec(&s, vec![size(100, 30)]).await;
        rec(&s, vec![out(b"hello ")]).await;
        rec(&s, vec![Recorded::Input(Bytes::from_static(b"secret"))]).await;
        rec(&s, vec![size(90, 20)]).await;
        rec(&s, vec![out(b"world")]).await;
        rec(
            &s,
            vec![Recorded::Error(Bytes::from_static(
                b"{\"status\":\"Success\"}",
            ))],
        )
        .await;
        let id = s.id().to_owned();
        // "Success" on the stream is no exit code (containerd says it whatever the code): the
        // container's status (here 9) decides.
        let f = s.finish(async { Some(9) }).await;
        assert_eq!((f.exit_code, f.truncated), (Some(9), false));
        let cast = cast_text(&r, &id).await;
        let lines: Vec<serde_json::Value> = cast
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["version"], 2);
        assert_eq!(
            (lines[0]["width"].as_u64(), lines[0]["height"].as_u64()),
            (Some(100), Some(30))
        );
        assert_eq!(lines[0]["poddebug"]["user"], "alice");
        assert_eq!(lines[1][1], "o");
        assert_eq!(lines[1][2], "hello ");
        assert_eq!(lines[2][1], "r");
        assert_eq!(lines[2][2], "90x20");
        assert_eq!(lines[3][2], "world");
        assert_eq!(lines.len(), 4, "no input without --record-input: {cast}");
        let list = r.store().list(Some("ns"), Some("pod")).await.unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].exit_code, Some(9));
        assert_eq!(list[0].bytes, cast.len() as u64);
        assert!(list[0].end.is_some());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn input_is_recorded_on_request_and_the_cap_truncates() {
        let (r, dir) = recorder(MIN_CAP, true).await;
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        rec(&s, vec![Recorded::Input(Bytes::from_static(b"typed"))]).await;
        for _ in 0..200 {
            rec(&s, vec![out(&[1u8; 99])]).await;
        }
        let id = s.id().to_owned();
        let f = s.finish(async { Some(5) }).await;
        assert_eq!((f.exit_code, f.truncated), (Some(5), true));
        let cast = cast_text(&r, &id).await;
        assert!(cast.len() as u64 <= MIN_CAP, "{}", cast.len());
        assert!(cast.contains(r#""i","typed""#));
        let last: serde_json::Value = serde_json::from_str(cast.lines().last().unwrap()).unwrap();
        assert_eq!(last[1], "m");
        assert_eq!(last[2], "recording truncated: size limit reached");
        assert!(r.store().list(Some("ns"), Some("pod")).await.unwrap()[0].truncated);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn output_over_the_rate_leaves_a_marked_gap() {
        // 1 KiB/s: 8 KiB may be recorded at once.
        let (r, dir) = recorder_with_rate(0, false, 1024).await;
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        // 200 events of 100 bytes at once: about the first 81 fit, the rest is skipped; the gap
        // is closed by the end of the session.
        for _ in 0..200 {
            rec(&s, vec![out(&[b'a'; 100])]).await;
        }
        let id = s.id().to_owned();
        s.finish(async { None }).await;
        let cast = cast_text(&r, &id).await;
        let lines: Vec<serde_json::Value> = cast
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let recorded: usize = lines[1..]
            .iter()
            .filter(|l| l[1] == "o")
            .map(|l| l[2].as_str().unwrap().len())
            .sum();
        assert!((8000..=8300).contains(&recorded), "{recorded}");
        let last = lines.last().unwrap();
        assert_eq!(last[1], "m");
        let skipped = 200 * 100 - recorded;
        assert_eq!(
            last[2],
            format!("{skipped} bytes not recorded: over --max-recording-rate"),
            "{cast}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
