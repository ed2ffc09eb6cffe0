//! Which gated debug profiles a debug container's final `securityContext` amounts to, and what
//! a whole pod gets beyond Pod Security's baseline.
//!
//! The `use` permission on `debugprofiles/sysadmin` and `debugprofiles/netadmin` would mean
//! nothing if a request could name an ungated profile (`legacy`, `general`) and ask for the same
//! privileges in `container.securityContext` directly. So after the profile is applied, every
//! setting beyond what the ungated profiles and Pod Security's baseline allow is mapped to the
//! gated profile that grants it, and the caller needs that profile's permission too
//! ([`elevations`]).
//!
//! The pods poddebug makes (copies of pods, node debug pods) are judged whole, from their spec as
//! read, never from the labels or annotations poddebug wrote on them: [`pod_privileges`] lists
//! every setting Pod Security's baseline forbids (each check of `baseline:latest` as
//! kube-apiserver v1.36 runs it), with what it reaches. A pod with none meets baseline
//! ([`crate::pod_security`]).

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EphemeralContainer, Lifecycle, LifecycleHandler, Pod, Probe,
    SecurityContext,
};

use crate::Profile;

/// Capabilities Pod Security baseline lets a container add, spelled exactly so (Pod Security
/// compares the strings as written: `chown` and `CAP_CHOWN` are not in the list).
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Capabilities any debug container may add: Pod Security baseline's allowed list plus the
/// `general` profile's `SYS_PTRACE`, compared once upper-cased and without a `CAP_` prefix
/// (as the container runtime reads them).
const UNGATED_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
    "SYS_PTRACE",
];

/// Capabilities the `netadmin` profile grants.
const NETADMIN_CAPABILITIES: &[&str] = &["NET_ADMIN", "NET_RAW"];

/// SELinux types Pod Security baseline allows.
const BASELINE_SELINUX_TYPES: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// Sysctls Pod Security baseline allows (`baseline:latest`, kube-apiserver v1.36).
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The prefix of the (deprecated) AppArmor annotations Pod Security still reads.
const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// A setting that needs a gated profile's permission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Elevation {
    /// The profile that grants it.
    pub profile: Profile,
    /// What the container sets, in words.
    pub setting: String,
}

fn elevation(profile: Profile, setting: impl Into<String>) -> Elevation {
    Elevation {
        profile,
        setting: setting.into(),
    }
}

/// What a setting beyond Pod Security baseline reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reach {
    /// The host's namespaces or network: `hostNetwork`, `hostPID`, `hostIPC`, a `hostPort`, a
    /// probe or lifecycle handler aimed at another host.
    Host,
    /// The host's filesystem: a `hostPath` volume.
    HostFilesystem,
    /// A capability the `netadmin` profile grants (`NET_ADMIN`, `NET_RAW`).
    NetAdmin,
    /// What only a privileged container has: `privileged`, a capability no other profile
    /// grants, unmasked `/proc`, no seccomp, AppArmor or SELinux confinement, an unsafe sysctl,
    /// a Windows host process.
    Node,
    /// Beyond baseline, yet what an ungated profile grants: `general`'s `SYS_PTRACE`, or a
    /// baseline capability spelled otherwise (`chown`, `CAP_CHOWN`).
    Ungated,
}

/// One setting of a pod beyond Pod Security baseline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Privilege {
    /// What it reaches.
    pub reach: Reach,
    /// The container that sets it; `None` for the pod's own settings.
    pub container: Option<String>,
    /// The setting, in words (`securityContext.privileged: true`, `spec.hostPID: true`).
    pub setting: String,
}

impl std::fmt::Display for Privilege {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.container {
            Some(c) => write!(f, "{} (container {c:?})", self.setting),
            None => f.write_str(&self.setting),
        }
    }
}

