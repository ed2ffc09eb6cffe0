//! Debug profiles: what `kubectl debug --profile` does to an ephemeral container
//! (kubectl `pkg/cmd/debug/profiles.go`, the "ephemeral" branch of each profile).
//!
//! kubectl applies the profile to the container it generated and only then merges the user's
//! `--custom` container into it. poddebug has no separate custom step: the request's
//! `container` *is* the user's container, and the profile is applied to it. So `baseline` and
//! `restricted` replace a `securityContext` the user sent, exactly as they replace the one
//! kubectl generated, while `general`, `netadmin` and `sysadmin` merge into it.

use k8s_openapi::api::core::v1::{
    Capabilities, EphemeralContainer, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::API_VERSION;
use crate::api::{DebugProfile, KIND_DEBUG_PROFILE};

/// A debug profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Profile {
    /// Changes nothing (kubectl's historical behaviour, deprecated there).
    Legacy,
    /// Adds the `SYS_PTRACE` capability. kubectl's default.
    #[default]
    General,
    /// Removes the `securityContext`, so the container runs as the image says.
    Baseline,
    /// Meets the `restricted` Pod Security Standard.
    Restricted,
    /// Adds `NET_ADMIN` and `NET_RAW`.
    Netadmin,
    /// Runs the container privileged.
    Sysadmin,
}

impl Profile {
    /// Every profile, in kubectl's order.
    pub const ALL: [Profile; 6] = [
        Profile::Legacy,
        Profile::General,
        Profile::Baseline,
        Profile::Restricted,
        Profile::Netadmin,
        Profile::Sysadmin,
    ];

