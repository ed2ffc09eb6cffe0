//! `list` and `get`: debug containers as the server's Table shows them (the columns of
//! `kubectl get poddebugcontainers`), or as objects for `-o json|yaml|name`.

use std::process::ExitCode;

use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use poddebug_client::{DebugContainers, ListParams, PodDebugContainer};

use crate::fail;
use crate::output::{Format, print_serialized};
use crate::table::{GV, print_table, table};

fn esc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// `-o name`: the names `kubectl get poddebugcontainers` takes (`POD.NAME`); the objects of a
/// pod's own list are named by the debug container alone.
fn print_names(items: &[PodDebugContainer], pod: &str) -> ExitCode {
    for o in items {
        let pod = o
            .status
            .as_ref()
            .map(|s| s.pod_name.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or(pod);
        println!(
            "poddebugcontainer.poddebug.dev/{}",
            crate::run::listed_name(pod, o)
        );
    }
    ExitCode::SUCCESS
}

/// `kubectl poddebug list [-A] [-l SELECTOR] [-o FORMAT]`.
pub async fn list(
    client: &kube::Client,
    ns: &str,
    all_namespaces: bool,
    selector: Option<&str>,
    output: Format,
) -> ExitCode {
    if matches!(output, Format::Json | Format::Yaml | Format::Name) {
        let api = if all_namespaces {
            DebugContainers::all(client.clone())
        } else {
            DebugContainers::new(client.clone(), ns)
        };
        let mut params = ListParams::default();
        if let Some(s) = selector {
            params = params.labels(s);
        }
        return match api.list(&params).await {
            Ok(l) if output == Format::Name => print_names(&l.items, ""),
            Ok(l) => print_serialized(&l, output).unwrap_or(ExitCode::SUCCESS),
            Err(e) => fail(&e),
        };
    }
    let mut path = if all_namespaces {
        format!("{GV}/poddebugcontainers")
    } else {
        format!("{GV}/namespaces/{}/poddebugcontainers", esc(ns))
    };
    if let Some(s) = selector {
        path.push_str(&format!("?labelSelector={}", esc(s)));
    }
    match table(client, &path).await {
        Ok(t) => print_table(&t, output, all_namespaces, ns),
        Err(e) => fail(&e),
    }
}

/// `kubectl poddebug get POD [NAME] [-o FORMAT]`.
pub async fn get(
    api: &DebugContainers,
    client: &kube::Client,
    ns: &str,
    pod: &str,
    name: Option<&str>,
    output: Format,
) -> ExitCode {
    if matches!(output, Format::Json | Format::Yaml | Format::Name) {
        return match name {
            Some(n) => match api.get(pod, n).await {
                Ok(o) if output == Format::Name => print_names(&[o], pod),
                Ok(o) => print_serialized(&o, output).unwrap_or(ExitCode::SUCCESS),
                Err(e) => fail(&e),
            },
            None => match api.list_in_pod(pod).await {
                Ok(l) if output == Format::Name => print_names(&l.items, pod),
                Ok(l) => print_serialized(&l, output).unwrap_or(ExitCode::SUCCESS),
                Err(e) => fail(&e),
            },
        };
    }
    let mut path = format!("{GV}/namespaces/{}/pods/{}/debug", esc(ns), esc(pod));
    if let Some(n) = name {
        path.push('/');
        path.push_str(&esc(n));
    }
    match table(client, &path).await {
        Ok(t) => print_table(&t, output, false, ns),
        Err(e) => fail(&e),
    }
}
