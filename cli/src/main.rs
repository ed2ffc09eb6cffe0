//! `kubectl-poddebug`: a kubectl plugin (`kubectl poddebug ...`) for the poddebug.dev API, on
//! the poddebug-client crate. It reads the kubeconfig as kubectl does (`--kubeconfig`,
//! `--context`, `KUBECONFIG`, exec plugins, in-cluster) and spawns no process.
//!
//! `kubectl poddebug POD -it [--image I] [--target C] [--profile P] [-c NAME] [-- CMD...]`
//! behaves like `kubectl debug POD -it`: it adds the debug container, waits for it (showing why
//! it waits), attaches, and exits with the container's exit code.

mod args;
mod copy;
mod delete;
mod jit;
mod list;
mod node;
mod output;
mod recordings;
mod request;
mod run;
mod session;
mod sessions;
mod table;

use std::process::ExitCode;
use std::time::Duration;

use args::{Cli, Cmd, with_default_subcommand};
use clap::Parser;
use futures::AsyncBufReadExt;
use output::{Format, print_serialized, profile_table, summary};
use poddebug_client::{
    AttachOutcome, ConnectOptions, DebugContainers, Error, LogParams, PodDebugContainer, Warnings,
};

/// Print an error as kubectl does and give the exit code. An answer saying that the API may
/// not be served (a path nothing serves, 503) is kept for [`explain_unserved`] instead.
pub(crate) fn fail(e: &Error) -> ExitCode {
    if maybe_unserved(e) {
        if let Ok(mut kept) = UNSERVED.lock() {
            kept.get_or_insert_with(|| e.to_string());
        }
        return ExitCode::FAILURE;
    }
    match e {
        Error::Api(_) => eprintln!("{e}"),
        _ => eprintln!("error: {e}"),
    }
    ExitCode::FAILURE
}

/// The first refusal that may mean the API is not served, until [`explain_unserved`] says.
static UNSERVED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// kube-apiserver's answer for a group it does not serve (404 "the server could not find the
/// requested resource", no object named) or for an APIService that is not available (503).
fn maybe_unserved(e: &Error) -> bool {
    let Some(s) = e.status() else { return false };
    let named = s
        .details
        .as_ref()
        .is_some_and(|d| !d.name.is_empty() || !d.kind.is_empty());
    s.code == 503 || (s.code == 404 && !named && s.message.contains("could not find the requested"))
}

/// The group version's discovery path, which the aggregator serves only when the APIService is.
const DISCOVERY: &str = "/apis/poddebug.dev/v1alpha1";

/// After a refusal [`fail`] kept: ask discovery whether poddebug.dev/v1alpha1 is served, and
/// say what the refusal means and what to check; else print the refusal as it was.
async fn explain_unserved(client: &kube::Client) {
    let Some(raw) = UNSERVED.lock().ok().and_then(|mut k| k.take()) else {
        return;
    };
    let probe = http::Request::get(DISCOVERY)
        .body(Vec::new())
        .map_err(kube::Error::HttpError);
    let answer = match probe {
        Ok(req) => client.request_text(req).await,
        Err(e) => Err(e),
    };
    let code = match &answer {
        Err(kube::Error::Api(s)) => Some(s.code),
        _ => None,
    };
    match unserved_message(code) {
        Some(msg) => eprintln!("{msg}\n(the server answered: {raw})"),
        None => eprintln!("{raw}"),
    }
}

/// What discovery's answer `code` (None: served, or no answer at all) says about the API.
fn unserved_message(code: Option<u16>) -> Option<String> {
    let check = "kubectl get apiservice v1alpha1.poddebug.dev";
    match code {
        Some(404) => Some(format!(
            "error: the poddebug.dev/v1alpha1 API is not served by this cluster: its APIService \
             is not registered (is poddebug installed, and is this the right context?).\n\
             Check with: {check}\n\
             Install it as docs/operator-guide.md says (kubectl apply -k manifests/)."
        )),
        Some(502..=504) => Some(format!(
            "error: the poddebug.dev/v1alpha1 API is registered but not available: \
             kube-apiserver cannot reach the poddebug server.\n\
             Check why with: {check} (its Available condition: MissingEndpoints, \
             FailedDiscoveryCheck, ServiceNotFound)\n\
             and the server's pods: kubectl -n poddebug-system get pods,endpointslices \
             (docs/troubleshooting.md)."
        )),
        _ => None,
    }
}

