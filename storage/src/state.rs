//! The state of one ephemeral container as the kubelet reports it in
//! `status.ephemeralContainerStatuses`.

use k8s_openapi::api::core::v1::{ContainerStatus, EphemeralContainer, Pod};

/// Waiting reasons after which a container will not start without a change the user must make
/// (kubelet `images` and `kuberuntime` reasons). An attach does not wait on these. Most are
/// retried by the kubelet, so the container may still start: see [`NEVER_STARTS`].
const START_FAILURES: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "ImageInspectError",
    "RegistryUnavailable",
    "CreateContainerError",
    "CreateContainerConfigError",
    "PreCreateHookError",
    "PreStartHookError",
    "RunContainerError",
];

/// Waiting reasons after which an ephemeral container can truly never start:
/// - `InvalidImageName`: the image reference does not parse, and an ephemeral container's image
///   can never be changed;
/// - `RunContainerError`, `PreStartHookError`: the runtime already created the container and
///   failed to start it; the kubelet starts an ephemeral container only while the runtime has
///   no container for it (`computePodActions`: "Ephemeral Containers are never restarted").
///
/// Every other failure is retried by the kubelet (`ErrImagePull`, `ImagePullBackOff`,
/// `RegistryUnavailable`, `ErrImageNeverPull` once the image is on the node,
/// `CreateContainerConfigError` once the missing Secret or ConfigMap exists,
/// `CreateContainerError`, …), so the container may still start later.
const NEVER_STARTS: &[&str] = &["InvalidImageName", "RunContainerError", "PreStartHookError"];

/// What an ephemeral container is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EcState {
    /// No status yet, or `waiting`; `reason`/`message` as reported.
    Waiting {
        /// `waiting.reason` (e.g. `ContainerCreating`, `ErrImagePull`).
        reason: Option<String>,
        /// `waiting.message`.
        message: Option<String>,
    },
    /// Its main process runs.
    Running,
    /// It ended; ephemeral containers are never restarted.
    Terminated {
        /// `terminated.exitCode`.
        exit_code: i32,
        /// `terminated.reason` (e.g. `Completed`, `Error`).
        reason: Option<String>,
    },
}

impl EcState {
    /// Whether the container has ended.
    pub(crate) fn is_terminated(&self) -> bool {
        matches!(self, EcState::Terminated { .. })
    }

    /// Whether the container is waiting for a reason it will not get past by itself.
    pub(crate) fn is_start_failure(&self) -> bool {
        match self {
            EcState::Waiting {
                reason: Some(r), ..
            } => START_FAILURES.contains(&r.as_str()),
            _ => false,
        }
    }

    /// Whether the container is waiting for a reason that means it can never start (see
    /// [`NEVER_STARTS`]).
    pub(crate) fn never_starts(&self) -> bool {
        match self {
            EcState::Waiting {
                reason: Some(r), ..
            } => NEVER_STARTS.contains(&r.as_str()),
            _ => false,
        }
    }

    /// `reason: message` of a waiting container, as kubectl prints it; the reason alone, or
    /// "no status reported yet" when there is nothing.
    pub(crate) fn describe(&self) -> String {
        match self {
            EcState::Waiting { reason, message } => match (reason.as_deref(), message.as_deref()) {
                (Some(r), Some(m)) if !m.is_empty() => format!("{r}: {m}"),
                (Some(r), _) if !r.is_empty() => r.to_owned(),
                (_, Some(m)) if !m.is_empty() => m.to_owned(),
                _ => "no status reported yet".to_owned(),
            },
            EcState::Running => "running".to_owned(),
            EcState::Terminated { exit_code, reason } => match reason {
                Some(r) if !r.is_empty() => format!("terminated: {r}, exit code {exit_code}"),
                _ => format!("terminated with exit code {exit_code}"),
            },
        }
    }
}

/// The status the kubelet reports for ephemeral container `ec_name`, if any.
pub(crate) fn ec_status<'a>(pod: &'a Pod, ec_name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    let ephemeral = status
        .ephemeral_container_statuses
        .iter()
        .flatten()
        .find(|s| s.name == ec_name);
    // In a pod poddebug made (a copy, a node debug pod) the debug container is a regular one.
    ephemeral.or_else(|| {
        poddebug_types::copy::label(pod, poddebug_types::copy::LABEL_KIND)?;
        status
            .container_statuses
            .iter()
            .flatten()
            .find(|s| s.name == ec_name)
    })
}

