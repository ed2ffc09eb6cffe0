use super::support::*;

// docs/troubleshooting.md's refusals, reproduced on the real cluster and printed as they read
// there (the page quotes these lines): a 403 naming the missing verb and resource, and a Pod
// Security refusal naming the level and the rule the debug container breaks. (The entries about
// an unavailable API make the APIService unavailable: faults::troubleshooting_….)

use http::StatusCode;
use serde_json::json;

#[tokio::test]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn refusals_read_as_the_troubleshooting_page_quotes() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("troubleshoot");
    let body = json!({"container": {"image": BUSYBOX, "command": ["sleep", "60"]},
        "targetContainerName": "app", "profile": "general"});

    // 403: a user without poddebug-debugger.
    let alice = as_user(&sb.api, ALICE);
    let (code, status) = sb.create_as(&alice, "dbg", "", &body).await;
    let m = message(&status);
    eprintln!("troubleshooting: 403: {m}");
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert_eq!(
        m,
        format!(
            "pods.poddebug.dev \"web\" is forbidden: User \"{ALICE}\" cannot create resource \"pods/debug\" in API group \"poddebug.dev\" in the namespace \"{}\"",
            sb.ns
        ),
        "{status}"
    );

    // Pod Security: `general` adds SYS_PTRACE, which `baseline` refuses.
    ok(
        &[
            "label",
            "namespace",
            &sb.ns,
            "pod-security.kubernetes.io/enforce=baseline",
        ],
        None,
    );
    let (code, status) = sb.create("dbg", "", &body).await;
    let m = message(&status);
    eprintln!("troubleshooting: Pod Security: {code} {m}");
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(
        m.contains("violates PodSecurity \"baseline:latest\": non-default capabilities")
            && m.contains("\"SYS_PTRACE\""),
        "{status}"
    );
    // The fix the page gives: a profile the level admits.
    let fixed = json!({"container": {"image": BUSYBOX, "command": ["sleep", "60"]},
        "targetContainerName": "app", "profile": "baseline"});
    let (code, status) = sb.create("dbg", "?dryRun=All", &fixed).await;
    assert!(code.is_success(), "{code} {status}");
}
