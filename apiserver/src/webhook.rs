//! POSTing JSON events to a webhook (`--notify-webhook`, `--audit-webhook`) from a bounded
//! queue served by one task, so that a request never waits for a receiver: a full queue drops
//! the event (counted, logged). A failed POST (no answer, a 5xx, 408, 429) is tried again with
//! a doubling backoff, [`ATTEMPTS`] times in all; every event carries an id
//! (`X-Poddebug-Event-Id`) a receiver can deduplicate retries with.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;

/// Events waiting to be sent, at most.
pub const QUEUE: usize = 1024;
/// Tries of one event.
pub const ATTEMPTS: u32 = 8;
/// The first pause between tries (doubling, capped at [`MAX_BACKOFF`]).
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest pause between tries.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long one POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// Labels of a webhook's counter of events.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `sent`, `failed` (every try failed, or the receiver refused it for good) or `dropped`
    /// (the queue was full).
    pub outcome: String,
}

/// One event to POST: its id and its JSON body.
#[derive(Debug)]
struct Outgoing {
    id: String,
    body: Vec<u8>,
}

/// The queue of a webhook (module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct WebhookQueue {
    tx: mpsc::Sender<Outgoing>,
    outcomes: Family<OutcomeLabels, Counter>,
    what: &'static str,
}

/// Whether a failed try may pass if tried again.
fn retryable(code: u16) -> bool {
    code >= 500 || code == 408 || code == 429
}

fn count(outcomes: &Family<OutcomeLabels, Counter>, outcome: &str) {
    outcomes
        .get_or_create(&OutcomeLabels {
            outcome: outcome.to_owned(),
        })
        .inc();
}

impl WebhookQueue {
    /// Start the sender of `url`; `what` names its events in logs ("notification").
    pub fn start(url: url::Url, what: &'static str) -> WebhookQueue {
        let (tx, mut rx) = mpsc::channel::<Outgoing>(QUEUE);
        let outcomes: Family<OutcomeLabels, Counter> = Family::default();
        let me = WebhookQueue {
            tx,
            outcomes: outcomes.clone(),
            what,
        };
        tokio::spawn(async move {
            let client = match reqwest::Client::builder().timeout(POST_TIMEOUT).build() {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, what, "the webhook client cannot be made; the webhook is off");
                    return;
                }
            };
            while let Some(ev) = rx.recv().await {
                let mut backoff = FIRST_BACKOFF;
                let mut sent = false;
                for attempt in 1..=ATTEMPTS {
                    let res = client
                        .post(url.clone())
                        .header("x-poddebug-event-id", &ev.id)
                        .header("content-type", "application/json")
                        .body(ev.body.clone())
                        .send()
                        .await;
                    let retry = match res {
                        Ok(r) if r.status().is_success() => {
                            sent = true;
                            break;
                        }
                        Ok(r) => {
                            let code = r.status().as_u16();
                            tracing::warn!(event = %ev.id, code, attempt, what, "the webhook refused an event");
                            retryable(code)
                        }
                        Err(e) => {
                            tracing::warn!(event = %ev.id, error = %e, attempt, what, "the webhook cannot be reached");
                            true
                        }
                    };
                    if !retry || attempt == ATTEMPTS {
                        break;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                count(&outcomes, if sent { "sent" } else { "failed" });
            }
        });
        me
    }

    /// Queue event `id` with JSON `body`; never waits (a full queue drops it).
    pub fn send(&self, id: String, body: Vec<u8>) {
        if self
            .tx
            .try_send(Outgoing {
                id: id.clone(),
                body,
            })
            .is_err()
        {
            count(&self.outcomes, "dropped");
            tracing::warn!(event = %id, what = self.what, "the webhook's queue is full; an event was dropped");
        }
    }

    /// The counter of events by outcome, to register in a metrics registry.
    pub fn outcomes(&self) -> Family<OutcomeLabels, Counter> {
        self.outcomes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_that_may_pass_are_retried() {
        assert!(retryable(503) && retryable(429) && retryable(408));
        assert!(!retryable(400) && !retryable(404));
    }
}
