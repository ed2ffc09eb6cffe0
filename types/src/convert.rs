//! Conversions between `PodDebugContainer` and the pod's ephemeral containers.
//!
//! A debug container *is* an entry of `spec.ephemeralContainers`; nothing else is stored.
//! Ephemeral containers can never be removed, so a debug name can be reused only by giving the
//! new entry another name: that entry then carries the debug name in the `PODDEBUG_NAME`
//! environment variable, which is how it is found again.

use k8s_openapi::api::core::v1::{Container, ContainerStatus, EnvVar, EphemeralContainer, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::API_VERSION;
use crate::api::{
    DebugPhase, KIND_POD_DEBUG_CONTAINER, PodDebugContainer, PodDebugContainerStatus, StopRequest,
};
use crate::profile::Profile;
use crate::stoppable::stop_blocker;

/// Environment variable that carries the debug name of an ephemeral container whose own name
/// differs from it (a debug name reused after the earlier container of that name ended).
/// The name is reserved: a request may not set it (see
/// [`validate_pod_debug_container`](crate::validation::validate_pod_debug_container)).
pub const DEBUG_NAME_ENV: &str = "PODDEBUG_NAME";

/// Environment variable that carries the deadline of a debug container with a time limit, in
/// RFC 3339 (`ttlSeconds` after its creation). It is part of the ephemeral container's spec,
/// which is immutable and needs no write on the pod object: the server keeps no state, and the
/// deadline survives restarts. Reserved like [`DEBUG_NAME_ENV`].
pub const EXPIRES_AT_ENV: &str = "PODDEBUG_EXPIRES_AT";

/// Environment variable that carries the profile a debug container was created with, so that
/// attaching to it later can ask for the same `use` permission as its create. Reserved like
/// [`DEBUG_NAME_ENV`].
pub const PROFILE_ENV: &str = "PODDEBUG_PROFILE";

/// Environment variable that carries the user who created a debug container: attaching to it
/// as anyone else is joining their session (`join` or `observe` on `pods/debug`). Reserved like
/// [`DEBUG_NAME_ENV`].
pub const OWNER_ENV: &str = "PODDEBUG_OWNER";

/// Environment variables that carry why a debug container was made: its reason, ticket, the
/// debug request it was made under and that request's approvers (comma-separated). Part of the
/// immutable spec, as the owner is (the pod's own annotations cannot be written through
/// `pods/ephemeralcontainers`). Reserved like [`DEBUG_NAME_ENV`]. For people and tools reading
/// the pod: no gate opens on them (a grant is decided on the debug request's signed record).
pub const REASON_ENV: &str = "PODDEBUG_REASON";
/// See [`REASON_ENV`].
pub const TICKET_ENV: &str = "PODDEBUG_TICKET";
/// See [`REASON_ENV`].
pub const DEBUG_REQUEST_ENV: &str = "PODDEBUG_REQUEST";
/// See [`REASON_ENV`].
pub const APPROVERS_ENV: &str = "PODDEBUG_APPROVERS";

/// Environment variable that carries a random identifier of the create that made a debug
/// container (32 hex digits). It makes every debug container's spec unique: the update that
/// adds one does not carry the pod's resourceVersion (a status write between the read and the
/// update would otherwise turn it back), so kube-apiserver's own rule that existing ephemeral
/// containers may not be removed or changed is what guards the list, and two creates of one
/// name can never both pass as the one that added it. Reserved like [`DEBUG_NAME_ENV`].
pub const CREATE_ID_ENV: &str = "PODDEBUG_CREATE_ID";

/// Whether `name` is an environment variable poddebug reserves for its own bookkeeping.
pub fn is_reserved_env(name: &str) -> bool {
    matches!(
        name,
        DEBUG_NAME_ENV
            | CREATE_ID_ENV
            | EXPIRES_AT_ENV
            | PROFILE_ENV
            | OWNER_ENV
            | REASON_ENV
            | TICKET_ENV
            | DEBUG_REQUEST_ENV
            | APPROVERS_ENV
    )
}

/// Give `ec` the reason, ticket, request and approvers of `j` ([`REASON_ENV`] and the others),
/// replacing any it had.
pub fn set_justification(ec: &mut EphemeralContainer, j: &crate::request::Justification) {
    let env = ec.env.get_or_insert_with(Vec::new);
    env.retain(|e| {
        !matches!(
            e.name.as_str(),
            REASON_ENV | TICKET_ENV | DEBUG_REQUEST_ENV | APPROVERS_ENV
        )
    });
    let approvers = Some(j.approvers.join(",")).filter(|a| !a.is_empty());
    for (name, value) in [
        (REASON_ENV, j.reason.clone()),
        (TICKET_ENV, j.ticket.clone()),
        (DEBUG_REQUEST_ENV, j.debug_request.clone()),
        (APPROVERS_ENV, approvers),
    ] {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            env.push(EnvVar {
                name: name.to_owned(),
                value: Some(value),
                value_from: None,
            });
        }
    }
    if env.is_empty() {
        ec.env = None;
    }
}

