//! Where the time of a create goes: each phase of creating a debug container, a copy or a node
//! debug container (authentication, each SubjectAccessReview, the reads, validation, policy, the
//! write, the wait, the Event) runs in a tracing span of its own and is observed in
//! `poddebug_create_phase_duration_seconds{resource, phase}`.
//!
//! Phases may overlap (the reviews a create needs run together, the pod read runs beside
//! authorization, the Event after the answer), so their times do not add up to the request's:
//! `poddebug_apiserver_request_duration_seconds` has that.

use std::future::Future;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tracing::Instrument;

/// What a create makes: the `resource` label.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CreateKind {
    /// A debug container (`pods/POD/debug/NAME`).
    #[default]
    DebugContainer,
    /// A copy of a pod (`pods/POD/copy`).
    Copy,
    /// A node debug container (`nodes/NODE/debug/NAME`).
    NodeDebugContainer,
}

impl CreateKind {
    /// The label value: the resource and subresource the create is authorized as.
    pub fn as_str(self) -> &'static str {
        match self {
            CreateKind::DebugContainer => "pods/debug",
            CreateKind::Copy => "pods/copy",
            CreateKind::NodeDebugContainer => "nodes/debug",
        }
    }
}

/// One phase of a create. A fixed set, so the label's values are bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Authenticating the request (front proxy, client certificate or TokenReview).
    Authentication,
    /// Authorizing the request's own attributes (with the core equivalents, all at once).
    Authorization,
    /// The SubjectAccessReview of the request's own attributes (or its cached decision).
    ReviewRequest,
    /// A SubjectAccessReview of a core equivalent (`--require-core-permissions`).
    ReviewCoreEquivalent,
    /// A SubjectAccessReview of `use` on a profile.
    ReviewProfileUse,
    /// The SubjectAccessReview of the core `create pods` a copy needs.
    ReviewCreatePods,
    /// The caller's checks after validation: the profile permissions and the moderated-shell
    /// rule (its reviews are observed on their own as well).
    Admission,
    /// Reading the pod (a debug container's, a copy's original).
    PodRead,
    /// Reading the node (a node debug container).
    NodeRead,
    /// Planning what is added (names, the container, the update's body) on the pod read.
    Plan,
    /// Validating what is added, as kube-apiserver would (beside the update when every check
    /// passed).
    Validation,
    /// The server-side dry run of the update (only when the local validator refuses).
    DryRun,
    /// The server policy (`--allowed-images`, `--max-debug-containers-per-pod`).
    Policy,
    /// The `pods/ephemeralcontainers` update that adds the debug container.
    Update,
    /// The pause after a conflicting update, before the pod is read again.
    ConflictPause,
    /// Creating the pod (a copy, a node debug container).
    Create,
    /// `?wait=true`: waiting for the container to run.
    Wait,
    /// Writing the Event (after the answer).
    Event,
}

impl Phase {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Authentication => "authentication",
            Phase::Authorization => "authorization",
            Phase::ReviewRequest => "review_request",
            Phase::ReviewCoreEquivalent => "review_core_equivalent",
            Phase::ReviewProfileUse => "review_profile_use",
            Phase::ReviewCreatePods => "review_create_pods",
            Phase::Admission => "admission",
            Phase::PodRead => "pod_read",
            Phase::NodeRead => "node_read",
            Phase::Plan => "plan",
            Phase::Validation => "validation",
            Phase::DryRun => "dry_run",
            Phase::Policy => "policy",
            Phase::Update => "update",
            Phase::ConflictPause => "conflict_pause",
            Phase::Create => "create",
            Phase::Wait => "wait",
            Phase::Event => "event",
        }
    }

    /// Every phase, in the order a create meets them.
    pub const ALL: [Phase; 18] = [
        Phase::Authentication,
        Phase::Authorization,
        Phase::ReviewRequest,
        Phase::ReviewCoreEquivalent,
        Phase::ReviewProfileUse,
        Phase::ReviewCreatePods,
        Phase::Admission,
        Phase::PodRead,
        Phase::NodeRead,
        Phase::Plan,
        Phase::Validation,
        Phase::DryRun,
        Phase::Policy,
        Phase::Update,
        Phase::ConflictPause,
        Phase::Create,
        Phase::Wait,
        Phase::Event,
    ];

    /// The phase's span (debug level, named after the phase; span names are static).
    fn span(self, kind: CreateKind) -> tracing::Span {
        let r = kind.as_str();
        match self {
            Phase::Authentication => tracing::debug_span!("authentication", resource = r),
            Phase::Authorization => tracing::debug_span!("authorization", resource = r),
            Phase::ReviewRequest => tracing::debug_span!("review_request", resource = r),
            Phase::ReviewCoreEquivalent => {
                tracing::debug_span!("review_core_equivalent", resource = r)
            }
            Phase::ReviewProfileUse => tracing::debug_span!("review_profile_use", resource = r),
            Phase::ReviewCreatePods => tracing::debug_span!("review_create_pods", resource = r),
            Phase::Admission => tracing::debug_span!("admission", resource = r),
            Phase::PodRead => tracing::debug_span!("pod_read", resource = r),
            Phase::NodeRead => tracing::debug_span!("node_read", resource = r),
            Phase::Plan => tracing::debug_span!("plan", resource = r),
            Phase::Validation => tracing::debug_span!("validation", resource = r),
            Phase::DryRun => tracing::debug_span!("dry_run", resource = r),
            Phase::Policy => tracing::debug_span!("policy", resource = r),
            Phase::Update => tracing::debug_span!("update", resource = r),
            Phase::ConflictPause => tracing::debug_span!("conflict_pause", resource = r),
            Phase::Create => tracing::debug_span!("create", resource = r),
            Phase::Wait => tracing::debug_span!("wait", resource = r),
            Phase::Event => tracing::debug_span!("event", resource = r),
        }
    }
}

