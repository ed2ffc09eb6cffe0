//! Counting the times the local validator and the cluster disagree about a new debug container.
//!
//! The cluster decides; each disagreement is logged at debug level and counted, so an operator
//! can see when the local rules lag behind the cluster (a newer version, a feature gate, a
//! webhook) by `poddebug_apiserver_validation_disagreements_total{outcome=...}`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// How the two disagreed. A fixed set, so the label's values are bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disagreement {
    /// The local validator refused, the cluster's dry run accepted: the create went on.
    ClusterAccepted,
    /// The local validator refused, the cluster's validation passed but its admission (Pod
    /// Security, a webhook) refused: the cluster's refusal was answered.
    ClusterAdmissionRefused,
    /// The local validator accepted, the cluster answered 422: its causes were answered.
    ClusterRejected,
}

impl Disagreement {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Disagreement::ClusterAccepted => "cluster_accepted",
            Disagreement::ClusterAdmissionRefused => "cluster_admission_refused",
            Disagreement::ClusterRejected => "cluster_rejected",
        }
    }
}

/// Labels of the counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DisagreementLabels {
    /// One of [`Disagreement::as_str`].
    pub outcome: String,
}

/// The counter family, cheap to clone (all clones count together).
#[derive(Clone, Debug, Default)]
pub struct Disagreements(Family<DisagreementLabels, Counter>);

impl Disagreements {
    /// Count one.
    pub fn count(&self, d: Disagreement) {
        self.0
            .get_or_create(&DisagreementLabels {
                outcome: d.as_str().to_owned(),
            })
            .inc();
    }

    /// How many of this kind so far.
    pub fn get(&self, d: Disagreement) -> u64 {
        self.0
            .get_or_create(&DisagreementLabels {
                outcome: d.as_str().to_owned(),
            })
            .get()
    }

    /// The family, to register in a metrics registry.
    pub fn family(&self) -> Family<DisagreementLabels, Counter> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_count_together() {
        let d = Disagreements::default();
        let other = d.clone();
        other.count(Disagreement::ClusterAccepted);
        d.count(Disagreement::ClusterAccepted);
        d.count(Disagreement::ClusterRejected);
        assert_eq!(d.get(Disagreement::ClusterAccepted), 2);
        assert_eq!(d.get(Disagreement::ClusterRejected), 1);
        assert_eq!(d.get(Disagreement::ClusterAdmissionRefused), 0);
    }
}
