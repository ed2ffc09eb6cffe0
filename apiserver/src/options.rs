//! Command-line flags, grouped as the Kubernetes generic apiserver groups them, validated all at
//! once, then frozen into an immutable [`crate::config::Config`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use poddebug_types::Profile;

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// poddebug-apiserver serves the poddebug.dev/v1alpha1 API (debug containers for running pods)
/// behind the kube-apiserver aggregation layer.
#[derive(Clone, Debug, Parser)]
// Like pflag, a repeated flag takes its last value, so wrappers and tests can override defaults.
#[command(name = "poddebug-apiserver", version, about, long_about = None, max_term_width = 100, args_override_self = true)]
pub struct Options {
    // ----- Secure serving -----
    /// The port on which to serve HTTPS with authentication and authorization.
    #[arg(long, default_value_t = 8443, help_heading = "Secure serving")]
    pub secure_port: u16,
    /// The IP address on which to listen for the --secure-port port.
    #[arg(long, default_value = "0.0.0.0", help_heading = "Secure serving")]
    pub bind_address: IpAddr,
    /// File containing the default x509 certificate for HTTPS (CA cert, if any, concatenated after
    /// the server cert). If neither --tls-cert-file nor --tls-private-key-file is given, a
    /// self-signed certificate and key are generated in --cert-dir. Reloaded when it changes.
    #[arg(long, help_heading = "Secure serving")]
    pub tls_cert_file: Option<PathBuf>,
    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long, help_heading = "Secure serving")]
    pub tls_private_key_file: Option<PathBuf>,
    /// The directory where the self-signed TLS certificate (apiserver.crt, apiserver.key) is
    /// written and kept. Ignored if --tls-cert-file and --tls-private-key-file are given.
    #[arg(
        long,
        default_value = "apiserver.local.config/certificates",
        help_heading = "Secure serving"
    )]
    pub cert_dir: PathBuf,
    /// Name of the Service in front of this server; the self-signed certificate is valid for
    /// <name>.<namespace>.svc, which is what the aggregator checks.
    #[arg(
        long,
        default_value = "poddebug-apiserver",
        help_heading = "Secure serving"
    )]
    pub service_name: String,
    /// Namespace of the Service in front of this server.
    #[arg(
        long,
        default_value = "poddebug-system",
        help_heading = "Secure serving"
    )]
    pub service_namespace: String,
    /// Keep a private CA in this Secret of --service-namespace (created by the first replica to
    /// start; the others read it), sign this replica's serving certificate with it (written to
    /// --cert-dir) and publish the CA as the caBundle of the APIService v1alpha1.poddebug.dev
    /// (at start, then every --cert-reload-interval if it differs). Needs get/create of the Secret and get/patch
    /// of that APIService (deploy/self-signed). Not with --tls-cert-file.
    #[arg(long, default_value = "", help_heading = "Secure serving")]
    pub serving_ca_secret: String,
    /// How often certificate, key and CA files are checked for changes.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Secure serving")]
    pub cert_reload_interval: Duration,
    /// The maximum number of non-long-running requests in flight at a given time. When the
    /// server exceeds this, it rejects requests with 429. Zero for no limit.
    #[arg(long, default_value_t = 400, help_heading = "Secure serving")]
    pub max_requests_inflight: usize,
    /// How long a non-long-running request may take before it is answered with 504.
    #[arg(long, default_value = "60s", value_parser = parse_duration, help_heading = "Secure serving")]
    pub request_timeout: Duration,
    /// The largest request body accepted; larger ones are answered with 413.
    #[arg(long, default_value_t = 3 * 1024 * 1024, help_heading = "Secure serving")]
    pub max_request_body_bytes: usize,
    /// The largest total size of request headers accepted.
    #[arg(long, default_value_t = 1024 * 1024, help_heading = "Secure serving")]
    pub max_request_header_bytes: usize,
    /// How long a client has to send a complete HTTP/1.1 request head, counted from when the
    /// connection starts waiting for one (so it also bounds the pause between keep-alive
    /// requests). A connection that is too slow is closed.
    #[arg(long, default_value = "32s", value_parser = parse_duration, help_heading = "Secure serving")]
    pub read_header_timeout: Duration,
    /// How long a connection (HTTP/1.1 or HTTP/2) may stay open with no request in flight
    /// before it is closed (HTTP/2 with GOAWAY). Upgraded attach streams are not affected.
    #[arg(long, default_value = "90s", value_parser = parse_duration, help_heading = "Secure serving")]
    pub idle_connection_timeout: Duration,
    /// The most connections open at once, attach streams included; beyond it new connections
    /// are closed as soon as they are accepted. Zero for no limit.
    #[arg(long, default_value_t = 4096, help_heading = "Secure serving")]
    pub max_connections: usize,
    /// On SIGTERM, how long to keep serving (with /readyz failing) before the listener closes,
    /// so load balancers and the aggregator stop sending new requests first.
    #[arg(long, default_value = "0s", value_parser = parse_duration, help_heading = "Secure serving")]
    pub shutdown_delay_duration: Duration,
    /// On SIGTERM (after --shutdown-delay-duration), how long in-flight requests and streams may
    /// run before they are ended. Keep terminationGracePeriodSeconds above the sum of both.
    #[arg(long, default_value = "30s", value_parser = parse_duration, help_heading = "Secure serving")]
    pub shutdown_grace_period: Duration,

    // ----- Cluster access -----
    /// kubeconfig file used for all pod calls. The in-cluster configuration is used when absent.
    #[arg(long, help_heading = "Cluster access")]
    pub kubeconfig: Option<PathBuf>,

    // ----- Authentication -----
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// tokenreviews.authentication.k8s.io and read kube-system/extension-apiserver-authentication.
    /// Defaults to --kubeconfig.
    #[arg(long, help_heading = "Authentication")]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Do not look up the missing authentication configuration (client CA, request-header
    /// settings) in kube-system/extension-apiserver-authentication.
    #[arg(long, help_heading = "Authentication")]
    pub authentication_skip_lookup: bool,
    /// If true, failures to look up the authentication configuration in the cluster are not
    /// fatal: the server starts with what the flags give.
    #[arg(long, help_heading = "Authentication")]
    pub authentication_tolerate_lookup_failure: bool,
    /// The duration to cache responses from the webhook token authenticator.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Authentication")]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// If set, any request presenting a client certificate signed by one of the authorities in
    /// this file is authenticated with an identity corresponding to the CommonName of the
    /// client certificate (and its Organizations as groups).
    #[arg(long, help_heading = "Authentication")]
    pub client_ca_file: Option<PathBuf>,
    /// Root certificate bundle to verify client certificates on incoming requests before
    /// trusting usernames in headers specified by --requestheader-username-headers.
    #[arg(long, help_heading = "Authentication")]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// List of client certificate common names to allow to provide usernames in headers
    /// specified by --requestheader-username-headers. If empty, any client certificate
    /// validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    pub requestheader_allowed_names: Vec<String>,
    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "x-remote-user",
        help_heading = "Authentication"
    )]
    pub requestheader_username_headers: Vec<String>,
    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    pub requestheader_uid_headers: Vec<String>,
    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "x-remote-group",
        help_heading = "Authentication"
    )]
    pub requestheader_group_headers: Vec<String>,
    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "x-remote-extra-",
        help_heading = "Authentication"
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,

    // ----- Authorization -----
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// subjectaccessreviews.authorization.k8s.io. Defaults to --kubeconfig.
    #[arg(long, help_heading = "Authorization")]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without
    /// contacting the 'core' kubernetes server. A trailing '*' matches any suffix.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        help_heading = "Authorization"
    )]
    pub authorization_always_allow_paths: Vec<String>,
    /// The duration to cache 'authorized' responses from the webhook authorizer (the
    /// SubjectAccessReviews poddebug asks); 0 turns that cache off, so every request is
    /// reviewed.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Authorization")]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// The duration to cache 'unauthorized' responses from the webhook authorizer; 0 turns
    /// that cache off.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Authorization")]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Origins (scheme://host[:port]) of web pages, besides the server's own, that may change
    /// things, open streams and read resources from a user's browser. Requests a browser makes
    /// for a page of any other origin are refused with 403 (Fetch Metadata and Origin decide;
    /// clients that are not browsers are not affected, nor those naming the cluster's API
    /// server, which is learned from the cluster: list here an address of it the cluster does
    /// not publish, such as a port-forward).
    #[arg(long, value_delimiter = ',', help_heading = "Authorization")]
    pub allowed_origins: Vec<String>,

    // ----- Policy -----
    /// Image used when a debug container names none.
    #[arg(long, default_value = "busybox:1.36", help_heading = "Policy")]
    pub default_image: String,
    /// Image patterns a debug container may use ('*' matches any run of characters, e.g.
    /// 'docker.io/library/busybox:*'). Empty allows every image.
    #[arg(long, value_delimiter = ',', help_heading = "Policy")]
    pub allowed_images: Vec<String>,
    /// Profile applied when a debug container names none: legacy, general, baseline,
    /// restricted, netadmin or sysadmin.
    #[arg(long, default_value = "general", value_parser = parse_profile, help_heading = "Policy")]
    pub default_profile: Profile,
    /// Profiles whose use requires the verb 'use' on debugprofiles/<name> in group poddebug.dev.
    #[arg(long, value_delimiter = ',', default_values_t = gated_by_default(), value_parser = parse_profile, help_heading = "Policy")]
    pub profiles_requiring_permission: Vec<Profile>,
    /// The most ephemeral containers a pod may carry before new debug containers are refused
    /// (kubectl debug's and other tools' count too). Zero for no limit.
    #[arg(long, default_value_t = 10, help_heading = "Policy")]
    pub max_debug_containers_per_pod: usize,
    /// targetContainerName of a debug container whose request names none, in a pod that shares
    /// no process namespace: 'first-container' (the pod's first container, so that DELETE and
    /// the time limit can stop it) or 'none' (it then runs as PID 1 of its own PID namespace,
    /// which nothing can stop, and a create with a time limit is refused).
    #[arg(long, default_value = "first-container", value_parser = parse_default_target, help_heading = "Policy")]
    pub default_target: poddebug_storage::DefaultTarget,
    /// Make pod calls as the requesting user (Impersonate-* headers) instead of as this server's
    /// service account, so that RBAC, Pod Security admission and the audit log see the user.
    #[arg(long, help_heading = "Policy")]
    pub impersonate: bool,
    /// Also require the core permissions the same action takes without poddebug (patch
    /// pods/ephemeralcontainers to create, create pods/exec to stop, create/get pods/attach,
    /// get pods/log, get/list/watch pods), so poddebug only ever narrows what core RBAC allows.
    #[arg(long, help_heading = "Policy")]
    pub require_core_permissions: bool,
    /// How long an attach waits for a debug container to start running before it fails.
    #[arg(long, default_value = "60s", value_parser = parse_duration, help_heading = "Policy")]
    pub attach_wait_timeout: Duration,
    /// End an attach stream when no data crossed it, either way, for this long (the kubelet's
    /// streamingConnectionIdleTimeout; WebSocket pings and SPDY control frames do not count);
    /// 0 = never.
    #[arg(long, default_value = "4h", value_parser = parse_duration, help_heading = "Policy")]
    pub stream_idle_timeout: Duration,
    /// Time limit of a debug container whose request has no ttlSeconds; 0 = none.
    #[arg(long, default_value = "8h", value_parser = parse_duration, help_heading = "Policy")]
    pub default_debug_ttl: Duration,
    /// Largest ttlSeconds a request may ask for (a larger one is refused); 0 = no maximum.
    /// With a maximum every debug container gets a time limit.
    #[arg(long, default_value = "0", value_parser = parse_duration, help_heading = "Policy")]
    pub max_debug_ttl: Duration,
    /// Namespace of the pods that run node debug containers (`nodes/NODE/debug/NAME`). The
    /// server alone acts in it; it must allow privileged pods (Pod Security `privileged`).
    #[arg(long, default_value = "poddebug-nodes", help_heading = "Policy")]
    pub node_debug_namespace: String,
    /// How often the server looks for debug containers whose time limit passed.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Policy")]
    pub debug_ttl_check_interval: Duration,
    /// How long a debug container may still run past its stop's grace period before it is
    /// reported unstoppable (Warning Event DebugContainerStopFailed, condition Unstoppable, its
    /// sessions ended). A DELETE's bound is its time plus its grace period plus this; a time
    /// limit's is the deadline plus --debug-ttl-check-interval, the expiry's 10s grace period
    /// and this. Attach and log follow are refused from the stop (or the deadline) on.
    #[arg(long, default_value = "30s", value_parser = parse_duration, help_heading = "Policy")]
    pub unstoppable_after: Duration,
    /// What the leader does to the pod of a debug container that its stop did not end: 'none'
    /// (it is reported and unusable through poddebug; it ends with its own exit or its pod) or
    /// 'evict' (the pod is evicted through the Eviction API, which PodDisruptionBudgets may
    /// refuse for a while, so that its controller replaces it; needs create on pods/eviction).
    #[arg(long, default_value = "none", value_parser = parse_unstoppable_action, help_heading = "Policy")]
    pub unstoppable_action: poddebug_storage::UnstoppableAction,

    // ----- Sessions -----
    /// Profiles whose debug containers get moderated sessions: their owner's (and peers')
    /// input is withheld until a user with 'moderate' on pods/sessions is attached too, and
    /// again when the last moderator leaves. The profile is the one a container gets (a
    /// privilege it sets counts as the profile that grants it; a copy's or node debug pod's is
    /// read from its spec), and such a container must be an interactive shell
    /// (--moderated-shells) that mounts no volume, from an image of --allowed-images (which
    /// must then be set). Empty: no session is moderated.
    #[arg(long, value_delimiter = ',', value_parser = parse_profile, help_heading = "Sessions")]
    pub moderated_profiles: Vec<Profile>,
    /// The commands a container under a moderated profile may run: debug containers, copies
    /// and node debug containers whose profile (as they get it) is moderated must be one of
    /// these shells, without arguments or environment, with stdin and tty, so that nothing
    /// runs before a moderated session; anything else is refused (403).
    #[arg(long, value_delimiter = ',', default_values_t = default_moderated_shells(), help_heading = "Sessions")]
    pub moderated_shells: Vec<String>,
    /// Groups whose members the server's admission webhook (/admission/v1/connect, used by
    /// the component only-way-in) lets attach and exec into containers poddebug made around
    /// poddebug, for emergencies. The component's ValidatingAdmissionPolicy names the same
    /// groups for pods/ephemeralcontainers: change both together.
    #[arg(long, value_delimiter = ',', default_values_t = default_break_glass_groups(), help_heading = "Policy")]
    pub break_glass_groups: Vec<String>,
    /// How long a session's record (a Lease in the server's namespace) holds without renewal;
    /// the relaying replica renews it every third of this. A replica that dies leaves records
    /// that stop being listed after this long.
    #[arg(long, default_value = "15s", value_parser = parse_duration, help_heading = "Sessions")]
    pub session_lease_duration: Duration,
    /// The most attach sessions one user may hold at once, counted across every replica from
    /// the session records in the cluster; an attach beyond it is refused with 429 before the
    /// container is reached. Replicas admitting one user's attaches at the same instant may
    /// each admit up to it before seeing the others' (docs/security.md). Zero for no limit.
    #[arg(long, default_value_t = 20, help_heading = "Sessions")]
    pub max_sessions_per_user: usize,

    // ----- Leader election (the expiry loop runs on one replica) -----
    /// Elect a leader among the replicas to run the expiry loop, with a coordination.k8s.io/v1
    /// Lease; without it every replica runs the loop.
    #[arg(long, default_value_t = true, action = ArgAction::Set, help_heading = "Leader election")]
    pub leader_elect: bool,
    /// How long a non-leader waits after the leader's last renewal before taking the Lease.
    #[arg(long, default_value = "15s", value_parser = parse_duration, help_heading = "Leader election")]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Leader election")]
    pub leader_elect_renew_deadline: Duration,
    /// How long to wait between tries to acquire or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = parse_duration, help_heading = "Leader election")]
    pub leader_elect_retry_period: Duration,
    /// Name of the Lease.
    #[arg(
        long,
        default_value = "poddebug-apiserver",
        help_heading = "Leader election"
    )]
    pub leader_elect_resource_name: String,
    /// Namespace of the Lease; empty = the server's own namespace (the service account's,
    /// else --service-namespace).
    #[arg(long, default_value = "", help_heading = "Leader election")]
    pub leader_elect_resource_namespace: String,

    // ----- Just-in-time access -----
    /// Debug requests (`--approval-profiles` and the flags beside it).
    #[command(flatten)]
    pub requests: crate::requests::RequestOptions,

    // ----- Session recording -----
    #[command(flatten)]
    #[allow(missing_docs)]
    pub recording: poddebug_recording::RecordingOptions,

    // ----- Audit export -----
    /// Write every audit event to stdout as one OCSF JSON line (API Activity; Process
    /// Activity for the commands of a recorded session). Logs stay on stderr.
    #[arg(long, help_heading = "Audit export")]
    pub audit_stdout: bool,
    /// POST every audit event, as OCSF JSON, to this URL (http:// or https://): from a bounded
    /// queue, with retries and backoff; never delays or fails a request (a full queue drops
    /// the event, counted in poddebug_audit_events_total).
    #[arg(long, value_name = "URL", help_heading = "Audit export")]
    pub audit_webhook: Option<String>,

    // ----- Logging -----
    /// Log format: text or json.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, help_heading = "Logging")]
    pub log_format: LogFormat,
    /// Log level verbosity: 0 errors and warnings, 1-2 info (one line per request), 3-4 debug,
    /// 5+ trace.
    #[arg(short = 'v', long = "v", default_value_t = 2, action = ArgAction::Set, help_heading = "Logging")]
    pub verbosity: u8,
}

