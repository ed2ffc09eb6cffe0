//! What a container may run under a moderated profile (`--moderated-profiles`).
//!
//! A moderated session withholds its owner's input until a moderator is attached, and records
//! it. That holds only for what is typed: a container that runs a command of its own (`sh -c
//! PAYLOAD`, an image's entrypoint, a lifecycle hook) does its work at creation, with no session,
//! no moderator and no recording, and its output is read with `…/log`. So under a moderated
//! profile a container must be an interactive shell and nothing else: its command exactly one
//! of the server's `--moderated-shells`, no arguments, `stdin` and `tty` on, and nothing that
//! makes the shell or the kubelet run something before anyone types (environment variables —
//! `ENV`, `BASH_ENV`, `PS1` and `PROMPT_COMMAND` run commands in a shell that starts —,
//! lifecycle handlers, probes). An empty command runs the image's entrypoint, which the server
//! cannot see, and is refused too.
//!
//! The shell itself must be the image's: a container that mounts a volume may mount it over its
//! own binaries (`/bin`), its loader and libraries (`/lib`, `/etc/ld.so.preload`) or its shell's
//! start files (`/etc/profile`, `~/.bashrc`), and every volume of a pod can be written by
//! something other than the shell (another container writes an `emptyDir`; whoever may update a
//! ConfigMap or Secret writes those; a volume claim outlives the pod). So under a moderated
//! profile the container mounts nothing (`volumeMounts`, `volumeDevices`), and the image comes
//! from the server's `--allowed-images`, which may not be empty while profiles are moderated (the
//! server refuses to start otherwise): a shell the image ships is trusted, nothing else.

use k8s_openapi::api::core::v1::Container;

/// The shells `--moderated-shells` admits unless told otherwise: the usual POSIX shells by
/// name (found on the image's `PATH`) and at their usual paths.
pub const DEFAULT_MODERATED_SHELLS: &[&str] = &[
    "sh",
    "ash",
    "bash",
    "dash",
    "ksh",
    "mksh",
    "zsh",
    "/bin/sh",
    "/bin/ash",
    "/bin/bash",
    "/bin/dash",
    "/bin/ksh",
    "/bin/mksh",
    "/bin/zsh",
    "/usr/bin/sh",
    "/usr/bin/bash",
    "/usr/bin/dash",
    "/usr/bin/ksh",
    "/usr/bin/mksh",
    "/usr/bin/zsh",
];

/// Why a command, its arguments and its `stdin`/`tty` (of the container at `path`) are not a
/// bare interactive shell of `shells`; empty when they are.
pub fn shell_refusals(
    path: &str,
    command: &[String],
    args: &[String],
    stdin: bool,
    tty: bool,
    shells: &[String],
) -> Vec<String> {
    let mut out = Vec::new();
    match command {
        [] => out.push(format!(
            "{path}.command is empty, so the image's entrypoint would run, which the server cannot see"
        )),
        [one] if shells.iter().any(|s| s == one) => {}
        _ => out.push(format!(
            "{path}.command {command:?} is not one of the shells the server admits (--moderated-shells: {})",
            shells.join(", ")
        )),
    }
    if !args.is_empty() {
        out.push(format!("{path}.args must be empty"));
    }
    if !stdin {
        out.push(format!("{path}.stdin must be true"));
    }
    if !tty {
        out.push(format!("{path}.tty must be true"));
    }
    out
}

/// Why container `c` (at `path`) mounts something its shell could be run from; empty when it
/// mounts nothing (module docs).
pub fn mount_refusals(path: &str, c: &Container) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = c.volume_mounts.as_ref().filter(|m| !m.is_empty()) {
        let at: Vec<&str> = m.iter().map(|m| m.mount_path.as_str()).collect();
        out.push(format!(
            "{path}.volumeMounts must be empty: a volume (mounted at {}) can be written by \
             something other than the shell and mounted over the shell's own files",
            at.join(", ")
        ));
    }
    if c.volume_devices.as_ref().is_some_and(|d| !d.is_empty()) {
        out.push(format!(
            "{path}.volumeDevices must be empty: a device can be written by something other than \
             the shell"
        ));
    }
    out
}

