//! What `kubectl poddebug POD` asks for, as the API's own object: the flags, kubectl's
//! `--custom` partial container merged in, and the small parsers of the command line.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use poddebug_client::PodDebugContainer;
use serde_json::Value;

/// The debug container the run flags describe, `--custom` read and merged in.
pub fn debug_container_of(args: &crate::args::RunArgs) -> Result<PodDebugContainer, String> {
    let custom = args.custom.as_deref().map(read_custom).transpose()?;
    let mut o = debug_container(&RunSpec {
        name: args.name.clone(),
        image: args.image.clone(),
        image_pull_policy: args.image_pull_policy,
        target: args.target.clone(),
        profile: args.profile.clone(),
        ttl: args.ttl,
        stdin: args.stdin,
        tty: args.tty,
        command: args.command.clone(),
        arguments_only: args.arguments_only,
        env: args.env.iter().flat_map(|l| l.0.clone()).collect(),
        custom,
    })?;
    o.reason.clone_from(&args.reason);
    o.ticket.clone_from(&args.ticket);
    o.debug_request.clone_from(&args.debug_request);
    Ok(o)
}

/// What a run creates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSpec {
    /// Debug container name; the server generates one when absent.
    pub name: Option<String>,
    /// Image; the server's default when absent.
    pub image: Option<String>,
    /// `imagePullPolicy`; the server's (the cluster's) default when absent.
    pub image_pull_policy: Option<PullPolicy>,
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
    /// What follows `--` is the container's `args`, not its `command`.
    pub arguments_only: bool,
    /// `KEY=VALUE` environment variables, in order, a later KEY replacing an earlier one.
    pub env: Vec<(String, String)>,
    /// kubectl's `--custom`: a partial container merged into the generated one.
    pub custom: Option<Value>,
}

/// The PodDebugContainer a run creates: only what was asked for, the server defaults the rest.
pub fn debug_container(spec: &RunSpec) -> Result<PodDebugContainer, String> {
    let mut o = PodDebugContainer::default();
    o.metadata.name.clone_from(&spec.name);
    let c = &mut o.container;
    c.image.clone_from(&spec.image);
    c.image_pull_policy = spec.image_pull_policy.map(|p| p.as_str().to_owned());
    if !spec.command.is_empty() {
        if spec.arguments_only {
            c.args = Some(spec.command.clone());
        } else {
            c.command = Some(spec.command.clone());
        }
    }
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in &spec.env {
        match env.iter_mut().find(|(name, _)| name == k) {
            Some(e) => e.1.clone_from(v),
            None => env.push((k.clone(), v.clone())),
        }
    }
    if !env.is_empty() {
        c.env = Some(
            env.into_iter()
                .map(|(name, value)| k8s_openapi::api::core::v1::EnvVar {
                    name,
                    value: Some(value),
                    ..Default::default()
                })
                .collect(),
        );
    }
    c.stdin = spec.stdin.then_some(true);
    c.tty = spec.tty.then_some(true);
    if let Some(custom) = &spec.custom {
        let mut merged = serde_json::to_value(&o.container).map_err(|e| e.to_string())?;
        strategic_merge(&mut merged, custom, &[]);
        o.container = serde_json::from_value(merged).map_err(|e| e.to_string())?;
    }
    o.target_container_name.clone_from(&spec.target);
    o.profile.clone_from(&spec.profile);
    o.ttl_seconds = spec
        .ttl
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Ok(o)
}

/// The merge keys of `v1.Container`'s lists (`patchStrategy: merge`); every other list is
/// replaced whole, as a strategic merge patch does.
fn merge_key(path: &[&str]) -> Option<&'static str> {
    match path {
        ["env"] => Some("name"),
        ["volumeMounts"] => Some("mountPath"),
        ["volumeDevices"] => Some("devicePath"),
        ["ports"] => Some("containerPort"),
        _ => None,
    }
}

