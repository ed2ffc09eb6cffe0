//! `POST /api/v1/namespaces/NS/pods`, in kube-apiserver v1.36's order: `?dryRun=All` (any other
//! value is a 422 on `CreateOptions`), the body's namespace against the URL's (400), the
//! namespace's existence (404), `generateName` (the base cut to 58 characters and five of kube's
//! random characters), the defaults (spec, containers, requests from limits, the two
//! `DefaultTolerationSeconds` tolerations), validation (422), Pod Security (403), AlreadyExists
//! (409), then uid, creationTimestamp, generation 1, resourceVersion and a Pending status with its
//! QoS class. A dry run stores nothing and has no resourceVersion. The fake's scheduler and
//! kubelet then start the pod ([`kubelet::start_pod`]).

use std::hash::{BuildHasher, Hasher};

use http::Request;
use hyper::body::Incoming;
use serde_json::{Map, Value, json};

use super::http::{Resp, json_response};
use super::kubelet;
use super::psa;
use super::router::{Ctx, parse_json, read_body};
use super::state::{Kind, State, new_uid, now_rfc3339};
use super::status::{self, FieldError, KubeStatus};
use super::validation;

/// `utilrand`'s alphabet: no vowels (no words), no `0`, `1`, `3` (no look-alikes).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Random characters `SimpleNameGenerator` appends.
const RANDOM_LENGTH: usize = 5;
/// Longest base it keeps (a name of at most 63 characters).
const MAX_GENERATED_BASE: usize = 63 - RANDOM_LENGTH;
/// Names tried for one `generateName` (kube retries a taken one, `RetryGenerateName`).
const GENERATE_ATTEMPTS: usize = 8;
/// `DefaultTolerationSeconds`' tolerations: taint key, for `NoExecute`, 300 s.
const DEFAULT_TOLERATIONS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// `?dryRun=` of a write: `true` for `All`, 422 (on `options_kind`, e.g. `CreateOptions`) for
/// anything else, as `ValidateDryRun` answers.
pub fn dry_run(values: &[String], options_kind: &str) -> Result<bool, KubeStatus> {
    if values.iter().all(|v| v == "All") {
        return Ok(!values.is_empty());
    }
    let quoted: Vec<String> = values.iter().map(|v| status::go_quote(v)).collect();
    let err = FieldError {
        kind: status::FieldErrorType::NotSupported,
        field: "dryRun".to_owned(),
        value: Some(format!("[{}]", quoted.join(" "))),
        detail: "supported values: \"All\"".to_owned(),
    };
    Err(status::invalid("meta.k8s.io", options_kind, "", &[err]))
}

/// The handler.
pub async fn handle(ctx: &Ctx, ns: &str, req: Request<Incoming>) -> Result<Resp, KubeStatus> {
    let dry_run = dry_run(&ctx.query.all("dryRun"), "CreateOptions")?;
    let body = parse_json(&read_body(req).await?)?;
    let created = ctx.shared.mutate(|s| create(s, ns, body, dry_run))?;
    if !dry_run {
        let meta = &created["metadata"];
        kubelet::start_pod(
            &ctx.shared,
            ns,
            meta["name"].as_str().unwrap_or_default(),
            meta["uid"].as_str().unwrap_or_default(),
        );
    }
    Ok(json_response(201, &created))
}

/// `json: cannot unmarshal ...` for a part of the body of the wrong JSON type.
fn not_an_object(v: &Value, what: &str) -> KubeStatus {
    let t = match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        _ => "null",
    };
    status::bad_request(format!(
        "json: cannot unmarshal {t} into Go value of type {what}"
    ))
}

