//! Governance by reach, on the real cluster through the aggregator: a debug container's profile
//! is everything its pod lends it (a mounted `hostPath` volume, the privileged container it
//! targets), a node debug pod takes no debug container through `pods/debug`, an isolated
//! profile keeps the Pod Security level its name promises (checked against kube-apiserver's own
//! Pod Security by dry runs), and under a moderated profile nothing the shell could be run from
//! is mounted.
//!
//! The outcomes are poddebug's own reviews and the pod's spec: the same in and out of the
//! cluster and with `--impersonate`, so `.ci/live` runs this module in its first pass only.

use std::time::Duration;

use http::StatusCode;
use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use poddebug_types::Profile;
use poddebug_types::reach::{effective_profiles, reach_pod};
use serde_json::{Value, json};

use crate::nodes::PsaNamespace;
use crate::sessions::{Replica, attach};
use crate::support::{BUSYBOX, GV, Sandbox, as_user, enabled, message, ok, poll_async};

/// After a RoleBinding, the authorization caches may answer from before it for a while.
const RBAC_SETTLE: Duration = Duration::from_secs(40);

/// A pod `lender` in the sandbox: `app` (busybox), `privd` (privileged), the node's `/` as the
/// volume `root`, and an `emptyDir` `scratch`.
fn lender(sb: &Sandbox) -> Value {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "lender", "namespace": sb.ns},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "app", "image": BUSYBOX, "command": ["sleep", "3600"]},
                {"name": "privd", "image": BUSYBOX, "command": ["sleep", "3600"],
                 "securityContext": {"privileged": true}}],
            "volumes": [{"name": "root", "hostPath": {"path": "/"}},
                        {"name": "scratch", "emptyDir": {}}]
        }
    });
    ok(&["apply", "-f", "-"], Some(&pod.to_string()));
    ok(
        &[
            "wait",
            "--for=condition=Ready",
            "pod/lender",
            "-n",
            &sb.ns,
            "--timeout=90s",
        ],
        None,
    );
    pod
}

fn lender_path(sb: &Sandbox, rest: &str) -> String {
    format!("{GV}/namespaces/{}/pods/lender/{rest}", sb.ns)
}

