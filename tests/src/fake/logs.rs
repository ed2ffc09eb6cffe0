//! `GET pods/{name}/log`: text from per-container buffers the test fills
//! (`FakeKube::append_log`), with `container`, `tailLines`, `sinceSeconds`, `timestamps` and
//! `follow` (streams new lines until the container terminates, the client leaves or the fake stops).

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use super::http::{Resp, channel_body, with_type};
use super::kubelet::container_state;
use super::router::Ctx;
use super::state::Kind;
use super::status::{self, KubeStatus};
use super::watch::send;

/// The longest a followed log stays open.
const MAX_FOLLOW: Duration = Duration::from_secs(1800);

/// One line (or trailing fragment) of a container's log.
#[derive(Clone, Debug)]
pub struct LogLine {
    /// When it was written.
    pub time: jiff::Timestamp,
    /// The text, with its newline if it had one.
    pub text: String,
}

/// Splits `text` into lines stamped now.
pub fn lines(text: &str) -> Vec<LogLine> {
    let time = jiff::Timestamp::now();
    text.split_inclusive('\n')
        .map(|l| LogLine {
            time,
            text: l.to_owned(),
        })
        .collect()
}

fn names(pod: &Value, list: &str) -> Vec<String> {
    pod["spec"][list]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// kube's container defaulting and checking for log/exec/attach (`pod/strategy.go`).
pub fn resolve_container(
    pod: &Value,
    requested: Option<&str>,
    name: &str,
) -> Result<String, KubeStatus> {
    let containers = names(pod, "containers");
    match requested.filter(|c| !c.is_empty()) {
        Some(c) => {
            let known = ["containers", "initContainers", "ephemeralContainers"]
                .iter()
                .any(|l| names(pod, l).iter().any(|n| n == c));
            if known {
                Ok(c.to_owned())
            } else {
                Err(status::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
        }
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None if containers.is_empty() => Err(status::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        None => {
            let mut msg = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            );
            let init = names(pod, "initContainers");
            if !init.is_empty() {
                msg.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            let eph = names(pod, "ephemeralContainers");
            if !eph.is_empty() {
                msg.push_str(&format!(
                    " or one of the ephemeral containers: [{}]",
                    eph.join(" ")
                ));
            }
            Err(status::bad_request(msg))
        }
    }
}

fn render(line: &LogLine, timestamps: bool) -> String {
    if timestamps {
        format!(
            "{} {}",
            line.time.strftime("%Y-%m-%dT%H:%M:%S%.9fZ"),
            line.text
        )
    } else {
        line.text.clone()
    }
}

/// The handler.
pub fn handle(ctx: &Ctx, ns: &str, name: &str) -> Result<Resp, KubeStatus> {
    let q = &ctx.query;
    let timestamps = q.flag("timestamps");
    let follow = q.flag("follow");
    let key;
    let initial: String;
    let mut sent;
    {
        let state = ctx.shared.lock();
        let pod = state
            .get(Kind::Pod, ns, name)
            .ok_or_else(|| status::not_found("", "pods", name))?;
        let container = resolve_container(pod, q.get("container"), name)?;
        if q.flag("previous") {
            return Err(status::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{name}\" not found"
            )));
        }
        match container_state(pod, &container) {
            Some("running" | "terminated") => {}
            _ => {
                let reason = [
                    "ephemeralContainerStatuses",
                    "containerStatuses",
                    "initContainerStatuses",
                ]
                .iter()
                .find_map(|k| {
                    pod["status"][k]
                        .as_array()?
                        .iter()
                        .find(|s| s["name"] == container.as_str())?["state"]["waiting"]["reason"]
                        .as_str()
                })
                .unwrap_or("ContainerCreating");
                return Err(status::bad_request(format!(
                    "container \"{container}\" in pod \"{name}\" is waiting to start: {reason}"
                )));
            }
        }
        key = (ns.to_owned(), name.to_owned(), container);
        let all = state.logs.get(&key).cloned().unwrap_or_default();
        sent = all.len();
        let since = q
            .get("sinceSeconds")
            .and_then(|s| s.parse::<i64>().ok())
            .map(|s| jiff::Timestamp::now().as_second() - s);
        let mut chosen: Vec<&LogLine> = all
            .iter()
            .filter(|l| since.is_none_or(|t| l.time.as_second() >= t))
            .collect();
        if let Some(n) = q.get("tailLines").and_then(|t| t.parse::<usize>().ok()) {
            let skip = chosen.len().saturating_sub(n);
            chosen.drain(..skip);
        }
        initial = chosen.iter().map(|l| render(l, timestamps)).collect();
    }
    if !follow {
        return Ok(with_type(200, "text/plain", super::http::full(initial)));
    }
    let (mut tx, body) = channel_body(16);
    let shared = ctx.shared.clone();
    tokio::spawn(async move {
        let mut shutdown = shared.shutdown.clone();
        let mut changes = shared.subscribe();
        let deadline = tokio::time::Instant::now() + MAX_FOLLOW;
        if !initial.is_empty() && !send(&mut tx, &mut shutdown, Bytes::from(initial)).await {
            return;
        }
        loop {
            let (chunk, done) = {
                let state = shared.lock();
                let all = state.logs.get(&key).map(Vec::as_slice).unwrap_or_default();
                let chunk: String = all
                    .iter()
                    .skip(sent)
                    .map(|l| render(l, timestamps))
                    .collect();
                sent = all.len();
                let done = match state.get(Kind::Pod, &key.0, &key.1) {
                    Some(pod) => container_state(pod, &key.2) == Some("terminated"),
                    None => true,
                };
                (chunk, done)
            };
            if !chunk.is_empty() && !send(&mut tx, &mut shutdown, Bytes::from(chunk)).await {
                return;
            }
            if done {
                return;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
                _ = crate::fake::stopped(&mut shutdown) => return,
            }
        }
    });
    Ok(with_type(200, "text/plain", body))
}
