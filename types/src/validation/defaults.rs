//! The defaults kube-apiserver gives an ephemeral container before it validates it
//! (k/k `pkg/apis/core/v1/defaults.go`, `SetDefaults_EphemeralContainer` and the generated
//! defaulters for the nested types). Validation requires `imagePullPolicy` and
//! `terminationMessagePolicy`, so skipping this step would report errors kube-apiserver never
//! reports.

use k8s_openapi::api::core::v1::EphemeralContainer;

use super::image_ref;

/// `terminationMessagePath` when none is given.
pub const TERMINATION_MESSAGE_PATH_DEFAULT: &str = "/dev/termination-log";

fn is_unset(v: &Option<String>) -> bool {
    v.as_deref().is_none_or(str::is_empty)
}

/// The `imagePullPolicy` kube-apiserver picks for `image`: `Always` when the tag is `latest` or
/// the reference has neither tag nor digest (`ParseImageName` then reports `latest`), else
/// `IfNotPresent`. A digest-only reference (`img@sha256:...`) has an empty tag, so it gets
/// `IfNotPresent`; so does an image that does not parse (Go ignores the parse error).
pub fn default_image_pull_policy(image: &str) -> &'static str {
    match image_ref::parse(image) {
        Some(r) if r.tag.as_deref() == Some("latest") => "Always",
        Some(r) if r.tag.is_none() && r.digest.is_none() => "Always",
        _ => "IfNotPresent",
    }
}

/// Apply kube-apiserver's defaults to an ephemeral container: `imagePullPolicy`,
/// `terminationMessagePath` (`/dev/termination-log`), `terminationMessagePolicy` (`File`),
/// the `TCP` protocol of ports and the `v1` apiVersion of downward-API field references.
pub fn apply_ephemeral_defaults(ec: &mut EphemeralContainer) {
    if is_unset(&ec.image_pull_policy) {
        let policy = default_image_pull_policy(ec.image.as_deref().unwrap_or(""));
        ec.image_pull_policy = Some(policy.to_owned());
    }
    if is_unset(&ec.termination_message_path) {
        ec.termination_message_path = Some(TERMINATION_MESSAGE_PATH_DEFAULT.to_owned());
    }
    if is_unset(&ec.termination_message_policy) {
        ec.termination_message_policy = Some("File".to_owned());
    }
    for port in ec.ports.iter_mut().flatten() {
        if is_unset(&port.protocol) {
            port.protocol = Some("TCP".to_owned());
        }
    }
    for env in ec.env.iter_mut().flatten() {
        if let Some(field_ref) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut())
            && is_unset(&field_ref.api_version)
        {
            field_ref.api_version = Some("v1".to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pull_policy_table() {
        let sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases = [
            ("busybox".to_owned(), "Always"),
            ("busybox:latest".to_owned(), "Always"),
            ("busybox:1.36".to_owned(), "IfNotPresent"),
            ("host:5000/img".to_owned(), "Always"),
            ("host:5000/img:latest".to_owned(), "Always"),
            ("host:5000/img:v2".to_owned(), "IfNotPresent"),
            (format!("img@{sha}"), "IfNotPresent"),
            (format!("img:latest@{sha}"), "Always"),
            ("".to_owned(), "IfNotPresent"),
            (" busybox".to_owned(), "IfNotPresent"),
            ("Busybox".to_owned(), "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(default_image_pull_policy(&image), want, "image {image:?}");
        }
    }

    #[test]
    fn defaults_fill_only_what_is_missing() {
        let mut ec: EphemeralContainer = serde_json::from_value(json!({
            "name": "d", "image": "busybox:1.36",
            "ports": [{"containerPort": 1}, {"containerPort": 2, "protocol": "UDP"}],
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
        }))
        .unwrap();
        apply_ephemeral_defaults(&mut ec);
        assert_eq!(
            serde_json::to_value(&ec).unwrap(),
            json!({
                "name": "d", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "ports": [{"containerPort": 1, "protocol": "TCP"}, {"containerPort": 2, "protocol": "UDP"}],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}]
            })
        );
        let mut ec: EphemeralContainer = serde_json::from_value(json!({
            "name": "d", "image": "busybox", "imagePullPolicy": "Never",
            "terminationMessagePath": "/x", "terminationMessagePolicy": "FallbackToLogsOnError"
        }))
        .unwrap();
        let before = ec.clone();
        apply_ephemeral_defaults(&mut ec);
        assert_eq!(ec, before);
        let mut ec: EphemeralContainer =
            serde_json::from_value(json!({"name": "d", "image": "busybox", "imagePullPolicy": ""}))
                .unwrap();
        apply_ephemeral_defaults(&mut ec);
        assert_eq!(ec.image_pull_policy.as_deref(), Some("Always"));
    }
}
