//! The fuzz targets, one file per parser family.

mod body;
mod frames;
mod names;
mod origins;
mod recording;
mod request;

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
        name: "websocket-frames",
        about: "the WebSocket frame tracker: any split of a byte stream gives the same state",
        run: frames::websocket,
        seeds: frames::websocket_seeds,
    },
    Target {
        name: "spdy-frames",
        about: "the SPDY/3.1 frame tracker: any split of a byte stream gives the same events",
        run: frames::spdy,
        seeds: frames::spdy_seeds,
    },
    Target {
        name: "recording-decoder",
        about: "the session recorder's decoder (on the relay's task): no panic, the same events for any split",
        run: recording::run,
        seeds: recording::seeds,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
