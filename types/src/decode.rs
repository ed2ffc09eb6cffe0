//! Strict decoding of request bodies, the way kube-apiserver decodes with
//! `fieldValidation=Strict`.
//!
//! serde and k8s-openapi accept unknown fields silently and let a repeated key win over the
//! first one. Both hide typos (`"imagePulPolicy"`) and smuggled values, so every problem is
//! collected and answered with one 400 listing them all, in the order they occur in the body,
//! worded as kube-apiserver words it: `PodDebugContainer in version "v1alpha1" cannot be handled
//! as a PodDebugContainer: strict decoding error: unknown field "container.foo", duplicate field
//! "metadata.name"`.
//!
//! Duplicate keys are found while parsing (serde_json keeps the last value of a repeated key
//! and says nothing); unknown fields are reported by `serde_ignored` while the parsed value is
//! turned into the typed object.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::api::{KIND_POD_DEBUG_CONTAINER, PodDebugContainer};
pub use crate::pass_through::PassThroughFields;
use crate::pass_through::value_at;
use crate::status::ApiError;
use crate::{API_VERSION, VERSION};

/// Largest body accepted: kube-apiserver's default `--max-request-body-bytes` (3 MiB), so a
/// body we accept is never refused later for its size.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// One key of a JSON document: an object member or an array index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Segment {
    Key(String),
    Index(usize),
}

/// Render a path as Go's strict decoder does: `container.env[0].name`.
pub(crate) fn render_path(segments: &[Segment]) -> String {
    let mut out = String::new();
    for seg in segments {
        match seg {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// A problem found by strict decoding, with the position of its key in the document so that
/// problems found by different passes can be reported in document order.
#[derive(Debug)]
struct Problem {
    order: usize,
    text: String,
}

/// What the parsing pass learned: duplicate keys, and the document position of the first
/// occurrence of every key path.
#[derive(Default)]
struct ParseState {
    counter: usize,
    first_seen: HashMap<String, usize>,
    problems: Vec<Problem>,
}

/// A `DeserializeSeed` that builds a `serde_json::Value` while remembering where it is.
struct Tracking<'a> {
    state: &'a mut ParseState,
    path: &'a mut Vec<Segment>,
}

impl<'de> DeserializeSeed<'de> for Tracking<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracking<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            self.path.push(Segment::Index(out.len()));
            let next = seq.next_element_seed(Tracking {
                state: &mut *self.state,
                path: &mut *self.path,
            });
            self.path.pop();
            match next? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            self.path.push(Segment::Key(key.clone()));
            let rendered = render_path(self.path);
            let order = self.state.counter;
            self.state.counter += 1;
            if keys.insert(key.clone()) {
                self.state.first_seen.entry(rendered).or_insert(order);
            } else {
                self.state.problems.push(Problem {
                    order,
                    text: format!("duplicate field {rendered:?}"),
                });
            }
            let value = map.next_value_seed(Tracking {
                state: &mut *self.state,
                path: &mut *self.path,
            });
            self.path.pop();
            // The last value of a repeated key wins, as in Go; the duplicate is reported anyway.
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

/// A body parsed into JSON, with the strict-decoding problems found so far.
struct StrictValue {
    value: Value,
    state: ParseState,
}

/// Parse `body` into a JSON value, recording duplicate keys. An empty (or all-whitespace) body
/// gives `None`.
fn parse_tracking(body: &[u8]) -> Result<Option<StrictValue>, ApiError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::RequestEntityTooLarge(format!(
            "Request entity too large: limit is {MAX_BODY_BYTES}"
        )));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut state = ParseState::default();
    let mut path = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Tracking {
        state: &mut state,
        path: &mut path,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v))
    .map_err(|e| {
        ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    Ok(Some(StrictValue { value, state }))
}

/// Turn a serde_ignored path into our segments (options and newtypes add no segment).
fn ignored_segments(path: &serde_ignored::Path<'_>, out: &mut Vec<Segment>) {
    match path {
        serde_ignored::Path::Root => {}
        serde_ignored::Path::Seq { parent, index } => {
            ignored_segments(parent, out);
            out.push(Segment::Index(*index));
        }
        serde_ignored::Path::Map { parent, key } => {
            ignored_segments(parent, out);
            out.push(Segment::Key(key.clone()));
        }
        serde_ignored::Path::Some { parent }
        | serde_ignored::Path::NewtypeStruct { parent }
        | serde_ignored::Path::NewtypeVariant { parent } => ignored_segments(parent, out),
    }
}

/// Decode an already parsed value into `T`, adding unknown fields to the problems, and fail
/// with one BadRequest if there is any problem.
fn finish_strict<T: DeserializeOwned>(strict: StrictValue, what: &str) -> Result<T, ApiError> {
    finish_tolerating(strict, what, |_| false).map(|(typed, _)| typed)
}

/// [`finish_strict`], except that the unknown fields for which `tolerate` answers true are no
/// problem: their paths are returned instead.
fn finish_tolerating<T: DeserializeOwned>(
    strict: StrictValue,
    what: &str,
    tolerate: impl Fn(&[Segment]) -> bool,
) -> Result<(T, Vec<Vec<Segment>>), ApiError> {
    let StrictValue { value, mut state } = strict;
    let mut unknown = Vec::new();
    let mut tolerated = Vec::new();
    let typed: Result<T, _> = serde_ignored::deserialize(value, |path| {
        let mut segs = Vec::new();
        ignored_segments(&path, &mut segs);
        if tolerate(&segs) {
            tolerated.push(segs);
        } else {
            unknown.push(render_path(&segs));
        }
    });
    let typed = typed.map_err(|e| {
        ApiError::BadRequest(format!(
            "{what} in version {VERSION:?} cannot be handled as a {what}: {e}"
        ))
    })?;
    for path in unknown {
        let order = state.first_seen.get(&path).copied().unwrap_or(usize::MAX);
        state.problems.push(Problem {
            order,
            text: format!("unknown field {path:?}"),
        });
    }
    if state.problems.is_empty() {
        return Ok((typed, tolerated));
    }
    state.problems.sort_by_key(|p| p.order);
    let texts: Vec<String> = state.problems.into_iter().map(|p| p.text).collect();
    // kube-apiserver's transformDecodeError puts the kind in front of every decode error.
    Err(ApiError::BadRequest(format!(
        "{what} in version {VERSION:?} cannot be handled as a {what}: strict decoding error: {}",
        texts.join(", ")
    )))
}

/// Strictly decode a JSON body into any type: malformed JSON, a value of the wrong type,
/// unknown fields and duplicate keys are all a 400 BadRequest. `what` names the kind in
/// messages. An empty body decodes to `T::default()`.
pub fn decode_strict<T: DeserializeOwned + Default>(
    body: &[u8],
    what: &str,
) -> Result<T, ApiError> {
    match parse_tracking(body)? {
        None => Ok(T::default()),
        Some(strict) if strict.value.is_null() => Ok(T::default()),
        Some(strict) => finish_strict(strict, what),
    }
}

/// Check an optional `apiVersion` / `kind` member against the value this endpoint serves.
fn check_type_meta(obj: &Map<String, Value>) -> Result<(), ApiError> {
    if let Some(Value::String(v)) = obj.get("apiVersion")
        && !v.is_empty()
        && v != API_VERSION
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({v}) does not match the expected API version ({API_VERSION})"
        )));
    }
    if let Some(Value::String(k)) = obj.get("kind")
        && !k.is_empty()
        && k != KIND_POD_DEBUG_CONTAINER
    {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({k}) does not match the expected kind ({KIND_POD_DEBUG_CONTAINER})"
        )));
    }
    Ok(())
}

