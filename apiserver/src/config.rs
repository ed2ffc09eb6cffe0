//! The immutable configuration the server runs with, built once from validated [`Options`]:
//! the middle step of Options → Config → Run. Nothing after this step reads a flag.

use std::net::SocketAddr;
use std::time::Duration;

use poddebug_types::Profile;

use std::path::PathBuf;

use crate::authn::config::FlagSettings;
use crate::error::StartupError;
use crate::options::{LogFormat, Options};
use crate::serving::listener::ConnectionLimits;
use crate::serving::tls::CertFiles;

/// Time a TLS handshake may take before the connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum ServingCert {
    /// `--tls-cert-file` and `--tls-private-key-file`.
    Files(CertFiles),
    /// A self-signed pair kept in `--cert-dir`, valid for the Service's names.
    SelfSigned {
        /// `--cert-dir`.
        dir: PathBuf,
        /// `--service-name`.
        service: String,
        /// `--service-namespace`.
        namespace: String,
    },
    /// Signed by the CA kept in a Secret (`--serving-ca-secret`), written to `--cert-dir`.
    ClusterCa {
        /// `--serving-ca-secret`.
        secret: String,
        /// `--cert-dir`.
        dir: PathBuf,
        /// `--service-name`.
        service: String,
        /// `--service-namespace`.
        namespace: String,
    },
}

/// How the server reaches and trusts the cluster.
#[derive(Clone, Debug)]
pub struct ClusterAccess {
    /// `--kubeconfig` (in-cluster or the usual discovery when absent).
    pub kubeconfig: Option<PathBuf>,
    /// `--authentication-kubeconfig`, else `kubeconfig`.
    pub authentication_kubeconfig: Option<PathBuf>,
    /// `--authorization-kubeconfig`, else `kubeconfig`.
    pub authorization_kubeconfig: Option<PathBuf>,
}

/// Delegated authentication and authorization settings.
#[derive(Clone, Debug)]
pub struct Delegation {
    /// The authentication flags (CAs, request-header settings).
    pub authn_flags: FlagSettings,
    /// Look the missing authentication configuration up in the cluster.
    pub authn_lookup: bool,
    /// Start even when that lookup fails.
    pub authn_tolerate_lookup_failure: bool,
    /// TokenReview cache TTL.
    pub token_cache_ttl: Duration,
    /// SubjectAccessReview cache TTL of allows.
    pub authz_allowed_ttl: Duration,
    /// SubjectAccessReview cache TTL of denials.
    pub authz_denied_ttl: Duration,
}

/// Everything the server needs to know, fixed at startup.
#[derive(Clone, Debug)]
pub struct Config {
    /// The serving certificate.
    pub serving_cert: ServingCert,
    /// How often certificate, key and CA files are checked for changes.
    pub reload_interval: Duration,
    /// Cluster access.
    pub cluster: ClusterAccess,
    /// Delegated authentication and authorization.
    pub delegation: Delegation,
    /// The storage policy and behaviour.
    pub policy: poddebug_storage::Policy,
    /// Make pod calls as the requesting user.
    pub impersonate: bool,
    /// The listen address.
    pub listen: SocketAddr,
    /// Paths authorized without a SubjectAccessReview.
    pub always_allow_paths: Vec<String>,
    /// Which browser contexts may act on the API (`--allowed-origins`).
    pub cross_site: crate::cross_site::Policy,
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
    /// `--stream-idle-timeout` (None: never).
    pub stream_idle_timeout: Option<Duration>,
    /// Log format.
    pub log_format: LogFormat,
    /// Also require the core permissions the same action takes without poddebug.
    pub require_core_permissions: bool,
    /// Time limits of debug containers (`--default-debug-ttl`, `--max-debug-ttl`).
    pub ttl: poddebug_storage::TtlPolicy,
    /// The expiry loop and the leader election that picks the replica running it.
    pub expiry: Expiry,
    /// Namespace of node debug pods (`--node-debug-namespace`).
    pub node_debug_namespace: String,
    /// Session recording (`--recording-dir` and the flags beside it).
    pub recording: poddebug_recording::RecordingOptions,
    /// Profiles whose sessions are moderated (`--moderated-profiles`).
    pub moderated_profiles: Vec<Profile>,
    /// The shells a container under a moderated profile may run (`--moderated-shells`).
    pub moderated_shells: Vec<String>,
    /// `--break-glass-groups`: who the admission webhook lets connect around poddebug.
    pub break_glass_groups: Vec<String>,
    /// How long a session's record holds without renewal (`--session-lease-duration`).
    pub session_lease_duration: Duration,
    /// The namespace the session records live in (the server's own).
    pub session_namespace: String,
    /// Just-in-time access (`--approval-profiles` and the flags beside it).
    pub requests: crate::requests::RequestPolicy,
    /// The most sessions one user may hold at once (`--max-sessions-per-user`; 0: no limit).
    pub max_sessions_per_user: usize,
    /// `--audit-stdout`.
    pub audit_stdout: bool,
    /// `--audit-webhook`.
    pub audit_webhook: Option<url::Url>,
}

/// The expiry loop's settings (`--debug-ttl-check-interval`, `--leader-elect*`,
/// `--unstoppable-*`).
#[derive(Debug, Clone)]
pub struct Expiry {
    /// How often the loop looks for debug containers whose time limit passed.
    pub check_interval: Duration,
    /// How long past its stop's grace period a debug container may run before it is reported
    /// unstoppable (`--unstoppable-after`).
    pub unstoppable_after: Duration,
    /// What is done to the pods of unstoppable debug containers (`--unstoppable-action`).
    pub unstoppable_action: poddebug_storage::UnstoppableAction,
    /// Leader election on a Lease; `None` (`--leader-elect=false`) = every replica runs it.
    pub leader_election: Option<LeaderElection>,
}

