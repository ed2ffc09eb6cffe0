//! What the node does with a pod, played by the fake: container statuses, and the life of a new
//! ephemeral container (`waiting: ContainerCreating`, then `running`, or an image pull error).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::nodes::FAKE_NODE;
use super::state::{Kind, Shared, State, new_uid, now_rfc3339};

/// A container state to put into a pod's status (`v1.ContainerState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerState {
    /// `waiting` with a reason (`ContainerCreating`, `ErrImagePull`, ...) and optional message.
    Waiting {
        /// Reason.
        reason: String,
        /// Message (empty = none).
        message: String,
    },
    /// `running` since now.
    Running,
    /// `terminated` now.
    Terminated {
        /// Exit code.
        exit_code: i32,
        /// Reason (`Completed`, `Error`, ...).
        reason: String,
    },
}

impl ContainerState {
    /// `waiting` with a reason and no message.
    pub fn waiting(reason: &str) -> ContainerState {
        ContainerState::Waiting {
            reason: reason.to_owned(),
            message: String::new(),
        }
    }

    /// `terminated` with an exit code and reason.
    pub fn terminated(exit_code: i32, reason: &str) -> ContainerState {
        ContainerState::Terminated {
            exit_code,
            reason: reason.to_owned(),
        }
    }
}

fn container_id() -> String {
    format!("containerd://{}", new_uid().replace('-', ""))
}

/// Sets the state of a container (regular, init or ephemeral) in the stored pod and records the
/// change. `false` if the pod or the container does not exist.
pub fn set_container_state(
    state: &mut State,
    ns: &str,
    pod: &str,
    container: &str,
    new: &ContainerState,
) -> bool {
    let Some(mut object) = state.get(Kind::Pod, ns, pod).cloned() else {
        return false;
    };
    let Some((list, image)) = find_container(&object, container).map(|(l, i)| (l, i.to_owned()))
    else {
        return false;
    };
    let statuses_key = match list {
        "containers" => "containerStatuses",
        "initContainers" => "initContainerStatuses",
        _ => "ephemeralContainerStatuses",
    };
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    let statuses = object["status"]
        .as_object_mut()
        .map(|m| m.entry(statuses_key).or_insert_with(|| json!([])))
        .and_then(Value::as_array_mut);
    let Some(statuses) = statuses else {
        return false;
    };
    let idx = match statuses.iter().position(|s| s["name"] == container) {
        Some(i) => i,
        None => {
            statuses.push(json!({
                "name": container,
                "image": image,
                "imageID": "",
                "ready": false,
                "restartCount": 0,
                "started": false,
                "state": {},
                "lastState": {},
            }));
            statuses.len() - 1
        }
    };
    let entry = &mut statuses[idx];
    let started_at = entry["state"]["running"]["startedAt"]
        .as_str()
        .map(str::to_owned);
    let id = entry["containerID"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(container_id);
    let is_regular = list == "containers";
    let key = (ns.to_owned(), pod.to_owned(), container.to_owned());
    let termination_message = state.termination_logs.get(&key).cloned();
    let (state_json, ready, started, with_id) = match new {
        ContainerState::Waiting { reason, message } => {
            let mut w = Map::new();
            w.insert("reason".into(), json!(reason));
            if !message.is_empty() {
                w.insert("message".into(), json!(message));
            }
            (json!({"waiting": w}), false, false, false)
        }
        ContainerState::Running => (
            json!({"running": {"startedAt": now_rfc3339()}}),
            is_regular,
            true,
            true,
        ),
        ContainerState::Terminated { exit_code, reason } => (
            {
                let mut t = json!({
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": started_at.unwrap_or_else(now_rfc3339),
                    "finishedAt": now_rfc3339(),
                    "containerID": id,
                });
                // The kubelet reports the termination message file (its last 4 KiB).
                if let Some(m) = termination_message.filter(|m| !m.is_empty()) {
                    let cut = m.len().saturating_sub(4096);
                    let start = (cut..=m.len())
                        .find(|i| m.is_char_boundary(*i))
                        .unwrap_or(m.len());
                    t["message"] = json!(&m[start..]);
                }
                json!({ "terminated": t })
            },
            false,
            false,
            true,
        ),
    };
    entry["state"] = state_json;
    entry["ready"] = json!(ready);
    entry["started"] = json!(started);
    if with_id {
        entry["containerID"] = json!(id);
    }
    state.put(Kind::Pod, object);
    true
}

/// `(list name, image)` of a container of the pod.
pub fn find_container<'a>(pod: &'a Value, name: &str) -> Option<(&'static str, &'a str)> {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(c) = pod["spec"][list]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name))
        {
            return Some((list, c["image"].as_str().unwrap_or("")));
        }
    }
    None
}

