//! Client certificates from `--client-ca-file` (or the cluster's `client-ca-file`): the common
//! name is the user, the organizations are the groups.

use poddebug_storage::Caller;

use super::PeerCertificates;
use super::config::AuthConfig;

/// `Ok(None)` when no certificate was presented or no client CA is configured; `Err` when a
/// certificate was presented and does not verify.
pub fn authenticate(cfg: &AuthConfig, peer: &PeerCertificates) -> Result<Option<Caller>, String> {
    let Some(ca) = &cfg.client_ca else {
        return Ok(None);
    };
    let Some((leaf, intermediates)) = peer.0.split_first() else {
        return Ok(None);
    };
    ca.verify(leaf, intermediates)
        .map_err(|e| format!("verifying certificate: {e}"))?;
    let (cn, orgs) = subject_of(leaf)?;
    if cn.is_empty() {
        return Err("client certificate has no common name".to_owned());
    }
    Ok(Some(super::with_authenticated_group(Caller {
        user: cn,
        uid: None,
        groups: orgs,
        extra: Default::default(),
    })))
}

/// Common name and organizations of a certificate's subject.
pub fn subject_of(cert: &[u8]) -> Result<(String, Vec<String>), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| format!("parsing certificate: {e}"))?;
    let subject = parsed.subject();
    let cn = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    let orgs = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(str::to_owned))
        .collect();
    Ok((cn, orgs))
}
