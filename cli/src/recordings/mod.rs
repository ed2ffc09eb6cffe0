//! `recordings`: the session recordings the server keeps, one subcommand per verb.

use std::process::ExitCode;

use clap::Subcommand;

mod search;

/// `kubectl poddebug recordings VERB`.
#[derive(Subcommand, Debug)]
pub enum Recordings {
    /// Find the recordings whose commands or output hold TEXT (case-insensitive), with the
    /// lines that hold it and when in the session.
    #[command(after_help = search::EXAMPLES)]
    Search(search::SearchArgs),
}

/// Run `cmd` in namespace `ns`.
pub async fn run(client: &kube::Client, ns: &str, cmd: Recordings) -> ExitCode {
    match cmd {
        Recordings::Search(args) => search::run(client, ns, args).await,
    }
}
