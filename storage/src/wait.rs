//! Waiting for a pod to reach a condition, bounded by a deadline: kube-runtime's
//! [`await_condition`] (a watcher on the one pod, `fieldSelector=metadata.name=POD`, as kubectl's
//! `waitForContainer`, which lists, watches and re-lists after a 410 by itself), restarted after a
//! pause when its stream fails. When the caller may not list or watch the pod (a 4xx on the
//! list), the pod is read once per pause instead.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::wait::{Error as WaitError, await_condition};
use kube::runtime::watcher::Error as WatcherError;
use poddebug_types::ApiError;
use tokio::time::Instant;

use crate::StorageError;

/// Pause before starting again after an error, so a failing upstream is not hammered.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// How a wait ended.
#[derive(Debug)]
pub(crate) enum Waited {
    /// The condition holds for this pod.
    Done(Pod),
    /// The deadline passed; the last pod seen.
    TimedOut(Pod),
}

/// Wait until `done(&pod)` holds or `timeout` passes, starting from `pod` (already read). A pod
/// that is deleted meanwhile answers 404 `pods "P" not found`.
pub(crate) async fn wait_for(
    api: &Api<Pod>,
    pod: Pod,
    timeout: Duration,
    done: impl Fn(&Pod) -> bool + Send + Sync,
) -> Result<Waited, StorageError> {
    if done(&pod) {
        return Ok(Waited::Done(pod));
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    let deadline = Instant::now() + timeout;
    let last = Mutex::new(pod);
    let mut poll = false;
    loop {
        let step = async {
            if poll {
                pause(deadline).await;
                let p = api.get(&name).await?;
                if done(&p) {
                    return Ok(Some(p));
                }
                remember(&last, &p);
                return Ok(None);
            }
            // `None` (the pod is gone) ends the wait too, as a 404 below.
            let cond = |p: Option<&Pod>| match p {
                Some(p) => {
                    remember(&last, p);
                    done(p)
                }
                None => true,
            };
            match await_condition(api.clone(), &name, cond).await {
                Ok(Some(p)) => Ok(Some(p)),
                Ok(None) => Err(pod_gone(&name)),
                Err(WaitError::ProbeFailed(e)) => {
                    tracing::debug!(pod = %name, error = %e, "waiting: watch failed");
                    if refused(&e) {
                        poll = true;
                    } else {
                        pause(deadline).await;
                    }
                    Ok(None)
                }
            }
        };
        match tokio::time::timeout_at(deadline, step).await {
            Ok(Ok(Some(p))) => return Ok(Waited::Done(p)),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => break,
        }
    }
    let pod = last.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Waited::TimedOut(pod))
}

/// Keep `p` as the last pod seen.
fn remember(last: &Mutex<Pod>, p: &Pod) {
    if let Ok(mut l) = last.lock() {
        *l = p.clone();
    }
}

/// Sleep [`RETRY_PAUSE`], at most until `deadline`.
async fn pause(deadline: Instant) {
    let _ = tokio::time::timeout_at(deadline, tokio::time::sleep(RETRY_PAUSE)).await;
}

/// Whether the cluster refused to list or watch the pod (a 4xx other than 410 Expired, which the
/// watcher handles by listing again): reading it instead may still be allowed.
fn refused(e: &WatcherError) -> bool {
    let code = match e {
        WatcherError::InitialListFailed(kube::Error::Api(s))
        | WatcherError::WatchStartFailed(kube::Error::Api(s)) => s.code,
        WatcherError::WatchError(s) => s.code,
        _ => return false,
    };
    (400..500).contains(&code) && code != 410
}

/// 404 for a pod deleted while waited on, worded as kube-apiserver words it.
fn pod_gone(name: &str) -> StorageError {
    StorageError::Api(ApiError::not_found("pods", "", name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::{pod, state};
    use crate::state::{EcState, ec_state};
    use crate::testkube::FakeKube;

    fn running(p: &Pod) -> bool {
        ec_state(p, "dbg") == EcState::Running
    }

    /// The fake with pod "web" whose "dbg" is starting, and a task that runs it after a while.
    fn starting() -> (FakeKube, Api<Pod>, Pod) {
        let fake = FakeKube::default();
        let p = pod("web", &[("dbg", None, "waiting:ContainerCreating")]);
        fake.add_pod(p.clone());
        let api = Api::namespaced(fake.client(), "ns");
        let f = fake.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            f.set_ec_state("ns", "web", "dbg", state("running"));
        });
        (fake, api, p)
    }

    #[tokio::test]
    async fn sees_the_change_through_the_watch() {
        let (fake, api, p) = starting();
        match wait_for(&api, p, Duration::from_secs(10), running).await {
            Ok(Waited::Done(p)) => assert!(running(&p)),
            other => panic!("want done, got {other:?}"),
        }
        assert!(fake.requests().iter().any(|r| r.uri.contains("watch=true")));
    }

    #[tokio::test]
    async fn a_caller_that_may_not_list_falls_back_to_reading_the_pod() {
        let (fake, api, p) = starting();
        fake.set_refuse_lists();
        match wait_for(&api, p, Duration::from_secs(10), running).await {
            Ok(Waited::Done(p)) => assert!(running(&p)),
            other => panic!("want done, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_deleted_pod_is_404_and_a_deadline_gives_the_last_pod_seen() {
        let fake = FakeKube::default();
        let p = pod("web", &[("dbg", None, "waiting:ContainerCreating")]);
        fake.add_pod(p.clone());
        let api = Api::namespaced(fake.client(), "ns");
        fake.set_ec_state("ns", "web", "dbg", state("waiting:ErrImagePull"));
        match wait_for(&api, p.clone(), Duration::from_millis(500), running).await {
            Ok(Waited::TimedOut(last)) => assert!(
                matches!(ec_state(&last, "dbg"), EcState::Waiting { reason: Some(r), .. } if r == "ErrImagePull"),
                "{last:?}"
            ),
            other => panic!("want timed out, got {other:?}"),
        }
        fake.delete_pod("ns", "web");
        match wait_for(&api, p, Duration::from_secs(10), running).await {
            Err(StorageError::Api(e)) => {
                assert_eq!(
                    (e.code(), e.message()),
                    (404, "pods \"web\" not found".to_owned())
                )
            }
            other => panic!("want 404, got {other:?}"),
        }
    }
}
