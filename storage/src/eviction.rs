//! Evicting the pod of an unstoppable debug container (`--unstoppable-action=evict`).
//!
//! The pod is evicted through the Eviction API (`POST pods/POD/eviction`, a `policy/v1`
//! Eviction), never deleted outright: kube-apiserver then honours the pod's
//! PodDisruptionBudgets, refusing with 429 `TooManyRequests` (cause `DisruptionBudget`) while
//! one allows no disruption, and otherwise deletes the pod gracefully, so that its controller
//! replaces it. The eviction carries the pod's UID as a precondition: a pod made again under
//! the same name since is another pod, and is left alone (409).
//!
//! It is made with the server's own identity, whatever `--impersonate` says: the leader's loop
//! acts on the operator's policy, for no caller. RBAC: `create` on `pods/eviction`.
//!
//! kube-rs's `Api::evict` sends its options as `delete_options`, which kube-apiserver drops as
//! an unknown field (a `Warning` header, and the precondition lost), so the request is built
//! here, in the shape `kubectl drain` sends. And it is sent with a client that does not retry
//! ([`KubeBackend::with_eviction_client`](crate::KubeBackend::with_eviction_client)): kube-rs's
//! default retries a 429 up to 15 times, backing off to minutes, which would hold the leader's
//! round on a budget that refuses; the leader's own backoff decides when to try again.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cluster::Cluster;
use crate::events::{REASON_EVICTION_BLOCKED, REASON_POD_EVICTED};
use crate::unstoppable::Unstoppable;

/// How an eviction went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictionOutcome {
    /// kube-apiserver accepted it (201): the pod is being deleted.
    Evicted,
    /// Refused for now (429, a PodDisruptionBudget): the message, with its causes.
    Blocked(String),
    /// The pod is gone, or is another pod now (404, or 409 on its UID): nothing to do.
    Gone,
    /// Any other failure (message): tried again later.
    Failed(String),
}

/// The body of the eviction of pod `name` in `namespace` with UID `uid`.
fn eviction_body(namespace: &str, name: &str, uid: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    })
}

/// The Status message of a refusal with its causes' messages, which name the budget.
fn refusal_message(s: &kube::core::Status) -> String {
    let causes: Vec<String> = s
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| c.message.clone())
                .filter(|m| !m.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if causes.is_empty() {
        s.message.clone()
    } else {
        format!("{} ({})", s.message, causes.join("; "))
    }
}

/// Evict the pod of `u` (module docs), and record on it a `Warning` Event: `DebugContainerPodEvicted`
/// once evicted, `DebugContainerEvictionBlocked` when refused and `warn_if_blocked`.
pub(crate) async fn evict(b: &Cluster, u: &Unstoppable, warn_if_blocked: bool) -> EvictionOutcome {
    // Names of an existing pod, which kube-apiserver validated: nothing in them to escape.
    let path = format!("/api/v1/namespaces/{}/pods/{}/eviction", u.namespace, u.pod);
    let body =
        serde_json::to_vec(&eviction_body(&u.namespace, &u.pod, &u.pod_uid)).unwrap_or_default();
    let request = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body);
    let outcome = match request {
        Err(e) => EvictionOutcome::Failed(e.to_string()),
        Ok(req) => match b.eviction_client().request::<kube::core::Status>(req).await {
            Ok(_) => EvictionOutcome::Evicted,
            Err(kube::Error::Api(s)) if s.code == 429 => {
                EvictionOutcome::Blocked(refusal_message(&s))
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => EvictionOutcome::Gone,
            Err(e) => EvictionOutcome::Failed(e.to_string()),
        },
    };
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(u.pod.clone()),
            namespace: Some(u.namespace.clone()),
            uid: Some(u.pod_uid.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    match &outcome {
        EvictionOutcome::Evicted => {
            let message = format!(
                "poddebug evicted the pod: debug container {:?} did not end when stopped \
                 (--unstoppable-action=evict)",
                u.name
            );
            b.record_event_within(
                &pod,
                &u.container,
                REASON_POD_EVICTED,
                message,
                b.config().event_timeout,
            )
            .await;
        }
        EvictionOutcome::Blocked(why) if warn_if_blocked => {
            let message = format!(
                "poddebug cannot evict the pod yet, which debug container {:?} did not end when \
                 stopped (--unstoppable-action=evict): {why}; it tries again later",
                u.name
            );
            b.record_event_within(
                &pod,
                &u.container,
                REASON_EVICTION_BLOCKED,
                message,
                b.config().event_timeout,
            )
            .await;
        }
        _ => {}
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eviction_carries_the_uid_as_kube_apiserver_reads_it() {
        let body = eviction_body("shop", "web", "u-1");
        assert_eq!(body["apiVersion"], "policy/v1");
        assert_eq!(body["kind"], "Eviction");
        assert_eq!(body["metadata"]["name"], "web");
        assert_eq!(body["deleteOptions"]["preconditions"]["uid"], "u-1");
        assert!(body.get("delete_options").is_none());
    }

    #[test]
    fn a_refusal_names_the_budget() {
        let s: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]},
            "code": 429
        }))
        .expect("status");
        assert_eq!(
            refusal_message(&s),
            "Cannot evict pod as it would violate the pod's disruption budget. (The disruption \
             budget web needs 1 healthy pods and has 1 currently)"
        );
    }
}
