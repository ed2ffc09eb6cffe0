//! `--serving-ca-secret`: a private CA kept in the cluster, so that a deployment needs neither
//! cert-manager nor an operator's step to be trusted by the aggregator.
//!
//! The CA (an ECDSA P-256 key and its self-signed certificate) lives in a `kubernetes.io/tls`
//! Secret of the server's namespace. The first replica to start creates it; a replica whose
//! create answers 409 (another one won the race) reads the winner's, so every replica signs with
//! the same CA. Each replica then signs its own serving certificate for
//! `<service>.<namespace>.svc` with it (a fresh key at every start, written to `--cert-dir`), and
//! puts the CA certificate from the Secret into the caBundle of the APIService
//! `v1alpha1.poddebug.dev`: at start, then every `--cert-reload-interval` if it differs (a `kubectl replace` that
//! dropped it is repaired). caBundle is never taken from anywhere but the Secret. The same goes for
//! the admission webhook of the component `only-way-in` ([`WEBHOOK`]), when it is installed and
//! the server may patch it.
//!
//! Rotation: delete the Secret and restart the replicas (docs/operator-guide.md, "Certificates").

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams};

use crate::error::StartupError;
use crate::serving::self_signed::{CERT_FILE, KEY_FILE, subject_names, write_private};
use crate::serving::tls::CertFiles;

/// The APIService whose caBundle is published.
pub const APISERVICE: &str = "v1alpha1.poddebug.dev";
/// The ValidatingWebhookConfiguration of `manifests/components/only-way-in`, whose caBundle is
/// published too when it exists.
pub const WEBHOOK: &str = "poddebug-only-way-in";
/// The CA's common name; also how a serving certificate names its issuer.
const CA_COMMON_NAME: &str = "poddebug-serving-ca";
/// How many times the Secret is tried at start before the server gives up (and its pod restarts).
const LOAD_ATTEMPTS: u32 = 30;

/// The CA as the Secret holds it.
#[derive(Clone, Debug)]
pub struct ClusterCa {
    /// The CA certificate, PEM: what caBundle gets.
    pub cert_pem: String,
    key_pem: String,
}

/// The parameters of the CA certificate; a serving certificate's issuer is built from the same
/// ones (distinguished name, key identifier method), so that it chains to the Secret's
/// certificate.
fn ca_params() -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = rcgen::date_time_ymd(2024, 1, 1);
    params.not_after = rcgen::date_time_ymd(2124, 1, 1);
    params
}

