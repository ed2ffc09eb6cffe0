//! Copies of pods (`pods/POD/copy`, `pods/POD/copies[/NAME]`): a normal Pod in the original's
//! namespace, built by [`poddebug_types::copy::build_copy`], created with the caller's identity
//! under `--impersonate` (else the server's, once the handler has checked the caller's own
//! `create pods`), read back from the pod every time.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, GetParams, ListParams, PostParams, Preconditions};
use poddebug_types::copy::{
    CopyContext, KIND_POD_DEBUG_COPY, LABEL_COPY_OF, LABEL_KIND, PodDebugCopy, PodDebugCopyList,
    build_copy, copy_from_pod, images_of, label,
};
use poddebug_types::{ApiError, ErrorList, FieldError, GROUP};

use crate::cluster::Cluster;
use crate::phases::Phase;
use crate::prefetch::{PrefetchTarget, read_pod};
use crate::{Caller, CopyRequest, CopySelection, CopyWatchStream, StorageError};

/// The resource copies' errors name.
pub(crate) const RESOURCE: &str = "poddebugcopies";

fn not_found(name: &str) -> StorageError {
    ApiError::not_found(RESOURCE, GROUP, name).into()
}

/// Make the copy.
pub(crate) async fn create(
    cluster: &Cluster,
    req: CopyRequest,
) -> Result<PodDebugCopy, StorageError> {
    let api = cluster.pods(&req.namespace, &req.caller)?;
    let name = req.body.metadata.name.clone().filter(|n| !n.is_empty());
    let shown = name.clone().unwrap_or_default();
    // The original's name is the copy's label, which holds 63 characters.
    if req.pod.len() > 63 {
        let mut errs = ErrorList::new();
        errs.push(FieldError::invalid(
            "metadata.labels[poddebug.dev/copy-of]",
            req.pod.as_str(),
            "must be no more than 63 characters: pods with longer names cannot be copied"
                .to_owned(),
        ));
        return Err(ApiError::invalid(GROUP, KIND_POD_DEBUG_COPY, &shown, errs).into());
    }
    let phases = &req.phases;
    // The original, read beside authorization when the handler could (a quorum read: the copy
    // is made from the pod as it is).
    let target = PrefetchTarget::Pod {
        namespace: req.namespace.clone(),
        name: req.pod.clone(),
        cached: false,
    };
    let prefetched = match &req.prefetch {
        Some(p) => p.take(&target, &req.caller).await,
        None => None,
    };
    let raw = match prefetched {
        Some(answer) => answer?,
        None => {
            let (client, params) = (api.clone().into_client(), GetParams::default());
            let read = read_pod(&client, &req.namespace, &req.pod, &params);
            phases.time(Phase::PodRead, read).await?
        }
    };
    let source: Pod = crate::pod_json::PodJson::parse(raw)
        .and_then(|p| p.typed())
        .map_err(|_| {
            ApiError::Internal("the pod read from the cluster cannot be decoded".to_owned())
        })?;
    let config = cluster.config();
    let expires_at = crate::ttl::deadline_of(
        KIND_POD_DEBUG_COPY,
        &config.ttl,
        req.body.ttl_seconds,
        &shown,
        jiff::Timestamp::now(),
    )?;
    let expires_at = crate::ttl::earliest(expires_at, req.deadline);
    let ctx = CopyContext {
        name: name.clone(),
        profile: req.profile,
        default_image: &config.policy.default_image,
        created_by: &req.caller.user,
        expires_at,
    };
    let mut pod = phases
        .time_sync(Phase::Validation, || build_copy(&source, &req.body, &ctx))
        .map_err(|errs| ApiError::invalid(GROUP, KIND_POD_DEBUG_COPY, &shown, errs))?;
    req.justification.annotate(&mut pod.metadata);
    // Every image the copy would run passes the policy: the original's too, which the server
    // would otherwise start again under another name.
    phases.time_sync(Phase::Policy, || {
        images_of(&pod).iter().try_for_each(|image| {
            crate::policy::check_image_for("pods/copy", &config.policy, &req.pod, image)
        })
    })?;
    // The caller's check of what the copy, as built, gets.
    if let Some(admission) = &req.admission {
        phases
            .time(Phase::Admission, (admission.0)(pod.clone()))
            .await?;
    }
    let params = PostParams {
        dry_run: req.dry_run,
        field_manager: Some(config.reporting_component.clone()),
    };
    let created = phases
        .time(Phase::Create, api.create(&params, &pod))
        .await?;
    Ok(copy_from_pod(&created))
}

