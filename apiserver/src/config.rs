//! The immutable configuration the server runs with, built once from validated [`Options`].

use std::net::SocketAddr;
use std::time::Duration;

use poddebug_types::Profile;

use crate::options::{LogFormat, Options};

/// Does `image` match one of `patterns` (`*` matches any run of characters)? An empty list
/// allows everything.
pub fn image_allowed(patterns: &[String], image: &str) -> bool {
    patterns.is_empty()
        || patterns
            .iter()
            .any(|p| poddebug_storage::glob_match(p.trim(), image))
}

/// Everything the server needs to know, fixed at startup.
#[derive(Clone, Debug)]
pub struct Config {
    /// The listen address.
    pub listen: SocketAddr,
    /// Paths authorized without a SubjectAccessReview.
    pub always_allow_paths: Vec<String>,
    /// Max non-long-running requests in flight (0 = unlimited).
    pub max_requests_inflight: usize,
    /// Timeout of non-long-running requests.
    pub request_timeout: Duration,
    /// Largest accepted body.
    pub max_request_body_bytes: usize,
    /// Largest accepted header block.
    pub max_request_header_bytes: usize,
    /// Grace period on SIGTERM.
    pub shutdown_grace_period: Duration,
    /// Time to keep serving after SIGTERM before closing the listener.
    pub shutdown_delay: Duration,
    /// Profiles that require the `use` permission.
    pub profiles_requiring_permission: Vec<Profile>,
    /// Default profile.
    pub default_profile: Profile,
    /// How long attach waits for a container to run.
    pub attach_wait_timeout: Duration,
    /// Log format.
    pub log_format: LogFormat,
    /// Also require the core permissions the same action takes without poddebug.
    pub require_core_permissions: bool,
}

impl Config {
    /// Freeze validated options.
    pub fn from_options(o: &Options) -> Self {
        Config {
            listen: SocketAddr::new(o.bind_address, o.secure_port),
            always_allow_paths: o.authorization_always_allow_paths.clone(),
            max_requests_inflight: o.max_requests_inflight,
            request_timeout: o.request_timeout,
            max_request_body_bytes: o.max_request_body_bytes,
            max_request_header_bytes: o.max_request_header_bytes,
            shutdown_grace_period: o.shutdown_grace_period,
            shutdown_delay: o.shutdown_delay_duration,
            profiles_requiring_permission: o.profiles_requiring_permission.clone(),
            default_profile: o.default_profile,
            attach_wait_timeout: o.attach_wait_timeout,
            log_format: o.log_format,
            require_core_permissions: o.require_core_permissions,
        }
    }

    /// Whether using `p` needs the `use` permission on `debugprofiles/<p>`.
    pub fn profile_requires_permission(&self, p: Profile) -> bool {
        self.profiles_requiring_permission.contains(&p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_patterns_glob() {
        let pats = vec![
            "docker.io/library/busybox:*".to_owned(),
            "registry.example/*/debug@*".to_owned(),
        ];
        assert!(image_allowed(&pats, "docker.io/library/busybox:1.36"));
        assert!(!image_allowed(&pats, "docker.io/library/alpine:3"));
        assert!(image_allowed(
            &pats,
            "registry.example/team/debug@sha256:abc"
        ));
        assert!(!image_allowed(
            &pats,
            "registry.example/team/app@sha256:abc"
        ));
        assert!(image_allowed(&[], "anything"));
        assert!(image_allowed(&["exact:1".to_owned()], "exact:1"));
        assert!(!image_allowed(&["exact:1".to_owned()], "exact:12"));
        assert!(image_allowed(&["*".to_owned()], "x"));
    }
}
