//! The checks kube-apiserver runs on a new ephemeral container: `ValidatePodEphemeralContainersUpdate`
//! → `validatePodMetadataAndSpec` → `ValidatePodSpec` → `validateEphemeralContainers`, and the
//! pod-wide checks of `ValidatePodSpec` that look at every container.
//!
//! The rest of the pod is assumed valid: kube-apiserver accepted it, and an update of
//! `pods/ephemeralcontainers` can change nothing but `spec.ephemeralContainers`. So only the
//! errors the new entry can cause are produced, in the order Go produces them.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec};

use super::cluster_version::{KubeVersion, apply_version_rules};
use super::defaults::apply_ephemeral_defaults;
use super::env::{validate_env, validate_env_from};
use super::security_context::validate_security_context;
use super::volumes::{Volumes, validate_volume_devices, validate_volume_mounts};
use super::{child, index};
use crate::field::{ErrorList, FieldError, FieldValue};
use crate::names::{dns1123_label_errors, port_name_errors, port_num_errors};

/// The annotation that marks a mirror pod (the API copy of a static pod).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Detail of the Forbidden error for a static pod (field path `""`).
pub const STATIC_POD_DETAIL: &str = "static pods do not support ephemeral containers";
/// Detail of the Forbidden error for a field ephemeral containers may not set.
pub const EPHEMERAL_FORBIDDEN_DETAIL: &str = "cannot be set for an Ephemeral Container";

/// Validate `new_ec` as the next entry of `pod`'s `spec.ephemeralContainers`, after applying
/// kube-apiserver's defaults to a copy of it.
///
/// The entry's index is the number of ephemeral containers the pod already has: poddebug
/// appends with a PUT of the whole list, so that is the index kube-apiserver reports (a
/// strategic-merge patch, as kubectl sends, puts the new entry first instead).
///
/// For a static (mirror) pod the answer is only `Forbidden` at path `""`, whatever else is
/// wrong, as in Go.
///
/// The rules are those of [`KubeVersion::NEWEST_KNOWN`]; see [`validate_ephemeral_container_add_on`].
pub fn validate_ephemeral_container_add(pod: &Pod, new_ec: &EphemeralContainer) -> ErrorList {
    validate_ephemeral_container_add_on(pod, new_ec, KubeVersion::NEWEST_KNOWN)
}

