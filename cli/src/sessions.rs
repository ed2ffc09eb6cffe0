//! `sessions`, `terminate` and `join`: the live sessions of the cluster, as every replica of
//! the server knows them.

use std::process::ExitCode;

use poddebug_client::{DebugContainers, Error, SessionMode, Sessions};
use serde_json::Value;

use crate::output::{Format, print_serialized};
use crate::{fail, finish};

const GV: &str = "/apis/poddebug.dev/v1alpha1";

/// The server's Table of sessions (the columns `kubectl get debugsessions` prints).
async fn table(client: &kube::Client, path: &str) -> Result<Value, Error> {
    let req = http::Request::builder()
        .uri(path)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .map_err(|e| Error::InvalidParams(e.to_string()))?;
    let text = client.request_text(req).await?;
    serde_json::from_str(&text).map_err(Error::Decode)
}

/// A Table as kubectl prints it: upper-case headers, columns of priority 0 (all with `wide`),
/// a NAMESPACE column first for `all_namespaces`.
pub fn render_table(t: &Value, wide: bool, all_namespaces: bool) -> String {
    let defs = t["columnDefinitions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let shown: Vec<usize> = defs
        .iter()
        .enumerate()
        .filter(|(_, d)| wide || d["priority"].as_i64().unwrap_or(0) == 0)
        .map(|(i, _)| i)
        .collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header: Vec<String> = Vec::new();
    if all_namespaces {
        header.push("NAMESPACE".to_owned());
    }
    header.extend(
        shown
            .iter()
            .map(|i| defs[*i]["name"].as_str().unwrap_or("").to_ascii_uppercase()),
    );
    rows.push(header);
    for r in t["rows"].as_array().into_iter().flatten() {
        let mut row = Vec::new();
        if all_namespaces {
            row.push(
                r["object"]["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            );
        }
        for i in &shown {
            let cell = &r["cells"][*i];
            row.push(match cell {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            });
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, v)| format!("{v:<w$}", w = widths[c]))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    out
}

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
        Ok(t) => {
            if t["rows"].as_array().is_none_or(Vec::is_empty) {
                if all_namespaces {
                    eprintln!("No resources found");
                } else {
                    eprintln!("No resources found in {ns} namespace.");
                }
                return ExitCode::SUCCESS;
            }
            print!(
                "{}",
                render_table(&t, output == Format::Wide, all_namespaces)
            );
            ExitCode::SUCCESS
        }
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
        Ok(outcome) => finish(outcome, ns, &pod, &container, tty),
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_print_as_kubectl_prints_them() {
        let t = json!({
            "columnDefinitions": [
                {"name": "Name", "priority": 0}, {"name": "User", "priority": 0},
                {"name": "Replica", "priority": 1}],
            "rows": [
                {"cells": ["s1", "alice", "r1"], "object": {"metadata": {"namespace": "shop"}}},
                {"cells": ["s22", "bob", "r2"], "object": {"metadata": {"namespace": "web"}}}]
        });
        assert_eq!(
            render_table(&t, false, false),
            "NAME   USER\ns1     alice\ns22    bob\n"
        );
        assert_eq!(
            render_table(&t, true, true),
            "NAMESPACE   NAME   USER    REPLICA\nshop        s1     alice   r1\nweb         s22    bob     r2\n"
        );
    }
}