    /// The profile with this name (`legacy`, `general`, ...). Names are case-sensitive, as in
    /// kubectl.
    pub fn parse(s: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The profile's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Legacy => "legacy",
            Profile::General => "general",
            Profile::Baseline => "baseline",
            Profile::Restricted => "restricted",
            Profile::Netadmin => "netadmin",
            Profile::Sysadmin => "sysadmin",
        }
    }

    /// The names of all profiles, for `Unsupported value` errors and help texts.
    pub fn names() -> Vec<&'static str> {
        Profile::ALL.iter().map(|p| p.as_str()).collect()
    }

    /// What the profile does to a debug container, in one sentence.
    pub fn description(self) -> &'static str {
        match self {
            Profile::Legacy => {
                "Leaves the container as given. Kept for compatibility with kubectl's former default."
            }
            Profile::General => {
                "Adds the SYS_PTRACE capability so that debuggers can trace the target's processes."
            }
            Profile::Baseline => {
                "Removes the container's securityContext, which meets the baseline Pod Security Standard."
            }
            Profile::Restricted => {
                "Runs as non-root without privilege escalation, with all capabilities dropped and the \
                 RuntimeDefault seccomp profile, which meets the restricted Pod Security Standard."
            }
            Profile::Netadmin => {
                "Adds the NET_ADMIN and NET_RAW capabilities for network troubleshooting."
            }
            Profile::Sysadmin => "Runs the container privileged, with full access to the node.",
        }
    }

    /// The `securityContext` fields the profile sets, one entry each, in words.
    pub fn sets(self) -> Vec<String> {
        let v: &[&str] = match self {
            Profile::Legacy => &[],
            Profile::General => &["securityContext.capabilities.add: SYS_PTRACE"],
            Profile::Baseline => &["securityContext: removed"],
            Profile::Restricted => &[
                "securityContext: replaced",
                "securityContext.runAsNonRoot: true",
                "securityContext.capabilities.drop: ALL",
                "securityContext.capabilities.add: none",
                "securityContext.allowPrivilegeEscalation: false",
                "securityContext.seccompProfile.type: RuntimeDefault",
            ],
            Profile::Netadmin => &["securityContext.capabilities.add: NET_ADMIN, NET_RAW"],
            Profile::Sysadmin => &["securityContext.privileged: true"],
        };
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Whether using the profile needs the `use` verb on `debugprofiles/NAME` unless the server
    /// is told otherwise: the two profiles that give the container power over the node's
    /// network or the node itself.
    pub fn requires_use_permission(self) -> bool {
        matches!(self, Profile::Netadmin | Profile::Sysadmin)
    }

    /// The `DebugProfile` object describing this profile.
    pub fn to_debug_profile(self, is_default: bool, requires_use_permission: bool) -> DebugProfile {
        DebugProfile {
            api_version: API_VERSION.to_owned(),
            kind: KIND_DEBUG_PROFILE.to_owned(),
            metadata: ObjectMeta {
                name: Some(self.as_str().to_owned()),
                ..Default::default()
            },
            description: self.description().to_owned(),
            sets: self.sets(),
            requires_use_permission,
            default: is_default,
            approvals_required: None,
            max_request_duration: None,
        }
    }

    /// Apply the profile to an ephemeral container, as kubectl does for `debug` without
    /// `--copy-to`.
    pub fn apply(self, ec: &mut EphemeralContainer) {
        match self {
            Profile::Legacy => {}
            Profile::General => add_capability(ec, "SYS_PTRACE"),
            Profile::Baseline => ec.security_context = None,
            Profile::Restricted => {
                // kubectl: clearSecurityContext, disallowRoot, dropCapabilities,
                // disallowPrivilegeEscalation, setSeccompProfile, in that order.
                ec.security_context = Some(SecurityContext {
                    run_as_non_root: Some(true),
                    capabilities: Some(Capabilities {
                        add: None,
                        drop: Some(vec!["ALL".to_owned()]),
                    }),
                    allow_privilege_escalation: Some(false),
                    seccomp_profile: Some(SeccompProfile {
                        type_: "RuntimeDefault".to_owned(),
                        localhost_profile: None,
                    }),
                    ..Default::default()
                });
            }
            Profile::Netadmin => {
                add_capability(ec, "NET_ADMIN");
                add_capability(ec, "NET_RAW");
            }
            Profile::Sysadmin => {
                ec.security_context
                    .get_or_insert_with(Default::default)
                    .privileged = Some(true);
            }
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// kubectl's `addCapability`, except that a capability already present is not added twice
/// (kubectl appends blindly; a duplicate is harmless to the runtime but confusing to read).
fn add_capability(ec: &mut EphemeralContainer, capability: &str) {
    let sc = ec.security_context.get_or_insert_with(Default::default);
    let caps = sc.capabilities.get_or_insert_with(Default::default);
    let add = caps.add.get_or_insert_with(Vec::new);
    if !add.iter().any(|c| c == capability) {
        add.push(capability.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ec(sc: serde_json::Value) -> EphemeralContainer {
        let mut v = json!({"name": "dbg", "image": "busybox"});
        if !sc.is_null() {
            v["securityContext"] = sc;
        }
        serde_json::from_value(v).unwrap()
    }

    fn sc_of(e: &EphemeralContainer) -> serde_json::Value {
        serde_json::to_value(&e.security_context).unwrap()
    }

    #[test]
    fn names_round_trip() {
        for p in Profile::ALL {
            assert_eq!(Profile::parse(p.as_str()), Some(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(Profile::parse("General"), None);
        assert_eq!(Profile::parse(""), None);
        assert_eq!(
            Profile::names(),
            vec![
                "legacy",
                "general",
                "baseline",
                "restricted",
                "netadmin",
                "sysadmin"
            ]
        );
        assert_eq!(Profile::default(), Profile::General);
    }

    #[test]
    fn use_permission_defaults() {
        let needing: Vec<Profile> = Profile::ALL
            .into_iter()
            .filter(|p| p.requires_use_permission())
            .collect();
        assert_eq!(needing, vec![Profile::Netadmin, Profile::Sysadmin]);
    }

    #[test]
    fn descriptions_and_sets_are_filled() {
        for p in Profile::ALL {
            assert!(!p.description().is_empty());
            let dp = p.to_debug_profile(p == Profile::General, p.requires_use_permission());
            assert_eq!(dp.metadata.name.as_deref(), Some(p.as_str()));
            assert_eq!(dp.kind, "DebugProfile");
            assert_eq!(dp.api_version, "poddebug.dev/v1alpha1");
            assert_eq!(dp.sets, p.sets());
        }
        assert!(Profile::Legacy.sets().is_empty());
        assert_eq!(
            Profile::Netadmin.sets(),
            vec!["securityContext.capabilities.add: NET_ADMIN, NET_RAW"]
        );
    }

    #[test]
    fn apply_table() {
        let user_sc = json!({"runAsUser": 1000, "capabilities": {"add": ["SYS_PTRACE", "CHOWN"], "drop": ["KILL"]}});
        let cases: Vec<(Profile, serde_json::Value, serde_json::Value)> = vec![
            (Profile::Legacy, json!(null), json!(null)),
            (Profile::Legacy, user_sc.clone(), user_sc.clone()),
            (
                Profile::General,
                json!(null),
                json!({"capabilities": {"add": ["SYS_PTRACE"]}}),
            ),
            (
                Profile::General,
                user_sc.clone(),
                json!({"runAsUser": 1000, "capabilities": {"add": ["SYS_PTRACE", "CHOWN"], "drop": ["KILL"]}}),
            ),
            (
                Profile::General,
                json!({"readOnlyRootFilesystem": true}),
                json!({"readOnlyRootFilesystem": true, "capabilities": {"add": ["SYS_PTRACE"]}}),
            ),
            (Profile::Baseline, user_sc.clone(), json!(null)),
            (Profile::Baseline, json!(null), json!(null)),
            (
                Profile::Restricted,
                json!({"privileged": true, "runAsUser": 0, "capabilities": {"add": ["SYS_ADMIN"]}}),
                json!({
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                    "runAsNonRoot": true,
                    "seccompProfile": {"type": "RuntimeDefault"}
                }),
            ),
            (
                Profile::Netadmin,
                json!(null),
                json!({"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}),
            ),
            (
                Profile::Netadmin,
                json!({"runAsUser": 0, "capabilities": {"add": ["NET_RAW"]}}),
                json!({"runAsUser": 0, "capabilities": {"add": ["NET_RAW", "NET_ADMIN"]}}),
            ),
            (Profile::Sysadmin, json!(null), json!({"privileged": true})),
            (
                Profile::Sysadmin,
                json!({"privileged": false, "runAsUser": 0}),
                json!({"privileged": true, "runAsUser": 0}),
            ),
        ];
        for (profile, before, after) in cases {
            let mut e = ec(before.clone());
            profile.apply(&mut e);
            assert_eq!(sc_of(&e), after, "{profile} applied to {before}");
            // Applying twice changes nothing more (no duplicated capabilities).
            profile.apply(&mut e);
            assert_eq!(sc_of(&e), after, "{profile} applied twice to {before}");
            assert_eq!(e.name, "dbg");
            assert_eq!(e.image.as_deref(), Some("busybox"));
        }
    }
}
