//! The authentication configuration in force: CAs and request-header settings from the flags,
//! completed from `kube-system/extension-apiserver-authentication` unless
//! `--authentication-skip-lookup`. Both sources are followed at run time (files are polled,
//! the ConfigMap is watched), so CA rotation applies without a restart.
//!
//! As in the generic apiserver, a setting given by flag wins; the ConfigMap fills only what the
//! flags leave out (the client CA and the request-header block, each as a whole).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::{CertificateDer, UnixTime};

use crate::serving::tls::{parse_cert_chain, provider};

/// The ConfigMap kube-apiserver publishes for extension servers.
pub const AUTH_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// Its name.
pub const AUTH_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// A CA bundle able to verify client certificate chains.
#[derive(Clone)]
pub struct CaVerifier {
    verifier: Arc<dyn ClientCertVerifier>,
    /// The PEM it was built from (to detect changes).
    pub pem: Vec<u8>,
}

impl std::fmt::Debug for CaVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaVerifier")
            .field("pem_bytes", &self.pem.len())
            .finish()
    }
}

impl CaVerifier {
    /// Build from a PEM bundle of CA certificates.
    pub fn from_pem(pem: &[u8]) -> Result<Self, String> {
        let certs = parse_cert_chain(pem)?;
        let mut roots = rustls::RootCertStore::empty();
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("unusable CA certificate: {e}"))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| format!("building verifier: {e}"))?;
        Ok(CaVerifier {
            verifier,
            pem: pem.to_vec(),
        })
    }

    /// Verify a client chain against this CA, now.
    pub fn verify(
        &self,
        leaf: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Result<(), String> {
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Request-header (front proxy) settings.
#[derive(Clone, Debug)]
pub struct RequestHeaderAuth {
    /// The CA front-proxy certificates must chain to.
    pub ca: CaVerifier,
    /// Allowed common names; empty allows any.
    pub allowed_names: Vec<String>,
    /// Username headers, lower-cased.
    pub username_headers: Vec<String>,
    /// UID headers, lower-cased.
    pub uid_headers: Vec<String>,
    /// Group headers, lower-cased.
    pub group_headers: Vec<String>,
    /// Extra header prefixes, lower-cased.
    pub extra_prefixes: Vec<String>,
}

/// The configuration in force.
#[derive(Clone, Debug, Default)]
pub struct AuthConfig {
    /// Front-proxy settings, if any CA is known.
    pub request_header: Option<RequestHeaderAuth>,
    /// The CA for direct client certificates.
    pub client_ca: Option<CaVerifier>,
}

/// What the flags say.
#[derive(Clone, Debug, Default)]
pub struct FlagSettings {
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-client-ca-file`.
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`.
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub extra_prefixes: Vec<String>,
}

fn lower(v: &[String]) -> Vec<String> {
    v.iter()
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Parse a ConfigMap list value: a JSON array of strings (`["X-Remote-User"]`).
fn json_list(data: &BTreeMap<String, String>, key: &str) -> Vec<String> {
    data.get(key)
        .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
        .unwrap_or_default()
}

/// Holds the configuration in force and rebuilds it when a source changes.
pub struct AuthConfigStore {
    flags: FlagSettings,
    current: RwLock<Arc<AuthConfig>>,
    file_state: RwLock<BTreeMap<PathBuf, Option<SystemTime>>>,
    configmap: RwLock<Option<BTreeMap<String, String>>>,
    lookup: bool,
    loaded: AtomicBool,
}

impl AuthConfigStore {
    /// A store over the flags; `lookup` says whether the ConfigMap completes them.
    ///
    /// With `tolerate_lookup_failure` the flags alone make the server ready; the ConfigMap, once
    /// read, still completes them (`--authentication-tolerate-lookup-failure`).
    pub fn new(
        flags: FlagSettings,
        lookup: bool,
        tolerate_lookup_failure: bool,
    ) -> Result<Arc<Self>, String> {
        let store = Arc::new(AuthConfigStore {
            flags,
            current: RwLock::new(Arc::new(AuthConfig::default())),
            file_state: RwLock::new(BTreeMap::new()),
            configmap: RwLock::new(None),
            lookup,
            loaded: AtomicBool::new(!lookup || tolerate_lookup_failure),
        });
        store.rebuild()?;
        Ok(store)
    }

    /// The configuration in force.
    pub fn current(&self) -> Arc<AuthConfig> {
        self.current.read().map(|c| c.clone()).unwrap_or_default()
    }

    /// True once the configuration is complete (the ConfigMap was read when looked up).
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// New ConfigMap data (from the watch).
    pub fn set_configmap(&self, data: Option<BTreeMap<String, String>>) {
        if let Ok(mut cm) = self.configmap.write() {
            *cm = data;
        }
        match self.rebuild() {
            Ok(()) => {
                self.loaded.store(true, Ordering::Release);
                tracing::info!(
                    "authentication configuration updated from {AUTH_CONFIGMAP_NAMESPACE}/{AUTH_CONFIGMAP_NAME}"
                );
            }
            Err(e) => tracing::warn!(error = %e, "ignoring unusable authentication ConfigMap"),
        }
    }

    /// Re-read the CA files if they changed. Returns true when the configuration was rebuilt.
    pub fn reload_files_if_changed(&self) -> bool {
        let paths: Vec<PathBuf> = [
            &self.flags.client_ca_file,
            &self.flags.requestheader_client_ca_file,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        let changed = {
            let Ok(state) = self.file_state.read() else {
                return false;
            };
            paths.iter().any(|p| {
                let now = std::fs::metadata(p).and_then(|m| m.modified()).ok();
                state.get(p).copied().flatten() != now
            })
        };
        if !changed {
            return false;
        }
        match self.rebuild() {
            Ok(()) => {
                tracing::info!("client CA files reloaded");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "new CA files not usable; keeping the old ones");
                false
            }
        }
    }

    fn read_file(&self, p: &PathBuf) -> Result<Vec<u8>, String> {
        let stamp = std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let data = std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()))?;
        if let Ok(mut st) = self.file_state.write() {
            st.insert(p.clone(), stamp);
        }
        Ok(data)
    }

    fn rebuild(&self) -> Result<(), String> {
        let cm = self.configmap.read().map(|c| c.clone()).unwrap_or_default();
        let cm = if self.lookup { cm } else { None };

        let client_ca = match &self.flags.client_ca_file {
            Some(p) => Some(CaVerifier::from_pem(&self.read_file(p)?)?),
            None => match cm.as_ref().and_then(|d| d.get("client-ca-file")) {
                Some(pem) if !pem.trim().is_empty() => Some(CaVerifier::from_pem(pem.as_bytes())?),
                _ => None,
            },
        };

        let request_header = match &self.flags.requestheader_client_ca_file {
            Some(p) => Some(RequestHeaderAuth {
                ca: CaVerifier::from_pem(&self.read_file(p)?)?,
                allowed_names: self.flags.allowed_names.clone(),
                username_headers: lower(&self.flags.username_headers),
                uid_headers: lower(&self.flags.uid_headers),
                group_headers: lower(&self.flags.group_headers),
                extra_prefixes: lower(&self.flags.extra_prefixes),
            }),
            None => match cm.as_ref() {
                Some(d) => match d.get("requestheader-client-ca-file") {
                    Some(pem) if !pem.trim().is_empty() => Some(RequestHeaderAuth {
                        ca: CaVerifier::from_pem(pem.as_bytes())?,
                        allowed_names: json_list(d, "requestheader-allowed-names"),
                        username_headers: lower(&json_list(d, "requestheader-username-headers")),
                        uid_headers: lower(&json_list(d, "requestheader-uid-headers")),
                        group_headers: lower(&json_list(d, "requestheader-group-headers")),
                        extra_prefixes: lower(&json_list(d, "requestheader-extra-headers-prefix")),
                    }),
                    _ => None,
                },
                None => None,
            },
        };
        let cfg = AuthConfig {
            request_header,
            client_ca,
        };
        if let Ok(mut cur) = self.current.write() {
            *cur = Arc::new(cfg);
        }
        Ok(())
    }
}

/// Follow the ConfigMap with a kube-rs watcher until the process ends; restarts are handled by
/// the watcher's backoff.
pub async fn watch_configmap(store: Arc<AuthConfigStore>, client: kube::Client) {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{WatchStreamExt, watcher};

    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, AUTH_CONFIGMAP_NAMESPACE);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={AUTH_CONFIGMAP_NAME}"));
    let mut stream = watcher(api, cfg).default_backoff().boxed();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(cm)) | Ok(watcher::Event::InitApply(cm)) => {
                store.set_configmap(Some(cm.data.unwrap_or_default()));
            }
            Ok(watcher::Event::Delete(_)) => store.set_configmap(None),
            Ok(watcher::Event::InitDone) => {
                // An absent ConfigMap still completes the lookup: the flags are all there is.
                if !store.is_loaded() {
                    store.set_configmap(None);
                }
            }
            Ok(watcher::Event::Init) => {}
            Err(e) => tracing::warn!(
                error = %e,
                "cannot read {AUTH_CONFIGMAP_NAMESPACE}/{AUTH_CONFIGMAP_NAME} (is the server's account bound to the Role extension-apiserver-authentication-reader in kube-system?); not ready until it can"
            ),
        }
    }
}

/// Poll the CA files until the process ends.
pub async fn poll_files(store: Arc<AuthConfigStore>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        store.reload_files_if_changed();
    }
}