impl ClusterCa {
    /// A new CA.
    pub fn generate() -> Result<ClusterCa, StartupError> {
        let key = rcgen::KeyPair::generate()
            .map_err(|e| StartupError::Tls(format!("serving CA key: {e}")))?;
        let cert = ca_params()
            .self_signed(&key)
            .map_err(|e| StartupError::Tls(format!("serving CA certificate: {e}")))?;
        Ok(ClusterCa {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    fn from_secret(s: &Secret, name: &str) -> Result<ClusterCa, StartupError> {
        let entry = |k: &str| {
            s.data
                .as_ref()
                .and_then(|d| d.get(k))
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
                .ok_or_else(|| StartupError::Tls(format!("the Secret {name} has no PEM entry {k}")))
        };
        let ca = ClusterCa {
            cert_pem: entry("tls.crt")?,
            key_pem: entry("tls.key")?,
        };
        // The key must be usable: a serving certificate is signed with it at once.
        rcgen::KeyPair::from_pem(&ca.key_pem)
            .map_err(|e| StartupError::Tls(format!("the Secret {name}'s tls.key: {e}")))?;
        Ok(ca)
    }

    fn to_secret(&self, name: &str, namespace: &str) -> Secret {
        poddebug_storage::secret_once::managed(
            name,
            namespace,
            "kubernetes.io/tls",
            [("tls.crt", &self.cert_pem), ("tls.key", &self.key_pem)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.as_bytes().to_vec()))
                .collect(),
        )
    }

    /// The CA of the Secret `name` in `namespace`, created when there is none (409: another
    /// replica created it first; its CA is read).
    pub async fn load_or_create(
        client: kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<ClusterCa, StartupError> {
        let secrets: Api<Secret> = Api::namespaced(client, namespace);
        let cluster = |e: kube::Error| {
            StartupError::Tls(format!("the serving CA Secret {namespace}/{name}: {e}"))
        };
        let (secret, created) = poddebug_storage::secret_once::get_or_create(
            &secrets,
            name,
            || Ok(ClusterCa::generate()?.to_secret(name, namespace)),
            cluster,
        )
        .await?;
        if created {
            tracing::info!(secret = %format!("{namespace}/{name}"), "created the serving CA");
        }
        ClusterCa::from_secret(&secret, name)
    }

    /// [`ClusterCa::load_or_create`], tried again (backing off to 2 s) while kube-apiserver cannot
    /// be reached or refuses, [`LOAD_ATTEMPTS`] times in all.
    pub async fn load_with_retries(
        client: kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<ClusterCa, StartupError> {
        let mut delay = Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            match ClusterCa::load_or_create(client.clone(), namespace, name).await {
                Ok(ca) => return Ok(ca),
                Err(e) if attempt >= LOAD_ATTEMPTS => return Err(e),
                Err(e) => tracing::warn!(error = %e, attempt, "serving CA not loaded yet"),
            }
            attempt += 1;
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    /// A serving certificate for the Service's names signed by this CA, with a new key, written
    /// to `dir` (the key file mode 0600); the CA certificate follows the serving one in the file.
    pub fn issue(
        &self,
        dir: &Path,
        service: &str,
        namespace: &str,
    ) -> Result<CertFiles, StartupError> {
        let ca_key = rcgen::KeyPair::from_pem(&self.key_pem)
            .map_err(|e| StartupError::Tls(format!("serving CA key: {e}")))?;
        let issuer = rcgen::Issuer::new(ca_params(), ca_key);
        let mut params = rcgen::CertificateParams::new(subject_names(service, namespace))
            .map_err(|e| StartupError::Tls(format!("serving certificate: {e}")))?;
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("{service}.{namespace}.svc"),
        );
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = rcgen::date_time_ymd(2024, 1, 1);
        params.not_after = rcgen::date_time_ymd(2124, 1, 1);
        let key = rcgen::KeyPair::generate()
            .map_err(|e| StartupError::Tls(format!("serving key: {e}")))?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| StartupError::Tls(format!("serving certificate: {e}")))?;
        std::fs::create_dir_all(dir).map_err(|e| {
            StartupError::Tls(format!("creating --cert-dir {}: {e}", dir.display()))
        })?;
        let files = CertFiles {
            cert: dir.join(CERT_FILE),
            key: dir.join(KEY_FILE),
        };
        write_private(&files.key, key.serialize_pem().as_bytes())?;
        std::fs::write(&files.cert, format!("{}{}", cert.pem(), self.cert_pem))
            .map_err(|e| StartupError::Tls(format!("writing {}: {e}", files.cert.display())))?;
        Ok(files)
    }

    /// Put this CA into the APIService's caBundle if it is not there already. `Ok(false)` when
    /// there is no APIService yet.
    pub async fn publish(&self, client: kube::Client) -> Result<bool, kube::Error> {
        let api: Api<APIService> = Api::all(client);
        let Some(current) = api.get_opt(APISERVICE).await? else {
            return Ok(false);
        };
        let published = current
            .spec
            .as_ref()
            .and_then(|s| s.ca_bundle.as_ref())
            .is_some_and(|b| b.0 == self.cert_pem.as_bytes());
        if !published {
            let bundle = base64::engine::general_purpose::STANDARD.encode(&self.cert_pem);
            let patch = serde_json::json!({"spec": {"caBundle": bundle}});
            api.patch(APISERVICE, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            tracing::info!(
                apiservice = APISERVICE,
                "published the serving CA as caBundle"
            );
        }
        Ok(true)
    }

    /// Put this CA into every caBundle of the admission webhook of `only-way-in`, if it is
    /// installed and differs. A server not allowed to read it (the component's RBAC is not
    /// applied) publishes nothing there, quietly: its operator sets the caBundle.
    pub async fn publish_webhook(&self, client: kube::Client) -> Result<(), kube::Error> {
        use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client);
        let current = match api.get_opt(WEBHOOK).await {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 403 => return Ok(()),
            Err(e) => return Err(e),
        };
        let stale: Vec<String> = current
            .webhooks
            .iter()
            .flatten()
            .filter(|w| {
                w.client_config
                    .ca_bundle
                    .as_ref()
                    .is_none_or(|b| b.0 != self.cert_pem.as_bytes())
            })
            .map(|w| w.name.clone())
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        let bundle = base64::engine::general_purpose::STANDARD.encode(&self.cert_pem);
        let webhooks: Vec<serde_json::Value> = stale
            .iter()
            .map(|name| serde_json::json!({"name": name, "clientConfig": {"caBundle": bundle}}))
            .collect();
        let patch = serde_json::json!({"webhooks": webhooks});
        api.patch(WEBHOOK, &PatchParams::default(), &Patch::Strategic(&patch))
            .await?;
        tracing::info!(
            webhook = WEBHOOK,
            "published the serving CA as the admission webhook's caBundle"
        );
        Ok(())
    }

    /// Keep the caBundle published: now, then every `interval` (`--cert-reload-interval`).
    pub fn spawn_publisher(self, client: kube::Client, interval: Duration) {
        tokio::spawn(async move {
            loop {
                match self.publish(client.clone()).await {
                    Ok(true) => {}
                    Ok(false) => tracing::info!(
                        apiservice = APISERVICE,
                        "no APIService to publish the serving CA to yet"
                    ),
                    Err(e) => {
                        tracing::warn!(apiservice = APISERVICE, error = %e, "publishing the serving CA")
                    }
                }
                if let Err(e) = self.publish_webhook(client.clone()).await {
                    tracing::warn!(webhook = WEBHOOK, error = %e, "publishing the serving CA");
                }
                tokio::time::sleep(interval).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A serving certificate issued by a CA read back from its PEM chains to that CA: its issuer
    /// is the CA's subject and its authority key identifier the CA's subject key identifier
    /// (the signature itself is checked by the live quickstart, through the aggregator).
    #[test]
    fn issued_certificate_chains_to_the_ca() {
        let ca = ClusterCa::generate().unwrap();
        let secret = ca.to_secret("ca", "ns");
        let again = ClusterCa::from_secret(&secret, "ca").unwrap();
        let dir = std::env::temp_dir().join(format!("poddebug-clusterca-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = again.issue(&dir, "svc", "ns").unwrap();
        let pem = std::fs::read(&files.cert).unwrap();
        let ck = crate::serving::tls::load_certified_key(&pem, &std::fs::read(&files.key).unwrap())
            .unwrap();
        let (_, leaf) = x509_parser::parse_x509_certificate(ck.cert[0].as_ref()).unwrap();
        let (_, ca_pem) = x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes()).unwrap();
        let root = ca_pem.parse_x509().unwrap();
        assert_eq!(leaf.issuer(), root.subject());
        let key_id = |c: &x509_parser::certificate::X509Certificate<'_>| {
            c.extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(a) => {
                        a.key_identifier.as_ref().map(|k| k.0.to_vec())
                    }
                    x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(k) => {
                        Some(k.0.to_vec())
                    }
                    _ => None,
                })
        };
        assert!(key_id(&leaf).is_some());
        assert_eq!(key_id(&leaf), key_id(&root));
        // The file holds the chain: the serving certificate, then the CA.
        assert_eq!(ck.cert.len(), 2);
        let san = format!(
            "{:?}",
            leaf.subject_alternative_name().unwrap().unwrap().value
        );
        assert!(san.contains("svc.ns.svc"), "{san}");
        assert!(!leaf.is_ca());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_secret_without_a_usable_key_is_refused() {
        let ca = ClusterCa::generate().unwrap();
        let mut secret = ca.to_secret("ca", "ns");
        secret.data.as_mut().unwrap().insert(
            "tls.key".to_owned(),
            k8s_openapi::ByteString(b"not a key".to_vec()),
        );
        let err = ClusterCa::from_secret(&secret, "ca")
            .unwrap_err()
            .to_string();
        assert!(err.contains("tls.key"), "{err}");
    }
}
