//! Prometheus metrics, served at `/metrics` in the text exposition format.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of request metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// Kubernetes verb.
    pub verb: String,
    /// Resource label (`pods/debug`, `nonresource`).
    pub resource: String,
    /// HTTP status code.
    pub code: String,
}

/// Labels of latency histograms.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// Kubernetes verb.
    pub verb: String,
    /// Resource label.
    pub resource: String,
}

/// Labels of streamed-bytes counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `in` (client to container) or `out` (container to client).
    pub direction: String,
}

/// Labels of upstream call metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamLabels {
    /// HTTP method of the kube-apiserver call.
    pub method: String,
    /// Status code, or `error`.
    pub code: String,
}

/// Labels of the evictions of pods whose debug containers did not end.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    /// `evicted`, `blocked` (a PodDisruptionBudget) or `failed`.
    pub result: String,
}

/// Verbs that get their own label value.
const KNOWN_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "post",
    "put",
    "head",
    "options",
];
/// Resources that get their own label value.
const KNOWN_RESOURCES: &[&str] = &[
    "pods/debug",
    "pods/copy",
    "nodes/debug",
    "pods/attach",
    "pods/log",
    "poddebugcontainers",
    "debugprofiles",
    "nonresource",
];

/// `value` if it is one of `known`, else `other`.
fn bounded(value: &str, known: &[&'static str]) -> &'static str {
    known
        .iter()
        .copied()
        .find(|k| *k == value)
        .unwrap_or("other")
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Every metric of the server.
pub struct Metrics {
    registry: Mutex<Registry>,
    /// The metrics named after the product rather than the binary (`poddebug_…`), as the
    /// governance features document them.
    product: Mutex<Registry>,
    /// Debug containers the expiry loop stopped because their time limit passed.
    pub debug_containers_expired: Counter,
    /// Copies and node debug pods deleted at their time limit.
    pub debug_pods_expired: Counter,
    /// Debug containers whose time limit passed and that the expiry loop cannot stop.
    pub debug_containers_not_stoppable: Counter,
    /// Debug containers still running past the bound of their stop or time limit, counted once
    /// each when the leader reports them.
    pub debug_containers_unstoppable: Counter,
    /// Stop records in the server's namespace whose MAC did not verify (ignored).
    pub stop_records_rejected: Counter,
    /// Evictions of pods of unstoppable debug containers, by result.
    pub unstoppable_evictions: Family<EvictionLabels, Counter>,
    /// Rounds of the expiry loop made by this replica (while it leads).
    pub expiry_rounds: Counter,
    /// 1 while this replica holds the leader Lease (runs the expiry loop), else 0.
    pub leader: Gauge,
    /// Recordings the leader deleted because they were older than `--recording-retention`.
    pub recordings_deleted: Counter,
    /// Requests by verb, resource and code.
    pub requests: Family<RequestLabels, Counter>,
    /// Request latency by verb and resource.
    pub request_duration: Family<VerbLabels, Histogram, fn() -> Histogram>,
    /// Requests being served.
    pub inflight: Gauge,
    /// Attach/log streams open.
    pub active_streams: Gauge,
    /// Bytes streamed.
    pub stream_bytes: Family<DirectionLabels, Counter>,
    /// Stream lifetimes.
    pub stream_duration: Histogram,
    /// kube-apiserver call latency.
    pub upstream_duration: Family<UpstreamLabels, Histogram, fn() -> Histogram>,
    /// Sockets open (attach streams included).
    pub open_connections: Gauge,
    /// Connections closed at once because `--max-connections` was reached.
    pub refused_connections: Counter,
    /// Records read back from the cluster or the store whose MAC did not verify, by kind.
    pub untrusted_records: poddebug_storage::UntrustedRecords,
    /// Bytes the recordings of this replica hold (`--max-recording-memory`).
    pub recording_memory: Gauge,
    /// The time of each phase of a create (debug container, copy, node debug container).
    pub create_phases: poddebug_storage::PhaseMetrics,
}

impl Metrics {
    /// Register every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("poddebug_apiserver");
        let requests = Family::<RequestLabels, Counter>::default();
        let request_duration =
            Family::<VerbLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        let inflight = Gauge::default();
        let active_streams = Gauge::default();
        let stream_bytes = Family::<DirectionLabels, Counter>::default();
        let stream_duration = Histogram::new(exponential_buckets(0.1, 4.0, 10));
        let upstream_duration =
            Family::<UpstreamLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        registry.register(
            "requests",
            "API requests by verb, resource and HTTP code",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "API request latency by verb and resource",
            request_duration.clone(),
        );
        registry.register(
            "inflight_requests",
            "Requests being served",
            inflight.clone(),
        );
        registry.register(
            "active_streams",
            "Attach and log streams open",
            active_streams.clone(),
        );
        registry.register(
            "stream_bytes",
            "Bytes relayed by attach and log streams",
            stream_bytes.clone(),
        );
        registry.register(
            "stream_duration_seconds",
            "Lifetime of attach and log streams",
            stream_duration.clone(),
        );
        registry.register(
            "upstream_request_duration_seconds",
            "Latency of calls to the kube-apiserver",
            upstream_duration.clone(),
        );
        let open_connections = Gauge::default();
        let refused_connections = Counter::default();
        registry.register(
            "open_connections",
            "Client connections open, attach streams included",
            open_connections.clone(),
        );
        registry.register(
            "refused_connections",
            "Connections closed at once because --max-connections was reached",
            refused_connections.clone(),
        );
        let mut product = Registry::with_prefix("poddebug");
        let debug_containers_expired = Counter::default();
        let debug_pods_expired = Counter::default();
        product.register(
            "debug_pods_expired",
            "Copies of pods and node debug pods deleted because their time limit (ttlSeconds) passed",
            debug_pods_expired.clone(),
        );
        let debug_containers_not_stoppable = Counter::default();
        let debug_containers_unstoppable = Counter::default();
        let stop_records_rejected = Counter::default();
        let unstoppable_evictions = Family::<EvictionLabels, Counter>::default();
        product.register(
            "debug_containers_unstoppable",
            "Debug containers still running past the bound of their stop (DELETE) or time limit, reported once each",
            debug_containers_unstoppable.clone(),
        );
        product.register(
            "stop_records_rejected",
            "Stop records in the server's namespace ignored because their MAC did not verify",
            stop_records_rejected.clone(),
        );
        product.register(
            "unstoppable_evictions",
            "Evictions of pods whose debug containers did not end when stopped (--unstoppable-action=evict), by result",
            unstoppable_evictions.clone(),
        );
        let expiry_rounds = Counter::default();
        let leader = Gauge::default();
        let recordings_deleted = Counter::default();
        product.register(
            "recordings_deleted",
            "Session recordings deleted by the leader because they were older than --recording-retention",
            recordings_deleted.clone(),
        );
        product.register(
            "debug_containers_expired",
            "Debug containers stopped because their time limit (ttlSeconds) passed",
            debug_containers_expired.clone(),
        );
        product.register(
            "debug_containers_not_stoppable",
            "Debug containers whose time limit passed and that the server cannot stop (counted once per container and leader)",
            debug_containers_not_stoppable.clone(),
        );
        product.register(
            "expiry_rounds",
            "Rounds of the expiry loop this replica made while it led",
            expiry_rounds.clone(),
        );
        product.register(
            "leader",
            "1 while this replica holds the leader Lease and runs the expiry loop",
            leader.clone(),
        );
        let untrusted_records = poddebug_storage::UntrustedRecords::default();
        product.register(
            "untrusted_records",
            "Session records, termination requests and recording metadata read back whose MAC did not verify (ignored, or listed as unverified), by kind; each object version once",
            untrusted_records.family(),
        );
        let recording_memory = Gauge::default();
        product.register(
            "recording_memory_bytes",
            "Bytes the session recordings of this replica hold in memory (queued or not yet written to the store), bounded by --max-recording-memory",
            recording_memory.clone(),
        );
        let create_phases = poddebug_storage::PhaseMetrics::default();
        product.register(
            "create_phase_duration_seconds",
            "Time of each phase of creating a debug container, a copy or a node debug container (phases may overlap)",
            create_phases.family(),
        );
        Metrics {
            create_phases,
            registry: Mutex::new(registry),
            untrusted_records,
            recording_memory,
            product: Mutex::new(product),
            debug_containers_expired,
            debug_pods_expired,
            debug_containers_not_stoppable,
            debug_containers_unstoppable,
            stop_records_rejected,
            unstoppable_evictions,
            expiry_rounds,
            leader,
            recordings_deleted,
            requests,
            request_duration,
            inflight,
            active_streams,
            stream_bytes,
            stream_duration,
            upstream_duration,
            open_connections,
            refused_connections,
        }
    }

    /// Record one finished request. Verb and resource are folded onto a fixed set first: they
    /// come from the request's method and path, and a label per made-up value would let any
    /// client, even an unauthenticated one, grow the server's memory without bound.
    pub fn observe_request(&self, verb: &str, resource: &str, code: u16, elapsed: Duration) {
        let (verb, resource) = (
            bounded(verb, KNOWN_VERBS),
            bounded(resource, KNOWN_RESOURCES),
        );
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.to_owned(),
                resource: resource.to_owned(),
                code: code.to_string(),
            })
            .inc();
        self.request_duration
            .get_or_create(&VerbLabels {
                verb: verb.to_owned(),
                resource: resource.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Record one kube-apiserver call.
    pub fn observe_upstream(&self, method: &str, code: Option<u16>, elapsed: Duration) {
        let code = code.map_or_else(|| "error".to_owned(), |c| c.to_string());
        self.upstream_duration
            .get_or_create(&UpstreamLabels {
                method: method.to_owned(),
                code,
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Count one eviction of the pod of an unstoppable debug container.
    pub fn count_eviction(&self, result: &str) {
        self.unstoppable_evictions
            .get_or_create(&EvictionLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    /// Serve the storage's count of local/cluster validation disagreements as
    /// `poddebug_apiserver_validation_disagreements_total{outcome}`.
    pub fn register_validation_disagreements(&self, d: &poddebug_storage::Disagreements) {
        if let Ok(mut reg) = self.registry.lock() {
            reg.register(
                "validation_disagreements",
                "Debug containers the local validator and the cluster judged differently, by outcome",
                d.family(),
            );
        }
    }

    /// The debug requests' counters: records ignored (unsigned, forged, replayed) and, when
    /// a notification webhook is configured, notifications (sent, failed, dropped).
    pub fn register_requests(
        &self,
        ignored: Family<poddebug_storage::IgnoredRequestLabels, Counter>,
        notifications: Option<Family<crate::webhook::OutcomeLabels, Counter>>,
    ) {
        if let Ok(mut reg) = self.registry.lock() {
            reg.register(
                "debug_request_records_ignored",
                "Debug request records read back from the cluster and ignored, by reason (unsigned, forged, replayed)",
                ignored,
            );
            if let Some(n) = notifications {
                reg.register(
                    "debug_request_notifications",
                    "Notifications of debug requests, by outcome (sent, failed, dropped)",
                    n,
                );
            }
        }
    }

    /// The audit export's counters: events by sink and outcome (stdout; the webhook's drops),
    /// and the webhook's deliveries by outcome.
    pub fn register_audit_export(
        &self,
        events: Family<crate::audit::export::ExportLabels, Counter>,
        webhook: Option<Family<crate::webhook::OutcomeLabels, Counter>>,
    ) {
        if let Ok(mut reg) = self.product.lock() {
            reg.register(
                "audit_events",
                "Audit events exported as OCSF to stdout, by sink and outcome (sent, failed, dropped)",
                events,
            );
            if let Some(w) = webhook {
                reg.register(
                    "audit_webhook_events",
                    "Audit events POSTed to --audit-webhook, by outcome (sent, failed, dropped)",
                    w,
                );
            }
        }
    }

    /// Verifications of recordings (`status.verification`) by outcome: `hashed` (every part
    /// read) or `reused` (the verdict of unchanged objects).
    pub fn register_recording_verifications(
        &self,
        counts: Family<poddebug_recording::recorder::verified::OutcomeLabels, Counter>,
    ) {
        if let Ok(mut reg) = self.product.lock() {
            reg.register(
                "recording_verifications",
                "Recordings verified on read, by outcome: hashed (every part read) or reused (the verdict reached on the same unchanged objects)",
                counts,
            );
        }
    }

    /// Serve the storage's count of Events it could not write as `poddebug_events_failed_total`.
    pub fn register_events_failed(&self, c: &Counter) {
        if let Ok(mut reg) = self.product.lock() {
            reg.register(
                "events_failed",
                "Events about debug containers that could not be written (refused, failed or timed out; each is logged)",
                c.clone(),
            );
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        if let (Ok(reg), Ok(product)) = (self.registry.lock(), self.product.lock())
            && (encode_registry(&mut out, &reg).is_err()
                || encode_registry(&mut out, &product).is_err()
                || encode_eof(&mut out).is_err())
        {
            out.clear();
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_every_family() {
        let m = Metrics::new();
        m.observe_request("create", "pods/debug", 201, Duration::from_millis(3));
        m.observe_upstream("PUT", Some(200), Duration::from_millis(2));
        m.active_streams.inc();
        let text = m.encode();
        assert!(text.contains("poddebug_apiserver_requests_total{verb=\"create\",resource=\"pods/debug\",code=\"201\"} 1"), "{text}");
        assert!(
            text.contains("poddebug_apiserver_request_duration_seconds_bucket"),
            "{text}"
        );
        assert!(
            text.contains("poddebug_apiserver_active_streams 1"),
            "{text}"
        );
        assert!(text.contains("poddebug_apiserver_upstream_request_duration_seconds_count{method=\"PUT\",code=\"200\"} 1"), "{text}");
        m.debug_containers_expired.inc();
        let text = m.encode();
        assert!(
            text.contains("\npoddebug_debug_containers_expired_total 1\n"),
            "{text}"
        );
        assert!(text.contains("\npoddebug_leader 0\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn made_up_verbs_and_resources_share_one_label() {
        let m = Metrics::new();
        for i in 0..100 {
            m.observe_request(
                &format!("verb{i}"),
                &format!("things{i}"),
                404,
                Duration::from_millis(1),
            );
        }
        let text = m.encode();
        assert!(text.contains("poddebug_apiserver_requests_total{verb=\"other\",resource=\"other\",code=\"404\"} 100"), "{text}");
        assert!(!text.contains("things1"), "{text}");
    }
}
