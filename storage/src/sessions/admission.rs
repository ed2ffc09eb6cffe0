//! The per-user session limit (`--max-sessions-per-user`), held across replicas.
//!
//! A replica's own view of the records (its watch) lags the others' writes, so two replicas
//! admitting one user at the same instant could each admit up to the limit. Instead an attach
//! takes a place in a queue the cluster orders: it creates an admission Lease for its user (the
//! label `poddebug.dev/session-admission`, the user's `poddebug.dev/user` label as the session
//! records have), then lists, in one consistent read, every Lease with that user label — the
//! user's session records and the other admissions in flight — and counts:
//! - the user's session records that verify and are live (confirmed or still unconfirmed);
//! - the user's admissions created before its own (a lower `resourceVersion`: etcd orders every
//!   write of the cluster, and a consistent list after its own create sees every write before
//!   it), that are younger than [`ADMISSION_TTL`].
//!
//! Under the limit it is admitted, and its admission Lease is removed once its session record
//! exists (the record then counts; a list in between sees at least one of the two, never
//! neither). At the limit its admission Lease is removed and the attach refused. So of attaches
//! racing through any number of replicas at most the limit are admitted; some may be refused
//! that a later look would have admitted (an admission counted by another is refused itself),
//! never the other way round.
//!
//! An admission Lease a replica could not remove (it died) counts for [`ADMISSION_TTL`] and is
//! then removed by any replica's sweep. Admission Leases open nothing: a forged one only
//! refuses its user for that long, and writing them needs the Lease rights in the server's
//! namespace that no one but the server should hold.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, ListParams, PostParams};

use super::{SessionStore, Verified, label_value, rv_of};
use crate::StorageError;

/// The label of admission Leases.
pub const ADMISSION_LABEL: &str = "poddebug.dev/session-admission";
/// The annotation naming the admission's user whole (the label may be shortened).
const USER_ANNOTATION: &str = "poddebug.dev/session-admission-user";
/// How long an admission counts at most (its replica removes it within its attach's upstream
/// dial and record; one that died leaves it this long).
pub const ADMISSION_TTL: Duration = Duration::from_secs(60);

/// An attach's place under its user's limit, held until its session record exists; its Lease
/// is removed when released or dropped.
#[derive(Debug)]
pub struct AdmissionTicket {
    store: SessionStore,
    name: Option<String>,
}

impl AdmissionTicket {
    /// The session's record exists (or the attach failed): the admission no longer counts.
    pub async fn release(mut self) {
        if let Some(name) = self.name.take() {
            self.store.remove_admission(&name).await;
        }
    }
}

impl Drop for AdmissionTicket {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let store = self.store.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { store.remove_admission(&name).await });
            }
        }
    }
}

/// How many sessions a user holds, counted for an admission (module docs), when at the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverLimit {
    /// Sessions (and earlier admissions) counted.
    pub held: usize,
}

impl SessionStore {
    /// Admit one more attach of `user` under `limit` (module docs), for replica `replica`.
    pub async fn admit(
        &self,
        user: &str,
        replica: &str,
        limit: usize,
    ) -> Result<Result<AdmissionTicket, OverLimit>, StorageError> {
        let now = jiff::Timestamp::now();
        let user_label = label_value(user);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(format!("pa{:016x}", rand::random::<u64>())),
                namespace: Some(self.inner.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (ADMISSION_LABEL.to_owned(), "v1".to_owned()),
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        "poddebug-apiserver".to_owned(),
                    ),
                    (
                        format!("{}/user", poddebug_types::GROUP),
                        user_label.clone(),
                    ),
                ])),
                annotations: Some(BTreeMap::from([(
                    USER_ANNOTATION.to_owned(),
                    user.to_owned(),
                )])),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(replica.to_owned()),
                lease_duration_seconds: i32::try_from(ADMISSION_TTL.as_secs()).ok(),
                renew_time: Some(MicroTime(now)),
                ..Default::default()
            }),
        };
        let created = self
            .inner
            .api
            .create(&PostParams::default(), &lease)
            .await?;
        let name = created.metadata.name.clone().unwrap_or_default();
        let ticket = AdmissionTicket {
            store: self.clone(),
            name: Some(name.clone()),
        };
        let mine = rv_of(&created);
        let listed = self
            .inner
            .api
            .list(
                &ListParams::default()
                    .labels(&format!("{}/user={user_label}", poddebug_types::GROUP)),
            )
            .await?;
        let held = listed
            .items
            .iter()
            .filter(|l| l.metadata.name.as_deref() != Some(name.as_str()))
            .filter(|l| self.counts_for(l, user, mine, now))
            .count();
        if held >= limit {
            ticket.release().await;
            return Ok(Err(OverLimit { held }));
        }
        Ok(Ok(ticket))
    }

    /// Whether Lease `l` counts toward `user`'s limit for the admission created at `mine`.
    fn counts_for(&self, l: &Lease, user: &str, mine: u64, now: jiff::Timestamp) -> bool {
        let labels = l.metadata.labels.as_ref();
        if labels.is_some_and(|m| m.contains_key(ADMISSION_LABEL)) {
            let theirs = l
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(USER_ANNOTATION))
                .map(String::as_str);
            let recent = l
                .spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .and_then(|t| t.0.checked_add(ADMISSION_TTL).ok())
                .is_some_and(|until| until >= now);
            return theirs == Some(user) && rv_of(l) < mine && recent;
        }
        if labels.is_some_and(|m| m.contains_key(super::SESSION_LABEL)) {
            return match self.verify(l) {
                Verified::Session(s) | Verified::Unconfirmed(s) => {
                    s.record.user == user && s.is_live(now)
                }
                Verified::Nothing => false,
            };
        }
        false
    }

    /// Remove an admission Lease (best effort: one left behind stops counting after
    /// [`ADMISSION_TTL`] and is swept).
    pub(crate) async fn remove_admission(&self, name: &str) {
        match self.inner.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::debug!(admission = name, error = %e, "an admission Lease could not be removed; it is swept once expired")
            }
        }
    }

    /// Remove the admission Leases older than [`ADMISSION_TTL`] (their replica died before
    /// removing them).
    pub async fn sweep_admissions(&self, now: jiff::Timestamp) {
        let Ok(listed) = self
            .inner
            .api
            .list(&ListParams::default().labels(ADMISSION_LABEL))
            .await
        else {
            return;
        };
        for l in listed.items {
            let stale = l
                .spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .and_then(|t| t.0.checked_add(ADMISSION_TTL * 2).ok())
                .is_none_or(|until| until < now);
            if stale && let Some(name) = l.metadata.name.as_deref() {
                self.remove_admission(name).await;
            }
        }
    }
}
