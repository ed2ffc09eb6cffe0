//! `kubectl poddebug POD --copy-to=NAME ...`: debug a copy of the pod, as `kubectl debug
//! --copy-to` does. With `--image`, a debug container is added to the copy (named by
//! `--container`, else the server's `debugger`); without it, `--container=C` names the copy's
//! container whose command (`-- CMD`) and stdin/TTY change. With `-i`, the plugin waits for that
//! container, attaches, and exits with its exit code. The copy stays until deleted (or its
//! time limit).

use std::collections::BTreeMap;
use std::process::ExitCode;

use poddebug_client::types::copy::{CommandReplacement, PodDebugCopy};
use poddebug_client::{Copies, DebugContainers, LogParams};

use crate::args::{DryRun, RunArgs};
use crate::output::print_serialized;
use crate::request::debug_container_of;
use crate::{fail, print_logs, session};

/// `name=image` pairs of `--set-image`.
fn set_images(values: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for v in values.iter().filter(|v| !v.is_empty()) {
        let Some((name, image)) = v
            .split_once('=')
            .filter(|(n, i)| !n.is_empty() && !i.is_empty())
        else {
            return Err(format!(
                "--set-image: invalid value {v:?}: expected NAME=IMAGE (or *=IMAGE)"
            ));
        };
        out.insert(name.to_owned(), image.to_owned());
    }
    Ok(out)
}

/// The copy the command line asks for, and the container to attach to (if any).
pub fn copy_request(args: &RunArgs) -> Result<(PodDebugCopy, Option<String>), String> {
    let pdc = debug_container_of(args)?;
    let mut copy = PodDebugCopy {
        set_image: set_images(&args.set_image)?,
        share_processes: Some(args.share_processes),
        same_node: args.same_node,
        keep_labels: args.keep_labels,
        keep_annotations: args.keep_annotations,
        keep_liveness: args.keep_liveness,
        keep_readiness: args.keep_readiness,
        keep_startup: args.keep_startup,
        keep_init_containers: args.keep_init_containers,
        profile: pdc.profile.clone(),
        ttl_seconds: pdc.ttl_seconds,
        debug_request: pdc.debug_request.clone(),
        reason: pdc.reason.clone(),
        ticket: pdc.ticket.clone(),
        ..Default::default()
    };
    copy.metadata.name.clone_from(&args.copy_to);
    let attach_to = if args.image.is_some() || args.custom.is_some() {
        // A debug container of its own.
        let mut c = pdc.container;
        c.name = args.name.clone().unwrap_or_default();
        copy.container = Some(c);
        Some(args.name.clone().unwrap_or_else(|| "debugger".to_owned()))
    } else if let Some(name) = &args.name {
        // One of the copy's containers, with another command.
        let (command, cargs) = if args.arguments_only {
            (Vec::new(), args.command.clone())
        } else {
            (args.command.clone(), Vec::new())
        };
        copy.replace.insert(
            name.clone(),
            CommandReplacement {
                command,
                args: cargs,
                stdin: args.stdin.then_some(true),
                tty: args.tty.then_some(true),
            },
        );
        Some(name.clone())
    } else if !args.command.is_empty() {
        return Err(
            "a command needs --container=NAME (the copy's container to run it) or --image \
             (a debug container to add)"
                .to_owned(),
        );
    } else {
        None
    };
    if attach_to.is_none() && copy.set_image.is_empty() {
        return Err("you must specify --image, --container or --set-image".to_owned());
    }
    Ok((copy, attach_to))
}

