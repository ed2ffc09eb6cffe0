//! Checks of a node debug container's `container` (`POST …/nodes/NODE/debug/NAME`).
//!
//! A node debug container is what `kubectl debug node/NODE` makes: a container of an ephemeral
//! container's fields. The server runs it as a pod of its own namespace, on the node, so a
//! field an ephemeral container may not have (ports, probes, lifecycle handlers, resources,
//! restart policies) is refused as kube-apiserver refuses it on an ephemeral container, under
//! the request's paths (`container.ports: Forbidden: cannot be set for an Ephemeral Container`).
//! Besides, what would reach outside the container's own pod through the server's namespace is
//! refused: Secrets and ConfigMaps named by `env` or `envFrom` (they would be the server's), and
//! volume mounts (the pod has no volume of the caller's; the profiles that give the host's root
//! mount it at `/host` themselves).

use k8s_openapi::api::core::v1::EphemeralContainer;

use super::ephemeral::validate_field_allow_list;
use super::{child, index};
use crate::field::{ErrorList, FieldError};
use crate::node::NodeDebugContainer;

/// Detail of the Forbidden error for a Secret or ConfigMap a node debug container names.
pub const NODE_SERVER_NAMESPACE_DETAIL: &str = "a node debug container runs in the server's namespace, whose Secrets and ConfigMaps it may not read";
/// Detail of the Forbidden error for a volume mount of a node debug container.
pub const NODE_NO_VOLUMES_DETAIL: &str = "a node debug pod has no volume of the caller's (the profiles that give the host's root filesystem mount it at /host)";

/// The field errors of `req.container`, in field order.
pub fn validate_node_debug_container(req: &NodeDebugContainer) -> ErrorList {
    let c = &req.container;
    let mut errs = ErrorList::new();
    // A container's fields are an ephemeral container's, which has every field of it.
    let ec: EphemeralContainer = serde_json::to_value(c)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    errs.extend(validate_field_allow_list(&ec, "container"));
    for (i, e) in c.env.iter().flatten().enumerate() {
        let from = child(&index("container.env", i), "valueFrom");
        let source = e.value_from.as_ref();
        if source.is_some_and(|s| s.secret_key_ref.is_some()) {
            errs.push(FieldError::forbidden(
                child(&from, "secretKeyRef"),
                NODE_SERVER_NAMESPACE_DETAIL,
            ));
        }
        if source.is_some_and(|s| s.config_map_key_ref.is_some()) {
            errs.push(FieldError::forbidden(
                child(&from, "configMapKeyRef"),
                NODE_SERVER_NAMESPACE_DETAIL,
            ));
        }
    }
    for (i, e) in c.env_from.iter().flatten().enumerate() {
        let path = index("container.envFrom", i);
        if e.secret_ref.is_some() {
            errs.push(FieldError::forbidden(
                child(&path, "secretRef"),
                NODE_SERVER_NAMESPACE_DETAIL,
            ));
        }
        if e.config_map_ref.is_some() {
            errs.push(FieldError::forbidden(
                child(&path, "configMapRef"),
                NODE_SERVER_NAMESPACE_DETAIL,
            ));
        }
    }
    if c.volume_mounts.as_ref().is_some_and(|m| !m.is_empty()) {
        errs.push(FieldError::forbidden(
            "container.volumeMounts",
            NODE_NO_VOLUMES_DETAIL,
        ));
    }
    if c.volume_devices.as_ref().is_some_and(|d| !d.is_empty()) {
        errs.push(FieldError::forbidden(
            "container.volumeDevices",
            NODE_NO_VOLUMES_DETAIL,
        ));
    }
    errs.extend(super::validate_justification_fields(
        req.reason.as_deref(),
        req.ticket.as_deref(),
        req.debug_request.as_deref(),
    ));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(container: serde_json::Value) -> Vec<String> {
        let req: NodeDebugContainer =
            serde_json::from_value(json!({"container": container})).unwrap();
        validate_node_debug_container(&req)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn what_kubectl_debug_node_sends_is_accepted() {
        assert!(
            errors(json!({"name": "dbg", "image": "busybox", "command": ["sh"], "stdin": true,
                          "tty": true, "resources": {}, "workingDir": "/",
                          "env": [{"name": "A", "value": "b"},
                                  {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                          "securityContext": {"privileged": true}}))
            .is_empty()
        );
    }

    #[test]
    fn host_facing_fields_are_refused_as_on_an_ephemeral_container() {
        let got = errors(json!({
            "name": "dbg", "image": "busybox",
            "ports": [{"containerPort": 80, "hostPort": 80}],
            "resources": {"limits": {"cpu": "1"}},
            "livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}},
            "readinessProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 22}},
            "startupProbe": {"exec": {"command": ["true"]}},
            "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "id"]}}},
            "restartPolicy": "Always",
            "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                    {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
            "envFrom": [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "c"}}],
            "volumeMounts": [{"name": "host-root", "mountPath": "/x"}],
            "volumeDevices": [{"name": "d", "devicePath": "/dev/x"}]
        }));
        let ephemeral = "Forbidden: cannot be set for an Ephemeral Container";
        let server_ns = format!("Forbidden: {NODE_SERVER_NAMESPACE_DETAIL}");
        let no_volumes = format!("Forbidden: {NODE_NO_VOLUMES_DETAIL}");
        assert_eq!(
            got,
            [
                format!("container.ports: {ephemeral}"),
                format!("container.resources: {ephemeral}"),
                format!("container.restartPolicy: {ephemeral}"),
                format!("container.livenessProbe: {ephemeral}"),
                format!("container.readinessProbe: {ephemeral}"),
                format!("container.startupProbe: {ephemeral}"),
                format!("container.lifecycle: {ephemeral}"),
                format!("container.env[0].valueFrom.secretKeyRef: {server_ns}"),
                format!("container.env[1].valueFrom.configMapKeyRef: {server_ns}"),
                format!("container.envFrom[0].secretRef: {server_ns}"),
                format!("container.envFrom[1].configMapRef: {server_ns}"),
                format!("container.volumeMounts: {no_volumes}"),
                format!("container.volumeDevices: {no_volumes}"),
            ]
        );
    }
}
