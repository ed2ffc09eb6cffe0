//! Every fuzz target, briefly, as part of the test suite: the seeds and a fixed number of
//! mutations from a fixed seed (deterministic, so a failure reproduces with the same command).
//! Longer runs: `cargo run -p poddebug-fuzz --release -- all --seconds 60`.

use std::time::Duration;

use poddebug_fuzz::{Budget, TARGETS, run};

#[test]
fn every_target_survives_a_short_run() {
    for t in TARGETS {
        let outcome = run(
            t,
            Budget {
                iterations: 20_000,
                time: Duration::MAX,
                seed: 13,
            },
        );
        if let Some(c) = outcome.crash {
            panic!(
                "{}: {}\ninput: {:?}",
                t.name,
                c.message,
                String::from_utf8_lossy(&c.input)
            );
        }
        assert_eq!(outcome.executions, 20_000, "{}", t.name);
    }
}