/// The copy `name` of `pod`: 404 when there is no such pod or it is not a copy of `pod`.
pub(crate) async fn get(
    cluster: &Cluster,
    namespace: &str,
    pod: &str,
    name: &str,
    caller: &Caller,
) -> Result<Pod, StorageError> {
    let api = cluster.pods(namespace, caller)?;
    match api.get_opt(name).await? {
        Some(p)
            if label(&p, LABEL_KIND) == Some("copy") && label(&p, LABEL_COPY_OF) == Some(pod) =>
        {
            Ok(p)
        }
        _ => Err(not_found(name)),
    }
}

/// The copies of `pod`.
pub(crate) async fn list(
    cluster: &Cluster,
    namespace: &str,
    pod: &str,
    caller: &Caller,
) -> Result<PodDebugCopyList, StorageError> {
    let api = cluster.pods(namespace, caller)?;
    let params = ListParams::default().labels(&format!("{LABEL_KIND}=copy,{LABEL_COPY_OF}={pod}"));
    let pods = api.list(&params).await?;
    let mut meta = pods.metadata.clone();
    meta.continue_ = None;
    Ok(PodDebugCopyList::new(
        pods.items.iter().map(copy_from_pod).collect(),
        meta,
    ))
}

/// The label selector of the copies `selection` asks for: every copy, and the client's own
/// selector beside.
fn copy_labels(selection: &CopySelection) -> String {
    match selection
        .label_selector
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        Some(theirs) => format!("{LABEL_KIND}=copy,{theirs}"),
        None => format!("{LABEL_KIND}=copy"),
    }
}

/// The copies `selection` asks for (the `poddebugcopies` collection), paged as kube-apiserver
/// pages the pods.
pub(crate) async fn list_all(
    cluster: &Cluster,
    selection: &CopySelection,
    caller: &Caller,
) -> Result<PodDebugCopyList, StorageError> {
    let api = cluster.pods_in(selection.namespace.as_deref(), caller)?;
    let mut params = ListParams::default().labels(&copy_labels(selection));
    if let Some(f) = selection
        .field_selector
        .as_deref()
        .filter(|f| !f.is_empty())
    {
        params = params.fields(f);
    }
    if let Some(limit) = selection.limit {
        params = params.limit(limit);
    }
    if let Some(token) = selection
        .continue_token
        .as_deref()
        .filter(|t| !t.is_empty())
    {
        params = params.continue_token(token);
    }
    let pods = api.list(&params).await?;
    Ok(PodDebugCopyList::new(
        pods.items.iter().map(copy_from_pod).collect(),
        pods.metadata.clone(),
    ))
}

/// Copy `name` of `namespace`, whatever pod it copies: 404 when there is no such pod or it is
/// not a copy.
pub(crate) async fn get_any(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    caller: &Caller,
) -> Result<PodDebugCopy, StorageError> {
    let api = cluster.pods(namespace, caller)?;
    match api.get_opt(name).await? {
        Some(p) if label(&p, LABEL_KIND) == Some("copy") => Ok(copy_from_pod(&p)),
        _ => Err(not_found(name)),
    }
}

/// Watch the copies `selection` asks for from `resource_version`.
pub(crate) async fn watch(
    cluster: &Cluster,
    selection: &CopySelection,
    resource_version: &str,
    timeout_seconds: Option<u32>,
    caller: &Caller,
) -> Result<CopyWatchStream, StorageError> {
    let api = cluster.pods_in(selection.namespace.as_deref(), caller)?;
    let what = crate::nodes::PodSelection {
        labels: copy_labels(selection),
        fields: selection.field_selector.clone().filter(|f| !f.is_empty()),
    };
    crate::nodes::watch_pods(
        &api,
        &what,
        resource_version,
        timeout_seconds,
        copy_from_pod,
    )
    .await
}

/// Delete the copy (the very pod read: a pod of the same name made since is left alone).
pub(crate) async fn delete(
    cluster: &Cluster,
    namespace: &str,
    pod: &str,
    name: &str,
    grace_period_seconds: Option<u32>,
    caller: &Caller,
) -> Result<PodDebugCopy, StorageError> {
    let found = get(cluster, namespace, pod, name, caller).await?;
    let api = cluster.pods(namespace, caller)?;
    let deleted = delete_read(&api, found, grace_period_seconds, || not_found(name)).await?;
    Ok(copy_from_pod(&deleted))
}

