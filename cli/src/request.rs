//! What each subcommand asks of the API: paths and bodies, as pure functions.

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::{Map, Value, json};

/// Prefix of the API.
pub const GV: &str = "/apis/poddebug.dev/v1alpha1";

/// Characters escaped in a query value.
const QUERY: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'&')
    .add(b'=')
    .add(b'#')
    .add(b'+')
    .add(b'%')
    .add(b'?');

/// `.../namespaces/NS/pods/POD/debug[/NAME]`.
pub fn debug_path(ns: &str, pod: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{GV}/namespaces/{ns}/pods/{pod}/debug/{n}"),
        None => format!("{GV}/namespaces/{ns}/pods/{pod}/debug"),
    }
}

/// `.../namespaces/NS/pods/POD/log?container=NAME[&follow=true]`.
pub fn log_path(ns: &str, pod: &str, container: &str, follow: bool) -> String {
    let mut p = format!(
        "{GV}/namespaces/{ns}/pods/{pod}/log?container={}",
        utf8_percent_encode(container, QUERY)
    );
    if follow {
        p.push_str("&follow=true");
    }
    p
}

/// `.../namespaces/NS/pods/POD/attach?container=NAME&stdin=..&stdout=true&stderr=..&tty=..`
/// (no separate stderr with a TTY, as kubectl asks).
pub fn attach_path(ns: &str, pod: &str, container: &str, stdin: bool, tty: bool) -> String {
    format!(
        "{GV}/namespaces/{ns}/pods/{pod}/attach?container={}&stdin={stdin}&stdout=true&stderr={}&tty={tty}",
        utf8_percent_encode(container, QUERY),
        !tty
    )
}

/// What `run` creates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSpec {
    /// Image; the server's default when empty.
    pub image: Option<String>,
    /// Target container.
    pub target: Option<String>,
    /// Profile; the server's default when empty.
    pub profile: Option<String>,
    /// Keep stdin open.
    pub stdin: bool,
    /// Allocate a TTY.
    pub tty: bool,
    /// Command and arguments after `--`.
    pub command: Vec<String>,
    /// `KEY=VALUE` environment variables.
    pub env: Vec<(String, String)>,
}

/// The PodDebugContainer body for `run`.
pub fn run_body(spec: &RunSpec) -> Value {
    let mut container = Map::new();
    if let Some(i) = &spec.image {
        container.insert("image".into(), json!(i));
    }
    if !spec.command.is_empty() {
        container.insert("command".into(), json!(spec.command));
    }
    if !spec.env.is_empty() {
        let env: Vec<Value> = spec
            .env
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect();
        container.insert("env".into(), Value::Array(env));
    }
    if spec.stdin {
        container.insert("stdin".into(), json!(true));
    }
    if spec.tty {
        container.insert("tty".into(), json!(true));
    }
    let mut body = Map::new();
    body.insert("apiVersion".into(), json!("poddebug.dev/v1alpha1"));
    body.insert("kind".into(), json!("PodDebugContainer"));
    body.insert("container".into(), Value::Object(container));
    if let Some(t) = &spec.target {
        body.insert("targetContainerName".into(), json!(t));
    }
    if let Some(p) = &spec.profile {
        body.insert("profile".into(), json!(p));
    }
    Value::Object(body)
}

/// Parse `KEY=VALUE`.
pub fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// One line describing a debug container object, for humans.
pub fn summary(obj: &Value) -> String {
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    let pod = obj["status"]["podName"].as_str().unwrap_or("?");
    let phase = obj["status"]["phase"].as_str().unwrap_or("Waiting");
    let image = obj["container"]["image"].as_str().unwrap_or("");
    let reason = obj["status"]["state"]["waiting"]["reason"]
        .as_str()
        .or_else(|| obj["status"]["state"]["terminated"]["reason"].as_str());
    match reason {
        Some(r) => format!("debug container {name} in pod {pod} ({image}): {phase} ({r})"),
        None => format!("debug container {name} in pod {pod} ({image}): {phase}"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            debug_path("ns", "web", Some("dbg")),
            "/apis/poddebug.dev/v1alpha1/namespaces/ns/pods/web/debug/dbg"
        );
        assert_eq!(
            debug_path("ns", "web", None),
            "/apis/poddebug.dev/v1alpha1/namespaces/ns/pods/web/debug"
        );
        assert_eq!(
            log_path("ns", "web", "dbg", true),
            "/apis/poddebug.dev/v1alpha1/namespaces/ns/pods/web/log?container=dbg&follow=true"
        );
        assert_eq!(
            attach_path("ns", "web", "dbg", true, true),
            "/apis/poddebug.dev/v1alpha1/namespaces/ns/pods/web/attach?container=dbg&stdin=true&stdout=true&stderr=false&tty=true"
        );
    }

    #[test]
    fn bodies_carry_only_what_was_asked() {
        assert_eq!(
            run_body(&RunSpec::default()),
            json!({"apiVersion": "poddebug.dev/v1alpha1", "kind": "PodDebugContainer", "container": {}})
        );
        let spec = RunSpec {
            image: Some("busybox:1.36".into()),
            target: Some("app".into()),
            profile: Some("baseline".into()),
            stdin: true,
            tty: true,
            command: vec!["sh".into()],
            env: vec![("A".into(), "1".into())],
        };
        assert_eq!(
            run_body(&spec),
            json!({
                "apiVersion": "poddebug.dev/v1alpha1", "kind": "PodDebugContainer",
                "container": {"image": "busybox:1.36", "command": ["sh"], "env": [{"name": "A", "value": "1"}], "stdin": true, "tty": true},
                "targetContainerName": "app", "profile": "baseline"
            })
        );
    }

    #[test]
    fn env_pairs() {
        assert_eq!(parse_env("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(parse_env("=x").is_err());
        assert!(parse_env("novalue").is_err());
    }

    #[test]
    fn summaries() {
        let o = json!({"metadata": {"name": "dbg"}, "container": {"image": "busybox"},
                       "status": {"podName": "web", "phase": "Waiting", "state": {"waiting": {"reason": "ErrImagePull"}}}});
        assert_eq!(
            summary(&o),
            "debug container dbg in pod web (busybox): Waiting (ErrImagePull)"
        );
    }
}
