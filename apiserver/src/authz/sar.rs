//! The delegated authorizer: a SubjectAccessReview per decision, cached with separate TTLs for
//! allowed and denied answers (`--authorization-webhook-cache-authorized-ttl` and
//! `-unauthorized-ttl`, 10s each as the generic apiserver's delegating authorizer; 0 turns one
//! off), as kube-apiserver's webhook authorizer caches them. A decision is cached for exactly the
//! review it answers: the user, groups, uid and extra, and every attribute. When the cluster
//! cannot be asked, the answer is an error, never an allow, and nothing is cached.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use poddebug_storage::Caller;

use super::{ALWAYS_ALLOWED_GROUP, Attributes};

/// The answer for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Denied, or no authorizer had an opinion; carries the authorizer's reason (may be empty).
    Deny(String),
}

/// The authorizer could not be reached or answered garbage.
#[derive(Debug, thiserror::Error)]
#[error("authorization webhook unavailable: {0}")]
pub struct Unavailable(pub String);

const MAX_CACHE_ENTRIES: usize = 10_000;

/// SubjectAccessReview client with a decision cache.
pub struct SarAuthorizer {
    client: kube::Client,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: Mutex<HashMap<String, (Instant, Decision)>>,
}

impl SarAuthorizer {
    /// A new authorizer using `client` (from `--authorization-kubeconfig`).
    pub fn new(client: kube::Client, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        SarAuthorizer {
            client,
            allowed_ttl,
            denied_ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The review a request asks for.
    pub fn review_spec(user: &Caller, attrs: &Attributes) -> SubjectAccessReviewSpec {
        let (resource_attributes, non_resource_attributes) = match attrs {
            Attributes::Resource {
                verb,
                group,
                version,
                resource,
                subresource,
                namespace,
                name,
            } => (
                Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    version: Some(version.clone()),
                    resource: Some(resource.clone()),
                    subresource: Some(subresource.clone()).filter(|s| !s.is_empty()),
                    namespace: Some(namespace.clone()).filter(|s| !s.is_empty()),
                    name: Some(name.clone()).filter(|s| !s.is_empty()),
                    ..Default::default()
                }),
                None,
            ),
            Attributes::NonResource { path, verb } => (
                None,
                Some(NonResourceAttributes {
                    path: Some(path.clone()),
                    verb: Some(verb.clone()),
                }),
            ),
        };
        SubjectAccessReviewSpec {
            user: Some(user.user.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
            extra: Some(user.extra.clone().into_iter().collect())
                .filter(|e: &std::collections::BTreeMap<_, _>| !e.is_empty()),
            resource_attributes,
            non_resource_attributes,
        }
    }

    /// Decide, from the cache when fresh; a transient failure of the review is tried again
    /// ([`SAR_ATTEMPTS`] in all, [`SAR_BACKOFF`] doubling between them).
    pub async fn authorize(
        &self,
        user: &Caller,
        attrs: &Attributes,
    ) -> Result<Decision, Unavailable> {
        if user.groups.iter().any(|g| g == ALWAYS_ALLOWED_GROUP) {
            return Ok(Decision::Allow);
        }
        let spec = Self::review_spec(user, attrs);
        let key = serde_json::to_string(&spec).map_err(|e| Unavailable(e.to_string()))?;
        if let Ok(cache) = self.cache.lock()
            && let Some((at, d)) = cache.get(&key)
        {
            let ttl = if *d == Decision::Allow {
                self.allowed_ttl
            } else {
                self.denied_ttl
            };
            if at.elapsed() < ttl {
                return Ok(d.clone());
            }
        }
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        // A failure that may pass (a connection dropped, a 5xx or 429 of kube-apiserver
        // restarting) is retried with a short backoff, as kube-apiserver's own webhook
        // authorizer retries; a refusal of the review itself (a 4xx) is not.
        let mut attempt = 0;
        let started = Instant::now();
        let out = loop {
            match api.create(&kube::api::PostParams::default(), &review).await {
                Ok(out) => break out,
                // A review that failed slowly (a hung authorizer, timed out) is not tried again:
                // the request's caller would wait for every attempt.
                Err(e)
                    if attempt + 1 < SAR_ATTEMPTS
                        && transient(&e)
                        && started.elapsed() < SAR_RETRY_WINDOW =>
                {
                    tracing::debug!(error = %e, attempt, "SubjectAccessReview failed; retrying");
                    tokio::time::sleep(SAR_BACKOFF * (1 << attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(Unavailable(e.to_string())),
            }
        };
        let status = out
            .status
            .ok_or_else(|| Unavailable("SubjectAccessReview without status".to_owned()))?;
        if let Some(err) = status.evaluation_error.as_deref().filter(|e| !e.is_empty()) {
            tracing::debug!(error = %err, "authorizer evaluation error");
        }
        let decision = if status.allowed && status.denied != Some(true) {
            Decision::Allow
        } else {
            Decision::Deny(status.reason.unwrap_or_default())
        };
        let ttl = if decision == Decision::Allow {
            self.allowed_ttl
        } else {
            self.denied_ttl
        };
        if !ttl.is_zero()
            && let Ok(mut cache) = self.cache.lock()
        {
            if cache.len() >= MAX_CACHE_ENTRIES {
                let (a, d) = (self.allowed_ttl, self.denied_ttl);
                cache.retain(|_, (at, dec)| {
                    at.elapsed() < if *dec == Decision::Allow { a } else { d }
                });
                if cache.len() >= MAX_CACHE_ENTRIES {
                    cache.clear();
                }
            }
            cache.insert(key, (Instant::now(), decision.clone()));
        }
        Ok(decision)
    }
}

/// Attempts of one SubjectAccessReview before the authorizer is reported unavailable.
pub const SAR_ATTEMPTS: u32 = 3;
/// The first pause between attempts (then doubled).
pub const SAR_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);
/// Failures later than this after the first attempt are not retried.
pub const SAR_RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a failed review may succeed when tried again.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        // Connection, TLS handshake, timeouts: the request may not have reached anyone.
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}
