//! The command line, as kubectl's: global `-n`, `--context`, `--kubeconfig`; `POD` alone means
//! `run POD`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::output::Format;
use crate::request::{parse_duration, parse_env};

/// Debug running pods through the poddebug.dev API.
///
/// `kubectl poddebug POD -it [-- CMD...]` is short for `kubectl poddebug run POD -it [-- CMD...]`.
#[derive(Parser, Debug)]
#[command(name = "kubectl-poddebug", bin_name = "kubectl poddebug", version)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Namespace of the pod (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// kubeconfig context.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// kubeconfig file.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Add a debug container to a pod (the default subcommand), wait for it, attach with -i.
    Run(RunArgs),
    /// Show one debug container, or all of a pod's.
    Get {
        /// The pod.
        pod: String,
        /// Debug container name.
        name: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// List debug containers (as `kubectl get poddebugcontainers`).
    List {
        /// In all namespaces.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Label selector on the pods.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// Stop a debug container's processes.
    Stop {
        /// The pod.
        pod: String,
        /// Debug container name.
        name: String,
        /// Seconds between SIGTERM and SIGKILL.
        #[arg(long, default_value_t = 10)]
        grace_period: u64,
        /// Output format of the stopped object.
        #[arg(short = 'o', long, value_enum)]
        output: Option<Format>,
    },
    /// Attach to a running debug container's console.
    Attach {
        /// The pod.
        pod: String,
        /// Debug container name.
        name: String,
        /// Pass stdin to the container.
        #[arg(short = 'i', long)]
        stdin: bool,
        /// Stdin is a TTY (raw local terminal, resize events).
        #[arg(short = 't', long)]
        tty: bool,
        /// Print fewer messages.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Print a debug container's output.
    Logs {
        /// The pod.
        pod: String,
        /// Debug container name.
        name: String,
        /// Follow the output.
        #[arg(short = 'f', long)]
        follow: bool,
        /// Only output newer than this (30s, 5m, 1h).
        #[arg(long, value_parser = parse_duration)]
        since: Option<Duration>,
        /// Only this many lines from the end.
        #[arg(long)]
        tail: Option<i64>,
        /// Prefix every line with its timestamp.
        #[arg(long)]
        timestamps: bool,
    },
    /// List the live sessions: who is attached to which debug container, through any replica.
    Sessions {
        /// In all namespaces.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only the sessions on this pod's debug containers.
        #[arg(long)]
        pod: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// End a live session, whichever replica relays it (its user is told who ended it).
    Terminate {
        /// The session id (as `sessions` lists it).
        session: String,
    },
    /// Join a live session: attach to its debug container as a peer (you may type; needs join
    /// on pods/debug), an observer (--observe) or a moderator (--moderate).
    Join {
        /// The session id (as `sessions` lists it).
        session: String,
        /// Watch only: never send input (needs observe on pods/debug).
        #[arg(long, conflicts_with = "moderate")]
        observe: bool,
        /// Join as a moderator: watch, and let a moderated session's owner type (needs
        /// moderate on pods/sessions).
        #[arg(long)]
        moderate: bool,
        /// Print fewer messages.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Show the debug profiles and the policy in force.
    Profiles {
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
}

/// Subcommand names; any other first word is a pod for `run`.
const SUBCOMMANDS: [&str; 11] = [
    "run",
    "get",
    "list",
    "stop",
    "attach",
    "logs",
    "sessions",
    "terminate",
    "join",
    "profiles",
    "help",
];

/// `kubectl poddebug POD ...` means `kubectl poddebug run POD ...`.
pub fn with_default_subcommand(args: Vec<OsString>) -> Vec<OsString> {
    let mut i = 1;
    while let Some(a) = args.get(i).and_then(|a| a.to_str()) {
        match a {
            "-n" | "--namespace" | "--context" | "--kubeconfig" => i += 2,
            "--" => return args,
            a if a.starts_with('-') => {
                if a == "-h" || a == "--help" || a == "-V" || a == "--version" {
                    return args;
                }
                i += 1;
            }
            a if SUBCOMMANDS.contains(&a) => return args,
            _ => {
                let mut out = args;
                out.insert(i, "run".into());
                return out;
            }
        }
    }
    args
}

/// `run`: what to create and how to attach.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The pod.
    pub pod: String,
    /// Debug container name (generated, debugger-xxxxx, when absent).
    #[arg(short = 'c', long = "container")]
    pub name: Option<String>,
    /// Image (the server's --default-image when absent).
    #[arg(long)]
    pub image: Option<String>,
    /// Container whose namespaces (PID) to join.
    #[arg(long)]
    pub target: Option<String>,
    /// legacy, general, baseline, restricted, netadmin or sysadmin.
    #[arg(long)]
    pub profile: Option<String>,
    /// How long the debug container may run before the server stops it (30m, 2h, 0 = no
    /// limit); the server's --default-debug-ttl when absent.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// Keep stdin open on the container and attach to it.
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Allocate a TTY.
    #[arg(short = 't', long)]
    pub tty: bool,
    /// Attach once it runs (default: true with -i).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub attach: Option<bool>,
    /// Wait for it to run even without attaching.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting for it to start after this long (30s, 5m, 1h).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print fewer messages.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Environment variable KEY=VALUE (repeatable).
    #[arg(long = "env", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Output format of the created object when not attaching.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Format>,
    /// Command and arguments.
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_pod_first_means_run() {
        assert_eq!(
            with_default_subcommand(args(&["p", "web", "-it", "--", "sh"])),
            args(&["p", "run", "web", "-it", "--", "sh"])
        );
        assert_eq!(
            with_default_subcommand(args(&["p", "-n", "shop", "web", "-it"])),
            args(&["p", "-n", "shop", "run", "web", "-it"])
        );
        assert_eq!(
            with_default_subcommand(args(&["p", "--context", "c", "list", "-A"])),
            args(&["p", "--context", "c", "list", "-A"])
        );
        assert_eq!(
            with_default_subcommand(args(&["p", "--help"])),
            args(&["p", "--help"])
        );
    }

    #[test]
    fn the_command_line_parses() {
        let cli = Cli::try_parse_from(with_default_subcommand(args(&[
            "p", "web", "-it", "--image", "busybox", "-c", "dbg", "--", "sh", "-c", "exit 7",
        ])))
        .map_err(|e| e.to_string());
        let Ok(Cli {
            command:
                Cmd::Run(RunArgs {
                    pod,
                    stdin,
                    tty,
                    attach,
                    command,
                    ..
                }),
            ..
        }) = cli
        else {
            panic!("{cli:?}");
        };
        assert_eq!(pod, "web");
        assert!(stdin && tty && attach.is_none());
        assert_eq!(command, ["sh", "-c", "exit 7"]);
    }
}
