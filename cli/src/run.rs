//! `kubectl poddebug POD ...`: create the debug container, wait for it, attach, and end with
//! its exit code, as `kubectl debug POD -it` does.

use std::process::ExitCode;

use poddebug_client::{
    CreateParams, DebugContainers, DebugPhase, LogParams, PodDebugContainer, outcome_of,
    waiting_reason,
};

use crate::args::{DryRun, RunArgs};
use crate::output::{Format, print_serialized, summary};
use crate::request::debug_container_of;
use crate::{debug_name, fail, finish, print_logs, session};

/// The whole run of debug container(s) in pod `pod` of namespace `ns`.
pub async fn run(api: &DebugContainers, ns: &str, pod: &str, args: RunArgs) -> ExitCode {
    if args.tty && !args.stdin {
        eprintln!("error: -i/--stdin is required for containers with -t/--tty=true");
        return ExitCode::FAILURE;
    }
    let body = match debug_container_of(&args) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let RunArgs {
        name,
        target,
        stdin,
        tty,
        attach,
        wait,
        timeout,
        quiet,
        dry_run,
        output,
        ..
    } = args;
    let attach = attach.unwrap_or(stdin);
    match dry_run {
        DryRun::Client => return print_dry_run(&body, pod, output, "(dry run)"),
        DryRun::Server => {
            let params = CreateParams {
                dry_run: true,
                ..Default::default()
            };
            return match api.create(pod, &body, &params).await {
                Ok(o) => print_dry_run(&o, pod, output, "(server dry run)"),
                Err(e) => fail(&e),
            };
        }
        DryRun::None => {}
    }
    let created = match api.create(pod, &body, &CreateParams::default()).await {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let dbg = debug_name(&created);
    if name.is_none() && !quiet {
        eprintln!("Defaulting debug container name to {dbg}.");
    }
    // The target the server chose when none was asked for (its --default-target) is shown too.
    let chosen = created
        .target_container_name
        .as_deref()
        .filter(|t| !t.is_empty());
    if !quiet {
        match (&target, chosen) {
            (Some(t), _) => eprintln!(
                "Targeting container {t:?}. If you don't see processes from this container \
                 it may be because the container runtime doesn't support this feature."
            ),
            (None, Some(t)) => eprintln!(
                "Defaulting debug container target to {t:?} (the pod's first container), so \
                 that it can be stopped."
            ),
            (None, None) => {}
        }
    }
    if !attach && !wait {
        if let Some(code) = output.and_then(|f| print_serialized(&created, f)) {
            return code;
        }
        println!("{}", summary(&created));
        stop_hint(&created, ns, pod, quiet);
        return ExitCode::SUCCESS;
    }
    let mut last_shown: Option<String> = None;
    let started = api
        .wait_started(pod, &dbg, timeout, |o| {
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
            stop_hint(&created, ns, pod, quiet);
            return code;
        }
    };
    if !attach {
        if let Some(code) = output.and_then(|f| print_serialized(&started, f)) {
            return code;
        }
        println!("{}", summary(&started));
        stop_hint(&started, ns, pod, quiet);
        return ExitCode::SUCCESS;
    }
    if started.status.as_ref().map(|s| s.phase) == Some(DebugPhase::Terminated) {
        // Too late to attach: show what it printed, as kubectl debug does.
        let code = print_logs(api, pod, &dbg, &LogParams::default()).await;
        return match outcome_of(&started) {
            Some(o) => finish(api, o, ns, pod, &dbg, tty).await,
            None => code,
        };
    }
    match session::attach(api, pod, &dbg, stdin, tty, quiet).await {
        Ok(outcome) => finish(api, outcome, ns, pod, &dbg, tty).await,
        Err(e) => {
            // Most often it ended between the wait and the attach.
            eprintln!(
                "warning: couldn't attach to debug container {dbg}, falling back to streaming logs: {e}"
            );
            let code = print_logs(api, pod, &dbg, &LogParams::default()).await;
            match ended(api, pod, &dbg).await {
                Some(o) => finish(api, o, ns, pod, &dbg, tty).await,
                None => code,
            }
        }
    }
}

/// A dry run's object: as `-o` asks, else kubectl's one line.
fn print_dry_run(o: &PodDebugContainer, pod: &str, output: Option<Format>, how: &str) -> ExitCode {
    if let Some(code) = output.and_then(|f| print_serialized(o, f)) {
        return code;
    }
    println!(
        "poddebugcontainer.poddebug.dev/{} created {how}",
        listed_name(pod, o)
    );
    ExitCode::SUCCESS
}

/// The name `kubectl get poddebugcontainers` knows a debug container of `pod` by: `POD.NAME`
/// (`POD.<generated>` for a client dry run without a name). A debug container's name is a DNS
/// label, so a name with a dot is one the server already qualified.
pub fn listed_name(pod: &str, o: &PodDebugContainer) -> String {
    match o.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) if n.contains('.') => n.to_owned(),
        Some(n) => poddebug_client::types::resource::collection_name(pod, n),
        None => poddebug_client::types::resource::collection_name(pod, "<generated>"),
    }
}

/// How to stop a debug container that keeps running, and when the server will: only when the
/// server says it can be stopped (`status.stoppable`).
pub fn stop_hint(o: &PodDebugContainer, ns: &str, pod: &str, quiet: bool) {
    let Some(st) = o.status.as_ref() else { return };
    if quiet || st.phase == DebugPhase::Terminated {
        return;
    }
    if !st.stoppable {
        if let Some(why) = &st.stoppable_message {
            eprintln!("note: it cannot be stopped before it exits: {why}");
        }
        return;
    }
    let name = debug_name(o);
    match &st.expires_at {
        Some(at) => eprintln!(
            "stop it with: kubectl poddebug stop -n {ns} {pod} {name} (the server stops it at {})",
            at.0
        ),
        None => eprintln!("stop it with: kubectl poddebug stop -n {ns} {pod} {name}"),
    }
}

/// How the debug container ended, read from its status. The kubelet reports the end a moment
/// after the runtime refused the attach ("no running task"): read again, at most
/// [`END_REPORTED_WITHIN`], while it still says Running. None when it keeps running.
async fn ended(
    api: &DebugContainers,
    pod: &str,
    dbg: &str,
) -> Option<poddebug_client::AttachOutcome> {
    let deadline = tokio::time::Instant::now() + END_REPORTED_WITHIN;
    loop {
        // A failed read (a connection closed under the client) is read again, within the bound.
        if let Ok(o) = api.get(pod, dbg).await
            && let Some(outcome) = outcome_of(&o)
        {
            return Some(outcome);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// See [`ended`].
const END_REPORTED_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);