/// The current state of a container: `waiting`, `running`, `terminated` or `None`.
pub fn container_state(pod: &Value, name: &str) -> Option<&'static str> {
    for key in [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ] {
        if let Some(s) = pod["status"][key]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == name))
        {
            for st in ["running", "terminated", "waiting"] {
                if s["state"].get(st).is_some() {
                    return Some(st);
                }
            }
        }
    }
    None
}

/// Plays the kubelet for a new ephemeral container: `ContainerCreating` at once, then after the
/// configured delay `running` (or `ErrImagePull`, then `ImagePullBackOff`, for a bad image).
/// Nothing happens unless the pod is Running and the simulation is on.
pub fn start_ephemeral_container(shared: &Arc<Shared>, ns: &str, pod: &str, ec: &str) {
    let (simulate, delay) = {
        let s = shared.lock();
        (s.settings.simulate_kubelet, s.settings.start_delay)
    };
    if !simulate {
        return;
    }
    let shared = shared.clone();
    let (ns, pod, ec) = (ns.to_owned(), pod.to_owned(), ec.to_owned());
    tokio::spawn(async move {
        let mut shutdown = shared.shutdown.clone();
        let image = shared.mutate(|s| {
            let object = s.get(Kind::Pod, &ns, &pod)?;
            if object["status"]["phase"] != "Running" {
                return None;
            }
            let image = find_container(object, &ec)?.1.to_owned();
            set_container_state(
                s,
                &ns,
                &pod,
                &ec,
                &ContainerState::waiting("ContainerCreating"),
            );
            Some(image)
        });
        let Some(image) = image else { return };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = crate::fake::stopped(&mut shutdown) => return,
        }
        let bad = shared.mutate(|s| {
            let still_creating = s
                .get(Kind::Pod, &ns, &pod)
                .and_then(|p| waiting_reason(p, &ec))
                .is_some_and(|r| r == "ContainerCreating");
            if !still_creating {
                return false;
            }
            let bad = s.settings.bad_images.contains(&image);
            let next = if bad {
                ContainerState::Waiting {
                    reason: "ErrImagePull".to_owned(),
                    message: pull_error(&image),
                }
            } else {
                ContainerState::Running
            };
            set_container_state(s, &ns, &pod, &ec, &next);
            bad
        });
        if !bad {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = crate::fake::stopped(&mut shutdown) => return,
        }
        shared.mutate(|s| {
            let pulling = s
                .get(Kind::Pod, &ns, &pod)
                .and_then(|p| waiting_reason(p, &ec))
                .is_some_and(|r| r == "ErrImagePull");
            if pulling {
                let next = ContainerState::Waiting {
                    reason: "ImagePullBackOff".to_owned(),
                    message: format!("Back-off pulling image \"{image}\""),
                };
                set_container_state(s, &ns, &pod, &ec, &next);
            }
        });
    });
}

fn waiting_reason(pod: &Value, name: &str) -> Option<String> {
    pod["status"]["ephemeralContainerStatuses"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)?["state"]["waiting"]["reason"]
        .as_str()
        .map(str::to_owned)
}

/// Fills what kube-apiserver and the kubelet add to a new pod: uid, timestamps, defaults, and
/// (unless the test set a status) a Running status with running containers.
pub fn complete_new_pod(mut pod: Value) -> Value {
    if !pod["kind"].is_string() {
        pod["kind"] = json!("Pod");
    }
    pod["apiVersion"] = json!("v1");
    if !pod["metadata"]["namespace"].is_string() {
        pod["metadata"]["namespace"] = json!("default");
    }
    if !pod["metadata"]["uid"].is_string() {
        pod["metadata"]["uid"] = json!(new_uid());
    }
    pod["metadata"]["creationTimestamp"] = json!(now_rfc3339());
    apply_spec_defaults(&mut pod);
    if pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
        pod["spec"]["nodeName"] = json!(FAKE_NODE);
    }
    if pod
        .get("status")
        .is_none_or(|s| s.is_null() || s.as_object().is_some_and(Map::is_empty))
    {
        pod["status"] = running_status(&pod, &BTreeSet::new());
    }
    pod
}

