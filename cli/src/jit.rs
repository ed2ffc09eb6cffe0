//! Just-in-time access: `kubectl poddebug request POD --profile=P --reason=... [--duration=D]
//! [-it] [-- CMD]` files a DebugRequest for what the run flags describe, waits for someone else
//! to decide (a spinner on a terminal, one line per change otherwise), then makes it under the
//! request and attaches, as `run` does. `approve`, `deny` and `revoke` review others' requests.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use poddebug_client::types::request::{
    DebugRequest, DebugRequestSpec, RequestMode, RequestPhase, RequestedContainer,
};
use poddebug_client::{DebugRequests, Error};

use crate::args::RequestArgs;
use crate::fail;

/// Where requests for node debugging live when `-n` says nothing (the server's default
/// `--node-debug-namespace`).
pub const NODE_NAMESPACE: &str = "poddebug-nodes";

/// The request `args` describe, for `target` (a pod, or a node with `node`).
pub fn request_of(args: &RequestArgs, target: &str, node: bool) -> Result<DebugRequest, String> {
    let run = &args.run;
    let Some(profile) = run.profile.clone().filter(|p| !p.is_empty()) else {
        return Err("--profile is required: the profile to ask for (e.g. sysadmin)".to_owned());
    };
    let Some(reason) = run.reason.clone().filter(|r| !r.trim().is_empty()) else {
        return Err("--reason is required: say why the access is needed".to_owned());
    };
    if run.debug_request.is_some() {
        return Err("--debug-request names an existing request: use run".to_owned());
    }
    let mode = if node {
        RequestMode::Node
    } else if run.copy_to.is_some() {
        RequestMode::Copy
    } else {
        RequestMode::Debug
    };
    // The container is bound when the command line says what it runs: all of it (what it
    // runs, its environment, mounts, stdin and terminal) and its target, as the create under
    // the request will send them.
    let pdc = crate::request::debug_container_of(run)?;
    let c = &pdc.container;
    let container = (c.image.is_some() || c.command.is_some() || c.args.is_some())
        .then(|| RequestedContainer::of(c));
    let mut r = DebugRequest {
        spec: DebugRequestSpec {
            pod: (!node).then(|| target.to_owned()),
            node: node.then(|| target.to_owned()),
            mode,
            profile: profile.clone(),
            // A copy's debug container is bound only when the copy adds one.
            target_container_name: pdc
                .target_container_name
                .clone()
                .filter(|_| container.is_some() && mode == RequestMode::Debug),
            container: container.filter(|_| mode != RequestMode::Copy || run.image.is_some()),
            reason,
            ticket: run.ticket.clone(),
            duration: args.duration.clone(),
            requester: None,
        },
        ..Default::default()
    };
    r.metadata.generate_name = Some(format!("{}-{profile}-", short(target)));
    Ok(r)
}

/// A name prefix from `s`: lower case, at most 40 characters, no trailing dash.
fn short(s: &str) -> String {
    let cut: String = s.chars().take(40).collect();
    cut.trim_end_matches(['-', '.']).to_owned()
}

/// What a pending request waits for, in words.
fn waiting(r: &DebugRequest) -> String {
    let st = r.status.clone().unwrap_or_default();
    format!(
        "{} of {} approval(s)",
        r.approvers().len(),
        st.approvals_required.max(1)
    )
}

/// Shows that the plugin waits: a spinner on a terminal, one line per change otherwise.
struct Spinner {
    tty: bool,
    frame: usize,
    started: Instant,
    last: String,
}

impl Spinner {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

    fn new() -> Spinner {
        Spinner {
            tty: std::io::stderr().is_terminal(),
            frame: 0,
            started: Instant::now(),
            last: String::new(),
        }
    }

    fn show(&mut self, text: &str) {
        let mut err = std::io::stderr();
        if self.tty {
            self.frame = (self.frame + 1) % Self::FRAMES.len();
            let _ = write!(
                err,
                "\r\x1b[2K{} {text} ({}s)",
                Self::FRAMES[self.frame],
                self.started.elapsed().as_secs()
            );
            let _ = err.flush();
        } else if text != self.last {
            let _ = writeln!(err, "{text}");
        }
        self.last = text.to_owned();
    }

