//! The script a stop runs inside the debug container
//! (`sh -c SCRIPT poddebug-stop GRACE RECORD MESSAGE_PATH`), and what its outcome means.
//!
//! Why this way (kubernetes.md §7.2): there is no API to stop an ephemeral container, and the
//! debug container may share its PID namespace with the target (`targetContainerName`) or the
//! whole pod (`shareProcessNamespace`), where PID 1 and most processes belong to the
//! application. So the script runs in the debug container itself and signals exactly the
//! processes whose `/proc/PID/ns/mnt` is the same namespace as its own: every container has a
//! mount namespace of its own, so those are the debug container's processes and nothing else.
//! It never signals itself or its ancestors; a process whose namespace it cannot read (another
//! user's) is left alone. SIGTERM first, SIGKILL after the grace period to what is left
//! (including processes started meanwhile).
//!
//! Before the first signal it appends the stop record (one line, see `stop_record`) to the
//! container's termination message file, which the kubelet reports once the container has
//! terminated: the request is recorded in the container's own state, not on the pod object.
//!
//! Without a target and without a shared PID namespace the debug container's main process is
//! PID 1 of its own PID namespace, and the kernel drops signals sent to it from inside that
//! namespace unless it installed a handler (SIGKILL never gets through); such a stop is refused
//! before the script runs (`poddebug_types::stoppable`). Should it run anyway, the script stops
//! the other processes (which ends the wrapper `sh -c '"$@"; exit $?'` of containers made by
//! earlier versions, whose child was the real command), then reports exit code 3 if PID 1 is
//! still alive.
//!
//! Requirements: `sh`, `kill`, `sleep` and `/proc` in the debug container's image (busybox and
//! every distribution image have them); `test -ef` or `readlink`. The exec is made with the
//! caller's identity under `--impersonate`, else the server's (RBAC: `create` and `get` on
//! `pods/exec`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

/// The stop script (POSIX `sh`): `$1` is the grace period in whole seconds. Exit codes: 0 signals
/// sent; 3 the container's main process is PID 1 of its own PID namespace and still runs; 4 no
/// process to signal; 5 `/proc` unusable.
pub const STOP_SCRIPT: &str = include_str!("stop.sh");

/// `$0` of the script, which shows in `ps` inside the debug container.
pub(crate) const SCRIPT_NAME: &str = "poddebug-stop";

/// The script without its comment lines, to keep the exec request (and audit logs) short.
pub(crate) fn compact_script() -> String {
    STOP_SCRIPT
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.is_empty() && !t.starts_with('#')
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One run of the stop script: the arguments its exec carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopInvocation {
    /// Seconds between SIGTERM and SIGKILL (`$1`).
    pub grace_secs: u64,
    /// The line appended to the termination message file before any signal (`$2`, see
    /// `stop_record`); empty writes nothing.
    pub record: String,
    /// The container's termination message file (`$3`).
    pub message_path: String,
}

impl StopInvocation {
    /// The exec command: `sh -c SCRIPT poddebug-stop GRACE RECORD MESSAGE_PATH`.
    pub fn command(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            compact_script(),
            SCRIPT_NAME.into(),
            self.grace_secs.to_string(),
            self.record.clone(),
            self.message_path.clone(),
        ]
    }

    /// The invocation `command` is when it is exactly the stop script's exec, else `None`. Lets
    /// a fake kube-apiserver play the script's effect for this command and for no other.
    pub fn parse(command: &[String]) -> Option<StopInvocation> {
        match command {
            [sh, c, script, name, grace, record, path]
                if sh == "sh"
                    && c == "-c"
                    && *script == compact_script()
                    && name == SCRIPT_NAME =>
            {
                Some(StopInvocation {
                    grace_secs: grace.parse().ok()?,
                    record: record.clone(),
                    message_path: path.clone(),
                })
            }
            _ => None,
        }
    }
}

