//! The command line, as kubectl's: its global flags (`-n`, `--context`, `--kubeconfig`, `--as`,
//! `--as-group`, `--request-timeout`) anywhere, `kubectl debug`'s flags before or after the
//! pod, and `POD` (or run flags, or `-f FILE`) without a subcommand meaning `run`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::output::Format;
use crate::request::{EnvList, PullPolicy, parse_env, parse_pull_policy};
use poddebug_client::types::duration::parse as parse_duration;

/// The plugin's description, as kubectl's commands open their help.
const ABOUT: &str =
    "Debug pods and nodes through the poddebug.dev API, with the cluster's permissions.";

const LONG_ABOUT: &str = "\
Debug pods and nodes through the poddebug.dev API, with the cluster's permissions.

 'kubectl poddebug POD' adds a debug container (an ephemeral container) to a running pod, as
'kubectl debug POD' does, but through the poddebug server: it checks that you may use the
profile you ask for, applies the cluster's policy (images, time limits) and records who did
what. With -it it waits for the container, attaches your terminal, and exits with the
container's exit code; type Ctrl-P Ctrl-Q to detach and leave it running.

 Profiles set what the debug container may do: legacy, general, baseline, restricted,
netadmin, sysadmin. A pod's debug container gets 'general' unless --profile says otherwise
(or the server's --default-profile), a node's gets 'sysadmin'. 'kubectl poddebug profiles'
shows them, the default, and which need the 'use' permission.

 'kubectl poddebug POD ...' is short for 'kubectl poddebug run POD ...'.";

/// The Examples section of `kubectl poddebug --help`, in kubectl's layout.
const EXAMPLES: &str = "\
Examples:
  # Debug pod web: a shell in a debug container (profile general, the pods' default) that
  # sees the processes of its container app
  kubectl poddebug web -it --image=busybox:1.36 --target=app -- sh

  # The same with another profile (see 'kubectl poddebug profiles'), stopped after 30 minutes
  kubectl poddebug web -it --image=busybox:1.36 --profile=netadmin --ttl=30m -- sh

  # Debug a copy of pod web, named web-debug, with a debug container added to it
  kubectl poddebug web -it --copy-to=web-debug --image=busybox:1.36 -- sh

  # Debug a copy of pod web whose container app runs a shell instead of its command
  kubectl poddebug web -it --copy-to=web-debug --container=app -- sh

  # Debug node worker-1: a shell in a pod on the node, in the host's namespaces, with the
  # node's filesystem at /host (profile sysadmin, the nodes' default: root on the node)
  kubectl poddebug node/worker-1 -it --image=busybox:1.36 -- chroot /host

  # List debug containers, show pod web's, read one's output, attach to it again
  kubectl poddebug list
  kubectl poddebug get web
  kubectl poddebug logs web debugger-x7k2p
  kubectl poddebug attach web debugger-x7k2p -it

  # Stop a debug container; delete a copy, or a node debug container
  kubectl poddebug delete web debugger-x7k2p
  kubectl poddebug delete web --copy-to=web-debug
  kubectl poddebug delete node/worker-1 debugger-q8v4n

  # Sessions: who is attached where; watch one, end one
  kubectl poddebug sessions -A
  kubectl poddebug join SESSION --observe
  kubectl poddebug terminate SESSION

  # The recordings in which a text was typed or printed
  kubectl poddebug recordings search /etc/shadow -A

  # What the profiles allow, and the policy in force
  kubectl poddebug profiles -o wide";

/// The Examples of `kubectl poddebug run --help`.
const RUN_EXAMPLES: &str = "\
Examples:
  # A shell in a new debug container of pod web, sharing container app's processes
  kubectl poddebug run web -it --image=busybox:1.36 --target=app -- sh

  # Create one without attaching, and print it
  kubectl poddebug run web --image=busybox:1.36 -o yaml -- sleep 3600

  # Ask the server whether it would be allowed, creating nothing
  kubectl poddebug run web --image=busybox:1.36 --profile=sysadmin --dry-run=server

  # Debug a copy of pod web (deleted with 'kubectl poddebug delete web --copy-to=web-debug')
  kubectl poddebug run web -it --copy-to=web-debug --image=busybox:1.36 -- sh

  # Debug node worker-1 (profile sysadmin unless --profile says otherwise)
  kubectl poddebug run node/worker-1 -it --image=busybox:1.36 -- chroot /host";

/// The Examples of `kubectl poddebug delete --help`.
const DELETE_EXAMPLES: &str = "\
Examples:
  # Stop debug container debugger-x7k2p of pod web (a pod keeps its ephemeral containers:
  # it stays listed, terminated)
  kubectl poddebug delete web debugger-x7k2p

  # The same, by the name 'kubectl get poddebugcontainers' shows
  kubectl poddebug delete poddebugcontainer/web.debugger-x7k2p

  # Delete web-debug, a copy of pod web
  kubectl poddebug delete web --copy-to=web-debug

  # Delete a node debug container (its pod), by node and name or by its listed name
  kubectl poddebug delete node/worker-1 debugger-q8v4n
  kubectl poddebug delete nodedebugcontainer/worker-1.debugger-q8v4n";

/// kubectl's help layout: the description, the examples, then usage and flags.
const HELP_TEMPLATE: &str = "\
{about}{after-help}

{usage-heading}
  {usage}

{all-args}";

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-poddebug",
    bin_name = "kubectl poddebug",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    help_template = HELP_TEMPLATE
)]
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
    /// Username to impersonate for the operation (needs impersonate on users).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub impersonate: Option<String>,
    /// Group to impersonate for the operation, repeatable (needs --as).
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub impersonate_groups: Vec<String>,
    /// How long to wait for the server to answer a request before giving up (1s, 2m, 3h;
    /// 0: no limit). A session or a followed log runs on once it has begun.
    #[arg(long, global = true, default_value = "0", value_parser = parse_duration)]
    pub request_timeout: Duration,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Add a debug container to a pod (the default subcommand), wait for it, attach with -i.
    #[command(after_help = RUN_EXAMPLES, help_template = HELP_TEMPLATE)]
    Run(Box<RunArgs>),
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
    /// List debug containers (the server's table, as `kubectl get poddebugcontainers`).
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
    /// Stop a debug container, or delete a copy of a pod or a node debug container.
    #[command(after_help = DELETE_EXAMPLES, help_template = HELP_TEMPLATE)]
    Delete {
        /// The pod (or node/NODE), or a name as listed: poddebugcontainer/POD.NAME,
        /// nodedebugcontainer/NODE.NAME.
        target: String,
        /// The debug container's name (with POD or node/NODE).
        name: Option<String>,
        /// The copy of the pod to delete.
        #[arg(long, value_name = "NAME", conflicts_with = "name")]
        copy_to: Option<String>,
        /// Seconds between SIGTERM and SIGKILL.
        #[arg(long)]
        grace_period: Option<u64>,
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
    /// Session recordings: search them, play one, verify one without trusting the server.
    Recordings {
        /// What to do.
        #[command(subcommand)]
        command: crate::recordings::RecordingsCmd,
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
    /// Ask for a gated profile on a pod (node/NAME, or --copy-to) with a reason, wait for
    /// someone else to approve, then make the debug container under the request and attach
    /// (as `run` does).
    Request(Box<RequestArgs>),
    /// Approve someone else's debug request (needs approve on debugrequests named after its
    /// profile).
    Approve {
        /// The request.
        name: String,
        /// Why (recorded in the request's reviews).
        #[arg(long)]
        comment: Option<String>,
    },
    /// Deny someone else's pending debug request.
    Deny {
        /// The request.
        name: String,
        /// Why (recorded in the request's reviews).
        #[arg(long)]
        comment: Option<String>,
    },
    /// Revoke an approved debug request: what it opened ends at once.
    Revoke {
        /// The request.
        name: String,
        /// Why (recorded in the request's reviews).
        #[arg(long)]
        comment: Option<String>,
    },
}

/// `request`: the request's own flags, then `run`'s.
#[derive(Args, Debug)]
pub struct RequestArgs {
    /// How long the access lasts once approved (30m, 1h; the server's default, 1h, when
    /// absent, and at most the profile's --max-request-durations).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Give up waiting for a decision after this long (the request stays, pending).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub approval_timeout: Duration,
    /// What to make once it is approved, as `run` takes it.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Subcommand names; any other first word is a pod for `run`.
const SUBCOMMANDS: [&str; 17] = [
    "run",
    "delete",
    "get",
    "list",
    "stop",
    "attach",
    "logs",
    "sessions",
    "terminate",
    "join",
    "profiles",
    "request",
    "approve",
    "deny",
    "revoke",
    "recordings",
    "help",
];

/// Flags of kubectl's that are global: they may come before a subcommand.
const GLOBAL_FLAGS: [&str; 7] = [
    "-n",
    "--namespace",
    "--context",
    "--kubeconfig",
    "--as",
    "--as-group",
    "--request-timeout",
];

/// Long flags of any subcommand that take their value as the next word (`--image X`).
const LONG_WITH_VALUE: [&str; 30] = [
    "--reason",
    "--ticket",
    "--debug-request",
    "--duration",
    "--approval-timeout",
    "--comment",
    "--copy-to",
    "--set-image",
    "--namespace",
    "--context",
    "--kubeconfig",
    "--as",
    "--as-group",
    "--request-timeout",
    "--container",
    "--image",
    "--target",
    "--profile",
    "--ttl",
    "--timeout",
    "--env",
    "--output",
    "--image-pull-policy",
    "--custom",
    "--filename",
    "--selector",
    "--pod",
    "--grace-period",
    "--since",
    "--tail",
];

/// Short flags that take a value (`-n NS`, `-nNS`, `-c dbg`).
const SHORT_WITH_VALUE: [char; 5] = ['n', 'c', 'o', 'f', 'l'];

/// What one word of the command line is, before the first positional.
enum Word {
    /// A flag; `true` when the next word is its value.
    Flag { global: bool, takes_next: bool },
    /// A help or version flag: nothing is rewritten.
    Help,
    /// `--`.
    Dashes,
    /// A positional.
    Positional,
}

fn classify(a: &str) -> Word {
    if a == "--" {
        return Word::Dashes;
    }
    if matches!(a, "-h" | "--help" | "-V" | "--version") {
        return Word::Help;
    }
    if let Some(long) = a.strip_prefix("--") {
        let (name, has_value) = match long.split_once('=') {
            Some((n, _)) => (n, true),
            None => (long, false),
        };
        let flag = format!("--{name}");
        return Word::Flag {
            global: GLOBAL_FLAGS.contains(&flag.as_str()),
            takes_next: !has_value && LONG_WITH_VALUE.contains(&flag.as_str()),
        };
    }
    if let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
        // A cluster (`-it`, `-itq`) or a flag with its value attached (`-nshop`): the first
        // short flag that takes a value takes the rest, or the next word when it is last.
        let mut takes_next = false;
        let mut global = true;
        for (i, c) in shorts.char_indices() {
            global &= c == 'n';
            if SHORT_WITH_VALUE.contains(&c) {
                takes_next = i + c.len_utf8() == shorts.len();
                break;
            }
        }
        return Word::Flag { global, takes_next };
    }
    Word::Positional
}

/// `kubectl poddebug [FLAGS] POD [FLAGS] [-- CMD...]` means `kubectl poddebug run ...`, as
/// `kubectl debug` takes its flags on either side of the pod. A first positional that is a
/// subcommand keeps it; else `run` goes first whenever there is a pod, or a flag that is not
/// one of kubectl's global ones (`-it -f pod.yaml`, `--image X POD`). A pod named like a
/// subcommand needs `run` spelled out.
pub fn with_default_subcommand(args: Vec<OsString>) -> Vec<OsString> {
    let mut i = 1;
    let mut run_flags = false;
    while let Some(a) = args.get(i).and_then(|a| a.to_str()) {
        match classify(a) {
            Word::Help => return args,
            Word::Dashes => break,
            Word::Flag { global, takes_next } => {
                run_flags |= !global;
                i += if takes_next { 2 } else { 1 };
            }
            Word::Positional if SUBCOMMANDS.contains(&a) => return args,
            Word::Positional => {
                run_flags = true;
                break;
            }
        }
    }
    if !run_flags {
        return args;
    }
    let mut out = args;
    let at = 1.min(out.len());
    out.insert(at, "run".into());
    out
}

/// `run`: what to create and how to attach, with `kubectl debug`'s flags.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The pod (or -f FILE).
    #[arg(required_unless_present = "filename")]
    pub pod: Option<String>,
    /// A file (JSON or YAML) holding the pod to debug, as `kubectl debug -f` takes it.
    #[arg(
        short = 'f',
        long = "filename",
        conflicts_with = "pod",
        value_name = "FILE"
    )]
    pub filename: Option<PathBuf>,
    /// Debug container name (generated, debugger-xxxxx, when absent).
    #[arg(short = 'c', long = "container")]
    pub name: Option<String>,
    /// Image (the server's --default-image when absent).
    #[arg(long)]
    pub image: Option<String>,
    /// The image pull policy: Always, IfNotPresent or Never (the server's default when
    /// absent).
    #[arg(long, value_parser = parse_pull_policy)]
    pub image_pull_policy: Option<PullPolicy>,
    /// Container whose namespaces (PID) to join.
    #[arg(long)]
    pub target: Option<String>,
    /// legacy, general, baseline, restricted, netadmin or sysadmin.
    #[arg(long)]
    pub profile: Option<String>,
    /// A JSON or YAML file with a partial container spec merged into the debug container, as
    /// kubectl's --custom (name, command, image, lifecycle and volume devices excluded).
    #[arg(long, value_name = "FILE")]
    pub custom: Option<PathBuf>,
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
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
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
    /// Why (recorded with the debug container, its sessions and recordings, and the audit
    /// trail; required by servers that run with --require-reason).
    #[arg(long)]
    pub reason: Option<String>,
    /// A ticket or incident reference, recorded beside the reason.
    #[arg(long)]
    pub ticket: Option<String>,
    /// Make it under this approved debug request (see `request`): its profile without use on
    /// it, exactly what the request names, carrying its reason.
    #[arg(long, value_name = "NAME")]
    pub debug_request: Option<String>,
    /// Environment variables KEY=VALUE, comma-separated or repeated (as kubectl's --env).
    #[arg(long = "env", value_parser = parse_env)]
    pub env: Vec<EnvList>,
    /// Everything after -- is the container's args (its image's entrypoint runs), not its
    /// command.
    #[arg(long)]
    pub arguments_only: bool,
    /// none: create it; server: ask the server to check everything and create nothing;
    /// client: only print what would be sent.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "client", default_value = "none")]
    pub dry_run: DryRun,
    /// Output format of the created (or dry-run) object when not attaching.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Format>,
    /// Debug a copy of the pod, made with this name, instead of the pod itself.
    #[arg(long, value_name = "NAME")]
    pub copy_to: Option<String>,
    /// With --copy-to: container images to change, `name=image` (comma-separated, repeatable;
    /// `*=image` changes every container).
    #[arg(long = "set-image", value_name = "NAME=IMAGE", value_delimiter = ',')]
    pub set_image: Vec<String>,
    /// With --copy-to: the copy's containers share one process namespace.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub share_processes: bool,
    /// With --copy-to: run the copy on the original's node.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub same_node: bool,
    /// With --copy-to: keep the original's labels.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub keep_labels: bool,
    /// With --copy-to: keep the original's annotations.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub keep_annotations: bool,
    /// With --copy-to: keep liveness probes.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub keep_liveness: bool,
    /// With --copy-to: keep readiness probes.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub keep_readiness: bool,
    /// With --copy-to: keep startup probes.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub keep_startup: bool,
    /// With --copy-to: keep init containers.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub keep_init_containers: bool,
    /// Command and arguments.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// `--dry-run`, as kubectl's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// Create it.
    #[default]
    None,
    /// The server validates, authorizes and admits the request, and changes nothing.
    Server,
    /// Nothing is sent: the object that would be is printed.
    Client,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_pod_or_a_run_flag_first_means_run() {
        let cases: &[(&[&str], &[&str])] = &[
            (
                &["p", "web", "-it", "--", "sh"],
                &["p", "run", "web", "-it", "--", "sh"],
            ),
            (
                &["p", "-n", "shop", "web", "-it"],
                &["p", "run", "-n", "shop", "web", "-it"],
            ),
            (
                &[
                    "p",
                    "-it",
                    "-n",
                    "shop",
                    "web",
                    "--image=busybox:1.36",
                    "--",
                    "sh",
                ],
                &[
                    "p",
                    "run",
                    "-it",
                    "-n",
                    "shop",
                    "web",
                    "--image=busybox:1.36",
                    "--",
                    "sh",
                ],
            ),
            (
                &[
                    "p",
                    "--image",
                    "busybox:1.36",
                    "-n",
                    "shop",
                    "web",
                    "--",
                    "sh",
                ],
                &[
                    "p",
                    "run",
                    "--image",
                    "busybox:1.36",
                    "-n",
                    "shop",
                    "web",
                    "--",
                    "sh",
                ],
            ),
            (
                &["p", "-f", "pod.yaml", "-it", "--image=busybox"],
                &["p", "run", "-f", "pod.yaml", "-it", "--image=busybox"],
            ),
            (
                &["p", "-nshop", "-cdbg", "web"],
                &["p", "run", "-nshop", "-cdbg", "web"],
            ),
            // A value that looks like a subcommand is a value.
            (
                &["p", "-c", "list", "web"],
                &["p", "run", "-c", "list", "web"],
            ),
            (
                &["p", "--context", "c", "list", "-A"],
                &["p", "--context", "c", "list", "-A"],
            ),
            (
                &["p", "--as=bob", "-n", "x", "sessions"],
                &["p", "--as=bob", "-n", "x", "sessions"],
            ),
            (&["p", "--help"], &["p", "--help"]),
            (&["p", "-n", "shop"], &["p", "-n", "shop"]),
            (&["p"], &["p"]),
        ];
        for (given, want) in cases {
            assert_eq!(
                with_default_subcommand(args(given)),
                args(want),
                "{given:?}"
            );
        }
    }

    #[test]
    fn the_command_line_parses() {
        let cli = Cli::try_parse_from(with_default_subcommand(args(&[
            "p", "web", "-it", "--image", "busybox", "-c", "dbg", "--", "sh", "-c", "exit 7",
        ])))
        .map_err(|e| e.to_string());
        let Ok(Cli {
            command: Cmd::Run(run),
            ..
        }) = cli
        else {
            panic!("{cli:?}");
        };
        let RunArgs {
            pod,
            stdin,
            tty,
            attach,
            command,
            ..
        } = *run;
        assert_eq!(pod.as_deref(), Some("web"));
        assert!(stdin && tty && attach.is_none());
        assert_eq!(command, ["sh", "-c", "exit 7"]);
    }
}