/// Labels of the histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// One of [`CreateKind::as_str`].
    pub resource: String,
    /// One of [`Phase::as_str`].
    pub phase: String,
}

fn phase_histogram() -> Histogram {
    // 50 µs to 26 s: a cached authorization takes microseconds, a wait up to minutes.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

/// The histogram family, cheap to clone (all clones observe together); register it once.
#[derive(Clone, Debug)]
pub struct PhaseMetrics(Family<PhaseLabels, Histogram, fn() -> Histogram>);

impl Default for PhaseMetrics {
    fn default() -> Self {
        PhaseMetrics(Family::new_with_constructor(
            phase_histogram as fn() -> Histogram,
        ))
    }
}

impl PhaseMetrics {
    /// The family, to register in a metrics registry.
    pub fn family(&self) -> Family<PhaseLabels, Histogram, fn() -> Histogram> {
        self.0.clone()
    }

    /// The phases of one create of `kind`.
    pub fn phases(&self, kind: CreateKind) -> Phases {
        Phases {
            metrics: self.clone(),
            kind,
        }
    }
}

/// The phases of one create: where each is observed, and what the create makes.
#[derive(Clone, Debug, Default)]
pub struct Phases {
    metrics: PhaseMetrics,
    kind: CreateKind,
}

impl Phases {
    /// What the create makes.
    pub fn kind(&self) -> CreateKind {
        self.kind
    }

    /// Observe that `phase` took `elapsed`.
    pub fn observe(&self, phase: Phase, elapsed: Duration) {
        self.metrics
            .0
            .get_or_create(&PhaseLabels {
                resource: self.kind.as_str().to_owned(),
                phase: phase.as_str().to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Run `fut` as `phase`: in the phase's span, its time observed when it completes (a
    /// phase given up half-way, its request ended, is not).
    pub async fn time<F: Future>(&self, phase: Phase, fut: F) -> F::Output {
        let start = Instant::now();
        let out = fut.instrument(phase.span(self.kind)).await;
        self.observe(phase, start.elapsed());
        out
    }

    /// Run `f` as `phase`, as [`Phases::time`] does for a future.
    pub fn time_sync<T>(&self, phase: Phase, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = phase.span(self.kind).in_scope(f);
        self.observe(phase, start.elapsed());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_has_its_own_label_value() {
        let names: std::collections::BTreeSet<&str> =
            Phase::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names.len(), Phase::ALL.len());
    }

    /// The `_count` of `kind`'s `phase` in the exposition of `m`.
    fn count(m: &PhaseMetrics, kind: CreateKind, phase: Phase) -> u64 {
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register("p", "", m.family());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).expect("encodes");
        let line = format!(
            "p_count{{resource=\"{}\",phase=\"{}\"}} ",
            kind.as_str(),
            phase.as_str()
        );
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |v| v.trim().parse().expect("a count"))
    }

    #[tokio::test]
    async fn phases_are_observed_per_kind_and_clones_observe_together() {
        let m = PhaseMetrics::default();
        let copy = m.phases(CreateKind::Copy);
        let again = copy.clone();
        assert_eq!(copy.time(Phase::PodRead, async { 7 }).await, 7);
        again.time_sync(Phase::Validation, || ());
        again.time_sync(Phase::Validation, || ());
        assert_eq!(count(&m, CreateKind::Copy, Phase::PodRead), 1);
        assert_eq!(count(&m, CreateKind::Copy, Phase::Validation), 2);
        assert_eq!(count(&m, CreateKind::DebugContainer, Phase::PodRead), 0);
    }
}
