//! TLS for the secure port: a serving certificate that is reloaded when its files change, and a
//! client-certificate policy that *requests* a certificate without deciding whom to trust.
//!
//! Which CA a client certificate must chain to depends on what it is used for (front proxy or
//! direct client), and both CAs can rotate at run time. So, like the Go generic apiserver
//! (`tls.RequestClientCert`), the handshake only proves that the client holds the key of the
//! certificate it offers; the authenticators verify the chain against the CAs in force when
//! the request arrives.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use crate::error::StartupError;

/// The process-wide crypto provider (ring only: one provider, see the dependency notes).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parse every certificate of a PEM bundle.
pub fn parse_cert_chain(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
    let certs = certs.map_err(|e| format!("invalid PEM certificate: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate found".to_owned());
    }
    Ok(certs)
}

/// Load a certificate chain and its key into a signing `CertifiedKey`.
pub fn load_certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, String> {
    let chain = parse_cert_chain(cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("invalid PEM private key: {e}"))?;
    let signing = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("unusable private key: {e}"))?;
    let ck = CertifiedKey::new(chain, signing);
    ck.keys_match()
        .map_err(|e| format!("certificate and key do not match: {e}"))?;
    Ok(ck)
}

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub struct CertFiles {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// The serving certificate, swapped in place when its files change; connections already
/// established keep the certificate they negotiated.
#[derive(Debug)]
pub struct ReloadingCert {
    files: CertFiles,
    current: RwLock<(Arc<CertifiedKey>, Option<SystemTime>, Option<SystemTime>)>,
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

impl ReloadingCert {
    /// Load the files once; errors are fatal at startup.
    pub fn load(files: CertFiles) -> Result<Self, StartupError> {
        let ck = Self::read(&files).map_err(StartupError::Tls)?;
        let stamps = (mtime(&files.cert), mtime(&files.key));
        Ok(ReloadingCert {
            current: RwLock::new((Arc::new(ck), stamps.0, stamps.1)),
            files,
        })
    }

    fn read(files: &CertFiles) -> Result<CertifiedKey, String> {
        let cert = std::fs::read(&files.cert)
            .map_err(|e| format!("reading {}: {e}", files.cert.display()))?;
        let key = std::fs::read(&files.key)
            .map_err(|e| format!("reading {}: {e}", files.key.display()))?;
        load_certified_key(&cert, &key)
    }

    /// Reload if either file changed. A broken new pair is logged and the old one kept, so a
    /// half-written rotation never takes the server down. Returns true when swapped.
    pub fn reload_if_changed(&self) -> bool {
        let stamps = (mtime(&self.files.cert), mtime(&self.files.key));
        {
            let Ok(cur) = self.current.read() else {
                return false;
            };
            if (cur.1, cur.2) == stamps {
                return false;
            }
        }
        match Self::read(&self.files) {
            Ok(ck) => {
                if let Ok(mut cur) = self.current.write() {
                    *cur = (Arc::new(ck), stamps.0, stamps.1);
                }
                tracing::info!(cert = %self.files.cert.display(), "serving certificate reloaded");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "new serving certificate not usable; keeping the old one");
                false
            }
        }
    }

    /// The certificate in force.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.0.clone())
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// Requests (never requires) a client certificate and checks only the handshake signature; see
/// the module documentation for why the chain is verified later.
#[derive(Debug)]
pub struct RequestClientCert {
    provider: Arc<CryptoProvider>,
}

impl RequestClientCert {
    /// A new verifier using the ring provider's signature algorithms.
    pub fn new() -> Self {
        RequestClientCert {
            provider: provider(),
        }
    }
}

impl Default for RequestClientCert {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // Empty hints: clients then offer whichever certificate they are configured with, which
        // is what kube-aggregator and kubectl do anyway.
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The rustls server configuration: TLS 1.2+, ALPN `h2` then `http/1.1`.
pub fn server_config(cert: Arc<ReloadingCert>) -> Result<rustls::ServerConfig, StartupError> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| StartupError::Tls(e.to_string()))?
        .with_client_cert_verifier(Arc::new(RequestClientCert::new()))
        .with_cert_resolver(cert);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}
