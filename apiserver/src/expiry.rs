//! The expiry loop: while this replica leads (see [`crate::leader`]), every
//! `--debug-ttl-check-interval` it stops the debug containers whose time limit passed
//! ([`KubeBackend::expire_due`]), counts them in `poddebug_debug_containers_expired_total` and
//! writes an audit record for each. Losing the lead stops the loop at once, a round in progress
//! included (the stops it abandoned are made again by the next leader: the deadlines are on
//! the pods).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use poddebug_storage::{Caller, EXPIRY_USER, Expired, ExpiryResult, KubeBackend};
use tokio::sync::watch;

use crate::audit::{Action, AuditRecord};
use crate::metrics::Metrics;

/// The audit record of one expiry stop.
fn audit_record(e: &Expired) -> AuditRecord {
    let caller = Caller {
        user: EXPIRY_USER.to_owned(),
        ..Caller::default()
    };
    let mut r = AuditRecord::new(Action::Expire, &caller, &e.namespace, &e.pod, &e.name);
    r.image = Some(e.image.clone()).filter(|i| !i.is_empty());
    r.start = e.started_at;
    r.expires_at = Some(e.expires_at);
    match &e.result {
        ExpiryResult::Terminated { exit_code } => {
            r.exit_code = *exit_code;
            r.end = Some(jiff::Timestamp::now());
        }
        ExpiryResult::InProgress => r.outcome = Some("in progress".to_owned()),
        ExpiryResult::Failed(msg) => r.outcome = Some(format!("failed: {msg}")),
        ExpiryResult::Refused(msg) => r.outcome = Some(format!("cannot be stopped: {msg}")),
    }
    r
}

/// One round at `now`; counts and audits what it did. Containers that cannot be stopped are
/// added to `refused` and left alone from then on (one warning, one Warning Event, one audit
/// record and one count each, not one per round).
async fn round(backend: &KubeBackend, metrics: &Metrics, refused: &mut BTreeSet<(String, String)>) {
    let result = backend.expire_due(jiff::Timestamp::now(), refused).await;
    metrics.expiry_rounds.inc();
    match result {
        Ok(done) => {
            for e in &done {
                match &e.result {
                    ExpiryResult::Terminated { .. } | ExpiryResult::InProgress => {
                        metrics.debug_containers_expired.inc();
                    }
                    ExpiryResult::Failed(msg) => {
                        tracing::warn!(namespace = %e.namespace, pod = %e.pod, container = %e.container,
                            error = %msg, "could not stop an expired debug container; retrying next round");
                    }
                    ExpiryResult::Refused(msg) => {
                        metrics.debug_containers_not_stoppable.inc();
                        tracing::warn!(namespace = %e.namespace, pod = %e.pod, container = %e.container,
                            error = %msg, "an expired debug container cannot be stopped; it ends with its own exit or its pod");
                        refused.insert((e.pod_uid.clone(), e.container.clone()));
                    }
                }
                audit_record(e).emit();
            }
        }
        Err(e) => tracing::warn!(error = %e, "expiry round: could not list pods"),
    }
    // Copies and node debug pods end by deletion.
    match backend.expire_made_pods(jiff::Timestamp::now()).await {
        Ok(done) => {
            for p in &done {
                let caller = Caller {
                    user: EXPIRY_USER.to_owned(),
                    ..Caller::default()
                };
                let mut r = AuditRecord::new(Action::Expire, &caller, &p.namespace, &p.name, "");
                r.expires_at = Some(p.expires_at);
                match &p.error {
                    None => {
                        metrics.debug_pods_expired.inc();
                        r.outcome = Some(format!("{} pod deleted", p.kind));
                    }
                    Some(e) => {
                        tracing::warn!(namespace = %p.namespace, pod = %p.name, error = %e,
                            "could not delete an expired debug pod; retrying next round");
                        r.outcome = Some(format!("failed: {e}"));
                    }
                }
                r.emit();
            }
        }
        Err(e) => tracing::warn!(error = %e, "expiry round: could not list debug pods"),
    }
}