/// The whole `--copy-to` run.
pub async fn run(client: &kube::Client, ns: &str, pod: &str, args: RunArgs) -> ExitCode {
    if args.tty && !args.stdin {
        eprintln!("error: -i/--stdin is required for containers with -t/--tty=true");
        return ExitCode::FAILURE;
    }
    let (body, attach_to) = match copy_request(&args) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let copies = Copies::new(client.clone(), ns);
    let copy_name = args.copy_to.clone().unwrap_or_default();
    match args.dry_run {
        DryRun::Client => {
            return print_serialized(&body, args.output.unwrap_or(crate::output::Format::Yaml))
                .unwrap_or(ExitCode::SUCCESS);
        }
        DryRun::Server => {
            return match copies.create(pod, &body, true).await {
                Ok(o) => print_serialized(&o, args.output.unwrap_or(crate::output::Format::Yaml))
                    .unwrap_or(ExitCode::SUCCESS),
                Err(e) => fail(&e),
            };
        }
        DryRun::None => {}
    }
    let created = match copies.create(pod, &body, false).await {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let name = created.metadata.name.clone().unwrap_or(copy_name);
    let attach = args.attach.unwrap_or(args.stdin);
    let delete_hint = format!(
        "delete the copy with: kubectl delete --raw /apis/poddebug.dev/v1alpha1/namespaces/{ns}/pods/{pod}/copies/{name}"
    );
    let Some(container) = attach_to.filter(|_| attach || args.wait) else {
        if let Some(code) = args.output.and_then(|f| print_serialized(&created, f)) {
            return code;
        }
        println!("poddebugcopy.poddebug.dev/{name} created from pod {pod}");
        if !args.quiet {
            eprintln!("{delete_hint}");
        }
        return ExitCode::SUCCESS;
    };
    let started = match copies
        .wait_running(pod, &name, &container, args.timeout)
        .await
    {
        Ok(c) => c,
        Err(e) => {
            let code = fail(&e);
            eprintln!("{delete_hint}");
            return code;
        }
    };
    let debug = DebugContainers::new(client.clone(), ns);
    let ended = poddebug_client::copy_container_status(&started, &container)
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    if !attach {
        println!("poddebugcopy.poddebug.dev/{name} created from pod {pod}: {container} running");
        return ExitCode::SUCCESS;
    }
    if let Some(code) = ended {
        let _ = print_logs(&debug, &name, &container, &LogParams::default()).await;
        return crate::exit_with(code);
    }
    let params = session::attach_params(args.stdin, args.tty);
    let attached = copies.attach(pod, &name, &container, &params).await;
    session::finish_made_pod(
        attached,
        args.stdin,
        args.tty,
        args.quiet,
        &format!("container {container} of copy {name}"),
        &delete_hint,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn run_args(words: &[&str]) -> RunArgs {
        let argv: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
        let cli = crate::args::Cli::parse_from(crate::args::with_default_subcommand(argv));
        match cli.command {
            crate::args::Cmd::Run(a) => *a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_image_adds_a_debug_container_and_a_container_changes_its_command() {
        let a = run_args(&[
            "p",
            "web",
            "-it",
            "--copy-to=web-dbg",
            "--image=busybox:1.36",
            "--set-image=app=busybox:1.36,*=pause",
            "--share-processes=false",
            "--",
            "sh",
        ]);
        let (copy, attach) = copy_request(&a).unwrap();
        assert_eq!(copy.metadata.name.as_deref(), Some("web-dbg"));
        assert_eq!(attach.as_deref(), Some("debugger"));
        let c = copy.container.unwrap();
        assert_eq!(c.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(c.command, Some(vec!["sh".to_owned()]));
        assert_eq!(c.stdin, Some(true));
        assert_eq!(copy.set_image.len(), 2);
        assert_eq!(copy.share_processes, Some(false));

        let a = run_args(&[
            "p",
            "crash",
            "-it",
            "--copy-to=c",
            "--container=app",
            "--",
            "sh",
        ]);
        let (copy, attach) = copy_request(&a).unwrap();
        assert_eq!(attach.as_deref(), Some("app"));
        assert!(copy.container.is_none());
        let r = &copy.replace["app"];
        assert_eq!(r.command, vec!["sh"]);
        assert_eq!((r.stdin, r.tty), (Some(true), Some(true)));
    }

    #[test]
    fn a_copy_with_nothing_to_change_is_refused() {
        let a = run_args(&["p", "web", "--copy-to=c"]);
        assert!(copy_request(&a).is_err());
        let a = run_args(&["p", "web", "--copy-to=c", "--", "sh"]);
        assert!(copy_request(&a).unwrap_err().contains("--container"));
        let a = run_args(&["p", "web", "--copy-to=c", "--set-image=bad"]);
        assert!(copy_request(&a).unwrap_err().contains("NAME=IMAGE"));
    }
}
