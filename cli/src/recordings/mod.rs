//! `recordings`: session recordings, searched, played and verified as evidence.

use std::path::PathBuf;

use clap::Subcommand;

use crate::output::Format;

pub mod play;
mod search;
pub mod verify;

/// `kubectl poddebug recordings …`.
#[derive(Subcommand, Debug)]
pub enum RecordingsCmd {
    /// Find the recordings whose commands or output hold TEXT (case-insensitive), with the
    /// lines that hold it and when in the session.
    #[command(after_help = search::EXAMPLES)]
    Search(search::SearchArgs),
    /// Play a recording in this terminal, at its pace or faster (from a session time, pauses
    /// cut short).
    #[command(after_help = play::EXAMPLES)]
    Play(play::PlayArgs),
    /// Verify a recording without trusting the server: its bytes against the SHA-256 of each
    /// part, the hash chain and the Ed25519 signature of its metadata, with the public keys
    /// (the cluster's recordingkeys, or --keys). Exit code 0: Verified; 3: Truncated;
    /// 4: Tampered; 5: Unsigned; 1: it could not be checked.
    #[command(after_help = verify::EXAMPLES)]
    Verify {
        /// The recording id (as `kubectl get debugrecordings` lists it); none with --evidence.
        #[arg(required_unless_present = "evidence")]
        id: Option<String>,
        /// The recording's pod (found from the recording when absent).
        #[arg(long)]
        pod: Option<String>,
        /// The public keys, a file (JSON or YAML: `kubectl get recordingkeys -o yaml`, or one
        /// key), instead of asking the cluster.
        #[arg(long, value_name = "FILE")]
        keys: Option<PathBuf>,
        /// Offline: the recording's evidence, saved from
        /// `kubectl get --raw …/pods/POD/recordings/ID/evidence` (needs --recording and
        /// --keys; the cluster is not contacted).
        #[arg(long, value_name = "FILE", requires_all = ["recording", "keys"], conflicts_with_all = ["id", "pod"])]
        evidence: Option<PathBuf>,
        /// Offline: the recording's bytes, saved from
        /// `kubectl get --raw …/pods/POD/recordings/ID`.
        #[arg(long, value_name = "FILE", requires = "evidence")]
        recording: Option<PathBuf>,
        /// Print the verdict as JSON or YAML.
        #[arg(short = 'o', long, value_enum)]
        output: Option<Format>,
    },
}

impl RecordingsCmd {
    /// Whether the command runs without a cluster (offline verification).
    pub fn offline(&self) -> bool {
        matches!(
            self,
            RecordingsCmd::Verify {
                evidence: Some(_),
                ..
            }
        )
    }
}

/// Run `recordings …`; `client` is `None` for the offline forms.
pub async fn run(
    client: Option<&kube::Client>,
    ns: &str,
    cmd: RecordingsCmd,
) -> std::process::ExitCode {
    match cmd {
        RecordingsCmd::Search(args) => match client {
            Some(c) => search::run(c, ns, args).await,
            None => std::process::ExitCode::FAILURE,
        },
        RecordingsCmd::Play(args) => match client {
            Some(c) => play::run(c, ns, args).await,
            None => std::process::ExitCode::FAILURE,
        },
        RecordingsCmd::Verify {
            id,
            pod,
            keys,
            evidence,
            recording,
            output,
        } => {
            let what = match (evidence, recording, client) {
                (Some(e), Some(r), _) => verify::Source::Files {
                    evidence: e,
                    recording: r,
                },
                (_, _, Some(c)) => verify::Source::Cluster {
                    client: c.clone(),
                    namespace: ns.to_owned(),
                    id: id.unwrap_or_default(),
                    pod,
                },
                _ => {
                    eprintln!("error: give a recording id, or --evidence, --recording and --keys");
                    return std::process::ExitCode::FAILURE;
                }
            };
            verify::run(what, keys.as_deref(), output).await
        }
    }
}