/// Parse a Go-style duration (`90s`, `5m`, `1h30m`, `250ms`, bare seconds): the one parser the
/// server's flags and the plugin's share.
pub use poddebug_types::duration::parse as parse_duration;

/// Does `image` match one of `patterns` (`*` matches any run of characters)? An empty list
/// allows everything.
pub fn image_allowed(patterns: &[String], image: &str) -> bool {
    patterns.is_empty()
        || patterns
            .iter()
            .any(|p| poddebug_storage::glob_match(p.trim(), image))
}

/// The default `--break-glass-groups`.
fn default_break_glass_groups() -> Vec<String> {
    poddebug_types::only_way_in::DEFAULT_BREAK_GLASS_GROUPS
        .iter()
        .map(|g| (*g).to_owned())
        .collect()
}

/// The default `--moderated-shells`.
fn default_moderated_shells() -> Vec<String> {
    poddebug_types::moderated::DEFAULT_MODERATED_SHELLS
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// The profiles that reach the network or the node (`netadmin`, `sysadmin`).
fn gated_by_default() -> Vec<Profile> {
    Profile::ALL
        .into_iter()
        .filter(|p| p.requires_use_permission())
        .collect()
}

fn parse_default_target(s: &str) -> Result<poddebug_storage::DefaultTarget, String> {
    poddebug_storage::DefaultTarget::parse(s)
        .ok_or_else(|| format!("unknown value {s:?}; supported: first-container, none"))
}

fn parse_unstoppable_action(s: &str) -> Result<poddebug_storage::UnstoppableAction, String> {
    poddebug_storage::UnstoppableAction::parse(s)
        .ok_or_else(|| format!("unknown value {s:?}; supported: none, evict"))
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Profile::ALL.iter().map(|p| p.as_str()).collect();
        format!("unknown profile {s:?}; supported: {}", names.join(", "))
    })
}

