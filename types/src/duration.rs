//! Durations as Kubernetes components and kubectl write them (Go's `time.ParseDuration`, plus
//! bare seconds): `90s`, `5m`, `1h30m`, `250ms`, `90`. Shared by the server's flags and the
//! plugin's, so that both read `--default-debug-ttl=1h30m` and `--ttl=1h30m` alike.

use std::time::Duration;

/// Parse a Go-style duration: `90s`, `5m`, `1h30m`, `250ms`, or bare seconds.
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".to_owned());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("invalid duration {s:?}"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(format!("invalid unit {other:?} in duration {s:?}")),
        };
        rest = &rest[unit_len..];
        total += Duration::from_secs_f64(value * factor);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert!(parse("5x").is_err());
        assert!(parse("m").is_err());
        assert!(parse("").is_err());
    }
}
