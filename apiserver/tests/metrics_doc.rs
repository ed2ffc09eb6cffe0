//! The metric names the docs give are the ones `/metrics` serves: the list in
//! `docs/operator-guide.md` ("Health, readiness, metrics, logs") is exactly what the server
//! registers, and every other metric name a doc mentions is one of them. A metric added,
//! renamed or removed without the docs fails here, naming the difference.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use poddebug_apiserver::metrics::{DirectionLabels, Metrics};
use prometheus_client::metrics::counter::Counter;

/// The names `/metrics` serves, as a scrape shows them (a counter's samples end in `_total`).
/// A family with labels shows only once it has a child: each gets one.
fn registered() -> BTreeSet<String> {
    let m = Metrics::new();
    let disagreements = poddebug_storage::Disagreements::default();
    m.register_validation_disagreements(&disagreements);
    disagreements.count(poddebug_storage::Disagreement::ClusterAccepted);
    m.observe_request("get", "pods", 200, Duration::from_millis(1));
    m.observe_upstream("GET", Some(200), Duration::from_millis(1));
    m.count_eviction("evicted");
    m.stream_bytes
        .get_or_create(&DirectionLabels {
            direction: "in".to_owned(),
        })
        .inc();
    m.untrusted_records
        .note(poddebug_storage::RecordKind::Session, "s", "1", "test");
    let events_failed = Counter::default();
    m.register_events_failed(&events_failed);
    m.create_phases
        .phases(poddebug_storage::CreateKind::DebugContainer)
        .observe(poddebug_storage::Phase::Update, Duration::from_millis(1));
    let ignored: prometheus_client::metrics::family::Family<_, Counter> = Default::default();
    ignored
        .get_or_create(&poddebug_storage::IgnoredRequestLabels {
            reason: "unsigned".to_owned(),
        })
        .inc();
    let notifications: prometheus_client::metrics::family::Family<_, Counter> = Default::default();
    notifications
        .get_or_create(&poddebug_apiserver::webhook::OutcomeLabels {
            outcome: "sent".to_owned(),
        })
        .inc();
    m.register_requests(ignored, Some(notifications.clone()));
    let exported: prometheus_client::metrics::family::Family<_, Counter> = Default::default();
    exported
        .get_or_create(&poddebug_apiserver::audit::export::ExportLabels {
            sink: "stdout".to_owned(),
            outcome: "sent".to_owned(),
        })
        .inc();
    m.register_audit_export(exported, Some(notifications));
    let verifications: prometheus_client::metrics::family::Family<_, Counter> = Default::default();
    verifications
        .get_or_create(&poddebug_recording::recorder::verified::OutcomeLabels { outcome: "hashed" })
        .inc();
    m.register_recording_verifications(verifications);
    m.encode()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (name, kind) = (w.next()?, w.next()?);
            Some(match kind {
                "counter" if !name.ends_with("_total") => format!("{name}_total"),
                _ => name.to_owned(),
            })
        })
        .collect()
}

fn doc(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `poddebug_…` names in backquotes (`name` or `name{labels}`), test names (`a::b`) aside.
fn names_in(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|code| {
            let name = code.split('{').next().unwrap_or_default();
            (name.starts_with("poddebug_")
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .then(|| name.to_owned())
        })
        .collect()
}

#[test]
fn the_operator_guides_metric_list_is_what_the_server_registers() {
    let guide = doc("operator-guide.md");
    let start = guide
        .find("- `/metrics`")
        .expect("the /metrics entry of the operator guide");
    let end = guide[start..]
        .find("\n- Logs")
        .map_or(guide.len(), |i| start + i);
    let listed = names_in(&guide[start..end]);
    let served = registered();
    let undocumented: Vec<_> = served.difference(&listed).collect();
    let unserved: Vec<_> = listed.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "docs/operator-guide.md's /metrics list and the server disagree:\n  served, not listed: \
         {undocumented:?}\n  listed, not served: {unserved:?}"
    );
}

#[test]
fn every_metric_a_doc_names_is_served() {
    let served = registered();
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(&docs).expect("docs/") {
        let path = entry.expect("a doc").path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a doc");
        for name in names_in(&text) {
            if !served.contains(&name) {
                wrong.push(format!("{}: {name}", path.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "metric names in the docs that /metrics does not serve:\n{}",
        wrong.join("\n")
    );
}
