//! Making a `kube::Client` the way kubectl picks its configuration, with kubectl's global
//! flags (`--as`, `--as-group`, `--request-timeout`) and its handling of server warnings.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};

/// Where the configuration comes from and how requests go, as kubectl's global flags say.
///
/// With neither `kubeconfig` nor `context` set, the configuration is inferred as kube-rs does:
/// `KUBECONFIG` or `~/.kube/config`, else the in-cluster service account. Every auth kind
/// kube-rs supports works (client certificates, tokens, token files, exec plugins, OIDC,
/// in-cluster).
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// A kubeconfig file to use instead of `KUBECONFIG` / `~/.kube/config` (`--kubeconfig`).
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use instead of the current one (`--context`).
    pub context: Option<String>,
    /// Act as this user (`--as`): every request carries `Impersonate-User`, and the caller
    /// needs `impersonate` on `users` for it.
    pub impersonate: Option<String>,
    /// Act as these groups too (`--as-group`, repeatable).
    pub impersonate_groups: Vec<String>,
    /// Give up on a request whose answer has not begun within this long
    /// (`--request-timeout`; `None` or zero: no limit). Only the wait for the response's head
    /// is bounded: a watch, a log follow or an attach session that has begun runs on.
    pub request_timeout: Option<Duration>,
    /// What to do with the `Warning` headers of the server's answers.
    pub warnings: Warnings,
    /// Answer a 429, 503 or 504 at once, as kubectl does when no `Retry-After` comes with it,
    /// instead of kube's retries (up to 15, over about five minutes: what a command meets
    /// while the APIService is unavailable). `false`: kube's retries.
    pub fail_fast: bool,
}

/// What becomes of the server's `Warning` headers (RFC 7234 `299 - "text"`, which
/// kube-apiserver and poddebug send for deprecated or risky requests).
#[derive(Clone, Default)]
pub enum Warnings {
    /// Dropped (the default for a library).
    #[default]
    Ignore,
    /// Printed on stderr as `Warning: text`, each distinct text once per client, as kubectl
    /// prints them.
    Stderr,
    /// Passed, text only, to this function.
    Handler(Arc<dyn Fn(&str) + Send + Sync>),
}

impl std::fmt::Debug for Warnings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Warnings::Ignore => "Ignore",
            Warnings::Stderr => "Stderr",
            Warnings::Handler(_) => "Handler(..)",
        })
    }
}

/// A client and the namespace the configuration names (the context's, `default` without one).
pub async fn connect(options: &ConnectOptions) -> Result<(kube::Client, String)> {
    let config = config(options).await?;
    let namespace = config.default_namespace.clone();
    let builder = kube::client::ClientBuilder::try_from(config).map_err(Error::Kube)?;
    let handler = warning_handler(&options.warnings);
    let builder = builder.with_layer(&tower::util::MapResponseLayer::new(
        move |resp: http::Response<_>| {
            if let Some(h) = &handler {
                for text in resp
                    .headers()
                    .get_all(http::header::WARNING)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .filter_map(warning_text)
                {
                    h(&text);
                }
            }
            resp
        },
    ));
    let timeout = options.request_timeout.filter(|t| !t.is_zero());
    let builder = builder.with_layer(&tower::util::option_layer(
        timeout.map(tower::timeout::TimeoutLayer::new),
    ));
    Ok((builder.build(), namespace))
}

type Handler = Arc<dyn Fn(&str) + Send + Sync>;

fn warning_handler(w: &Warnings) -> Option<Handler> {
    match w {
        Warnings::Ignore => None,
        Warnings::Handler(h) => Some(h.clone()),
        Warnings::Stderr => {
            let shown = Mutex::new(HashSet::<String>::new());
            Some(Arc::new(move |text: &str| {
                let new = shown
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(text.to_owned());
                if new {
                    eprintln!("Warning: {text}");
                }
            }))
        }
    }
}

/// The text of a `Warning` header value: `299 - "text"` (an optional date after it), with
/// `\"` and `\\` unescaped. Values of another form are not warnings a user is meant to read.
pub fn warning_text(value: &str) -> Option<String> {
    let mut parts = value.splitn(3, ' ');
    let code = parts.next()?;
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let _agent = parts.next()?;
    let rest = parts.next()?.strip_prefix('"')?;
    let mut text = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => text.push(chars.next()?),
            '"' => return Some(text),
            c => text.push(c),
        }
    }
    None
}

/// The `kube::Config` for `options`.
pub async fn config(options: &ConnectOptions) -> Result<kube::Config> {
    let kc_options = kube::config::KubeConfigOptions {
        context: options.context.clone(),
        ..Default::default()
    };
    let mut config = match (&options.kubeconfig, &options.context) {
        (Some(path), _) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(Error::Kubeconfig)?;
            kube::Config::from_custom_kubeconfig(kc, &kc_options)
                .await
                .map_err(Error::Kubeconfig)?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&kc_options)
            .await
            .map_err(Error::Kubeconfig)?,
        (None, None) => kube::Config::infer().await.map_err(Error::InferConfig)?,
    };
    if options.fail_fast {
        config.default_retry = false;
    }
    if let Some(user) = &options.impersonate {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !options.impersonate_groups.is_empty() {
        if options.impersonate.is_none() && config.auth_info.impersonate.is_none() {
            // kube-apiserver refuses groups without a user; kubectl says so first.
            return Err(Error::InvalidParams(
                "--as-group needs --as: kube-apiserver refuses groups to impersonate without \
                 a user"
                    .to_owned(),
            ));
        }
        config.auth_info.impersonate_groups = Some(options.impersonate_groups.clone());
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_texts() {
        assert_eq!(
            warning_text(r#"299 - "image busybox:latest has no digest""#).as_deref(),
            Some("image busybox:latest has no digest")
        );
        assert_eq!(
            warning_text(r#"299 poddebug "say \"hi\" \\ bye" "Wed, 25 Nov 2026 10:00:00 GMT""#)
                .as_deref(),
            Some(r#"say "hi" \ bye"#)
        );
        assert_eq!(warning_text("299 - unquoted"), None);
        assert_eq!(warning_text(r#"299 - "unterminated"#), None);
        assert_eq!(warning_text(r#"abc - "x""#), None);
    }
}
