//! Checking OCSF events against the OCSF schema of their class: `tests/ocsf/validate.py`, run
//! by the Python `PODDEBUG_OCSF_PYTHON` names (one with the PyPI packages `ocsf-json-schema`
//! and `jsonschema`; `.ci/run` installs it and sets the variable).

use std::path::Path;

use serde_json::Value;

/// Validate `events`; panics naming every schema error. Without `PODDEBUG_OCSF_PYTHON`, the
/// check is skipped with a note, or fails with `CI=true` ([`crate::capability::missing`]).
pub fn assert_valid(events: &[Value]) {
    let Some(python) = std::env::var_os("PODDEBUG_OCSF_PYTHON") else {
        crate::capability::missing(
            "PODDEBUG_OCSF_PYTHON (a Python with the PyPI packages ocsf-json-schema and jsonschema, for the OCSF schema check)",
        );
        return;
    };
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("poddebug-ocsf-{}-{n}.jsonl", std::process::id()));
    let lines: String = events.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&file, lines).expect("write the events");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ocsf/validate.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(&file)
        .output();
    let _ = std::fs::remove_file(&file);
    let out = out.expect("run the OCSF validator");
    assert!(
        out.status.success(),
        "the events are not valid OCSF: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
