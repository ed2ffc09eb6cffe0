//! apiregistration.k8s.io/v1 APIServices, as far as poddebug uses them: `GET` of one (through the
//! generic object read) and a JSON merge `PATCH` of one, which is how a server started with
//! `--serving-ca-secret` publishes its CA as `spec.caBundle`. As kube-apiserver: 404 when it does
//! not exist, 415 for another patch type, a `caBundle` that is not base64 refused (422, field
//! `patch`, as checked live), a new resourceVersion, the object answered with 200.

use base64::Engine;
use http::Request;
use hyper::body::Incoming;
use serde_json::Value;

use super::http::{Resp, json_response};
use super::router::{Ctx, read_body};
use super::state::Kind;
use super::status::{self, KubeStatus};

/// `PATCH /apis/apiregistration.k8s.io/v1/apiservices/NAME`.
pub async fn patch(ctx: &Ctx, name: &str, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    if ctx.content_type() != "application/merge-patch+json" {
        return Err(status::unsupported_patch_type());
    }
    let body = read_body(req).await?;
    let patch: Value = serde_json::from_slice(&body)
        .map_err(|e| status::bad_request(format!("error decoding patch: {e}")))?;
    ctx.shared.mutate(|s| {
        let Some(old) = s.get(Kind::ApiService, "", name).cloned() else {
            return Err(status::not_found(
                Kind::ApiService.group(),
                Kind::ApiService.resource(),
                name,
            ));
        };
        let mut doc = old;
        json_patch::merge(&mut doc, &patch);
        // The patched object must decode: caBundle is bytes, base64 in JSON. kube-apiserver
        // answers 422 for field `patch` with the patched object as the value.
        if let Some(bundle) = doc["spec"]["caBundle"].as_str()
            && let Err(e) = base64::engine::general_purpose::STANDARD.decode(bundle)
        {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                _ => 0,
            };
            return Err(status::invalid(
                "",
                "",
                "",
                &[status::FieldError::invalid(
                    "patch",
                    &doc.to_string(),
                    &format!("illegal base64 data at input byte {at}"),
                )],
            ));
        }
        let stored = s.put(Kind::ApiService, doc);
        Ok(json_response(200, &stored))
    })
}
