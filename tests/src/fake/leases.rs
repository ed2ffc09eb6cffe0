//! `coordination.k8s.io/v1` Leases, stored with every other kind (so lists and watches with
//! label selectors work as for pods): create (409 AlreadyExists), get (404 when absent),
//! update conditional on `metadata.resourceVersion` (409 Conflict when stale), JSON merge patch
//! (conditional when the patch names a resourceVersion), and delete (with a resourceVersion
//! or uid precondition in the DeleteOptions, 409 Conflict when it no longer holds).

use http::{Method, Request};
use hyper::body::Incoming;
use serde_json::Value;

use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::state::{Kind, new_uid, now_rfc3339};
use super::status::{self, KubeStatus};

const GROUP: &str = "coordination.k8s.io";
const RESOURCE: &str = "leases";

fn rv_of(v: &Value) -> &str {
    v["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

fn conflict(name: &str) -> KubeStatus {
    status::conflict(GROUP, RESOURCE, name, status::OPTIMISTIC_LOCK_ERROR_MSG)
}

/// `GET` (list, watch) and `POST .../leases`.
pub async fn collection(ctx: &Ctx, ns: &str, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    if ctx.method == Method::GET {
        return Ok(super::watch::list_or_watch(
            &ctx.shared,
            Kind::Lease,
            Some(ns),
            &ctx.query,
        ));
    }
    if ctx.method != Method::POST {
        return Err(status::method_not_allowed());
    }
    let mut body = parse_json(&read_body(req).await?)?;
    let name = body["metadata"]["name"].as_str().unwrap_or("").to_owned();
    if name.is_empty() {
        return Err(status::bad_request("metadata.name is required".to_owned()));
    }
    ctx.shared.mutate(|s| {
        if s.get(Kind::Lease, ns, &name).is_some() {
            return Err(status::already_exists(GROUP, RESOURCE, &name));
        }
        body["metadata"]["namespace"] = Value::from(ns);
        body["metadata"]["uid"] = Value::from(new_uid());
        body["metadata"]["creationTimestamp"] = Value::from(now_rfc3339());
        body["kind"] = Value::from("Lease");
        body["apiVersion"] = Value::from("coordination.k8s.io/v1");
        let stored = s.put(Kind::Lease, body.clone());
        Ok(json_response(201, &stored))
    })
}

/// RFC 7386 merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// `GET`, `PUT`, `PATCH` (merge) and `DELETE .../leases/NAME`.
pub async fn object(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    match ctx.method {
        Method::GET => ctx
            .shared
            .lock()
            .get(Kind::Lease, ns, name)
            .map(|l| json_response(200, l))
            .ok_or_else(|| status::not_found(GROUP, RESOURCE, name)),
        Method::PUT => {
            let mut body = parse_json(&read_body(req).await?)?;
            ctx.shared.mutate(|s| {
                let Some(old) = s.get(Kind::Lease, ns, name).cloned() else {
                    return Err(status::not_found(GROUP, RESOURCE, name));
                };
                if rv_of(&body) != rv_of(&old) {
                    return Err(conflict(name));
                }
                for f in ["uid", "creationTimestamp", "namespace", "name"] {
                    body["metadata"][f] = old["metadata"][f].clone();
                }
                Ok(json_response(200, &s.put(Kind::Lease, body)))
            })
        }
        Method::PATCH => {
            let ct = ctx
                .headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            if !ct.starts_with("application/merge-patch+json") {
                return Err(status::unsupported_patch_type());
            }
            let patch = parse_json(&read_body(req).await?)?;
            ctx.shared.mutate(|s| {
                let Some(old) = s.get(Kind::Lease, ns, name).cloned() else {
                    return Err(status::not_found(GROUP, RESOURCE, name));
                };
                let wanted = rv_of(&patch);
                if !wanted.is_empty() && wanted != rv_of(&old) {
                    return Err(conflict(name));
                }
                let mut new = old.clone();
                merge(&mut new, &patch);
                for f in ["uid", "creationTimestamp", "namespace", "name"] {
                    new["metadata"][f] = old["metadata"][f].clone();
                }
                Ok(json_response(200, &s.put(Kind::Lease, new)))
            })
        }
        Method::DELETE => {
            let body = read_body(req).await?;
            let opts = if body.is_empty() {
                Value::Null
            } else {
                parse_json(&body)?
            };
            ctx.shared.mutate(|s| {
                let Some(old) = s.get(Kind::Lease, ns, name).cloned() else {
                    return Err(status::not_found(GROUP, RESOURCE, name));
                };
                // apiserver's storage.Preconditions.Check: the UID first, then the version.
                let uid = old["metadata"]["uid"].as_str().unwrap_or("");
                if let Some(want) = opts["preconditions"]["uid"].as_str()
                    && want != uid
                {
                    return Err(status::conflict(
                        GROUP,
                        RESOURCE,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                        ),
                    ));
                }
                if let Some(rv) = opts["preconditions"]["resourceVersion"].as_str()
                    && rv != rv_of(&old)
                {
                    return Err(status::conflict(
                        GROUP,
                        RESOURCE,
                        name,
                        &format!(
                            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                            rv_of(&old)
                        ),
                    ));
                }
                s.remove(Kind::Lease, ns, name);
                Ok(json_response(
                    200,
                    &serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "details": {"name": name, "group": GROUP, "kind": RESOURCE}}),
                ))
            })
        }
        _ => Err(status::method_not_allowed()),
    }
}
