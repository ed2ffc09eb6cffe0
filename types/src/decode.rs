//! Strict decoding of request bodies, the way kube-apiserver decodes with
//! `fieldValidation=Strict`.
//!
//! serde and k8s-openapi accept unknown fields silently and let a repeated key win over the
//! first one. Both hide typos (`"imagePulPolicy"`) and smuggled values, so every problem is
//! collected and answered with one 400 listing them, in the order they occur in the body,
//! worded as kube-apiserver words it: `PodDebugContainer in version "v1alpha1" cannot be handled
//! as a PodDebugContainer: strict decoding error: unknown field "container.foo", duplicate field
//! "metadata.name"`.
//!
//! A body is read twice, and neither pass costs more than a small multiple of what the object
//! itself holds, whatever the body is made of:
//!
//! 1. a first pass ([`scan`]) checks the syntax and nesting of the whole body and reads its
//!    type, keeping nothing: a syntax error, nesting deeper than [`MAX_DEPTH`] or a wrong
//!    `apiVersion`/`kind` is the answer before anything is decoded, as in kube-apiserver;
//! 2. the second ([`tracked`]) decodes the typed object straight from the body through a
//!    wrapper that sees each key first: a repeated key, a field the types do not know (unless
//!    it passes through to the cluster), a dropped `status` are handled there, their values
//!    skipped by serde_json without building anything, and the path of a problem is rendered
//!    only when it is reported.
//!
//! The bounds, and why:
//!
//! * at most [`MAX_STRICT_ERRORS`] (100) problems, each once, in document order: what
//!   kube-apiserver's decoder (sigs.k8s.io/json) keeps. Once that many are found nothing more
//!   is tracked; only the typed decoding goes on, since a type error anywhere is the answer
//!   instead (as in kube-apiserver);
//! * nesting up to [`MAX_DEPTH`] (127) levels, serde_json's recursion limit, where Go's
//!   decoder allows 10000: the deepest real body is about 10 levels (a `managedFields` entry
//!   twice that), and each level costs stack;
//! * at most [`MAX_VALUES`] (10,000) JSON values read into the object, passed through or
//!   checked (the values of skipped fields do not count). kube-apiserver has no such limit
//!   (only the 3 MiB body), but a value costs up to ~40 times more here: a 3-byte `{}` in
//!   `container.env` is a 360-byte `EnvVar` (Go's is 40), so 3 MiB of them would be ~400 MB.
//!   At 10,000 values the object takes a few MiB at most. No real body comes near it: a debug
//!   container with 500 environment variables taken from secrets is 3,000 values. The number
//!   is kube-apiserver's own cap on the operations of one JSON patch;
//! * a problem's path is cut after [`MAX_REPORTED_PATH_BYTES`] bytes, so 100 problems under
//!   a 1 MiB key are not a 100 MiB message.
//!
//! Where kube-apiserver would skip a field it does not know without looking into it, so does
//! this decoder: repeated keys inside an unknown field are not reported (the unknown field
//! is). Repeated unknown keys of poddebug's own objects are reported, and `status`, which is
//! dropped, is still read for repeated keys.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{KIND_POD_DEBUG_CONTAINER, PodDebugContainer};
pub use crate::pass_through::PassThroughFields;
use crate::status::ApiError;
use crate::{API_VERSION, VERSION};

#[cfg(test)]
mod bounds_tests;
mod delete_options;
mod problems;
mod scan;
mod tracked;

pub use delete_options::{DeleteOptionsBody, decode_delete_options};
use problems::Step;
pub use problems::{MAX_REPORTED_PATH_BYTES, MAX_STRICT_ERRORS};
use scan::{Root, Shape};
use tracked::{Ctx, Rules, Tracked, Unknown};

/// Largest body accepted: kube-apiserver's default `--max-request-body-bytes` (3 MiB), so a
/// body we accept is never refused later for its size.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Deepest nesting of arrays and objects in a body: serde_json's recursion limit (a 128th
/// level is refused as `recursion limit exceeded`).
pub const MAX_DEPTH: usize = 127;