    fn done(&mut self) {
        if self.tty {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

/// The whole `request` run: file it, wait for the decision, then make and attach.
/// `ns` is the namespace of the pod; a node's request goes to `explicit_ns` (`-n`) or
/// [`NODE_NAMESPACE`].
pub async fn run(
    client: &kube::Client,
    ns: &str,
    explicit_ns: Option<&str>,
    mut args: RequestArgs,
) -> ExitCode {
    let Some(arg) = args.run.pod.clone() else {
        eprintln!("error: the pod (or node/NAME) is required");
        return ExitCode::FAILURE;
    };
    let node = crate::node::node_of(&arg).map(str::to_owned);
    let target = node.clone().unwrap_or_else(|| arg.clone());
    let request_ns = match &node {
        Some(_) => explicit_ns.unwrap_or(NODE_NAMESPACE).to_owned(),
        None => ns.to_owned(),
    };
    let body = match request_of(&args, &target, node.is_some()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let requests = DebugRequests::new(client.clone(), &request_ns);
    let made = match requests.create(&body).await {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let name = made.metadata.name.clone().unwrap_or_default();
    let quiet = args.run.quiet;
    if !quiet {
        eprintln!(
            "debugrequest.poddebug.dev/{name} created: someone else approves it with \
             'kubectl poddebug approve -n {request_ns} {name}'"
        );
    }
    // Shown from the watch's callback and from the timer below, never at once.
    let spinner = std::cell::RefCell::new(Spinner::new());
    let timeout = args.approval_timeout;
    let wait = requests.wait_decided(&name, timeout, |r| {
        if !quiet {
            spinner.borrow_mut().show(&format!(
                "waiting for debugrequest/{name} to be approved: {}",
                waiting(r)
            ));
        }
    });
    // The spinner turns while nothing changes, too.
    let decided = {
        futures::pin_mut!(wait);
        loop {
            tokio::select! {
                d = &mut wait => break d,
                _ = tokio::time::sleep(std::time::Duration::from_millis(120)) => {
                    if !quiet {
                        let mut s = spinner.borrow_mut();
                        let last = s.last.clone();
                        if !last.is_empty() {
                            s.show(&last);
                        }
                    }
                }
            }
        }
    };
    spinner.borrow_mut().done();
    let decided = match decided {
        Ok(r) => r,
        Err(e @ Error::NotDecided { .. }) => {
            eprintln!(
                "error: {e}; it stays pending (withdraw it with 'kubectl delete debugrequest -n {request_ns} {name}')"
            );
            return ExitCode::FAILURE;
        }
        Err(e) => return fail(&e),
    };
    let st = decided.status.clone().unwrap_or_default();
    let last = st.reviews.last();
    let by = last
        .map(|r| {
            let comment = r
                .comment
                .as_deref()
                .map(|c| format!(": {c:?}"))
                .unwrap_or_default();
            format!(" by {}{comment}", r.user)
        })
        .unwrap_or_default();
    match st.phase {
        RequestPhase::Approved => {
            if !quiet {
                let until = st
                    .expires_at
                    .map(|t| format!(" until {}", t.0))
                    .unwrap_or_default();
                eprintln!("debugrequest/{name} approved{by}{until}");
            }
        }
        other => {
            eprintln!("error: debugrequest/{name} is {}{by}", other.as_str());
            return ExitCode::FAILURE;
        }
    }
    // Made under the request: its reason comes with it.
    args.run.debug_request = Some(name);
    args.run.reason = None;
    args.run.ticket = None;
    match node {
        Some(n) => crate::node::run(client, &n, args.run).await,
        None if args.run.copy_to.is_some() => crate::copy::run(client, ns, &arg, args.run).await,
        None => {
            let api = poddebug_client::DebugContainers::new(client.clone(), ns);
            crate::run::run(&api, ns, &arg, args.run).await
        }
    }
}

/// `approve`, `deny`, `revoke`.
pub async fn review(
    client: &kube::Client,
    ns: &str,
    name: &str,
    decision: &str,
    comment: Option<&str>,
) -> ExitCode {
    let requests = DebugRequests::new(client.clone(), ns);
    let done = match decision {
        // What is approved is shown first, and the approval binds that very request (a request
        // filed again under its name meanwhile is not approved: 409).
        "approve" => match requests.get(name).await {
            Ok(seen) => {
                eprintln!(
                    "approving debugrequest/{name} of {}: {}; reason {:?}",
                    seen.spec.requester.as_deref().unwrap_or("?"),
                    seen.grants(),
                    seen.spec.reason
                );
                requests.approve_seen(&seen, comment).await
            }
            Err(e) => Err(e),
        },
        "deny" => requests.deny(name, comment).await,
        _ => requests.revoke(name, comment).await,
    };
    match done {
        Ok(r) => {
            let st = r.status.clone().unwrap_or_default();
            let phase = st.phase.as_str();
            let past = match decision {
                "approve" => "approved",
                "deny" => "denied",
                _ => "revoked",
            };
            let more = if st.phase == RequestPhase::Pending {
                format!(" ({})", waiting(&r))
            } else {
                String::new()
            };
            println!("debugrequest.poddebug.dev/{name} {past}: {phase}{more}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn request_args(words: &[&str]) -> RequestArgs {
        let mut all = vec!["p", "request"];
        all.extend_from_slice(words);
        match crate::args::Cli::try_parse_from(all).map(|c| c.command) {
            Ok(crate::args::Cmd::Request(r)) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_request_names_what_the_command_line_runs() {
        let a = request_args(&[
            "web",
            "--profile=sysadmin",
            "--reason",
            "INC-7: disk full",
            "--ticket=INC-7",
            "--duration=30m",
            "-it",
            "--image=busybox:1.36",
            "--",
            "sh",
        ]);
        let r = request_of(&a, "web", false).expect("a request");
        assert_eq!(r.spec.pod.as_deref(), Some("web"));
        assert_eq!(r.spec.mode, RequestMode::Debug);
        assert_eq!(r.spec.profile, "sysadmin");
        assert_eq!(r.spec.reason, "INC-7: disk full");
        assert_eq!(r.spec.ticket.as_deref(), Some("INC-7"));
        assert_eq!(r.spec.duration.as_deref(), Some("30m"));
        let c = r.spec.container.expect("bound");
        assert_eq!(c.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(c.command, Some(vec!["sh".to_owned()]));
        // All of it is bound, as the create under it sends it.
        assert_eq!((c.stdin, c.tty), (Some(true), Some(true)));
        let created = crate::request::debug_container_of(&a.run).expect("the create");
        assert!(
            c.differences(&created.container, "busybox:1.36").is_empty(),
            "{:?}",
            c.differences(&created.container, "busybox:1.36")
        );
        assert_eq!(r.spec.target_container_name, created.target_container_name);
        assert_eq!(r.metadata.generate_name.as_deref(), Some("web-sysadmin-"));

        let node = request_of(
            &request_args(&["node/n1", "--profile=sysadmin", "--reason=x"]),
            "n1",
            true,
        )
        .expect("a node request");
        assert_eq!(node.spec.mode, RequestMode::Node);
        assert_eq!(node.spec.node.as_deref(), Some("n1"));
        assert!(node.spec.container.is_none(), "nothing said what it runs");
    }

    #[test]
    fn a_profile_and_a_reason_are_required() {
        let e = request_of(&request_args(&["web", "--reason=x"]), "web", false).unwrap_err();
        assert!(e.contains("--profile"), "{e}");
        let e =
            request_of(&request_args(&["web", "--profile=sysadmin"]), "web", false).unwrap_err();
        assert!(e.contains("--reason"), "{e}");
    }
}
