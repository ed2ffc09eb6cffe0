//! Single objects: `GET` of a pod, namespace, node or configmap, `DELETE` of a pod (with the
//! `uid` and `resourceVersion` preconditions of its DeleteOptions, and `dryRun`), and pod
//! `PUT`/`PATCH` on the main resource, which (like kube) refuses any change of the ephemeral
//! containers or other immutable spec fields.

use http::{Method, Request};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::ephemeral::{apply_patch, check_preconditions};
use super::godump;
use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::state::{Kind, State};
use super::status::{self, FieldError, KubeStatus};

/// `GET` of one stored object.
pub fn get_object(ctx: &Ctx, kind: Kind, namespace: &str, name: &str) -> Result<Resp, KubeStatus> {
    let state = ctx.shared.lock();
    let ns = if kind.namespaced() { namespace } else { "" };
    state
        .get(kind, ns, name)
        .map(|o| json_response(200, o))
        .ok_or_else(|| status::not_found(kind.group(), kind.resource(), name))
}

/// `pods/{name}`.
pub async fn handle(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    match ctx.method {
        Method::GET => get_object(ctx, Kind::Pod, ns, name),
        Method::DELETE => {
            let body = read_body(req).await?;
            let opts = if body.iter().all(u8::is_ascii_whitespace) {
                Value::Null
            } else {
                parse_json(&body)?
            };
            let mut dry_run = ctx.query.all("dryRun");
            dry_run.extend(
                opts["dryRun"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned)),
            );
            let dry_run = super::pod_create::dry_run(&dry_run, "DeleteOptions")?;
            let removed = ctx.shared.mutate(|s| delete(s, ns, name, &opts, dry_run))?;
            Ok(json_response(200, &removed))
        }
        Method::PUT => {
            let body = parse_json(&read_body(req).await?)?;
            update(ctx, ns, name, |old| {
                let rv = body["metadata"]["resourceVersion"].as_str().unwrap_or("");
                if !rv.is_empty() && Some(rv) != old["metadata"]["resourceVersion"].as_str() {
                    return Err(status::conflict(
                        "",
                        "pods",
                        name,
                        status::OPTIMISTIC_LOCK_ERROR_MSG,
                    ));
                }
                Ok(body.clone())
            })
        }
        Method::PATCH => {
            let content_type = ctx.content_type();
            if !status::PATCH_TYPES.contains(&content_type.as_str()) {
                return Err(status::unsupported_patch_type());
            }
            let body = read_body(req).await?;
            update(ctx, ns, name, |old| {
                let patched = apply_patch(old, &content_type, &body)?;
                check_preconditions(old, &patched, name)?;
                Ok(patched)
            })
        }
        _ => Err(status::method_not_allowed()),
    }
}

/// Deletes pod `name` (for a dry run, only says what would be deleted) once the preconditions of
/// the DeleteOptions `opts` hold: `rest.BeforeDelete`'s 409 when they do not, with the pod's
/// kind as the resource of its message.
pub fn delete(
    state: &mut State,
    ns: &str,
    name: &str,
    opts: &Value,
    dry_run: bool,
) -> Result<Value, KubeStatus> {
    let Some(pod) = state.get(Kind::Pod, ns, name) else {
        return Err(status::not_found("", "pods", name));
    };
    let pre = &opts["preconditions"];
    for (field, shown, consequence) in [
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ] {
        let Some(wanted) = pre[field].as_str() else {
            continue;
        };
        let actual = pod["metadata"][field].as_str().unwrap_or("");
        if wanted != actual {
            return Err(status::conflict(
                "",
                "Pod",
                name,
                &format!(
                    "the {shown} in the precondition ({wanted}) does not match the {shown} in record ({actual}). The object might have been {consequence}"
                ),
            ));
        }
    }
    if dry_run {
        return Ok(pod.clone());
    }
    state
        .remove(Kind::Pod, ns, name)
        .ok_or_else(|| status::not_found("", "pods", name))
}

