//! `POST /apis/authentication.k8s.io/v1/tokenreviews`: tokens from the fake's table. As kube
//! does, an unknown token gets a status without `authenticated` (Go omits `false`).

use http::Request;
use hyper::body::Incoming;
use serde_json::{Map, Value, json};

use super::Outage;
use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::sar::outage_response;
use super::status::{self, FieldError, KubeStatus};

/// The handler.
pub async fn handle(ctx: &Ctx, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    let body = parse_json(&read_body(req).await?)?;
    let spec = body["spec"].clone();
    let (outage, user) = {
        let mut s = ctx.shared.lock();
        s.token_reviews += 1;
        let token = spec["token"].as_str().unwrap_or("");
        (s.settings.authenticator, s.tokens.get(token).cloned())
    };
    if outage != Outage::None {
        return Ok(outage_response(ctx, outage, "the authenticator")
            .await
            .unwrap_or_else(|| status::internal("unreachable").into_response()));
    }
    if spec["token"].as_str().unwrap_or("").is_empty() {
        return Err(status::invalid(
            "authentication.k8s.io",
            "TokenReview",
            "",
            &[FieldError::required("spec.token", "")],
        ));
    }
    let mut st = Map::new();
    match user {
        Some(u) => {
            st.insert("authenticated".into(), json!(true));
            let mut user = json!({"username": u.name, "groups": u.groups});
            if !u.uid.is_empty() {
                user["uid"] = json!(u.uid);
            }
            if !u.extra.is_empty() {
                user["extra"] = json!(u.extra);
            }
            st.insert("user".into(), user);
            let audiences = match spec["audiences"].as_array() {
                Some(a) if !a.is_empty() => Value::Array(a.clone()),
                _ => json!(["https://kubernetes.default.svc.cluster.local"]),
            };
            st.insert("audiences".into(), audiences);
        }
        None => {
            st.insert("user".into(), json!({}));
        }
    }
    Ok(json_response(
        201,
        &json!({
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": st,
        }),
    ))
}
