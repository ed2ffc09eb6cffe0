//! The self-signed serving certificate written to `--cert-dir` when no certificate is given,
//! as the generic apiserver's `MaybeDefaultWithSelfSignedCerts` does.
//!
//! It must be valid for `<service>.<namespace>.svc`: the aggregator checks the serving
//! certificate against that name, not against the address it dials.

use std::path::Path;

use crate::error::StartupError;
use crate::serving::tls::CertFiles;

/// File names inside `--cert-dir`, the generic apiserver's.
pub const CERT_FILE: &str = "apiserver.crt";
/// Key file name inside `--cert-dir`.
pub const KEY_FILE: &str = "apiserver.key";

/// The DNS names and IPs the self-signed certificate covers.
pub fn subject_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Reuse the pair in `dir` if both files exist, else generate and persist a new one (key file
/// mode 0600).
pub fn ensure(dir: &Path, service: &str, namespace: &str) -> Result<CertFiles, StartupError> {
    let files = CertFiles {
        cert: dir.join(CERT_FILE),
        key: dir.join(KEY_FILE),
    };
    if files.cert.is_file() && files.key.is_file() {
        return Ok(files);
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| StartupError::Tls(format!("creating --cert-dir {}: {e}", dir.display())))?;
    let names = subject_names(service, namespace);
    let mut params = rcgen::CertificateParams::new(names)
        .map_err(|e| StartupError::Tls(format!("self-signed certificate: {e}")))?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("{service}.{namespace}.svc"),
    );
    params.not_before = rcgen::date_time_ymd(2024, 1, 1);
    params.not_after = rcgen::date_time_ymd(2124, 1, 1);
    let key = rcgen::KeyPair::generate()
        .map_err(|e| StartupError::Tls(format!("self-signed key: {e}")))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| StartupError::Tls(format!("self-signed certificate: {e}")))?;
    write_private(&files.key, key.serialize_pem().as_bytes())?;
    std::fs::write(&files.cert, cert.pem())
        .map_err(|e| StartupError::Tls(format!("writing {}: {e}", files.cert.display())))?;
    tracing::info!(dir = %dir.display(), "generated a self-signed serving certificate");
    Ok(files)
}

pub(crate) fn write_private(path: &Path, data: &[u8]) -> Result<(), StartupError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| StartupError::Tls(format!("writing {}: {e}", path.display())))?;
    f.write_all(data)
        .map_err(|e| StartupError::Tls(format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_once_and_reuses() {
        let dir = std::env::temp_dir().join(format!("poddebug-selfsigned-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files = ensure(&dir, "dbg", "ns").unwrap();
        let first = std::fs::read(&files.cert).unwrap();
        let again = ensure(&dir, "dbg", "ns").unwrap();
        assert_eq!(first, std::fs::read(&again.cert).unwrap());
        let ck =
            crate::serving::tls::load_certified_key(&first, &std::fs::read(&files.key).unwrap())
                .unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(ck.cert[0].as_ref()).unwrap();
        let san = parsed.subject_alternative_name().unwrap().unwrap().value;
        let text = format!("{san:?}");
        assert!(text.contains("dbg.ns.svc"), "{text}");
        assert!(text.contains("localhost"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
