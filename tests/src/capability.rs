//! Tests that need something of the machine (kubectl, python3, namespaces): locally they are
//! skipped when it is missing, with a note; in CI (`CI=true`) a missing capability fails the
//! test, so that a test that did not run never counts as passed there.

/// Whether `CI=true` is set.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Say that the test skips because `what` is missing; panics instead when `CI=true`.
pub fn missing(what: &str) {
    assert!(
        !in_ci(),
        "CI=true and {what} is missing: this test must run in CI"
    );
    eprintln!("skipping: {what} is missing");
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_capability_fails_in_ci() {
        // Run in a child process, so that setting CI here changes nothing else.
        let exe = std::env::current_exe().expect("test binary");
        for (ci, fails) in [("true", true), ("", false)] {
            let out = std::process::Command::new(&exe)
                .args(["--exact", "capability::tests::child", "--nocapture"])
                .env("CI", ci)
                .env("PODDEBUG_CAPABILITY_CHILD", "1")
                .output()
                .expect("run child");
            assert_eq!(!out.status.success(), fails, "CI={ci:?}: {out:?}");
        }
    }

    #[test]
    fn child() {
        if std::env::var("PODDEBUG_CAPABILITY_CHILD").is_ok() {
            super::missing("a capability nobody has");
        }
    }
}
