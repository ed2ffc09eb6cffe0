//! Create bodies: strict decoding, pass-through decoding, conversion and validation.

use k8s_openapi::api::core::v1::Pod;
use poddebug_types::decode::{decode_create_body, decode_pod_debug_container};
use poddebug_types::validation::{validate_ephemeral_container_add, validate_pod_debug_container};
use poddebug_types::{PodDebugContainer, Profile, convert};

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
/// Invariants: a refusal is a 400 or a 413; what the strict decoder accepts the pass-through
/// decoder accepts too, with the same object and nothing passed through; an accepted object
/// serializes to a body that decodes to the same object.
fn check(input: &[u8]) {
    let strict = decode_pod_debug_container(input);
    let create = decode_create_body(input);
    for e in [strict.as_ref().err(), create.as_ref().err()]
        .into_iter()
        .flatten()
    {
        assert!(matches!(e.code(), 400 | 413), "refused with {e:?}");
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
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}