/// The state of ephemeral container `ec_name` of `pod`.
pub(crate) fn ec_state(pod: &Pod, ec_name: &str) -> EcState {
    let state = ec_status(pod, ec_name).and_then(|s| s.state.as_ref());
    match state {
        Some(s) if s.terminated.is_some() => {
            let t = s.terminated.as_ref();
            EcState::Terminated {
                exit_code: t.map(|t| t.exit_code).unwrap_or_default(),
                reason: t.and_then(|t| t.reason.clone()),
            }
        }
        Some(s) if s.running.is_some() => EcState::Running,
        Some(s) => EcState::Waiting {
            reason: s.waiting.as_ref().and_then(|w| w.reason.clone()),
            message: s.waiting.as_ref().and_then(|w| w.message.clone()),
        },
        None => EcState::Waiting {
            reason: None,
            message: None,
        },
    }
}

/// The pod's ephemeral containers (spec order: oldest first).
pub(crate) fn ephemeral_containers(pod: &Pod) -> &[EphemeralContainer] {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or_default()
}

/// The ephemeral container named `ec_name`, if the pod has one.
pub(crate) fn ephemeral_container<'a>(
    pod: &'a Pod,
    ec_name: &str,
) -> Option<&'a EphemeralContainer> {
    ephemeral_containers(pod)
        .iter()
        .find(|ec| ec.name == ec_name)
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Pods for the unit tests.
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStateWaiting, ContainerStatus, EnvVar, EphemeralContainer, Pod, PodSpec,
        PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A pod with one container `app` and the given ephemeral containers, each with an optional
    /// debug name (the env var) and a state: "running", "terminated", "waiting:REASON" or "none".
    pub(crate) fn pod(name: &str, ecs: &[(&str, Option<&str>, &str)]) -> Pod {
        let ephemeral = ecs
            .iter()
            .map(|(ec, debug, _)| EphemeralContainer {
                name: (*ec).to_owned(),
                image: Some("busybox".to_owned()),
                env: debug.map(|d| {
                    vec![EnvVar {
                        name: poddebug_types::convert::DEBUG_NAME_ENV.to_owned(),
                        value: Some(d.to_owned()),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            })
            .collect();
        let statuses = ecs
            .iter()
            .filter(|(_, _, s)| *s != "none")
            .map(|(ec, _, s)| ContainerStatus {
                name: (*ec).to_owned(),
                image: "busybox".to_owned(),
                state: Some(state(s)),
                ..Default::default()
            })
            .collect();
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                uid: Some("uid-1".to_owned()),
                resource_version: Some("100".to_owned()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".to_owned(),
                    image: Some("nginx".to_owned()),
                    ..Default::default()
                }],
                ephemeral_containers: Some(ephemeral),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".to_owned()),
                ephemeral_container_statuses: Some(statuses),
                ..Default::default()
            }),
        }
    }

    /// A container state from its short form.
    pub(crate) fn state(s: &str) -> ContainerState {
        match s.split_once(':') {
            Some(("waiting", reason)) => ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.to_owned()),
                    message: Some(format!("{reason} happened")),
                }),
                ..Default::default()
            },
            _ if s == "running" => ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            },
            _ if s == "terminated" => ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some("Error".to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            _ => ContainerState::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::pod;
    use super::*;

    #[test]
    fn states() {
        let p = pod(
            "web",
            &[
                ("a", None, "running"),
                ("b", None, "terminated"),
                ("c", None, "waiting:ErrImagePull"),
                ("d", None, "none"),
                ("e", None, "waiting:ContainerCreating"),
            ],
        );
        assert_eq!(ec_state(&p, "a"), EcState::Running);
        assert!(ec_state(&p, "b").is_terminated());
        assert!(ec_state(&p, "c").is_start_failure());
        assert_eq!(
            ec_state(&p, "c").describe(),
            "ErrImagePull: ErrImagePull happened"
        );
        assert_eq!(
            ec_state(&p, "d"),
            EcState::Waiting {
                reason: None,
                message: None
            }
        );
        assert_eq!(ec_state(&p, "d").describe(), "no status reported yet");
        assert!(!ec_state(&p, "e").is_start_failure());
        assert!(
            !ec_state(&p, "c").never_starts(),
            "the kubelet retries a pull"
        );
        assert_eq!(
            ec_state(&p, "nope"),
            EcState::Waiting {
                reason: None,
                message: None
            }
        );
        assert_eq!(ephemeral_containers(&p).len(), 5);
        assert!(ephemeral_container(&p, "c").is_some());
    }
}
