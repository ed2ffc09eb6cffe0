//! The `poddebug-apiserver` binary.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let opts = poddebug_apiserver::options::Options::parse();
    poddebug_apiserver::logging::init(opts.log_format, opts.verbosity);
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "starting");
    // The process's TLS provider, for the clients that take the default (the object store's
    // HTTP client); the server's own TLS and kube-rs name ring explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(poddebug_apiserver::run(opts)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain, so that a log collector shows why (such as "Address already in
            // use"), not only what failed.
            let mut chain = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                chain.push_str(": ");
                chain.push_str(&s.to_string());
                src = s.source();
            }
            tracing::error!(error = %chain, "fatal");
            eprintln!("error: {chain}");
            std::process::ExitCode::FAILURE
        }
    }
}
