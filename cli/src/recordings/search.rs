//! `kubectl poddebug recordings search TEXT [-n NS | -A] [--pod POD] [-o json|yaml]`: the
//! server's `?search=TEXT` on the list of recordings, every page of it (the server reads a
//! bounded number of recordings' indexes per page and says where to go on).

use std::process::ExitCode;

use clap::Args;
use poddebug_client::Error;
use serde_json::Value;

use crate::fail;
use crate::output::{Format, print_serialized};
use crate::table::{GV, print_table};

/// The Examples of `recordings search --help`.
pub const EXAMPLES: &str = "\
Examples:
  # The recordings of namespace shop in which /etc/shadow was typed or printed
  kubectl poddebug recordings search /etc/shadow -n shop

  # In every namespace, as YAML with every match (source, session time, line)
  kubectl poddebug recordings search 'rm -rf' -A -o yaml

  # One pod's recordings
  kubectl poddebug recordings search curl --pod web";

/// Most pages followed (each a bounded read on the server).
const MAX_PAGES: usize = 10_000;

/// `recordings search`'s arguments.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// The text (3 to 256 bytes; case-insensitive).
    pub text: String,
    /// In all namespaces.
    #[arg(short = 'A', long, conflicts_with = "pod")]
    pub all_namespaces: bool,
    /// Only the recordings of this pod.
    #[arg(long)]
    pub pod: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Format,
}

/// The list path of `args` in `ns`.
fn path(ns: &str, args: &SearchArgs) -> String {
    let text =
        percent_encoding::utf8_percent_encode(&args.text, percent_encoding::NON_ALPHANUMERIC);
    let base = match (args.all_namespaces, &args.pod) {
        (true, _) => format!("{GV}/debugrecordings"),
        (false, Some(pod)) => format!("{GV}/namespaces/{ns}/pods/{pod}/recordings"),
        (false, None) => format!("{GV}/namespaces/{ns}/debugrecordings"),
    };
    format!("{base}?search={text}")
}

/// GET `path` with `accept`, as JSON.
async fn get(client: &kube::Client, path: &str, accept: &str) -> Result<Value, Error> {
    let req = http::Request::builder()
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .body(Vec::new())
        .map_err(|e| Error::InvalidParams(e.to_string()))?;
    let text = client.request_text(req).await?;
    serde_json::from_str(&text).map_err(Error::Decode)
}

/// Every page of the search at `path`, merged into the first: its `items` (a list) or its
/// `rows` (a Table).
async fn all_pages(client: &kube::Client, path: &str, table: bool) -> Result<Value, Error> {
    let (accept, field) = if table {
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "rows",
        )
    } else {
        ("application/json", "items")
    };
    let mut first = get(client, path, accept).await?;
    let mut token = first["metadata"]["continue"].as_str().map(str::to_owned);
    for _ in 0..MAX_PAGES {
        let Some(t) = token.take().filter(|t| !t.is_empty()) else {
            break;
        };
        let t = percent_encoding::utf8_percent_encode(&t, percent_encoding::NON_ALPHANUMERIC);
        let mut page = get(client, &format!("{path}&continue={t}"), accept).await?;
        token = page["metadata"]["continue"].as_str().map(str::to_owned);
        let more = page[field].as_array_mut().map(std::mem::take);
        if let (Some(all), Some(more)) = (first[field].as_array_mut(), more) {
            all.extend(more);
        }
    }
    if let Some(m) = first["metadata"].as_object_mut() {
        m.remove("continue");
    }
    Ok(first)
}

/// `kubectl poddebug recordings search`.
pub async fn run(client: &kube::Client, ns: &str, args: SearchArgs) -> ExitCode {
    let path = path(ns, &args);
    let table = matches!(args.output, Format::Table | Format::Wide);
    let found = match all_pages(client, &path, table).await {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    match args.output {
        Format::Table | Format::Wide => print_table(&found, args.output, args.all_namespaces, ns),
        Format::Name => {
            for i in found["items"].as_array().into_iter().flatten() {
                println!(
                    "debugrecording.poddebug.dev/{}",
                    i["metadata"]["name"].as_str().unwrap_or_default()
                );
            }
            ExitCode::SUCCESS
        }
        Format::Json | Format::Yaml => {
            print_serialized(&found, args.output).unwrap_or(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str, all: bool, pod: Option<&str>) -> SearchArgs {
        SearchArgs {
            text: text.to_owned(),
            all_namespaces: all,
            pod: pod.map(str::to_owned),
            output: Format::Table,
        }
    }

    #[test]
    fn the_scope_picks_the_list_and_the_text_is_encoded() {
        assert_eq!(
            path("shop", &args("rm -rf /", false, None)),
            format!("{GV}/namespaces/shop/debugrecordings?search=rm%20%2Drf%20%2F")
        );
        assert_eq!(
            path("shop", &args("a&b=c", true, None)),
            format!("{GV}/debugrecordings?search=a%26b%3Dc")
        );
        assert_eq!(
            path("shop", &args("curl", false, Some("web"))),
            format!("{GV}/namespaces/shop/pods/web/recordings?search=curl")
        );
    }
}