/// kubectl's `--custom` merge: a strategic merge patch of `patch` into `base`, for the one
/// type a custom profile is (`v1.Container`). Objects merge field by field, `null` removes a
/// field, the lists above merge by their key and other lists are replaced.
///
/// Hand-written because no maintained Rust crate implements Kubernetes' strategic merge patch;
/// a container's handful of merge keys are all it needs.
fn strategic_merge(base: &mut Value, patch: &Value, path: &[&str]) {
    if let (Value::Object(b), Value::Object(p)) = (&mut *base, patch) {
        for (k, v) in p {
            if v.is_null() {
                b.remove(k);
                continue;
            }
            let mut sub = path.to_vec();
            sub.push(k);
            match b.get_mut(k) {
                Some(existing) => strategic_merge(existing, v, &sub),
                None => {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        return;
    }
    if let (Value::Array(b), Value::Array(p), Some(key)) = (&mut *base, patch, merge_key(path)) {
        for item in p {
            let id = item.get(key);
            match b.iter_mut().find(|e| id.is_some() && e.get(key) == id) {
                Some(existing) => strategic_merge(existing, item, &[]),
                None => b.push(item.clone()),
            }
        }
        return;
    }
    *base = patch.clone();
}

/// Read kubectl's `--custom` file: a partial container, JSON or YAML. Like kubectl, it may not
/// set what the debug container is (name, command, image, lifecycle, volume devices); fields
/// a container does not have are dropped, as kubectl's decoding drops them.
pub fn read_custom(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("must pass a container spec json file for custom profile: {e}"))?;
    let invalid = |e: String| {
        format!(
            "{} does not contain a valid container spec: {e}",
            path.display()
        )
    };
    let mut v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_str(&text).map_err(|e| invalid(e.to_string()))?,
    };
    // `name` is required in the type; a custom profile may not set it, so it is empty here.
    if let Value::Object(m) = &mut v {
        m.entry("name")
            .or_insert_with(|| Value::String(String::new()));
    }
    let c: Container = serde_json::from_value(v).map_err(|e| invalid(e.to_string()))?;
    if !c.name.is_empty()
        || c.command.as_ref().is_some_and(|v| !v.is_empty())
        || c.image.as_ref().is_some_and(|v| !v.is_empty())
        || c.lifecycle.is_some()
        || c.volume_devices.as_ref().is_some_and(|v| !v.is_empty())
    {
        return Err(
            "name, command, image, lifecycle and volume devices are not modifiable via custom profile"
                .to_owned(),
        );
    }
    let mut v = serde_json::to_value(&c).map_err(|e| e.to_string())?;
    if let Value::Object(m) = &mut v {
        m.remove("name");
    }
    Ok(v)
}

/// The pod a `-f FILE` names: `(name, namespace)`, from a JSON or YAML Pod.
pub fn read_pod_file(path: &Path) -> Result<(String, Option<String>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "the path {:?} cannot be read: {e}",
            path.display().to_string()
        )
    })?;
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_str(&text)
            .map_err(|e| format!("error parsing {}: {e}", path.display()))?,
    };
    let kind = v["kind"].as_str().unwrap_or_default();
    if kind != "Pod" {
        return Err(format!(
            "{}: kind {kind:?}: only a Pod can be debugged here",
            path.display()
        ));
    }
    let name = v["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("{}: the Pod has no metadata.name", path.display()))?;
    let ns = v["metadata"]["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    Ok((name.to_owned(), ns))
}

/// One `--env` value: `KEY=VALUE[,KEY=VALUE...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvList(pub Vec<(String, String)>);

/// Parse one `--env` as kubectl's string-to-string flags read it: comma-separated `KEY=VALUE`
/// pairs (a pair in double quotes may hold commas), the value after the first `=`.
pub fn parse_env(s: &str) -> Result<EnvList, String> {
    let mut pairs = Vec::new();
    for field in csv_fields(s)? {
        match field.split_once('=') {
            Some((k, v)) if !k.is_empty() => pairs.push((k.to_owned(), v.to_owned())),
            _ => return Err(format!("{field} must be formatted as key=value")),
        }
    }
    Ok(EnvList(pairs))
}

/// The fields of one CSV record (RFC 4180 quoting).
fn csv_fields(s: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        match c {
            '"' if at_start => quoted = true,
            '"' if quoted => {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                }
            }
            ',' if !quoted => {
                fields.push(std::mem::take(&mut cur));
                at_start = true;
                continue;
            }
            c => cur.push(c),
        }
        at_start = false;
    }
    if quoted {
        return Err(format!("{s:?}: a quote is not closed"));
    }
    fields.push(cur);
    Ok(fields)
}

/// `--image-pull-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullPolicy {
    /// `Always`.
    Always,
    /// `IfNotPresent`.
    IfNotPresent,
    /// `Never`.
    Never,
}

