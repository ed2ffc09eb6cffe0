//! Where an attach or log stream goes: the container must be an ephemeral container of the pod,
//! named by its debug name (mapped to the newest ephemeral container of that name) or by its own
//! name. For attach, wait until it runs; a terminated container, or one that cannot start, is an
//! error at once. An attach or log follow of a debug container whose stop was asked for is
//! refused (`unstoppable::gate`), whichever entry point resolves it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use poddebug_types::ApiError;
use poddebug_types::convert::{newest_for, profile_of};
use poddebug_types::privilege::Elevation;
use poddebug_types::reach::effective_profiles;

use crate::cluster::Cluster;
use crate::state::{EcState, ec_state, ephemeral_container};
use crate::unstoppable::gate;
use crate::wait::{Waited, wait_for};
use crate::{StorageError, StreamTarget, StreamUse};

/// `container X` as messages name it, with the ephemeral container's name when it differs.
fn named(container: &str, ec_name: &str) -> String {
    if container == ec_name {
        format!("container {container}")
    } else {
        format!("container {container} (ephemeral container {ec_name})")
    }
}

/// `Some(Ok)` when attachable, `Some(Err)` when it never will be, `None` while it may still start.
fn attachable(
    pod: &Pod,
    pod_name: &str,
    container: &str,
    ec_name: &str,
) -> Option<Result<(), ApiError>> {
    let state = ec_state(pod, ec_name);
    match &state {
        EcState::Running => Some(Ok(())),
        EcState::Terminated { .. } => Some(Err(ApiError::BadRequest(format!(
            "{} in pod {pod_name} has terminated ({}); debug containers are never restarted, create a new one",
            named(container, ec_name),
            state.describe()
        )))),
        s if s.is_start_failure() => Some(Err(ApiError::BadRequest(format!(
            "{} in pod {pod_name} cannot start: {}",
            named(container, ec_name),
            s.describe()
        )))),
        EcState::Waiting { .. } => None,
    }
}

/// The profiles a debug container of `pod` runs with, judged by what it can reach: the one
/// recorded at its create, then those its security context and what the pod lends it (its
/// target, the volumes it mounts, the host's namespaces) amount to — for containers made before
/// profiles were recorded, or by other means, too — each profile once.
fn profiles_of(pod: &Pod, ec: &k8s_openapi::api::core::v1::EphemeralContainer) -> Vec<Elevation> {
    effective_profiles(pod, ec, profile_of(ec))
}

/// Resolve (and for attach, wait for) a stream target, read with `api`.
pub(crate) async fn stream_target(
    b: &Cluster,
    api: &Api<Pod>,
    namespace: &str,
    pod_name: &str,
    container: &str,
    purpose: StreamUse,
) -> Result<StreamTarget, StorageError> {
    let pod = api.get(pod_name).await?;
    let target = match newest_for(&pod, container).or_else(|| ephemeral_container(&pod, container))
    {
        Some(ec) => {
            if purpose.reaches_the_container() {
                gate(b, &pod, ec, container).await?;
            }
            StreamTarget {
                namespace: namespace.to_owned(),
                pod: pod_name.to_owned(),
                container: ec.name.clone(),
                profiles: profiles_of(&pod, ec),
                owner: poddebug_types::convert::owner_of(ec),
                server_identity: false,
                regular_container: false,
                justification: poddebug_types::convert::justification_of(ec),
            }
        }
        None => made_pod_target(&pod, namespace, pod_name, container, false).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "container {container} is not a debug container of pod {pod_name}"
            ))
        })?,
    };
    finish(api, pod, target, container, purpose.wait_running()).await
}

/// The target of a container of a pod poddebug made (a copy of a pod, a node debug pod): every
/// container of it may be reached, and its maker owns its sessions. The profiles that hold for
/// all of them are what the pod gets, read from its spec (never from the profile annotation
/// poddebug wrote, which whoever may patch the pod can rewrite): the node profile it amounts to
/// for a node debug pod (`server_identity`, the server's own namespace), the debug profiles of
/// its settings for a copy in a namespace.
pub(crate) fn made_pod_target(
    pod: &Pod,
    namespace: &str,
    pod_name: &str,
    container: &str,
    server_identity: bool,
) -> Option<StreamTarget> {
    use poddebug_types::copy::{ANNOTATION_CREATED_BY, LABEL_KIND, annotation, label};
    label(pod, LABEL_KIND)?;
    let spec = pod.spec.as_ref()?;
    spec.containers.iter().find(|c| c.name == container)?;
    let profiles = if server_identity {
        vec![poddebug_types::node::effective_node_profile(pod)]
    } else {
        poddebug_types::privilege::pod_profiles(pod)
    };
    Some(StreamTarget {
        namespace: namespace.to_owned(),
        pod: pod_name.to_owned(),
        container: container.to_owned(),
        profiles,
        owner: annotation(pod, ANNOTATION_CREATED_BY).map(str::to_owned),
        server_identity,
        regular_container: true,
        justification: poddebug_types::request::Justification::from_annotations(&pod.metadata),
    })
}

/// For attach (`wait_running` set), wait until the target's container runs.
pub(crate) async fn finish(
    api: &Api<Pod>,
    pod: Pod,
    target: StreamTarget,
    container: &str,
    wait_running: Option<Duration>,
) -> Result<StreamTarget, StorageError> {
    let pod_name = target.pod.clone();
    let pod_name = pod_name.as_str();
    let ec_name = target.container.clone();
    let Some(timeout) = wait_running else {
        return Ok(target);
    };
    if let Some(ready) = attachable(&pod, pod_name, container, &ec_name) {
        return ready.map(|()| target).map_err(StorageError::from);
    }
    let decided = |p: &Pod| attachable(p, pod_name, container, &ec_name).is_some();
    match wait_for(api, pod, timeout, decided).await? {
        Waited::Done(p) => match attachable(&p, pod_name, container, &ec_name) {
            Some(Err(e)) => Err(e.into()),
            _ => Ok(target),
        },
        Waited::TimedOut(p) => Err(ApiError::Timeout(format!(
            "{} in pod {pod_name} was not running after {}s ({})",
            named(container, &ec_name),
            timeout.as_secs(),
            ec_state(&p, &ec_name).describe()
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::pod;

    #[test]
    fn attachability() {
        let p = pod(
            "web",
            &[
                ("run", None, "running"),
                ("done", None, "terminated"),
                ("bad", None, "waiting:ImagePullBackOff"),
                ("new", None, "waiting:ContainerCreating"),
                ("dbg-bcdfg", Some("dbg"), "terminated"),
            ],
        );
        assert_eq!(attachable(&p, "web", "run", "run"), Some(Ok(())));
        let err = attachable(&p, "web", "done", "done")
            .and_then(Result::err)
            .expect("terminated");
        assert_eq!(err.code(), 400);
        assert!(
            err.message()
                .starts_with("container done in pod web has terminated"),
            "{}",
            err.message()
        );
        let err = attachable(&p, "web", "bad", "bad")
            .and_then(Result::err)
            .expect("cannot start");
        assert_eq!(
            err.message(),
            "container bad in pod web cannot start: ImagePullBackOff: ImagePullBackOff happened"
        );
        assert_eq!(attachable(&p, "web", "new", "new"), None);
        let err = attachable(&p, "web", "dbg", "dbg-bcdfg")
            .and_then(Result::err)
            .expect("terminated");
        assert!(
            err.message()
                .starts_with("container dbg (ephemeral container dbg-bcdfg) in pod web")
        );
    }
}
