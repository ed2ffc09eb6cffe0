//! `kubectl-poddebug`: a kubectl plugin (`kubectl poddebug ...`) for the poddebug.dev API.
//!
//! It drives `kubectl` itself (`create --raw`, `get --raw`, `delete --raw`, `get`), so the
//! user's kubeconfig, contexts, credentials and exec plugins work unchanged and every request
//! goes through kube-apiserver's aggregation layer and RBAC.

mod attach;
mod request;

use std::process::{Command, ExitCode, Stdio};

use clap::{Args, Parser, Subcommand};
use request::{RunSpec, debug_path, log_path, parse_env, run_body, summary};

/// Debug running pods through the poddebug.dev API.
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
    /// Namespace of the pod.
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// kubeconfig context.
    #[arg(long, global = true)]
    context: Option<String>,
    /// kubeconfig file.
    #[arg(long, global = true)]
    kubeconfig: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Add a debug container to a pod.
    Run {
        /// The pod.
        pod: String,
        /// Debug container name (generated when absent).
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
        /// Keep stdin open.
        #[arg(short = 'i', long)]
        stdin: bool,
        /// Allocate a TTY.
        #[arg(short = 't', long)]
        tty: bool,
        /// Environment variable KEY=VALUE (repeatable).
        #[arg(long = "env", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// Wait this many seconds for it to run (0: do not wait).
        #[arg(long, default_value_t = 60)]
        wait: u64,
        /// Attach to it once it runs (as `kubectl debug -it` does); implies waiting.
        #[arg(short = 'a', long)]
        attach: bool,
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
        /// Print the whole object as JSON.
        #[arg(short = 'o', long, value_parser = ["json", "summary"], default_value = "summary")]
        output: String,
    },
    /// List debug containers (kubectl get poddebugcontainers).
    List {
        /// In all namespaces.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Label selector on the pods.
        #[arg(short = 'l', long)]
        selector: Option<String>,
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
    },
    /// Show the debug profiles and the policy in force.
    Profiles,
}

fn kubectl_base(g: &Global) -> Command {
    let bin = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let mut c = Command::new(bin);
    if let Some(ctx) = &g.context {
        c.arg(format!("--context={ctx}"));
    }
    if let Some(kc) = &g.kubeconfig {
        c.arg(format!("--kubeconfig={kc}"));
    }
    c
}

/// The namespace: the flag, else the kubeconfig context's, else `default`.
fn namespace(g: &Global) -> String {
    if let Some(ns) = &g.namespace {
        return ns.clone();
    }
    let out = kubectl_base(g)
        .args(["config", "view", "--minify", "-o", "jsonpath={..namespace}"])
        .output();
    match out {
        Ok(o) if o.status.success() && !o.stdout.trim_ascii().is_empty() => {
            String::from_utf8_lossy(o.stdout.trim_ascii()).into_owned()
        }
        _ => "default".to_owned(),
    }
}

