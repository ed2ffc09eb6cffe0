//! Reads: a pod's debug containers as API objects (`get`, `list`). One object per debug name,
//! made from the newest ephemeral container of that name; ephemeral containers added by other
//! tools (`kubectl debug`) show too, under their own names.

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::ListParams;
use poddebug_types::convert::{debug_containers_of, from_pod, newest_for};
use poddebug_types::{ApiError, GROUP, PodDebugContainer, PodDebugContainerList, StopRequest};

use crate::cache::PodCache;
use crate::policy::RESOURCE;
use crate::selector::PodSelection;
use crate::state::ec_state;
use crate::stop_lease::{StopLeases, StopOrigin};
use crate::stop_record::stop_record;
use crate::{ListOptions, StorageError};

/// The API object of ephemeral container `ec`, with the pod's resourceVersion and its stop
/// record: from its termination message once terminated, else from its stop record in the
/// cluster (`stops`, see `stop_lease`), which also gives a container reported unstoppable its
/// `Unstoppable` condition while it runs.
pub(crate) fn object_of(
    pod: &Pod,
    ec: &EphemeralContainer,
    stops: Option<&StopLeases>,
) -> PodDebugContainer {
    let lease = match (stops, pod.metadata.uid.as_deref()) {
        (Some(s), Some(uid)) => s.cached(uid, &ec.name),
        _ => None,
    };
    let stop = stop_record(pod, &ec.name).or_else(|| {
        lease
            .as_ref()
            .filter(|l| l.origin == StopOrigin::Delete)
            .map(|l| StopRequest {
                requested_at: Time(l.requested_at),
                requested_by: l.requested_by.clone(),
                grace_period_seconds: Some(l.grace_period_seconds),
            })
    });
    let mut obj = from_pod(pod, ec, stop);
    obj.metadata.resource_version = pod.metadata.resource_version.clone();
    if !ec_state(pod, &ec.name).is_terminated()
        && let Some(c) = lease.as_ref().and_then(crate::unstoppable::condition)
        && let Some(status) = obj.status.as_mut()
    {
        status.conditions = Some(vec![c]);
    }
    obj
}

/// The API object of the ephemeral container named `ec_name`, which must be in the pod.
pub(crate) fn object_by_ec_name(
    pod: &Pod,
    ec_name: &str,
    stops: Option<&StopLeases>,
) -> Result<PodDebugContainer, ApiError> {
    crate::state::ephemeral_container(pod, ec_name)
        .map(|ec| object_of(pod, ec, stops))
        .ok_or_else(|| {
            ApiError::Internal(format!(
                "ephemeral container {ec_name:?} is missing from the pod"
            ))
        })
}

/// The newest ephemeral container of debug container `name`, or 404 NotFound.
pub(crate) fn newest<'a>(pod: &'a Pod, name: &str) -> Result<&'a EphemeralContainer, ApiError> {
    newest_for(pod, name).ok_or_else(|| ApiError::not_found(RESOURCE, GROUP, name))
}

/// Every debug container of the pod, in spec order, one per debug name (the newest).
pub(crate) fn objects_of(
    pod: &Pod,
    stops: Option<&StopLeases>,
) -> Vec<(String, PodDebugContainer)> {
    let entries = debug_containers_of(pod);
    // Keep the last (newest) ephemeral container of each debug name, at its first position.
    let mut out: Vec<(String, &EphemeralContainer)> = Vec::with_capacity(entries.len());
    for (name, ec) in entries {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = ec,
            None => out.push((name, ec)),
        }
    }
    out.into_iter()
        .map(|(name, ec)| (name, object_of(pod, ec, stops)))
        .collect()
}

/// Read one debug container.
pub(crate) async fn get(
    api: &Api<Pod>,
    pod: &str,
    name: &str,
    stops: Option<&StopLeases>,
) -> Result<PodDebugContainer, StorageError> {
    let pod = api.get(pod).await?;
    Ok(object_of(&pod, newest(&pod, name)?, stops))
}

/// The pod list parameters for `opts`: its selectors, plus `metadata.name=POD` for one pod.
pub(crate) fn selectors(opts: &ListOptions) -> (Option<String>, Option<String>) {
    let pod_field = opts.pod.as_ref().map(|p| format!("metadata.name={p}"));
    let fields = match (
        pod_field,
        opts.field_selector.as_deref().filter(|s| !s.is_empty()),
    ) {
        (Some(p), Some(f)) => Some(format!("{p},{f}")),
        (Some(p), None) => Some(p),
        (None, Some(f)) => Some(f.to_owned()),
        (None, None) => None,
    };
    let labels = opts.label_selector.clone().filter(|s| !s.is_empty());
    (labels, fields)
}