fn shell(extra: Value) -> Value {
    let mut body = json!({"profile": "general", "container": {"image": BUSYBOX,
        "command": ["sh"], "stdin": true, "tty": true}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        if k == "targetContainerName" {
            body[k] = v.clone();
        } else {
            body["container"][k] = v.clone();
        }
    }
    body
}

/// A `general` debug container that mounts the pod's `hostPath: /` volume, or that targets its
/// privileged container, is refused to a user without `use` on `sysadmin` (403 naming what it
/// reaches), and made once they hold it; its streams need `sysadmin` too. A holder of
/// `poddebug:debugger` cluster-wide cannot add a debug container to an admin's node debug pod
/// (whose `host-root` volume is the node) through `pods/debug`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn what_a_pod_lends_its_debug_container_decides_its_profile() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("reach");
    lender(&sb);
    let user = format!("reach-user-{}", std::process::id());
    let watcher = format!("reach-watcher-{}", std::process::id());
    sb.bind("poddebug:debugger", &user);
    sb.bind("poddebug:session-observer", &watcher);
    let api = as_user(&sb.api, &user);
    let cases = [
        (
            "mounts",
            shell(json!({"volumeMounts": [{"name": "root", "mountPath": "/r"}]})),
            "reaches spec.volumes[root].hostPath: /",
        ),
        (
            "targets",
            shell(json!({"targetContainerName": "privd"})),
            "reaches securityContext.privileged: true (container \"privd\")",
        ),
    ];
    for (name, body, reaches) in &cases {
        let st = poll_async(
            &format!("{name}: refused for want of use on sysadmin"),
            RBAC_SETTLE,
            Duration::from_secs(1),
            || async {
                match api
                    .post_json(&lender_path(&sb, &format!("debug/{name}")), body)
                    .await
                {
                    (StatusCode::FORBIDDEN, st)
                        if message(&st).contains("debugprofiles.poddebug.dev \"sysadmin\"") =>
                    {
                        Ok(st)
                    }
                    (code, st) => Err(format!("{code} {st}")),
                }
            },
        )
        .await;
        assert!(message(&st).contains(reaches), "{name}: {st}");
    }
    // With `use` on sysadmin they are made, and show what they amount to.
    sb.bind_cluster("poddebug:privileged-profiles", &user);
    for (name, body, _) in &cases {
        let obj = poll_async(
            &format!("{name}: made with use on sysadmin"),
            RBAC_SETTLE,
            Duration::from_secs(1),
            || async {
                match api
                    .post_json(
                        &lender_path(&sb, &format!("debug/{name}?wait=true&timeoutSeconds=30")),
                        body,
                    )
                    .await
                {
                    (StatusCode::CREATED, obj) => Ok(obj),
                    (code, st) => Err(format!("{code} {st}")),
                }
            },
        )
        .await;
        assert_eq!(obj["profile"], "general", "{obj}");
        assert_eq!(obj["status"]["effectiveProfile"], "sysadmin", "{obj}");
        // Its streams need sysadmin too: an observer without it is refused.
        let observer = as_user(&sb.api, &watcher);
        let refused = poll_async(
            &format!("{name}: the observer is refused for want of sysadmin"),
            RBAC_SETTLE,
            Duration::from_secs(1),
            || async {
                match attach(
                    &observer,
                    &lender_path(
                        &sb,
                        &format!("attach?container={name}&stdout=true&tty=true&mode=observer"),
                    ),
                )
                .await
                {
                    Err((StatusCode::FORBIDDEN, st)) if message(&st).contains("sysadmin") => Ok(st),
                    Err((code, st)) => Err(format!("{code} {st}")),
                    Ok(_) => Err("attached".to_owned()),
                }
            },
        )
        .await;
        assert!(message(&refused).contains("reaches"), "{refused}");
    }

    // An admin's node debug pod (its host-root volume is the node's /): no debug container is
    // added to it through pods/debug, even by a holder of poddebug:debugger cluster-wide.
    let node_name = format!("reach{}", std::process::id());
    let _cleanup = poddebug_tests::kubectl::NodeDebugPodCleanup(node_name.clone());
    let (code, made) = sb
        .api
        .post_json(
            &format!("{GV}/nodes/localhost/debug/{node_name}"),
            &json!({"profile": "general", "container": {"image": BUSYBOX, "command": ["sh"],
                    "stdin": true, "tty": true}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
    sb.bind_cluster("poddebug:debugger", &user);
    let pod = format!("localhost.{node_name}");
    let st = poll_async(
        "pods/debug in the node-debug namespace is refused",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match api
                .post_json(
                    &format!("{GV}/namespaces/poddebug-nodes/pods/{pod}/debug/x"),
                    &shell(json!({"volumeMounts": [{"name": "host-root", "mountPath": "/r"}]})),
                )
                .await
            {
                (StatusCode::FORBIDDEN, st) if message(&st).contains("node debug pods") => Ok(st),
                (code, st) => Err(format!("{code} {st}")),
            }
        },
    )
    .await;
    assert!(message(&st).contains("nodes/NODE/debug"), "{st}");
    // Nothing was added to the node debug pod.
    let node_pod =
        crate::support::ok_json(&["get", "pod", "-n", "poddebug-nodes", &pod, "-o", "json"]);
    assert!(
        node_pod["spec"]["ephemeralContainers"].is_null(),
        "{node_pod}"
    );
}

/// An isolated profile keeps the Pod Security level its name promises, for the debug container
/// and what it reaches: for containers of every kind of reach, poddebug calls a `baseline`
/// (`restricted`) debug container by that name exactly when kube-apiserver's Pod Security of
/// that level admits the pod it amounts to (a server dry run in a namespace enforcing it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn isolated_debug_profiles_keep_their_level_and_poddebug_agrees_with_pod_security() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("reachpsa");
    let pod: Pod = serde_json::from_value(lender(&sb)).expect("a pod");
    let namespaces = [
        (Profile::Baseline, PsaNamespace::new("baseline", "reach")),
        (
            Profile::Restricted,
            PsaNamespace::new("restricted", "reach"),
        ),
    ];
    let variants = [
        json!({}),
        json!({"targetContainerName": "app"}),
        json!({"targetContainerName": "privd"}),
        json!({"volumeMounts": [{"name": "root", "mountPath": "/r"}]}),
        json!({"volumeMounts": [{"name": "scratch", "mountPath": "/s"}]}),
        json!({"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}),
        json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 1000,
               "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
               "seccompProfile": {"type": "RuntimeDefault"}}}),
    ];
    for (level, psa) in &namespaces {
        for (i, extra) in variants.iter().enumerate() {
            let mut ec: EphemeralContainer = serde_json::from_value(json!({
                "name": "dbg", "image": BUSYBOX, "command": ["sh"], "stdin": true, "tty": true
            }))
            .expect("a container");
            let mut v = serde_json::to_value(&ec).expect("JSON");
            for (k, val) in extra.as_object().into_iter().flatten() {
                v[k] = val.clone();
            }
            ec = serde_json::from_value(v).expect("a container");
            if extra.get("securityContext").is_none() {
                level.apply(&mut ec);
            }
            let ours = effective_profiles(&pod, &ec, Some(*level));
            let isolated = ours.len() == 1;
            let mut synthetic = serde_json::to_value(reach_pod(&pod, &ec)).expect("JSON");
            synthetic["apiVersion"] = json!("v1");
            synthetic["kind"] = json!("Pod");
            synthetic["metadata"]["name"] = json!(format!("reach-{i}"));
            let admitted = psa.dry_run(&synthetic);
            assert_eq!(
                isolated,
                admitted.is_ok(),
                "{level} with {extra}: poddebug says {ours:?}, Pod Security {level} says {admitted:?}"
            );
        }
    }
}