impl Options {
    /// Every problem with the flags, reported at once.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(_), None) | (None, Some(_)) => errs.push(
                "--tls-cert-file and --tls-private-key-file must be given together".to_owned(),
            ),
            _ => {}
        }
        if !self.serving_ca_secret.is_empty() {
            if self.tls_cert_file.is_some() {
                errs.push("--serving-ca-secret and --tls-cert-file are exclusive".to_owned());
            }
            if !is_dns_subdomain(&self.serving_ca_secret) {
                errs.push(format!(
                    "--serving-ca-secret: {:?} is not a Secret name (a DNS subdomain)",
                    self.serving_ca_secret
                ));
            }
        }
        if self.secure_port == 0 {
            errs.push("--secure-port must be between 1 and 65535".to_owned());
        }
        for (flag, path) in [
            ("--tls-cert-file", &self.tls_cert_file),
            ("--tls-private-key-file", &self.tls_private_key_file),
            ("--client-ca-file", &self.client_ca_file),
            (
                "--requestheader-client-ca-file",
                &self.requestheader_client_ca_file,
            ),
            ("--kubeconfig", &self.kubeconfig),
            (
                "--authentication-kubeconfig",
                &self.authentication_kubeconfig,
            ),
            ("--authorization-kubeconfig", &self.authorization_kubeconfig),
        ] {
            if let Some(p) = path
                && !p.is_file()
            {
                errs.push(format!("{flag}: {} is not a readable file", p.display()));
            }
        }
        if self
            .requestheader_username_headers
            .iter()
            .all(|h| h.trim().is_empty())
        {
            errs.push("--requestheader-username-headers must name at least one header".to_owned());
        }
        for h in self
            .requestheader_username_headers
            .iter()
            .chain(&self.requestheader_group_headers)
            .chain(&self.requestheader_uid_headers)
            .chain(&self.requestheader_extra_headers_prefix)
        {
            if http::HeaderName::from_bytes(h.trim().as_bytes()).is_err() && !h.trim().is_empty() {
                errs.push(format!("{h:?} is not a valid HTTP header name"));
            }
        }
        if self.default_image.trim().is_empty() || self.default_image.trim() != self.default_image {
            errs.push(
                "--default-image must be a non-empty image name without surrounding spaces"
                    .to_owned(),
            );
        }
        if !self.allowed_images.is_empty()
            && !image_allowed(&self.allowed_images, &self.default_image)
        {
            errs.push(format!(
                "--default-image {:?} is not allowed by --allowed-images",
                self.default_image
            ));
        }
        if self.shutdown_delay_duration > Duration::from_secs(3600) {
            errs.push("--shutdown-delay-duration must be at most 1h".to_owned());
        }
        if self.shutdown_grace_period > Duration::from_secs(3600) {
            errs.push("--shutdown-grace-period must be at most 1h".to_owned());
        }
        if self.request_timeout.is_zero() {
            errs.push("--request-timeout must be positive".to_owned());
        }
        if self.read_header_timeout.is_zero() {
            errs.push("--read-header-timeout must be positive".to_owned());
        }
        if self.idle_connection_timeout.is_zero() {
            errs.push("--idle-connection-timeout must be positive".to_owned());
        }
        if self.cert_reload_interval < Duration::from_millis(100) {
            errs.push("--cert-reload-interval must be at least 100ms".to_owned());
        }
        if let Err(bad) = crate::cross_site::Policy::new(&self.allowed_origins) {
            for o in bad {
                errs.push(format!(
                    "--allowed-origins: {o:?} is not an origin (scheme://host[:port], http or https)"
                ));
            }
        }
        if self.session_lease_duration < Duration::from_secs(3)
            || self.session_lease_duration.subsec_nanos() != 0
        {
            errs.push(
                "--session-lease-duration must be a whole number of seconds, at least 3s"
                    .to_owned(),
            );
        }
        if !self.moderated_profiles.is_empty() && self.allowed_images.is_empty() {
            errs.push(
                "--allowed-images must name the images shells may come from when \
                 --moderated-profiles is set: a moderated session trusts the shell its image \
                 ships, and an image whose shell is a payload would run it with the profile's \
                 privileges before anyone types"
                    .to_owned(),
            );
        }
        if !self.moderated_profiles.is_empty() && self.moderated_shells.is_empty() {
            errs.push(
                "--moderated-shells must name at least one shell when --moderated-profiles is set"
                    .to_owned(),
            );
        }
        for sh in &self.moderated_shells {
            if sh.is_empty() || sh.chars().any(|c| c.is_whitespace() || c.is_control()) {
                errs.push(format!(
                    "--moderated-shells: {sh:?} is not a command (one word, no spaces)"
                ));
            }
        }
        if let Err(e) = self.audit_webhook_url() {
            errs.push(e);
        }
        errs.extend(self.validate_ttl_and_leader_election());
        errs.extend(self.recording.validate());
        if let Err(e) = self.requests.policy() {
            errs.extend(e);
        }
        errs
    }
}

