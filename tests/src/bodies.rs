//! Hostile create bodies of the largest size a server accepts (3 MiB), built to make a
//! decoder work: repeated keys, nesting with repeats at every level, distinct unknown keys,
//! long keys, values for the types to hold. Shared by the `body_bounds` test, which asserts
//! the answers and the server's memory, and `body-bench`, which only measures.

/// kube-apiserver's (and poddebug's) default `--max-request-body-bytes`.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// A create path of the API: its URL and the kind its errors name.
#[derive(Clone, Debug)]
pub struct CreatePath {
    /// The path of the `POST`.
    pub url: String,
    /// The kind created there.
    pub kind: &'static str,
}

/// The three create paths: a debug container of pod `pod` in `ns`, a copy of it, a debug
/// container on node `node`.
pub fn create_paths(ns: &str, pod: &str, node: &str) -> [CreatePath; 3] {
    const GV: &str = "/apis/poddebug.dev/v1alpha1";
    [
        CreatePath {
            url: format!("{GV}/namespaces/{ns}/pods/{pod}/debug/dbg"),
            kind: "PodDebugContainer",
        },
        CreatePath {
            url: format!("{GV}/namespaces/{ns}/pods/{pod}/copy"),
            kind: "PodDebugCopy",
        },
        CreatePath {
            url: format!("{GV}/nodes/{node}/debug/dbg"),
            kind: "NodeDebugContainer",
        },
    ]
}

/// What a hostile body must be answered with (a 400 `Status` in every case).
#[derive(Clone, Debug)]
pub enum Want {
    /// A strict decoding error with exactly these causes.
    Causes(Vec<String>),
    /// A strict decoding error with this many causes, the first given.
    Count(usize, String),
    /// The limit on the values of one body.
    TooManyValues,
}

/// A hostile body.
#[derive(Clone, Debug)]
pub struct HostileBody {
    /// What it is made of.
    pub name: &'static str,
    /// The body, at most [`MAX_BODY`] bytes.
    pub body: String,
    /// For the debug-container path only (fields of `container` pass through to the cluster
    /// there; they are dropped elsewhere, so the body would be a valid create).
    pub debug_only: bool,
    /// The answer.
    pub want: Want,
}

/// `prefix`, then as many of `item(i)` (comma-separated) as fit in a 3 MiB body, then `suffix`.
pub fn fill(prefix: &str, item: impl Fn(usize) -> String, suffix: &str) -> String {
    let room = MAX_BODY - 64;
    let mut out = String::with_capacity(room);
    out.push_str(prefix);
    for i in 0.. {
        let it = item(i);
        if out.len() + it.len() + 1 + suffix.len() > room {
            break;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(&it);
    }
    out.push_str(suffix);
    out
}

/// Objects nested `levels` deep, each with the key `a` repeated as often as fits and the next
/// level under `b`: every level has its own repeated field.
pub fn nested_repeats(levels: usize) -> String {
    let per_level = (MAX_BODY - 64 - levels * 16) / levels / 6;
    let repeats = vec!["\"a\":1"; per_level].join(",");
    let mut out = String::new();
    for _ in 0..levels {
        out.push('{');
        out.push_str(&repeats);
        out.push_str(",\"b\":");
    }
    out.push('1');
    out.push_str(&"}".repeat(levels));
    out
}

/// Every hostile body.
pub fn hostile_bodies() -> Vec<HostileBody> {
    let long = "k".repeat(1_000_000);
    let cut = format!("{}...", "k".repeat(1024));
    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
    vec![
        HostileBody {
            name: "one key repeated at the top",
            body: fill("{", |_| "\"a\":1".to_owned(), "}"),
            debug_only: false,
            want: Want::Causes(strings(&[r#"unknown field "a""#, r#"duplicate field "a""#])),
        },
        HostileBody {
            name: "one label repeated",
            body: fill(
                r#"{"metadata":{"labels":{"#,
                |_| "\"a\":\"\"".to_owned(),
                "}}}",
            ),
            debug_only: false,
            want: Want::Causes(strings(&[r#"duplicate field "metadata.labels.a""#])),
        },
        HostileBody {
            name: "120 levels, repeats at each",
            body: format!(r#"{{"status":{}}}"#, nested_repeats(120)),
            debug_only: false,
            want: Want::Count(100, r#"duplicate field "status.a""#.to_owned()),
        },
        HostileBody {
            name: "120 levels passed through, repeats at each",
            body: format!(r#"{{"container":{{"x":{}}}}}"#, nested_repeats(120)),
            debug_only: true,
            want: Want::Count(100, r#"duplicate field "container.x.a""#.to_owned()),
        },
        HostileBody {
            name: "distinct unknown keys",
            body: fill("{", |i| format!("\"k{i:x}\":0"), "}"),
            debug_only: false,
            want: Want::Count(100, r#"unknown field "k0""#.to_owned()),
        },
        HostileBody {
            name: "distinct keys passed through",
            body: fill(r#"{"container":{"#, |i| format!("\"k{i:x}\":0"), "}}"),
            debug_only: true,
            want: Want::TooManyValues,
        },
        HostileBody {
            name: "long keys",
            body: format!(r#"{{"{long}":1,"{long}":2,"{long}x":3}}"#),
            debug_only: false,
            want: Want::Causes(vec![
                format!("unknown field \"{cut}\""),
                format!("duplicate field \"{cut}\""),
            ]),
        },
        HostileBody {
            name: "distinct labels",
            body: fill(
                r#"{"metadata":{"labels":{"#,
                |i| format!("\"k{i:x}\":\"\""),
                "}}}",
            ),
            debug_only: false,
            want: Want::TooManyValues,
        },
        HostileBody {
            name: "empty environment variables",
            body: fill(r#"{"container":{"env":["#, |_| "{}".to_owned(), "]}}"),
            debug_only: false,
            want: Want::TooManyValues,
        },
    ]
}

/// The three delete paths that read a `DeleteOptions` body: a debug container, a copy and a
/// node debug container, none of which exists.
pub fn delete_paths(ns: &str, pod: &str, node: &str) -> [String; 3] {
    const GV: &str = "/apis/poddebug.dev/v1alpha1";
    [
        format!("{GV}/namespaces/{ns}/pods/{pod}/debug/gone"),
        format!("{GV}/namespaces/{ns}/pods/{pod}/copies/gone"),
        format!("{GV}/nodes/{node}/debug/gone"),
    ]
}

/// Hostile `DeleteOptions` bodies: valid JSON that would be ~100 MB as a parsed tree.
pub fn hostile_delete_bodies() -> Vec<(&'static str, String)> {
    vec![
        (
            "DeleteOptions with 1.5 million numbers",
            fill(r#"{"gracePeriodSeconds":0,"x":["#, |_| "0".to_owned(), "]}"),
        ),
        (
            "DeleteOptions with distinct keys",
            fill("{", |i| format!("\"k{i:x}\":0"), "}"),
        ),
    ]
}

/// A 3 MiB body refused after one look at it (a value of the wrong type, then blanks).
pub fn padded_body() -> String {
    format!("{{\"profile\": 5}}{}", " ".repeat(MAX_BODY - 64))
}

/// The peak resident memory of process `pid` so far (`VmHWM`), in KiB. The kernel sums its
/// per-CPU counters lazily, so two reads may differ by a few pages either way.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