/// [`validate_ephemeral_container_add`] as a cluster of `version` answers it, its feature
/// gates at their defaults: the fields that version drops before validating are dropped
/// first (see [`apply_version_rules`]).
pub fn validate_ephemeral_container_add_on(
    pod: &Pod,
    new_ec: &EphemeralContainer,
    version: KubeVersion,
) -> ErrorList {
    if pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
    {
        return ErrorList(vec![FieldError::forbidden("", STATIC_POD_DETAIL)]);
    }
    let empty_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty_spec);
    let init: &[Container] = spec.init_containers.as_deref().unwrap_or_default();
    let existing: &[EphemeralContainer] = spec.ephemeral_containers.as_deref().unwrap_or_default();
    let path = index("spec.ephemeralContainers", existing.len());

    let mut ec = new_ec.clone();
    apply_version_rules(&mut ec, version);
    apply_ephemeral_defaults(&mut ec);

    let volumes: Volumes<'_> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    let pod_restart_policy = spec
        .restart_policy
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or("Always");
    let host_users = spec.host_users != Some(false);

    // validateContainerCommon
    let mut errs = validate_container_common(&ec, &volumes, &path, pod_restart_policy, host_users);

    // validateContainerOnlyForPod
    let image = ec.image.as_deref().unwrap_or("");
    if image.len() != image.trim().len() {
        errs.push(FieldError::invalid(
            child(&path, "image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }

    // Names are unique across containers, init containers and ephemeral containers.
    let taken: HashSet<&str> = spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .chain(init.iter().map(|c| c.name.as_str()))
        .chain(existing.iter().map(|c| c.name.as_str()))
        .collect();
    if taken.contains(ec.name.as_str()) {
        errs.push(FieldError::duplicate(
            child(&path, "name"),
            ec.name.as_str(),
        ));
    }

    // The target must be a container or an init container, not an ephemeral one.
    if let Some(target) = ec
        .target_container_name
        .as_deref()
        .filter(|t| !t.is_empty())
        && !spec.containers.iter().chain(init).any(|c| c.name == target)
    {
        errs.push(FieldError::not_found(
            child(&path, "targetContainerName"),
            target,
        ));
    }

    errs.extend(validate_field_allow_list(&ec, &path));

    for (i, vm) in ec.volume_mounts.iter().flatten().enumerate() {
        let vm_path = index(&child(&path, "volumeMounts"), i);
        if vm.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
            errs.push(FieldError::forbidden(
                child(&vm_path, "subPath"),
                EPHEMERAL_FORBIDDEN_DETAIL,
            ));
        }
        if vm.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
            errs.push(FieldError::forbidden(
                child(&vm_path, "subPathExpr"),
                EPHEMERAL_FORBIDDEN_DETAIL,
            ));
        }
    }

    // The pod-wide checks of ValidatePodSpec that visit every container, in Go's order.
    errs.extend(validate_windows_host_process(spec, &ec, &path));
    if !host_users && ec.volume_devices.as_ref().is_some_and(|d| !d.is_empty()) {
        errs.push(FieldError::forbidden(
            child(&path, "volumeDevices"),
            "when `hostUsers` is false",
        ));
    }
    errs.extend(validate_os(spec, &ec, &path));
    errs.extend(validate_file_key_ref_volumes(spec, &ec, &path));
    errs
}

/// `validateContainerCommon`, for the fields an ephemeral container can have.
///
/// Not reproduced: `ValidateContainerResourceRequirements` (quantities and request/limit
/// comparisons). Resources are forbidden on ephemeral containers anyway, so a request with
/// them is refused all the same; the full list of causes comes from the cluster, which the
/// create path asks with a dry run whenever this validator refuses.
fn validate_container_common(
    ec: &EphemeralContainer,
    volumes: &Volumes<'_>,
    path: &str,
    pod_restart_policy: &str,
    host_users: bool,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let name_path = child(path, "name");
    if ec.name.is_empty() {
        errs.push(FieldError::required(&name_path, ""));
    } else {
        for msg in dns1123_label_errors(&ec.name) {
            errs.push(FieldError::invalid(&name_path, ec.name.as_str(), msg));
        }
    }
    if ec.image.as_deref().is_none_or(str::is_empty) {
        errs.push(FieldError::required(child(path, "image"), ""));
    }
    match ec.termination_message_policy.as_deref().unwrap_or("") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(
            child(path, "terminationMessagePolicy"),
            "",
        )),
        other => errs.push(FieldError::not_supported(
            child(path, "terminationMessagePolicy"),
            FieldValue::json_str(other),
            &["File", "FallbackToLogsOnError"],
        )),
    }
    errs.extend(validate_ports(ec, &child(path, "ports")));
    errs.extend(validate_env(ec.env.as_ref(), &child(path, "env")));
    errs.extend(validate_env_from(
        ec.env_from.as_ref(),
        &child(path, "envFrom"),
    ));
    errs.extend(validate_volume_mounts(
        ec,
        volumes,
        &child(path, "volumeMounts"),
    ));
    errs.extend(validate_volume_devices(
        ec,
        volumes,
        &child(path, "volumeDevices"),
    ));
    match ec.image_pull_policy.as_deref().unwrap_or("") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(child(path, "imagePullPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            child(path, "imagePullPolicy"),
            FieldValue::json_str(other),
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    errs.extend(validate_resize_policy(
        ec,
        &child(path, "resizePolicy"),
        pod_restart_policy,
    ));
    errs.extend(validate_security_context(
        ec.security_context.as_ref(),
        &child(path, "securityContext"),
        host_users,
    ));
    errs
}

/// `validateContainerPorts`.
fn validate_ports(ec: &EphemeralContainer, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut names = HashSet::new();
    for (i, port) in ec.ports.iter().flatten().enumerate() {
        let idx = index(path, i);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = port_name_errors(name);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(child(&idx, "name"), name, msg));
                }
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(child(&idx, "name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(child(&idx, "containerPort"), ""));
        } else {
            for msg in port_num_errors(i64::from(port.container_port)) {
                errs.push(FieldError::invalid(
                    child(&idx, "containerPort"),
                    i64::from(port.container_port),
                    msg,
                ));
            }
        }
        if let Some(host_port) = port.host_port.filter(|p| *p != 0) {
            for msg in port_num_errors(i64::from(host_port)) {
                errs.push(FieldError::invalid(
                    child(&idx, "hostPort"),
                    i64::from(host_port),
                    msg,
                ));
            }
        }
        match port.protocol.as_deref().unwrap_or("") {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(child(&idx, "protocol"), "")),
            other => errs.push(FieldError::not_supported(
                child(&idx, "protocol"),
                FieldValue::json_str(other),
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
    errs
}

/// `validateResizePolicy`. Most errors name the list, not the entry, as in Go.
fn validate_resize_policy(
    ec: &EphemeralContainer,
    path: &str,
    pod_restart_policy: &str,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut seen = HashSet::new();
    for (i, p) in ec.resize_policy.iter().flatten().enumerate() {
        if !seen.insert(p.resource_name.as_str()) {
            errs.push(FieldError::duplicate(
                index(path, i),
                FieldValue::json_str(&p.resource_name),
            ));
        }
        match p.resource_name.as_str() {
            "cpu" | "memory" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(
                path,
                FieldValue::json_str(other),
                &["cpu", "memory"],
            )),
        }
        match p.restart_policy.as_str() {
            "NotRequired" | "RestartContainer" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(
                path,
                FieldValue::json_str(other),
                &["NotRequired", "RestartContainer"],
            )),
        }
        if pod_restart_policy == "Never" && p.restart_policy != "NotRequired" {
            errs.push(FieldError::invalid(
                path,
                FieldValue::json_str(&p.restart_policy),
                "must be 'NotRequired' when pod `restartPolicy` is 'Never'",
            ));
        }
    }
    errs
}

/// `validateFieldAllowList`: every field an ephemeral container may not have, in the order of
/// the Go struct, when it differs from its zero value. A present but empty list (`"ports": []`)
/// or map (`"resources": {"limits": {}}`) is not the zero value; `"resources": {}` is.
pub(crate) fn validate_field_allow_list(ec: &EphemeralContainer, path: &str) -> ErrorList {
    let resources_set = ec
        .resources
        .as_ref()
        .is_some_and(|r| r.limits.is_some() || r.requests.is_some() || r.claims.is_some());
    let fields = [
        ("ports", ec.ports.is_some()),
        ("resources", resources_set),
        ("resizePolicy", ec.resize_policy.is_some()),
        ("restartPolicy", ec.restart_policy.is_some()),
        ("restartPolicyRules", ec.restart_policy_rules.is_some()),
        ("livenessProbe", ec.liveness_probe.is_some()),
        ("readinessProbe", ec.readiness_probe.is_some()),
        ("startupProbe", ec.startup_probe.is_some()),
        ("lifecycle", ec.lifecycle.is_some()),
    ];
    fields
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| FieldError::forbidden(child(path, name), EPHEMERAL_FORBIDDEN_DETAIL))
        .collect()
}

