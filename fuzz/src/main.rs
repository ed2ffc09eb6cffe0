//! `poddebug-fuzz TARGET|all [--seconds N] [--iterations N] [--seed N]`: run fuzz targets for a
//! bounded time; a crashing input is written to `fuzz/crashes/` and the exit status is 1.

use std::process::ExitCode;
use std::time::Duration;

use poddebug_fuzz::{Budget, TARGETS, Target, run, target};

const USAGE: &str = "usage: poddebug-fuzz TARGET|all [--seconds N] [--iterations N] [--seed N]\n       poddebug-fuzz --list";

fn parse_args() -> Result<(Vec<&'static Target>, Budget), String> {
    let mut args = std::env::args().skip(1);
    let mut targets = Vec::new();
    let mut budget = Budget {
        iterations: u64::MAX,
        time: Duration::from_secs(60),
        seed: 1,
    };
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number\n{USAGE}"))
        };
        match a.as_str() {
            "--seconds" => budget.time = Duration::from_secs(value("--seconds")?),
            "--iterations" => budget.iterations = value("--iterations")?,
            "--seed" => budget.seed = value("--seed")?,
            "--list" => {
                for t in TARGETS {
                    println!("{:18} {}", t.name, t.about);
                }
                std::process::exit(0);
            }
            "all" => targets.extend(TARGETS.iter()),
            name => {
                targets.push(target(name).ok_or_else(|| format!("unknown target {name}\n{USAGE}"))?)
            }
        }
    }
    if targets.is_empty() {
        return Err(USAGE.to_owned());
    }
    Ok((targets, budget))
}

fn main() -> ExitCode {
    let (targets, budget) = match parse_args() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // The panics are caught and reported below; the default hook would print each one.
    std::panic::set_hook(Box::new(|_| {}));
    let mut failed = false;
    for t in targets {
        let started = std::time::Instant::now();
        let outcome = run(t, budget);
        let secs = started.elapsed().as_secs_f64();
        match outcome.crash {
            None => println!(
                "{:18} ok: {} inputs in {secs:.1}s ({:.0}/s)",
                t.name,
                outcome.executions,
                outcome.executions as f64 / secs.max(1e-9)
            ),
            Some(crash) => {
                failed = true;
                let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crashes");
                let file = dir.join(format!("{}-{}.bin", t.name, budget.seed));
                let saved = std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(&file, &crash.input))
                    .map(|()| file.display().to_string())
                    .unwrap_or_else(|e| format!("(not saved: {e})"));
                println!(
                    "{:18} CRASH after {} inputs: {}\n  input {:?}\n  saved to {saved}",
                    t.name,
                    outcome.executions,
                    crash.message,
                    String::from_utf8_lossy(&crash.input),
                );
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
