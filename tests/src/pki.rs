//! Test-time certificates: three CAs (cluster, front proxy, client) and leaf certificates signed
//! by them, written as PEM files into a private temporary directory that is removed on drop.
//!
//! Nothing here is checked in: every run mints fresh keys with rcgen (ring), so no certificate
//! can expire in the repository.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// The CN kube-apiserver's aggregator presents on its front-proxy client certificate.
pub const FRONT_PROXY_CLIENT_CN: &str = "front-proxy-client";

/// Which of the three authorities of a [`TestPki`] signs a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ca {
    /// Signs serving certificates (the fake kube-apiserver's and poddebug's own).
    Cluster,
    /// `--requestheader-client-ca-file`: signs the aggregator's front-proxy client certificate.
    FrontProxy,
    /// `--client-ca-file`: signs direct client certificates (CN = user, O = groups).
    Client,
}

impl Ca {
    fn file_stem(self) -> &'static str {
        match self {
            Ca::Cluster => "cluster-ca",
            Ca::FrontProxy => "front-proxy-ca",
            Ca::Client => "client-ca",
        }
    }
}

/// A certificate with its private key, as PEM strings and as files on disk.
#[derive(Clone)]
pub struct CertKey {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The PKCS#8 private key, PEM.
    pub key_pem: String,
    /// Where `cert_pem` was written.
    pub cert_path: PathBuf,
    /// Where `key_pem` was written.
    pub key_path: PathBuf,
}

impl fmt::Debug for CertKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertKey")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

struct Authority {
    params: CertificateParams,
    key: KeyPair,
    cert_pem: String,
    cert_path: PathBuf,
}

impl Authority {
    fn new(common_name: &str, dir: &Path, stem: &str) -> Authority {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("empty SAN list is valid");
        params.distinguished_name = dn(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("generate CA key");
        let cert = params.self_signed(&key).expect("self-sign CA");
        let cert_pem = cert.pem();
        let cert_path = dir.join(format!("{stem}.crt"));
        write_file(&cert_path, &cert_pem);
        Authority {
            params,
            key,
            cert_pem,
            cert_path,
        }
    }

    fn sign(&self, params: &CertificateParams, dir: &Path, stem: &str) -> CertKey {
        let key = KeyPair::generate().expect("generate leaf key");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params
            .signed_by(&key, &issuer)
            .expect("sign leaf certificate");
        let cert_pem = cert.pem();
        let key_pem = key.serialize_pem();
        let cert_path = dir.join(format!("{stem}.crt"));
        let key_path = dir.join(format!("{stem}.key"));
        write_file(&cert_path, &cert_pem);
        write_file(&key_path, &key_pem);
        CertKey {
            cert_pem,
            key_pem,
            cert_path,
            key_path,
        }
    }
}

/// The OID of `O` (organizationName).
const ORGANIZATION_OID: [u64; 4] = [2, 5, 4, 10];

/// A subject with `O=` per group and `CN`. rcgen keeps one value per attribute type, so the
/// second group is written under the same OID as a custom type; a third cannot be expressed.
fn dn(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    assert!(
        organizations.len() <= 2,
        "rcgen writes at most two O= attributes per subject; got {organizations:?}"
    );
    let mut dn = DistinguishedName::new();
    if let Some(o) = organizations.first() {
        dn.push(DnType::OrganizationName, *o);
    }
    if let Some(o) = organizations.get(1) {
        dn.push(DnType::CustomDnType(ORGANIZATION_OID.to_vec()), *o);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

fn write_file(path: &Path, contents: &str) {
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A directory under `std::env::temp_dir()` that is removed (with its contents) on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a fresh, uniquely named directory.
    pub fn new(prefix: &str) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "poddebug-tests-{prefix}-{}-{n}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

impl fmt::Debug for TempDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TempDir").field(&self.path).finish()
    }
}

struct Inner {
    dir: TempDir,
    cluster: Authority,
    front_proxy: Authority,
    client: Authority,
    leaf_counter: AtomicU64,
}

/// A throw-away PKI: a cluster CA, a front-proxy CA and a client CA, each written to
/// `<tempdir>/<name>-ca.crt`. Cheap to clone (shared); the directory goes with the last clone.
#[derive(Clone)]
pub struct TestPki {
    inner: Arc<Inner>,
}

impl fmt::Debug for TestPki {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestPki")
            .field("dir", &self.inner.dir.path())
            .finish()
    }
}

impl Default for TestPki {
    fn default() -> Self {
        TestPki::new()
    }
}

impl TestPki {
    /// Mints the three CAs.
    pub fn new() -> TestPki {
        let dir = TempDir::new("pki");
        let cluster = Authority::new("test-cluster-ca", dir.path(), Ca::Cluster.file_stem());
        let front_proxy = Authority::new(
            "test-front-proxy-ca",
            dir.path(),
            Ca::FrontProxy.file_stem(),
        );
        let client = Authority::new("test-client-ca", dir.path(), Ca::Client.file_stem());
        TestPki {
            inner: Arc::new(Inner {
                dir,
                cluster,
                front_proxy,
                client,
                leaf_counter: AtomicU64::new(0),
            }),
        }
    }

    fn authority(&self, ca: Ca) -> &Authority {
        match ca {
            Ca::Cluster => &self.inner.cluster,
            Ca::FrontProxy => &self.inner.front_proxy,
            Ca::Client => &self.inner.client,
        }
    }

    /// The directory holding every PEM file of this PKI.
    pub fn dir(&self) -> &Path {
        self.inner.dir.path()
    }