impl PullPolicy {
    fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// Parse `--image-pull-policy` (kubectl's values, case-sensitive as the API's).
pub fn parse_pull_policy(s: &str) -> Result<PullPolicy, String> {
    match s {
        "Always" => Ok(PullPolicy::Always),
        "IfNotPresent" => Ok(PullPolicy::IfNotPresent),
        "Never" => Ok(PullPolicy::Never),
        other => Err(format!("invalid image pull policy: {other}")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_carry_only_what_was_asked() {
        assert_eq!(
            serde_json::to_value(debug_container(&RunSpec::default()).unwrap()).unwrap(),
            json!({"apiVersion": "", "kind": "", "metadata": {}, "container": {"name": ""}})
        );
        let spec = RunSpec {
            name: Some("dbg".into()),
            image: Some("busybox:1.36".into()),
            image_pull_policy: Some(PullPolicy::IfNotPresent),
            target: Some("app".into()),
            profile: Some("baseline".into()),
            ttl: Some(Duration::from_secs(1800)),
            stdin: true,
            tty: true,
            command: vec!["sh".into()],
            env: vec![
                ("A".into(), "1".into()),
                ("B".into(), "2".into()),
                ("A".into(), "3".into()),
            ],
            ..Default::default()
        };
        let v = serde_json::to_value(debug_container(&spec).unwrap()).unwrap();
        assert_eq!(v["metadata"]["name"], "dbg");
        assert_eq!(
            v["container"],
            json!({"name": "", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                   "command": ["sh"],
                   "env": [{"name": "A", "value": "3"}, {"name": "B", "value": "2"}],
                   "stdin": true, "tty": true})
        );
        assert_eq!(v["targetContainerName"], "app");
        assert_eq!(v["profile"], "baseline");
        assert_eq!(v["ttlSeconds"], 1800);
        let args_only = RunSpec {
            command: vec!["-c".into(), "date".into()],
            arguments_only: true,
            ..Default::default()
        };
        let v = serde_json::to_value(debug_container(&args_only).unwrap()).unwrap();
        assert_eq!(v["container"]["args"], json!(["-c", "date"]));
        assert!(v["container"].get("command").is_none());
    }

    #[test]
    fn custom_merges_as_a_strategic_merge_patch() {
        let spec = RunSpec {
            image: Some("busybox".into()),
            env: vec![("A".into(), "1".into()), ("B".into(), "2".into())],
            custom: Some(json!({
                "env": [{"name": "B", "value": "custom"}, {"name": "C", "value": "3"}],
                "securityContext": {"capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "stdin": null
            })),
            stdin: true,
            ..Default::default()
        };
        let v = serde_json::to_value(debug_container(&spec).unwrap()).unwrap();
        assert_eq!(
            v["container"],
            json!({"name": "", "image": "busybox",
                   "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "custom"},
                           {"name": "C", "value": "3"}],
                   "securityContext": {"capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}},
                   "volumeMounts": [{"name": "data", "mountPath": "/data"}]})
        );
        // A list without a merge key is replaced.
        let mut base = json!({"securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}});
        strategic_merge(
            &mut base,
            &json!({"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}),
            &[],
        );
        assert_eq!(
            base["securityContext"]["capabilities"]["add"],
            json!(["NET_ADMIN"])
        );
    }

    #[test]
    fn custom_files_are_json_or_yaml_and_may_not_set_what_the_container_is() {
        let dir = std::env::temp_dir().join(format!("pd-custom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json_file = dir.join("c.json");
        std::fs::write(
            &json_file,
            r#"{"env":[{"name":"X","value":"1"}],"unknown":1}"#,
        )
        .unwrap();
        assert_eq!(
            read_custom(&json_file).unwrap(),
            json!({"env": [{"name": "X", "value": "1"}]})
        );
        let yaml_file = dir.join("c.yaml");
        std::fs::write(
            &yaml_file,
            "workingDir: /tmp\nsecurityContext:\n  runAsUser: 0\n",
        )
        .unwrap();
        assert_eq!(
            read_custom(&yaml_file).unwrap(),
            json!({"workingDir": "/tmp", "securityContext": {"runAsUser": 0}})
        );
        for bad in [
            r#"{"image":"x"}"#,
            r#"{"command":["sh"]}"#,
            r#"{"name":"x"}"#,
            r#"{"lifecycle":{}}"#,
            r#"{"volumeDevices":[{"name":"d","devicePath":"/d"}]}"#,
        ] {
            std::fs::write(&json_file, bad).unwrap();
            assert_eq!(
                read_custom(&json_file).unwrap_err(),
                "name, command, image, lifecycle and volume devices are not modifiable via custom profile",
                "{bad}"
            );
        }
        std::fs::write(&json_file, "{not: [valid").unwrap();
        assert!(
            read_custom(&json_file)
                .unwrap_err()
                .contains("does not contain a valid container spec")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn env_lists() {
        assert_eq!(
            parse_env("A=b=c").unwrap(),
            EnvList(vec![("A".into(), "b=c".into())])
        );
        assert_eq!(
            parse_env(r#"A=1,B=2,"C=x,y""#).unwrap(),
            EnvList(vec![
                ("A".into(), "1".into()),
                ("B".into(), "2".into()),
                ("C".into(), "x,y".into())
            ])
        );
        assert_eq!(
            parse_env("=x").unwrap_err(),
            "=x must be formatted as key=value"
        );
        assert_eq!(
            parse_env("A=1,novalue").unwrap_err(),
            "novalue must be formatted as key=value"
        );
    }

    #[test]
    fn pull_policies() {
        assert_eq!(parse_pull_policy("Never"), Ok(PullPolicy::Never));
        assert_eq!(
            parse_pull_policy("always"),
            Err("invalid image pull policy: always".to_owned())
        );
    }
}
