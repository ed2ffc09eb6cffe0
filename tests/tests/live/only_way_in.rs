//! poddebug as the only way in, by admission (`manifests/components/only-way-in`), on the real
//! cluster: with the component applied, a user holding `edit` (and even `update` on
//! `pods/ephemeralcontainers`) can neither add an ephemeral container around poddebug nor
//! attach or exec into a container poddebug made, while everything through poddebug still works
//! — with the server's own identity (the in-cluster pass) and as the caller (`--impersonate`).
//!
//! The component's objects are cluster-wide; the test scopes them to its own namespace (the
//! binding's and the webhook's namespace selectors) so the tests running beside it are not
//! judged, takes the webhook's caBundle from the APIService (the same serving CA) and its
//! Service port from the Service, and removes them at the end. `.ci/live` runs it in the passes
//! whose identity modes differ (in the cluster, and with `--impersonate`).

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use crate::sessions::attach;
use crate::support::{
    BUSYBOX, Sandbox, as_user, enabled, impersonating, kubectl, message, ok, ok_json, poll,
    poll_async,
};

/// After a RoleBinding or an admission object, caches may answer from before it for a while.
const SETTLE: Duration = Duration::from_secs(40);
const T: Duration = Duration::from_secs(30);

/// The component's objects, rendered, adapted (module docs) and applied; deleted on drop.
struct Component {
    names: Vec<(String, String)>,
}

impl Drop for Component {
    fn drop(&mut self) {
        for (kind, name) in &self.names {
            let _ = kubectl(
                &["delete", kind, name, "--ignore-not-found", "--wait=false"],
                None,
            );
        }
    }
}

impl Component {
    fn apply(ns: &str) -> Component {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the repository")
            .to_path_buf();
        let component = root.join("manifests/components/only-way-in");
        let dir = std::env::temp_dir().join(format!("pdlive-owi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        // kustomize takes components by a path relative to the kustomization.
        let up = "../".repeat(dir.components().count().saturating_sub(1));
        let rel = format!(
            "{up}{}",
            component.display().to_string().trim_start_matches('/')
        );
        std::fs::write(
            dir.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - {rel}\n"
            ),
        )
        .expect("write the kustomization");
        let rendered = ok(&["kustomize", &dir.display().to_string()], None);
        let _ = std::fs::remove_dir_all(&dir);
        // One JSON document per object.
        let json = ok(
            &["create", "--dry-run=client", "-o", "json", "-f", "-"],
            Some(&rendered),
        );
        let objects: Vec<Value> = serde_json::Deserializer::from_str(&json)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .expect("the rendered objects as JSON");
        let ca = ok(
            &[
                "get",
                "apiservice",
                "v1alpha1.poddebug.dev",
                "-o",
                "jsonpath={.spec.caBundle}",
            ],
            None,
        );
        let port: u16 = ok(
            &[
                "get",
                "service",
                "-n",
                "poddebug-system",
                "poddebug-apiserver",
                "-o",
                "jsonpath={.spec.ports[0].port}",
            ],
            None,
        )
        .trim()
        .parse()
        .expect("the Service's port");
        let only_here = json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
            "operator": "In", "values": [ns]}]});
        let mut names = Vec::new();
        let mut items = Vec::new();
        for mut o in objects {
            let kind = o["kind"].as_str().unwrap_or_default().to_owned();
            match kind.as_str() {
                "ValidatingWebhookConfiguration" => {
                    for w in o["webhooks"].as_array_mut().into_iter().flatten() {
                        w["clientConfig"]["caBundle"] = json!(ca.trim());
                        w["clientConfig"]["service"]["port"] = json!(port);
                        w["namespaceSelector"] = only_here.clone();
                    }
                }
                "ValidatingAdmissionPolicyBinding" => {
                    o["spec"]["matchResources"] = json!({"namespaceSelector": only_here});
                }
                _ => {}
            }
            names.push((
                kind.to_lowercase(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ));
            items.push(o);
        }
        let guard = Component { names };
        ok(
            &["apply", "-f", "-"],
            Some(&json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()),
        );
        guard
    }
}

