//! What a debug container can reach: everything its pod lends it, not only its own
//! `securityContext`.
//!
//! An ephemeral container runs inside a pod. It shares the pod's network namespace (and the
//! host's, with `hostNetwork`), its IPC and PID namespaces with `hostIPC`/`hostPID`, the pod's
//! security context (seccomp, SELinux, sysctls), and it may mount any of the pod's volumes — a
//! `hostPath` volume is the node's filesystem. With `targetContainerName` it joins that
//! container's PID namespace (with `shareProcessNamespace`, every container's), and through
//! `/proc/PID/root` and ptrace reaches what those processes hold: their privileges, their
//! capabilities, their root filesystem and their mounts.
//!
//! So the profile a debug container amounts to is judged on a pod made of exactly that
//! ([`reach_pod`]): the debug container as a regular container, the pod's host namespaces and
//! pod-level security context, the volumes it and the containers it reaches mount, and those
//! containers. Every setting of that pod beyond Pod Security baseline ([`pod_privileges`]), and
//! every `hostPort` of the pod (the network every container shares), maps to the profile that
//! grants it ([`effective_profiles`]): a privileged target, a `hostPath` mount or a host
//! namespace is `sysadmin`, a `NET_ADMIN` target `netadmin`; an isolated profile (`baseline`,
//! `restricted`) keeps the Pod Security level its name promises for that pod, or lifts.
//!
//! Create, attach, log, join and moderation all use this one judgment, on the pod as read.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Profile;
use crate::pod_security::{Level, level, restricted_violations};
use crate::privilege::{Elevation, Privilege, Reach, gated_profile, pod_privileges};

/// The prefix of the (deprecated) AppArmor annotations, per container name.
const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The debug container as a regular container, with the fields Pod Security reads.
fn as_container(ec: &EphemeralContainer) -> Container {
    Container {
        name: ec.name.clone(),
        image: ec.image.clone(),
        security_context: ec.security_context.clone(),
        volume_mounts: ec.volume_mounts.clone(),
        volume_devices: ec.volume_devices.clone(),
        ports: ec.ports.clone(),
        lifecycle: ec.lifecycle.clone(),
        liveness_probe: ec.liveness_probe.clone(),
        readiness_probe: ec.readiness_probe.clone(),
        startup_probe: ec.startup_probe.clone(),
        ..Default::default()
    }
}

/// The volumes a container uses by name.
fn volume_names(c: &Container) -> impl Iterator<Item = &str> {
    c.volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .chain(c.volume_devices.iter().flatten().map(|d| d.name.as_str()))
}

/// The containers of `spec` whose processes a debug container `ec` reaches: every container and
/// init container when the pod shares one process namespace, else the one it targets (a
/// container or an init container; an ephemeral container cannot be targeted).
fn reached<'a>(spec: &'a PodSpec, ec: &EphemeralContainer) -> Vec<&'a Container> {
    let all = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    if spec.share_process_namespace == Some(true) {
        return all.collect();
    }
    match ec
        .target_container_name
        .as_deref()
        .filter(|t| !t.is_empty())
    {
        Some(t) => all.filter(|c| c.name == t).take(1).collect(),
        None => Vec::new(),
    }
}

