//! Tables as kubectl prints them: the server's own `meta.k8s.io/v1` Table (kubectl's
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), so the plugin prints the columns
//! `kubectl get` prints and builds none of its own.

use std::process::ExitCode;

use poddebug_client::Error;
use serde_json::Value;

use crate::output::Format;

/// Prefix of every path of the API.
pub const GV: &str = "/apis/poddebug.dev/v1alpha1";

/// The server's `meta.k8s.io/v1` Table at `path` (what `kubectl get` asks for), its columns
/// the server's own.
pub async fn table(client: &kube::Client, path: &str) -> Result<Value, Error> {
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

/// Print a Table, or kubectl's "No resources found" on stderr for an empty one.
pub fn print_table(t: &Value, output: Format, all_namespaces: bool, ns: &str) -> ExitCode {
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
        render_table(t, output == Format::Wide, all_namespaces)
    );
    ExitCode::SUCCESS
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