/// An ephemeral container as `kubectl debug` would add it, for an update of
/// `pods/ephemeralcontainers` with `kubectl replace --raw`.
fn with_ephemeral(pod: &Value, name: &str) -> Value {
    let mut p = pod.clone();
    let ec = json!({"name": name, "image": BUSYBOX, "command": ["sh"], "stdin": true,
        "tty": true, "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"});
    match p["spec"]["ephemeralContainers"].as_array_mut() {
        Some(list) => list.push(ec),
        None => p["spec"]["ephemeralContainers"] = json!([ec]),
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn with_the_component_poddebug_is_the_only_way_in() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("onlywayin");
    let editor = format!("owi-editor-{}", std::process::id());
    sb.bind("edit", &editor);
    sb.bind("poddebug:debugger", &editor);
    if impersonating() {
        // As the caller, the server's pod calls need the caller's own pod rights.
        sb.bind("poddebug:debugger-core", &editor);
    }
    // More than edit: the core update of ephemeral containers, which only admission now stops.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "ephemeral-writer", "namespace": sb.ns},
        "rules": [{"apiGroups": [""], "resources": ["pods/ephemeralcontainers"],
                   "verbs": ["get", "update", "patch"]}]});
    ok(&["apply", "-f", "-"], Some(&role.to_string()));
    ok(
        &[
            "create",
            "rolebinding",
            "ephemeral-writer",
            "-n",
            &sb.ns,
            "--role=ephemeral-writer",
            &format!("--user={editor}"),
        ],
        None,
    );
    let _component = Component::apply(&sb.ns);
    let as_editor = [
        format!("--as={editor}"),
        "--as-group=system:authenticated".to_owned(),
    ];
    let kubectl_as = |args: &[&str], stdin: Option<&str>| {
        let mut all: Vec<&str> = as_editor.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        kubectl(&all, stdin)
    };

    // Around poddebug: the core update of ephemeral containers is refused by the policy. Dry
    // runs (which admission judges too, and which change nothing) until the policy is in force,
    // then the update itself.
    let update = |query: &str| {
        let pod = ok_json(&["get", "pod", "-n", &sb.ns, "web", "-o", "json"]);
        let out = kubectl_as(
            &[
                "replace",
                "--raw",
                &format!(
                    "/api/v1/namespaces/{}/pods/web/ephemeralcontainers{query}",
                    sb.ns
                ),
                "-f",
                "-",
            ],
            Some(&with_ephemeral(&pod, "around").to_string()),
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() && err.contains("ephemeral containers are added through poddebug")
        {
            Ok(err)
        } else {
            Err(format!("{} {err}", String::from_utf8_lossy(&out.stdout)))
        }
    };
    poll(
        "the policy refuses the core update of ephemeral containers",
        SETTLE,
        Duration::from_secs(1),
        || update("?dryRun=All"),
    );
    let refused = update("").unwrap_or_else(|e| panic!("the update was not refused: {e}"));
    assert!(refused.contains(&editor), "{refused}");

    // Through poddebug, as the same user: made, attached to, typed into.
    let editor_api = as_user(&sb.api, &editor);
    let body = json!({"container": {"image": BUSYBOX, "command": ["sh"], "stdin": true,
        "tty": true}, "targetContainerName": "app"});
    let dc = poll_async(
        "made through poddebug",
        SETTLE,
        Duration::from_secs(1),
        || async {
            match sb
                .create_as(&editor_api, "dbg", "?wait=true&timeoutSeconds=30", &body)
                .await
            {
                (StatusCode::CREATED, obj) if obj["status"]["phase"] == "Running" => Ok(obj),
                (code, obj) => Err(format!("{code} {obj}")),
            }
        },
    )
    .await;
    let ec_name = dc["status"]["ephemeralContainerName"]
        .as_str()
        .expect("its container")
        .to_owned();
    let mut session = attach(
        &editor_api,
        &sb.path("attach?container=dbg&stdin=true&stdout=true&tty=true"),
    )
    .await
    .unwrap_or_else(|(code, st)| panic!("attach through poddebug: {code} {st}"));
    session
        .stdin(b"echo through-$((20+22))\r")
        .await
        .expect("type");
    let seen = session
        .read_until(T, |t| t.stdout_text().contains("through-42"))
        .await
        .stdout_text();
    assert!(seen.contains("through-42"), "{seen:?}");

    // Around poddebug: core exec and attach into its container are refused by the webhook.
    let exec = poll(
        "the webhook refuses exec into poddebug's container",
        SETTLE,
        Duration::from_secs(1),
        || {
            let out = kubectl_as(
                &["exec", "-n", &sb.ns, "web", "-c", &ec_name, "--", "id"],
                None,
            );
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            if !out.status.success() && err.contains("around poddebug is refused") {
                Ok(err)
            } else {
                Err(format!("{} {err}", String::from_utf8_lossy(&out.stdout)))
            }
        },
    );
    assert!(exec.contains("debug container made by poddebug"), "{exec}");
    let out = kubectl_as(
        &["attach", "-n", &sb.ns, "web", "-c", &ec_name, "-i=false"],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("around poddebug is refused"),
        "attach: {err}"
    );
    // The pod's own container is none of poddebug's business.
    let out = kubectl_as(
        &[
            "exec", "-n", &sb.ns, "web", "-c", "app", "--", "echo", "app-ok",
        ],
        None,
    );
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("app-ok"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // And poddebug still stops its container (its own exec, or the caller's through it).
    session.close().await.expect("close");
    let (code, st) = editor_api
        .delete(&sb.path("debug/dbg?gracePeriodSeconds=1"))
        .await;
    assert!(
        code == StatusCode::OK || code == StatusCode::ACCEPTED,
        "stop through poddebug: {code} {}",
        message(&st)
    );
    sb.wait_phase("dbg", "Terminated", T).await;
}
