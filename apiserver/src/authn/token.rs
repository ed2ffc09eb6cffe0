//! Bearer tokens, checked with a TokenReview against the cluster and cached for
//! `--authentication-token-webhook-cache-ttl`. Browsers, which cannot set `Authorization` on a
//! WebSocket, send the token as the subprotocol `base64url.bearer.authorization.k8s.io.<token>`.
//!
//! The cache is keyed by a SHA-256 of the token, so tokens are never kept in memory longer than
//! the request, nor logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use http::{HeaderMap, HeaderValue, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use poddebug_storage::Caller;
use sha2::{Digest, Sha256};

use super::WS_BEARER_PROTOCOL_PREFIX;

/// Why a token did not authenticate.
#[derive(Debug, Clone)]
pub enum TokenError {
    /// The cluster said no.
    Rejected(String),
    /// The TokenReview could not be made.
    Unavailable(String),
}

/// Upper bound on cached entries; expired ones are dropped first.
const MAX_CACHE_ENTRIES: usize = 10_000;

/// SHA-256 of a token: the cache key.
type TokenKey = [u8; 32];

/// When a review was made, and its outcome (the user, or why not).
type CachedReview = (Instant, Result<Caller, String>);

/// TokenReview-backed authenticator with a TTL cache.
pub struct TokenAuthenticator {
    client: kube::Client,
    ttl: Duration,
    cache: Mutex<HashMap<TokenKey, CachedReview>>,
}

impl TokenAuthenticator {
    /// A new authenticator using `client` (from `--authentication-kubeconfig`).
    pub fn new(client: kube::Client, ttl: Duration) -> Self {
        TokenAuthenticator {
            client,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Authenticate a token, from the cache when fresh.
    pub async fn authenticate(&self, token: &str) -> Result<Caller, TokenError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Ok(cache) = self.cache.lock()
            && let Some((at, res)) = cache.get(&key)
            && at.elapsed() < self.ttl
        {
            return res.clone().map_err(TokenError::Rejected);
        }
        let res = self.review(token).await?;
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= MAX_CACHE_ENTRIES {
                let ttl = self.ttl;
                cache.retain(|_, (at, _)| at.elapsed() < ttl);
                if cache.len() >= MAX_CACHE_ENTRIES {
                    cache.clear();
                }
            }
            cache.insert(key, (Instant::now(), res.clone()));
        }
        res.map_err(TokenError::Rejected)
    }

    async fn review(&self, token: &str) -> Result<Result<Caller, String>, TokenError> {
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..Default::default()
        };
        let out = api
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(|e| TokenError::Unavailable(e.to_string()))?;
        let Some(status) = out.status else {
            return Ok(Err("invalid bearer token".to_owned()));
        };
        if status.authenticated != Some(true) {
            let msg = status
                .error
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "invalid bearer token".to_owned());
            return Ok(Err(msg));
        }
        let Some(u) = status.user else {
            return Ok(Err("invalid bearer token".to_owned()));
        };
        Ok(Ok(super::with_authenticated_group(Caller {
            user: u.username.unwrap_or_default(),
            uid: u.uid.filter(|s| !s.is_empty()),
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default().into_iter().collect(),
        })))
    }
}

/// Take the bearer token out of the request: the `Authorization: Bearer` header, or else the
/// WebSocket bearer subprotocol. Both credentials are removed whichever is used (the
/// subprotocol from `Sec-WebSocket-Protocol`, keeping the other offered protocols), so neither
/// can travel further. An offered subprotocol token that does not decode comes back as an
/// empty token, which no authenticator accepts.
pub fn take_bearer(headers: &mut HeaderMap) -> Option<String> {
    let from_header = take_authorization(headers);
    let from_subprotocol = take_subprotocol_bearer(headers);
    from_header.or(from_subprotocol)
}

/// Remove `Authorization`; its token when it is a non-empty Bearer one.
fn take_authorization(headers: &mut HeaderMap) -> Option<String> {
    let v = headers.remove(header::AUTHORIZATION)?;
    v.to_str()
        .ok()
        .and_then(|s| {
            let (scheme, rest) = s.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| rest.trim().to_owned())
        })
        .filter(|t| !t.is_empty())
}