/// The reason, ticket, request and approvers an ephemeral container carries.
pub fn justification_of(ec: &EphemeralContainer) -> crate::request::Justification {
    let get = |name: &str| {
        ec.env
            .iter()
            .flatten()
            .find(|e| e.name == name && e.value_from.is_none())
            .and_then(|e| non_empty(e.value.as_deref()))
            .map(str::to_owned)
    };
    crate::request::Justification {
        reason: get(REASON_ENV),
        ticket: get(TICKET_ENV),
        debug_request: get(DEBUG_REQUEST_ENV),
        approvers: get(APPROVERS_ENV)
            .map(|a| a.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}

/// Give `ec` the identifier `id` of the create that makes it ([`CREATE_ID_ENV`]), replacing
/// any it had.
pub fn set_create_id(ec: &mut EphemeralContainer, id: &str) {
    replace_env(ec, CREATE_ID_ENV, id);
}

/// Give `ec` its owner `user` ([`OWNER_ENV`]), replacing any it had.
pub fn set_owner(ec: &mut EphemeralContainer, user: &str) {
    replace_env(ec, OWNER_ENV, user);
}

/// Set `ec`'s env var `name` to `value`, replacing any it had, at the end of its env.
fn replace_env(ec: &mut EphemeralContainer, name: &str, value: &str) {
    let env = ec.env.get_or_insert_with(Vec::new);
    env.retain(|e| e.name != name);
    env.push(EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    });
}

/// The user who created an ephemeral container ([`OWNER_ENV`]), if recorded.
pub fn owner_of(ec: &EphemeralContainer) -> Option<String> {
    ec.env
        .iter()
        .flatten()
        .find(|e| e.name == OWNER_ENV && e.value_from.is_none())
        .and_then(|e| non_empty(e.value.as_deref()))
        .map(str::to_owned)
}

/// The profile an ephemeral container was created with ([`PROFILE_ENV`]), if recorded.
pub fn profile_of(ec: &EphemeralContainer) -> Option<Profile> {
    ec.env
        .iter()
        .flatten()
        .find(|e| e.name == PROFILE_ENV && e.value_from.is_none())
        .and_then(|e| e.value.as_deref())
        .and_then(Profile::parse)
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// The ephemeral container to append to the pod for `pdc`.
///
/// Every field of `pdc.container` is copied, the forbidden ones included, because validation
/// must see them to refuse them as kube-apiserver would. Then: the name becomes `ec_name`,
/// the image defaults to `default_image` when the request has none, `targetContainerName`
/// comes from the request, `PODDEBUG_NAME=<debug_name>` is added when `ec_name` differs from
/// `debug_name`, and the profile is applied last.
pub fn to_ephemeral_container(
    pdc: &PodDebugContainer,
    ec_name: &str,
    debug_name: &str,
    profile: Profile,
    default_image: &str,
) -> EphemeralContainer {
    // Destructure so that a field added to Container by a k8s-openapi upgrade is a compile
    // error here instead of being silently dropped.
    let Container {
        args,
        command,
        env,
        env_from,
        image,
        image_pull_policy,
        lifecycle,
        liveness_probe,
        name: _,
        ports,
        readiness_probe,
        resize_policy,
        resources,
        restart_policy,
        restart_policy_rules,
        security_context,
        startup_probe,
        stdin,
        stdin_once,
        termination_message_path,
        termination_message_policy,
        tty,
        volume_devices,
        volume_mounts,
        working_dir,
    } = pdc.container.clone();

    // The env var name is reserved; a request that sets it is refused by validation, and it
    // must never be able to claim another debug container's identity.
    let mut env = without_reserved_env(env);
    if ec_name != debug_name {
        env.get_or_insert_with(Vec::new).push(EnvVar {
            name: DEBUG_NAME_ENV.to_owned(),
            value: Some(debug_name.to_owned()),
            value_from: None,
        });
    }
    env.get_or_insert_with(Vec::new).push(EnvVar {
        name: PROFILE_ENV.to_owned(),
        value: Some(profile.as_str().to_owned()),
        value_from: None,
    });

    let image = match non_empty(image.as_deref()) {
        Some(i) => i.to_owned(),
        None => default_image.to_owned(),
    };

    let mut ec = EphemeralContainer {
        args,
        command,
        env,
        env_from,
        image: Some(image),
        image_pull_policy,
        lifecycle,
        liveness_probe,
        name: ec_name.to_owned(),
        ports,
        readiness_probe,
        resize_policy,
        resources,
        restart_policy,
        restart_policy_rules,
        security_context,
        startup_probe,
        stdin,
        stdin_once,
        target_container_name: non_empty(pdc.target_container_name.as_deref()).map(str::to_owned),
        termination_message_path,
        termination_message_policy,
        tty,
        volume_devices,
        volume_mounts,
        working_dir,
    };
    profile.apply(&mut ec);
    ec
}

/// Give `ec` the deadline `at` ([`EXPIRES_AT_ENV`]), replacing any it had.
pub fn set_expires_at(ec: &mut EphemeralContainer, at: jiff::Timestamp) {
    replace_env(ec, EXPIRES_AT_ENV, &at.to_string());
}

/// The deadline of an ephemeral container ([`EXPIRES_AT_ENV`]), if it has a valid one.
pub fn expires_at_of(ec: &EphemeralContainer) -> Option<jiff::Timestamp> {
    ec.env
        .iter()
        .flatten()
        .find(|e| e.name == EXPIRES_AT_ENV && e.value_from.is_none())
        .and_then(|e| e.value.as_deref())
        .and_then(|v| v.parse().ok())
}

/// `env` without the reserved variables; a list that held nothing else becomes absent.
fn without_reserved_env(env: Option<Vec<EnvVar>>) -> Option<Vec<EnvVar>> {
    env.and_then(|v| {
        let had_any = !v.is_empty();
        let kept: Vec<EnvVar> = v
            .into_iter()
            .filter(|e| !is_reserved_env(&e.name))
            .collect();
        if kept.is_empty() && had_any {
            None
        } else {
            Some(kept)
        }
    })
}

/// The debug name of an ephemeral container: its `PODDEBUG_NAME` value, else its name.
pub fn debug_name_of(ec: &EphemeralContainer) -> String {
    ec.env
        .iter()
        .flatten()
        .find(|e| e.name == DEBUG_NAME_ENV && e.value_from.is_none())
        .and_then(|e| non_empty(e.value.as_deref()))
        .unwrap_or(&ec.name)
        .to_owned()
}

/// The ephemeral container's fields as a `Container`, without the reserved variables.
fn container_of(ec: &EphemeralContainer) -> Container {
    let EphemeralContainer {
        args,
        command,
        env,
        env_from,
        image,
        image_pull_policy,
        lifecycle,
        liveness_probe,
        name,
        ports,
        readiness_probe,
        resize_policy,
        resources,
        restart_policy,
        restart_policy_rules,
        security_context,
        startup_probe,
        stdin,
        stdin_once,
        target_container_name: _,
        termination_message_path,
        termination_message_policy,
        tty,
        volume_devices,
        volume_mounts,
        working_dir,
    } = ec.clone();
    let env = without_reserved_env(env);
    Container {
        args,
        command,
        env,
        env_from,
        image,
        image_pull_policy,
        lifecycle,
        liveness_probe,
        name,
        ports,
        readiness_probe,
        resize_policy,
        resources,
        restart_policy,
        restart_policy_rules,
        security_context,
        startup_probe,
        stdin,
        stdin_once,
        termination_message_path,
        termination_message_policy,
        tty,
        volume_devices,
        volume_mounts,
        working_dir,
    }
}

fn status_of<'a>(pod: &'a Pod, ec_name: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.ephemeral_container_statuses.as_ref())
        .and_then(|v| v.iter().find(|s| s.name == ec_name))
}

