//! The immutable configuration the server runs with, built once from validated [`Options`].

use std::net::SocketAddr;
use std::time::Duration;

use poddebug_types::Profile;

use crate::options::{LogFormat, Options};
use crate::serving::listener::ConnectionLimits;

/// Time a TLS handshake may take before the connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Limits on connections (timeouts, cap).
    pub connections: ConnectionLimits,
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
            connections: ConnectionLimits {
                max_header_bytes: o.max_request_header_bytes,
                tls_handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
                read_header_timeout: o.read_header_timeout,
                idle_timeout: o.idle_connection_timeout,
                max_connections: o.max_connections,
            },
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