/// List debug containers; the list's resourceVersion is the pod list's.
pub(crate) async fn list(
    api: &Api<Pod>,
    opts: &ListOptions,
    stops: Option<&StopLeases>,
) -> Result<PodDebugContainerList, StorageError> {
    let (labels, fields) = selectors(opts);
    let mut lp = ListParams::default();
    if let Some(l) = labels.as_deref() {
        lp = lp.labels(l);
    }
    if let Some(f) = fields.as_deref() {
        lp = lp.fields(f);
    }
    let pods = api.list(&lp).await?;
    if pods.items.is_empty()
        && opts.pod_must_exist
        && let Some(pod) = opts.pod.as_deref()
    {
        // Nothing listed: a missing pod is its own 404 (a pod the label selector excluded is
        // an empty list).
        api.get(pod).await?;
    }
    let items = pods
        .items
        .iter()
        .flat_map(|p| objects_of(p, stops))
        .map(|(_, obj)| obj)
        .collect();
    let metadata = ListMeta {
        resource_version: pods.metadata.resource_version.clone(),
        ..Default::default()
    };
    Ok(PodDebugContainerList::new(items, metadata))
}

/// List debug containers from the pod cache, ordered by namespace and pod (spec order within
/// a pod, which only ever grows at its end);
/// the list's resourceVersion is the cache's. With `pod_must_exist`, a pod absent from the
/// cache is looked up (it may exist without debug containers, or not at all: 404).
pub(crate) async fn list_cached(
    cache: &PodCache,
    api: &Api<Pod>,
    opts: &ListOptions,
    stops: Option<&StopLeases>,
) -> Result<PodDebugContainerList, StorageError> {
    let selection = PodSelection::new(opts)?;
    let (pods, rv) = cache.snapshot();
    let mut pods: Vec<_> = pods.into_iter().filter(|p| selection.matches(p)).collect();
    if pods.is_empty()
        && opts.pod_must_exist
        && let Some(pod) = opts.pod.as_deref()
    {
        api.get(pod).await?;
    }
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let items = pods
        .iter()
        .flat_map(|p| objects_of(p, stops))
        .map(|(_, obj)| obj)
        .collect();
    let metadata = ListMeta {
        resource_version: Some(rv.to_string()),
        ..Default::default()
    };
    Ok(PodDebugContainerList::new(items, metadata))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testutil::pod;

    #[test]
    fn one_object_per_debug_name_newest_wins() {
        let p = pod(
            "web",
            &[
                ("dbg", None, "terminated"),
                ("kubectl-made", None, "running"),
                ("dbg-bcdfg", Some("dbg"), "running"),
            ],
        );
        let objs = objects_of(&p, None);
        let names: Vec<_> = objs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["dbg", "kubectl-made"]);
        let dbg = &objs[0].1;
        assert_eq!(dbg.metadata.resource_version.as_deref(), Some("100"));
        let status = dbg.status.as_ref().expect("status");
        assert_eq!(status.ephemeral_container_name, "dbg-bcdfg");
        assert_eq!(newest(&p, "dbg").expect("found").name, "dbg-bcdfg");
    }

    #[test]
    fn unknown_name_is_404_of_our_resource() {
        let err = newest(&pod("web", &[]), "nope").expect_err("missing");
        assert_eq!(err.code(), 404);
        assert_eq!(err.message(), "pods/debug.poddebug.dev \"nope\" not found");
    }

    #[test]
    fn selectors_combine_pod_and_fields() {
        let mut o = ListOptions {
            pod: Some("web".into()),
            ..Default::default()
        };
        assert_eq!(selectors(&o), (None, Some("metadata.name=web".into())));
        o.field_selector = Some("spec.nodeName=n1".into());
        o.label_selector = Some("app=x".into());
        assert_eq!(
            selectors(&o),
            (
                Some("app=x".into()),
                Some("metadata.name=web,spec.nodeName=n1".into())
            )
        );
        assert_eq!(selectors(&ListOptions::default()), (None, None));
    }
}