/// The defaults kube-apiserver gives a pod's spec (`SetDefaults_PodSpec`, `SetDefaults_Container`
/// for every container), the node aside.
pub fn apply_spec_defaults(pod: &mut Value) {
    if !pod["spec"].is_object() {
        pod["spec"] = json!({});
    }
    let spec = &mut pod["spec"];
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                super::validation::apply_defaults(c);
            }
        }
    }
    for (k, v) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("serviceAccountName", json!("default")),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
        ("preemptionPolicy", json!("PreemptLowerPriority")),
        ("priority", json!(0)),
    ] {
        if spec.get(k).is_none_or(Value::is_null) {
            spec[k] = v;
        }
    }
}

/// The status of a pod the kubelet runs: every container running, except those whose image is in
/// `bad_images` (waiting in `ErrImagePull`, and the pod then stays Pending and not ready).
fn running_status(pod: &Value, bad_images: &BTreeSet<String>) -> Value {
    let now = now_rfc3339();
    let mut all_running = true;
    let statuses: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let image = c["image"].as_str().unwrap_or("");
                    if bad_images.contains(image) {
                        all_running = false;
                        return json!({
                            "name": c["name"],
                            "image": image,
                            "imageID": "",
                            "ready": false,
                            "started": false,
                            "restartCount": 0,
                            "state": {"waiting": {"reason": "ErrImagePull", "message": pull_error(image)}},
                            "lastState": {},
                        });
                    }
                    json!({
                        "name": c["name"],
                        "image": image,
                        "imageID": format!("{image}@sha256:{}", "0".repeat(64)),
                        "containerID": container_id(),
                        "ready": true,
                        "started": true,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let ready = if all_running { "True" } else { "False" };
    json!({
        "phase": if all_running { "Running" } else { "Pending" },
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": ready, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": ready, "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        ],
        "hostIP": "10.0.0.10",
        "podIP": "10.244.0.10",
        "podIPs": [{"ip": "10.244.0.10"}],
        "startTime": now,
        "qosClass": pod["status"]["qosClass"].as_str().unwrap_or("BestEffort"),
        "containerStatuses": statuses,
    })
}

/// The kubelet's message for an image that cannot be pulled.
fn pull_error(image: &str) -> String {
    format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found"
    )
}

/// Plays the scheduler and the kubelet for a pod just created (Pending, with no container
/// status): after the start delay it is bound to its node ([`FAKE_NODE`] unless it names one)
/// and its containers run (see [`running_status`]). Nothing happens while the simulation is
/// off, or to a pod that was deleted or replaced (another uid) meanwhile.
pub fn start_pod(shared: &Arc<Shared>, ns: &str, pod: &str, uid: &str) {
    let (simulate, delay) = {
        let s = shared.lock();
        (s.settings.simulate_kubelet, s.settings.start_delay)
    };
    if !simulate {
        return;
    }
    let shared = shared.clone();
    let (ns, pod, uid) = (ns.to_owned(), pod.to_owned(), uid.to_owned());
    tokio::spawn(async move {
        let mut shutdown = shared.shutdown.clone();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = crate::fake::stopped(&mut shutdown) => return,
        }
        shared.mutate(|s| {
            let Some(mut object) = s.get(Kind::Pod, &ns, &pod).cloned() else {
                return;
            };
            if object["metadata"]["uid"] != uid.as_str() || object["status"]["phase"] != "Pending" {
                return;
            }
            if object["spec"]["nodeName"]
                .as_str()
                .is_none_or(str::is_empty)
            {
                object["spec"]["nodeName"] = json!(FAKE_NODE);
            }
            object["status"] = running_status(&object, &s.settings.bad_images);
            s.put(Kind::Pod, object);
        });
    });
}
