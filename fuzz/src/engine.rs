//! The mutation engine: seeds, byte-level mutations, splices, a bounded budget, and panics
//! caught and reported with the input that caused them.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::targets::Target;

/// How long a run may go: whichever limit comes first.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Stop after this many inputs.
    pub iterations: u64,
    /// Stop after this much wall time.
    pub time: Duration,
    /// Seed of the random generator (a run is reproducible from it and the iteration count).
    pub seed: u64,
}

/// An input that made the target panic.
#[derive(Clone, Debug)]
pub struct Crash {
    /// The input.
    pub input: Vec<u8>,
    /// The panic message.
    pub message: String,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Inputs tried.
    pub executions: u64,
    /// The first crash, if any (the run stops there).
    pub crash: Option<Crash>,
}

/// Tokens that matter to the parsers under test, inserted by the mutator.
const DICTIONARY: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"\\u0000",
    b"\\ud800",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"%",
    b"%FF",
    b"%2F",
    b"%00",
    b"%C3%A9",
    b"+",
    b"&",
    b"=",
    b"/",
    b"..",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xe2\x80\xae",
    b"\r\n",
    b"\x80\x7f",
    b"\x7e",
    b"\x7f",
    b"\x80\x03\x00\x01",
];

fn mutate(rng: &mut StdRng, input: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    for _ in 0..rng.random_range(1..=4) {
        let len = input.len();
        match rng.random_range(0..8) {
            // Replace one byte.
            0 if len > 0 => {
                let at = rng.random_range(0..len);
                input[at] = rng.random();
            }
            // Flip one bit.
            1 if len > 0 => {
                let at = rng.random_range(0..len);
                input[at] ^= 1 << rng.random_range(0..8);
            }
            // Delete a range.
            2 if len > 0 => {
                let at = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - at).min(16));
                input.drain(at..at + n);
            }
            // Duplicate a range (repetition finds depth and length limits).
            3 if len > 0 => {
                let at = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - at).min(32));
                let chunk = input[at..at + n].to_vec();
                for _ in 0..rng.random_range(1..=8) {
                    let to = rng.random_range(0..=input.len());
                    input.splice(to..to, chunk.iter().copied());
                }
            }
            // Insert a dictionary token.
            4 => {
                let token = DICTIONARY[rng.random_range(0..DICTIONARY.len())];
                let to = rng.random_range(0..=len);
                input.splice(to..to, token.iter().copied());
            }
            // Splice in part of another seed.
            5 if !seeds.is_empty() => {
                let other = &seeds[rng.random_range(0..seeds.len())];
                if !other.is_empty() {
                    let from = rng.random_range(0..other.len());
                    let n = rng.random_range(1..=other.len() - from);
                    let to = rng.random_range(0..=len);
                    input.splice(to..to, other[from..from + n].iter().copied());
                }
            }
            // Truncate.
            6 if len > 0 => input.truncate(rng.random_range(0..len)),
            // Insert a random byte.
            _ => {
                let to = rng.random_range(0..=len);
                input.insert(to, rng.random());
            }
        }
    }
    // Keep inputs small enough that a run makes many executions.
    input.truncate(64 * 1024);
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// Run one input through a target, turning a panic into a [`Crash`].
pub fn execute(target: &Target, input: &[u8]) -> Result<(), Crash> {
    catch_unwind(AssertUnwindSafe(|| (target.run)(input))).map_err(|p| Crash {
        input: input.to_vec(),
        message: panic_message(p.as_ref()),
    })
}

/// Feed `target` its seeds, then mutations, until the budget is spent or an input panics.
pub fn run(target: &Target, budget: Budget) -> Outcome {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(budget.seed);
    let seeds = (target.seeds)();
    let mut executions = 0u64;
    for s in &seeds {
        if executions >= budget.iterations {
            break;
        }
        executions += 1;
        if let Err(crash) = execute(target, s) {
            return Outcome {
                executions,
                crash: Some(crash),
            };
        }
    }
    // Inputs that came out of earlier mutations are mutated further (a small pool, refreshed),
    // so that several mutations can stack up without coverage feedback.
    let mut pool: Vec<Vec<u8>> = seeds.clone();
    while executions < budget.iterations {
        // The clock is read every 256 inputs: cheap, and a run overshoots by a few ms at most.
        if executions.is_multiple_of(256) && started.elapsed() >= budget.time {
            break;
        }
        let mut input = match rng.random_range(0..10) {
            0 => (0..rng.random_range(0..128))
                .map(|_| rng.random())
                .collect(),
            1..=3 if !seeds.is_empty() => seeds[rng.random_range(0..seeds.len())].clone(),
            _ if pool.is_empty() => Vec::new(),
            _ => pool[rng.random_range(0..pool.len())].clone(),
        };
        mutate(&mut rng, &mut input, &seeds);
        executions += 1;
        if let Err(crash) = execute(target, &input) {
            return Outcome {
                executions,
                crash: Some(crash),
            };
        }
        if pool.len() < 256 {
            pool.push(input);
        } else {
            let at = rng.random_range(0..pool.len());
            pool[at] = input;
        }
    }
    Outcome {
        executions,
        crash: None,
    }
}
