//! TLS serving of the fake: rustls (ring) with ALPN `h2` and `http/1.1`, an optional client
//! certificate verified against the client CA, and hyper-util's auto connection (HTTP/1.1 with
//! upgrades, or HTTP/2). Everything stops when the shutdown signal flips.

use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::authn::PeerIdentity;
use super::http::AbortConnection;
use super::router;
use super::state::Shared;
use crate::pki::CertKey;

/// The rustls crypto provider every TLS config of the suite uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses PEM certificates.
pub fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

/// A server config: `serving` as the certificate, client certificates optional but verified
/// against `client_ca_pem` when sent.
pub fn server_config(serving: &CertKey, client_ca_pem: &str) -> Arc<rustls::ServerConfig> {
    let mut roots = RootCertStore::empty();
    for c in certs(client_ca_pem) {
        roots.add(c).expect("client CA certificate");
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .expect("client verifier");
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).expect("serving key");
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&serving.cert_pem), key)
        .expect("serving certificate");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

/// `CN` and `O`s of a DER certificate.
pub fn subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    use x509_parser::prelude::*;
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_owned();
    let orgs = cert
        .subject()
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some((cn, orgs))
}

/// Accepts connections until shutdown.
pub async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(config);
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(_) => continue,
            },
            _ = crate::fake::stopped(&mut shutdown) => return,
        };
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let tls = tokio::select! {
                r = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)) => match r {
                    Ok(Ok(tls)) => tls,
                    _ => return,
                },
                _ = crate::fake::stopped(&mut shutdown) => return,
            };
            let peer = PeerIdentity {
                cert_user: tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| subject(c)),
            };
            let peer = Arc::new(peer);
            let service = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                let peer = peer.clone();
                async move {
                    let resp = router::handle(shared, peer, req).await;
                    if resp.extensions().get::<AbortConnection>().is_some() {
                        return Err(std::io::Error::other("connection aborted on purpose"));
                    }
                    Ok(resp)
                }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            tokio::select! {
                _ = conn => {}
                _ = crate::fake::stopped(&mut shutdown) => {}
            }
        });
    }
}