/// Run kubectl, passing stderr through; stdout is returned.
fn kubectl(g: &Global, args: &[String], stdin: Option<&str>) -> Result<String, ExitCode> {
    use std::io::Write;
    let mut cmd = kubectl_base(g);
    cmd.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().map_err(|e| {
        eprintln!("error: running kubectl: {e}");
        ExitCode::FAILURE
    })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take())
        && pipe.write_all(input.as_bytes()).is_err()
    {
        eprintln!("error: writing to kubectl");
    }
    let out = child.wait_with_output().map_err(|e| {
        eprintln!("error: waiting for kubectl: {e}");
        ExitCode::FAILURE
    })?;
    if !out.status.success() {
        return Err(ExitCode::from(
            u8::try_from(out.status.code().unwrap_or(1)).unwrap_or(1),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run kubectl with its output going straight to ours (lists, followed logs).
fn kubectl_passthrough(g: &Global, args: &[String]) -> Result<(), ExitCode> {
    let status = kubectl_base(g).args(args).status().map_err(|e| {
        eprintln!("error: running kubectl: {e}");
        ExitCode::FAILURE
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(ExitCode::from(
            u8::try_from(status.code().unwrap_or(1)).unwrap_or(1),
        ))
    }
}

fn print_object(json: &str, output: &str) {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(v) if output == "summary" => {
            if let Some(items) = v["items"].as_array() {
                for i in items {
                    println!("{}", summary(i));
                }
            } else {
                println!("{}", summary(&v));
            }
        }
        Ok(v) => println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
        Err(_) => print!("{json}"),
    }
}

/// Attach on a runtime made for it, mapping the container's exit code to ours.
fn run_attach(
    g: &Global,
    namespace: String,
    pod: String,
    name: String,
    stdin: bool,
    tty: bool,
) -> Result<(), ExitCode> {
    let spec = attach::AttachSpec {
        namespace: namespace.clone(),
        pod: pod.clone(),
        container: name.clone(),
        stdin,
        tty,
        context: g.context.clone(),
        kubeconfig: g.kubeconfig.clone(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: starting the runtime: {e}");
            ExitCode::FAILURE
        })?;
    let result = rt.block_on(attach::attach(spec));
    // Our stdin reader may still be blocked on the terminal: do not wait for it.
    rt.shutdown_background();
    if stdin {
        eprintln!(
            "Session ended, the debug container will not be restarted but may be reattached using \
             'kubectl poddebug attach -n {namespace} {pod} {name} -i{}' if it is still running",
            if tty { " -t" } else { "" }
        );
    }
    match result {
        Ok(0) => Ok(()),
        Ok(code) => Err(ExitCode::from(u8::try_from(code).unwrap_or(1))),
        Err(msg) => {
            eprintln!("{msg}");
            Err(ExitCode::FAILURE)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let g = &cli.global;
    let result = match cli.command {
        Cmd::Run {
            pod,
            name,
            image,
            target,
            profile,
            stdin,
            tty,
            env,
            wait,
            attach,
            command,
        } => {
            let ns = namespace(g);
            let spec = RunSpec {
                image,
                target,
                profile,
                stdin,
                tty,
                command,
                env,
            };
            let mut path = debug_path(&ns, &pod, name.as_deref());
            // Attaching needs the container running first.
            let wait = if attach { wait.max(1) } else { wait };
            if wait > 0 {
                path.push_str(&format!("?wait=true&timeoutSeconds={wait}"));
            }
            let body = run_body(&spec).to_string();
            let args = [
                "create".into(),
                "--raw".into(),
                path,
                "-f".into(),
                "-".into(),
            ];
            kubectl(g, &args, Some(&body)).and_then(|out| {
                print_object(&out, "summary");
                let name = serde_json::from_str::<serde_json::Value>(&out)
                    .ok()
                    .and_then(|v| v["metadata"]["name"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                eprintln!("stop it with: kubectl poddebug stop -n {ns} {pod} {name}");
                if attach {
                    run_attach(g, ns, pod, name, stdin, tty)
                } else {
                    Ok(())
                }
            })
        }
        Cmd::Attach {
            pod,
            name,
            stdin,
            tty,
        } => run_attach(g, namespace(g), pod, name, stdin, tty),
        Cmd::Get { pod, name, output } => {
            let ns = namespace(g);
            kubectl(
                g,
                &[
                    "get".into(),
                    "--raw".into(),
                    debug_path(&ns, &pod, name.as_deref()),
                ],
                None,
            )
            .map(|out| print_object(&out, &output))
        }
        Cmd::List {
            all_namespaces,
            selector,
        } => {
            let mut args: Vec<String> =
                vec!["get".into(), "poddebugcontainers.poddebug.dev".into()];
            if all_namespaces {
                args.push("--all-namespaces".into());
            } else {
                args.push(format!("--namespace={}", namespace(g)));
            }
            if let Some(s) = selector {
                args.push(format!("--selector={s}"));
            }
            kubectl_passthrough(g, &args)
        }
        Cmd::Stop {
            pod,
            name,
            grace_period,
        } => {
            let ns = namespace(g);
            let path = format!(
                "{}?gracePeriodSeconds={grace_period}",
                debug_path(&ns, &pod, Some(&name))
            );
            kubectl(g, &["delete".into(), "--raw".into(), path], None)
                .map(|out| print_object(&out, "summary"))
        }
        Cmd::Logs { pod, name, follow } => {
            let ns = namespace(g);
            kubectl_passthrough(
                g,
                &[
                    "get".into(),
                    "--raw".into(),
                    log_path(&ns, &pod, &name, follow),
                ],
            )
        }
        Cmd::Profiles => {
            kubectl_passthrough(g, &["get".into(), "debugprofiles.poddebug.dev".into()])
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