/// What `ValidatePodUpdate` lets through: labels and annotations, container images,
/// `activeDeadlineSeconds`, added tolerations, `terminationGracePeriodSeconds`.
fn update(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    new_object: impl FnOnce(&Value) -> Result<Value, KubeStatus>,
) -> Result<Resp, KubeStatus> {
    let stored = ctx.shared.mutate(|state| {
        let old = state.get(Kind::Pod, ns, name).cloned().ok_or_else(|| status::not_found("", "pods", name))?;
        let new = new_object(&old)?;
        let mut comparable_new = new["spec"].clone();
        let mut comparable_old = old["spec"].clone();
        for spec in [&mut comparable_new, &mut comparable_old] {
            for list in ["containers", "initContainers"] {
                if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
                    for c in cs {
                        if let Some(m) = c.as_object_mut() {
                            m.remove("image");
                        }
                    }
                }
            }
            if let Some(m) = spec.as_object_mut() {
                for f in ["activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"] {
                    m.remove(f);
                }
            }
        }
        if godump::normalize(&comparable_new) != godump::normalize(&comparable_old) {
            let diff = godump::unified_diff(&godump::dump_generic(&old["spec"]), &godump::dump_generic(&new["spec"]));
            let detail = format!(
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n{diff}"
            );
            return Err(status::invalid("", "Pod", name, &[FieldError::forbidden("spec", &detail)]));
        }
        let mut merged = old.clone();
        merged["spec"] = new["spec"].clone();
        for f in ["labels", "annotations"] {
            match new["metadata"].get(f) {
                Some(v) if !v.is_null() => merged["metadata"][f] = v.clone(),
                _ => {
                    if let Some(m) = merged["metadata"].as_object_mut() {
                        m.remove(f);
                    }
                }
            }
        }
        if merged == old {
            return Ok(old);
        }
        Ok(state.put(Kind::Pod, merged))
    })?;
    Ok(json_response(200, &stored))
}

/// A Namespace object.
pub fn namespace_object(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut l: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    l.insert("kubernetes.io/metadata.name".into(), json!(name));
    json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": super::state::new_uid(),
            "creationTimestamp": super::state::now_rfc3339(),
            "labels": l,
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::authz::allow_all;

    fn state_with_pod() -> (State, String) {
        let mut s = State::new(Default::default(), allow_all());
        let pod = s.put(
            Kind::Pod,
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}, "spec": {}}),
        );
        let rv = pod["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        (s, rv)
    }

    #[test]
    fn a_uid_precondition_that_fails_is_kubes_409_and_keeps_the_pod() {
        let (mut s, _) = state_with_pod();
        let opts = json!({"preconditions": {"uid": "u-2"}});
        let e = delete(&mut s, "ns", "p", &opts, false).expect_err("conflict");
        // As kube-apiserver 1.36 answered it.
        assert_eq!(
            e.to_json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Operation cannot be fulfilled on Pod \"p\": the UID in the precondition (u-2) does not match the UID in record (u-1). The object might have been deleted and then recreated",
                   "reason": "Conflict", "details": {"name": "p", "kind": "Pod"}, "code": 409})
        );
        assert!(s.get(Kind::Pod, "ns", "p").is_some());
        let stale = json!({"preconditions": {"resourceVersion": "1"}});
        let e = delete(&mut s, "ns", "p", &stale, false).expect_err("conflict");
        assert!(
            e.message.ends_with("The object might have been modified"),
            "{}",
            e.message
        );
    }

    #[test]
    fn matching_preconditions_delete_and_a_dry_run_does_not() {
        let (mut s, rv) = state_with_pod();
        let opts = json!({"preconditions": {"uid": "u-1", "resourceVersion": rv}});
        assert!(delete(&mut s, "ns", "p", &opts, true).is_ok());
        assert!(s.get(Kind::Pod, "ns", "p").is_some(), "a dry run");
        assert!(delete(&mut s, "ns", "p", &opts, false).is_ok());
        assert!(s.get(Kind::Pod, "ns", "p").is_none());
        let e = delete(&mut s, "ns", "p", &Value::Null, false).expect_err("gone");
        assert_eq!((e.code, e.message.as_str()), (404, "pods \"p\" not found"));
    }
}
