//! Which gated debug profiles a debug container's final `securityContext` amounts to.
//!
//! The `use` permission on `debugprofiles/sysadmin` and `debugprofiles/netadmin` would mean
//! nothing if a request could name an ungated profile (`legacy`, `general`) and ask for the same
//! privileges in `container.securityContext` directly. So after the profile is applied, every
//! setting beyond what the ungated profiles and Pod Security's baseline allow is mapped to the
//! gated profile that grants it, and the caller needs that profile's permission too.

use k8s_openapi::api::core::v1::EphemeralContainer;

use crate::Profile;

/// Capabilities any debug container may add: Pod Security baseline's allowed list plus the
/// `general` profile's `SYS_PTRACE`.
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

/// Every setting of `ec`'s security context that needs a gated profile, in a stable order, at
/// most one per profile (the first found).
pub fn elevations(ec: &EphemeralContainer) -> Vec<Elevation> {
    let mut found: Vec<Elevation> = Vec::new();
    let Some(sc) = &ec.security_context else {
        return found;
    };
    if sc.privileged == Some(true) {
        found.push(elevation(
            Profile::Sysadmin,
            "securityContext.privileged: true",
        ));
    }
    for cap in sc
        .capabilities
        .as_ref()
        .and_then(|c| c.add.as_ref())
        .into_iter()
        .flatten()
    {
        let name = cap.trim().to_ascii_uppercase();
        let name = name.strip_prefix("CAP_").unwrap_or(&name).to_owned();
        if NETADMIN_CAPABILITIES.contains(&name.as_str()) {
            found.push(elevation(
                Profile::Netadmin,
                format!("securityContext.capabilities.add: {cap}"),
            ));
        } else if !UNGATED_CAPABILITIES.contains(&name.as_str()) {
            found.push(elevation(
                Profile::Sysadmin,
                format!("securityContext.capabilities.add: {cap}"),
            ));
        }
    }
    if sc.proc_mount.as_deref() == Some("Unmasked") {
        found.push(elevation(
            Profile::Sysadmin,
            "securityContext.procMount: Unmasked",
        ));
    }
    if sc
        .seccomp_profile
        .as_ref()
        .is_some_and(|p| p.type_ == "Unconfined")
    {
        found.push(elevation(
            Profile::Sysadmin,
            "securityContext.seccompProfile.type: Unconfined",
        ));
    }
    if sc
        .app_armor_profile
        .as_ref()
        .is_some_and(|p| p.type_ == "Unconfined")
    {
        found.push(elevation(
            Profile::Sysadmin,
            "securityContext.appArmorProfile.type: Unconfined",
        ));
    }
    if let Some(se) = &sc.se_linux_options {
        let ty = se.type_.as_deref().unwrap_or("");
        if !BASELINE_SELINUX_TYPES.contains(&ty)
            || se.user.as_deref().is_some_and(|u| !u.is_empty())
            || se.role.as_deref().is_some_and(|r| !r.is_empty())
        {
            found.push(elevation(
                Profile::Sysadmin,
                "securityContext.seLinuxOptions",
            ));
        }
    }
    if sc.windows_options.as_ref().and_then(|w| w.host_process) == Some(true) {
        found.push(elevation(
            Profile::Sysadmin,
            "securityContext.windowsOptions.hostProcess: true",
        ));
    }
    let mut seen = Vec::new();
    found.retain(|e| {
        let first = !seen.contains(&e.profile);
        seen.push(e.profile);
        first
    });
    found
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
