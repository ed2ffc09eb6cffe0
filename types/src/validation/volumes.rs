//! `ValidateVolumeMounts` and `ValidateVolumeDevices` (k/k
//! `pkg/apis/core/validation/validation.go`), for one container.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{EphemeralContainer, Volume, VolumeDevice, VolumeMount};

use super::{child, index, validate_local_descending_path, validate_path_no_backsteps};
use crate::field::{ErrorList, FieldError, FieldValue};

/// The pod's volumes by name.
pub(super) type Volumes<'a> = HashMap<&'a str, &'a Volume>;

/// `ValidateVolumeMounts`. The `subPath`, `subPathExpr`, `mountPropagation` and
/// `recursiveReadOnly` errors are reported on `volumeMounts.<field>` without the index: Go
/// passes the list path, not the entry path, to those validators.
pub(super) fn validate_volume_mounts(
    ec: &EphemeralContainer,
    volumes: &Volumes<'_>,
    path: &str,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let mounts: &[VolumeMount] = ec.volume_mounts.as_deref().unwrap_or_default();
    let devices: &[VolumeDevice] = ec.volume_devices.as_deref().unwrap_or_default();
    let device_names: HashSet<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    // GetVolumeDeviceMap keeps the last path for a repeated name.
    let mut device_paths_by_name: HashMap<&str, &str> = HashMap::new();
    for d in devices {
        device_paths_by_name.insert(&d.name, &d.device_path);
    }
    let device_paths: HashSet<&str> = device_paths_by_name.values().copied().collect();
    let privileged = ec.security_context.as_ref().and_then(|s| s.privileged) == Some(true);

    let mut mount_points = HashSet::new();
    for (i, m) in mounts.iter().enumerate() {
        let idx = index(path, i);
        if m.name.is_empty() {
            errs.push(FieldError::required(child(&idx, "name"), ""));
        }
        if !volumes.contains_key(m.name.as_str()) {
            errs.push(FieldError::not_found(child(&idx, "name"), m.name.as_str()));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(child(&idx, "mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                child(&idx, "mountPath"),
                m.mount_path.as_str(),
                "must be unique",
            ));
        }
        if device_names.contains(m.name.as_str()) {
            errs.push(FieldError::invalid(
                child(&idx, "name"),
                m.name.as_str(),
                "must not already exist in volumeDevices",
            ));
        }
        if device_paths.contains(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                child(&idx, "mountPath"),
                m.mount_path.as_str(),
                "must not already exist as a path in volumeDevices",
            ));
        }
        let sub_path = m.sub_path.as_deref().unwrap_or("");
        let sub_path_expr = m.sub_path_expr.as_deref().unwrap_or("");
        if !sub_path.is_empty() {
            errs.extend(validate_local_descending_path(
                sub_path,
                &child(path, "subPath"),
            ));
        }
        if !sub_path_expr.is_empty() {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    child(&idx, "subPathExpr"),
                    sub_path_expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            errs.extend(validate_local_descending_path(
                sub_path_expr,
                &child(path, "subPathExpr"),
            ));
        }
        if let Some(prop) = m.mount_propagation.as_deref() {
            let p = child(path, "mountPropagation");
            if !matches!(prop, "Bidirectional" | "HostToContainer" | "None") {
                errs.push(FieldError::not_supported(
                    &p,
                    FieldValue::json_str(prop),
                    &["Bidirectional", "HostToContainer", "None"],
                ));
            }
            if prop == "Bidirectional" && !privileged {
                errs.push(FieldError::forbidden(
                    &p,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
        if let Some(rro) = m.recursive_read_only.as_deref() {
            let p = child(path, "recursiveReadOnly");
            match rro {
                "Disabled" => {}
                "Enabled" | "IfPossible" => {
                    if m.read_only != Some(true) {
                        errs.push(FieldError::forbidden(
                            &p,
                            "may only be specified when readOnly is true",
                        ));
                    }
                    if m.mount_propagation
                        .as_deref()
                        .is_some_and(|mp| mp != "None")
                    {
                        errs.push(FieldError::forbidden(
                            &p,
                            "may only be specified when mountPropagation is None or not specified",
                        ));
                    }
                }
                other => errs.push(FieldError::not_supported(
                    &p,
                    FieldValue::json_str(other),
                    &["Disabled", "Enabled", "IfPossible"],
                )),
            }
        }
    }
    errs
}

/// `ValidateVolumeDevices`: a device must name a volume backed by a PersistentVolumeClaim
/// (or a generic ephemeral volume, which creates one).
pub(super) fn validate_volume_devices(
    ec: &EphemeralContainer,
    volumes: &Volumes<'_>,
    path: &str,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let devices: &[VolumeDevice] = ec.volume_devices.as_deref().unwrap_or_default();
    let mounts: &[VolumeMount] = ec.volume_mounts.as_deref().unwrap_or_default();
    let mount_names: HashSet<&str> = mounts.iter().map(|m| m.name.as_str()).collect();
    let mut mount_paths_by_name: HashMap<&str, &str> = HashMap::new();
    for m in mounts {
        mount_paths_by_name.insert(&m.name, &m.mount_path);
    }
    let mount_paths: HashSet<&str> = mount_paths_by_name.values().copied().collect();

    let mut device_paths = HashSet::new();
    let mut device_names = HashSet::new();
    for (i, d) in devices.iter().enumerate() {
        let idx = index(path, i);
        let name = d.name.as_str();
        let dev_path = d.device_path.as_str();
        let volume = volumes.get(name);
        let is_pvc =
            volume.is_some_and(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
        if name.is_empty() {
            errs.push(FieldError::required(child(&idx, "name"), ""));
        }
        if device_names.contains(name) {
            errs.push(FieldError::invalid(
                child(&idx, "name"),
                name,
                "must be unique",
            ));
        }
        if volume.is_some() && !is_pvc {
            errs.push(FieldError::invalid(
                child(&idx, "name"),
                name,
                "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
            ));
        }
        if volume.is_none() {
            errs.push(FieldError::not_found(child(&idx, "name"), name));
        }
        if dev_path.is_empty() {
            errs.push(FieldError::required(child(&idx, "devicePath"), ""));
        }
        if device_paths.contains(dev_path) {
            errs.push(FieldError::invalid(
                child(&idx, "devicePath"),
                dev_path,
                "must be unique",
            ));
        }
        if !dev_path.is_empty() && !validate_path_no_backsteps(dev_path, "").is_empty() {
            errs.push(FieldError::invalid(
                child(&idx, "devicePath"),
                dev_path,
                "can not contain backsteps ('..')",
            ));
        } else {
            device_paths.insert(dev_path);
        }
        if mount_names.contains(name) {
            errs.push(FieldError::invalid(
                child(&idx, "name"),
                name,
                "must not already exist in volumeMounts",
            ));
        }
        if mount_paths.contains(dev_path) {
            errs.push(FieldError::invalid(
                child(&idx, "devicePath"),
                dev_path,
                "must not already exist as a path in volumeMounts",
            ));
        }
        if !name.is_empty() {
            device_names.insert(name);
        }
    }
    errs
}
