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
//! - [`memory`]: `--max-recording-memory`, one bound on what all sessions' recordings hold;
//! - [`quota`]: `--recording-quota-per-user`, what one user's recordings may hold in the store;
//! - [`writer`]: the session's writer task, turning queued items into asciicast lines and
//!   writing them to the store in parts;
//! - [`session`]: a recording in progress and how it ends (exit code, metadata);
//! - [`store`]: where recordings are (object layout, list, read, retention); the file format
//!   is [`crate::asciicast`].
//!
//! When the session ends, the metadata sidecar gets the end time, the size and the process's
//! exit code.

pub mod keyframe;
pub mod memory;
pub mod options;
pub mod quota;
pub mod rate;
pub mod session;
pub mod store;
pub mod tap;
pub mod verified;
pub mod writer;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::asciicast::{Capped, Header, HeaderInfo, Utf8Carry};
use crate::commands::CommandLog;
use memory::{Held, RecordingMemory};
pub use options::{RecordingMode, RecordingOptions};
use poddebug_storage::UntrustedRecords;
use poddebug_storage::record_key::SharedRecordKey;
use poddebug_types::ApiError;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use quota::Quota;
use rate::RateBudget;
pub use session::{Finished, Session, exit_code_of_status};
use store::{Metadata, Store};
pub use tap::{Marker, Tap};
use tap::{TapShared, TapState};
use writer::{Lines, PartSink, Writer};

use poddebug_stream::EndSignal;

