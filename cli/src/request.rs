//! What `kubectl poddebug POD` asks for, as the API's own object; and the small parsers of the
//! command line.

use std::time::Duration;

use k8s_openapi::api::core::v1::EnvVar;
use poddebug_client::PodDebugContainer;

/// What a run creates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSpec {
    /// Debug container name; the server generates one when absent.
    pub name: Option<String>,
    /// Image; the server's default when absent.
    pub image: Option<String>,
    /// Target container.
    pub target: Option<String>,
    /// Profile; the server's default when absent.
    pub profile: Option<String>,
    /// Time limit (`ttlSeconds`); the server's default when absent.
    pub ttl: Option<Duration>,
    /// Keep stdin open.
    pub stdin: bool,
    /// Allocate a TTY.
    pub tty: bool,
    /// Command and arguments after `--`.
    pub command: Vec<String>,
    /// `KEY=VALUE` environment variables.
    pub env: Vec<(String, String)>,
}

/// The PodDebugContainer a run creates: only what was asked for, the server defaults the rest.
pub fn debug_container(spec: &RunSpec) -> PodDebugContainer {
    let mut o = PodDebugContainer::default();
    o.metadata.name.clone_from(&spec.name);
    o.container.image.clone_from(&spec.image);
    if !spec.command.is_empty() {
        o.container.command = Some(spec.command.clone());
    }
    if !spec.env.is_empty() {
        o.container.env = Some(
            spec.env
                .iter()
                .map(|(k, v)| EnvVar {
                    name: k.clone(),
                    value: Some(v.clone()),
                    ..Default::default()
                })
                .collect(),
        );
    }
    o.container.stdin = spec.stdin.then_some(true);
    o.container.tty = spec.tty.then_some(true);
    o.target_container_name.clone_from(&spec.target);
    o.profile.clone_from(&spec.profile);
    o.ttl_seconds = spec
        .ttl
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    o
}

/// Parse `KEY=VALUE`.
pub fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// Parse a duration as kubectl writes them: `90s`, `5m`, `1h`, `1h30m`, or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = 0u64;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(format!("{s:?} is not a duration such as 30s, 5m or 1h")),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("{s:?} is not a duration such as 30s, 5m or 1h"))?;
        total = total.saturating_add(n.saturating_mul(unit));
        digits.clear();
    }
    if !digits.is_empty() || s.is_empty() {
        return Err(format!("{s:?} is not a duration such as 30s, 5m or 1h"));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_carry_only_what_was_asked() {
        assert_eq!(
            serde_json::to_value(debug_container(&RunSpec::default())).unwrap(),
            json!({"apiVersion": "", "kind": "", "metadata": {}, "container": {"name": ""}})
        );
        let spec = RunSpec {
            name: Some("dbg".into()),
            image: Some("busybox:1.36".into()),
            target: Some("app".into()),
            profile: Some("baseline".into()),
            ttl: Some(Duration::from_secs(1800)),
            stdin: true,
            tty: true,
            command: vec!["sh".into()],
            env: vec![("A".into(), "1".into())],
        };
        let v = serde_json::to_value(debug_container(&spec)).unwrap();
        assert_eq!(v["metadata"]["name"], "dbg");
        assert_eq!(
            v["container"],
            json!({"name": "", "image": "busybox:1.36", "command": ["sh"],
                   "env": [{"name": "A", "value": "1"}], "stdin": true, "tty": true})
        );
        assert_eq!(v["targetContainerName"], "app");
        assert_eq!(v["profile"], "baseline");
        assert_eq!(v["ttlSeconds"], 1800);
    }

    #[test]
    fn env_pairs() {
        assert_eq!(parse_env("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(parse_env("=x").is_err());
        assert!(parse_env("novalue").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("").is_err());
    }
}
