//! The expiry loop: while this replica leads (see [`crate::leader`]), every
//! `--debug-ttl-check-interval` it stops the debug containers whose time limit passed
//! ([`KubeBackend::expire_due`]), counts them in `poddebug_debug_containers_expired_total` and
//! writes an audit record for each. Losing the lead stops the loop at once, a round in progress
//! included (the stops it abandoned are made again by the next leader: the deadlines are on
//! the pods).
//!
//! In the same round it looks for debug containers that their stop (`DELETE`, or the expiry)
//! did not end within its bound ([`KubeBackend::unstoppable`], see storage's `unstoppable`):
//! each is reported once by whichever leader finds it first (Event, condition), and counted in
//! `poddebug_debug_containers_unstoppable_total` and audited here by that leader; every round
//! ends the live sessions still open on them, through their Leases, so that every replica
//! relaying one ends it; with `--unstoppable-action=evict` their pods are evicted, a refusal (a
//! PodDisruptionBudget) tried again with a backoff from one check interval doubling to
//! [`MAX_EVICTION_BACKOFF`]. Then the stop records no longer needed are removed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use poddebug_storage::{
    Caller, EXPIRY_USER, EvictionOutcome, Expired, ExpiryResult, KubeBackend, SessionStore,
    Unstoppable, UnstoppableAction,
};
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

/// The longest wait between two evictions of the same pod.
pub const MAX_EVICTION_BACKOFF: Duration = Duration::from_secs(300);

/// What the loop does about unstoppable debug containers (`--unstoppable-*`), and what it
/// remembers between rounds while it leads.
pub struct Unstoppables {
    /// The session records of the cluster: the sessions to end.
    pub sessions: SessionStore,
    /// What is done to their pods.
    pub action: UnstoppableAction,
    /// The first wait before an eviction is tried again.
    pub first_backoff: Duration,
    /// Per pod UID: when to try its eviction again, the next wait, and whether its refusal was
    /// reported.
    evictions: HashMap<String, (tokio::time::Instant, Duration, bool)>,
}

impl Unstoppables {
    /// Nothing remembered yet.
    pub fn new(sessions: SessionStore, action: UnstoppableAction, first_backoff: Duration) -> Self {
        Unstoppables {
            sessions,
            action,
            first_backoff,
            evictions: HashMap::new(),
        }
    }
}

/// The audit record of an unstoppable debug container's report.
fn unstoppable_record(u: &Unstoppable) -> AuditRecord {
    let caller = Caller {
        user: EXPIRY_USER.to_owned(),
        ..Caller::default()
    };
    let mut r = AuditRecord::new(Action::Unstoppable, &caller, &u.namespace, &u.pod, &u.name);
    r.image = Some(u.image.clone()).filter(|i| !i.is_empty());
    r.outcome = Some(u.message.clone());
    r
}

/// End the live sessions on `u`'s container (module docs): one termination request per session
/// not yet asked to end, each audited.
async fn end_sessions(sessions: &SessionStore, u: &Unstoppable, now: jiff::Timestamp) {
    let (live, _) = sessions.snapshot(now);
    for s in live.iter().filter(|s| {
        s.terminate.is_none()
            && s.record.namespace == u.namespace
            && s.record.pod == u.pod
            && s.record.ec_name == u.container
    }) {
        match sessions
            .request_termination(&s.record.id, EXPIRY_USER, now)
            .await
        {
            Ok(()) => {
                tracing::info!(session = %s.record.id, namespace = %u.namespace, pod = %u.pod,
                    container = %u.container, "ended a session on a debug container that did not end when stopped");
                let caller = Caller {
                    user: EXPIRY_USER.to_owned(),
                    ..Caller::default()
                };
                let mut r =
                    AuditRecord::new(Action::Terminate, &caller, &u.namespace, &u.pod, &u.name);
                r.session = Some(s.record.id.clone());
                r.outcome = Some("the debug container did not end when stopped".to_owned());
                r.emit();
            }
            Err(e) => {
                tracing::debug!(session = %s.record.id, error = %e, "could not end a session; trying again next round")
            }
        }
    }
}