fn host_process_of(
    sc_windows: Option<&k8s_openapi::api::core::v1::WindowsSecurityContextOptions>,
) -> Option<bool> {
    sc_windows.and_then(|w| w.host_process)
}

/// `validateWindowsHostProcessPod`, counting the new container with the others.
fn validate_windows_host_process(spec: &PodSpec, ec: &EphemeralContainer, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let pod_hp = host_process_of(
        spec.security_context
            .as_ref()
            .and_then(|s| s.windows_options.as_ref()),
    );
    let ec_hp = host_process_of(
        ec.security_context
            .as_ref()
            .and_then(|s| s.windows_options.as_ref()),
    );
    if let (Some(pod), Some(own)) = (pod_hp, ec_hp)
        && pod != own
    {
        errs.push(FieldError::invalid(
            child(
                &child(&child(path, "securityContext"), "windowsOptions"),
                "hostProcess",
            ),
            own,
            format!("pod hostProcess value must be identical if both are specified, was {pod}"),
        ));
    }
    let is_host_process = |own: Option<bool>| match own {
        Some(v) => v,
        None => pod_hp == Some(true),
    };
    let others = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| {
            host_process_of(
                c.security_context
                    .as_ref()
                    .and_then(|s| s.windows_options.as_ref()),
            )
        })
        .chain(spec.ephemeral_containers.iter().flatten().map(|c| {
            host_process_of(
                c.security_context
                    .as_ref()
                    .and_then(|s| s.windows_options.as_ref()),
            )
        }))
        .chain(std::iter::once(ec_hp));
    let (mut total, mut host_process) = (0usize, 0usize);
    for own in others {
        total += 1;
        if is_host_process(own) {
            host_process += 1;
        }
    }
    if host_process > 0 {
        if host_process != total {
            errs.push(FieldError::invalid(
                "spec",
                "",
                "If pod contains any hostProcess containers then all containers must be HostProcess containers",
            ));
        }
        if spec.host_network != Some(true) {
            errs.push(FieldError::invalid(
                "spec.hostNetwork",
                false,
                "hostNetwork must be true if pod contains any hostProcess containers",
            ));
        }
    }
    errs
}