/// The settings of one container's `securityContext` beyond Pod Security baseline, in a stable
/// order, each with what it reaches.
fn security_context_privileges(sc: &SecurityContext) -> Vec<(Reach, String)> {
    let mut found = Vec::new();
    if sc.privileged == Some(true) {
        found.push((Reach::Node, "securityContext.privileged: true".to_owned()));
    }
    for cap in sc
        .capabilities
        .as_ref()
        .and_then(|c| c.add.as_ref())
        .into_iter()
        .flatten()
    {
        let name = cap.trim().to_ascii_uppercase();
        let name = name.strip_prefix("CAP_").unwrap_or(&name);
        let reach = if NETADMIN_CAPABILITIES.contains(&name) {
            Reach::NetAdmin
        } else if !UNGATED_CAPABILITIES.contains(&name) {
            Reach::Node
        } else if !BASELINE_CAPABILITIES.contains(&cap.as_str()) {
            Reach::Ungated
        } else {
            continue;
        };
        found.push((reach, format!("securityContext.capabilities.add: {cap}")));
    }
    // Unmasked is the only other value, and it unmasks the host's /proc paths. (Pod Security
    // allows it in a pod with its own user namespace; it is counted here all the same.)
    if let Some(p) = sc
        .proc_mount
        .as_deref()
        .filter(|p| !p.is_empty() && *p != "Default")
    {
        found.push((Reach::Node, format!("securityContext.procMount: {p}")));
    }
    if sc
        .seccomp_profile
        .as_ref()
        .is_some_and(|p| p.type_ == "Unconfined")
    {
        found.push((
            Reach::Node,
            "securityContext.seccompProfile.type: Unconfined".to_owned(),
        ));
    }
    if let Some(p) = sc
        .app_armor_profile
        .as_ref()
        .filter(|p| p.type_ != "RuntimeDefault" && p.type_ != "Localhost")
    {
        found.push((
            Reach::Node,
            format!("securityContext.appArmorProfile.type: {}", p.type_),
        ));
    }
    if sc
        .se_linux_options
        .as_ref()
        .is_some_and(selinux_beyond_baseline)
    {
        found.push((Reach::Node, "securityContext.seLinuxOptions".to_owned()));
    }
    if sc.windows_options.as_ref().and_then(|w| w.host_process) == Some(true) {
        found.push((
            Reach::Node,
            "securityContext.windowsOptions.hostProcess: true".to_owned(),
        ));
    }
    found
}

fn selinux_beyond_baseline(se: &k8s_openapi::api::core::v1::SELinuxOptions) -> bool {
    let ty = se.type_.as_deref().unwrap_or("");
    !BASELINE_SELINUX_TYPES.contains(&ty)
        || se.user.as_deref().is_some_and(|u| !u.is_empty())
        || se.role.as_deref().is_some_and(|r| !r.is_empty())
}

/// The gated profile a reach needs in a debug container of a pod: none for what ungated
/// profiles grant; the host itself is no debug container's own setting.
pub(crate) fn gated_profile(reach: Reach) -> Option<Profile> {
    match reach {
        Reach::NetAdmin => Some(Profile::Netadmin),
        Reach::Node | Reach::Host | Reach::HostFilesystem => Some(Profile::Sysadmin),
        Reach::Ungated => None,
    }
}

/// Every setting of `ec`'s security context that needs a gated profile, in a stable order, at
/// most one per profile (the first found).
pub fn elevations(ec: &EphemeralContainer) -> Vec<Elevation> {
    let Some(sc) = &ec.security_context else {
        return Vec::new();
    };
    let mut found: Vec<Elevation> = Vec::new();
    for (reach, setting) in security_context_privileges(sc) {
        if let Some(profile) = gated_profile(reach)
            && !found.iter().any(|e| e.profile == profile)
        {
            found.push(elevation(profile, setting));
        }
    }
    found
}

/// The parts of a container (regular, init or ephemeral) Pod Security looks at.
pub(crate) struct ContainerView<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its security context.
    pub security_context: Option<&'a SecurityContext>,
    ports: Option<&'a [ContainerPort]>,
    probes: [(&'static str, Option<&'a Probe>); 3],
    lifecycle: Option<&'a Lifecycle>,
}

