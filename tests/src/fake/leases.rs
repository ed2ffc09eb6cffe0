//! `coordination.k8s.io/v1` Leases, as much as leader election uses: get (404 when absent),
//! create (409 AlreadyExists), update conditional on `metadata.resourceVersion` (409 Conflict
//! when stale). No list, watch or patch.

use http::{Method, Request};
use hyper::body::Incoming;
use serde_json::Value;

use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::state::{new_uid, now_rfc3339};
use super::status::{self, KubeStatus};

const GROUP: &str = "coordination.k8s.io";
const RESOURCE: &str = "leases";

/// `POST .../leases`.
pub async fn collection(ctx: &Ctx, ns: &str, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    if ctx.method != Method::POST {
        return Err(status::method_not_allowed());
    }
    let mut body = parse_json(&read_body(req).await?)?;
    let name = body["metadata"]["name"].as_str().unwrap_or("").to_owned();
    if name.is_empty() {
        return Err(status::bad_request("metadata.name is required".to_owned()));
    }
    ctx.shared.mutate(|s| {
        let key = (ns.to_owned(), name.clone());
        if s.leases.contains_key(&key) {
            return Err(status::already_exists(GROUP, RESOURCE, &name));
        }
        let rv = s.next_rv();
        body["metadata"]["namespace"] = Value::from(ns);
        body["metadata"]["uid"] = Value::from(new_uid());
        body["metadata"]["creationTimestamp"] = Value::from(now_rfc3339());
        body["metadata"]["resourceVersion"] = Value::from(rv.to_string());
        body["kind"] = Value::from("Lease");
        body["apiVersion"] = Value::from("coordination.k8s.io/v1");
        s.leases.insert(key, body.clone());
        Ok(json_response(201, &body))
    })
}

/// `GET` and `PUT .../leases/NAME`.
pub async fn object(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    let key = (ns.to_owned(), name.to_owned());
    match ctx.method {
        Method::GET => ctx
            .shared
            .lock()
            .leases
            .get(&key)
            .map(|l| json_response(200, l))
            .ok_or_else(|| status::not_found(GROUP, RESOURCE, name)),
        Method::PUT => {
            let mut body = parse_json(&read_body(req).await?)?;
            ctx.shared.mutate(|s| {
                let Some(old) = s.leases.get(&key) else {
                    return Err(status::not_found(GROUP, RESOURCE, name));
                };
                let rv = body["metadata"]["resourceVersion"].as_str().unwrap_or("");
                if rv != old["metadata"]["resourceVersion"].as_str().unwrap_or("") {
                    return Err(status::conflict(
                        GROUP,
                        RESOURCE,
                        name,
                        status::OPTIMISTIC_LOCK_ERROR_MSG,
                    ));
                }
                for f in ["uid", "creationTimestamp", "namespace", "name"] {
                    body["metadata"][f] = old["metadata"][f].clone();
                }
                let rv = s.next_rv();
                body["metadata"]["resourceVersion"] = Value::from(rv.to_string());
                s.leases.insert(key.clone(), body.clone());
                Ok(json_response(200, &body))
            })
        }
        _ => Err(status::method_not_allowed()),
    }
}