fn phase_of(status: Option<&ContainerStatus>) -> DebugPhase {
    match status.and_then(|s| s.state.as_ref()) {
        Some(state) if state.terminated.is_some() => DebugPhase::Terminated,
        Some(state) if state.running.is_some() => DebugPhase::Running,
        _ => DebugPhase::Waiting,
    }
}

fn started_at(status: Option<&ContainerStatus>) -> Option<Time> {
    let state = status?.state.as_ref()?;
    state
        .running
        .as_ref()
        .and_then(|r| r.started_at.clone())
        .or_else(|| state.terminated.as_ref().and_then(|t| t.started_at.clone()))
}

/// The `PodDebugContainer` for ephemeral container `ec` of `pod`.
///
/// `metadata.name` is the debug name, `namespace` and `labels` are the pod's, and
/// `creationTimestamp` is when the container started if known, else when the pod was created.
/// `container` holds the ephemeral container's fields; `profile` is the one recorded at its
/// create ([`PROFILE_ENV`]; absent for containers made before it was recorded or by other means). The status comes from `status.ephemeralContainerStatuses`: no
/// entry (or no state yet) is `Waiting`; `stoppable` from [`stop_blocker`].
pub fn from_pod(
    pod: &Pod,
    ec: &EphemeralContainer,
    stop: Option<StopRequest>,
) -> PodDebugContainer {
    let status = status_of(pod, &ec.name);
    let blocker = stop_blocker(pod, ec);
    let why = justification_of(ec);
    let creation_timestamp = started_at(status).or_else(|| pod.metadata.creation_timestamp.clone());
    PodDebugContainer {
        api_version: API_VERSION.to_owned(),
        kind: KIND_POD_DEBUG_CONTAINER.to_owned(),
        metadata: ObjectMeta {
            name: Some(debug_name_of(ec)),
            namespace: pod.metadata.namespace.clone(),
            labels: pod.metadata.labels.clone(),
            creation_timestamp,
            ..Default::default()
        },
        container: container_of(ec),
        target_container_name: ec.target_container_name.clone(),
        profile: profile_of(ec).map(|p| p.as_str().to_owned()),
        ttl_seconds: None,
        debug_request: why.debug_request,
        reason: why.reason,
        ticket: why.ticket,
        status: Some(PodDebugContainerStatus {
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            ephemeral_container_name: ec.name.clone(),
            phase: phase_of(status),
            state: status.and_then(|s| s.state.clone()),
            ready: status.is_some_and(|s| s.ready),
            started: status.and_then(|s| s.started),
            image: status.map(|s| s.image.clone()).unwrap_or_default(),
            image_id: status.map(|s| s.image_id.clone()).unwrap_or_default(),
            container_id: status.and_then(|s| s.container_id.clone()),
            stop_requested: stop,
            stoppable: blocker.is_none(),
            stoppable_message: blocker.map(str::to_owned),
            expires_at: expires_at_of(ec).map(Time),
            created_by: owner_of(ec),
            effective_profile: crate::reach::strongest(&crate::reach::effective_profiles(
                pod,
                ec,
                profile_of(ec),
            ))
            .map(|p| p.as_str().to_owned()),
            approvers: why.approvers,
            conditions: None,
        }),
    }
}