/// Evict the pods of `found` whose turn it is (module docs); each pod once per round.
async fn evict(
    backend: &KubeBackend,
    metrics: &Metrics,
    state: &mut Unstoppables,
    found: &[Unstoppable],
) {
    let now = tokio::time::Instant::now();
    let mut tried = BTreeSet::new();
    for u in found {
        if u.pod_deleting || !tried.insert(u.pod_uid.clone()) {
            continue;
        }
        let (next, backoff, warned) =
            state
                .evictions
                .get(&u.pod_uid)
                .copied()
                .unwrap_or((now, state.first_backoff, false));
        if next > now {
            continue;
        }
        let later = |warned| {
            (
                now + backoff,
                (backoff * 2).min(MAX_EVICTION_BACKOFF),
                warned,
            )
        };
        match backend.evict_unstoppable(u, !warned).await {
            EvictionOutcome::Evicted => {
                metrics.count_eviction("evicted");
                tracing::warn!(namespace = %u.namespace, pod = %u.pod, container = %u.container,
                    "evicted the pod of a debug container that did not end when stopped");
                let caller = Caller {
                    user: EXPIRY_USER.to_owned(),
                    ..Caller::default()
                };
                let mut r = AuditRecord::new(Action::Evict, &caller, &u.namespace, &u.pod, &u.name);
                r.outcome =
                    Some("pod evicted: the debug container did not end when stopped".to_owned());
                r.emit();
                state.evictions.remove(&u.pod_uid);
            }
            EvictionOutcome::Blocked(why) => {
                metrics.count_eviction("blocked");
                tracing::warn!(namespace = %u.namespace, pod = %u.pod, reason = %why,
                    retry_in = ?backoff, "the eviction of a pod with an unstoppable debug container was refused; trying again later");
                state.evictions.insert(u.pod_uid.clone(), later(true));
            }
            EvictionOutcome::Gone => {
                state.evictions.remove(&u.pod_uid);
            }
            EvictionOutcome::Failed(why) => {
                metrics.count_eviction("failed");
                tracing::warn!(namespace = %u.namespace, pod = %u.pod, error = %why,
                    retry_in = ?backoff, "could not evict a pod with an unstoppable debug container; trying again later");
                state.evictions.insert(u.pod_uid.clone(), later(warned));
            }
        }
    }
    // Pods no longer found unstoppable (gone, ended) are forgotten.
    let current: BTreeSet<&str> = found.iter().map(|u| u.pod_uid.as_str()).collect();
    state
        .evictions
        .retain(|uid, _| current.contains(uid.as_str()));
}

/// The unstoppable part of a round (module docs).
async fn unstoppable_round(backend: &KubeBackend, metrics: &Metrics, state: &mut Unstoppables) {
    let now = jiff::Timestamp::now();
    match backend.unstoppable(now).await {
        Ok(found) => {
            for u in &found {
                if u.newly_reported {
                    metrics.debug_containers_unstoppable.inc();
                    tracing::warn!(namespace = %u.namespace, pod = %u.pod, container = %u.container,
                        requested_by = %u.requested_by, requested_at = %u.requested_at,
                        "a debug container did not end when stopped; it is unusable through poddebug");
                    unstoppable_record(u).emit();
                }
                end_sessions(&state.sessions, u, now).await;
            }
            if state.action == UnstoppableAction::Evict {
                evict(backend, metrics, state, &found).await;
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "expiry round: could not list pods for unstoppable debug containers")
        }
    }
    let removed = backend.collect_stop_records().await;
    if removed > 0 {
        tracing::info!(removed, "removed stop records no longer needed");
    }
}

/// One round at `now`; counts and audits what it did. Containers that cannot be stopped, and
/// those whose stop is in progress, are added to `refused` and not stopped again by this
/// leader (one warning, one Warning Event, one audit record and one count each, not one per
/// round); those a stop did not end are then the unstoppable part's.
async fn round(
    backend: &KubeBackend,
    metrics: &Metrics,
    refused: &mut BTreeSet<(String, String)>,
    unstoppables: &mut Unstoppables,
) {
    let result = backend.expire_due(jiff::Timestamp::now(), refused).await;
    metrics.expiry_rounds.inc();
    match result {
        Ok(done) => {
            for e in &done {
                match &e.result {
                    ExpiryResult::Terminated { .. } => {
                        metrics.debug_containers_expired.inc();
                    }
                    ExpiryResult::InProgress => {
                        metrics.debug_containers_expired.inc();
                        refused.insert((e.pod_uid.clone(), e.container.clone()));
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
    unstoppable_round(backend, metrics, unstoppables).await;
}

/// Run the loop for the life of the process: rounds every `interval` while `leading` is true.
/// Ends when the sender of `leading` is gone.
pub async fn run(
    backend: KubeBackend,
    mut leading: watch::Receiver<bool>,
    interval: Duration,
    metrics: Arc<Metrics>,
    sessions: SessionStore,
    action: UnstoppableAction,
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
            let mut unstoppables = Unstoppables::new(sessions.clone(), action, interval);
            loop {
                tick.tick().await;
                round(&backend, &metrics, &mut refused, &mut unstoppables).await;
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
    sessions: SessionStore,
) -> ExpiryTasks {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (leading_tx, leading_rx) = watch::channel(config.leader_election.is_none());
    tokio::spawn(run(
        backend,
        leading_rx.clone(),
        config.check_interval,
        metrics,
        sessions,
        config.unstoppable_action,
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
    fn an_unstoppable_container_is_audited_with_its_report() {
        let u = Unstoppable {
            namespace: "ns".into(),
            pod: "web".into(),
            pod_uid: "uid-1".into(),
            name: "dbg".into(),
            container: "dbg-x".into(),
            image: "busybox:1.36".into(),
            origin: poddebug_storage::StopOrigin::Delete,
            requested_by: "alice".into(),
            requested_at: "2026-01-02T03:04:05Z".parse().unwrap(),
            since: "2026-01-02T03:05:00Z".parse().unwrap(),
            message: "it did not end".into(),
            newly_reported: true,
            pod_deleting: false,
        };
        let r = unstoppable_record(&u);
        assert_eq!(r.action, Action::Unstoppable);
        assert_eq!(r.action.as_str(), "unstoppable");
        assert_eq!(r.user, EXPIRY_USER);
        assert_eq!(r.container, "dbg", "the debug name");
        assert_eq!(r.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(r.outcome.as_deref(), Some("it did not end"));
    }

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