/// Most JSON values (objects, arrays, strings, numbers, booleans, nulls) read from one body
/// into the object, passed through or checked; see the module's documentation.
pub const MAX_VALUES: usize = 10_000;

/// Fields passed through to the cluster: each its path and its value.
type Passed = Vec<(Vec<Segment>, Value)>;

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

/// The first pass over a body: its size, syntax, nesting and shape. An empty (or
/// all-whitespace) body gives `None`.
fn first_pass(body: &[u8]) -> Result<Option<Shape<'_>>, ApiError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::RequestEntityTooLarge(format!(
            "Request entity too large: limit is {MAX_BODY_BYTES}"
        )));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    scan::scan(body).map(Some).map_err(|e| {
        ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

/// serde_json's message without the position it appends (kube-apiserver's messages of a value
/// of the wrong type have none).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if e.line() == 0 {
        return text;
    }
    let at = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&at)
        .map_or_else(|| text.clone(), str::to_owned)
}

/// The second pass: decode `body` into `T` under `rules`, and fail with one BadRequest if
/// there is any problem. Returns the fields passed through.
fn second_pass<T: DeserializeOwned>(
    body: &[u8],
    what: &str,
    rules: Rules,
    shape: Shape<'_>,
) -> Result<(T, Passed), ApiError> {
    let mut ctx = Ctx::new(rules, shape);
    let mut de = serde_json::Deserializer::from_slice(body);
    let typed = T::deserialize(Tracked::root(&mut de, &mut ctx));
    if ctx.over_limit {
        return Err(ApiError::BadRequest(format!(
            "{what} in version {VERSION:?} cannot be handled as a {what}: the body holds more \
             than {MAX_VALUES} JSON values, the most this server reads from one request"
        )));
    }
    // A value of the wrong type is the answer even when there are strict problems, as in
    // kube-apiserver.
    let typed = typed.map_err(|e| {
        ApiError::BadRequest(format!(
            "{what} in version {VERSION:?} cannot be handled as a {what}: {}",
            without_position(&e)
        ))
    })?;
    if ctx.problems.is_empty() {
        return Ok((typed, ctx.pass_through));
    }
    // kube-apiserver's transformDecodeError puts the kind in front of every decode error.
    Err(ApiError::BadRequest(format!(
        "{what} in version {VERSION:?} cannot be handled as a {what}: strict decoding error: {}",
        ctx.problems.joined()
    )))
}

/// Every unknown field is a problem.
fn refuse_all(_: &[Step<'_>]) -> Unknown {
    Unknown::Refuse
}

/// Strictly decode a JSON body into any type: malformed JSON, a value of the wrong type,
/// unknown fields and duplicate keys are all a 400 BadRequest. `what` names the kind in
/// messages. An empty body (or `null`) decodes to `T::default()`.
pub fn decode_strict<T: DeserializeOwned + Default>(
    body: &[u8],
    what: &str,
) -> Result<T, ApiError> {
    let Some(shape) = first_pass(body)? else {
        return Ok(T::default());
    };
    if shape.root == Root::Null {
        return Ok(T::default());
    }
    let rules = Rules {
        unknown: refuse_all,
        create_body: false,
    };
    second_pass(body, what, rules, shape).map(|(typed, _)| typed)
}

/// Check an optional `apiVersion` / `kind` against the values this endpoint serves.
fn check_type_meta(shape: &Shape<'_>, kind: &str) -> Result<(), ApiError> {
    if let Some(v) = shape.api_version.as_deref()
        && !v.is_empty()
        && v != API_VERSION
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({v}) does not match the expected API version ({API_VERSION})"
        )));
    }
    if let Some(k) = shape.kind.as_deref()
        && !k.is_empty()
        && k != kind
    {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({k}) does not match the expected kind ({kind})"
        )));
    }
    Ok(())
}

