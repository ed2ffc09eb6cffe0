//! The one error type of the client.

use std::time::Duration;

pub use kube::core::Status;

/// Everything a call of this crate can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server (poddebug, or kube-apiserver in front of it) refused the request. Its
    /// `Status` is kept whole: code, reason, message and causes, as kubectl would print them.
    #[error("{}", status_line(.0))]
    Api(Box<Status>),

    /// The request could not be made or its answer not read (connection, TLS, credentials,
    /// WebSocket handshake).
    #[error("request failed: {0}")]
    Kube(#[source] kube::Error),

    /// The kubeconfig could not be read or has no usable context.
    #[error("loading the kubeconfig: {0}")]
    Kubeconfig(#[source] kube::config::KubeconfigError),

    /// Neither a kubeconfig nor the in-cluster environment gave a configuration.
    #[error("finding a cluster configuration: {0}")]
    InferConfig(#[source] kube::config::InferConfigError),

    /// An answer was not the JSON this API promises.
    #[error("decoding the server's answer: {0}")]
    Decode(#[source] serde_json::Error),

    /// The attach stream broke before the container's outcome was known.
    #[error("attach stream: {0}")]
    Stream(#[source] Box<dyn std::error::Error + Send + Sync>),

    /// The call needs a namespace and the handle was made for all namespaces.
    #[error("{0} needs a namespace: make the handle with DebugContainers::new")]
    NamespaceRequired(&'static str),

    /// The parameters cannot form a request (for example stderr together with a TTY).
    #[error("invalid parameters: {0}")]
    InvalidParams(String),

    /// A watch could not go on for a reason that is neither a refusal nor a failed request (an
    /// answer without `metadata.resourceVersion`).
    #[error("watch: {0}")]
    Watch(#[source] Box<kube::runtime::watcher::Error>),

    /// A debug request was not decided in time.
    #[error("debug request {name} was not decided within {}s", .after.as_secs())]
    NotDecided {
        /// The request.
        name: String,
        /// How long was waited.
        after: Duration,
    },

    /// The debug container did not start in time.
    #[error("timed out after {}s waiting for debug container {name} to start{}", .after.as_secs(), waiting_suffix(.waiting))]
    Timeout {
        /// The debug container.
        name: String,
        /// How long was waited.
        after: Duration,
        /// The last waiting reason and message seen (e.g. `ErrImagePull: ...`).
        waiting: Option<String>,
    },
}

fn waiting_suffix(w: &Option<String>) -> String {
    w.as_ref().map(|w| format!(": {w}")).unwrap_or_default()
}

/// kubectl's wording for a server refusal: `Error from server (Reason): message`.
fn status_line(s: &Status) -> String {
    if s.reason.is_empty() {
        format!("Error from server: {}", s.message)
    } else {
        format!("Error from server ({}): {}", s.reason, s.message)
    }
}

impl Error {
    /// The server's `Status`, when the server refused the request.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Api(s) => Some(s),
            _ => None,
        }
    }

    /// The HTTP code of a server refusal (404, 409, 403...).
    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => Error::Api(s),
            other => Error::Kube(other),
        }
    }
}

impl From<kube::runtime::watcher::Error> for Error {
    /// A refusal keeps its `Status` (a 403 on the list, a watch's error event); the rest is a
    /// failed request.
    fn from(e: kube::runtime::watcher::Error) -> Self {
        use kube::runtime::watcher::Error as W;
        match e {
            W::InitialListFailed(k) | W::WatchStartFailed(k) | W::WatchFailed(k) => Error::from(k),
            W::WatchError(s) => Error::Api(s),
            other @ W::NoResourceVersion => Error::Watch(Box::new(other)),
        }
    }
}

/// The result of a call of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn server_refusals_read_like_kubectl() {
        let s: Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 404, "reason": "NotFound",
            "message": "pods \"web\" not found"
        }))
        .unwrap();
        let e = Error::from(kube::Error::Api(Box::new(s)));
        assert_eq!(
            e.to_string(),
            "Error from server (NotFound): pods \"web\" not found"
        );
        assert_eq!(e.code(), Some(404));
        let t = Error::Timeout {
            name: "dbg".into(),
            after: Duration::from_secs(5),
            waiting: Some("ErrImagePull: no such image".into()),
        };
        assert_eq!(
            t.to_string(),
            "timed out after 5s waiting for debug container dbg to start: ErrImagePull: no such image"
        );
    }
}