/// What running the script achieved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScriptOutcome {
    /// Exit 0: the debug container's processes were signalled.
    Signalled,
    /// Exit 3: PID 1 is the debug container's own main process and survives.
    OwnInitSurvives,
    /// Exit 4: no process of the debug container was found.
    NothingToSignal,
    /// Exit 5: `/proc` is not usable in the debug container.
    NoProc,
    /// The script was killed or its stream ended without a result: the container most likely
    /// ended under it (its PID 1 exited and the kernel ended the namespace).
    Ended,
    /// The image has no `sh` (the runtime's message).
    NoShell(String),
    /// Any other failure (message).
    Failed(String),
}

/// Whether a runtime's exec error says the shell binary does not exist.
pub(crate) fn is_missing_shell(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("executable file not found")
        || m.contains("not found in $path")
        || (m.contains("\"sh\"") && m.contains("no such file or directory"))
}

/// The exit code in a remotecommand `NonZeroExitCode` Status (cause `ExitCode`).
fn exit_code(status: &Status) -> Option<i32> {
    status
        .details
        .as_ref()?
        .causes
        .as_ref()?
        .iter()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))?
        .message
        .as_deref()?
        .trim()
        .parse()
        .ok()
}

/// Interpret the Status of the exec's error channel (`None` = the stream ended without one).
pub(crate) fn interpret(status: Option<&Status>) -> ScriptOutcome {
    let Some(status) = status else {
        return ScriptOutcome::Ended;
    };
    if status.status.as_deref() == Some("Success") {
        return ScriptOutcome::Signalled;
    }
    let message = status.message.clone().unwrap_or_default();
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        return match exit_code(status) {
            Some(0) => ScriptOutcome::Signalled,
            Some(3) => ScriptOutcome::OwnInitSurvives,
            Some(4) => ScriptOutcome::NothingToSignal,
            Some(5) => ScriptOutcome::NoProc,
            // SIGKILL / SIGTERM: the namespace went away under the script.
            Some(137 | 143) => ScriptOutcome::Ended,
            Some(127) => ScriptOutcome::NoShell(message),
            _ => ScriptOutcome::Failed(message),
        };
    }
    if is_missing_shell(&message) {
        ScriptOutcome::NoShell(message)
    } else {
        ScriptOutcome::Failed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};

    fn nonzero(code: &str) -> Status {
        Status {
            status: Some("Failure".into()),
            reason: Some("NonZeroExitCode".into()),
            message: Some(format!(
                "command terminated with non-zero exit code: exit status {code}"
            )),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some(code.into()),
                    field: None,
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn outcomes() {
        let ok = Status {
            status: Some("Success".into()),
            ..Default::default()
        };
        assert_eq!(interpret(Some(&ok)), ScriptOutcome::Signalled);
        assert_eq!(interpret(None), ScriptOutcome::Ended);
        assert_eq!(
            interpret(Some(&nonzero("3"))),
            ScriptOutcome::OwnInitSurvives
        );
        assert_eq!(
            interpret(Some(&nonzero("4"))),
            ScriptOutcome::NothingToSignal
        );
        assert_eq!(interpret(Some(&nonzero("5"))), ScriptOutcome::NoProc);
        assert_eq!(interpret(Some(&nonzero("137"))), ScriptOutcome::Ended);
        assert!(matches!(
            interpret(Some(&nonzero("1"))),
            ScriptOutcome::Failed(_)
        ));
        let no_sh = Status {
            status: Some("Failure".into()),
            reason: Some("InternalError".into()),
            message: Some(
                "OCI runtime exec failed: exec failed: unable to start container process: exec: \
                 \"sh\": executable file not found in $PATH: unknown"
                    .into(),
            ),
            ..Default::default()
        };
        assert!(matches!(interpret(Some(&no_sh)), ScriptOutcome::NoShell(_)));
    }

    #[test]
    fn compact_script_keeps_the_code() {
        let s = compact_script();
        assert!(!s.lines().any(|l| l.trim_start().starts_with('#')));
        assert!(s.contains("kill -TERM"));
        assert!(s.len() < STOP_SCRIPT.len());
    }

    #[test]
    fn invocations_round_trip_and_nothing_else_parses() {
        let inv = StopInvocation {
            grace_secs: 7,
            record: "poddebug.dev/stop-request {\"requestedBy\":\"a b\"}".into(),
            message_path: "/dev/termination-log".into(),
        };
        let cmd = inv.command();
        assert_eq!(cmd[4], "7");
        assert_eq!(StopInvocation::parse(&cmd), Some(inv));
        let mut other = cmd.clone();
        other[2] = "kill -TERM -1".into();
        assert_eq!(StopInvocation::parse(&other), None, "any other sh -c");
        assert_eq!(StopInvocation::parse(&cmd[..6]), None);
        let mut bad_grace = cmd;
        bad_grace[4] = "x".into();
        assert_eq!(StopInvocation::parse(&bad_grace), None);
    }

    /// Real processes, real namespaces (needs root and `unshare`/`nsenter`; skipped otherwise).
    ///
    /// Each case runs in a fresh PID namespace (`unshare --pid --fork --mount-proc`), so nothing
    /// outside it can be signalled even if the script were wrong; the script is started with
    /// `nsenter --pid --mount`, whose child has no parent inside the namespace, like a
    /// `kubectl exec` process.
    mod real {
        use super::super::compact_script;
        use std::fs;
        use std::process::{Child, Command, Output, Stdio};
        use std::time::{Duration, Instant};

        /// The namespace's `unshare`, started with `--kill-child`: killing it (on drop) makes
        /// the kernel kill its child, the namespace's init, and so everything in the namespace.
        /// No bare PID is ever signalled, so a recycled PID cannot hit anything else.
        struct Namespace {
            unshare: Child,
            init: u32,
        }

        impl Drop for Namespace {
            fn drop(&mut self) {
                let _ = self.unshare.kill();
                let _ = self.unshare.wait();
            }
        }

        fn children(pid: u32) -> Vec<u32> {
            fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        }

        fn comm(pid: u32) -> String {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .unwrap_or_default()
                .trim()
                .to_owned()
        }

        /// Alive and not a zombie.
        fn alive(pid: u32) -> bool {
            fs::read_to_string(format!("/proc/{pid}/status"))
                .map(|s| {
                    !s.lines()
                        .any(|l| l.starts_with("State:") && (l.contains('Z') || l.contains("X (")))
                })
                .unwrap_or(false)
        }

        /// Poll `f` for up to 5 seconds.
        fn eventually<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                if let Some(v) = f() {
                    return Some(v);
                }
                if Instant::now() > deadline {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        /// Whether this machine lets us make PID and mount namespaces.
        fn supported() -> bool {
            let ok = Command::new("unshare")
                .args(["--pid", "--fork", "--mount-proc", "--kill-child", "true"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
                && Command::new("nsenter")
                    .arg("--version")
                    .output()
                    .map(|o| o.status.success())
                    .unwrap_or(false);
            if !ok {
                // In CI a missing capability is a failure, never a silent pass.
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true but unshare/nsenter of PID and mount namespaces is not permitted here"
                );
                eprintln!(
                    "skipping: unshare/nsenter of PID and mount namespaces is not permitted here"
                );
            }
            ok
        }

        /// Start `args` as init of a new PID (and mount, with its own /proc) namespace.
        fn namespace(args: &[&str]) -> Option<Namespace> {
            let unshare = Command::new("unshare")
                .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .ok()?;
            let upid = unshare.id();
            let init = eventually(|| children(upid).first().copied());
            let ns = Namespace {
                unshare,
                init: init.unwrap_or(0),
            };
            init.map(|_| ns)
        }

        /// Run the stop script in the PID and mount namespaces of `pid`, recording `record` in
        /// `path`.
        fn run_script(pid: u32, grace: u32, record: &str, path: &str) -> Output {
            Command::new("timeout")
                .args([
                    "30",
                    "nsenter",
                    "--target",
                    &pid.to_string(),
                    "--pid",
                    "--mount",
                ])
                .args([
                    "sh",
                    "-c",
                    &compact_script(),
                    "poddebug-stop",
                    &grace.to_string(),
                    record,
                    path,
                ])
                .output()
                .unwrap_or_else(|e| panic!("running nsenter: {e}"))
        }

        /// A debug container with a target: PID 1 and the target are in one mount namespace,
        /// the debug shell and its two sleeps in another; only the latter may die.
        #[test]
        fn stops_the_debug_processes_and_spares_the_target() {
            if !supported() {
                return;
            }
            let Some(ns) = namespace(&[
                "sh",
                "-c",
                "sleep 300 & unshare --mount sh -c 'sleep 301 & sleep 302 & wait' & wait",
            ]) else {
                panic!("namespace did not start");
            };
            // Wait for: init -> [target sleep, debug sh -> [sleep, sleep]].
            let found = eventually(|| {
                let kids = children(ns.init);
                let target = kids.iter().copied().find(|&p| comm(p) == "sleep")?;
                let debug = kids.iter().copied().find(|&p| comm(p) == "sh")?;
                let sleeps = children(debug);
                (sleeps.len() == 2 && sleeps.iter().all(|&p| comm(p) == "sleep"))
                    .then_some((target, debug, sleeps))
            });
            let Some((target, debug, sleeps)) = found else {
                panic!("process tree did not form")
            };

            // The container's termination message file, with a message of its own already.
            let log = std::env::temp_dir().join(format!(
                "poddebug-stop-test-{}-termination-log",
                std::process::id()
            ));
            fs::write(&log, "own message\n").expect("termination log");
            let record = "poddebug.dev/stop-request {\"requestedBy\":\"a \\\"b\\\" $(c)\"}";
            let out = run_script(debug, 2, record, &log.to_string_lossy());
            let written = fs::read_to_string(&log).unwrap_or_default();
            let _ = fs::remove_file(&log);
            assert_eq!(
                written,
                format!("own message\n{record}\n"),
                "appended verbatim"
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(0),
                "stdout {stdout} stderr {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(stdout.contains("poddebug-stop: term:"), "{stdout}");

            assert!(
                eventually(|| (!alive(debug) && sleeps.iter().all(|&p| !alive(p))).then_some(()))
                    .is_some(),
                "debug processes survived"
            );
            assert!(alive(target), "the target was signalled");
            assert!(alive(ns.init), "PID 1 (the pod's) was signalled");
        }

        /// No target, no shared PID namespace: the debug container's main process is PID 1 and
        /// ignores the signals; the script says so with exit code 3.
        #[test]
        fn reports_an_unkillable_own_pid_1() {
            if !supported() {
                return;
            }
            let Some(ns) = namespace(&["sleep", "300"]) else {
                panic!("namespace did not start")
            };
            // A termination message file that cannot be written: said, and the stop goes on.
            let out = run_script(ns.init, 1, "record", "/proc/no/such/file");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "stderr {stderr}");
            assert!(stderr.contains("poddebug-stop: pid1:"), "{stderr}");
            assert!(
                stderr.contains("poddebug-stop: norecord: cannot append to /proc/no/such/file"),
                "{stderr}"
            );
            assert!(alive(ns.init));
        }

        /// PID 1 is the wrapper shell of containers made by earlier versions, waiting for the
        /// real command: stopping the command ends the wrapper, and the whole namespace with it
        /// (the script included).
        #[test]
        fn a_wrapped_command_ends_the_container() {
            if !supported() {
                return;
            }
            let Some(mut ns) = namespace(&["sh", "-c", "\"$@\"; exit $?", "sh", "sleep", "300"])
            else {
                panic!("namespace did not start")
            };
            let init = ns.init;
            assert!(eventually(|| (children(init).len() == 1).then_some(())).is_some());
            let out = run_script(init, 2, "", "/dev/null");
            // Killed with the namespace (137 through nsenter), or it saw PID 1 go first.
            assert!(
                matches!(out.status.code(), None | Some(0 | 137)),
                "{:?}",
                out.status
            );
            let gone = eventually(|| ns.unshare.try_wait().ok().flatten());
            assert!(gone.is_some(), "the wrapper did not end");
        }
    }
}