/// The pod a debug container `ec` of `pod` amounts to (module docs): the debug container first,
/// then the containers it reaches; the pod's host namespaces, process sharing, user namespace
/// and security context; the volumes any of them uses; the AppArmor annotations naming any of
/// them. Nothing else of the pod (its other containers, labels, annotations) is in it.
pub fn reach_pod(pod: &Pod, ec: &EphemeralContainer) -> Pod {
    let dc = as_container(ec);
    let Some(spec) = &pod.spec else {
        return Pod {
            spec: Some(PodSpec {
                containers: vec![dc],
                ..Default::default()
            }),
            ..Default::default()
        };
    };
    let mut containers = vec![dc];
    containers.extend(reached(spec, ec).into_iter().cloned());
    let used: BTreeSet<&str> = containers.iter().flat_map(volume_names).collect();
    let volumes: Vec<_> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| used.contains(v.name.as_str()))
        .cloned()
        .collect();
    let names: BTreeSet<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let annotations: std::collections::BTreeMap<String, String> = pod
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| {
            k.strip_prefix(APPARMOR_ANNOTATION_PREFIX)
                .is_some_and(|c| names.contains(c))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Pod {
        metadata: ObjectMeta {
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        spec: Some(PodSpec {
            host_network: spec.host_network,
            host_pid: spec.host_pid,
            host_ipc: spec.host_ipc,
            host_users: spec.host_users,
            share_process_namespace: spec.share_process_namespace,
            security_context: spec.security_context.clone(),
            volumes: (!volumes.is_empty()).then_some(volumes),
            containers,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Every setting a debug container `ec` of `pod` reaches beyond Pod Security baseline: those of
/// [`reach_pod`], then every `hostPort` of the pod's other containers (their network is its
/// network).
pub fn reach_privileges(pod: &Pod, ec: &EphemeralContainer) -> Vec<Privilege> {
    let synthetic = reach_pod(pod, ec);
    let mut found = pod_privileges(&synthetic);
    let in_synthetic: BTreeSet<String> = synthetic
        .spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
        .collect();
    for c in pod
        .spec
        .iter()
        .flat_map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
        })
        .filter(|c| !in_synthetic.contains(&c.name))
    {
        for (i, port) in c.ports.iter().flatten().enumerate() {
            if let Some(hp) = port.host_port.filter(|p| *p != 0) {
                found.push(Privilege {
                    reach: Reach::Host,
                    container: Some(c.name.clone()),
                    setting: format!("ports[{i}].hostPort: {hp} (the pod's network)"),
                });
            }
        }
    }
    found
}

/// Whether `profile` already grants what an ungated setting beyond baseline (`SYS_PTRACE`, a
/// capability spelled otherwise) gives: the profiles that are no Pod Security level.
fn grants_ungated(profile: Profile) -> bool {
    matches!(
        profile,
        Profile::Legacy | Profile::General | Profile::Netadmin | Profile::Sysadmin
    )
}

/// The profiles a debug container `ec` of `pod`, made with `named` (`None`: not recorded),
/// amounts to, by what it can reach (module docs): `named` first (with an empty setting), then
/// each profile the reached settings need, once, with the first setting found — a setting only a
/// gated profile grants maps to it; an ungated one beyond baseline (`SYS_PTRACE` of the target)
/// lifts an isolated profile to `general`; and a `restricted` container whose reach does not
/// meet Pod Security restricted is a `baseline` one.
pub fn effective_profiles(
    pod: &Pod,
    ec: &EphemeralContainer,
    named: Option<Profile>,
) -> Vec<Elevation> {
    let mut out: Vec<Elevation> = named
        .map(|profile| Elevation {
            profile,
            setting: String::new(),
        })
        .into_iter()
        .collect();
    let mut push = |profile: Profile, setting: String| {
        if !out.iter().any(|e| e.profile == profile) {
            out.push(Elevation { profile, setting });
        }
    };
    let privileges = reach_privileges(pod, ec);
    for p in &privileges {
        let setting = match &p.container {
            Some(c) if *c == ec.name => p.setting.clone(),
            _ => p.to_string(),
        };
        match gated_profile(p.reach) {
            Some(g) => push(g, setting),
            None if named.is_none_or(|n| !grants_ungated(n)) => push(Profile::General, setting),
            None => {}
        }
    }
    if named == Some(Profile::Restricted) && privileges.is_empty() {
        let synthetic = reach_pod(pod, ec);
        if level(&synthetic) != Level::Restricted
            && let Some(why) = restricted_violations(&synthetic).into_iter().next()
        {
            push(
                Profile::Baseline,
                format!("{why}, which Pod Security restricted forbids"),
            );
        }
    }
    out
}

/// The most powerful of `profiles`, as one name for the API to show (`status.effectiveProfile`):
/// `sysadmin`, then `netadmin`, `general`, `legacy`, `baseline`, `restricted`.
pub fn strongest(profiles: &[Elevation]) -> Option<Profile> {
    let rank = |p: Profile| match p {
        Profile::Sysadmin => 0,
        Profile::Netadmin => 1,
        Profile::General => 2,
        Profile::Legacy => 3,
        Profile::Baseline => 4,
        Profile::Restricted => 5,
    };
    profiles.iter().map(|e| e.profile).min_by_key(|p| rank(*p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("a pod")
    }

    fn dc(v: serde_json::Value) -> EphemeralContainer {
        let mut base = json!({"name": "dbg", "image": "busybox"});
        if let (Some(b), Some(extra)) = (base.as_object_mut(), v.as_object()) {
            for (k, v) in extra {
                b.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(base).expect("an ephemeral container")
    }

    fn names(e: &[Elevation]) -> Vec<(Profile, String)> {
        e.iter().map(|e| (e.profile, e.setting.clone())).collect()
    }

    fn web() -> serde_json::Value {
        json!({"spec": {
            "containers": [
                {"name": "app", "image": "app"},
                {"name": "priv", "image": "x", "securityContext": {"privileged": true}},
                {"name": "net", "image": "x", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}},
                {"name": "tracer", "image": "x", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}},
                {"name": "mounts-root", "image": "x", "volumeMounts": [{"name": "root", "mountPath": "/host"}]}
            ],
            "volumes": [
                {"name": "root", "hostPath": {"path": "/"}},
                {"name": "data", "emptyDir": {}}
            ]
        }})
    }

    #[test]
    fn a_plain_container_in_a_plain_pod_is_what_it_names() {
        let p = pod(web());
        let e = effective_profiles(&p, &dc(json!({})), Some(Profile::General));
        assert_eq!(names(&e), [(Profile::General, String::new())]);
        let mounts_data = dc(json!({"volumeMounts": [{"name": "data", "mountPath": "/data"}]}));
        assert_eq!(
            effective_profiles(&p, &mounts_data, Some(Profile::Baseline)).len(),
            1
        );
    }

    #[test]
    fn a_mounted_host_path_is_the_node() {
        let p = pod(web());
        let e = effective_profiles(
            &p,
            &dc(json!({"volumeMounts": [{"name": "root", "mountPath": "/r"}]})),
            Some(Profile::General),
        );
        assert_eq!(
            names(&e),
            [
                (Profile::General, String::new()),
                (
                    Profile::Sysadmin,
                    "spec.volumes[root].hostPath: /".to_owned()
                ),
            ]
        );
        // A device of the volume counts as its mount.
        let e = effective_profiles(
            &p,
            &dc(json!({"volumeDevices": [{"name": "root", "devicePath": "/dev/r"}]})),
            Some(Profile::General),
        );
        assert_eq!(e[1].profile, Profile::Sysadmin);
    }

    #[test]
    fn the_target_lends_its_privileges_and_its_mounts() {
        let p = pod(web());
        let target = |t: &str| dc(json!({"targetContainerName": t}));
        let e = effective_profiles(&p, &target("priv"), Some(Profile::General));
        assert_eq!(
            names(&e)[1],
            (
                Profile::Sysadmin,
                "securityContext.privileged: true (container \"priv\")".to_owned()
            )
        );
        assert_eq!(
            effective_profiles(&p, &target("net"), Some(Profile::General))[1].profile,
            Profile::Netadmin
        );
        // The target's root filesystem holds its hostPath mount.
        assert_eq!(
            effective_profiles(&p, &target("mounts-root"), Some(Profile::Legacy))[1].profile,
            Profile::Sysadmin
        );
        // SYS_PTRACE of the target: nothing more for general, general for an isolated profile.
        assert_eq!(
            effective_profiles(&p, &target("tracer"), Some(Profile::General)).len(),
            1
        );
        assert_eq!(
            names(&effective_profiles(
                &p,
                &target("tracer"),
                Some(Profile::Baseline)
            ))[1],
            (
                Profile::General,
                "securityContext.capabilities.add: SYS_PTRACE (container \"tracer\")".to_owned()
            )
        );
        // No target, no shared process namespace: the privileged container is out of reach.
        assert_eq!(
            effective_profiles(&p, &dc(json!({})), Some(Profile::General)).len(),
            1
        );
    }

    #[test]
    fn a_shared_process_namespace_reaches_every_container() {
        let mut v = web();
        v["spec"]["shareProcessNamespace"] = json!(true);
        let e = effective_profiles(&pod(v), &dc(json!({})), Some(Profile::General));
        let profiles: Vec<Profile> = e.iter().map(|e| e.profile).collect();
        assert_eq!(
            profiles,
            [Profile::General, Profile::Sysadmin, Profile::Netadmin]
        );
    }

    #[test]
    fn the_pods_host_namespaces_security_context_and_host_ports_are_lent() {
        for (extra, want) in [
            (json!({"hostNetwork": true}), "spec.hostNetwork: true"),
            (json!({"hostPID": true}), "spec.hostPID: true"),
            (json!({"hostIPC": true}), "spec.hostIPC: true"),
            (
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
                "spec.securityContext.seccompProfile.type: Unconfined",
            ),
        ] {
            let mut v = json!({"spec": {"containers": [{"name": "app", "image": "x"}]}});
            for (k, val) in extra.as_object().into_iter().flatten() {
                v["spec"][k] = val.clone();
            }
            let e = effective_profiles(&pod(v), &dc(json!({})), Some(Profile::Baseline));
            assert_eq!(
                names(&e)[1],
                (Profile::Sysadmin, want.to_owned()),
                "{extra}"
            );
        }
        let v = json!({"spec": {"containers": [{"name": "app", "image": "x",
            "ports": [{"containerPort": 80, "hostPort": 8080}]}]}});
        let e = effective_profiles(&pod(v), &dc(json!({})), Some(Profile::General));
        assert_eq!(
            names(&e)[1],
            (
                Profile::Sysadmin,
                "ports[0].hostPort: 8080 (the pod's network) (container \"app\")".to_owned()
            )
        );
        // An AppArmor annotation written ahead for the debug container's name.
        let v = json!({"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/dbg": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/other": "unconfined"}},
            "spec": {"containers": [{"name": "app", "image": "x"}]}});
        let e = effective_profiles(&pod(v), &dc(json!({})), Some(Profile::General));
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e[1].setting
                .contains("apparmor.security.beta.kubernetes.io/dbg")
        );
    }

    #[test]
    fn the_containers_own_settings_count_as_before() {
        let p = pod(web());
        let own = dc(json!({"securityContext": {"privileged": true}}));
        assert_eq!(
            names(&effective_profiles(&p, &own, Some(Profile::Baseline)))[1],
            (
                Profile::Sysadmin,
                "securityContext.privileged: true".to_owned()
            )
        );
    }

    #[test]
    fn restricted_keeps_its_level_or_is_baseline() {
        let mut restricted = dc(json!({}));
        Profile::Restricted.apply(&mut restricted);
        restricted.target_container_name = Some("app".into());
        // The target runs as it likes: the pod of the two does not meet restricted.
        let e = effective_profiles(&pod(web()), &restricted, Some(Profile::Restricted));
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(e[1].profile, Profile::Baseline);
        assert!(
            e[1].setting.contains("container \"app\"") && e[1].setting.contains("restricted"),
            "{}",
            e[1].setting
        );
        // Alone, it does.
        restricted.target_container_name = None;
        assert_eq!(
            effective_profiles(&pod(web()), &restricted, Some(Profile::Restricted)).len(),
            1
        );
    }

    #[test]
    fn the_strongest_profile_is_named() {
        let e = effective_profiles(
            &pod(web()),
            &dc(json!({"targetContainerName": "net"})),
            Some(Profile::Baseline),
        );
        assert_eq!(strongest(&e), Some(Profile::Netadmin));
        assert_eq!(strongest(&[]), None);
    }
}
