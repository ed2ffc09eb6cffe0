//! The session-recording flags.

use std::path::PathBuf;
use std::time::Duration;

/// Smallest accepted `--max-recording-bytes` (room for the header and the marker).
pub const MIN_CAP: u64 = 4096;
/// Smallest accepted `--max-recording-memory` other than 0.
pub const MIN_MEMORY: u64 = 1 << 20;

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
    /// Where every attach session is recorded (asciicast v2): file:///DIR, or s3://BUCKET/PREFIX
    /// for S3 and S3-compatible stores (credentials, region and endpoint from the AWS_*
    /// environment, as the AWS tools read them). Every replica must see the same store: with
    /// several replicas, s3:// (or a ReadWriteMany volume). Recording is off when unset.
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "recording_dir",
        help_heading = "Session recording"
    )]
    pub recording_store: Option<String>,
    /// Server-side encryption of the recordings written to an s3:// store: AES256 (keys
    /// managed by S3), aws:kms[:KEYID] (a KMS key; the account's default without KEYID) or
    /// aws:kms:dsse[:KEYID] (dual-layer). Every object is written with the
    /// x-amz-server-side-encryption header (and the KMS key's). Unset: the bucket's default.
    #[arg(long, value_name = "TYPE", value_parser = parse_sse, help_heading = "Session recording")]
    pub recording_sse: Option<super::store::Sse>,
    /// The same as --recording-store=file:///DIR (kept for existing deployments).
    #[arg(long, value_name = "DIR", help_heading = "Session recording")]
    pub recording_dir: Option<PathBuf>,
    /// What a session that cannot be recorded whole does: 'best-effort' (it goes on, its
    /// recording marked truncated or with marked gaps) or 'strict' (no output reaches the client
    /// unrecorded: the stream waits for the recorder, --max-recording-rate throttles it, and a
    /// recording that cannot go on ends the session). Either way a session whose recording
    /// cannot be opened is refused (503).
    #[arg(long, value_enum, default_value_t = RecordingMode::BestEffort, help_heading = "Session recording")]
    pub recording_mode: RecordingMode,
    /// Also record what the user typed (input events), and derive from it the lines the user
    /// submitted (GET …/pods/POD/recordings/ID/commands, status.commandCount). Off by
    /// default: input may hold secrets.
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
    /// How often a session's recording is written to the store while it runs: what gathered
    /// goes out as the next part at least this often (and at once past 1 MiB). A replica killed
    /// mid-session loses at most this much of it (1s to 60s).
    #[arg(long, default_value = "5s", value_parser = poddebug_types::duration::parse, help_heading = "Session recording")]
    pub recording_part_interval: Duration,
    /// Most memory the recordings of this replica hold at once, in bytes, all sessions
    /// together: what the relays queued and the writers have not yet written to the store
    /// (0 = no limit; else at least 1 MiB). best-effort: a session that finds no room stops
    /// being recorded (its recording marked truncated). strict: its stream waits for room,
    /// and is ended if none comes within 30 seconds.
    #[arg(long, default_value_t = 256 << 20, help_heading = "Session recording")]
    pub max_recording_memory: u64,
    /// Most bytes the recordings of one user may hold in the store (0 = no limit), computed
    /// from the store's objects (rescanned at most every 30 seconds; metadata that does not
    /// verify counts toward nobody). strict: a user at or over it is refused (403) at attach.
    /// best-effort: the session goes on and its recording stops (marked truncated) at what
    /// remained when it began.
    #[arg(long, default_value_t = 1 << 30, help_heading = "Session recording")]
    pub recording_quota_per_user: u64,
    /// Recordings last written longer ago than this are deleted by a periodic sweep of the
    /// leader (the replica holding the expiry Lease); 0 keeps them forever.
    #[arg(long, default_value = "0", value_parser = poddebug_types::duration::parse, help_heading = "Session recording")]
    pub recording_retention: Duration,
    /// How often a replica reads the Secret of the recording signing keys
    /// (poddebug-recording-signing-keys) again, and takes the keys it then holds: a rotation
    /// (a new active key, a retired one) applies this long after the Secret changed, without a
    /// restart. A Secret that does not hold valid keys is reported and the keys held are kept
    /// (1s to 1h).
    #[arg(long, default_value = "30s", value_parser = poddebug_types::duration::parse, help_heading = "Session recording")]
    pub recording_keys_resync_period: Duration,
    /// Sign what is recorded: each part's SHA-256, the hash chain over them and an Ed25519
    /// signature by the active key of the Secret poddebug-recording-signing-keys in the
    /// recording's metadata, and beside each part after the first a keyframe (the screen as
    /// the part begins). false: new recordings are written unsigned (status.verification:
    /// Unsigned) and without keyframes, which saves the CPU of drawing every recorded byte on a
    /// screen; recordings signed before still verify with the keys, which are still read.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL", help_heading = "Session recording")]
    pub recording_signing: bool,
}

fn parse_sse(s: &str) -> Result<super::store::Sse, String> {
    s.parse()
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
        if self.max_recording_memory != 0 && self.max_recording_memory < MIN_MEMORY {
            errs.push(format!(
                "--max-recording-memory must be 0 or at least {MIN_MEMORY}"
            ));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(60))
            .contains(&self.recording_part_interval)
        {
            errs.push("--recording-part-interval must be between 1s and 60s".to_owned());
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(3600))
            .contains(&self.recording_keys_resync_period)
        {
            errs.push("--recording-keys-resync-period must be between 1s and 1h".to_owned());
        }
        match self.store() {
            Ok(None) if self.recording_mode == RecordingMode::Strict => errs.push(
                "--recording-mode=strict needs a place to record: set --recording-store (or --recording-dir)"
                    .to_owned(),
            ),
            Ok(_) => {}
            Err(e) => errs.push(e),
        }
        if self.recording_sse.is_some()
            && !self
                .recording_store
                .as_deref()
                .is_some_and(|u| u.starts_with("s3://"))
        {
            errs.push("--recording-sse needs an s3:// --recording-store".to_owned());
        }
        errs
    }

    /// The store the flags name, if any.
    pub fn store(&self) -> Result<Option<super::store::Store>, String> {
        match (&self.recording_store, &self.recording_dir) {
            (Some(url), _) => {
                super::store::Store::from_url_with(url, self.recording_sse.as_ref()).map(Some)
            }
            (None, Some(dir)) => super::store::Store::dir(dir).map(Some),
            (None, None) => Ok(None),
        }
    }
}