/// Run the loop for the life of the process: rounds every `interval` while `leading` is true.
/// Ends when the sender of `leading` is gone.
pub async fn run(
    backend: KubeBackend,
    mut leading: watch::Receiver<bool>,
    interval: Duration,
    metrics: Arc<Metrics>,
) {
    loop {
        if leading.wait_for(|l| *l).await.is_err() {
            return;
        }
        metrics.leader.set(1);
        tracing::info!("expiry loop started");
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let lost = async {
            // An error means the election is gone: stop leading too.
            let _ = leading.wait_for(|l| !*l).await;
        };
        let work = async {
            let mut refused = BTreeSet::new();
            loop {
                tick.tick().await;
                round(&backend, &metrics, &mut refused).await;
            }
        };
        tokio::select! {
            () = lost => {}
            () = work => {}
        }
        metrics.leader.set(0);
        tracing::info!("expiry loop stopped: no longer the leader");
    }
}

/// The running election and expiry loop; [`ExpiryTasks::stop`] on shutdown.
pub struct ExpiryTasks {
    stop: watch::Sender<bool>,
    /// Whether this replica leads (for other leader-only work: the recording retention).
    leading: watch::Receiver<bool>,
    election: Option<tokio::task::JoinHandle<()>>,
    /// Without election: the loop runs while this is kept.
    always_leading: Option<watch::Sender<bool>>,
}

impl ExpiryTasks {
    /// Whether this replica leads, as it changes.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Stop leading and release the Lease (waiting at most `within`).
    pub async fn stop(self, within: Duration) {
        let _ = self.stop.send(true);
        drop(self.always_leading);
        if let Some(e) = self.election {
            let _ = tokio::time::timeout(within, e).await;
        }
    }
}

/// Start the expiry loop from the flags: behind leader election on a Lease with `client` (the
/// server's identity) when `--leader-elect`, else on this replica alone.
pub fn spawn(
    config: &crate::config::Expiry,
    backend: KubeBackend,
    client: kube::Client,
    instance: &str,
    metrics: Arc<Metrics>,
) -> ExpiryTasks {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (leading_tx, leading_rx) = watch::channel(config.leader_election.is_none());
    tokio::spawn(run(
        backend,
        leading_rx.clone(),
        config.check_interval,
        metrics,
    ));
    let (election, always_leading) = if let Some(le) = &config.leader_election {
        let config = crate::leader::LeaseConfig {
            name: le.name.clone(),
            namespace: le.namespace.clone(),
            identity: crate::leader::identity(instance),
            lease_duration: le.lease_duration,
            renew_deadline: le.renew_deadline,
            retry_period: le.retry_period,
        };
        let election = tokio::spawn(crate::leader::run(client, config, leading_tx, stop_rx));
        (Some(election), None)
    } else {
        (None, Some(leading_tx))
    };
    ExpiryTasks {
        stop: stop_tx,
        leading: leading_rx,
        election,
        always_leading,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_is_audited_with_its_deadline_and_exit_code() {
        let e = Expired {
            namespace: "ns".into(),
            pod: "web".into(),
            name: "dbg".into(),
            container: "dbg".into(),
            image: "busybox:1.36".into(),
            started_at: Some("2026-01-02T03:00:00Z".parse().unwrap()),
            expires_at: "2026-01-02T03:04:05Z".parse().unwrap(),
            result: ExpiryResult::Terminated {
                exit_code: Some(143),
            },
            pod_uid: "uid-1".into(),
        };
        let r = audit_record(&e);
        assert_eq!(r.action, Action::Expire);
        assert_eq!(r.user, EXPIRY_USER);
        assert_eq!(r.container, "dbg");
        assert_eq!(r.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(r.exit_code, Some(143));
        assert_eq!(r.expires_at, Some(e.expires_at));
        assert!(r.end.is_some());
        let failed = audit_record(&Expired {
            result: ExpiryResult::Failed("boom".into()),
            ..e.clone()
        });
        assert_eq!(failed.outcome.as_deref(), Some("failed: boom"));
        assert_eq!(failed.exit_code, None);
        let refused = audit_record(&Expired {
            result: ExpiryResult::Refused("no sh".into()),
            ..e
        });
        assert_eq!(refused.outcome.as_deref(), Some("cannot be stopped: no sh"));
    }
}
