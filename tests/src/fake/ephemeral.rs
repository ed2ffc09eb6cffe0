//! `pods/{name}/ephemeralcontainers` (`EphemeralContainersREST`): GET the pod, PUT a whole pod,
//! PATCH in the three patch formats; only `spec.ephemeralContainers` is taken from the result,
//! then defaults, validation, Pod Security admission, storage and the kubelet's reaction.

use http::{Method, Request};
use hyper::body::Incoming;
use serde_json::Value;

use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::state::{Kind, State};
use super::status::{self, FieldError, KubeStatus};
use super::{kubelet, psa, smp, validation};

/// Entry point.
pub async fn handle(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    if ctx.shared.lock().settings.ec_disabled {
        return Err(status::path_not_found());
    }
    let dry_run = match ctx.method {
        Method::PUT => dry_run(ctx, "UpdateOptions")?,
        Method::PATCH => dry_run(ctx, "PatchOptions")?,
        _ => false,
    };
    match ctx.method {
        Method::GET => super::pods::get_object(ctx, Kind::Pod, ns, name),
        Method::PUT => {
            let body = parse_json(&read_body(req).await?)?;
            if !body.is_object() {
                return Err(status::bad_request(
                    "the body of the request must be a Pod object",
                ));
            }
            let body_name = body["metadata"]["name"].as_str().unwrap_or("");
            if !body_name.is_empty() && body_name != name {
                return Err(status::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                )));
            }
            update(ctx, ns, name, dry_run, |old| {
                // The uid, when the body has one, is a precondition of the store's update.
                let (uid, old_uid) = (
                    body["metadata"]["uid"].as_str().unwrap_or(""),
                    old["metadata"]["uid"].as_str().unwrap_or(""),
                );
                if !uid.is_empty() && uid != old_uid {
                    return Err(status::conflict(
                        "",
                        "pods",
                        name,
                        &format!(
                            "StorageError: invalid object, Code: 4, Key: /pods/{ns}/{name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
                        ),
                    ));
                }
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
            update(ctx, ns, name, dry_run, |old| {
                let patched = apply_patch(old, &content_type, &body)?;
                check_preconditions(old, &patched, name)?;
                Ok(patched)
            })
        }
        _ => Err(status::method_not_allowed()),
    }
}

/// Applies a patch of one of the accepted media types to a stored object.
pub fn apply_patch(old: &Value, content_type: &str, body: &[u8]) -> Result<Value, KubeStatus> {
    match content_type {
        "application/json-patch+json" => {
            let patch: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| status::bad_request(e.to_string()))?;
            let mut doc = old.clone();
            json_patch::patch(&mut doc, &patch.0)
                .map_err(|e| status::unprocessable_patch(&e.to_string()))?;
            Ok(doc)
        }
        "application/merge-patch+json" => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| status::bad_request(format!("error decoding patch: {e}")))?;
            let mut doc = old.clone();
            json_patch::merge(&mut doc, &patch);
            Ok(doc)
        }
        // Server-side apply is approximated by a strategic merge of a JSON body.
        "application/strategic-merge-patch+json" | "application/apply-patch+yaml" => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| status::bad_request(format!("error decoding patch: {e}")))?;
            smp::apply(old, &patch).map_err(|e| status::unprocessable_patch(&e))
        }
        _ => Err(status::unsupported_patch_type()),
    }
}

/// A patch that sets `metadata.resourceVersion` or `metadata.uid` makes them preconditions.
pub fn check_preconditions(old: &Value, patched: &Value, name: &str) -> Result<(), KubeStatus> {
    let old_rv = old["metadata"]["resourceVersion"].as_str().unwrap_or("");
    if let Some(rv) = patched["metadata"]["resourceVersion"].as_str()
        && !rv.is_empty()
        && rv != old_rv
    {
        return Err(status::conflict(
            "",
            "pods",
            name,
            status::OPTIMISTIC_LOCK_ERROR_MSG,
        ));
    }
    let old_uid = old["metadata"]["uid"].as_str().unwrap_or("");
    if let Some(uid) = patched["metadata"]["uid"].as_str()
        && !uid.is_empty()
        && uid != old_uid
    {
        return Err(status::conflict(
            "",
            "pods",
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
            ),
        ));
    }
    Ok(())
}