/// Every ephemeral container of the pod with its debug name, in spec order.
pub fn debug_containers_of(pod: &Pod) -> Vec<(String, &EphemeralContainer)> {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .map(|ecs| ecs.iter().map(|ec| (debug_name_of(ec), ec)).collect())
        .unwrap_or_default()
}

/// The newest ephemeral container (last in spec order) with this debug name.
pub fn newest_for<'a>(pod: &'a Pod, debug_name: &str) -> Option<&'a EphemeralContainer> {
    debug_containers_of(pod)
        .into_iter()
        .rev()
        .find(|(n, _)| n == debug_name)
        .map(|(_, ec)| ec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pdc(v: serde_json::Value) -> PodDebugContainer {
        serde_json::from_value(v).unwrap()
    }

    /// `want` with the profile recorded last in its env, as every debug container has it.
    fn with_profile(mut want: serde_json::Value, profile: Profile) -> serde_json::Value {
        let env = want
            .as_object_mut()
            .unwrap()
            .entry("env")
            .or_insert_with(|| json!([]));
        env.as_array_mut()
            .unwrap()
            .push(json!({"name": PROFILE_ENV, "value": profile.as_str()}));
        want
    }

    /// A container with every one of its 25 fields set.
    fn full_container() -> serde_json::Value {
        json!({
            "name": "ignored",
            "image": "busybox:1.36",
            "command": ["sh"],
            "args": ["-c", "true"],
            "workingDir": "/w",
            "ports": [{"containerPort": 80}],
            "envFrom": [{"configMapRef": {"name": "cm"}}],
            "env": [{"name": "A", "value": "1"}],
            "resources": {"limits": {"cpu": "1"}},
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
            "restartPolicy": "Always",
            "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}],
            "volumeMounts": [{"name": "data", "mountPath": "/d"}],
            "volumeDevices": [{"name": "blk", "devicePath": "/dev/x"}],
            "livenessProbe": {"exec": {"command": ["true"]}},
            "readinessProbe": {"exec": {"command": ["true"]}},
            "startupProbe": {"exec": {"command": ["true"]}},
            "lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
            "terminationMessagePath": "/tmp/t",
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "imagePullPolicy": "Never",
            "securityContext": {"runAsUser": 0},
            "stdin": true,
            "stdinOnce": true,
            "tty": true
        })
    }

    #[test]
    fn every_container_field_is_copied() {
        let p = pdc(json!({"container": full_container(), "targetContainerName": "app"}));
        let ec = to_ephemeral_container(&p, "dbg", "dbg", Profile::Legacy, "default:img");
        let mut want = full_container();
        want["name"] = json!("dbg");
        want["targetContainerName"] = json!("app");
        assert_eq!(
            serde_json::to_value(&ec).unwrap(),
            with_profile(want, Profile::Legacy)
        );
        assert_eq!(profile_of(&ec), Some(Profile::Legacy));
        // 26 keys: the 25 Container fields plus targetContainerName.
        assert_eq!(
            serde_json::to_value(&ec)
                .unwrap()
                .as_object()
                .unwrap()
                .len(),
            26
        );
    }

    #[test]
    fn conversion_table() {
        struct Case {
            what: &'static str,
            body: serde_json::Value,
            ec_name: &'static str,
            debug_name: &'static str,
            profile: Profile,
            want: serde_json::Value,
        }
        let cases = vec![
            Case {
                what: "empty request gets the default image and nothing else",
                body: json!({}),
                ec_name: "dbg",
                debug_name: "dbg",
                profile: Profile::Legacy,
                want: json!({"name": "dbg", "image": "default:img"}),
            },
            Case {
                what: "empty image string means the default image",
                body: json!({"container": {"image": ""}}),
                ec_name: "dbg",
                debug_name: "dbg",
                profile: Profile::Legacy,
                want: json!({"name": "dbg", "image": "default:img"}),
            },
            Case {
                what: "image, target and general profile",
                body: json!({"container": {"image": "nicolaka/netshoot", "stdin": true}, "targetContainerName": "app"}),
                ec_name: "dbg",
                debug_name: "dbg",
                profile: Profile::General,
                want: json!({"name": "dbg", "image": "nicolaka/netshoot", "stdin": true, "targetContainerName": "app",
                             "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}),
            },
            Case {
                what: "empty target is no target",
                body: json!({"targetContainerName": ""}),
                ec_name: "dbg",
                debug_name: "dbg",
                profile: Profile::Legacy,
                want: json!({"name": "dbg", "image": "default:img"}),
            },
            Case {
                what: "reused name carries the debug name after the user's env",
                body: json!({"container": {"env": [{"name": "A", "value": "1"}]}}),
                ec_name: "dbg-2",
                debug_name: "dbg",
                profile: Profile::Legacy,
                want: json!({"name": "dbg-2", "image": "default:img",
                             "env": [{"name": "A", "value": "1"}, {"name": "PODDEBUG_NAME", "value": "dbg"}]}),
            },
            Case {
                what: "a smuggled PODDEBUG_NAME is dropped",
                body: json!({"container": {"env": [{"name": "PODDEBUG_NAME", "value": "other"}]}}),
                ec_name: "dbg",
                debug_name: "dbg",
                profile: Profile::Legacy,
                want: json!({"name": "dbg", "image": "default:img"}),
            },
            Case {
                what: "restricted replaces the user's securityContext",
                body: json!({"container": {"image": "x", "securityContext": {"privileged": true}}}),
                ec_name: "dbg",
                debug_name: "dbg",
                profile: Profile::Restricted,
                want: json!({"name": "dbg", "image": "x", "securityContext": {
                    "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                    "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}}),
            },
        ];
        for c in cases {
            let ec = to_ephemeral_container(
                &pdc(c.body),
                c.ec_name,
                c.debug_name,
                c.profile,
                "default:img",
            );
            assert_eq!(
                serde_json::to_value(&ec).unwrap(),
                with_profile(c.want, c.profile),
                "{}",
                c.what
            );
        }
    }

    fn ec(v: serde_json::Value) -> EphemeralContainer {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn debug_names() {
        assert_eq!(debug_name_of(&ec(json!({"name": "a"}))), "a");
        assert_eq!(
            debug_name_of(&ec(
                json!({"name": "a-2", "env": [{"name": "PODDEBUG_NAME", "value": "a"}]})
            )),
            "a"
        );
        assert_eq!(
            debug_name_of(&ec(
                json!({"name": "a-2", "env": [{"name": "PODDEBUG_NAME", "value": ""}]})
            )),
            "a-2"
        );
        assert_eq!(
            debug_name_of(&ec(json!({"name": "a-2", "env": [{"name": "PODDEBUG_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}))),
            "a-2"
        );
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"},
                         "creationTimestamp": "2026-01-01T00:00:00Z", "uid": "u1"},
            "spec": {
                "containers": [{"name": "app", "image": "nginx"}],
                "ephemeralContainers": [
                    {"name": "a", "image": "busybox"},
                    {"name": "b", "image": "busybox", "targetContainerName": "app"},
                    {"name": "a-2", "image": "busybox", "env": [{"name": "PODDEBUG_NAME", "value": "a"}]},
                    {"name": "c", "image": "busybox"}
                ]
            },
            "status": {"ephemeralContainerStatuses": [
                {"name": "a", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "sha",
                 "containerID": "containerd://1",
                 "state": {"terminated": {"exitCode": 0, "startedAt": "2026-01-01T00:01:00Z", "finishedAt": "2026-01-01T00:02:00Z"}}},
                {"name": "b", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "", "started": true,
                 "state": {"running": {"startedAt": "2026-01-01T00:03:00Z"}}},
                {"name": "a-2", "ready": false, "restartCount": 0, "image": "busybox", "imageID": "",
                 "state": {"waiting": {"reason": "ContainerCreating"}}}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn listing_and_newest() {
        let p = pod();
        let names: Vec<(String, String)> = debug_containers_of(&p)
            .into_iter()
            .map(|(d, ec)| (d, ec.name.clone()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("a".into(), "a".into()),
                ("b".into(), "b".into()),
                ("a".into(), "a-2".into()),
                ("c".into(), "c".into())
            ]
        );
        assert_eq!(newest_for(&p, "a").map(|ec| ec.name.as_str()), Some("a-2"));
        assert_eq!(newest_for(&p, "b").map(|ec| ec.name.as_str()), Some("b"));
        assert!(newest_for(&p, "a-2").is_none());
        assert!(newest_for(&p, "zzz").is_none());
        assert!(debug_containers_of(&Pod::default()).is_empty());
    }

    #[test]
    fn the_deadline_lives_in_the_container_and_shows_as_expires_at() {
        let mut p = pod();
        let at: jiff::Timestamp = "2026-01-01T08:00:00Z".parse().unwrap();
        let ecs = p
            .spec
            .as_mut()
            .and_then(|s| s.ephemeral_containers.as_mut())
            .unwrap();
        set_expires_at(&mut ecs[1], at);
        set_expires_at(&mut ecs[1], at); // replaced, not repeated
        assert_eq!(
            ecs[1]
                .env
                .iter()
                .flatten()
                .filter(|e| e.name == EXPIRES_AT_ENV)
                .count(),
            1
        );
        assert_eq!(expires_at_of(&ecs[1]), Some(at));
        let got = from_pod(
            &p,
            &p.spec
                .as_ref()
                .unwrap()
                .ephemeral_containers
                .as_ref()
                .unwrap()[1],
            None,
        );
        assert_eq!(got.status.as_ref().unwrap().expires_at, Some(Time(at)));
        assert!(got.container.env.is_none(), "{:?}", got.container.env);
        // None without the variable, and a request cannot smuggle one in.
        let plain = from_pod(
            &p,
            &p.spec
                .as_ref()
                .unwrap()
                .ephemeral_containers
                .as_ref()
                .unwrap()[0],
            None,
        );
        assert_eq!(plain.status.unwrap().expires_at, None);
        let smuggled = to_ephemeral_container(
            &pdc(
                json!({"container": {"env": [{"name": "PODDEBUG_EXPIRES_AT", "value": "2099-01-01T00:00:00Z"}]}}),
            ),
            "dbg",
            "dbg",
            Profile::Legacy,
            "img",
        );
        assert_eq!(expires_at_of(&smuggled), None);
    }

    #[test]
    fn from_pod_table() {
        let p = pod();
        let ecs = p
            .spec
            .as_ref()
            .unwrap()
            .ephemeral_containers
            .as_ref()
            .unwrap();
        let stop = StopRequest {
            requested_at: Time("2026-01-01T00:05:00Z".parse().unwrap()),
            requested_by: "alice".into(),
            grace_period_seconds: Some(10),
        };
        // (ec index, debug name, phase, creationTimestamp, stop)
        let cases = [
            (
                0,
                "a",
                DebugPhase::Terminated,
                "2026-01-01T00:01:00Z",
                Some(stop.clone()),
            ),
            (1, "b", DebugPhase::Running, "2026-01-01T00:03:00Z", None),
            (2, "a", DebugPhase::Waiting, "2026-01-01T00:00:00Z", None),
            (3, "c", DebugPhase::Waiting, "2026-01-01T00:00:00Z", None),
        ];
        for (i, name, phase, created, stop) in cases {
            let got = from_pod(&p, &ecs[i], stop.clone());
            assert_eq!(got.api_version, "poddebug.dev/v1alpha1");
            assert_eq!(got.kind, "PodDebugContainer");
            assert_eq!(got.metadata.name.as_deref(), Some(name));
            assert_eq!(got.metadata.namespace.as_deref(), Some("ns"));
            assert_eq!(got.metadata.labels, p.metadata.labels);
            assert_eq!(
                got.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .as_deref(),
                Some(created)
            );
            assert!(got.profile.is_none());
            let st = got.status.unwrap();
            assert_eq!(st.pod_name, "web");
            assert_eq!(st.ephemeral_container_name, ecs[i].name);
            assert_eq!(st.phase, phase);
            assert_eq!(st.stop_requested, stop);
            // Our bookkeeping variable is not shown back.
            assert!(got.container.env.is_none(), "{:?}", got.container.env);
            assert_eq!(got.container.name, ecs[i].name);
        }
        let a = from_pod(&p, &ecs[0], None).status.unwrap();
        assert_eq!(a.image_id, "sha");
        assert_eq!(a.container_id.as_deref(), Some("containerd://1"));
        assert!(!a.stoppable, "no target: its own PID 1");
        assert_eq!(
            a.stoppable_message.as_deref(),
            Some(crate::stoppable::NOT_STOPPABLE)
        );
        let b = from_pod(&p, &ecs[1], None);
        assert_eq!(b.target_container_name.as_deref(), Some("app"));
        let b = b.status.unwrap();
        assert_eq!(b.started, Some(true));
        assert!(b.stoppable);
        assert!(b.stoppable_message.is_none());
        let json = serde_json::to_value(from_pod(&p, &ecs[0], None)).unwrap();
        assert_eq!(json["status"]["stoppable"], false);
        assert!(json["status"]["stoppableMessage"].is_string());
    }

    #[test]
    fn round_trip_keeps_the_container() {
        let p = pdc(json!({"container": full_container()}));
        let ec = to_ephemeral_container(&p, "x-2", "x", Profile::Legacy, "img");
        let back = container_of(&ec);
        let mut want = p.container.clone();
        want.name = "x-2".into();
        assert_eq!(back, want);
    }
}
