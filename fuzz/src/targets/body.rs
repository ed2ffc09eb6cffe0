//! Create bodies: strict decoding (of debug containers, copies and node debug containers),
//! pass-through decoding, conversion and validation.

use k8s_openapi::api::core::v1::Pod;
use poddebug_types::api::KIND_POD_DEBUG_CONTAINER;
use poddebug_types::copy::{KIND_POD_DEBUG_COPY, PodDebugCopy};
use poddebug_types::decode::{
    MAX_REPORTED_PATH_BYTES, MAX_STRICT_ERRORS, decode_create_body, decode_create_object,
    decode_pod_debug_container,
};
use poddebug_types::node::{KIND_NODE_DEBUG_CONTAINER, NodeDebugContainer};
use poddebug_types::validation::{validate_ephemeral_container_add, validate_pod_debug_container};
use poddebug_types::{API_VERSION, ApiError, PodDebugContainer, Profile, convert};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "volumes": [{"name": "data", "emptyDir": {}}]
        }
    }))
    .unwrap_or_default()
}

fn convert_and_validate(pdc: &PodDebugContainer) {
    let _ = validate_pod_debug_container(pdc, Some("dbg"));
    let _ = validate_pod_debug_container(pdc, None);
    let profile = pdc
        .profile
        .as_deref()
        .and_then(Profile::parse)
        .unwrap_or(Profile::General);
    let ec = convert::to_ephemeral_container(pdc, "dbg", "dbg", profile, "busybox");
    let _ = validate_ephemeral_container_add(&pod(), &ec);
}

/// Values a structured mutation may put anywhere in a body.
fn palette(n: u8) -> serde_json::Value {
    use serde_json::json;
    match n % 24 {
        0 => json!(null),
        1 => json!(true),
        2 => json!(-1),
        3 => json!(2_147_483_648i64),
        4 => json!(1e308),
        5 => json!(""),
        6 => json!("x".repeat(300)),
        7 => json!([]),
        8 => json!({}),
        9 => json!("busybox"),
        10 => json!("SYS_ADMIN"),
        11 => json!(["sh", "-c", "true"]),
        12 => json!({"add": ["ALL"]}),
        13 => json!("Always"),
        14 => json!({"name": "data", "mountPath": "/data"}),
        15 => json!({"fieldRef": {"fieldPath": "metadata.name"}}),
        16 => json!("a.b/c"),
        17 => json!("\u{0}"),
        18 => json!("PODDEBUG_NAME"),
        19 => json!(0),
        20 => json!({"privileged": true}),
        21 => json!("app"),
        22 => json!("sysadmin"),
        _ => json!({"containerPort": 70000}),
    }
}

/// Keys a structured mutation may add.
const KEYS: [&str; 16] = [
    "name",
    "image",
    "command",
    "args",
    "env",
    "securityContext",
    "capabilities",
    "add",
    "privileged",
    "runAsUser",
    "volumeMounts",
    "ports",
    "targetContainerName",
    "profile",
    "stdin",
    "unknownField",
];

/// A body built from a seed by replacing, adding and removing JSON values as `input` says: the
/// byte-level mutations mostly break the JSON syntax, these keep it and reach validation.
fn structured(input: &[u8]) -> Option<Vec<u8>> {
    let (&first, ops) = input.split_first()?;
    let seeds = seeds();
    let seed = &seeds[usize::from(first) % seeds.len()];
    let mut value: serde_json::Value = serde_json::from_slice(seed).ok()?;
    for op in ops.chunks(3) {
        let [what, at, arg] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0)];
        // Walk to the `at`-th object or array met depth first.
        let mut stack = vec![&mut value];
        let mut seen = 0u8;
        while let Some(v) = stack.pop() {
            let target = seen == at % 16;
            seen = seen.wrapping_add(1);
            match v {
                serde_json::Value::Object(m) if target => {
                    let key = KEYS[usize::from(arg) % KEYS.len()];
                    match what % 3 {
                        0 => {
                            m.insert(key.to_owned(), palette((what / 3).wrapping_add(arg)));
                        }
                        1 => {
                            m.remove(key);
                        }
                        _ => {
                            if let Some(k) =
                                m.keys().nth(usize::from(arg) % m.len().max(1)).cloned()
                            {
                                m.insert(k, palette(what));
                            }
                        }
                    }
                    break;
                }
                serde_json::Value::Array(a) if target => {
                    a.push(palette(what ^ arg));
                    break;
                }
                serde_json::Value::Object(m) => stack.extend(m.values_mut()),
                serde_json::Value::Array(a) => stack.extend(a.iter_mut()),
                _ => {}
            }
        }
    }
    serde_json::to_vec(&value).ok()
}

/// Decode `input` both ways, and a structured variant of a seed built from it; whatever
/// decodes is converted and validated.
pub fn run(input: &[u8]) {
    check(input);
    if let Some(body) = structured(input) {
        check(&body);
    }
}