pub(crate) fn exit_with(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

pub(crate) fn debug_name(o: &PodDebugContainer) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

/// What a session came to, as the exit code; how to come back when the container still runs
/// (and how to stop it, when the server says it can be stopped).
pub(crate) async fn finish(
    api: &DebugContainers,
    outcome: AttachOutcome,
    ns: &str,
    pod: &str,
    name: &str,
    tty: bool,
) -> ExitCode {
    match outcome {
        AttachOutcome::Exited { exit_code, .. } => exit_with(exit_code),
        AttachOutcome::Detached => {
            eprintln!(
                "Session ended, debug container {name} is still running: reattach with \
                 'kubectl poddebug attach -n {ns} {pod} {name} -i{}'",
                if tty { "t" } else { "" }
            );
            if let Ok(o) = api.get(pod, name).await {
                run::stop_hint(&o, ns, pod, false);
            }
            ExitCode::SUCCESS
        }
    }
}

pub(crate) async fn print_logs(
    api: &DebugContainers,
    pod: &str,
    name: &str,
    params: &LogParams,
) -> ExitCode {
    use tokio::io::AsyncWriteExt;
    // A connection the server closed after a refused attach (the usual way here) may still be
    // in the client's pool: a request that could not be sent is tried again on a new one.
    let mut tries = 0;
    let stream = loop {
        match api.log_stream(pod, name, params).await {
            Ok(s) => break s,
            Err(Error::Kube(_)) if tries < 2 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return fail(&e),
        }
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

async fn run(cli: Cli, options: &ConnectOptions) -> ExitCode {
    let g = &cli.global;
    // Offline verification contacts no cluster (a third party may have none).
    if let Cmd::Recordings { command } = &cli.command
        && command.offline()
        && let Cmd::Recordings { command } = cli.command
    {
        return recordings::run(None, "", command).await;
    }
    let (client, default_ns) = match poddebug_client::connect(options).await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let mut ns = g.namespace.clone().unwrap_or(default_ns);
    match cli.command {
        Cmd::Run(args) => {
            let args = *args;
            let pod = match (&args.pod, &args.filename) {
                (Some(p), _) => p.clone(),
                (None, Some(file)) => match request::read_pod_file(file) {
                    Ok((name, file_ns)) => {
                        match (&g.namespace, file_ns) {
                            (Some(flag), Some(f)) if *flag != f => {
                                eprintln!(
                                    "error: the namespace from the provided object {f:?} does \
                                     not match the namespace {flag:?}. You must pass \
                                     '--namespace={f}' to perform this operation."
                                );
                                return ExitCode::FAILURE;
                            }
                            (None, Some(f)) => ns = f,
                            _ => {}
                        }
                        name
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                },
                (None, None) => {
                    eprintln!("error: NAME or filename is required for debug");
                    return ExitCode::FAILURE;
                }
            };
            if let Some(node) = node::node_of(&pod) {
                return node::run(&client, node, args).await;
            }
            if args.copy_to.is_some() {
                return copy::run(&client, &ns, &pod, args).await;
            }
            if !args.set_image.is_empty() {
                eprintln!("error: --set-image needs --copy-to");
                return ExitCode::FAILURE;
            }
            let api = DebugContainers::new(client.clone(), &ns);
            run::run(&api, &ns, &pod, args).await
        }
        Cmd::Request(args) => jit::run(&client, &ns, g.namespace.as_deref(), *args).await,
        command => subcommand(&client, &ns, command).await,
    }
}

async fn run_explained(cli: Cli) -> ExitCode {
    let g = &cli.global;
    let options = ConnectOptions {
        kubeconfig: g.kubeconfig.clone(),
        context: g.context.clone(),
        impersonate: g.impersonate.clone(),
        impersonate_groups: g.impersonate_groups.clone(),
        request_timeout: Some(g.request_timeout),
        warnings: Warnings::Stderr,
        // An unavailable APIService answers 503: say so now, not after minutes of retries.
        fail_fast: true,
    };
    let code = run(cli, &options).await;
    if UNSERVED.lock().is_ok_and(|k| k.is_some()) {
        match poddebug_client::connect(&options).await {
            Ok((client, _)) => explain_unserved(&client).await,
            Err(e) => {
                if let Some(raw) = UNSERVED.lock().ok().and_then(|mut k| k.take()) {
                    eprintln!("{raw}");
                }
                eprintln!("error: {e}");
            }
        }
    }
    code
}

/// Every subcommand but `run`.
async fn subcommand(client: &kube::Client, ns: &str, command: Cmd) -> ExitCode {
    let api = DebugContainers::new(client.clone(), ns);
    let ns = ns.to_owned();
    match command {
        Cmd::Run(_) | Cmd::Request(_) => ExitCode::FAILURE,
        Cmd::Approve { name, comment } => {
            jit::review(client, &ns, &name, "approve", comment.as_deref()).await
        }
        Cmd::Deny { name, comment } => {
            jit::review(client, &ns, &name, "deny", comment.as_deref()).await
        }
        Cmd::Revoke { name, comment } => {
            jit::review(client, &ns, &name, "revoke", comment.as_deref()).await
        }
        Cmd::Delete {
            target,
            name,
            copy_to,
            grace_period,
        } => match delete::target(&target, name.as_deref(), copy_to.as_deref()) {
            Ok(t) => delete::run(client, &ns, t, grace_period).await,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Attach {
            pod,
            name,
            stdin,
            tty,
            quiet,
        } => match session::attach(&api, &pod, &name, stdin, tty, quiet).await {
            Ok(outcome) => finish(&api, outcome, &ns, &pod, &name, tty).await,
            Err(e) => fail(&e),
        },
        Cmd::Get { pod, name, output } => {
            list::get(&api, client, &ns, &pod, name.as_deref(), output).await
        }
        Cmd::List {
            all_namespaces,
            selector,
            output,
        } => list::list(client, &ns, all_namespaces, selector.as_deref(), output).await,
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
        Cmd::Sessions {
            all_namespaces,
            pod,
            output,
        } => sessions::list(client, &ns, all_namespaces, pod.as_deref(), output).await,
        Cmd::Recordings { command } => recordings::run(Some(client), &ns, command).await,
        Cmd::Terminate { session } => sessions::terminate(client, &ns, &session).await,
        Cmd::Join {
            session,
            observe,
            moderate,
            quiet,
        } => sessions::join(&api, client, &ns, &session, observe, moderate, quiet).await,
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
    let code = rt.block_on(run_explained(cli));
    // A reader of our stdin may still be blocked on the terminal: do not wait for it.
    rt.shutdown_background();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str, name: &str) -> Error {
        let mut s = poddebug_client::Status::failure(message, "NotFound").with_code(code);
        if !name.is_empty() {
            s.details = Some(kube::core::response::StatusDetails {
                name: name.to_owned(),
                group: String::new(),
                kind: "pods".to_owned(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 0,
            });
        }
        Error::Api(Box::new(s))
    }

    #[test]
    fn only_answers_of_an_unserved_api_are_explained() {
        assert!(maybe_unserved(&status(
            404,
            "the server could not find the requested resource",
            ""
        )));
        assert!(maybe_unserved(&status(503, "service unavailable", "")));
        // A named object that is missing is the server's answer, as it came.
        assert!(!maybe_unserved(&status(
            404,
            "pods \"web\" not found",
            "web"
        )));
        assert!(!maybe_unserved(&status(403, "forbidden", "")));
        // Discovery answered: the refusal is printed as it came.
        assert_eq!(unserved_message(None), None);
        assert_eq!(unserved_message(Some(403)), None);
        assert!(unserved_message(Some(404)).is_some_and(|m| m.contains("not registered")));
        assert!(unserved_message(Some(503)).is_some_and(|m| m.contains("not available")));
    }
}
