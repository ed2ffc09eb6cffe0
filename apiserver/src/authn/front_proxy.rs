//! The request-header (front proxy) authenticator: the aggregator proves itself with a client
//! certificate from the request-header CA, and names the user in `X-Remote-*` headers.
//!
//! The headers are believed only after the certificate verified and its CN is allowed; and
//! they are removed from every request, so a spoofed `X-Remote-User` never reaches anything.

use std::collections::BTreeMap;

use http::HeaderMap;
use percent_encoding::percent_decode_str;
use poddebug_storage::Caller;

use super::PeerCertificates;
use super::config::AuthConfig;

/// `Ok(None)`: not a front-proxy request (no certificate, no request-header CA, or the
/// certificate verified but no username header). `Err`: a certificate that fails verification or
/// whose CN is not allowed.
pub fn authenticate(
    cfg: &AuthConfig,
    headers: &HeaderMap,
    peer: &PeerCertificates,
) -> Result<Option<Caller>, String> {
    let Some(rh) = &cfg.request_header else {
        return Ok(None);
    };
    let Some((leaf, intermediates)) = peer.0.split_first() else {
        return Ok(None);
    };
    if rh.ca.verify(leaf, intermediates).is_err() {
        // Not signed by the front-proxy CA: maybe a direct client certificate; the x509
        // authenticator decides.
        return Ok(None);
    }
    let (cn, _) = super::x509::subject_of(leaf)?;
    if !rh.allowed_names.is_empty() && !rh.allowed_names.iter().any(|n| n == &cn) {
        return Err(format!(
            "x509: subject with cn={cn} is not in the allowed list"
        ));
    }
    let Some(user) = first_value(headers, &rh.username_headers) else {
        return Ok(None);
    };
    let uid = first_value(headers, &rh.uid_headers);
    let mut groups = Vec::new();
    for h in &rh.group_headers {
        for v in headers.get_all(h.as_str()) {
            if let Ok(s) = v.to_str() {
                groups.push(s.to_owned());
            }
        }
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let lname = name.as_str();
        for prefix in &rh.extra_prefixes {
            if let Some(key) = lname.strip_prefix(prefix.as_str()) {
                if key.is_empty() {
                    continue;
                }
                // Keys arrive lower-cased by HTTP and URL-escaped by the aggregator.
                let key = percent_decode_str(key).decode_utf8_lossy().to_lowercase();
                if let Ok(v) = value.to_str() {
                    extra.entry(key).or_default().push(v.to_owned());
                }
            }
        }
    }
    Ok(Some(super::with_authenticated_group(Caller {
        user,
        uid,
        groups,
        extra,
    })))
}

fn first_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names
        .iter()
        .filter_map(|h| headers.get(h.as_str()))
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .find(|v| !v.is_empty())
        .map(str::to_owned)
}

/// Remove every configured request header (user, uid, group, extra-prefixed) plus the default
/// `X-Remote-*` names, whatever the configuration says, so that no header a client made up is
/// ever seen downstream or forwarded upstream.
pub fn strip_headers(cfg: &AuthConfig, headers: &mut HeaderMap) {
    let mut names: Vec<String> = vec![
        "x-remote-user".into(),
        "x-remote-group".into(),
        "x-remote-uid".into(),
    ];
    let mut prefixes: Vec<String> = vec!["x-remote-extra-".into()];
    if let Some(rh) = &cfg.request_header {
        names.extend(rh.username_headers.iter().cloned());
        names.extend(rh.group_headers.iter().cloned());
        names.extend(rh.uid_headers.iter().cloned());
        prefixes.extend(rh.extra_prefixes.iter().cloned());
    }
    for n in &names {
        headers.remove(n.as_str());
    }
    let doomed: Vec<http::HeaderName> = headers
        .keys()
        .filter(|k| prefixes.iter().any(|p| k.as_str().starts_with(p.as_str())))
        .cloned()
        .collect();
    for k in doomed {
        headers.remove(k);
    }
}