/// Terminal size assumed when the client never sent one before the first output.
const DEFAULT_SIZE: (u16, u16) = (80, 24);
/// best-effort: how long the start of a recording waits for the store's usage (a scan that
/// takes longer leaves this session's recording without a quota cap).
const QUOTA_WAIT_BEST_EFFORT: Duration = Duration::from_secs(2);
/// strict: how long an admission waits for the store's usage before it refuses (503).
const QUOTA_WAIT_STRICT: Duration = Duration::from_secs(30);
/// Why a recording stops at its size limit.
const SIZE_LIMIT: &str = "size limit reached";
/// Why a recording stops at its user's quota.
const QUOTA_REACHED: &str = "its user's recordings reached --recording-quota-per-user";

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
    memory: Arc<RecordingMemory>,
    quota: Option<Arc<Quota>>,
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
    /// The recorder the flags ask for, if any: its metadata signed and verified with `key`,
    /// what does not verify counted in `untrusted`, and its memory reported in `memory_gauge`;
    /// with `signing`, the statement of its metadata (each part's SHA-256, the hash chain)
    /// signed with those Ed25519 keys.
    pub fn from_options(
        o: &RecordingOptions,
        key: SharedRecordKey,
        untrusted: UntrustedRecords,
        memory_gauge: Gauge,
        signing: Option<crate::keys::SharedKeys>,
    ) -> Option<Arc<Recorder>> {
        // The flags were validated at start-up: a store that cannot be made stopped it there.
        let mut store = o.store().ok()??.authenticated(key, untrusted);
        if let Some(keys) = signing {
            store = store.signed_with(keys);
        }
        if !o.recording_signing {
            store = store.unsigned_from_now();
        }
        let quota = (o.recording_quota_per_user > 0)
            .then(|| Quota::new(o.recording_quota_per_user, store.clone()));
        Some(Arc::new(Recorder {
            store,
            mode: o.recording_mode,
            record_input: o.record_input,
            max_bytes: o.max_recording_bytes,
            max_rate: o.max_recording_rate,
            retention: o.recording_retention,
            part_interval: o.recording_part_interval,
            memory: Arc::new(RecordingMemory::new(o.max_recording_memory, memory_gauge)),
            quota,
        }))
    }

    /// The replica's recording memory.
    pub fn memory(&self) -> &RecordingMemory {
        &self.memory
    }

    /// The check an attach of `user` passes before the container is reached: in strict mode,
    /// a user whose recordings hold their quota or more is refused (403), and so is everyone
    /// while the store's usage cannot be read (503). best-effort: nothing is refused; the
    /// usage is brought up to date for the start of the recording.
    pub async fn admit(&self, user: &str) -> Result<(), ApiError> {
        let Some(quota) = &self.quota else {
            return Ok(());
        };
        if self.mode != RecordingMode::Strict {
            quota.warm();
            return Ok(());
        }
        match quota.used_by(user, QUOTA_WAIT_STRICT).await {
            None => Err(ApiError::ServiceUnavailable(
                "the recording store's usage cannot be read, so --recording-quota-per-user \
                 cannot be checked and the session was not started (--recording-mode=strict); \
                 retry"
                    .to_owned(),
            )),
            Some(used) if used >= quota.per_user() => Err(ApiError::ForbiddenMessage(format!(
                "exceeded quota: the recordings of user {user:?} hold {} in the recording store, \
                 at or over --recording-quota-per-user ({}); with --recording-mode=strict no \
                 session is started that could not be recorded (ask an operator to delete old \
                 recordings or raise the quota)",
                human_bytes(used),
                human_bytes(quota.per_user())
            ))),
            Some(_) => Ok(()),
        }
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
        deleted: Counter,
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
                        deleted.inc_by(n as u64);
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
        // What remains of the user's quota caps this recording when it is below the size limit.
        let quota_left = match &self.quota {
            Some(q) => {
                let used = q.used_by(&info.user, QUOTA_WAIT_BEST_EFFORT).await;
                if used.is_none() {
                    tracing::warn!(user = %info.user, "the store's usage is not known yet: this recording is not capped by --recording-quota-per-user");
                }
                used.map(|u| q.per_user().saturating_sub(u))
            }
            None => None,
        };
        let (cap, cap_reason) = match quota_left {
            Some(left) if self.max_bytes == 0 || left < self.max_bytes => (left, QUOTA_REACHED),
            _ => (self.max_bytes, SIZE_LIMIT),
        };
        // Too little left for more than the header: the recording is the header and its marker.
        let exhausted = cap_reason == QUOTA_REACHED && cap < options::MIN_CAP;
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
            command_count: self.record_input.then_some(0),
            justification: info.justification.clone(),
            mac: None,
            evidence: None,
            verified: false,
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
        let shared = Arc::new(TapShared::new(
            strict.then(|| end.clone()),
            self.memory.clone(),
        ));
        let started = Instant::now();
        let digests = writer::Digests::default();
        let writer = Writer {
            sink: PartSink::new(
                self.store.clone(),
                meta.clone(),
                self.part_interval,
                digests.clone(),
            ),
            lines: Lines {
                buf: Vec::new(),
                header,
                header_written: false,
                screen: None,
                // Keyframes go with the signed statement: an unsigned store keeps none, and
                // its writer draws no screen.
                keyframes: self.store.signs(),
                // strict: the tap counts the cap on recorded bytes and ends the session; the
                // file is never cut.
                capped: Capped::new(if strict || exhausted { 0 } else { cap }),
                cap_reason,
                exhausted: exhausted && !strict,
                out_text: Utf8Carry::default(),
                in_text: Utf8Carry::default(),
                exit_code: None,
                commands: self.record_input.then(CommandLog::default),
                index: crate::index::IndexBuilder::new(),
                indexed_commands: 0,
            },
            started,
            shared: shared.clone(),
            held: Held::new(self.memory.clone()),
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
                // A quota with nothing left ends the session at its first recorded byte.
                strict_cap: strict.then_some(if cap_reason == QUOTA_REACHED {
                    cap.max(1)
                } else {
                    cap
                }),
                strict_cap_why: if cap_reason == QUOTA_REACHED {
                    "its user's recording quota (--recording-quota-per-user) was reached"
                } else {
                    "its size limit (--max-recording-bytes) was reached"
                },
            },
            writer,
            meta,
            store: self.store.clone(),
            digests,
            quota: self.quota.clone(),
        })
    }
}