/// `validateLinux` / `validateWindows` for the new container, when the pod names its OS.
fn validate_os(spec: &PodSpec, ec: &EphemeralContainer, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(sc) = ec.security_context.as_ref() else {
        return errs;
    };
    let sc_path = child(path, "securityContext");
    match spec.os.as_ref().map(|o| o.name.as_str()) {
        Some("linux") if sc.windows_options.is_some() => {
            errs.push(FieldError::forbidden(
                child(&sc_path, "windowsOptions"),
                "windows options cannot be set for a linux pod",
            ));
        }
        Some("windows") => {
            let set = [
                ("appArmorProfile", sc.app_armor_profile.is_some()),
                ("seLinuxOptions", sc.se_linux_options.is_some()),
                ("seccompProfile", sc.seccomp_profile.is_some()),
                ("capabilities", sc.capabilities.is_some()),
                (
                    "readOnlyRootFilesystem",
                    sc.read_only_root_filesystem.is_some(),
                ),
                ("privileged", sc.privileged.is_some()),
                (
                    "allowPrivilegeEscalation",
                    sc.allow_privilege_escalation.is_some(),
                ),
                ("procMount", sc.proc_mount.is_some()),
                ("runAsUser", sc.run_as_user.is_some()),
                ("runAsGroup", sc.run_as_group.is_some()),
            ];
            for (field, is_set) in set {
                if is_set {
                    errs.push(FieldError::forbidden(
                        child(&sc_path, field),
                        "cannot be set for a windows pod",
                    ));
                }
            }
        }
        _ => {}
    }
    errs
}

/// `validateFileKeyRefVolumes`: an env var read from a file needs an `emptyDir` volume.
fn validate_file_key_ref_volumes(spec: &PodSpec, ec: &EphemeralContainer, path: &str) -> ErrorList {
    let mut errs = ErrorList::new();
    for (j, env) in ec.env.iter().flatten().enumerate() {
        let Some(fkr) = env
            .value_from
            .as_ref()
            .and_then(|v| v.file_key_ref.as_ref())
        else {
            continue;
        };
        let p = child(
            &child(
                &child(&index(&child(path, "env"), j), "valueFrom"),
                "fileKeyRef",
            ),
            "volumeName",
        );
        match spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == fkr.volume_name)
        {
            None => errs.push(FieldError::not_found(p, fkr.volume_name.as_str())),
            Some(v) if v.empty_dir.is_none() => {
                errs.push(FieldError::invalid(
                    p,
                    fkr.volume_name.as_str(),
                    "referenced volume must be of type emptyDir",
                ));
            }
            Some(_) => {}
        }
    }
    errs
}