/// Creates `pod` in `ns` (or, for a dry run, only says what would be stored); the object as
/// kube-apiserver answers it.
pub fn create(
    state: &mut State,
    ns: &str,
    mut pod: Value,
    dry_run: bool,
) -> Result<Value, KubeStatus> {
    if !pod.is_object() {
        return Err(not_an_object(&pod, "v1.Pod"));
    }
    for (field, what) in [("metadata", "v1.ObjectMeta"), ("spec", "v1.PodSpec")] {
        if pod[field].is_null() {
            pod[field] = json!({});
        } else if !pod[field].is_object() {
            return Err(not_an_object(&pod[field], what));
        }
    }
    let body_ns = pod["metadata"]["namespace"].as_str().unwrap_or("");
    if !body_ns.is_empty() && body_ns != ns {
        return Err(status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let Some(namespace) = state.get(Kind::Namespace, "", ns).cloned() else {
        return Err(status::not_found("", "namespaces", ns));
    };
    let mut name = pod["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let base = pod["metadata"]["generateName"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    if name.is_empty() {
        if base.is_empty() {
            return Err(status::invalid(
                "",
                "Pod",
                "",
                &[FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        for _ in 0..GENERATE_ATTEMPTS {
            name = generate_name(&base);
            if state.get(Kind::Pod, ns, &name).is_none() {
                break;
            }
        }
    }
    pod["kind"] = json!("Pod");
    pod["apiVersion"] = json!("v1");
    let meta = &mut pod["metadata"];
    meta["name"] = json!(name);
    meta["namespace"] = json!(ns);
    if let Some(m) = meta.as_object_mut() {
        m.remove("resourceVersion");
    }
    kubelet::apply_spec_defaults(&mut pod);
    default_spec_details(&mut pod["spec"]);
    let errs = validation::validate_new_pod(&pod);
    if !errs.is_empty() {
        return Err(status::invalid("", "Pod", &name, &errs));
    }
    psa::admit(&namespace["metadata"]["labels"], &pod, &name)?;
    if state.get(Kind::Pod, ns, &name).is_some() {
        return Err(status::already_exists("", "pods", &name));
    }
    let meta = &mut pod["metadata"];
    meta["uid"] = json!(new_uid());
    meta["creationTimestamp"] = json!(now_rfc3339());
    meta["generation"] = json!(1);
    let qos = qos_class(&pod["spec"]);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
    if dry_run {
        return Ok(pod);
    }
    Ok(state.put(Kind::Pod, pod))
}

/// `base` (cut to [`MAX_GENERATED_BASE`]) and [`RANDOM_LENGTH`] random characters.
pub fn generate_name(base: &str) -> String {
    let cut = base
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|end| *end <= MAX_GENERATED_BASE)
        .last()
        .unwrap_or(0);
    // A fresh `RandomState` is randomly keyed: random enough for names, without a dependency.
    let mut x = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let mut name = base[..cut].to_owned();
    for _ in 0..RANDOM_LENGTH {
        let n = ALPHANUMS.len() as u64;
        name.push(char::from(ALPHANUMS[(x % n) as usize]));
        x /= n;
    }
    name
}

/// The defaults of a new pod beyond [`kubelet::apply_spec_defaults`]: `serviceAccount`, the
/// requests a limit implies, and the not-ready/unreachable tolerations.
fn default_spec_details(spec: &mut Value) {
    if spec["serviceAccount"].is_null() {
        spec["serviceAccount"] = spec["serviceAccountName"].clone();
    }
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            requests_from_limits(c);
        }
    }
    let tolerations: Vec<Value> = spec["tolerations"].as_array().cloned().unwrap_or_default();
    let mut added = tolerations.clone();
    for key in DEFAULT_TOLERATIONS {
        let tolerated = tolerations.iter().any(|t| {
            let k = t["key"].as_str().unwrap_or("");
            let effect = t["effect"].as_str().unwrap_or("");
            (k.is_empty() || k == key) && (effect.is_empty() || effect == "NoExecute")
        });
        if !tolerated {
            added.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 300}),
            );
        }
    }
    if added.len() != tolerations.len() {
        spec["tolerations"] = Value::Array(added);
    }
}

/// `SetDefaults_ResourceRequirements`: a limit without a request is also the request.
fn requests_from_limits(c: &mut Value) {
    let Some(limits) = c["resources"]["limits"].as_object().cloned() else {
        return;
    };
    let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    let requests = resources
        .entry("requests")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(r) = requests.as_object_mut() {
        for (k, v) in limits {
            r.entry(k).or_insert(v);
        }
    }
}