/// Under a moderated profile nothing the shell could be run from is mounted: another container
/// may write a script named `sh` into a shared `emptyDir` and the debug container mount it over
/// `/bin` (or its libraries, its loader's preload list, its start files), and it would run with
/// the profile's privileges before anyone types. Each such create is refused (403) by a replica
/// moderating `sysadmin`; so is an image outside `--allowed-images`, and the same shell without
/// the mount is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn a_moderated_shell_mounts_nothing_it_could_be_run_from() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("reachmod");
    lender(&sb);
    let replica = Replica::start(&["--moderated-profiles=sysadmin"]).await;
    // An administrator (system:masters is not reviewed): only the moderation rule decides.
    let admin = replica.admin();
    for (i, (mounts, why)) in [
        (json!([{"name": "scratch", "mountPath": "/bin"}]), "/bin"),
        (json!([{"name": "scratch", "mountPath": "/lib"}]), "/lib"),
        (json!([{"name": "scratch", "mountPath": "/etc"}]), "/etc"),
        (json!([{"name": "scratch", "mountPath": "/root"}]), "/root"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut body = shell(json!({"volumeMounts": mounts, "targetContainerName": "app"}));
        body["profile"] = json!("sysadmin");
        let (code, st) = admin
            .post_json(&lender_path(&sb, &format!("debug/m{i}")), &body)
            .await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{why}: {st}");
        assert!(
            message(&st).contains("volumeMounts must be empty")
                && message(&st).contains(why)
                && message(&st).contains("--moderated-profiles"),
            "{why}: {st}"
        );
    }
    // An image outside the allowlist.
    let mut body = shell(json!({"targetContainerName": "app", "image": "nginx:1.27"}));
    body["profile"] = json!("sysadmin");
    let (code, st) = admin.post_json(&lender_path(&sb, "debug/img"), &body).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    assert!(message(&st).contains("--allowed-images"), "{st}");
    // The same shell, mounting nothing, is made.
    let mut body = shell(json!({"targetContainerName": "app"}));
    body["profile"] = json!("sysadmin");
    let (code, obj) = admin
        .post_json(&lender_path(&sb, "debug/bare"), &body)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{obj}");
    // Nothing refused reached the pod.
    let pod = crate::support::ok_json(&["get", "pod", "-n", &sb.ns, "lender", "-o", "json"]);
    let names: Vec<&str> = pod["spec"]["ephemeralContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["bare"], "{pod}");
}