/// Decode `input` both ways; whatever decodes is converted and validated.
///
/// Invariants: a refusal is a 400 or a 413, and a strict decoding error names at most 100
/// distinct problems, each path cut at 1 KiB; what the strict decoder accepts the pass-through
/// decoder accepts too, with the same object and nothing passed through; an accepted object
/// serializes to a body that decodes to the same object; the decoders agree with plain serde
/// (see [`reference`]); copies and node debug containers likewise.
fn check(input: &[u8]) {
    let strict = decode_pod_debug_container(input);
    let create = decode_create_body(input);
    let copy = decode_create_object::<PodDebugCopy>(input, KIND_POD_DEBUG_COPY);
    let node = decode_create_object::<NodeDebugContainer>(input, KIND_NODE_DEBUG_CONTAINER);
    for e in [
        strict.as_ref().err(),
        create.as_ref().err(),
        copy.as_ref().err(),
        node.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    {
        assert!(matches!(e.code(), 400 | 413), "refused with {e:?}");
        check_causes(e);
    }
    agrees_with_serde(input, &strict, &create);
    if let Ok(c) = &copy {
        let again = serde_json::to_vec(c).expect("serialize");
        let back = decode_create_object::<PodDebugCopy>(&again, KIND_POD_DEBUG_COPY)
            .expect("own copy refused");
        assert_eq!(&back, c, "round trip changed the copy");
    }
    if let Ok(n) = &node {
        let again = serde_json::to_vec(n).expect("serialize");
        let back = decode_create_object::<NodeDebugContainer>(&again, KIND_NODE_DEBUG_CONTAINER)
            .expect("own node debug container refused");
        assert_eq!(&back, n, "round trip changed the node debug container");
    }
    if let Ok(pdc) = &strict {
        let body = create
            .as_ref()
            .expect("strict accepted, pass-through refused");
        assert_eq!(&body.object, pdc, "the two decoders disagree");
        assert!(
            body.pass_through.is_empty(),
            "strict accepted pass-through fields"
        );
        let again = serde_json::to_vec(pdc).expect("serialize");
        let back = decode_pod_debug_container(&again).expect("own output refused");
        assert_eq!(&back, pdc, "round trip changed the object");
    }
    if let Ok(body) = &create {
        convert_and_validate(&body.object);
    }
}

/// Bodies that reach the decoder's checks: type meta, metadata, container fields, unknown
/// and repeated keys, nesting, numbers, escapes.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        &br#"{"apiVersion":"poddebug.dev/v1alpha1","kind":"PodDebugContainer","metadata":{"name":"dbg","labels":{"a":"b"}},"container":{"image":"busybox","command":["sh"],"env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],"securityContext":{"capabilities":{"add":["SYS_PTRACE"]}}},"targetContainerName":"app","profile":"general"}"#[..],
        br#"{"container":{"image":"busybox","stdin":true,"tty":true,"unknownUpstreamField":{"x":1}}}"#,
        br#"{"metadata":{"name":"dbg","generateName":"d-","annotations":{"k":"v"}},"profile":"sysadmin"}"#,
        br#"{"container":{"securityContext":{"privileged":true,"runAsUser":0}},"profile":"netadmin"}"#,
        br#"{"container":{"ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}}"#,
        br#"{"container":{"volumeMounts":[{"name":"data","mountPath":"/data"}],"workingDir":"/"}}"#,
        br#"{"a":1,"a":2}"#,
        br#"{"kind":"Pod","apiVersion":"v1"}"#,
        br#"{"metadata":{"name":"\u00e9\ud83d\ude00"}}"#,
        br#"[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]"#,
        br#"{"container":{"command":["a","b"],"args":[]}}"#,
        br#"null"#,
        b"",
        br#"{"container":{"env":[{"name":"PODDEBUG_NAME","value":"x"}]}}"#,
        br#"{"status":{"phase":"Running"}}"#,
        br#"{"status":{"a":1,"a":{"b":1,"b":2},"c":[{"d":1,"d":1}]}}"#,
        br#"{"metadata":{"labels":{"a":"1","a":"2","a":"3"},"nmae":"x"},"metadata":{"zz":1}}"#,
        br#"{"container":{"x":{"a":1,"a":2,"b":{"a":1,"a":1}},"env":[{"name":"A","y":1,"y":2}]}}"#,
        br#"{"foo":{"a":1,"a":2},"foo":null,"profile":null,"profile":"general"}"#,
        br#"{"u0":0,"u1":0,"u2":0,"u3":0,"u4":0,"u5":0,"u6":0,"u7":0,"u8":0,"u9":0,"u0":1}"#,
        br#"{"\u0061":1,"a":2,"metadata":{"name":"\u00e9","na\u006de":"b"}}"#,
        br#"{"setImage":{"*":"busybox","*":"x"},"replace":{"app":{"command":["sh"],"comand":[]}},"keepLabels":true}"#,
        br#"{"container":{"image":"busybox","command":["chroot","/host"]},"profile":"sysadmin","ttlSeconds":60}"#,
        br#"{"container":{"image":5},"metadata":{"name":"a","name":"b"}}"#,
        br#"{"kind":"PodDebugCopy","apiVersion":"poddebug.dev/v1alpha1","replace":{"a":["x"]}}"#,
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

/// A strict decoding error names at most [`MAX_STRICT_ERRORS`] problems, each once, and cuts
/// each path after [`MAX_REPORTED_PATH_BYTES`] bytes (escapes may double a byte).
fn check_causes(e: &ApiError) {
    let message = e.message();
    let Some((_, causes)) = message.split_once(": strict decoding error: ") else {
        return;
    };
    // Keys may hold ", ": count the causes by their beginnings.
    let n =
        causes.matches("unknown field \"").count() + causes.matches("duplicate field \"").count();
    assert!(n <= MAX_STRICT_ERRORS, "{n} causes: {message}");
    assert!(
        causes.len() <= MAX_STRICT_ERRORS * (2 * MAX_REPORTED_PATH_BYTES + 32),
        "{} bytes of causes",
        causes.len()
    );
}

/// The fields of `PodDebugContainer`.
const FIELDS: [&str; 7] = [
    "apiVersion",
    "kind",
    "metadata",
    "container",
    "targetContainerName",
    "profile",
    "ttlSeconds",
];

/// What plain serde makes of a body, with the rules of a create body applied to the parsed
/// value (the type checked, `status` and known `null` members of the top level removed): the
/// object, and the paths of the fields the types ignore. `None` when it is refused.
fn reference(input: &[u8]) -> Option<(PodDebugContainer, Vec<String>)> {
    if input.iter().all(u8::is_ascii_whitespace) {
        return Some(Default::default());
    }
    let mut value: serde_json::Value = serde_json::from_slice(input).ok()?;
    match &mut value {
        serde_json::Value::Null => return Some(Default::default()),
        serde_json::Value::Object(m) => {
            for (key, want) in [
                ("apiVersion", API_VERSION),
                ("kind", KIND_POD_DEBUG_CONTAINER),
            ] {
                if let Some(serde_json::Value::String(v)) = m.get(key)
                    && !v.is_empty()
                    && v != want
                {
                    return None;
                }
            }
            m.remove("status");
            // A known member that is `null` is absent; an unknown one is still unknown (as
            // kube-apiserver: `{"foo": null}` is `unknown field "foo"`).
            m.retain(|k, v| !(v.is_null() && FIELDS.contains(&k.as_str())));
        }
        _ => return None,
    }
    let mut ignored = Vec::new();
    let pdc = serde_ignored::deserialize(value, |p| ignored.push(render(&p))).ok()?;
    ignored.sort();
    Some((pdc, ignored))
}

/// A serde_ignored path rendered as the decoder renders paths: `container.env[0].x`.
fn render(p: &serde_ignored::Path<'_>) -> String {
    match p {
        serde_ignored::Path::Root => String::new(),
        serde_ignored::Path::Seq { parent, index } => format!("{}[{index}]", render(parent)),
        serde_ignored::Path::Map { parent, key } => {
            let parent = render(parent);
            if parent.is_empty() {
                key.clone()
            } else {
                format!("{parent}.{key}")
            }
        }
        serde_ignored::Path::Some { parent }
        | serde_ignored::Path::NewtypeStruct { parent }
        | serde_ignored::Path::NewtypeVariant { parent } => render(parent),
    }
}

/// The decoders agree with [`reference`]: what they accept, plain serde decodes to the same
/// object, ignoring exactly the fields passed through (none for the strict decoder); and a
/// body plain serde decodes ignoring nothing, without a repeated key, they accept.
fn agrees_with_serde(
    input: &[u8],
    strict: &Result<PodDebugContainer, ApiError>,
    create: &Result<poddebug_types::decode::CreateBody, ApiError>,
) {
    let reference = reference(input);
    if let Ok(pdc) = strict {
        let (want, ignored) = reference.as_ref().expect("strict accepted, serde refused");
        assert_eq!(pdc, want, "strict decoder and serde disagree");
        assert!(
            ignored.is_empty(),
            "strict accepted ignored fields {ignored:?}"
        );
    }
    if let Ok(body) = create {
        let (want, ignored) = reference.as_ref().expect("create accepted, serde refused");
        assert_eq!(
            &body.object, want,
            "pass-through decoder and serde disagree"
        );
        assert_eq!(&body.pass_through.paths(), ignored, "passed through");
    }
    if let Some((_, ignored)) = &reference
        && ignored.is_empty()
        && !has_repeated_key(input)
    {
        assert!(strict.is_ok(), "serde accepted, strict refused: {strict:?}");
    }
}

/// Whether the JSON in `input` has a repeated key in any object.
fn has_repeated_key(input: &[u8]) -> bool {
    struct Repeats;
    impl<'de> DeserializeSeed<'de> for Repeats {
        type Value = bool;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
            d.deserialize_any(Repeats)
        }
    }
    impl<'de> Visitor<'de> for Repeats {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
            let mut any = false;
            while let Some(r) = seq.next_element_seed(Repeats)? {
                any |= r;
            }
            Ok(any)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut keys = std::collections::HashSet::new();
            let mut any = false;
            while let Some(k) = map.next_key::<String>()? {
                any |= !keys.insert(k);
                any |= map.next_value_seed(Repeats)?;
            }
            Ok(any)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(input);
    Repeats.deserialize(&mut de).unwrap_or(false)
}