impl<'a> ContainerView<'a> {
    fn of(c: &'a Container) -> Self {
        ContainerView {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref(),
            probes: [
                ("livenessProbe", c.liveness_probe.as_ref()),
                ("readinessProbe", c.readiness_probe.as_ref()),
                ("startupProbe", c.startup_probe.as_ref()),
            ],
            lifecycle: c.lifecycle.as_ref(),
        }
    }

    fn of_ephemeral(c: &'a EphemeralContainer) -> Self {
        ContainerView {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref(),
            probes: [
                ("livenessProbe", c.liveness_probe.as_ref()),
                ("readinessProbe", c.readiness_probe.as_ref()),
                ("startupProbe", c.startup_probe.as_ref()),
            ],
            lifecycle: c.lifecycle.as_ref(),
        }
    }
}

/// Every container of a pod spec, as Pod Security visits them: init containers, containers,
/// ephemeral containers.
pub(crate) fn containers_of(spec: &k8s_openapi::api::core::v1::PodSpec) -> Vec<ContainerView<'_>> {
    spec.init_containers
        .iter()
        .flatten()
        .map(ContainerView::of)
        .chain(spec.containers.iter().map(ContainerView::of))
        .chain(
            spec.ephemeral_containers
                .iter()
                .flatten()
                .map(ContainerView::of_ephemeral),
        )
        .collect()
}

/// The hosts a container's probes and lifecycle handlers reach, with where each is set.
fn handler_hosts(c: &ContainerView<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let mut visit = |path: String, http: Option<&str>, tcp: Option<&str>| {
        if let Some(h) = http.filter(|h| !h.is_empty()) {
            out.push(format!("{path}.httpGet.host: {h}"));
        }
        if let Some(h) = tcp.filter(|h| !h.is_empty()) {
            out.push(format!("{path}.tcpSocket.host: {h}"));
        }
    };
    for (name, probe) in c.probes {
        if let Some(p) = probe {
            visit(
                name.to_owned(),
                p.http_get.as_ref().and_then(|h| h.host.as_deref()),
                p.tcp_socket.as_ref().and_then(|t| t.host.as_deref()),
            );
        }
    }
    let handlers: [(&str, Option<&LifecycleHandler>); 2] = [
        (
            "lifecycle.postStart",
            c.lifecycle.and_then(|l| l.post_start.as_ref()),
        ),
        (
            "lifecycle.preStop",
            c.lifecycle.and_then(|l| l.pre_stop.as_ref()),
        ),
    ];
    for (name, handler) in handlers {
        if let Some(h) = handler {
            visit(
                name.to_owned(),
                h.http_get.as_ref().and_then(|h| h.host.as_deref()),
                h.tcp_socket.as_ref().and_then(|t| t.host.as_deref()),
            );
        }
    }
    out
}

