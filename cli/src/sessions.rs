//! `sessions`, `terminate` and `join`: the live sessions of the cluster, as every replica of
//! the server knows them.

use std::process::ExitCode;

use poddebug_client::{DebugContainers, SessionMode, Sessions};

use crate::output::{Format, print_serialized};
use crate::table::{GV, print_table, table};
use crate::{fail, finish};

/// `kubectl poddebug sessions [-A] [--pod POD]`.
pub async fn list(
    client: &kube::Client,
    ns: &str,
    all_namespaces: bool,
    pod: Option<&str>,
    output: Format,
) -> ExitCode {
    let sessions = if all_namespaces {
        Sessions::all(client.clone())
    } else {
        Sessions::new(client.clone(), ns)
    };
    if matches!(output, Format::Json | Format::Yaml | Format::Name) {
        let list = match pod {
            Some(p) => sessions.list_in_pod(p).await,
            None => sessions.list().await,
        };
        return match list {
            Ok(l) if output == Format::Name => {
                for s in &l.items {
                    println!(
                        "debugsession.poddebug.dev/{}",
                        s.metadata.name.as_deref().unwrap_or("")
                    );
                }
                ExitCode::SUCCESS
            }
            Ok(l) => print_serialized(&l, output).unwrap_or(ExitCode::SUCCESS),
            Err(e) => fail(&e),
        };
    }
    let path = match (all_namespaces, pod) {
        (false, Some(p)) => format!("{GV}/namespaces/{ns}/pods/{p}/sessions"),
        (false, None) => format!("{GV}/namespaces/{ns}/debugsessions"),
        (true, _) => format!("{GV}/debugsessions"),
    };
    match table(client, &path).await {
        Ok(t) => print_table(&t, output, all_namespaces, ns),
        Err(e) => fail(&e),
    }
}

/// `kubectl poddebug terminate SESSION`.
pub async fn terminate(client: &kube::Client, ns: &str, id: &str) -> ExitCode {
    let sessions = Sessions::new(client.clone(), ns);
    let session = match sessions.get(id).await {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    match sessions.terminate(&session.spec.pod, id).await {
        Ok(s) => {
            println!(
                "debugsession.poddebug.dev/{id} terminated (user {} on debug container {} of pod {})",
                s.spec.user, s.spec.container, s.spec.pod
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `kubectl poddebug join SESSION [--observe | --moderate]`.
pub async fn join(
    api: &DebugContainers,
    client: &kube::Client,
    ns: &str,
    id: &str,
    observe: bool,
    moderate: bool,
    quiet: bool,
) -> ExitCode {
    let session = match Sessions::new(client.clone(), ns).get(id).await {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let mode = if moderate {
        SessionMode::Moderator
    } else if observe {
        SessionMode::Observer
    } else {
        SessionMode::Peer
    };
    let (pod, container, tty) = (
        session.spec.pod.clone(),
        session.spec.container.clone(),
        session.spec.tty,
    );
    let stdin = mode == SessionMode::Peer && session.spec.stdin;
    if !quiet {
        eprintln!(
            "Joining session {id} of {} on debug container {container} of pod {pod} as {}.",
            session.spec.user,
            mode.as_str()
        );
    }
    match crate::session::attach_as(api, &pod, &container, stdin, tty, quiet, Some(mode)).await {
        Ok(outcome) => finish(api, outcome, ns, &pod, &container, tty).await,
        Err(e) => fail(&e),
    }
}
