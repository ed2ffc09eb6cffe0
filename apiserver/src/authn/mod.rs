//! Authentication, in the order of the Kubernetes delegating authenticator: front proxy
//! (request-header), client certificate, bearer token (TokenReview), then anonymous.
//!
//! A credential that is presented but wrong (a certificate no CA accepts, a token the
//! TokenReview refuses) is a 401: anonymous is only for requests that present nothing.

pub mod config;
pub mod front_proxy;
pub mod token;
pub mod x509;

use std::sync::Arc;

use http::HeaderMap;
use poddebug_storage::Caller;
use poddebug_types::ApiError;
use rustls_pki_types::CertificateDer;

use config::AuthConfigStore;
use token::TokenAuthenticator;

/// The group every authenticated user gets.
pub const GROUP_AUTHENTICATED: &str = "system:authenticated";
/// The anonymous user.
pub const USER_ANONYMOUS: &str = "system:anonymous";
/// The anonymous user's group.
pub const GROUP_UNAUTHENTICATED: &str = "system:unauthenticated";

/// How the user was authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Front-proxy certificate plus `X-Remote-*` headers (the aggregator).
    FrontProxy,
    /// Client certificate from `--client-ca-file`.
    ClientCert,
    /// Bearer token through a TokenReview.
    Token,
    /// No credentials.
    Anonymous,
}

impl Method {
    /// Name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::FrontProxy => "front-proxy",
            Method::ClientCert => "x509",
            Method::Token => "token",
            Method::Anonymous => "anonymous",
        }
    }
}

/// The result of authentication, put in the request's extensions.
#[derive(Clone, Debug)]
pub struct Authenticated {
    /// The user.
    pub user: Caller,
    /// How.
    pub method: Method,
}

/// The client certificate chain a TLS connection presented (empty when none).
#[derive(Clone, Debug, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// The authenticator chain.
#[derive(Clone)]
pub struct Authenticator {
    config: Arc<AuthConfigStore>,
    tokens: Option<Arc<TokenAuthenticator>>,
}

/// The subprotocol prefix browsers use to carry a bearer token on a WebSocket.
pub const WS_BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

impl Authenticator {
    /// A chain over the dynamic configuration and an optional token authenticator.
    pub fn new(config: Arc<AuthConfigStore>, tokens: Option<Arc<TokenAuthenticator>>) -> Self {
        Authenticator { config, tokens }
    }

    /// Authenticate a request and remove every credential header from it (request headers,
    /// `Authorization`, the WebSocket bearer subprotocol) so nothing downstream can trust or
    /// forward them.
    pub async fn authenticate(
        &self,
        headers: &mut HeaderMap,
        peer: &PeerCertificates,
    ) -> Result<Authenticated, ApiError> {
        let cfg = self.config.current();
        let mut errors: Vec<String> = Vec::new();

        let front = front_proxy::authenticate(&cfg, headers, peer);
        // Whatever the outcome, the request-header headers never survive authentication.
        front_proxy::strip_headers(&cfg, headers);
        match front {
            Ok(Some(user)) => {
                let _ = token::take_bearer(headers);
                return Ok(Authenticated {
                    user,
                    method: Method::FrontProxy,
                });
            }
            Ok(None) => {}
            Err(e) => errors.push(e),
        }

        match x509::authenticate(&cfg, peer) {
            Ok(Some(user)) => {
                let _ = token::take_bearer(headers);
                return Ok(Authenticated {
                    user,
                    method: Method::ClientCert,
                });
            }
            Ok(None) => {}
            Err(e) => errors.push(e),
        }

        if let Some(bearer) = token::take_bearer(headers) {
            match &self.tokens {
                _ if bearer.is_empty() => errors.push("invalid bearer token".to_owned()),
                Some(tokens) => match tokens.authenticate(&bearer).await {
                    Ok(user) => {
                        return Ok(Authenticated {
                            user,
                            method: Method::Token,
                        });
                    }
                    Err(token::TokenError::Rejected(msg)) => errors.push(msg),
                    Err(token::TokenError::Unavailable(msg)) => {
                        tracing::warn!(error = %msg, "token review failed");
                        errors.push("token review unavailable".to_owned());
                    }
                },
                None => errors.push("invalid bearer token".to_owned()),
            }
        }

        if !errors.is_empty() {
            tracing::debug!(errors = ?errors, "authentication failed");
            return Err(ApiError::Unauthorized("Unauthorized".to_owned()));
        }
        Ok(Authenticated {
            user: Caller {
                user: USER_ANONYMOUS.to_owned(),
                uid: None,
                groups: vec![GROUP_UNAUTHENTICATED.to_owned()],
                extra: Default::default(),
            },
            method: Method::Anonymous,
        })
    }

    /// The configuration store (for readiness).
    pub fn config(&self) -> &Arc<AuthConfigStore> {
        &self.config
    }
}

/// Add `system:authenticated` unless present, as the generic apiserver does for every
/// authenticated (non-anonymous) user.
pub fn with_authenticated_group(mut user: Caller) -> Caller {
    if !user.groups.iter().any(|g| g == GROUP_AUTHENTICATED) {
        user.groups.push(GROUP_AUTHENTICATED.to_owned());
    }
    user
}
