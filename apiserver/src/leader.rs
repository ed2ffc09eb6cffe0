//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's `leaderelection`
//! semantics and kube-controller-manager's flag names, so that exactly one replica runs the
//! expiry loop.
//!
//! - A candidate reads the Lease every retry period. It takes it (create, or an update
//!   conditional on the resourceVersion read) when there is none, when it names no holder, or
//!   when its record has not changed for `leaseDurationSeconds` as measured on this replica's
//!   own clock since it first saw that record (client-go's "observed time": clocks of replicas
//!   are never compared).
//! - The leader renews (`renewTime`) every retry period. Once it has failed to renew for the
//!   renew deadline, or sees another holder, it stops leading at once; it then becomes a
//!   candidate again.
//! - On shutdown a leader releases the Lease (holder emptied) so another replica takes over
//!   without waiting out the lease duration.
//!
//! Written with kube-rs rather than a leader-election crate: `kube-lease-manager` (the one
//! release compatible with kube 5) takes the Lease with server-side apply and strategic-merge
//! patches, needs `patch` on leases, has no renew deadline or retry period of its own, and
//! brings a second major version of `rand`; `kube-leader-election` needs kube 4. What is
//! needed is get/create/update on one object.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::time::Instant;

/// How the election runs (the `--leader-elect-*` flags).
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (`holderIdentity`).
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// Pause between tries.
    pub retry_period: Duration,
}

/// A unique identity for this replica: its name (pod name or host name) and a random suffix,
/// as client-go's `hostname_uuid`, so a restarted replica is a new holder.
pub fn identity(instance: &str) -> String {
    let suffix: u64 = rand::random();
    format!("{instance}_{suffix:016x}")
}

/// The namespace the server runs in: its service account's, else `fallback`.
pub fn own_namespace(fallback: &str) -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| fallback.to_owned())
}

/// What a try found.
#[derive(Debug, PartialEq, Eq)]
enum Try {
    /// This replica holds the Lease now.
    Held,
    /// Another replica holds it, validly.
    Other,
}

/// What identifies one version of the Lease's record: its holder and renew time.
type Record = (Option<String>, Option<String>);

/// The state of one elector.
struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The last record seen and when this replica first saw it.
    observed: Option<(Record, Instant)>,
}

fn micro_now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX).max(1)
}

impl Elector {
    /// One try to acquire or renew (client-go's `tryAcquireOrRenew`). Errors are the API's.
    async fn try_acquire_or_renew(&mut self) -> Result<Try, kube::Error> {
        let me = self.config.identity.clone();
        let now = micro_now();
        let current = match self.api.get_opt(&self.config.name).await? {
            Some(l) => l,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me),
                        lease_duration_seconds: Some(secs(self.config.lease_duration)),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(Try::Held),
                    // Another replica created it first.
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(Try::Other),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (
            holder.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
        );
        let seen_at = match &self.observed {
            Some((r, at)) if *r == record => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((record, at));
                at
            }
        };
        let held_by_me = holder.as_deref() == Some(me.as_str());
        if let Some(h) = &holder
            && !held_by_me
        {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.config.lease_duration, Duration::from_secs);
            if seen_at.elapsed() < duration {
                tracing::trace!(holder = %h, "the lease is held by another replica");
                return Ok(Try::Other);
            }
        }
        let mut lease = current;
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(me),
            lease_duration_seconds: Some(secs(self.config.lease_duration)),
            acquire_time: if held_by_me {
                spec.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if held_by_me {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..spec
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Try::Held),
            // Someone else wrote it since it was read.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Try::Other),
            Err(e) => Err(e),
        }
    }

    /// Empty the holder if this replica holds the Lease (on shutdown).
    async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = Some(micro_now());
        // A released lease is free at once for the next candidate (client-go sets 1s).
        spec.lease_duration_seconds = Some(1);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.config.name, "released the leader lease"),
            Err(e) => tracing::warn!(error = %e, "could not release the leader lease"),
        }
    }
}

/// Run the election until `stop` flips to true, publishing on `leading` whether this replica
/// leads. Every wait is bounded by the retry period, the lease duration or the renew deadline.
pub async fn run(
    client: kube::Client,
    config: LeaseConfig,
    leading: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut elector = Elector {
        api: Api::namespaced(client, &config.namespace),
        config,
        observed: None,
    };
    let retry = elector.config.retry_period;
    let renew_deadline = elector.config.renew_deadline;
    let stopped = |stop: &watch::Receiver<bool>| *stop.borrow();
    while !stopped(&stop) {
        // Candidate.
        let held = tokio::time::timeout(
            retry.max(Duration::from_secs(1)),
            elector.try_acquire_or_renew(),
        )
        .await;
        match held {
            Ok(Ok(Try::Held)) => {}
            Ok(Ok(Try::Other)) => {
                pause(retry, &mut stop).await;
                continue;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "leader election: could not read or take the lease");
                pause(retry, &mut stop).await;
                continue;
            }
            Err(_) => {
                pause(retry, &mut stop).await;
                continue;
            }
        }
        tracing::info!(identity = %elector.config.identity, lease = %elector.config.name,
            "became the leader");
        let _ = leading.send(true);
        // Leader: renew every retry period until the renew deadline passes without a renewal.
        let mut renewed_at = Instant::now();
        loop {
            pause(retry, &mut stop).await;
            if stopped(&stop) {
                break;
            }
            let left = renew_deadline.saturating_sub(renewed_at.elapsed());
            match tokio::time::timeout(left, elector.try_acquire_or_renew()).await {
                Ok(Ok(Try::Held)) => renewed_at = Instant::now(),
                Ok(Ok(Try::Other)) => {
                    tracing::warn!("leader election: another replica holds the lease");
                    break;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "leader election: renewal failed"),
                Err(_) => {}
            }
            if renewed_at.elapsed() >= renew_deadline {
                tracing::warn!(
                    "leader election: the lease was not renewed within the renew deadline"
                );
                break;
            }
        }
        let _ = leading.send(false);
        tracing::info!(identity = %elector.config.identity, "stopped leading");
        if stopped(&stop) {
            let _ =
                tokio::time::timeout(retry.max(Duration::from_secs(1)), elector.release()).await;
        }
    }
}

/// Sleep `d`, or less if `stop` flips.
async fn pause(d: Duration, stop: &mut watch::Receiver<bool>) {
    let gone = tokio::select! {
        _ = tokio::time::sleep(d) => false,
        r = stop.wait_for(|s| *s) => r.is_err(),
    };
    // No one can ask for a stop any more: just sleep.
    if gone {
        tokio::time::sleep(d).await;
    }
}
