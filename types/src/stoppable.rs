//! Whether `DELETE` can stop a debug container.
//!
//! A stop signals the debug container's processes from inside the container (there is no API to
//! stop an ephemeral container). When the container's main process is PID 1 of its own PID
//! namespace (no `targetContainerName`, and the pod shares neither its process namespace nor the
//! node's), the kernel drops the signals sent to it from inside that namespace unless it handles
//! them itself (SIGKILL never gets through), so it can only end by its own exit.
//!
//! poddebug never changes the command the user asked for to get around this: such a container
//! is created as asked, its status says `stoppable: false` with [`NOT_STOPPABLE`] as the
//! message, the create answers a `Warning`, and a `DELETE` answers 409 Conflict without doing
//! anything.
//!
//! Containers made by earlier versions of poddebug may run their command under
//! [`LEGACY_STOP_WRAPPER`], a shell that stays PID 1 and exits with the command; those can still
//! be stopped (stopping the command ends the shell), so they count as stoppable.

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};

/// Why a debug container whose main process is its own PID 1 cannot be stopped with `DELETE`.
pub const NOT_STOPPABLE: &str = "its main process is PID 1 of its own PID namespace (it has no \
     targetContainerName, and the pod shares neither its process namespace nor the node's), and \
     the kernel drops signals sent to that process from inside the container, so it can only end \
     by its own exit (for example `exit` in an attached shell); set targetContainerName to create \
     a debug container that DELETE can stop";

/// The command earlier versions of poddebug put in front of a command of a debug container that
/// would run as its own PID 1: `sh -c '"$@"; exit $?' sh CMD ARGS…`. No longer written; only
/// recognised, so that the containers it made stay stoppable.
pub const LEGACY_STOP_WRAPPER: [&str; 4] = ["sh", "-c", "\"$@\"; exit $?", "sh"];

/// Whether the debug container's main process is PID 1 of its own PID namespace: no target
/// container, no shared process namespace, no `hostPID`.
pub fn runs_as_own_pid1(pod: &Pod, ec: &EphemeralContainer) -> bool {
    let spec = pod.spec.as_ref();
    let shares = spec
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false)
        || spec.and_then(|s| s.host_pid).unwrap_or(false);
    let targeted = ec
        .target_container_name
        .as_deref()
        .is_some_and(|t| !t.is_empty());
    !shares && !targeted
}

/// Whether the container runs its command under [`LEGACY_STOP_WRAPPER`].
pub fn is_legacy_stop_wrapped(ec: &EphemeralContainer) -> bool {
    ec.command
        .as_deref()
        .is_some_and(|c| c.iter().map(String::as_str).eq(LEGACY_STOP_WRAPPER))
}

/// Why `DELETE` cannot stop debug container `ec` of `pod` ([`NOT_STOPPABLE`]), or `None` when it
/// can.
pub fn stop_blocker(pod: &Pod, ec: &EphemeralContainer) -> Option<&'static str> {
    (runs_as_own_pid1(pod, ec) && !is_legacy_stop_wrapped(ec)).then_some(NOT_STOPPABLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn ec(command: Option<&[&str]>, target: Option<&str>) -> EphemeralContainer {
        EphemeralContainer {
            name: "dbg".into(),
            command: command.map(|c| c.iter().map(|s| s.to_string()).collect()),
            target_container_name: target.map(str::to_owned),
            ..Default::default()
        }
    }

    fn pod(share: Option<bool>, host_pid: Option<bool>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                share_process_namespace: share,
                host_pid,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn own_pid1_is_not_stoppable_whatever_its_command() {
        for command in [None, Some(&["top", "-b"][..]), Some(&["sh"][..])] {
            assert_eq!(
                stop_blocker(&pod(None, None), &ec(command, None)),
                Some(NOT_STOPPABLE),
                "{command:?}"
            );
        }
        assert_eq!(
            stop_blocker(&pod(Some(false), Some(false)), &ec(None, Some(""))),
            Some(NOT_STOPPABLE),
            "an empty target is no target"
        );
    }

    #[test]
    fn a_target_or_a_shared_namespace_makes_it_stoppable() {
        assert_eq!(stop_blocker(&pod(None, None), &ec(None, Some("app"))), None);
        assert_eq!(stop_blocker(&pod(Some(true), None), &ec(None, None)), None);
        assert_eq!(
            stop_blocker(&pod(None, Some(true)), &ec(None, None)),
            None,
            "hostPID pods share the node's PID namespace"
        );
    }

    #[test]
    fn containers_wrapped_by_earlier_versions_stay_stoppable() {
        let wrapped = ec(Some(&LEGACY_STOP_WRAPPER), None);
        assert!(is_legacy_stop_wrapped(&wrapped));
        assert_eq!(stop_blocker(&pod(None, None), &wrapped), None);
        // Only the exact wrapper counts.
        let other = ec(Some(&["sh", "-c", "top"]), None);
        assert!(!is_legacy_stop_wrapped(&other));
    }
}
