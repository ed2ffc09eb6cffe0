//! The first read of a create, begun beside its authorization.
//!
//! A create reads the object it starts from (a debug container's pod, a copy's original, a
//! node debug container's node) only after the request is authorized, so on a SubjectAccessReview
//! that the cache cannot answer the two round trips add up. [`Prefetch`] starts the read as the
//! request arrives, in a task of its own, with exactly the identity and options the create would
//! use; the create takes its answer in place of its own read. Nothing of it reaches the caller
//! before authorization allowed the request: a refused request drops the [`Prefetch`] unread,
//! which aborts the read; and the answer is used only by the create it was made for (same
//! object, same caller, same kind of read), else the create reads for itself.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::GetParams;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use crate::Caller;
use crate::phases::{Phase, Phases};

/// What a create reads first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefetchTarget {
    /// A pod, as the caller (with `--impersonate`) or the server.
    Pod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// From kube-apiserver's watch cache (`resourceVersion=0`, a debug container's create)
        /// rather than a quorum read (a copy's original).
        cached: bool,
    },
    /// A node, always as the server.
    Node {
        /// Name.
        name: String,
    },
}

/// The raw answer of the read: the object's JSON text.
pub(crate) type ReadResult = Result<String, kube::Error>;

/// One read under way, for `caller`.
struct Started {
    target: PrefetchTarget,
    caller: Caller,
    task: AbortOnDropHandle<ReadResult>,
}

/// A read begun early, taken at most once; dropping it (and every clone) unread aborts it.
#[derive(Clone, Default)]
pub struct Prefetch(Arc<Mutex<Option<Started>>>);

impl std::fmt::Debug for Prefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prefetch")
    }
}

impl Prefetch {
    /// Start reading `target` as `caller` with `client` (already the caller's, with
    /// `--impersonate`), its time observed in `phases`. Must run inside a Tokio runtime.
    pub(crate) fn start(
        client: kube::Client,
        target: PrefetchTarget,
        caller: &Caller,
        phases: &Phases,
    ) -> Self {
        let (t, phases) = (target.clone(), phases.clone());
        let read = async move {
            match &t {
                PrefetchTarget::Pod {
                    namespace,
                    name,
                    cached,
                } => {
                    let params = if *cached {
                        GetParams::any()
                    } else {
                        GetParams::default()
                    };
                    let read = read_pod(&client, namespace, name, &params);
                    phases.time(Phase::PodRead, read).await
                }
                PrefetchTarget::Node { name } => {
                    phases.time(Phase::NodeRead, read_node(&client, name)).await
                }
            }
        };
        let task = tokio::spawn(read.instrument(tracing::Span::current()));
        Prefetch(Arc::new(Mutex::new(Some(Started {
            target,
            caller: caller.clone(),
            task: AbortOnDropHandle::new(task),
        }))))
    }

    /// The answer of the read, if one of `target` as `caller` was begun and not taken yet
    /// (waiting for it when still under way); `None` when the create must read for itself.
    pub(crate) async fn take(
        &self,
        target: &PrefetchTarget,
        caller: &Caller,
    ) -> Option<ReadResult> {
        let started = self.0.lock().ok()?.take()?;
        if started.target != *target || started.caller != *caller {
            return None;
        }
        // A read that panicked or was aborted leaves the create to read for itself.
        started.task.await.ok()
    }
}

/// Read pod `namespace/name` with `client` as JSON text (a create keeps it to send the pod back
/// as read, and decodes the typed pod from it: see [`crate::pod_json`]).
pub(crate) async fn read_pod(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    params: &GetParams,
) -> ReadResult {
    use kube::Resource;
    let req = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
        .get(name, params)
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(req).await
}

/// Read node `name` with `client` (a quorum read) as JSON text.
pub(crate) async fn read_node(client: &kube::Client, name: &str) -> ReadResult {
    use kube::Resource;
    let req = kube::core::Request::new(Node::url_path(&(), None))
        .get(name, &GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Caller {
        Caller {
            user: "alice".into(),
            ..Default::default()
        }
    }

    fn pod(name: &str) -> PrefetchTarget {
        PrefetchTarget::Pod {
            namespace: "ns".into(),
            name: name.into(),
            cached: true,
        }
    }

    /// A client of a port nothing listens on: every read fails to connect.
    fn unreachable() -> kube::Client {
        let url = "http://127.0.0.1:9".parse().expect("url");
        kube::Client::try_from(kube::Config::new(url)).expect("client")
    }

    #[tokio::test]
    async fn a_read_is_taken_once_by_the_create_it_was_made_for() {
        let phases = Phases::default();
        let p = Prefetch::start(unreachable(), pod("web"), &alice(), &phases);
        let answer = p.take(&pod("web"), &alice()).await;
        assert!(matches!(answer, Some(Err(_))), "the read's own answer");
        assert!(p.take(&pod("web"), &alice()).await.is_none(), "taken once");

        // Another object, or another caller: the create reads for itself.
        let p = Prefetch::start(unreachable(), pod("web"), &alice(), &phases);
        assert!(p.take(&pod("other"), &alice()).await.is_none());
        let p = Prefetch::start(unreachable(), pod("web"), &alice(), &phases);
        let bob = Caller {
            user: "bob".into(),
            ..Default::default()
        };
        assert!(p.take(&pod("web"), &bob).await.is_none());
        let p = Prefetch::start(unreachable(), pod("web"), &alice(), &phases);
        let quorum = PrefetchTarget::Pod {
            namespace: "ns".into(),
            name: "web".into(),
            cached: false,
        };
        assert!(p.take(&quorum, &alice()).await.is_none());
        assert!(
            Prefetch::default()
                .take(&pod("web"), &alice())
                .await
                .is_none()
        );
    }
}
