//! `kubectl-poddebug`: a kubectl plugin (`kubectl poddebug ...`) for the poddebug.dev API, on
//! the poddebug-client crate. It reads the kubeconfig as kubectl does (`--kubeconfig`,
//! `--context`, `KUBECONFIG`, exec plugins, in-cluster) and spawns no process.
//!
//! `kubectl poddebug POD -it [--image I] [--target C] [--profile P] [-c NAME] [-- CMD...]`
//! behaves like `kubectl debug POD -it`: it adds the debug container, waits for it (showing why
//! it waits), attaches, and exits with the container's exit code.

mod output;
mod request;
mod session;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use futures::AsyncBufReadExt;
use output::{Format, debug_table, profile_table, serialized, summary};
use poddebug_client::{
    AttachOutcome, ConnectOptions, CreateParams, DebugContainers, DebugPhase, Error, ListParams,
    LogParams, PodDebugContainer, outcome_of, waiting_reason,
};
use request::{RunSpec, debug_container, parse_duration, parse_env};

/// Debug running pods through the poddebug.dev API.
///
/// `kubectl poddebug POD -it [-- CMD...]` is short for `kubectl poddebug run POD -it [-- CMD...]`.
#[derive(Parser, Debug)]
#[command(name = "kubectl-poddebug", bin_name = "kubectl poddebug", version)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Args, Debug, Clone)]
struct Global {
    /// Namespace of the pod (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// kubeconfig context.
    #[arg(long, global = true)]
    context: Option<String>,
    /// kubeconfig file.
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Add a debug container to a pod (the default subcommand), wait for it, attach with -i.
    Run {
        /// The pod.
        pod: String,
        /// Debug container name (generated, debugger-xxxxx, when absent).
        #[arg(short = 'c', long = "container")]
        name: Option<String>,
        /// Image (the server's --default-image when absent).
        #[arg(long)]
        image: Option<String>,
        /// Container whose namespaces (PID) to join.
        #[arg(long)]
        target: Option<String>,
        /// legacy, general, baseline, restricted, netadmin or sysadmin.
        #[arg(long)]
        profile: Option<String>,
        /// Keep stdin open on the container and attach to it.
        #[arg(short = 'i', long)]
        stdin: bool,
        /// Allocate a TTY.
        #[arg(short = 't', long)]
        tty: bool,
        /// Attach once it runs (default: true with -i).
        #[arg(long, num_args = 0..=1, default_missing_value = "true")]
        attach: Option<bool>,
        /// Wait for it to run even without attaching.
        #[arg(long)]
        wait: bool,
        /// Give up waiting for it to start after this long (30s, 5m, 1h).
        #[arg(long, default_value = "5m", value_parser = parse_duration)]
        timeout: Duration,
        /// Print fewer messages.
        #[arg(short = 'q', long)]
        quiet: bool,
        /// Environment variable KEY=VALUE (repeatable).
        #[arg(long = "env", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// Output format of the created object when not attaching.
        #[arg(short = 'o', long, value_enum)]
        output: Option<Format>,
        /// Command and arguments.
        #[arg(last = true)]
        command: Vec<String>,
    },
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
    /// Show the debug profiles and the policy in force.
    Profiles {
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
}

/// Subcommand names; any other first word is a pod for `run`.
const SUBCOMMANDS: [&str; 8] = [
    "run", "get", "list", "stop", "attach", "logs", "profiles", "help",
];

/// `kubectl poddebug POD ...` means `kubectl poddebug run POD ...`.
fn with_default_subcommand(args: Vec<OsString>) -> Vec<OsString> {
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

/// Print an error as kubectl does and give the exit code.
fn fail(e: &Error) -> ExitCode {
    match e {
        Error::Api(_) => eprintln!("{e}"),
        _ => eprintln!("error: {e}"),
    }
    ExitCode::FAILURE
}

fn exit_with(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn print_serialized<T: serde::Serialize>(value: &T, format: Format) -> Option<ExitCode> {
    match serialized(value, format)? {
        Ok(s) => {
            print!("{s}");
            Some(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Some(ExitCode::FAILURE)
        }
    }
}

fn debug_name(o: &PodDebugContainer) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

/// What a session came to, as the exit code; a hint when the container still runs.
fn finish(outcome: AttachOutcome, ns: &str, pod: &str, name: &str, tty: bool) -> ExitCode {
    match outcome {
        AttachOutcome::Exited { exit_code, .. } => exit_with(exit_code),
        AttachOutcome::Detached => {
            eprintln!(
                "Session ended, debug container {name} is still running: reattach with \
                 'kubectl poddebug attach -n {ns} {pod} {name} -i{}', stop it with \
                 'kubectl poddebug stop -n {ns} {pod} {name}'",
                if tty { "t" } else { "" }
            );
            ExitCode::SUCCESS
        }
    }
}

async fn print_logs(api: &DebugContainers, pod: &str, name: &str, params: &LogParams) -> ExitCode {
    use tokio::io::AsyncWriteExt;
    let stream = match api.log_stream(pod, name, params).await {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let mut lines = stream.lines();
    let mut out = tokio::io::stdout();
    use futures::StreamExt;
    while let Some(line) = lines.next().await {
        match line {
            Ok(l) => {
                if out.write_all(format!("{l}\n").as_bytes()).await.is_err()
                    || out.flush().await.is_err()
                {
                    return ExitCode::FAILURE;
                }
            }
            Err(e) => {
                eprintln!("error: reading the log: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

#[allow(clippy::too_many_lines)]
async fn run(cli: Cli) -> ExitCode {
    let g = &cli.global;
    let options = ConnectOptions {
        kubeconfig: g.kubeconfig.clone(),
        context: g.context.clone(),
    };
    let (client, default_ns) = match poddebug_client::connect(&options).await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let ns = g.namespace.clone().unwrap_or(default_ns);
    let api = DebugContainers::new(client.clone(), &ns);
    match cli.command {
        Cmd::Run {
            pod,
            name,
            image,
            target,
            profile,
            stdin,
            tty,
            attach,
            wait,
            timeout,
            quiet,
            env,
            output,
            command,
        } => {
            if tty && !stdin {
                eprintln!("error: -i/--stdin is required for containers with -t/--tty=true");
                return ExitCode::FAILURE;
            }
            let attach = attach.unwrap_or(stdin);
            let spec = RunSpec {
                name: name.clone(),
                image,
                target: target.clone(),
                profile,
                stdin,
                tty,
                command,
                env,
            };
            let created = match api
                .create(&pod, &debug_container(&spec), &CreateParams::default())
                .await
            {
                Ok(o) => o,
                Err(e) => return fail(&e),
            };
            let dbg = debug_name(&created);
            if name.is_none() && !quiet {
                eprintln!("Defaulting debug container name to {dbg}.");
            }
            if let Some(t) = &target
                && !quiet
            {
                eprintln!(
                    "Targeting container {t:?}. If you don't see processes from this container \
                     it may be because the container runtime doesn't support this feature."
                );
            }
            if !attach && !wait {
                if let Some(code) = output.and_then(|f| print_serialized(&created, f)) {
                    return code;
                }
                println!("{}", summary(&created));
                eprintln!("stop it with: kubectl poddebug stop -n {ns} {pod} {dbg}");
                return ExitCode::SUCCESS;
            }
            let mut last_shown: Option<String> = None;
            let started = api
                .wait_started(&pod, &dbg, timeout, |o| {
                    let Some(w) = waiting_reason(o) else { return };
                    let routine = w.starts_with("ContainerCreating") || w == "PodInitializing";
                    if !routine && last_shown.as_deref() != Some(w.as_str()) {
                        eprintln!("container {dbg}: {w}");
                        last_shown = Some(w);
                    }
                })
                .await;
            let started = match started {
                Ok(o) => o,
                Err(e) => {
                    let code = fail(&e);
                    eprintln!("stop it with: kubectl poddebug stop -n {ns} {pod} {dbg}");
                    return code;
                }
            };
            if !attach {
                if let Some(code) = output.and_then(|f| print_serialized(&started, f)) {
                    return code;
                }
                println!("{}", summary(&started));
                eprintln!("stop it with: kubectl poddebug stop -n {ns} {pod} {dbg}");
                return ExitCode::SUCCESS;
            }
            if started.status.as_ref().map(|s| s.phase) == Some(DebugPhase::Terminated) {
                // Too late to attach: show what it printed, as kubectl debug does.
                let code = print_logs(&api, &pod, &dbg, &LogParams::default()).await;
                return match outcome_of(&started) {
                    Some(o) => finish(o, &ns, &pod, &dbg, tty),
                    None => code,
                };
            }
            match session::attach(&api, &pod, &dbg, stdin, tty, quiet).await {
                Ok(outcome) => finish(outcome, &ns, &pod, &dbg, tty),
                Err(e) => {
                    // Most often it ended between the wait and the attach.
                    eprintln!(
                        "warning: couldn't attach to debug container {dbg}, falling back to streaming logs: {e}"
                    );
                    let code = print_logs(&api, &pod, &dbg, &LogParams::default()).await;
                    match api.get(&pod, &dbg).await.ok().as_ref().and_then(outcome_of) {
                        Some(o) => finish(o, &ns, &pod, &dbg, tty),
                        None => code,
                    }
                }
            }
        }
        Cmd::Attach {
            pod,
            name,
            stdin,
            tty,
            quiet,
        } => match session::attach(&api, &pod, &name, stdin, tty, quiet).await {
            Ok(outcome) => finish(outcome, &ns, &pod, &name, tty),
            Err(e) => fail(&e),
        },
        Cmd::Get { pod, name, output } => {
            let items = match &name {
                Some(n) => match api.get(&pod, n).await {
                    Ok(o) => {
                        if let Some(code) = print_serialized(&o, output) {
                            return code;
                        }
                        vec![o]
                    }
                    Err(e) => return fail(&e),
                },
                None => match api.list_in_pod(&pod).await {
                    Ok(l) => {
                        if let Some(code) = print_serialized(&l, output) {
                            return code;
                        }
                        l.items
                    }
                    Err(e) => return fail(&e),
                },
            };
            print_items(&items, output, false)
        }
        Cmd::List {
            all_namespaces,
            selector,
            output,
        } => {
            let api = if all_namespaces {
                DebugContainers::all(client)
            } else {
                api
            };
            let mut params = ListParams::default();
            if let Some(s) = &selector {
                params = params.labels(s);
            }
            match api.list(&params).await {
                Ok(l) => {
                    if let Some(code) = print_serialized(&l, output) {
                        return code;
                    }
                    if l.items.is_empty() && output != Format::Name {
                        if all_namespaces {
                            eprintln!("No resources found");
                        } else {
                            eprintln!("No resources found in {ns} namespace.");
                        }
                        return ExitCode::SUCCESS;
                    }
                    print_items(&l.items, output, all_namespaces)
                }
                Err(e) => fail(&e),
            }
        }
        Cmd::Stop {
            pod,
            name,
            grace_period,
            output,
        } => match api
            .stop(&pod, &name, Some(Duration::from_secs(grace_period)))
            .await
        {
            Ok(o) => {
                if let Some(code) = output.and_then(|f| print_serialized(&o, f)) {
                    return code;
                }
                println!("{}", summary(&o));
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        Cmd::Logs {
            pod,
            name,
            follow,
            since,
            tail,
            timestamps,
        } => {
            let params = LogParams {
                follow,
                since,
                tail_lines: tail,
                timestamps,
            };
            print_logs(&api, &pod, &name, &params).await
        }
        Cmd::Profiles { output } => match api.profiles().await {
            Ok(l) => {
                if let Some(code) = print_serialized(&l, output) {
                    return code;
                }
                if output == Format::Name {
                    for p in &l.items {
                        println!(
                            "debugprofile.poddebug.dev/{}",
                            p.metadata.name.as_deref().unwrap_or("")
                        );
                    }
                } else {
                    print!("{}", profile_table(&l.items, output == Format::Wide));
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
    }
}

fn print_items(items: &[PodDebugContainer], output: Format, namespace: bool) -> ExitCode {
    if output == Format::Name {
        for o in items {
            println!("poddebugcontainer.poddebug.dev/{}", debug_name(o));
        }
    } else {
        print!("{}", debug_table(items, output == Format::Wide, namespace));
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(with_default_subcommand(std::env::args_os().collect()));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = rt.block_on(run(cli));
    // A reader of our stdin may still be blocked on the terminal: do not wait for it.
    rt.shutdown_background();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

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
                Cmd::Run {
                    pod,
                    stdin,
                    tty,
                    attach,
                    command,
                    ..
                },
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
