//! `kubectl poddebug node/NAME -it --image=… [--profile=P] [-- CMD]`: a debug container on a
//! node, as `kubectl debug node/NAME` makes one: a pod on the node with the host's namespaces and
//! its root filesystem at `/host` (the `sysadmin` profile unless `--profile` says otherwise).
//! With `-i`, the plugin waits for it, attaches, and exits with its exit code.

use std::process::ExitCode;

use poddebug_client::types::node::NodeDebugContainer;
use poddebug_client::{DebugPhase, LogParams, NodeDebugContainers};

use crate::args::{DryRun, RunArgs};
use crate::output::print_serialized;
use crate::request::debug_container_of;
use crate::{fail, session};

/// The node a `node/NAME` (or `nodes/NAME`) argument names.
pub fn node_of(arg: &str) -> Option<&str> {
    arg.strip_prefix("node/")
        .or_else(|| arg.strip_prefix("nodes/"))
        .filter(|n| !n.is_empty())
}

/// The node debug container the command line asks for.
pub fn node_request(args: &RunArgs) -> Result<NodeDebugContainer, String> {
    if args.target.is_some() {
        return Err("--target is not supported when debugging a node".to_owned());
    }
    if args.copy_to.is_some() {
        return Err("--copy-to is not supported when debugging a node".to_owned());
    }
    let pdc = debug_container_of(args)?;
    let mut o = NodeDebugContainer {
        container: pdc.container,
        profile: pdc.profile,
        ttl_seconds: pdc.ttl_seconds,
        debug_request: pdc.debug_request,
        reason: pdc.reason,
        ticket: pdc.ticket,
        ..Default::default()
    };
    o.metadata.name.clone_from(&args.name);
    Ok(o)
}

/// The whole node debugging run.
pub async fn run(client: &kube::Client, node: &str, args: RunArgs) -> ExitCode {
    if args.tty && !args.stdin {
        eprintln!("error: -i/--stdin is required for containers with -t/--tty=true");
        return ExitCode::FAILURE;
    }
    let body = match node_request(&args) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let api = NodeDebugContainers::new(client.clone());
    match args.dry_run {
        DryRun::Client => {
            return print_serialized(&body, args.output.unwrap_or(crate::output::Format::Yaml))
                .unwrap_or(ExitCode::SUCCESS);
        }
        DryRun::Server => {
            return match api.create(node, &body, true).await {
                Ok(o) => print_serialized(&o, args.output.unwrap_or(crate::output::Format::Yaml))
                    .unwrap_or(ExitCode::SUCCESS),
                Err(e) => fail(&e),
            };
        }
        DryRun::None => {}
    }
    let created = match api.create(node, &body, false).await {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let name = created.metadata.name.clone().unwrap_or_default();
    let pod = created
        .status
        .as_ref()
        .map(|s| s.pod_name.clone())
        .unwrap_or_default();
    if !args.quiet {
        eprintln!("Creating debugging pod {pod} with container {name} on node {node}.");
    }
    let delete_hint = format!(
        "delete it with: kubectl delete --raw /apis/poddebug.dev/v1alpha1/nodes/{node}/debug/{name}"
    );
    let attach = args.attach.unwrap_or(args.stdin);
    if !attach && !args.wait {
        if let Some(code) = args.output.and_then(|f| print_serialized(&created, f)) {
            return code;
        }
        println!("nodedebugcontainer.poddebug.dev/{name} created on node {node}");
        if !args.quiet {
            eprintln!("{delete_hint}");
        }
        return ExitCode::SUCCESS;
    }
    let started = match api.wait_started(node, &name, args.timeout).await {
        Ok(o) => o,
        Err(e) => {
            let code = fail(&e);
            eprintln!("{delete_hint}");
            return code;
        }
    };
    if !attach {
        println!("nodedebugcontainer.poddebug.dev/{name} running on node {node}");
        return ExitCode::SUCCESS;
    }
    if started.status.as_ref().map(|s| s.phase) == Some(DebugPhase::Terminated) {
        if let Ok(out) = api.logs(node, &name, &LogParams::default()).await {
            print!("{out}");
        }
        let code = poddebug_client::node_outcome_of(&started).map_or(0, |o| o.exit_code());
        return crate::exit_with(code);
    }
    let params = session::attach_params(args.stdin, args.tty);
    let attached = api.attach(node, &name, &params).await;
    session::finish_made_pod(
        attached,
        args.stdin,
        args.tty,
        args.quiet,
        &format!("node debug container {name}"),
        &delete_hint,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn node_forms_parse_as_kubectl_debugs() {
        assert_eq!(node_of("node/localhost"), Some("localhost"));
        assert_eq!(node_of("nodes/n1.example"), Some("n1.example"));
        assert_eq!(node_of("web"), None);
        assert_eq!(node_of("node/"), None);
        let argv: Vec<std::ffi::OsString> = [
            "p",
            "node/localhost",
            "-it",
            "--image=busybox:1.36",
            "--profile=baseline",
            "--",
            "sh",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let cli = crate::args::Cli::parse_from(crate::args::with_default_subcommand(argv));
        let crate::args::Cmd::Run(a) = cli.command else {
            panic!("run")
        };
        let o = node_request(&a).unwrap();
        assert_eq!(o.profile.as_deref(), Some("baseline"));
        assert_eq!(o.container.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(o.container.command, Some(vec!["sh".to_owned()]));
        assert_eq!(
            (o.container.stdin, o.container.tty),
            (Some(true), Some(true))
        );
    }
}
