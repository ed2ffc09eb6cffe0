//! `POST /admission/v1/connect`: the validating admission webhook of the component
//! `manifests/components/only-way-in` for core `pods/attach` and `pods/exec` (`CONNECT`).
//!
//! Admission of a `CONNECT` sees only the options (the container), so the server reads the pod
//! and refuses a connection into what poddebug governs — a debug container it made, any
//! container of a copy or node debug pod it made ([`poddebug_types::only_way_in`]) — unless the
//! caller is the server itself (its identity, learned at start with a SelfSubjectReview), the
//! server acting as its caller under `--impersonate` (the extra `poddebug.dev/via`), or a member
//! of `--break-glass-groups`. Everything else is allowed: the webhook decides nothing about
//! containers poddebug did not make.
//!
//! kube-apiserver calls webhooks without credentials, so the path is served to anyone (the
//! handler chain neither authenticates nor authorizes it): an answer only ever allows or refuses
//! the asker's own request. A pod that cannot be read is refused (fail closed, as the component's
//! `failurePolicy: Fail` does when the server cannot be reached).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use poddebug_types::ApiError;
use poddebug_types::only_way_in::{Caller, VIA_EXTRA};
use serde::Deserialize;
use serde_json::json;

use super::json_response;
use crate::error::Error;
use crate::state::AppState;

/// The path kube-apiserver posts `AdmissionReview`s to.
pub const PATH: &str = "/admission/v1/connect";

/// What the webhook knows of the server itself: its own user name, once learned.
#[derive(Debug, Default)]
pub struct ServerIdentity(OnceLock<String>);

impl ServerIdentity {
    /// The server's user name, once learned.
    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    /// Learn the server's own user name from kube-apiserver (a SelfSubjectReview, which needs
    /// no permission), retrying until it answers. Until then the server's own connections pass
    /// only through the break-glass groups or the impersonation extra.
    pub fn spawn_learn(self: &Arc<Self>, client: kube::Client) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut wait = Duration::from_millis(200);
            loop {
                match self_subject_review(&client).await {
                    Ok(user) => {
                        tracing::info!(user = %user, "the server's own identity, for admission");
                        let _ = me.0.set(user);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot learn the server's own identity yet")
                    }
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        });
    }
}

async fn self_subject_review(client: &kube::Client) -> Result<String, String> {
    let body = serde_json::to_vec(&json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"
    }))
    .map_err(|e| e.to_string())?;
    let req = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(|e| e.to_string())?;
    let answer: serde_json::Value = client.request(req).await.map_err(|e| e.to_string())?;
    answer["status"]["userInfo"]["username"]
        .as_str()
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("a SelfSubjectReview without a user name: {answer}"))
}

/// An `AdmissionReview` (`admission.k8s.io/v1`), as far as the webhook reads it.
#[derive(Debug, Deserialize)]
struct Review {
    request: Option<ReviewRequest>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewRequest {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    sub_resource: String,
    #[serde(default)]
    resource: Resource,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    user_info: UserInfo,
    #[serde(default)]
    object: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Resource {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resource: String,
}

#[derive(Debug, Default, Deserialize)]
struct UserInfo {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    extra: BTreeMap<String, Vec<String>>,
}

/// The answer to review `uid`: allowed, or refused with a 403 saying why.
fn answer(uid: &str, refusal: Option<String>) -> serde_json::Value {
    let mut response = json!({"uid": uid, "allowed": refusal.is_none()});
    if let Some(message) = refusal {
        response["status"] = json!({
            "code": 403, "reason": "Forbidden", "status": "Failure", "message": message
        });
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// Why the review refuses its request, or `None` (module docs).
async fn judge(st: &AppState, r: &ReviewRequest) -> Option<String> {
    let connects = r.operation == "CONNECT"
        && r.resource.group.is_empty()
        && r.resource.resource == "pods"
        && matches!(r.sub_resource.as_str(), "attach" | "exec");
    if !connects {
        return None;
    }
    let via = r
        .user_info
        .extra
        .get(VIA_EXTRA)
        .map_or(&[][..], Vec::as_slice);
    let caller = Caller {
        user: &r.user_info.username,
        groups: &r.user_info.groups,
        via,
    };
    if caller.passes(st.server_identity.get(), &st.config.break_glass_groups) {
        return None;
    }
    let container = r
        .object
        .as_ref()
        .and_then(|o| o.get("container"))
        .and_then(|c| c.as_str());
    match st.backend.governed(&r.namespace, &r.name, container).await {
        Ok(None) => None,
        Ok(Some(why)) => Some(format!(
            "{} into pod {:?} around poddebug is refused (manifests/components/only-way-in): {why}",
            r.sub_resource, r.name
        )),
        Err(e) => {
            tracing::warn!(error = %e, namespace = %r.namespace, pod = %r.name, "admission: the pod cannot be read");
            Some(format!(
                "poddebug cannot tell whether pod {:?} holds containers it governs ({}), so the \
                 {} is refused",
                r.name,
                e.to_api_error().message(),
                r.sub_resource
            ))
        }
    }
}

/// `POST /admission/v1/connect`.
pub async fn connect(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    super::body::require_json(&headers)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    let review: Review = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::BadRequest(format!("the body is not an AdmissionReview: {e}")))?;
    let Some(request) = review.request else {
        return Err(ApiError::BadRequest("the AdmissionReview has no request".to_owned()).into());
    };
    let refusal = judge(&st, &request).await;
    if let Some(why) = &refusal {
        tracing::info!(
            user = %request.user_info.username, namespace = %request.namespace,
            pod = %request.name, subresource = %request.sub_resource, refused = %why,
            "admission: a connection around poddebug refused"
        );
    }
    json_response(StatusCode::OK, &answer(&request.uid, refusal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_admission_reviews() {
        let ok = answer("u1", None);
        assert_eq!(ok["kind"], "AdmissionReview");
        assert_eq!(ok["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(ok["response"], json!({"uid": "u1", "allowed": true}));
        let no = answer("u2", Some("why".into()));
        assert_eq!(no["response"]["allowed"], false);
        assert_eq!(no["response"]["status"]["code"], 403);
        assert_eq!(no["response"]["status"]["message"], "why");
    }

    #[test]
    fn a_review_is_read_as_kube_apiserver_sends_it() {
        let r: Review = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "x", "kind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "exec", "name": "web", "namespace": "shop", "operation": "CONNECT",
                "userInfo": {"username": "alice", "groups": ["system:authenticated"],
                             "extra": {"poddebug.dev/via": ["poddebug-apiserver"]}},
                "object": {"kind": "PodExecOptions", "apiVersion": "v1", "container": "dbg",
                           "command": ["sh"]}}
        }))
        .expect("a review");
        let r = r.request.expect("a request");
        assert_eq!(
            (r.operation.as_str(), r.sub_resource.as_str()),
            ("CONNECT", "exec")
        );
        assert_eq!(r.user_info.extra[VIA_EXTRA], ["poddebug-apiserver"]);
        assert_eq!(r.object.expect("the options")["container"], "dbg");
    }
}