/// `GetPodQOS`: BestEffort without any cpu or memory request or limit, Guaranteed when every
/// container's cpu and memory limits equal its requests, else Burstable.
fn qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            let r = &c["resources"];
            for res in ["cpu", "memory"] {
                let (request, limit) = (&r["requests"][res], &r["limits"][res]);
                any |= !request.is_null() || !limit.is_null();
                guaranteed &= !limit.is_null() && request == limit;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::authz::allow_all;
    use crate::fake::pods::namespace_object;

    fn state() -> State {
        let mut s = State::new(Default::default(), allow_all());
        s.put(Kind::Namespace, namespace_object("ns", &[]));
        s
    }

    fn pod(meta: Value) -> Value {
        json!({"metadata": meta, "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}})
    }

    #[test]
    fn generated_names_use_kubes_alphabet_and_length() {
        let name = generate_name("web-debug-");
        let suffix = name.strip_prefix("web-debug-").expect("the base first");
        assert_eq!(suffix.len(), RANDOM_LENGTH);
        assert!(suffix.bytes().all(|b| ALPHANUMS.contains(&b)), "{name}");
        assert_eq!(generate_name(&"a".repeat(80)).len(), 63);
        assert_ne!(
            generate_name("x-"),
            generate_name("x-"),
            "random (1 in 27^5 to fail)"
        );
    }

    #[test]
    fn a_created_pod_is_pending_defaulted_and_stored() {
        let mut s = state();
        let created = create(
            &mut s,
            "ns",
            pod(json!({"generateName": "web-debug-"})),
            false,
        )
        .expect("created");
        let name = created["metadata"]["name"].as_str().expect("a name");
        assert!(name.starts_with("web-debug-") && name.len() == 15, "{name}");
        assert_eq!(created["metadata"]["namespace"], "ns");
        assert!(created["metadata"]["uid"].is_string());
        assert!(created["metadata"]["resourceVersion"].is_string());
        assert_eq!(
            created["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"})
        );
        assert_eq!(
            created["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(
            created["spec"]["tolerations"].as_array().map(Vec::len),
            Some(2)
        );
        assert!(created["spec"]["nodeName"].is_null(), "not scheduled yet");
        assert_eq!(s.get(Kind::Pod, "ns", name), Some(&created));

        let again = create(&mut s, "ns", pod(json!({"name": name})), false).expect_err("taken");
        assert_eq!(again.code, 409);
        assert_eq!(again.reason, "AlreadyExists");
        assert_eq!(again.message, format!("pods \"{name}\" already exists"));
    }

    #[test]
    fn a_dry_run_stores_nothing_and_has_no_resource_version() {
        let mut s = state();
        let rv = s.rv;
        let created = create(&mut s, "ns", pod(json!({"name": "p"})), true).expect("created");
        assert_eq!(created["metadata"]["name"], "p");
        assert!(
            created["metadata"].get("resourceVersion").is_none(),
            "{created}"
        );
        assert!(s.get(Kind::Pod, "ns", "p").is_none());
        assert_eq!(s.rv, rv);
        assert_eq!(dry_run(&["All".to_owned()], "CreateOptions"), Ok(true));
        assert_eq!(dry_run(&[], "CreateOptions"), Ok(false));
        let bogus = dry_run(&["Bogus".to_owned()], "CreateOptions").expect_err("422");
        assert_eq!(
            bogus.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Bogus\"]: supported values: \"All\""
        );
    }

    #[test]
    fn refusals_in_kubes_words() {
        let mut s = state();
        let e = create(&mut s, "gone", pod(json!({"name": "p"})), false).expect_err("404");
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "namespaces \"gone\" not found")
        );
        let e = create(
            &mut s,
            "ns",
            pod(json!({"name": "p", "namespace": "other"})),
            false,
        )
        .expect_err("400");
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        );
        let e = create(&mut s, "ns", pod(json!({})), false).expect_err("422");
        assert_eq!(
            e.to_json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Pod \"\" is invalid: metadata.name: Required value: name or generateName is required",
                   "reason": "Invalid",
                   "details": {"kind": "Pod", "causes": [{"reason": "FieldValueRequired",
                       "message": "Required value: name or generateName is required", "field": "metadata.name"}]},
                   "code": 422})
        );
        assert_eq!(
            create(&mut s, "ns", json!([]), false).map_err(|e| e.code),
            Err(400)
        );
    }

    #[test]
    fn limits_become_requests_and_an_exists_toleration_covers_the_defaults() {
        let mut s = state();
        let body = json!({"metadata": {"name": "g"}, "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "a", "image": "b",
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        let created = create(&mut s, "ns", body, true).expect("created");
        // As kube-apiserver 1.36 answered the same dry run.
        assert_eq!(
            created["spec"]["tolerations"],
            json!([{"operator": "Exists"}])
        );
        assert_eq!(
            created["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        assert_eq!(created["status"]["qosClass"], "Guaranteed");
        let burstable = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&burstable), "Burstable");
    }
}
