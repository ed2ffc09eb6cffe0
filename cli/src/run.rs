//! `kubectl poddebug POD ...`: create the debug container, wait for it, attach, and end with
//! its exit code, as `kubectl debug POD -it` does.

use std::process::ExitCode;

use poddebug_client::{
    CreateParams, DebugContainers, DebugPhase, LogParams, outcome_of, waiting_reason,
};

use crate::args::RunArgs;
use crate::output::{print_serialized, summary};
use crate::request::{RunSpec, debug_container};
use crate::{debug_name, fail, finish, print_logs, session};

/// The whole run, in namespace `ns`.
pub async fn run(api: &DebugContainers, ns: &str, args: RunArgs) -> ExitCode {
    let RunArgs {
        pod,
        name,
        image,
        target,
        profile,
        ttl,
        stdin,
        tty,
        attach,
        wait,
        timeout,
        quiet,
        env,
        output,
        command,
    } = args;
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
        ttl,
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
        let code = print_logs(api, &pod, &dbg, &LogParams::default()).await;
        return match outcome_of(&started) {
            Some(o) => finish(o, ns, &pod, &dbg, tty),
            None => code,
        };
    }
    match session::attach(api, &pod, &dbg, stdin, tty, quiet).await {
        Ok(outcome) => finish(outcome, ns, &pod, &dbg, tty),
        Err(e) => {
            // Most often it ended between the wait and the attach.
            eprintln!(
                "warning: couldn't attach to debug container {dbg}, falling back to streaming logs: {e}"
            );
            let code = print_logs(api, &pod, &dbg, &LogParams::default()).await;
            match ended(api, &pod, &dbg).await {
                Some(o) => finish(o, ns, &pod, &dbg, tty),
                None => code,
            }
        }
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
        let o = api.get(pod, dbg).await.ok()?;
        if let Some(outcome) = outcome_of(&o) {
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
