//! Whose rights the pod calls use: the server's account by default, the caller's with
//! `--impersonate` (`PODDEBUG_LIVE_IMPERSONATE=1` says which one runs). A user bound to the
//! built-in `edit` role and to poddebug:debugger holds no core right on
//! pods/ephemeralcontainers, so kube-apiserver's answer tells the two modes apart.

use std::time::Duration;

use http::StatusCode;

use crate::support::{
    ALICE, BUSYBOX, Sandbox, as_user, enabled, impersonating, message, poll_async, targeted,
};

const RBAC_SETTLE: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn pod_calls_carry_the_server_identity_or_with_impersonation_the_caller() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("imp");
    let alice = as_user(&sb.api, ALICE);
    let body = targeted(BUSYBOX, &["sleep", "3600"]);
    sb.bind("edit", ALICE);
    sb.bind("poddebug:debugger", ALICE);
    if impersonating() {
        // poddebug allows it; kube-apiserver, asked as alice, does not.
        let status = poll_async(
            "kube-apiserver refuses alice",
            RBAC_SETTLE,
            Duration::from_secs(1),
            || async {
                match sb.create_as(&alice, "dbg", "", &body).await {
                    (StatusCode::FORBIDDEN, s) if message(&s).contains("ephemeralcontainers") => {
                        Ok(s)
                    }
                    (code, s) => Err(format!("{code} {s}")),
                }
            },
        )
        .await;
        assert!(message(&status).contains("User \"alice\""), "{status}");
        let pod = sb.pod().await;
        assert!(pod["spec"]["ephemeralContainers"].is_null(), "{pod}");
        sb.bind("poddebug:debugger-core", ALICE);
    }
    poll_async(
        "alice creates",
        RBAC_SETTLE,
        Duration::from_secs(1),
        || async {
            match sb
                .create_as(&alice, "dbg", "?wait=true&timeoutSeconds=20", &body)
                .await
            {
                (StatusCode::CREATED, _) => Ok(()),
                (code, s) => Err(format!("{code} {s}")),
            }
        },
    )
    .await;
    // Stopping execs in the container: as alice with --impersonate (pods/exec from the core
    // persona), as the server otherwise.
    let (code, stopped) = alice
        .delete(&sb.path("debug/dbg?gracePeriodSeconds=1"))
        .await;
    assert!(code.is_success(), "{code} {stopped}");
    sb.wait_phase("dbg", "Terminated", Duration::from_secs(60))
        .await;
}