/// Strictly decode the body of a create request for a `PodDebugContainer`.
///
/// * an empty body (no bytes, or only whitespace) or `null` is the default object;
/// * malformed JSON, or a value of the wrong type, is a 400;
/// * `apiVersion`, if given, must be `poddebug.dev/v1alpha1` and `kind`, if given,
///   `PodDebugContainer` (400 otherwise);
/// * unknown fields and repeated keys anywhere (inside `container` and `metadata` too) are one
///   400 naming them all, in document order;
/// * `status` is read-only: it is dropped before decoding, whatever it holds;
/// * a member whose value is `null` is treated as absent, as Go's decoder leaves the field
///   at its zero value.
pub fn decode_pod_debug_container(body: &[u8]) -> Result<PodDebugContainer, ApiError> {
    decode_body(body, false).map(|b| b.object)
}

/// A create body: the object, and the container fields that pass through to the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CreateBody {
    /// The decoded object.
    pub object: PodDebugContainer,
    /// Unknown fields of `container`, to be sent to kube-apiserver as they came.
    pub pass_through: PassThroughFields,
}

/// Whether an unknown field at `path` may pass through to the cluster: anywhere inside
/// `container` but in its `securityContext`, which the profile permission checks must
/// understand in full (a privilege they cannot see could not be gated).
fn passes_through(path: &[Segment]) -> bool {
    match path {
        [Segment::Key(c), Segment::Key(sc), ..] if c == "container" && sc == "securityContext" => {
            false
        }
        [Segment::Key(c), _, ..] => c == "container",
        _ => false,
    }
}