/// Why container `c` (at `path`) is not an interactive shell a moderated session may take, each
/// setting in words; empty when it is.
pub fn container_refusals(path: &str, c: &Container, shells: &[String]) -> Vec<String> {
    let mut out = shell_refusals(
        path,
        c.command.as_deref().unwrap_or_default(),
        c.args.as_deref().unwrap_or_default(),
        c.stdin == Some(true),
        c.tty == Some(true),
        shells,
    );
    if c.env.as_ref().is_some_and(|e| !e.is_empty())
        || c.env_from.as_ref().is_some_and(|e| !e.is_empty())
    {
        out.push(format!(
            "{path}.env and {path}.envFrom must be empty: a shell runs what its environment \
             names (ENV, BASH_ENV, PS1, PROMPT_COMMAND) before anyone types"
        ));
    }
    out.extend(mount_refusals(path, c));
    if c.lifecycle.is_some() {
        out.push(format!("{path}.lifecycle runs handlers of its own"));
    }
    for (name, set) in [
        ("livenessProbe", c.liveness_probe.is_some()),
        ("readinessProbe", c.readiness_probe.is_some()),
        ("startupProbe", c.startup_probe.is_some()),
    ] {
        if set {
            out.push(format!("{path}.{name} runs probes of its own"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shells() -> Vec<String> {
        DEFAULT_MODERATED_SHELLS
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }

    fn refusals(c: serde_json::Value) -> Vec<String> {
        container_refusals("container", &serde_json::from_value(c).unwrap(), &shells())
    }

    #[test]
    fn a_bare_interactive_shell_is_admitted() {
        for sh in ["sh", "/bin/bash", "ash"] {
            let c = json!({"name": "dbg", "image": "busybox", "command": [sh], "stdin": true,
                           "tty": true, "workingDir": "/tmp", "securityContext": {"privileged": true}});
            assert!(refusals(c).is_empty(), "{sh}");
        }
    }

    #[test]
    fn a_shell_mounts_nothing_it_could_be_run_from() {
        for (mounts, devices, want) in [
            (
                json!([{"name": "scratch", "mountPath": "/bin"}]),
                json!(null),
                "container.volumeMounts must be empty: a volume (mounted at /bin)",
            ),
            (
                json!([{"name": "c", "mountPath": "/etc/ld.so.preload", "readOnly": true},
                       {"name": "d", "mountPath": "/root"}]),
                json!(null),
                "(mounted at /etc/ld.so.preload, /root)",
            ),
            (
                json!(null),
                json!([{"name": "blk", "devicePath": "/dev/xvdb"}]),
                "container.volumeDevices must be empty",
            ),
        ] {
            let c = json!({"name": "dbg", "image": "busybox", "command": ["sh"], "stdin": true,
                           "tty": true, "volumeMounts": mounts, "volumeDevices": devices});
            let r = refusals(c);
            assert_eq!(r.len(), 1, "{r:?}");
            assert!(r[0].contains(want), "{r:?}");
        }
    }

    #[test]
    fn anything_that_runs_without_a_typist_is_refused() {
        assert_eq!(
            refusals(
                json!({"name": "dbg", "command": ["sh", "-c", "id"], "stdin": true, "tty": true})
            ),
            [format!(
                "container.command [\"sh\", \"-c\", \"id\"] is not one of the shells the server admits (--moderated-shells: {})",
                shells().join(", ")
            )]
        );
        assert_eq!(
            refusals(json!({"name": "dbg", "command": ["sh"], "args": ["-c", "id"]})),
            [
                "container.args must be empty",
                "container.stdin must be true",
                "container.tty must be true"
            ]
        );
        assert_eq!(
            refusals(json!({"name": "dbg", "stdin": true, "tty": true})),
            [
                "container.command is empty, so the image's entrypoint would run, which the server cannot see"
            ]
        );
        let got = refusals(
            json!({"name": "dbg", "command": ["sh"], "stdin": true, "tty": true,
            "env": [{"name": "PS1", "value": "$(id)"}],
            "lifecycle": {"postStart": {"exec": {"command": ["id"]}}},
            "readinessProbe": {"exec": {"command": ["id"]}}}),
        );
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].starts_with("container.env and container.envFrom must be empty"));
        assert_eq!(got[1], "container.lifecycle runs handlers of its own");
        assert_eq!(got[2], "container.readinessProbe runs probes of its own");
        // A shell the server was not told of, even a real one.
        assert_eq!(
            container_refusals(
                "container",
                &serde_json::from_value(
                    json!({"name": "d", "command": ["fish"], "stdin": true, "tty": true})
                )
                .unwrap(),
                &["sh".to_owned()]
            ),
            [
                "container.command [\"fish\"] is not one of the shells the server admits (--moderated-shells: sh)"
            ]
        );
    }
}
