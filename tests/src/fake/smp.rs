//! A strategic merge patch for the pod schema (apimachinery `strategicpatch`): maps merge,
//! `null` deletes, lists with a merge key merge by that key (patch items first, then the items
//! only the server has, as observed live), other lists are replaced; `$patch: replace|delete`,
//! `$setElementOrder/<list>` and `$retainKeys` directives.

use serde_json::{Map, Value};

/// The merge key of the lists of a Pod that have `patchStrategy: merge`.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => Some("name"),
        "hostAliases" => Some("ip"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" => Some("containerPort"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

/// Applies `patch` to `original`.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, String> {
    merge_value(original, patch)
}

fn merge_value(original: &Value, patch: &Value) -> Result<Value, String> {
    match (original, patch) {
        (Value::Object(o), Value::Object(p)) => merge_map(o, p).map(Value::Object),
        (_, Value::Object(p)) => merge_map(&Map::new(), p).map(Value::Object),
        (_, other) => Ok(other.clone()),
    }
}

fn merge_map(
    original: &Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut m = patch.clone();
            m.remove("$patch");
            return Ok(m);
        }
        Some("delete") => return Ok(Map::new()),
        Some(other) => return Err(format!("Unknown patch type: {other} in map: {patch:?}")),
        None => {}
    }
    let mut out = original.clone();
    for (key, pv) in patch {
        if key.starts_with("$setElementOrder/") || key == "$retainKeys" || key == "$patch" {
            continue;
        }
        if let Some(list) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(remove)) = (out.get_mut(list), pv) {
                items.retain(|i| !remove.contains(i));
            }
            continue;
        }
        if pv.is_null() {
            out.remove(key);
            continue;
        }
        let merged = match (out.get(key), pv, merge_key(key)) {
            (Some(Value::Array(o)), Value::Array(p), Some(mk)) => {
                let order = patch
                    .get(&format!("$setElementOrder/{key}"))
                    .and_then(Value::as_array);
                Value::Array(merge_list(o, p, mk, order)?)
            }
            (None, Value::Array(p), Some(mk)) => {
                let order = patch
                    .get(&format!("$setElementOrder/{key}"))
                    .and_then(Value::as_array);
                Value::Array(merge_list(&[], p, mk, order)?)
            }
            (Some(o), Value::Object(_), _) => merge_value(o, pv)?,
            (None, Value::Object(_), _) => merge_value(&Value::Null, pv)?,
            _ => pv.clone(),
        };
        out.insert(key.clone(), merged);
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        out.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    Ok(out)
}

fn merge_list(
    original: &[Value],
    patch: &[Value],
    key: &str,
    order: Option<&Vec<Value>>,
) -> Result<Vec<Value>, String> {
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Ok(patch
            .iter()
            .filter(|p| p.get("$patch").is_none())
            .cloned()
            .collect());
    }
    let id = |v: &Value| v.get(key).cloned();
    let mut merged: Vec<Value> = Vec::new();
    let mut deleted: Vec<Value> = Vec::new();
    for p in patch {
        let Some(k) = id(p) else {
            return Err(format!(
                "map: {p} does not contain declared merge key: {key}"
            ));
        };
        if p.get("$patch").and_then(Value::as_str) == Some("delete") {
            deleted.push(k);
            continue;
        }
        match original.iter().find(|o| id(o).as_ref() == Some(&k)) {
            Some(o) => merged.push(merge_value(o, p)?),
            None => merged.push(merge_value(&Value::Null, p)?),
        }
    }
    for o in original {
        let k = id(o);
        let in_patch = merged.iter().any(|m| id(m) == k);
        let was_deleted = k.as_ref().is_some_and(|k| deleted.contains(k));
        if !in_patch && !was_deleted {
            merged.push(o.clone());
        }
    }
    if let Some(order) = order {
        let position = |v: &Value| {
            order
                .iter()
                .position(|o| o.get(key) == v.get(key))
                .unwrap_or(usize::MAX)
        };
        merged.sort_by_key(position);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn new_items_come_first_like_live_kube() {
        let pod = json!({"spec": {"ephemeralContainers": [{"name": "a", "image": "x"}]}});
        let out = apply(
            &pod,
            &json!({"spec": {"ephemeralContainers": [{"name": "b", "image": "y"}]}}),
        )
        .expect("patch applies");
        assert_eq!(
            out["spec"]["ephemeralContainers"],
            json!([{"name": "b", "image": "y"}, {"name": "a", "image": "x"}])
        );
    }

    #[test]
    fn set_element_order_and_merge_by_name() {
        let pod =
            json!({"spec": {"ephemeralContainers": [{"name": "a", "image": "x", "tty": true}]}});
        let patch = json!({"spec": {
            "$setElementOrder/ephemeralContainers": [{"name": "a"}, {"name": "b"}],
            "ephemeralContainers": [{"name": "b", "image": "y"}, {"name": "a", "image": "z", "tty": null}]}});
        let out = apply(&pod, &patch).expect("patch applies");
        assert_eq!(
            out["spec"]["ephemeralContainers"],
            json!([{"name": "a", "image": "z"}, {"name": "b", "image": "y"}])
        );
    }

    #[test]
    fn directives() {
        let pod = json!({"spec": {"ephemeralContainers": [{"name": "a"}, {"name": "b"}]}});
        let out = apply(
            &pod,
            &json!({"spec": {"ephemeralContainers": [{"name": "a", "$patch": "delete"}]}}),
        )
        .expect("patch applies");
        assert_eq!(out["spec"]["ephemeralContainers"], json!([{"name": "b"}]));
        let out = apply(
            &pod,
            &json!({"spec": {"ephemeralContainers": [{"name": "c"}, {"$patch": "replace"}]}}),
        )
        .expect("patch applies");
        assert_eq!(out["spec"]["ephemeralContainers"], json!([{"name": "c"}]));
    }
}
