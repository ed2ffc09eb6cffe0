//! A log written to a pipe or a file (a container's log, `register.sh`'s `server.log`) carries
//! no terminal escape sequences: colours only on a terminal, as Kubernetes components never
//! colour theirs.

use std::process::Command;

#[test]
fn a_text_log_to_a_pipe_has_no_colour() {
    // A start that fails at once logs its first line and the fatal one, through a pipe.
    let out = Command::new(env!("CARGO_BIN_EXE_poddebug-apiserver"))
        .args([
            "--log-format=text",
            "-v=2",
            "--kubeconfig=/nonexistent/poddebug-test-kubeconfig",
            "--bind-address=127.0.0.1",
            "--secure-port=1",
        ])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .output()
        .expect("the server runs");
    assert!(!out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("INFO") && log.contains("starting") && log.contains("fatal"),
        "{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "escape sequences in a piped log: {log:?}"
    );
}