/// Every setting of `pod` that Pod Security baseline forbids, pod-wide settings first, then
/// each container's (init containers, containers, ephemeral containers), each with what it
/// reaches. Empty: the pod meets baseline.
pub fn pod_privileges(pod: &Pod) -> Vec<Privilege> {
    let mut found = Vec::new();
    let pod_level = |reach: Reach, setting: String| Privilege {
        reach,
        container: None,
        setting,
    };
    for (key, value) in pod.metadata.annotations.iter().flatten() {
        if key.starts_with(APPARMOR_ANNOTATION_PREFIX)
            && !(value.is_empty() || value == "runtime/default" || value.starts_with("localhost/"))
        {
            found.push(pod_level(
                Reach::Node,
                format!("metadata.annotations[{key}]: {value}"),
            ));
        }
    }
    let Some(spec) = &pod.spec else {
        return found;
    };
    for (field, on) in [
        ("hostNetwork", spec.host_network),
        ("hostPID", spec.host_pid),
        ("hostIPC", spec.host_ipc),
    ] {
        if on == Some(true) {
            found.push(pod_level(Reach::Host, format!("spec.{field}: true")));
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(hp) = &v.host_path {
            found.push(pod_level(
                Reach::HostFilesystem,
                format!("spec.volumes[{}].hostPath: {}", v.name, hp.path),
            ));
        }
    }
    if let Some(psc) = &spec.security_context {
        if psc.windows_options.as_ref().and_then(|w| w.host_process) == Some(true) {
            found.push(pod_level(
                Reach::Node,
                "spec.securityContext.windowsOptions.hostProcess: true".to_owned(),
            ));
        }
        if psc
            .se_linux_options
            .as_ref()
            .is_some_and(selinux_beyond_baseline)
        {
            found.push(pod_level(
                Reach::Node,
                "spec.securityContext.seLinuxOptions".to_owned(),
            ));
        }
        if psc
            .seccomp_profile
            .as_ref()
            .is_some_and(|p| p.type_ == "Unconfined")
        {
            found.push(pod_level(
                Reach::Node,
                "spec.securityContext.seccompProfile.type: Unconfined".to_owned(),
            ));
        }
        if let Some(p) = psc
            .app_armor_profile
            .as_ref()
            .filter(|p| p.type_ != "RuntimeDefault" && p.type_ != "Localhost")
        {
            found.push(pod_level(
                Reach::Node,
                format!("spec.securityContext.appArmorProfile.type: {}", p.type_),
            ));
        }
        for s in psc.sysctls.iter().flatten() {
            if !SAFE_SYSCTLS.contains(&s.name.as_str()) {
                found.push(pod_level(
                    Reach::Node,
                    format!("spec.securityContext.sysctls: {}", s.name),
                ));
            }
        }
    }
    for c in containers_of(spec) {
        let mut of_container = |reach: Reach, setting: String| {
            found.push(Privilege {
                reach,
                container: Some(c.name.to_owned()),
                setting,
            });
        };
        for (reach, setting) in c
            .security_context
            .map(security_context_privileges)
            .unwrap_or_default()
        {
            of_container(reach, setting);
        }
        for (i, port) in c.ports.into_iter().flatten().enumerate() {
            if let Some(hp) = port.host_port.filter(|p| *p != 0) {
                of_container(Reach::Host, format!("ports[{i}].hostPort: {hp}"));
            }
        }
        for setting in handler_hosts(&c) {
            of_container(Reach::Host, setting);
        }
    }
    found
}

/// The debug profiles a pod of a namespace (a copy of a pod) amounts to, read from its spec:
/// each setting beyond Pod Security baseline mapped to the profile that grants it, as a debug
/// container's are ([`elevations`]), where the host's namespaces, filesystem and ports, which
/// no debug profile gives a pod, count as `sysadmin` ("full access to the node"), and a
/// capability beyond baseline that no gated profile grants (`SYS_PTRACE`) as `general`. Each
/// profile once, with the first setting found. A pod with none of them is `restricted` when it
/// meets that Pod Security level, else `baseline` (with an empty setting).
pub fn pod_profiles(pod: &Pod) -> Vec<Elevation> {
    let mut out: Vec<Elevation> = Vec::new();
    for p in pod_privileges(pod) {
        let profile = gated_profile(p.reach).unwrap_or(Profile::General);
        if !out.iter().any(|e| e.profile == profile) {
            out.push(elevation(profile, p.to_string()));
        }
    }
    if out.is_empty() {
        let profile = match crate::pod_security::level(pod) {
            crate::pod_security::Level::Restricted => Profile::Restricted,
            _ => Profile::Baseline,
        };
        out.push(elevation(profile, ""));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ec(sc: serde_json::Value) -> EphemeralContainer {
        serde_json::from_value(json!({"name": "dbg", "image": "busybox", "securityContext": sc}))
            .unwrap()
    }

    fn profiles(sc: serde_json::Value) -> Vec<(Profile, String)> {
        elevations(&ec(sc))
            .into_iter()
            .map(|e| (e.profile, e.setting))
            .collect()
    }

    #[test]
    fn ungated_settings_need_nothing() {
        assert!(profiles(json!({})).is_empty());
        assert!(profiles(json!({"capabilities": {"add": ["SYS_PTRACE", "CHOWN"], "drop": ["ALL"]}, "runAsUser": 0})).is_empty());
        assert!(profiles(json!({"seccompProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"type": "container_t"}})).is_empty());
        assert!(elevations(&EphemeralContainer::default()).is_empty());
    }

    #[test]
    fn privileges_map_to_the_profile_that_grants_them() {
        assert_eq!(
            profiles(json!({"privileged": true})),
            [(
                Profile::Sysadmin,
                "securityContext.privileged: true".to_owned()
            )]
        );
        assert_eq!(
            profiles(json!({"capabilities": {"add": ["NET_ADMIN"]}})),
            [(
                Profile::Netadmin,
                "securityContext.capabilities.add: NET_ADMIN".to_owned()
            )]
        );
        assert_eq!(
            profiles(json!({"capabilities": {"add": ["cap_sys_admin"]}})),
            [(
                Profile::Sysadmin,
                "securityContext.capabilities.add: cap_sys_admin".to_owned()
            )]
        );
        assert_eq!(
            profiles(json!({"capabilities": {"add": ["ALL"]}}))[0].0,
            Profile::Sysadmin
        );
        assert_eq!(
            profiles(json!({"procMount": "Unmasked"}))[0].0,
            Profile::Sysadmin
        );
        assert_eq!(
            profiles(json!({"seccompProfile": {"type": "Unconfined"}}))[0].0,
            Profile::Sysadmin
        );
        assert_eq!(
            profiles(json!({"appArmorProfile": {"type": "Unconfined"}}))[0].0,
            Profile::Sysadmin
        );
        assert_eq!(
            profiles(json!({"seLinuxOptions": {"type": "spc_t"}}))[0].0,
            Profile::Sysadmin
        );
        assert_eq!(
            profiles(json!({"windowsOptions": {"hostProcess": true}}))[0].0,
            Profile::Sysadmin
        );
        // One entry per profile, the first reason kept.
        let both = profiles(
            json!({"privileged": true, "capabilities": {"add": ["NET_RAW", "SYS_ADMIN", "NET_ADMIN"]}}),
        );
        assert_eq!(
            both.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            [Profile::Sysadmin, Profile::Netadmin]
        );
    }

    #[test]
    fn capabilities_spelled_otherwise_are_ungated_but_beyond_baseline() {
        // The runtime reads `chown` as CHOWN: no gated profile; Pod Security compares the
        // string, and refuses it.
        assert!(profiles(json!({"capabilities": {"add": ["chown", "SYS_PTRACE"]}})).is_empty());
        let sc = serde_json::from_value(
            json!({"capabilities": {"add": ["chown", "SYS_PTRACE", "CHOWN"]}}),
        )
        .unwrap();
        let found = security_context_privileges(&sc);
        assert_eq!(
            found,
            [
                (
                    Reach::Ungated,
                    "securityContext.capabilities.add: chown".to_owned()
                ),
                (
                    Reach::Ungated,
                    "securityContext.capabilities.add: SYS_PTRACE".to_owned()
                ),
            ]
        );
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn reaches(p: &Pod) -> Vec<(Reach, Option<String>, String)> {
        pod_privileges(p)
            .into_iter()
            .map(|p| (p.reach, p.container, p.setting))
            .collect()
    }

    #[test]
    fn every_baseline_check_of_a_pod_is_found_with_what_it_reaches() {
        let p = pod(json!({
            "metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
                "container.apparmor.security.beta.kubernetes.io/d": "localhost/x"}},
            "spec": {
                "hostNetwork": true, "hostPID": false, "hostIPC": true,
                "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}],
                "securityContext": {
                    "sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "1"},
                                {"name": "net.ipv4.ip_forward", "value": "1"}],
                    "seccompProfile": {"type": "Unconfined"},
                    "seLinuxOptions": {"type": "container_t"}},
                "initContainers": [{"name": "i", "securityContext": {"capabilities": {"add": ["NET_RAW"]}}}],
                "containers": [{"name": "c",
                    "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 8081}],
                    "readinessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}},
                    "lifecycle": {"preStop": {"tcpSocket": {"host": "10.0.0.1", "port": 1}},
                                  "postStart": {"httpGet": {"host": "", "port": 1}}},
                    "securityContext": {"privileged": true, "procMount": "Default"}}],
                "ephemeralContainers": [{"name": "e", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]
            }
        }));
        let c = |n: &str| Some(n.to_owned());
        assert_eq!(
            reaches(&p),
            [
                (Reach::Node, None, "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: unconfined".to_owned()),
                (Reach::Host, None, "spec.hostNetwork: true".to_owned()),
                (Reach::Host, None, "spec.hostIPC: true".to_owned()),
                (Reach::HostFilesystem, None, "spec.volumes[root].hostPath: /".to_owned()),
                (Reach::Node, None, "spec.securityContext.seccompProfile.type: Unconfined".to_owned()),
                (Reach::Node, None, "spec.securityContext.sysctls: net.ipv4.ip_forward".to_owned()),
                (Reach::NetAdmin, c("i"), "securityContext.capabilities.add: NET_RAW".to_owned()),
                (Reach::Node, c("c"), "securityContext.privileged: true".to_owned()),
                (Reach::Host, c("c"), "ports[1].hostPort: 8081".to_owned()),
                (Reach::Host, c("c"), "readinessProbe.httpGet.host: 169.254.169.254".to_owned()),
                (Reach::Host, c("c"), "lifecycle.preStop.tcpSocket.host: 10.0.0.1".to_owned()),
                (Reach::Node, c("e"), "securityContext.appArmorProfile.type: Unconfined".to_owned()),
            ]
        );
        assert_eq!(
            pod_privileges(&p)[7].to_string(),
            "securityContext.privileged: true (container \"c\")"
        );
        assert!(pod_privileges(&pod(json!({"spec": {"containers": [{"name": "c"}]}}))).is_empty());
        assert!(pod_privileges(&Pod::default()).is_empty());
    }

    #[test]
    fn a_pods_profiles_come_from_its_spec() {
        let names =
            |p: &Pod| -> Vec<Profile> { pod_profiles(p).iter().map(|e| e.profile).collect() };
        let plain = pod(json!({"spec": {"containers": [{"name": "app"}]}}));
        assert_eq!(names(&plain), [Profile::Baseline]);
        assert_eq!(pod_profiles(&plain)[0].setting, "");
        let general = pod(json!({"spec": {"containers": [{"name": "app"},
            {"name": "dbg", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}]}}));
        assert_eq!(names(&general), [Profile::General]);
        let host = pod(json!({"spec": {"hostNetwork": true, "containers": [
            {"name": "app", "securityContext": {"capabilities": {"add": ["NET_ADMIN", "SYS_PTRACE"]}}}]}}));
        assert_eq!(
            pod_profiles(&host),
            [
                elevation(Profile::Sysadmin, "spec.hostNetwork: true"),
                elevation(
                    Profile::Netadmin,
                    "securityContext.capabilities.add: NET_ADMIN (container \"app\")"
                ),
                elevation(
                    Profile::General,
                    "securityContext.capabilities.add: SYS_PTRACE (container \"app\")"
                ),
            ]
        );
        let restricted = pod(
            json!({"spec": {"containers": [{"name": "app", "securityContext": {
            "runAsNonRoot": true, "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}]}}),
        );
        assert_eq!(names(&restricted), [Profile::Restricted]);
    }

    #[test]
    fn the_gated_profiles_themselves_are_elevations() {
        for (profile, want) in [
            (Profile::Sysadmin, Profile::Sysadmin),
            (Profile::Netadmin, Profile::Netadmin),
        ] {
            let mut e = EphemeralContainer::default();
            profile.apply(&mut e);
            assert_eq!(elevations(&e)[0].profile, want);
        }
        for profile in [
            Profile::Legacy,
            Profile::General,
            Profile::Baseline,
            Profile::Restricted,
        ] {
            let mut e = EphemeralContainer::default();
            profile.apply(&mut e);
            assert!(elevations(&e).is_empty(), "{profile}");
        }
    }
}
