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

/// Decode `input` both ways; whatever decodes is converted and validated.
///
/// Invariants: a refusal is a 400 or a 413; what the strict decoder accepts the pass-through
/// decoder accepts too, with the same object and nothing passed through; an accepted object
/// serializes to a body that decodes to the same object.
pub fn run(input: &[u8]) {
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
