//! `docs/flags.md` is generated from `--help`; this test fails when it is stale, and prints how
//! to regenerate it. (It also makes `cargo test` build the binary the end-to-end suite runs.)

use std::path::PathBuf;
use std::process::Command;

const HEADER: &str = "# poddebug-apiserver flags\n\nGenerated from `poddebug-apiserver --help`; regenerate with\n`UPDATE_FLAGS_DOC=1 cargo test -p poddebug-apiserver --test flags_doc`.\n\n```text\n";

fn expected() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_poddebug-apiserver"))
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(
        out.status.success(),
        "--help failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{HEADER}{}```\n", String::from_utf8_lossy(&out.stdout))
}

#[test]
fn flags_doc_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/flags.md");
    let want = expected();
    if std::env::var_os("UPDATE_FLAGS_DOC").is_some() {
        std::fs::write(&path, &want).expect("write docs/flags.md");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/flags.md is stale: run UPDATE_FLAGS_DOC=1 cargo test -p poddebug-apiserver --test flags_doc"
    );
}

#[test]
fn help_names_the_kubernetes_flags() {
    let help = expected();
    for flag in [
        "--secure-port",
        "--bind-address",
        "--tls-cert-file",
        "--tls-private-key-file",
        "--cert-dir",
        "--kubeconfig",
        "--authentication-kubeconfig",
        "--authorization-kubeconfig",
        "--authentication-skip-lookup",
        "--authentication-token-webhook-cache-ttl",
        "--client-ca-file",
        "--requestheader-client-ca-file",
        "--requestheader-allowed-names",
        "--requestheader-username-headers",
        "--requestheader-group-headers",
        "--requestheader-uid-headers",
        "--requestheader-extra-headers-prefix",
        "--authorization-always-allow-paths",
        "--authorization-webhook-cache-authorized-ttl",
        "--authorization-webhook-cache-unauthorized-ttl",
        "--shutdown-grace-period",
        "--log-format",
        "--default-image",
        "--allowed-images",
        "--default-profile",
        "--max-debug-containers-per-pod",
        "--impersonate",
        "--attach-wait-timeout",
    ] {
        assert!(help.contains(flag), "--help does not document {flag}");
    }
}

#[test]
fn bad_flags_are_all_reported_and_exit_non_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_poddebug-apiserver"))
        .args([
            "--tls-cert-file=/nonexistent/a.crt",
            "--client-ca-file=/nonexistent/ca.crt",
            "--request-timeout=0s",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--tls-cert-file and --tls-private-key-file must be given together"),
        "{err}"
    );
    assert!(err.contains("--client-ca-file"), "{err}");
    assert!(err.contains("--request-timeout must be positive"), "{err}");
}

#[test]
fn deployment_manifest_uses_only_real_flags() {
    let help = expected();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/deployment.yaml");
    let manifest = std::fs::read_to_string(path).expect("manifests/deployment.yaml");
    let flags: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- --"))
        .map(|f| f.split('=').next().unwrap_or(f))
        .collect();
    assert!(flags.len() >= 3, "the Deployment passes flags: {flags:?}");
    for f in flags {
        assert!(
            help.contains(&format!("--{f} ")) || help.contains(&format!("--{f}\n")),
            "--{f} is not a flag of the server"
        );
    }
}
