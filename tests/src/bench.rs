//! What the benchmark binaries (`src/bin/*-bench.rs`) share: their `--flag VALUE` command
//! lines and the statistics they print.

use std::str::FromStr;
use std::time::Duration;

/// Hands each `--flag VALUE` pair of the command line to `set`, which takes it (`Some`) or not
/// (`None`: an unknown flag, or a value that does not parse); the process then ends with exit
/// code 2 and a message naming the flag.
pub fn flags(mut set: impl FnMut(&str, &str) -> Option<()>) {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        if pair.get(1).and_then(|v| set(&pair[0], v)).is_none() {
            eprintln!("unknown or bad argument {}", pair[0]);
            std::process::exit(2);
        }
    }
}

/// A flag's value as a number (or anything else that parses).
pub fn num<T: FromStr>(v: &str) -> Option<T> {
    v.parse().ok()
}

/// The `p` quantile (0 to 1, nearest rank) of `v`, in any order; zero for none.
pub fn pct(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i.min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// The median (the upper one of an even count) of `v`; NaN for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `d` in milliseconds with `decimals` decimals.
pub fn ms(d: Duration, decimals: usize) -> String {
    format!("{:.*}", decimals, d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_medians() {
        let v: Vec<Duration> = [5, 1, 4, 2, 3].map(Duration::from_millis).to_vec();
        assert_eq!(pct(&v, 0.0), Duration::from_millis(1));
        assert_eq!(pct(&v, 0.5), Duration::from_millis(3));
        assert_eq!(pct(&v, 1.0), Duration::from_millis(5));
        assert_eq!(pct(&[], 0.5), Duration::ZERO);
        assert_eq!(median(vec![3.0, 1.0, 2.0, 9.0]), 3.0);
        assert!(median(Vec::new()).is_nan());
        assert_eq!(ms(Duration::from_micros(1500), 2), "1.50");
        assert_eq!(num::<usize>("12"), Some(12));
        assert_eq!(num::<usize>("x"), None);
    }
}
