//! The fuzz targets, one file per parser family.

mod body;
mod commands;
mod index;
mod names;
mod origins;
mod range;
mod request;
mod streams;

/// One fuzz target.
pub struct Target {
    /// Name on the command line.
    pub name: &'static str,
    /// What it exercises.
    pub about: &'static str,
    /// Run one input; panics when the code under test panics or an invariant breaks.
    pub run: fn(&[u8]),
    /// Inputs that reach the parser's main branches, the starting point of mutation.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "body",
        about: "create-body decoding (strict and pass-through), then conversion and validation",
        run: body::run,
        seeds: body::seeds,
    },
    Target {
        name: "request",
        about: "method + path + query: authorization attributes, query map, attach/log options, field selectors",
        run: request::run,
        seeds: request::seeds,
    },
    Target {
        name: "commands",
        about: "the line editor that derives a session's commands from its recorded input: any split gives the same lines, within their bounds",
        run: commands::run,
        seeds: commands::seeds,
    },
    Target {
        name: "index",
        about: "a recording's search index: the output's text with escape sequences parsed out (any split gives the same lines), the index read back and searched",
        run: index::run,
        seeds: index::seeds,
    },
    Target {
        name: "recording-range",
        about: "reading a recording by session time: any split of the parts read gives the same document, one header, events up to the end",
        run: range::run,
        seeds: range::seeds,
    },
    Target {
        name: "names",
        about: "DNS-1123 labels and subdomains, qualified names, env var and port names",
        run: names::run,
        seeds: names::seeds,
    },
    Target {
        name: "origins",
        about: "origins as clients send them and as the cluster publishes its API server: canonical, never a path or user",
        run: origins::run,
        seeds: origins::seeds,
    },
    Target {
        name: "websocket-client",
        about: "the relay's termination of a WebSocket client: any split gives the same messages, and what is forwarded reads back as what was parsed",
        run: streams::websocket_client,
        seeds: streams::websocket_client_seeds,
    },
    Target {
        name: "websocket-upstream",
        about: "the relay's reading of kube-apiserver's WebSocket frames: any split gives the same bytes and recorded output",
        run: streams::websocket_server,
        seeds: streams::websocket_server_seeds,
    },
    Target {
        name: "spdy-client",
        about: "the relay's termination of a SPDY client (header blocks included): any split gives the same frames, forwarded as parsed",
        run: streams::spdy_client,
        seeds: streams::spdy_client_seeds,
    },
    Target {
        name: "spdy-upstream",
        about: "the relay's reading of kube-apiserver's SPDY frames: any split gives the same bytes and recorded output",
        run: streams::spdy_server,
        seeds: streams::spdy_server_seeds,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
