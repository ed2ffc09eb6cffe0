//! A recording in progress ([`Session`]) and how it ends ([`Session::finish`]): the writer
//! finishes the file, the exit code is settled, and the metadata is completed.

use super::store::{Metadata, Store};
use super::tap::Tap;
use super::writer::WriterEnd;

use std::time::Duration;

/// How long the end of a session waits for a writer that does nothing (no item turned into a
/// line, no write to the store finished) before it gives the recording up as truncated.
const WRITER_STALL: Duration = Duration::from_secs(30);
/// How long the end of a session waits for its writer at most, however steadily it works (a
/// strict session can end with up to the tap's queue, 16 MiB, still to write).
const WRITER_FINISH_MAX: Duration = Duration::from_secs(300);

/// Whether the end of a session goes on waiting for its writer: while the writer works, for up
/// to [`WRITER_FINISH_MAX`]; a writer that did nothing for [`WRITER_STALL`] is given up.
#[derive(Debug)]
struct FinishWait {
    seen: u64,
    waited: Duration,
}

impl FinishWait {
    fn new(progress: u64) -> FinishWait {
        FinishWait {
            seen: progress,
            waited: Duration::ZERO,
        }
    }

    /// After another [`WRITER_STALL`] without the writer finishing, with its progress now.
    fn keep_waiting(&mut self, progress: u64) -> bool {
        self.waited += WRITER_STALL;
        let moved = progress != self.seen;
        self.seen = progress;
        moved && self.waited < WRITER_FINISH_MAX
    }
}

/// A recording in progress.
#[derive(Debug)]
pub struct Session {
    pub(super) tap: Tap,
    pub(super) writer: tokio::task::JoinHandle<WriterEnd>,
    pub(super) meta: Metadata,
    pub(super) store: Store,
    /// The digests of the parts the writer wrote.
    pub(super) digests: super::writer::Digests,
    /// The quota whose usage this recording changes.
    pub(super) quota: Option<std::sync::Arc<super::quota::Quota>>,
}

/// How a recording ended.
#[derive(Clone, Debug)]
pub struct Finished {
    /// The recording id.
    pub id: String,
    /// The exit code (from the stream's error channel, else the fallback).
    pub exit_code: Option<i32>,
    /// Whether the recording was truncated.
    pub truncated: bool,
    /// When the recording started.
    pub start: Option<jiff::Timestamp>,
    /// The commands derived from the input (with `--record-input`; the first ones, within the
    /// bound of what a recording keeps), with their time from `start`.
    pub commands: Vec<poddebug_types::recording::RecordingCommand>,
}

impl Session {
    /// The tap the relay hands its chunks to.
    pub fn tap(&self) -> &Tap {
        &self.tap
    }

    /// The recording id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// A handle that writes markers into this recording.
    pub fn marker(&self) -> super::tap::Marker {
        super::tap::Marker {
            shared: self.tap.shared.clone(),
        }
    }

    /// End the recording: the writer finishes the file, the exit code is the one the stream
    /// reported, else `fallback`'s, and the metadata is completed.
    pub async fn finish(
        self,
        fallback: impl std::future::Future<Output = Option<i32>>,
    ) -> Finished {
        let Session {
            tap,
            mut writer,
            mut meta,
            store,
            digests,
            quota,
        } = self;
        tap.close();
        let shared = tap.shared.clone();
        drop(tap);
        // A writer that did not finish leaves the recording incomplete: it verifies as
        // truncated where its parts stop. One still working is waited for (a slow machine, a
        // strict session that ended with much queued), one that stalled is not.
        let progress = || shared.progress.load(std::sync::atomic::Ordering::Relaxed);
        let mut wait = FinishWait::new(progress());
        let finished = loop {
            match tokio::time::timeout(WRITER_STALL, &mut writer).await {
                Ok(r) => break r.ok(),
                Err(_) if wait.keep_waiting(progress()) => continue,
                Err(_) => break None,
            }
        };
        drop(shared);
        let mut complete = true;
        let end = match finished {
            Some(end) => end,
            None => {
                complete = false;
                writer.abort();
                tracing::warn!(id = %meta.id, "the recording could not be finished in time");
                WriterEnd {
                    stored: 0,
                    truncated: true,
                    exit_code: None,
                    command_count: None,
                    commands: Vec::new(),
                }
            }
        };
        // A non-zero code on the stream is the container's. A zero ("Success") is not proof:
        // containerd reports Success on the attach stream whatever the exit code, so the
        // container's own status decides when it has one; no code at all on the stream (the
        // user detached) is the status's or none.
        let exit_code = match end.exit_code {
            Some(c) if c != 0 => Some(c),
            Some(_) => fallback.await.or(Some(0)),
            None => fallback.await,
        };
        meta.end = Some(jiff::Timestamp::now().to_string());
        meta.bytes = end.stored;
        meta.renewed = None;
        meta.exit_code = exit_code;
        meta.truncated = end.truncated;
        // A writer that did not finish in time leaves the count of its last renewal unknown.
        meta.command_count = end.command_count;
        meta.evidence = Some(poddebug_types::evidence::Evidence {
            parts: digests.lock().map(|d| d.clone()).unwrap_or_default(),
            complete,
            ..Default::default()
        });
        if let Err(e) = store.write_meta(&meta).await {
            tracing::warn!(id = %meta.id, error = %e, "recording metadata could not be written");
        }
        // The store's usage changed: the next check of a quota here scans it again.
        if let Some(q) = quota {
            q.invalidate();
        }
        Finished {
            start: meta.start.parse().ok(),
            id: meta.id,
            exit_code,
            truncated: end.truncated,
            commands: end.commands,
        }
    }
}

/// The exit code a k8s error-channel Status reports: 0 for Success, the `ExitCode` cause of a
/// `NonZeroExitCode` failure; None for anything else.
pub fn exit_code_of_status(msg: &[u8]) -> Option<i32> {
    let v: serde_json::Value = serde_json::from_slice(msg).ok()?;
    if v["status"] == "Success" {
        return Some(0);
    }
    v["details"]["causes"]
        .as_array()?
        .iter()
        .find(|c| c["reason"] == "ExitCode")
        .and_then(|c| c["message"].as_str())
        .and_then(|m| m.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_waits_for_a_writer_while_it_works_and_within_the_bound() {
        // Working: waited for, again and again, until the bound.
        let mut w = FinishWait::new(0);
        let mut rounds = 0;
        while w.keep_waiting(rounds + 1) {
            rounds += 1;
        }
        assert_eq!(
            u128::from(rounds + 1),
            WRITER_FINISH_MAX.as_millis() / WRITER_STALL.as_millis()
        );
        // Stalled: given up at the first look that finds no progress.
        let mut w = FinishWait::new(7);
        assert!(w.keep_waiting(9));
        assert!(!w.keep_waiting(9));
        assert!(!FinishWait::new(3).keep_waiting(3));
    }

    #[test]
    fn exit_codes_from_the_error_channel() {
        assert_eq!(exit_code_of_status(br#"{"status":"Success"}"#), Some(0));
        assert_eq!(
            exit_code_of_status(
                br#"{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"42"}]}}"#
            ),
            Some(42)
        );
        assert_eq!(
            exit_code_of_status(br#"{"status":"Failure","message":"x"}"#),
            None
        );
        assert_eq!(exit_code_of_status(b"plain text"), None);
    }
}