/// Where and how the replicas elect the one running the expiry loop.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Name of the Lease.
    pub name: String,
    /// Namespace of the Lease (resolved: the flag, else the server's own namespace).
    pub namespace: String,
    /// How long a non-leader waits after the leader's last renewal before taking the Lease.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading.
    pub renew_deadline: Duration,
    /// Pause between tries to acquire or renew.
    pub retry_period: Duration,
}

impl Config {
    /// Validate the options (every problem at once) and freeze them.
    pub fn new(o: &Options) -> Result<Self, StartupError> {
        let errs = o.validate();
        if !errs.is_empty() {
            return Err(StartupError::Flags(errs));
        }
        Ok(Self::from_options(o))
    }

    /// Freeze options already validated.
    pub fn from_options(o: &Options) -> Self {
        let serving_cert = match (&o.tls_cert_file, &o.tls_private_key_file) {
            (Some(cert), Some(key)) => ServingCert::Files(CertFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ if !o.serving_ca_secret.is_empty() => ServingCert::ClusterCa {
                secret: o.serving_ca_secret.clone(),
                dir: o.cert_dir.clone(),
                service: o.service_name.clone(),
                namespace: o.service_namespace.clone(),
            },
            _ => ServingCert::SelfSigned {
                dir: o.cert_dir.clone(),
                service: o.service_name.clone(),
                namespace: o.service_namespace.clone(),
            },
        };
        Config {
            serving_cert,
            reload_interval: o.cert_reload_interval,
            cluster: ClusterAccess {
                kubeconfig: o.kubeconfig.clone(),
                authentication_kubeconfig: o.authentication_kubeconfig.clone(),
                authorization_kubeconfig: o.authorization_kubeconfig.clone(),
            },
            delegation: Delegation {
                authn_flags: FlagSettings {
                    client_ca_file: o.client_ca_file.clone(),
                    requestheader_client_ca_file: o.requestheader_client_ca_file.clone(),
                    allowed_names: o
                        .requestheader_allowed_names
                        .iter()
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                        .collect(),
                    username_headers: o.requestheader_username_headers.clone(),
                    uid_headers: o.requestheader_uid_headers.clone(),
                    group_headers: o.requestheader_group_headers.clone(),
                    extra_prefixes: o.requestheader_extra_headers_prefix.clone(),
                },
                authn_lookup: !o.authentication_skip_lookup,
                authn_tolerate_lookup_failure: o.authentication_tolerate_lookup_failure,
                token_cache_ttl: o.authentication_token_webhook_cache_ttl,
                authz_allowed_ttl: o.authorization_webhook_cache_authorized_ttl,
                authz_denied_ttl: o.authorization_webhook_cache_unauthorized_ttl,
            },
            policy: poddebug_storage::Policy {
                allowed_images: o.allowed_images.clone(),
                default_image: o.default_image.clone(),
                default_profile: o.default_profile,
                max_debug_containers_per_pod: o.max_debug_containers_per_pod,
                default_target: o.default_target,
            },
            impersonate: o.impersonate,
            ttl: poddebug_storage::TtlPolicy {
                default: Some(o.default_debug_ttl).filter(|d| !d.is_zero()),
                max: Some(o.max_debug_ttl).filter(|d| !d.is_zero()),
            },
            recording: o.recording.clone(),
            node_debug_namespace: o.node_debug_namespace.clone(),
            moderated_profiles: o.moderated_profiles.clone(),
            moderated_shells: o.moderated_shells.clone(),
            break_glass_groups: o.break_glass_groups.clone(),
            session_lease_duration: o.session_lease_duration,
            max_sessions_per_user: o.max_sessions_per_user,
            audit_stdout: o.audit_stdout,
            // Validated above.
            audit_webhook: o.audit_webhook_url().ok().flatten(),
            session_namespace: crate::leader::own_namespace(&o.service_namespace),
            // Validated above.
            requests: o.requests.policy().unwrap_or_default(),
            expiry: Expiry {
                check_interval: o.debug_ttl_check_interval,
                unstoppable_after: o.unstoppable_after,
                unstoppable_action: o.unstoppable_action,
                leader_election: o.leader_elect.then(|| LeaderElection {
                    name: o.leader_elect_resource_name.clone(),
                    namespace: Some(o.leader_elect_resource_namespace.trim().to_owned())
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| crate::leader::own_namespace(&o.service_namespace)),
                    lease_duration: o.leader_elect_lease_duration,
                    renew_deadline: o.leader_elect_renew_deadline,
                    retry_period: o.leader_elect_retry_period,
                }),
            },
            listen: SocketAddr::new(o.bind_address, o.secure_port),
            always_allow_paths: o.authorization_always_allow_paths.clone(),
            // Validated above.
            cross_site: crate::cross_site::Policy::new(&o.allowed_origins).unwrap_or_default(),
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
            stream_idle_timeout: (!o.stream_idle_timeout.is_zero())
                .then_some(o.stream_idle_timeout),
            log_format: o.log_format,
            require_core_permissions: o.require_core_permissions,
        }
    }

    /// Whether using `p` needs the `use` permission on `debugprofiles/<p>`.
    pub fn profile_requires_permission(&self, p: Profile) -> bool {
        self.profiles_requiring_permission.contains(&p)
    }

    /// The first of `profiles` that is one of `--moderated-profiles`.
    pub fn moderated_among<'a>(
        &self,
        profiles: &'a [poddebug_types::privilege::Elevation],
    ) -> Option<&'a poddebug_types::privilege::Elevation> {
        profiles
            .iter()
            .find(|e| self.moderated_profiles.contains(&e.profile))
    }
}
