//! Structured logs with tracing: text or JSON, Kubernetes-style `-v` verbosity.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::options::LogFormat;

/// The tracing level for a `-v` value.
pub fn level(verbosity: u8) -> &'static str {
    match verbosity {
        0 => "warn",
        1 | 2 => "info",
        3 | 4 => "debug",
        _ => "trace",
    }
}

/// Install the global subscriber. `RUST_LOG`, when set, overrides `-v`.
pub fn init(format: LogFormat, verbosity: u8) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // Dependencies stay quiet below debug; our own crates follow -v; the audit trail
        // (crate::audit) is always kept.
        let lvl = level(verbosity);
        EnvFilter::new(format!(
            "warn,poddebug_apiserver={lvl},poddebug_storage={lvl},poddebug_types={lvl},{}=info",
            crate::audit::TARGET
        ))
    });
    // A span that closes is logged with its time (`time.busy`, `time.idle`): at -v=3 and up,
    // the phases of every create (crate::filters).
    // Colours only on a terminal, and never with NO_COLOR set: a log written to a file or a
    // pipe (a container's log, `register.sh`'s server.log) carries no escape sequences, as
    // Kubernetes components' never do.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
