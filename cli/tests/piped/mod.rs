//! The plugin run without a terminal (its stdin a pipe), shared by the suites that need no pty.
#![allow(dead_code)] // each suite uses part of it

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs the plugin with `input` on its stdin; (exit code, stdout, stderr). `PATH` is emptied so
/// that a kubectl cannot be what answers.
pub fn plugin(kc: &Path, args: &[&str], input: Option<&str>) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-poddebug"))
        .env("KUBECONFIG", kc)
        .env("PATH", "")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("plugin");
    let mut stdin = child.stdin.take().expect("stdin");
    if let Some(i) = input {
        stdin.write_all(i.as_bytes()).expect("write");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("plugin");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`plugin`] on a blocking thread.
pub async fn run(kc: &Path, args: &[&str], input: Option<&str>) -> (Option<i32>, String, String) {
    let kc = kc.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let input = input.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        plugin(&kc, &args, input.as_deref())
    })
    .await
    .expect("plugin task")
}