/// `?dryRun=`: `All` (possibly repeated) is a dry run, no value a real update, anything else
/// kube-apiserver's 422 for the request's options kind (`UpdateOptions`, `PatchOptions`).
fn dry_run(ctx: &Ctx, options_kind: &str) -> Result<bool, KubeStatus> {
    let values = ctx.query.all("dryRun");
    if values.iter().all(|v| v == "All") {
        return Ok(!values.is_empty());
    }
    let quoted: Vec<String> = values.iter().map(|v| status::go_quote(v)).collect();
    // Go prints the []string value with %#v.
    let mut err = FieldError::not_supported("dryRun", "", &["All"]);
    err.value = Some(format!("[]string{{{}}}", quoted.join(", ")));
    Err(status::invalid("meta.k8s.io", options_kind, "", &[err]))
}

/// The update itself, atomic under the state lock (like the store's GuaranteedUpdate):
/// `new_object` builds the requested pod from the stored one. A dry run does everything
/// (defaults, validation, Pod Security admission) but store: the answer is the would-be pod,
/// with the stored resourceVersion, and nothing is started or recorded.
fn update(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    dry_run: bool,
    new_object: impl FnOnce(&Value) -> Result<Value, KubeStatus>,
) -> Result<Resp, KubeStatus> {
    if dry_run {
        let would_be = {
            let mut state = ctx.shared.lock();
            would_be_locked(&mut state, ns, name, new_object)?
        };
        return Ok(json_response(200, &would_be));
    }
    let (stored, added) = ctx
        .shared
        .mutate(|state| update_locked(state, ns, name, new_object))?;
    for ec in added {
        kubelet::start_ephemeral_container(&ctx.shared, ns, name, &ec);
    }
    Ok(json_response(200, &stored))
}

/// The pod an update would store, after every check, with nothing changed.
fn would_be_locked(
    state: &mut State,
    ns: &str,
    name: &str,
    new_object: impl FnOnce(&Value) -> Result<Value, KubeStatus>,
) -> Result<Value, KubeStatus> {
    let (new_pod, _) = checked_update(state, ns, name, new_object)?;
    Ok(new_pod)
}

fn update_locked(
    state: &mut State,
    ns: &str,
    name: &str,
    new_object: impl FnOnce(&Value) -> Result<Value, KubeStatus>,
) -> Result<(Value, Vec<String>), KubeStatus> {
    let old = state
        .get(Kind::Pod, ns, name)
        .cloned()
        .ok_or_else(|| status::not_found("", "pods", name))?;
    let (new_pod, added) = checked_update(state, ns, name, new_object)?;
    if new_pod == old {
        return Ok((old, Vec::new()));
    }
    Ok((state.put(Kind::Pod, new_pod), added))
}

/// Build and check the updated pod: decoding, dropped fields, defaults, validation, Pod
/// Security admission. Answers the pod to store and the names of the containers it adds.
fn checked_update(
    state: &mut State,
    ns: &str,
    name: &str,
    new_object: impl FnOnce(&Value) -> Result<Value, KubeStatus>,
) -> Result<(Value, Vec<String>), KubeStatus> {
    let old = state
        .get(Kind::Pod, ns, name)
        .cloned()
        .ok_or_else(|| status::not_found("", "pods", name))?;
    let requested = new_object(&old)?;
    let mut ecs = match &requested["spec"]["ephemeralContainers"] {
        Value::Null => Vec::new(),
        Value::Array(a) => a.clone(),
        other => {
            return Err(status::bad_request(format!(
                "json: cannot unmarshal {} into Go struct field PodSpec.spec.ephemeralContainers of type []v1.EphemeralContainer",
                json_type(other)
            )));
        }
    };
    for ec in &mut ecs {
        if !ec.is_object() {
            return Err(status::bad_request(format!(
                "json: cannot unmarshal {} into Go struct field PodSpec.spec.ephemeralContainers of type v1.EphemeralContainer",
                json_type(ec)
            )));
        }
        if !state.settings.stop_signals_gate {
            validation::drop_disabled_fields(ec);
        }
        validation::apply_defaults(ec);
    }

    if let Err(errs) = validation::validate_update(&old, &ecs) {
        return Err(status::invalid("", "Pod", name, &errs));
    }

    let old_names: Vec<&str> = old["spec"]["ephemeralContainers"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["name"].as_str()).collect())
        .unwrap_or_default();
    let added: Vec<String> = ecs
        .iter()
        .filter_map(|e| e["name"].as_str())
        .filter(|n| !old_names.contains(n))
        .map(str::to_owned)
        .collect();

    let mut new_pod = old.clone();
    new_pod["spec"]["ephemeralContainers"] = Value::Array(ecs);
    if !added.is_empty() {
        let labels = state
            .get(Kind::Namespace, "", ns)
            .map(|n| n["metadata"]["labels"].clone())
            .unwrap_or_default();
        psa::admit(&labels, &new_pod, name)?;
    }
    Ok((new_pod, added))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
