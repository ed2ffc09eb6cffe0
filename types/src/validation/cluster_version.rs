//! The Kubernetes version of the cluster, and the ephemeral-container rules that depend on it.
//!
//! kube-apiserver first decodes a request (a field its version does not know is dropped, with
//! a warning), then drops the fields of disabled feature gates (`dropDisabledFields` of k/k
//! `pkg/api/pod/util.go`), then validates. The local validator does the same for the version
//! discovered at startup, assuming each gate at its default for that version. Gates changed
//! from their defaults, admission webhooks and Pod Security admission are only known to the
//! cluster, which the create path asks with a dry run whenever the local validator refuses.
//!
//! | rule | versions | effect before validation |
//! |---|---|---|
//! | `lifecycle.stopSignal` (field added in 1.33, gate `ContainerStopSignals`, alpha, off) | < 1.33 | the field is unknown and dropped; the `lifecycle: {}` left over is still set, so `lifecycle` is Forbidden |
//! | | ≥ 1.33 | the gate is off: the field is dropped, and a lifecycle left empty is dropped too, so it is accepted |
//! | `restartPolicyRules` (field added in 1.34) | < 1.34 | unknown and dropped: accepted |
//! | | ≥ 1.34 | known: Forbidden (not in the ephemeral allow list) |

use k8s_openapi::api::core::v1::{EphemeralContainer, Lifecycle};

/// `major.minor` of a kube-apiserver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl KubeVersion {
    /// The newest version whose rules this validator was written against; the rules of an
    /// unknown (or newer) cluster are taken to be these.
    pub const NEWEST_KNOWN: KubeVersion = KubeVersion {
        major: 1,
        minor: 36,
    };

    /// `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        KubeVersion { major, minor }
    }

    /// The version from `/version`'s `major`, `minor` and `gitVersion`. Providers decorate the
    /// minor (`"30+"` on GKE and EKS), so only its leading digits count; when the fields are
    /// unusable, `gitVersion` (`v1.30.2-eks-1234`) is read instead.
    pub fn from_version_info(major: &str, minor: &str, git_version: &str) -> Option<Self> {
        let digits = |s: &str| -> Option<u32> {
            let d: String = s.chars().take_while(char::is_ascii_digit).collect();
            d.parse().ok()
        };
        if let (Some(major), Some(minor)) = (digits(major), digits(minor)) {
            return Some(KubeVersion { major, minor });
        }
        let mut parts = git_version.trim_start_matches('v').split('.');
        let major = digits(parts.next()?)?;
        let minor = digits(parts.next()?)?;
        Some(KubeVersion { major, minor })
    }
}

impl std::fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What kube-apiserver `version` does to a new ephemeral container between decoding and
/// validation (the table in the module documentation).
pub fn apply_version_rules(ec: &mut EphemeralContainer, version: KubeVersion) {
    if let Some(lc) = ec.lifecycle.as_mut()
        && lc.stop_signal.take().is_some()
        && version >= KubeVersion::new(1, 33)
        && *lc == Lifecycle::default()
    {
        ec.lifecycle = None;
    }
    if version < KubeVersion::new(1, 34) {
        ec.restart_policy_rules = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_like_providers_print_them() {
        let v = |a, b, c| KubeVersion::from_version_info(a, b, c);
        assert_eq!(v("1", "36", "v1.36.2"), Some(KubeVersion::new(1, 36)));
        assert_eq!(
            v("1", "30+", "v1.30.4-gke.1"),
            Some(KubeVersion::new(1, 30))
        );
        assert_eq!(v("", "", "v1.31.0-eks-abc"), Some(KubeVersion::new(1, 31)));
        assert_eq!(v("", "", "nonsense"), None);
        assert!(KubeVersion::new(1, 9) < KubeVersion::new(1, 30));
        assert_eq!(KubeVersion::new(1, 33).to_string(), "1.33");
    }

    fn with_stop_signal(post_start: bool) -> EphemeralContainer {
        serde_json::from_value(serde_json::json!({
            "name": "d",
            "lifecycle": if post_start {
                serde_json::json!({"stopSignal": "SIGUSR1", "postStart": {"exec": {"command": ["true"]}}})
            } else {
                serde_json::json!({"stopSignal": "SIGUSR1"})
            },
            "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
        }))
        .unwrap()
    }

    #[test]
    fn stop_signal_alone_is_dropped_with_its_lifecycle_from_1_33() {
        let mut ec = with_stop_signal(false);
        apply_version_rules(&mut ec, KubeVersion::new(1, 36));
        assert_eq!(ec.lifecycle, None);
        assert!(ec.restart_policy_rules.is_some(), "known since 1.34");

        let mut ec = with_stop_signal(true);
        apply_version_rules(&mut ec, KubeVersion::new(1, 33));
        let lc = ec.lifecycle.expect("postStart keeps it");
        assert_eq!(lc.stop_signal, None);
        assert!(lc.post_start.is_some());
    }

    #[test]
    fn before_1_33_an_empty_lifecycle_is_left() {
        let mut ec = with_stop_signal(false);
        apply_version_rules(&mut ec, KubeVersion::new(1, 32));
        assert_eq!(ec.lifecycle, Some(Lifecycle::default()));
        assert_eq!(ec.restart_policy_rules, None, "unknown before 1.34");
    }

    #[test]
    fn the_validator_applies_the_versions_rules() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]}
        }))
        .unwrap();
        let ec: EphemeralContainer = serde_json::from_value(serde_json::json!({
            "name": "dbg", "image": "busybox:1.36", "lifecycle": {"stopSignal": "SIGUSR1"}
        }))
        .unwrap();
        let on = |minor| {
            crate::validation::validate_ephemeral_container_add_on(
                &pod,
                &ec,
                KubeVersion::new(1, minor),
            )
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
        };
        assert!(on(36).is_empty(), "{:?}", on(36));
        assert!(on(33).is_empty());
        assert_eq!(
            on(32),
            [
                "spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container"
            ]
        );
    }
}
