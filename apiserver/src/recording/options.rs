//! The session-recording flags.

use std::path::PathBuf;
use std::time::Duration;

/// Smallest accepted `--max-recording-bytes` (room for the header and the marker).
pub const MIN_CAP: u64 = 4096;

/// What the server does when a session cannot be recorded whole (`--recording-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordingMode {
    /// The session always goes on: a recorder that falls behind, a full size cap or a failed
    /// write end the recording (marked truncated), and output over --max-recording-rate leaves
    /// a marked gap.
    #[default]
    BestEffort,
    /// Nothing reaches the client unrecorded: the stream is slowed to the recorder's pace
    /// (its queue, and --max-recording-rate as a throttle) instead of dropping anything, and a
    /// session whose recording cannot go on (size cap, failed write) is ended with a message on
    /// its error channel.
    Strict,
}

impl RecordingMode {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordingMode::BestEffort => "best-effort",
            RecordingMode::Strict => "strict",
        }
    }
}

/// The session-recording flags.
#[derive(Clone, Debug, clap::Args)]
pub struct RecordingOptions {
    /// Directory where every attach session is recorded as an asciicast v2 file
    /// (NAMESPACE/POD/ID.cast, with ID.json metadata beside it). Recording is off when unset.
    /// With several replicas, a volume shared by all of them (ReadWriteMany).
    #[arg(long, help_heading = "Session recording")]
    pub recording_dir: Option<PathBuf>,
    /// What a session that cannot be recorded whole does: 'best-effort' (it goes on, its
    /// recording marked truncated or with marked gaps) or 'strict' (no output reaches the client
    /// unrecorded: the stream waits for the recorder, --max-recording-rate throttles it, and a
    /// recording that cannot go on ends the session). Either way a session whose recording
    /// cannot be opened is refused (503).
    #[arg(long, value_enum, default_value_t = RecordingMode::BestEffort, help_heading = "Session recording")]
    pub recording_mode: RecordingMode,
    /// Also record what the user typed (input events). Off by default: input may hold secrets.
    #[arg(long, help_heading = "Session recording")]
    pub record_input: bool,
    /// Largest recording of one session, in bytes (0 = no limit). best-effort: a recording
    /// that reaches it ends with a "recording truncated" marker and the session goes on
    /// unrecorded. strict: the limit counts the bytes recorded (the file holds them escaped),
    /// and the session is ended once it is reached.
    #[arg(long, default_value_t = 64 << 20, help_heading = "Session recording")]
    pub max_recording_bytes: u64,
    /// Most output (and, with --record-input, input) recorded per session and second, in
    /// bytes (0 = no limit); bursts of up to 8 seconds' worth are recorded whole. best-effort:
    /// beyond it the recording skips output until 8 seconds' worth has built up again, and
    /// marks each gap with the number of bytes skipped; the stream is never slowed. strict: the
    /// stream is slowed to this rate instead.
    #[arg(long, default_value_t = 1 << 20, help_heading = "Session recording")]
    pub max_recording_rate: u64,
    /// Recordings last written longer ago than this are deleted by a periodic sweep
    /// (0 = keep forever).
    #[arg(long, default_value = "720h", value_parser = crate::options::parse_duration, help_heading = "Session recording")]
    pub recording_retention: Duration,
}

impl RecordingOptions {
    /// Every problem with the flags.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if self.max_recording_bytes != 0 && self.max_recording_bytes < MIN_CAP {
            errs.push(format!(
                "--max-recording-bytes must be 0 or at least {MIN_CAP}"
            ));
        }
        if self.recording_mode == RecordingMode::Strict && self.recording_dir.is_none() {
            errs.push(
                "--recording-mode=strict needs a place to record: set --recording-dir".to_owned(),
            );
        }
        if let Some(dir) = &self.recording_dir
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            errs.push(format!(
                "--recording-dir: {} cannot be created: {e}",
                dir.display()
            ));
        }
        errs
    }
}