/// Decode the body of a create request for an object of `kind`, with the create-body rules
/// (see [`decode_pod_debug_container`]) and `unknown` deciding about fields the types do not
/// know. Returns the fields passed through.
fn decode_create<T: DeserializeOwned + Default>(
    body: &[u8],
    kind: &str,
    unknown: fn(&[Step<'_>]) -> Unknown,
) -> Result<(T, Passed), ApiError> {
    let Some(shape) = first_pass(body)? else {
        return Ok(Default::default());
    };
    let got = match shape.root {
        Root::Null => return Ok(Default::default()),
        Root::Object => {
            check_type_meta(&shape, kind)?;
            let rules = Rules {
                unknown,
                create_body: true,
            };
            return second_pass(body, kind, rules, shape);
        }
        // serde's derived structs would also accept an array (as a tuple); Go does not.
        Root::Array => "array",
        Root::String => "string",
        Root::Number => "number",
        Root::Bool => "bool",
    };
    Err(ApiError::BadRequest(format!(
        "{kind} in version {VERSION:?} cannot be handled as a {kind}: invalid type: {got}, \
         expected a JSON object"
    )))
}

/// Strictly decode the body of a create request for a `PodDebugContainer`.
///
/// * an empty body (no bytes, or only whitespace) or `null` is the default object;
/// * malformed JSON, or a value of the wrong type, is a 400;
/// * `apiVersion`, if given, must be `poddebug.dev/v1alpha1` and `kind`, if given,
///   `PodDebugContainer` (400 otherwise);
/// * unknown fields and repeated keys anywhere (inside `container` and `metadata` too) are one
///   400 naming them (up to [`MAX_STRICT_ERRORS`]), in document order;
/// * `status` is read-only: it is dropped before decoding, whatever it holds;
/// * a member whose value is `null` is treated as absent, as Go's decoder leaves the field
///   at its zero value (an unknown member is still unknown, as in kube-apiserver);
/// * more than [`MAX_VALUES`] values is a 400.
pub fn decode_pod_debug_container(body: &[u8]) -> Result<PodDebugContainer, ApiError> {
    let (mut pdc, _): (PodDebugContainer, _) =
        decode_create(body, KIND_POD_DEBUG_CONTAINER, refuse_all)?;
    pdc.status = None;
    Ok(pdc)
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
fn passes_through(path: &[Step<'_>]) -> Unknown {
    match path {
        [Step::Key(c), Step::Key(sc), ..] if c == "container" && sc == "securityContext" => {
            Unknown::Refuse
        }
        [Step::Key(c), _, ..] if c == "container" => Unknown::PassThrough,
        _ => Unknown::Refuse,
    }
}

/// Decode the body of a create request as [`decode_pod_debug_container`] does, except that
/// unknown fields inside `container` (outside its `securityContext`) are no error: they are
/// returned to be sent on to kube-apiserver. Unknown fields of poddebug's own object, of
/// `metadata` and of `container.securityContext`, and repeated keys anywhere, are still a 400.
pub fn decode_create_body(body: &[u8]) -> Result<CreateBody, ApiError> {
    let (mut pdc, fields): (PodDebugContainer, _) =
        decode_create(body, KIND_POD_DEBUG_CONTAINER, passes_through)?;
    pdc.status = None;
    let fields = fields
        .into_iter()
        // Relative to the container.
        .map(|(path, value)| (path[1..].to_vec(), value))
        .collect();
    Ok(CreateBody {
        object: pdc,
        pass_through: PassThroughFields::new(fields),
    })
}

/// Fields of `metadata` and `container` that the Kubernetes types do not know are dropped.
fn kubernetes_parts_drop(path: &[Step<'_>]) -> Unknown {
    match path {
        [Step::Key(k), _, ..] if k == "metadata" || k == "container" => Unknown::Drop,
        _ => Unknown::Refuse,
    }
}

/// Decode the body of a create request for one of poddebug's other kinds (`PodDebugCopy`,
/// `NodeDebugContainer`) as [`decode_pod_debug_container`] does, except that fields of
/// `metadata` and `container` that the Kubernetes types do not know are dropped (without
/// being looked into, as kube-apiserver drops them), and `status` is dropped too. Unknown
/// fields of the object itself, and repeated keys anywhere else, are a 400 naming them.
pub fn decode_create_object<T: DeserializeOwned + Default>(
    body: &[u8],
    kind: &str,
) -> Result<T, ApiError> {
    decode_create(body, kind, kubernetes_parts_drop).map(|(typed, _)| typed)
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
