//! `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: the policy decides, every review
//! is recorded, and the authorizer can be made unavailable.

use http::Request;
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::Outage;
use super::authz::Attributes;
use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::status::{self, FieldError, KubeStatus};

/// One SubjectAccessReview the fake received.
#[derive(Clone, Debug)]
pub struct SarRecord {
    /// The `spec` as sent.
    pub spec: Value,
    /// The spec as attributes.
    pub attributes: Attributes,
    /// The decision, or `None` if the authorizer was down.
    pub allowed: Option<bool>,
    /// Who asked (poddebug's own identity, normally).
    pub caller: String,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The spec's attributes (`authorizationutil.ResourceAttributesFrom` and friends).
pub fn attributes(spec: &Value) -> Attributes {
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let mut a = Attributes {
        user: s(&spec["user"]),
        uid: s(&spec["uid"]),
        groups: strings(&spec["groups"]),
        extra: spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default(),
        ..Attributes::default()
    };
    let r = &spec["resourceAttributes"];
    if r.is_object() {
        a.resource_request = true;
        a.verb = s(&r["verb"]);
        a.api_group = s(&r["group"]);
        a.api_version = s(&r["version"]);
        a.resource = s(&r["resource"]);
        a.subresource = s(&r["subresource"]);
        a.namespace = s(&r["namespace"]);
        a.name = s(&r["name"]);
    } else {
        let n = &spec["nonResourceAttributes"];
        a.verb = s(&n["verb"]);
        a.path = s(&n["path"]);
    }
    a
}

fn validate(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (r, n) = (
        spec["resourceAttributes"].is_object(),
        spec["nonResourceAttributes"].is_object(),
    );
    if r && n {
        errs.push(FieldError::invalid_raw(
            "spec.nonResourceAttributes",
            spec["nonResourceAttributes"].to_string(),
            "cannot be specified in combination with resourceAttributes",
        ));
    } else if !r && !n {
        errs.push(FieldError::invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    if spec["user"].as_str().unwrap_or("").is_empty() && strings(&spec["groups"]).is_empty() {
        errs.push(FieldError::invalid(
            "spec.user",
            "",
            "at least one of user or group must be specified",
        ));
    }
    errs
}

/// Answers an outage the way the test asked for; `None` when the service is up.
pub async fn outage_response(ctx: &Ctx, outage: Outage, what: &str) -> Option<Resp> {
    match outage {
        Outage::None => None,
        Outage::Unavailable => Some(
            status::service_unavailable(&format!("{what} is unavailable (fake)")).into_response(),
        ),
        Outage::CloseConnection => Some(super::http::abort_connection()),
        Outage::Hang => {
            let mut shutdown = ctx.shared.shutdown.clone();
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
                _ = crate::fake::stopped(&mut shutdown) => {}
            }
            Some(status::service_unavailable(&format!("{what} timed out (fake)")).into_response())
        }
    }
}

/// The handler.
pub async fn handle(ctx: &Ctx, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    let body = parse_json(&read_body(req).await?)?;
    let spec = body["spec"].clone();
    let attrs = attributes(&spec);
    let (outage, policy) = {
        let s = ctx.shared.lock();
        (s.settings.authorizer, s.policy.clone())
    };
    if outage != Outage::None {
        ctx.shared.lock().sars.push(SarRecord {
            spec,
            attributes: attrs,
            allowed: None,
            caller: ctx.user.name.clone(),
        });
        return Ok(outage_response(ctx, outage, "the authorizer")
            .await
            .unwrap_or_else(|| status::internal("unreachable").into_response()));
    }
    let errs = validate(&spec);
    if !errs.is_empty() {
        return Err(status::invalid(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "",
            &errs,
        ));
    }
    let allowed = policy(&attrs);
    ctx.shared.lock().sars.push(SarRecord {
        spec: spec.clone(),
        attributes: attrs,
        allowed: Some(allowed),
        caller: ctx.user.name.clone(),
    });
    let status = if allowed {
        json!({"allowed": true, "reason": "allowed by the fake's policy"})
    } else {
        json!({"allowed": false})
    };
    Ok(json_response(
        201,
        &json!({
            "kind": "SubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": status,
        }),
    ))
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`: the caller asks about itself;
/// the policy decides for the caller's own user and groups. Not recorded with the
/// SubjectAccessReviews (those are poddebug's questions; these are a user's).
pub async fn handle_self(ctx: &Ctx, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    let body = parse_json(&read_body(req).await?)?;
    let spec = body["spec"].clone();
    let mut full = spec.clone();
    full["user"] = json!(ctx.user.name);
    full["groups"] = json!(ctx.user.groups);
    let errs: Vec<FieldError> = validate(&full);
    if !errs.is_empty() {
        return Err(status::invalid(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "",
            &errs,
        ));
    }
    let policy = ctx.shared.lock().policy.clone();
    let allowed = policy(&attributes(&full));
    Ok(json_response(
        201,
        &json!({
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"allowed": allowed},
        }),
    ))
}
