//! The delegated authorizer: a SubjectAccessReview per decision, cached with separate TTLs for
//! allowed and denied answers. When the cluster cannot be asked, the answer is an error, never
//! an allow.

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

    /// Decide, from the cache when fresh.
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
        let out = api
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(|e| Unavailable(e.to_string()))?;
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
        if let Ok(mut cache) = self.cache.lock() {
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
