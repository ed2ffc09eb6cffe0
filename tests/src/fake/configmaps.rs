//! ConfigMaps, above all `kube-system/extension-apiserver-authentication`, whose list values are
//! JSON-array strings (`["X-Remote-User"]`). Reads, lists and watches go through the generic
//! handlers; this module builds the objects.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::state::{new_uid, now_rfc3339};

/// Namespace of the authentication ConfigMap.
pub const AUTH_NAMESPACE: &str = "kube-system";
/// Name of the authentication ConfigMap.
pub const AUTH_NAME: &str = "extension-apiserver-authentication";

/// A ConfigMap object with `data`.
pub fn configmap(
    namespace: &str,
    name: &str,
    data: &BTreeMap<String, String>,
    previous: Option<&Value>,
) -> Value {
    let uid = previous
        .and_then(|p| p["metadata"]["uid"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(new_uid);
    let created = previous
        .and_then(|p| p["metadata"]["creationTimestamp"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(now_rfc3339);
    json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": created},
        "data": data,
    })
}
