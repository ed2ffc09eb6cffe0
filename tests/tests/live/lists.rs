//! Lists page with `limit`/`continue` (served from the server's shared pod cache), and kubectl's
//! chunked get walks the pages.

use std::time::Duration;

use http::StatusCode;
use serde_json::Value;

use crate::support::{BUSYBOX, GV, Sandbox, enabled, kubectl, ok, poll, targeted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a live cluster (PODDEBUG_LIVE=1, KUBECONFIG)"]
async fn lists_page_and_kubectl_walks_the_chunks() {
    if !enabled() {
        return;
    }
    let sb = Sandbox::new("paging");
    for name in ["one", "two"] {
        let (code, body) = sb
            .create(name, "", &targeted(BUSYBOX, &["sleep", "3600"]))
            .await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let list_path = format!("{GV}/namespaces/{}/poddebugcontainers", sb.ns);
    let get = |q: &str| -> Value {
        serde_json::from_str(&ok(&["get", "--raw", &format!("{list_path}{q}")], None))
            .expect("JSON")
    };
    // The pod cache follows the creates within moments.
    poll(
        "both debug containers in the list",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || {
            let all = get("");
            if all["items"].as_array().map(Vec::len) == Some(2) {
                Ok(())
            } else {
                Err(all.to_string())
            }
        },
    );
    let first = get("?limit=1");
    assert_eq!(first["items"][0]["metadata"]["name"], "web.one", "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .to_owned();
    let second = get(&format!("?limit=1&continue={token}"));
    assert_eq!(
        second["items"][0]["metadata"]["name"], "web.two",
        "{second}"
    );
    assert!(second["metadata"].get("continue").is_none(), "{second}");
    assert_eq!(
        second["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "every page carries the first page's resourceVersion"
    );
    let names = ok(
        &["get", "pdc", "-n", &sb.ns, "--chunk-size=1", "-o", "name"],
        None,
    );
    assert_eq!(names.lines().count(), 2, "{names}");
    let bad = kubectl(
        &[
            "get",
            "--raw",
            &format!("{list_path}?limit=1&continue=not-a-token"),
        ],
        None,
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("invalid continue token"), "{err}");
}