impl Options {
    /// `--audit-webhook` as a URL.
    pub fn audit_webhook_url(&self) -> Result<Option<url::Url>, String> {
        match self.audit_webhook.as_deref() {
            None => Ok(None),
            Some(u) => match url::Url::parse(u) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                    Ok(Some(url))
                }
                _ => Err(format!(
                    "--audit-webhook: {u:?} is not an http:// or https:// URL"
                )),
            },
        }
    }

    /// The problems of the time-limit and leader-election flags.
    fn validate_ttl_and_leader_election(&self) -> Vec<String> {
        let mut errs = Vec::new();
        let whole = |d: Duration| d.subsec_nanos() == 0;
        for (flag, d) in [
            ("--default-debug-ttl", self.default_debug_ttl),
            ("--max-debug-ttl", self.max_debug_ttl),
        ] {
            if !whole(d) {
                errs.push(format!("{flag} must be a whole number of seconds"));
            }
        }
        if self.debug_ttl_check_interval < Duration::from_secs(1) {
            errs.push("--debug-ttl-check-interval must be at least 1s".to_owned());
        }
        if self.unstoppable_after < Duration::from_secs(1) || !whole(self.unstoppable_after) {
            errs.push(
                "--unstoppable-after must be a whole number of seconds, at least 1s".to_owned(),
            );
        }
        if self.leader_elect {
            let (lease, renew, retry) = (
                self.leader_elect_lease_duration,
                self.leader_elect_renew_deadline,
                self.leader_elect_retry_period,
            );
            // The rules of client-go's leaderelection.NewLeaderElector.
            if lease <= renew {
                errs.push(
                    "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
                        .to_owned(),
                );
            }
            if retry.is_zero() || renew.as_secs_f64() <= 1.2 * retry.as_secs_f64() {
                errs.push(
                    "--leader-elect-renew-deadline must be greater than 1.2 times --leader-elect-retry-period (which must be positive)"
                        .to_owned(),
                );
            }
            if self.leader_elect_resource_name.trim().is_empty() {
                errs.push("--leader-elect-resource-name must not be empty".to_owned());
            }
        }
        errs
    }
}