/// `n` bytes as people read them (`1.5 GiB`, `512 KiB`, `300 B`).
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    let text = format!("{v:.1}");
    format!("{} {unit}", text.strip_suffix(".0").unwrap_or(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use options::MIN_CAP;
    use poddebug_stream::Recorded;
    use poddebug_types::evidence::Verification;
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
        recorder_with(mode, cap, input, rate, 0, 0).await
    }

    async fn recorder_with(
        mode: RecordingMode,
        cap: u64,
        input: bool,
        rate: u64,
        memory: u64,
        quota: u64,
    ) -> (Recorder, PathBuf) {
        let dir = std::env::temp_dir().join(format!("poddebug-rec-{:x}", rand::random::<u64>()));
        let r = Recorder::from_options(
            &RecordingOptions {
                recording_store: None,
                recording_sse: None,
                recording_dir: Some(dir.clone()),
                recording_mode: mode,
                record_input: input,
                max_recording_bytes: cap,
                max_recording_rate: rate,
                recording_part_interval: Duration::from_secs(5),
                recording_retention: Duration::ZERO,
                max_recording_memory: memory,
                recording_quota_per_user: quota,
                recording_keys_resync_period: Duration::from_secs(30),
                recording_signing: true,
            },
            SharedRecordKey::loaded(poddebug_storage::record_key::RecordKey::generate()),
            UntrustedRecords::default(),
            Gauge::default(),
            Some(crate::keys::SharedKeys::loaded(
                crate::keys::Keys::generate().unwrap(),
            )),
        )
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

    /// The part objects of a recording in a directory store, in order.
    fn part_files(dir: &std::path::Path, id: &str) -> Vec<PathBuf> {
        let mut parts: Vec<PathBuf> = std::fs::read_dir(dir.join("ns/pod").join(id))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "part"))
            .collect();
        parts.sort();
        parts
    }

    async fn verdict(r: &Recorder, id: &str) -> (Verification, Option<u32>, String) {
        let v = r
            .store()
            .verification("ns", "pod", id)
            .await
            .unwrap()
            .unwrap();
        (v.result, v.part, v.message)
    }

    #[tokio::test]
    async fn a_recording_verifies_and_an_edited_or_removed_part_is_named() {
        let (r, dir) = recorder(0, false).await;
        // Parts of 1 MiB: three and a bit.
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        for _ in 0..(3 * 1024 + 100) {
            rec(&s, vec![out(&[b'y'; 1000])]).await;
        }
        let id = s.id().to_owned();
        s.finish(async { Some(0) }).await;
        let parts = part_files(&dir, &id);
        assert!(parts.len() >= 3, "{parts:?}");
        let (result, part, why) = verdict(&r, &id).await;
        assert_eq!((result, part), (Verification::Verified, None), "{why}");
        // The time table and the keyframes: each part after the first has the screen as it
        // began beside it, named in the signed statement.
        let m = r
            .store()
            .read_meta("ns", "pod", &id)
            .await
            .unwrap()
            .unwrap();
        let e = m.evidence.unwrap();
        assert!(e.parts[0].keyframe_sha256.is_none());
        let mut last_end = 0;
        for (k, p) in e.parts.iter().enumerate() {
            let (start, end) = (p.start_micros.unwrap(), p.end_micros.unwrap());
            assert!(last_end <= start && start <= end, "{p:?}");
            last_end = end;
            if k == 0 {
                continue;
            }
            let kf = std::fs::read(parts[k].with_extension("key")).unwrap();
            assert_eq!(
                p.keyframe_sha256.as_deref(),
                Some(crate::chain::hex(&crate::chain::sha256(&kf)).as_str())
            );
            assert!(String::from_utf8_lossy(&kf).contains("yyyyyyyy"));
        }
        // One byte changed in part 1.
        let mut bytes = std::fs::read(&parts[1]).unwrap();
        bytes[100] ^= 0x20;
        std::fs::write(&parts[1], &bytes).unwrap();
        let (result, part, why) = verdict(&r, &id).await;
        assert_eq!((result, part), (Verification::Tampered, Some(1)), "{why}");
        bytes[100] ^= 0x20;
        std::fs::write(&parts[1], &bytes).unwrap();
        assert_eq!(verdict(&r, &id).await.0, Verification::Verified);
        // The last part removed from the completed recording.
        let last = parts.len() as u32 - 1;
        std::fs::remove_file(&parts[last as usize]).unwrap();
        let (result, part, why) = verdict(&r, &id).await;
        assert_eq!(
            (result, part),
            (Verification::Tampered, Some(last)),
            "{why}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_recording_whose_recorder_died_verifies_as_truncated() {
        let (r, dir) = recorder(0, false).await;
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        for _ in 0..(2 * 1024 + 100) {
            rec(&s, vec![out(&[b'z'; 1000])]).await;
        }
        let id = s.id().to_owned();
        // Wait (bounded) until the writer wrote two parts and the metadata listing them.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let m = r
                .store()
                .read_meta("ns", "pod", &id)
                .await
                .unwrap()
                .unwrap();
            if m.evidence.as_ref().is_some_and(|e| e.parts.len() >= 2) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "two parts listed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The replica dies: the session never finishes. While its metadata is fresh, what
        // was written holds; once it is stale, the recording is truncated, not tampered.
        s.writer.abort();
        let (result, _, why) = verdict(&r, &id).await;
        assert_eq!(result, Verification::Verified, "{why}");
        let m = r
            .store()
            .read_meta("ns", "pod", &id)
            .await
            .unwrap()
            .unwrap();
        let listed = m.evidence.as_ref().unwrap().parts.len() as u32;
        // Its metadata, no longer renewed, goes stale.
        let mut stale = m.clone();
        stale.renewed = Some("2020-01-01T00:00:00Z".to_owned());
        assert!(!crate::verify::running(&stale, jiff::Timestamp::now()));
        let keys = r.store().signing_keys().unwrap().trusted().clone();
        let v = crate::verify::Verifier::new(&stale, &keys, (0..listed).collect(), false);
        let v = {
            let mut v = v;
            let files = part_files(&dir, &id);
            while let Some(seq) = v.next_part() {
                let data = std::fs::read(&files[seq as usize]).unwrap();
                v.part(data.len() as u64, &crate::chain::sha256(&data));
            }
            v.finish()
        };
        assert_eq!(
            (v.result, v.part),
            (Verification::Truncated, Some(listed)),
            "{}",
            v.message
        );
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
    async fn the_commands_typed_are_stored_with_the_recording_and_counted() {
        let (r, dir) = recorder(0, true).await;
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        let id = s.id().to_owned();
        let typed = |b: &'static [u8]| vec![Recorded::Input(Bytes::from_static(b))];
        // An edited line, split across reads; an abandoned one; a recalled one; and a line
        // still being typed when the session ends, which was never submitted.
        rec(&s, typed(b"cat /etc/pas")).await;
        rec(&s, typed(b"swdd\x7f\r")).await;
        rec(&s, vec![out(b"root:x:0:0\r\n")]).await;
        rec(&s, typed(b"rm -rf /\x03")).await;
        rec(&s, typed(b"\x1b[A | wc -l\r")).await;
        rec(&s, typed(b"unfinished")).await;
        let f = s.finish(async { Some(0) }).await;
        assert!(!f.truncated);
        let list = r
            .store()
            .read_commands("ns", "pod", &id)
            .await
            .unwrap()
            .unwrap();
        assert!(list.verified);
        assert_eq!(list.dropped, 0);
        let lines: Vec<(&str, bool)> = list
            .items
            .iter()
            .map(|c| (c.line.as_str(), c.recalled))
            .collect();
        assert_eq!(lines, [("cat /etc/passwd", false), (" | wc -l", true)]);
        assert!(list.items[0].offset <= list.items[1].offset);
        let meta = &r.store().list(Some("ns"), Some("pod")).await.unwrap()[0];
        assert_eq!(meta.command_count, Some(2));
        // The search index holds the commands as submitted and the output, with their times.
        let found = |text: &str| {
            let store = r.store().clone();
            let id = id.clone();
            let needle = crate::index::Needle::new(text).unwrap();
            async move {
                match store.read_index("ns", "pod", &id).await.unwrap() {
                    store::IndexRead::Found(s) => s.search(&needle, 10),
                    other => panic!("{other:?}"),
                }
            }
        };
        let f = found("/ETC/PASSWD").await;
        assert_eq!(f.total, 1);
        assert_eq!(
            (f.matches[0].source.as_str(), f.matches[0].text.as_str()),
            ("Command", "cat /etc/passwd")
        );
        assert_eq!(f.matches[0].offset, list.items[0].offset);
        let f = found("root:x").await;
        assert_eq!(
            (f.matches[0].source.as_str(), f.matches[0].text.as_str()),
            ("Output", "root:x:0:0")
        );
        assert_eq!(found("passwdd").await.total, 0, "the edited-away text");
        assert_eq!(found("rm -rf").await.total, 0, "the abandoned line");
        assert_eq!(found("unfinished").await.total, 0, "never submitted");
        // The commands are no part of the asciicast file.
        let cast = cast_text(&r, &id).await;
        assert!(
            cast.lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn without_recorded_input_there_are_no_commands() {
        let (r, dir) = recorder(0, false).await;
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        rec(&s, vec![out(b"$ ")]).await;
        rec(&s, vec![out(b"\x1b[32mdone")]).await;
        let id = s.id().to_owned();
        s.finish(async { Some(0) }).await;
        let meta = &r.store().list(Some("ns"), Some("pod")).await.unwrap()[0];
        assert_eq!(meta.command_count, None);
        // The output is indexed all the same, its last line too (ended by the session's end).
        let store::IndexRead::Found(s) = r.store().read_index("ns", "pod", &id).await.unwrap()
        else {
            panic!("no index")
        };
        let f = s.search(&crate::index::Needle::new("$ done").unwrap(), 10);
        assert_eq!(
            f.matches
                .iter()
                .map(|m| m.source.as_str())
                .collect::<Vec<_>>(),
            ["Output"]
        );
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

    /// `n` reads of 99 bytes of output each.
    fn output(n: usize) -> Vec<Recorded> {
        (0..n).map(|_| out(&[b'x'; 99])).collect()
    }

    /// Hand the tap one message, as the relay does.
    async fn put(tap: &Tap, e: Recorded) {
        poddebug_stream::Recorder::record(tap, vec![e]).await;
    }

    #[tokio::test]
    async fn best_effort_sessions_stop_being_recorded_when_the_replicas_memory_is_full() {
        // 64 KiB for all sessions: the first holds 40 KiB (not yet a part), the second finds
        // room for about 24 KiB more.
        let (r, dir) = recorder_with(RecordingMode::BestEffort, 0, false, 0, 64 << 10, 0).await;
        let (a, b) = (
            r.start(info(), &EndSignal::default()).await.unwrap(),
            r.start(info(), &EndSignal::default()).await.unwrap(),
        );
        for f in output(400) {
            put(a.tap(), f).await;
        }
        for f in output(400) {
            put(b.tap(), f).await;
        }
        assert!(r.memory().used() <= 64 << 10, "{}", r.memory().used());
        let (ida, idb) = (a.id().to_owned(), b.id().to_owned());
        let (fa, fb) = (
            a.finish(async { None }).await,
            b.finish(async { None }).await,
        );
        assert!(!fa.truncated);
        assert!(fb.truncated);
        assert_eq!(r.memory().used(), 0, "all given back");
        let cast = cast_text(&r, &idb).await;
        let last: serde_json::Value = serde_json::from_str(cast.lines().last().unwrap()).unwrap();
        assert_eq!(
            last[2],
            "recording truncated: the replica's recording memory (--max-recording-memory) was full"
        );
        assert!(cast.len() < 40_000, "{}", cast.len());
        assert!(cast_text(&r, &ida).await.len() > 39_600);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_strict_stream_waits_for_room_in_the_replicas_memory() {
        let (r, dir) = recorder_with(RecordingMode::Strict, 0, false, 0, 64 << 10, 0).await;
        let r = Arc::new(r);
        let (a, b) = (
            r.start(info(), &EndSignal::default()).await.unwrap(),
            r.start(info(), &EndSignal::default()).await.unwrap(),
        );
        for f in output(400) {
            put(a.tap(), f).await;
        }
        let b = Arc::new(b);
        let relay = {
            let b = b.clone();
            tokio::spawn(async move {
                for f in output(400) {
                    put(b.tap(), f).await;
                }
            })
        };
        // No room comes while the first session holds its 40 KiB: the second's relay waits.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while r.memory().used() < 60 << 10 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert!(!relay.is_finished(), "the relay waits for room");
        assert!(r.memory().used() <= 64 << 10, "{}", r.memory().used());
        // The first session ends: its recording is written, the room given back, and the
        // second's relay goes on; nothing of it was lost.
        let fa = a.finish(async { None }).await;
        tokio::time::timeout(Duration::from_secs(10), relay)
            .await
            .expect("the relay went on")
            .unwrap();
        let b = Arc::into_inner(b).unwrap();
        let idb = b.id().to_owned();
        let fb = b.finish(async { None }).await;
        assert!(!fa.truncated && !fb.truncated);
        let recorded: usize = cast_text(&r, &idb)
            .await
            .lines()
            .skip(1)
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()[2]
                    .as_str()
                    .unwrap()
                    .len()
            })
            .sum();
        assert_eq!(recorded, 400 * 99);
        assert_eq!(r.memory().used(), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_best_effort_recording_stops_at_its_users_quota() {
        const QUOTA: u64 = 24 << 10;
        let (r, dir) = recorder_with(RecordingMode::BestEffort, 0, false, 0, 0, QUOTA).await;
        let quota = r.quota.clone().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        // Wait (bounded) until a scan of the store counts at least `n` bytes of alice's.
        let counted = |n: u64| {
            let quota = quota.clone();
            async move {
                loop {
                    let used = quota.used_by("alice", Duration::from_secs(5)).await;
                    if used.is_some_and(|u| u >= n) {
                        return used.unwrap_or(0);
                    }
                    assert!(tokio::time::Instant::now() < deadline, "{used:?} < {n}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        // About 12 KiB recorded: under the quota.
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        for f in output(100) {
            put(s.tap(), f).await;
        }
        let id = s.id().to_owned();
        assert!(!s.finish(async { None }).await.truncated);
        let first = cast_text(&r, &id).await.len() as u64;
        let used = counted(first).await;
        // What remains is less than the same again: the next recording stops there, marked.
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        for f in output(100) {
            put(s.tap(), f).await;
        }
        let id = s.id().to_owned();
        assert!(s.finish(async { None }).await.truncated);
        let cast = cast_text(&r, &id).await;
        assert!(
            cast.len() as u64 <= QUOTA - used,
            "{} > {}",
            cast.len(),
            QUOTA - used
        );
        let last: serde_json::Value = serde_json::from_str(cast.lines().last().unwrap()).unwrap();
        assert_eq!(
            last[2],
            "recording truncated: its user's recordings reached --recording-quota-per-user"
        );
        // Too little left for anything: the header and the marker. Nobody is refused.
        counted(QUOTA - options::MIN_CAP).await;
        assert!(r.admit("alice").await.is_ok(), "best-effort refuses nobody");
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        put(s.tap(), output(1).remove(0)).await;
        let id = s.id().to_owned();
        assert!(s.finish(async { None }).await.truncated);
        let cast = cast_text(&r, &id).await;
        assert_eq!(cast.lines().count(), 2, "{cast}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn strict_admission_refuses_a_user_at_their_quota_and_others_pass() {
        let (r, dir) = recorder_with(RecordingMode::Strict, 0, false, 0, 0, 8 << 10).await;
        assert!(r.admit("alice").await.is_ok());
        let s = r.start(info(), &EndSignal::default()).await.unwrap();
        for f in output(100) {
            put(s.tap(), f).await;
        }
        s.finish(async { None }).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let refused = loop {
            match r.admit("alice").await {
                Err(e) => break e,
                Ok(()) => {
                    assert!(tokio::time::Instant::now() < deadline, "alice is refused");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        assert_eq!(refused.code(), 403);
        assert!(
            refused
                .message()
                .starts_with("exceeded quota: the recordings of user \"alice\" hold ")
                && refused
                    .message()
                    .contains("at or over --recording-quota-per-user (8 KiB)"),
            "{}",
            refused.message()
        );
        assert!(r.admit("bob").await.is_ok());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