    /// PEM of a CA certificate.
    pub fn ca_pem(&self, ca: Ca) -> &str {
        &self.authority(ca).cert_pem
    }

    /// Path of a CA certificate file.
    pub fn ca_path(&self, ca: Ca) -> &Path {
        &self.authority(ca).cert_path
    }

    /// PEM of the cluster CA (signs serving certificates).
    pub fn cluster_ca_pem(&self) -> &str {
        self.ca_pem(Ca::Cluster)
    }

    /// PEM of the front-proxy CA (`--requestheader-client-ca-file`).
    pub fn front_proxy_ca_pem(&self) -> &str {
        self.ca_pem(Ca::FrontProxy)
    }

    /// PEM of the client CA (`--client-ca-file`).
    pub fn client_ca_pem(&self) -> &str {
        self.ca_pem(Ca::Client)
    }

    fn next_stem(&self, kind: &str) -> String {
        let n = self.inner.leaf_counter.fetch_add(1, Ordering::Relaxed);
        format!("{kind}-{n}")
    }

    /// A serving certificate signed by the cluster CA, valid for the given DNS names and IPs.
    pub fn serving_cert(&self, dns_names: &[&str], ips: &[IpAddr]) -> CertKey {
        self.serving_cert_from(Ca::Cluster, dns_names, ips)
    }

    /// A serving certificate for `localhost` and `127.0.0.1`, signed by the cluster CA.
    pub fn localhost_serving_cert(&self) -> CertKey {
        self.serving_cert(&["localhost"], &[IpAddr::from([127, 0, 0, 1])])
    }

    /// A serving certificate signed by any of the three CAs (for negative tests).
    pub fn serving_cert_from(&self, ca: Ca, dns_names: &[&str], ips: &[IpAddr]) -> CertKey {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("empty SAN list is valid");
        let cn = dns_names.first().copied().unwrap_or("serving");
        params.distinguished_name = dn(cn, &[]);
        for name in dns_names {
            let name = (*name)
                .try_into()
                .unwrap_or_else(|e| panic!("bad DNS name {name}: {e}"));
            params.subject_alt_names.push(SanType::DnsName(name));
        }
        for ip in ips {
            params.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let stem = self.next_stem("serving");
        self.authority(ca).sign(&params, self.dir(), &stem)
    }

    /// A client certificate with `CN=common_name` and one `O=` per group (at most two),
    /// signed by `ca`.
    pub fn client_cert(&self, ca: Ca, common_name: &str, groups: &[&str]) -> CertKey {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("empty SAN list is valid");
        params.distinguished_name = dn(common_name, groups);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let stem = self.next_stem("client");
        self.authority(ca).sign(&params, self.dir(), &stem)
    }

    /// A client certificate as [`TestPki::client_cert`] makes, valid only from `not_before` to
    /// `not_after` (year, month, day): for expired and not-yet-valid certificates.
    pub fn client_cert_valid_between(
        &self,
        ca: Ca,
        common_name: &str,
        not_before: (i32, u8, u8),
        not_after: (i32, u8, u8),
    ) -> CertKey {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("empty SAN list is valid");
        params.distinguished_name = dn(common_name, &[]);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        let stem = self.next_stem("client");
        self.authority(ca).sign(&params, self.dir(), &stem)
    }

    /// The aggregator's client certificate: `CN=front-proxy-client`, signed by the front-proxy CA.
    pub fn front_proxy_client_cert(&self) -> CertKey {
        self.client_cert(Ca::FrontProxy, FRONT_PROXY_CLIENT_CN, &[])
    }

    /// The `data` of the `kube-system/extension-apiserver-authentication` ConfigMap that a
    /// kube-apiserver using this PKI publishes (list values are JSON-array strings).
    pub fn auth_configmap_data(&self) -> std::collections::BTreeMap<String, String> {
        [
            ("client-ca-file", self.client_ca_pem().to_owned()),
            (
                "requestheader-client-ca-file",
                self.front_proxy_ca_pem().to_owned(),
            ),
            (
                "requestheader-allowed-names",
                format!(r#"["{FRONT_PROXY_CLIENT_CN}"]"#),
            ),
            (
                "requestheader-username-headers",
                r#"["X-Remote-User"]"#.to_owned(),
            ),
            (
                "requestheader-uid-headers",
                r#"["X-Remote-Uid"]"#.to_owned(),
            ),
            (
                "requestheader-group-headers",
                r#"["X-Remote-Group"]"#.to_owned(),
            ),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#.to_owned(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::*;

    #[test]
    fn client_cert_carries_cn_and_groups() {
        let pki = TestPki::new();
        let ck = pki.client_cert(Ca::Client, "alice", &["dev", "ops"]);
        assert!(ck.cert_path.exists() && ck.key_path.exists());
        let der =
            rustls_pki_types::CertificateDer::from_pem_slice(ck.cert_pem.as_bytes()).expect("pem");
        let (_, cert) = X509Certificate::from_der(&der).expect("der");
        let cn: Vec<_> = cert
            .subject()
            .iter_common_name()
            .filter_map(|a| a.as_str().ok())
            .collect();
        let o: Vec<_> = cert
            .subject()
            .iter_organization()
            .filter_map(|a| a.as_str().ok())
            .collect();
        assert_eq!(cn, ["alice"]);
        assert_eq!(o, ["dev", "ops"]);
    }

    #[test]
    fn directory_is_removed_with_last_clone() {
        let pki = TestPki::new();
        let dir = pki.dir().to_owned();
        let clone = pki.clone();
        drop(pki);
        assert!(dir.exists());
        drop(clone);
        assert!(!dir.exists());
    }

    use rustls_pki_types::pem::PemObject;
}