/// A Kubernetes object name (RFC 1123 subdomain).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn validate_reports_every_problem_at_once() {
        let o = Options::parse_from([
            "poddebug-apiserver",
            "--tls-cert-file=/nonexistent/cert",
            "--client-ca-file=/nonexistent/ca",
            "--allowed-images=registry.example/*",
            "--request-timeout=0s",
        ]);
        let errs = o.validate();
        assert!(
            errs.iter().any(|e| e.contains("must be given together")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.contains("--client-ca-file")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("not allowed by --allowed-images")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.contains("--request-timeout")),
            "{errs:?}"
        );
    }

    #[test]
    fn moderated_profiles_need_an_image_allowlist() {
        let moderated = |extra: &[&str]| {
            let mut args = vec!["poddebug-apiserver", "--moderated-profiles=sysadmin"];
            args.extend_from_slice(extra);
            Options::parse_from(args).validate()
        };
        let errs = moderated(&[]);
        assert!(
            errs.iter().any(|e| e.starts_with(
                "--allowed-images must name the images shells may come from when --moderated-profiles is set"
            )),
            "{errs:?}"
        );
        assert!(moderated(&["--allowed-images=busybox:*"]).is_empty());
        assert!(
            Options::parse_from(["poddebug-apiserver"])
                .validate()
                .is_empty()
        );
    }

    #[test]
    fn leader_election_timings_follow_client_gos_rules() {
        let o = Options::parse_from([
            "poddebug-apiserver",
            "--leader-elect-lease-duration=10s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-retry-period=9s",
            "--default-debug-ttl=1.5s",
        ]);
        let errs = o.validate();
        assert!(
            errs.iter()
                .any(|e| e.contains("greater than --leader-elect-renew-deadline")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.contains("1.2 times")), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.contains("--default-debug-ttl")),
            "{errs:?}"
        );
        let off = Options::parse_from([
            "poddebug-apiserver",
            "--leader-elect=false",
            "--leader-elect-renew-deadline=20s",
        ]);
        assert!(off.validate().is_empty(), "{:?}", off.validate());
    }

    #[test]
    fn defaults_follow_the_generic_apiserver() {
        let o = Options::parse_from(["poddebug-apiserver"]);
        assert_eq!(o.secure_port, 8443);
        assert_eq!(
            o.authorization_always_allow_paths,
            vec!["/healthz", "/readyz", "/livez"]
        );
        assert_eq!(o.requestheader_username_headers, vec!["x-remote-user"]);
        assert_eq!(o.default_profile, Profile::General);
        assert_eq!(o.default_debug_ttl, Duration::from_secs(8 * 3600));
        assert_eq!(o.max_debug_ttl, Duration::ZERO);
        assert!(o.leader_elect);
        assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(o.leader_elect_renew_deadline, Duration::from_secs(10));
        assert_eq!(o.leader_elect_retry_period, Duration::from_secs(2));
        assert!(o.validate().is_empty(), "{:?}", o.validate());
    }

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