/// Remove every `base64url.bearer.authorization.k8s.io.*` subprotocol; the first one's token
/// (empty when it does not decode) if any was offered.
fn take_subprotocol_bearer(headers: &mut HeaderMap) -> Option<String> {
    let protos: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let mut token = None;
    let mut offered = false;
    let mut kept = Vec::new();
    for p in protos {
        match p.strip_prefix(WS_BEARER_PROTOCOL_PREFIX) {
            Some(enc) => {
                offered = true;
                if token.is_none() {
                    token = LENIENT_BASE64URL
                        .decode(enc.trim_end_matches('='))
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                        .filter(|t| !t.is_empty());
                }
            }
            None => kept.push(p),
        }
    }
    if !offered {
        return None;
    }
    // The credential subprotocol never goes further, even when it is unusable.
    headers.remove(header::SEC_WEBSOCKET_PROTOCOL);
    if !kept.is_empty()
        && let Ok(v) = HeaderValue::from_str(&kept.join(", "))
    {
        headers.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
    }
    // A token that cannot be decoded is a wrong credential (401), not an absent one.
    Some(token.unwrap_or_default())
}

/// base64url as Go's `RawURLEncoding` decodes it: padding optional, trailing bits tolerated.
const LENIENT_BASE64URL: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_subprotocol_token_is_stripped_and_refused() {
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_str(&format!(
                "{WS_BEARER_PROTOCOL_PREFIX}!!!, v5.channel.k8s.io"
            ))
            .unwrap(),
        );
        assert_eq!(take_bearer(&mut h).as_deref(), Some(""));
        assert_eq!(
            h.get(header::SEC_WEBSOCKET_PROTOCOL).unwrap(),
            "v5.channel.k8s.io"
        );
        // Trailing bits Go tolerates ("dG9rZW5" has them) decode here too.
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_str(&format!("{WS_BEARER_PROTOCOL_PREFIX}dG9rZW5")).unwrap(),
        );
        assert_eq!(take_bearer(&mut h).as_deref(), Some("token"));
        assert!(h.get(header::SEC_WEBSOCKET_PROTOCOL).is_none());
    }

    #[test]
    fn bearer_header_is_taken_and_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc.def"),
        );
        assert_eq!(take_bearer(&mut h).as_deref(), Some("abc.def"));
        assert!(h.get(header::AUTHORIZATION).is_none());
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic Zm9v"),
        );
        assert_eq!(take_bearer(&mut h), None);
        assert!(
            h.get(header::AUTHORIZATION).is_none(),
            "other schemes are dropped too"
        );
    }

    #[test]
    fn the_subprotocol_credential_is_removed_when_a_header_token_is_used() {
        let enc = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("ws-token");
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer header-token"),
        );
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_str(&format!(
                "v5.channel.k8s.io, {WS_BEARER_PROTOCOL_PREFIX}{enc}"
            ))
            .unwrap(),
        );
        assert_eq!(take_bearer(&mut h).as_deref(), Some("header-token"));
        assert!(h.get(header::AUTHORIZATION).is_none());
        assert_eq!(
            h.get(header::SEC_WEBSOCKET_PROTOCOL).unwrap(),
            "v5.channel.k8s.io",
            "the unused credential must not stay in the request"
        );
    }

    #[test]
    fn websocket_subprotocol_token_is_taken_and_other_protocols_kept() {
        let enc = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("my-token");
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_str(&format!(
                "v5.channel.k8s.io, {WS_BEARER_PROTOCOL_PREFIX}{enc}, v4.channel.k8s.io"
            ))
            .unwrap(),
        );
        assert_eq!(take_bearer(&mut h).as_deref(), Some("my-token"));
        assert_eq!(
            h.get(header::SEC_WEBSOCKET_PROTOCOL).unwrap(),
            "v5.channel.k8s.io, v4.channel.k8s.io"
        );
    }
}
