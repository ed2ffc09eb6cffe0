//! `kubectl poddebug recordings …`: session recordings.

mod play;

use std::process::ExitCode;

use clap::Subcommand;

/// `recordings` subcommands.
#[derive(Subcommand, Debug)]
pub enum Recordings {
    /// Play a recording in this terminal, at its pace or faster (from a session time, pauses
    /// cut short).
    #[command(after_help = play::EXAMPLES)]
    Play(play::PlayArgs),
}

/// Run a `recordings` subcommand in namespace `ns`.
pub async fn run(client: &kube::Client, ns: &str, command: Recordings) -> ExitCode {
    match command {
        Recordings::Play(args) => play::run(client, ns, args).await,
    }
}
