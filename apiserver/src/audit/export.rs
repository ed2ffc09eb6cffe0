//! Where the OCSF events of the audit trail go (`--audit-stdout`, `--audit-webhook`): each
//! sink has a bounded queue served by a task of its own, so that no request ever waits for a
//! sink; a full queue drops the event, counted (`poddebug_audit_events_total{sink="stdout",
//! outcome}` and `poddebug_audit_webhook_events_total{outcome}`, outcome `sent`, `failed` or
//! `dropped`). The webhook retries failed POSTs with backoff ([`crate::webhook`]); stdout gets
//! one JSON line per event (the logs go to stderr).
//!
//! The exporter is installed once, at start-up ([`install`]); records emitted before that, or
//! by a server started without a sink, are only logged.

use std::sync::OnceLock;

use jiff::Timestamp;
use poddebug_types::recording::RecordingCommand;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;

use super::AuditRecord;
use super::ocsf;
use crate::webhook::WebhookQueue;

/// Lines waiting for stdout, at most.
const STDOUT_QUEUE: usize = 1024;

/// Labels of the counter of exported events.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExportLabels {
    /// `stdout` or `webhook`.
    pub sink: String,
    /// `sent`, `failed` (the webhook's tries were spent) or `dropped` (the queue was full).
    pub outcome: String,
}

/// The sinks of the audit events.
#[derive(Debug)]
pub struct Exporter {
    stdout: Option<mpsc::Sender<Vec<u8>>>,
    webhook: Option<WebhookQueue>,
    counts: Family<ExportLabels, Counter>,
}

static EXPORTER: OnceLock<Exporter> = OnceLock::new();

fn count(counts: &Family<ExportLabels, Counter>, sink: &str, outcome: &str) {
    counts
        .get_or_create(&ExportLabels {
            sink: sink.to_owned(),
            outcome: outcome.to_owned(),
        })
        .inc();
}

impl Exporter {
    /// Start the sinks asked for (inside a Tokio runtime); `None` when there are none.
    pub fn start(stdout: bool, webhook: Option<url::Url>) -> Option<Exporter> {
        if !stdout && webhook.is_none() {
            return None;
        }
        let counts: Family<ExportLabels, Counter> = Family::default();
        // A thread of its own writes stdout: a blocked pipe stops only this writer.
        let stdout = stdout.then(|| {
            let (tx, mut rx) = mpsc::channel::<Vec<u8>>(STDOUT_QUEUE);
            let counts = counts.clone();
            let spawned = std::thread::Builder::new()
                .name("audit-stdout".to_owned())
                .spawn(move || {
                    use std::io::Write;
                    let out = std::io::stdout();
                    while let Some(line) = rx.blocking_recv() {
                        let mut out = out.lock();
                        let written = out.write_all(&line).and_then(|()| out.flush());
                        count(
                            &counts,
                            "stdout",
                            if written.is_ok() { "sent" } else { "failed" },
                        );
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "the audit stdout writer cannot start");
            }
            tx
        });
        let webhook = webhook.map(|u| WebhookQueue::start(u, "audit event"));
        Some(Exporter {
            stdout,
            webhook,
            counts,
        })
    }

    /// The counter of events written to stdout, by outcome.
    pub fn counts(&self) -> Family<ExportLabels, Counter> {
        self.counts.clone()
    }

    /// The webhook's counter of events by outcome.
    pub fn webhook_outcomes(&self) -> Option<Family<crate::webhook::OutcomeLabels, Counter>> {
        self.webhook.as_ref().map(WebhookQueue::outcomes)
    }

    fn send(&self, uid: &str, event: &serde_json::Value) {
        let Ok(mut body) = serde_json::to_vec(event) else {
            return;
        };
        if let Some(w) = &self.webhook {
            w.send(uid.to_owned(), body.clone());
        }
        if let Some(tx) = &self.stdout {
            body.push(b'\n');
            if tx.try_send(body).is_err() {
                count(&self.counts, "stdout", "dropped");
            }
        }
    }
}

/// Make `e` the exporter of this process (the first one installed stays).
pub fn install(e: Exporter) {
    let _ = EXPORTER.set(e);
}

/// A new event id.
fn event_uid() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Export `r` as an API Activity event.
pub(super) fn record(r: &AuditRecord) {
    if let Some(e) = EXPORTER.get() {
        let uid = event_uid();
        e.send(&uid, &ocsf::api_activity(r, &uid, Timestamp::now()));
    }
}

/// Export the commands of the session `r` is the record of, started at `start`, as Process
/// Activity events.
pub fn commands(r: &AuditRecord, start: Timestamp, commands: &[RecordingCommand]) {
    if let Some(e) = EXPORTER.get() {
        for (i, c) in commands.iter().enumerate() {
            let uid = event_uid();
            e.send(&uid, &ocsf::process_activity(r, start, i, c, &uid));
        }
    }
}
