//! core/v1 Secrets, as far as poddebug uses them: `POST` (409 AlreadyExists when the name is
//! taken) and `GET` of one (through the generic object read). The server makes its record key's
//! Secret this way on first start.

use http::Request;
use hyper::body::Incoming;
use serde_json::Value;

use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::state::{Kind, new_uid, now_rfc3339};
use super::status::{self, KubeStatus};

/// `POST .../namespaces/NS/secrets`.
pub async fn create(ctx: &Ctx, ns: &str, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    let mut body = parse_json(&read_body(req).await?)?;
    let name = body["metadata"]["name"].as_str().unwrap_or("").to_owned();
    if name.is_empty() {
        return Err(status::bad_request("metadata.name is required".to_owned()));
    }
    ctx.shared.mutate(|s| {
        if s.get(Kind::Secret, ns, &name).is_some() {
            return Err(status::already_exists("", "secrets", &name));
        }
        body["metadata"]["namespace"] = Value::from(ns);
        body["metadata"]["uid"] = Value::from(new_uid());
        body["metadata"]["creationTimestamp"] = Value::from(now_rfc3339());
        body["kind"] = Value::from("Secret");
        body["apiVersion"] = Value::from("v1");
        let stored = s.put(Kind::Secret, body.clone());
        Ok(json_response(201, &stored))
    })
}