/// Delete pod `found`, the very one read (its uid a precondition: a pod of the same name made
/// since is left alone); the pod as the delete answered it. One already gone (or replaced) is
/// `gone()`.
pub(crate) async fn delete_read(
    api: &kube::Api<Pod>,
    found: Pod,
    grace_period_seconds: Option<u32>,
    gone: impl FnOnce() -> StorageError,
) -> Result<Pod, StorageError> {
    let name = found.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        grace_period_seconds,
        preconditions: Some(Preconditions {
            uid: found.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name, &params).await {
        Ok(either) => Ok(either.left_or(found)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Err(gone()),
        Err(e) => Err(e.into()),
    }
}

/// A pod poddebug made (a copy, a node debug pod) that the expiry deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiredPod {
    /// `copy` or `node`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Its deadline.
    pub expires_at: jiff::Timestamp,
    /// The deletion's failure, if it failed (tried again next round).
    pub error: Option<String>,
}

/// Slack between a pod's `expires-at` and its kubelet deadline (`activeDeadlineSeconds` from
/// its start, later than its creation).
const DEADLINE_SLACK_SECONDS: i64 = 120;

/// Whether the pod's own `activeDeadlineSeconds` (counted here from its creation, which is
/// before its start) ends it by `now` give or take the slack: poddebug sets it on every pod it
/// makes with a time limit. The labels and annotation that mark a pod as poddebug's can be
/// written by anyone who may patch the pod; the deadline can only be shortened, which ends the
/// pod anyway, so the server never deletes a pod its own deadline would have let run.
fn kubelet_would_end(p: &Pod, now: jiff::Timestamp) -> bool {
    let (Some(created), Some(deadline)) = (
        p.metadata.creation_timestamp.as_ref(),
        p.spec.as_ref().and_then(|s| s.active_deadline_seconds),
    ) else {
        return false;
    };
    created.0.as_second().saturating_add(deadline) <= now.as_second() + DEADLINE_SLACK_SECONDS
}

/// Delete every pod poddebug made whose deadline passed at `now` (with the server's identity;
/// each pod is deleted only if it is still the pod read).
pub(crate) async fn expire_made_pods(
    cluster: &Cluster,
    now: jiff::Timestamp,
) -> Result<Vec<ExpiredPod>, StorageError> {
    let api: kube::Api<Pod> = kube::Api::all(cluster.server_client());
    let pods = api
        .list(&ListParams::default().labels(&format!("{LABEL_KIND} in (copy,node)")))
        .await?;
    let mut out = Vec::new();
    for p in pods.items {
        let Some(at) = poddebug_types::copy::expires_at_of_pod(&p) else {
            continue;
        };
        if at > now || p.metadata.deletion_timestamp.is_some() || !kubelet_would_end(&p, now) {
            continue;
        }
        let (Some(ns), Some(name)) = (p.metadata.namespace.clone(), p.metadata.name.clone()) else {
            continue;
        };
        let kind = label(&p, LABEL_KIND).unwrap_or_default().to_owned();
        let ns_api: kube::Api<Pod> = kube::Api::namespaced(cluster.server_client(), &ns);
        let error = match delete_read(&ns_api, p, None, || StorageError::NotDue).await {
            Ok(_) => None,
            // Gone already (another replica, the user): nothing to report.
            Err(StorageError::NotDue) => continue,
            Err(e) => Some(e.to_api_error().message()),
        };
        out.push(ExpiredPod {
            kind,
            namespace: ns,
            name,
            expires_at: at,
            error,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(created: i64, deadline: Option<i64>) -> Pod {
        let mut p = Pod::default();
        p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(created).expect("time"),
        ));
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            active_deadline_seconds: deadline,
            ..Default::default()
        });
        p
    }

    #[test]
    fn only_pods_their_own_deadline_ends_are_deleted() {
        let now = jiff::Timestamp::from_second(10_000).expect("time");
        // Made with a 600 s limit at 9 400: due.
        assert!(kubelet_would_end(&pod(9_400, Some(600)), now));
        // Marked by hand, without a deadline: never.
        assert!(!kubelet_would_end(&pod(9_400, None), now));
        // A deadline far beyond the annotation's: not ours to end.
        assert!(!kubelet_would_end(&pod(9_400, Some(86_400)), now));
    }
}