/// Decode the body of a create request as [`decode_pod_debug_container`] does, except that
/// unknown fields inside `container` (outside its `securityContext`) are no error: they are
/// returned to be sent on to kube-apiserver. Unknown fields of poddebug's own object, of
/// `metadata` and of `container.securityContext`, and repeated keys anywhere, are still a 400.
pub fn decode_create_body(body: &[u8]) -> Result<CreateBody, ApiError> {
    decode_body(body, true)
}

fn decode_body(body: &[u8], pass_through: bool) -> Result<CreateBody, ApiError> {
    let Some(mut strict) = parse_tracking(body)? else {
        return Ok(CreateBody::default());
    };
    match &mut strict.value {
        Value::Null => return Ok(CreateBody::default()),
        Value::Object(obj) => {
            check_type_meta(obj)?;
            obj.remove("status");
            obj.retain(|_, v| !v.is_null());
        }
        // serde's derived structs would also accept an array (as a tuple); Go does not.
        other => {
            let got = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(ApiError::BadRequest(format!(
                "{KIND_POD_DEBUG_CONTAINER} in version {VERSION:?} cannot be handled as a \
                 {KIND_POD_DEBUG_CONTAINER}: invalid type: {got}, expected a JSON object"
            )));
        }
    }
    let raw = if pass_through {
        strict.value.clone()
    } else {
        Value::Null
    };
    let (mut pdc, tolerated): (PodDebugContainer, _) =
        finish_tolerating(strict, KIND_POD_DEBUG_CONTAINER, |p| {
            pass_through && passes_through(p)
        })?;
    pdc.status = None;
    let fields = tolerated
        .into_iter()
        .filter_map(|path| {
            let value = value_at(&raw, &path)?.clone();
            // Relative to the container.
            Some((path[1..].to_vec(), value))
        })
        .collect();
    Ok(CreateBody {
        object: pdc,
        pass_through: PassThroughFields::new(fields),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad_request(body: &str) -> String {
        match decode_pod_debug_container(body.as_bytes()) {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("expected BadRequest for {body}, got {other:?}"),
        }
    }

    #[test]
    fn empty_bodies_are_the_default_object() {
        for body in ["", "   ", "\n\t\r ", "null", " null "] {
            assert_eq!(
                decode_pod_debug_container(body.as_bytes()).unwrap(),
                PodDebugContainer::default(),
                "{body:?}"
            );
        }
        assert_eq!(
            decode_pod_debug_container(b"{}").unwrap(),
            PodDebugContainer::default()
        );
    }

    #[test]
    fn a_full_object_decodes() {
        let body = r#"{
            "apiVersion": "poddebug.dev/v1alpha1",
            "kind": "PodDebugContainer",
            "metadata": {"name": "dbg", "namespace": "ns", "labels": {"a": "b"}},
            "container": {"image": "busybox", "command": ["sh"], "stdin": true, "tty": true,
                          "env": [{"name": "A", "value": "1"}],
                          "securityContext": {"runAsUser": 0}},
            "targetContainerName": "app",
            "profile": "netadmin"
        }"#;
        let pdc = decode_pod_debug_container(body.as_bytes()).unwrap();
        assert_eq!(pdc.metadata.name.as_deref(), Some("dbg"));
        // k8s-openapi 0.29 makes `name` optional on input: absent means "".
        assert_eq!(pdc.container.name, "");
        assert_eq!(pdc.container.image.as_deref(), Some("busybox"));
        assert_eq!(pdc.container.env.as_ref().map(Vec::len), Some(1));
        assert_eq!(pdc.target_container_name.as_deref(), Some("app"));
        assert_eq!(pdc.profile.as_deref(), Some("netadmin"));
        assert_eq!(pdc.api_version, "poddebug.dev/v1alpha1");
    }

    #[test]
    fn status_is_ignored_and_nulls_are_absent() {
        let body = r#"{"status": {"phase": "Nonsense", "extra": 1}, "container": null, "metadata": null, "profile": null}"#;
        let pdc = decode_pod_debug_container(body.as_bytes()).unwrap();
        assert_eq!(pdc, PodDebugContainer::default());
        let body = r#"{"container": {"name": null, "env": [{"name": null, "value": "x"}]}}"#;
        let pdc = decode_pod_debug_container(body.as_bytes()).unwrap();
        assert_eq!(pdc.container.name, "");
        assert_eq!(pdc.container.env.unwrap()[0].name, "");
    }

    #[test]
    fn strict_errors_table() {
        let cases = [
            (
                r#"{"foo": 1}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: unknown field "foo""#,
            ),
            (
                r#"{"container": {"foo": 1}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: unknown field "container.foo""#,
            ),
            (
                r#"{"metadata": {"name": "a", "name": "b"}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: duplicate field "metadata.name""#,
            ),
            (
                r#"{"container": {"foo": 1}, "metadata": {"name": "a", "name": "b"}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: unknown field "container.foo", duplicate field "metadata.name""#,
            ),
            (
                r#"{"metadata": {"name": "a", "name": "b"}, "container": {"foo": 1}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: duplicate field "metadata.name", unknown field "container.foo""#,
            ),
            (
                r#"{"container": {"env": [{"name": "A"}, {"name": "B", "valeu": "x"}]}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: unknown field "container.env[1].valeu""#,
            ),
            (
                r#"{"container": {"securityContext": {"capabilities": {"add": ["X"], "ad": []}}}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: unknown field "container.securityContext.capabilities.ad""#,
            ),
            (
                r#"{"metadata": {"labels": {"a": "1", "a": "2"}, "nmae": "x"}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: duplicate field "metadata.labels.a", unknown field "metadata.nmae""#,
            ),
            (
                r#"{"profile": "general", "profile": "sysadmin"}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: duplicate field "profile""#,
            ),
            (
                r#"{"targetContainerName": "a", "x": 1, "y": 2, "x": 3}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: unknown field "x", unknown field "y", duplicate field "x""#,
            ),
            (
                r#"{"container": {"imagePulPolicy": "Always", "volumeMounts": [{"name": "d", "mountPath": "/d", "readonly": true}]}}"#,
                r#"PodDebugContainer in version "v1alpha1" cannot be handled as a PodDebugContainer: strict decoding error: unknown field "container.imagePulPolicy", unknown field "container.volumeMounts[0].readonly""#,
            ),
        ];
        for (body, want) in cases {
            assert_eq!(bad_request(body), want, "body {body}");
        }
    }

    #[test]
    fn unknown_container_fields_pass_through_on_create() {
        let body = br#"{"container": {"image": "busybox", "futureField": {"a": 1},
            "env": [{"name": "A", "value": "1", "newEnvThing": true}],
            "lifecycle": {"newHook": {"x": 2}}}, "profile": "general"}"#;
        let b = decode_create_body(body).unwrap();
        assert_eq!(b.object.container.image.as_deref(), Some("busybox"));
        assert_eq!(
            b.pass_through.paths(),
            [
                "container.env[0].newEnvThing",
                "container.futureField",
                "container.lifecycle.newHook"
            ]
        );
        let mut ec = serde_json::json!({"name": "d", "env": [{"name": "A", "value": "1"}]});
        b.pass_through.apply_to(&mut ec);
        assert_eq!(ec["futureField"], serde_json::json!({"a": 1}));
        assert_eq!(ec["env"][0]["newEnvThing"], true);
        assert!(ec.get("lifecycle").is_none(), "no parent, nothing added");
        // The strict decoder still refuses them.
        assert!(decode_pod_debug_container(body).is_err());
    }

    #[test]
    fn poddebugs_own_fields_stay_strict_on_create() {
        let cases = [
            (
                r#"{"foo": 1, "container": {"bar": 2}}"#,
                r#"unknown field "foo""#,
            ),
            (
                r#"{"metadata": {"nmae": "x"}}"#,
                r#"unknown field "metadata.nmae""#,
            ),
            (
                r#"{"container": {"securityContext": {"privilegedish": true}}}"#,
                r#"unknown field "container.securityContext.privilegedish""#,
            ),
            (
                r#"{"container": {"x": 1, "x": 2}}"#,
                r#"duplicate field "container.x""#,
            ),
        ];
        for (body, want) in cases {
            match decode_create_body(body.as_bytes()) {
                Err(ApiError::BadRequest(m)) => {
                    assert!(
                        m.ends_with(&format!("strict decoding error: {want}")),
                        "{body}: {m}"
                    )
                }
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn status_contents_are_not_checked() {
        assert!(decode_pod_debug_container(br#"{"status": {"x": 1, "x": 2}}"#).is_err());
        assert!(decode_pod_debug_container(br#"{"status": {"x": 1}}"#).is_ok());
    }

    #[test]
    fn type_meta_must_match() {
        assert_eq!(
            bad_request(r#"{"apiVersion": "v1"}"#),
            "the API version in the data (v1) does not match the expected API version (poddebug.dev/v1alpha1)"
        );
        assert_eq!(
            bad_request(r#"{"apiVersion": "poddebug.dev/v1", "kind": "PodDebugContainer"}"#),
            "the API version in the data (poddebug.dev/v1) does not match the expected API version (poddebug.dev/v1alpha1)"
        );
        assert_eq!(
            bad_request(r#"{"kind": "Pod"}"#),
            "the kind in the data (Pod) does not match the expected kind (PodDebugContainer)"
        );
        assert!(decode_pod_debug_container(br#"{"apiVersion": "", "kind": ""}"#).is_ok());
        assert!(decode_pod_debug_container(br#"{"kind": "PodDebugContainer"}"#).is_ok());
    }

    #[test]
    fn malformed_json_and_wrong_types() {
        assert!(bad_request("{").starts_with("couldn't get version/kind; json parse error: "));
        assert!(
            bad_request("{} {}")
                .starts_with("couldn't get version/kind; json parse error: trailing characters")
        );
        assert!(
            bad_request("{\"a\":}").starts_with("couldn't get version/kind; json parse error: ")
        );
        let m = bad_request(r#"{"container": {"image": 5}}"#);
        assert!(
            m.starts_with("PodDebugContainer in version \"v1alpha1\" cannot be handled as a PodDebugContainer: invalid type: integer `5`"),
            "{m}"
        );
        assert_eq!(
            bad_request("[]"),
            "PodDebugContainer in version \"v1alpha1\" cannot be handled as a PodDebugContainer: invalid type: array, expected a JSON object"
        );
        assert!(bad_request("\"x\"").ends_with("invalid type: string, expected a JSON object"));
        assert!(bad_request("1").ends_with("invalid type: number, expected a JSON object"));
        assert!(bad_request("true").ends_with("invalid type: bool, expected a JSON object"));
        assert!(
            bad_request(r#"{"apiVersion": 5}"#)
                .contains("cannot be handled as a PodDebugContainer")
        );
    }

    #[test]
    fn too_large_bodies_are_refused() {
        let body = vec![b' '; MAX_BODY_BYTES + 1];
        match decode_pod_debug_container(&body) {
            Err(e @ ApiError::RequestEntityTooLarge(_)) => {
                assert_eq!(e.code(), 413);
                assert_eq!(e.message(), "Request entity too large: limit is 3145728");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn generic_strict_decoding() {
        #[derive(serde::Deserialize, Default, Debug, PartialEq)]
        struct Small {
            #[serde(default)]
            a: u32,
        }
        assert_eq!(
            decode_strict::<Small>(b"", "Small").unwrap(),
            Small::default()
        );
        assert_eq!(
            decode_strict::<Small>(br#"{"a": 3}"#, "Small").unwrap(),
            Small { a: 3 }
        );
        assert_eq!(
            decode_strict::<Small>(br#"{"a": 3, "b": 1, "a": 4}"#, "Small").unwrap_err(),
            ApiError::BadRequest(
                r#"Small in version "v1alpha1" cannot be handled as a Small: strict decoding error: unknown field "b", duplicate field "a""#.into()
            )
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let body = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(matches!(
            decode_pod_debug_container(body.as_bytes()),
            Err(ApiError::BadRequest(_))
        ));
    }

    /// Stands in for a fuzzer (the workspace layout has no `fuzz/`): random bytes and random
    /// single-byte mutations of a valid body must always decode or give a 400/413, never panic.
    #[test]
    fn random_and_mutated_bodies_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}], "volumes": [{"name": "data", "emptyDir": {}}]}
        }))
        .expect("pod");
        let valid = br#"{"apiVersion":"poddebug.dev/v1alpha1","kind":"PodDebugContainer","metadata":{"name":"dbg","labels":{"a":"b"}},"container":{"image":"busybox","command":["sh"],"env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],"securityContext":{"capabilities":{"add":["SYS_PTRACE"]}}},"targetContainerName":"app","profile":"general"}"#;
        for i in 0..5000 {
            let body: Vec<u8> = if i % 2 == 0 {
                let mut b = valid.to_vec();
                for _ in 0..rng.random_range(1..4) {
                    let at = rng.random_range(0..b.len());
                    b[at] = rng.random();
                }
                b
            } else {
                (0..rng.random_range(0..64)).map(|_| rng.random()).collect()
            };
            match decode_pod_debug_container(&body) {
                // Whatever decodes goes on through conversion and validation, which must not
                // panic either.
                Ok(pdc) => {
                    let ec = crate::convert::to_ephemeral_container(
                        &pdc,
                        "dbg",
                        "dbg",
                        crate::Profile::General,
                        "busybox",
                    );
                    let _ = crate::validation::validate_ephemeral_container_add(&pod, &ec);
                }
                Err(e) => assert!(matches!(e.code(), 400 | 413), "{e:?}"),
            }
        }
    }
}
