//! [`KubeBackend`] end to end against the in-memory kube-apiserver of [`crate::testkube`]: real
//! kube-rs requests, real (fake) answers.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use poddebug_types::{DebugPhase, PodDebugContainer, Profile};

use crate::state::testutil::{pod, state};
use crate::testkube::FakeKube;
use crate::{
    BackendConfig, Caller, CreateRequest, DebugBackend, DebugWatchEvent, KubeBackend, ListOptions,
    Policy, StopOutcome, StopRequest, StreamUse, WatchOptions,
};

fn config() -> BackendConfig {
    BackendConfig::new(Policy {
        allowed_images: vec![],
        default_image: "busybox:1.36".into(),
        default_profile: Profile::General,
        max_debug_containers_per_pod: 0,
        default_target: crate::DefaultTarget::None,
    })
}

fn alice() -> Caller {
    Caller {
        user: "alice".into(),
        groups: vec!["devs".into()],
        ..Default::default()
    }
}

fn setup(pods: &[Pod], config: BackendConfig) -> (FakeKube, KubeBackend) {
    let fake = FakeKube::default();
    for p in pods {
        fake.add_pod(p.clone());
    }
    let backend = KubeBackend::new(fake.client(), config);
    (fake, backend)
}

fn create_req(name: Option<&str>, wait: Option<Duration>) -> CreateRequest {
    CreateRequest {
        namespace: "ns".into(),
        pod: "web".into(),
        name: name.map(str::to_owned),
        body: PodDebugContainer::default(),
        profile: Profile::General,
        caller: alice(),
        wait,
        options: Default::default(),
    }
}

/// The next watch event, waiting at most 3 seconds.
async fn next(s: &mut crate::DebugWatchStream) -> Option<DebugWatchEvent> {
    tokio::time::timeout(Duration::from_secs(3), s.next())
        .await
        .ok()
        .flatten()
}

fn api_err<T: std::fmt::Debug>(r: Result<T, crate::StorageError>) -> poddebug_types::ApiError {
    r.expect_err("an error").to_api_error()
}

#[tokio::test]
async fn a_create_answers_before_its_event_is_written_and_flush_waits_for_it() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    fake.set_events_delay(Duration::from_secs(2));
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("created");
    assert!(
        fake.events().is_empty(),
        "the answer did not wait for the slow events API"
    );
    assert!(b.flush(Duration::from_secs(10)).await);
    let events = fake.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "DebugContainerCreated");
}

#[tokio::test]
async fn create_then_get_and_list() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    let created = b
        .create(create_req(Some("dbg"), None))
        .await
        .expect("created");
    assert_eq!(created.metadata.name.as_deref(), Some("dbg"));
    let stored = fake.pod("ns", "web").expect("pod");
    assert_eq!(
        created.metadata.resource_version,
        stored.metadata.resource_version
    );
    let ecs = crate::state::ephemeral_containers(&stored);
    assert_eq!(ecs.len(), 1);
    assert_eq!(ecs[0].image.as_deref(), Some("busybox:1.36"));

    // GET pod, PUT ephemeralcontainers (conditional on the resourceVersion read), then the
    // Event, written after the answer: flushing waits for it.
    assert!(b.flush(Duration::from_secs(5)).await);
    let reqs = fake.requests();
    let seq: Vec<String> = reqs
        .iter()
        .map(|r| format!("{} {}", r.method, r.uri.split('?').next().unwrap_or("")))
        .collect();
    assert_eq!(
        seq,
        vec![
            "GET /api/v1/namespaces/ns/pods/web",
            "PUT /api/v1/namespaces/ns/pods/web/ephemeralcontainers",
            "POST /api/v1/namespaces/ns/events",
        ]
    );
    let events = fake.events();
    assert_eq!(events[0]["reason"], "DebugContainerCreated");
    assert_eq!(
        events[0]["involvedObject"]["fieldPath"],
        "spec.ephemeralContainers{dbg}"
    );
    assert_eq!(
        events[0]["message"],
        "User \"alice\" created debug container \"dbg\" with image \"busybox:1.36\" and profile \"general\""
    );

    let got = b.get("ns", "web", "dbg", &alice()).await.expect("get");
    assert_eq!(
        got.status
            .as_ref()
            .map(|s| s.ephemeral_container_name.as_str()),
        Some("dbg")
    );
    let list = b
        .list(
            &ListOptions {
                namespace: Some("ns".into()),
                ..Default::default()
            },
            &alice(),
        )
        .await
        .expect("list");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.kind, "PodDebugContainerList");
    assert!(list.metadata.resource_version.is_some());
    let all = b
        .list(&ListOptions::default(), &alice())
        .await
        .expect("list all");
    assert_eq!(all.items.len(), 1);
}

#[tokio::test]
async fn missing_pod_and_name_are_404s() {
    let (_fake, b) = setup(&[pod("web", &[])], config());
    let err = api_err(b.get("ns", "nope", "dbg", &alice()).await);
    assert_eq!(
        (err.code(), err.message()),
        (404, "pods \"nope\" not found".to_owned())
    );
    let err = api_err(b.get("ns", "web", "dbg", &alice()).await);
    assert_eq!(
        (err.code(), err.message()),
        (404, "pods/debug.poddebug.dev \"dbg\" not found".to_owned())
    );
    let mut req = create_req(Some("dbg"), None);
    req.pod = "nope".into();
    let err = api_err(b.create(req).await);
    assert_eq!(
        (err.code(), err.message()),
        (404, "pods \"nope\" not found".to_owned())
    );
    // The list of one pod: 404 only when asked for (`pods/POD/debug`).
    let mut opts = ListOptions {
        namespace: Some("ns".into()),
        pod: Some("nope".into()),
        ..Default::default()
    };
    let list = b.list(&opts, &alice()).await.expect("empty list");
    assert!(list.items.is_empty());
    opts.pod_must_exist = true;
    let err = api_err(b.list(&opts, &alice()).await);
    assert_eq!(
        (err.code(), err.message()),
        (404, "pods \"nope\" not found".to_owned())
    );
    opts.pod = Some("web".into());
    assert!(
        b.list(&opts, &alice())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn concurrent_creates_of_one_name_have_one_winner() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    fake.set_get_delay(Duration::from_millis(30));
    let results =
        futures::future::join_all((0..5).map(|_| b.create(create_req(Some("dbg"), None)))).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1, "{results:?}");
    for r in results.into_iter().filter_map(Result::err) {
        let e = r.to_api_error();
        assert_eq!(
            (e.code(), e.reason()),
            (409, "AlreadyExists"),
            "{}",
            e.message()
        );
    }
    let stored = fake.pod("ns", "web").expect("pod");
    assert_eq!(crate::state::ephemeral_containers(&stored).len(), 1);
}

/// The first read comes from kube-apiserver's watch cache (`resourceVersion=0`); whatever it
/// decides from a pod that is behind is confirmed by a quorum read.
#[tokio::test]
async fn a_stale_cached_read_is_confirmed_by_a_quorum_read() {
    // A pod created after the cache stopped following: the cached read says 404.
    let (fake, b) = setup(&[], config());
    fake.freeze_watch_cache();
    fake.add_pod(pod("web", &[]));
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("created although the cached read did not have the pod");

    // A name taken since: the cached read sees it free, the update conflicts, the quorum read
    // sees it taken: 409 AlreadyExists, nothing added.
    let (fake, b) = setup(&[pod("web", &[])], config());
    fake.freeze_watch_cache();
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("the first create");
    let err = api_err(b.create(create_req(Some("dbg"), None)).await);
    assert_eq!(
        (err.code(), err.reason()),
        (409, "AlreadyExists"),
        "{}",
        err.message()
    );
    let stored = fake.pod("ns", "web").expect("pod");
    assert_eq!(crate::state::ephemeral_containers(&stored).len(), 1);

    // A name freed since (its container terminated): the cached read says taken, the quorum
    // read says free, and the name is reused.
    let (fake, b) = setup(&[pod("web", &[("dbg", Some("dbg"), "running")])], config());
    fake.freeze_watch_cache();
    fake.set_ec_state("ns", "web", "dbg", state("terminated"));
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("reused once the quorum read shows it terminated");
    let reads: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.uri.clone())
        .collect();
    assert!(reads[0].contains("resourceVersion=0"), "{reads:?}");
    assert!(!reads[1].contains("resourceVersion"), "{reads:?}");
}

/// The names of `pod`'s ephemeral containers, in order.
fn ec_names(pod: &Pod) -> Vec<String> {
    crate::state::ephemeral_containers(pod)
        .iter()
        .map(|e| e.name.clone())
        .collect()
}

/// The update does not carry the resourceVersion: a write since the read that changed only
/// the pod's status (the kubelet's) does not turn the create back, and is kept.
#[tokio::test]
async fn a_status_write_since_the_read_does_not_turn_the_create_back() {
    let (fake, b) = setup(&[pod("web", &[("old", None, "running")])], config());
    fake.freeze_watch_cache();
    fake.set_ec_state("ns", "web", "old", state("terminated"));
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("created");
    let reqs = fake.requests();
    let count = |m: http::Method| reqs.iter().filter(|r| r.method == m).count();
    assert_eq!(
        (count(http::Method::GET), count(http::Method::PUT)),
        (1, 1),
        "one read, one update: {reqs:?}"
    );
    let stored = fake.pod("ns", "web").expect("pod");
    let names = ec_names(&stored);
    assert_eq!(names, ["old", "dbg"]);
    let old_state = stored
        .status
        .and_then(|s| s.ephemeral_container_statuses)
        .and_then(|s| s.into_iter().find(|s| s.name == "old"))
        .and_then(|s| s.state);
    assert!(
        old_state.is_some_and(|s| s.terminated.is_some()),
        "the status write is kept"
    );
}

/// A list read before another container was added: kube-apiserver refuses the update (existing
/// ephemeral containers may not be removed), the pod is read again and both are kept.
#[tokio::test]
async fn a_container_added_since_the_read_is_kept() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    fake.freeze_watch_cache();
    b.create(create_req(Some("first"), None))
        .await
        .expect("first");
    // The cached read still shows no container.
    b.create(create_req(Some("second"), None))
        .await
        .expect("second");
    let stored = fake.pod("ns", "web").expect("pod");
    let names = ec_names(&stored);
    assert_eq!(names, ["first", "second"]);
    let puts = fake
        .requests()
        .iter()
        .filter(|r| r.method == http::Method::PUT)
        .count();
    assert_eq!(puts, 3, "the second create's first update was refused");
}

/// A pod deleted and made again under its name since the read: the update carries the uid read,
/// a precondition, so the new pod gets the new container and none of the old pod's.
#[tokio::test]
async fn a_pod_made_again_under_its_name_gets_only_the_new_container() {
    let (fake, b) = setup(&[pod("web", &[("old", None, "running")])], config());
    fake.freeze_watch_cache();
    fake.delete_pod("ns", "web");
    let mut again = pod("web", &[]);
    again.metadata.uid = Some("uid-2".to_owned());
    fake.add_pod(again);
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("created in the pod made again");
    let stored = fake.pod("ns", "web").expect("pod");
    assert_eq!(stored.metadata.uid.as_deref(), Some("uid-2"));
    let names = ec_names(&stored);
    assert_eq!(names, ["dbg"]);
}

#[tokio::test]
async fn name_reuse_after_termination() {
    let (fake, b) = setup(&[pod("web", &[("dbg", None, "terminated")])], config());
    let created = b
        .create(create_req(Some("dbg"), None))
        .await
        .expect("reused");
    assert_eq!(created.metadata.name.as_deref(), Some("dbg"));
    let ec_name = created
        .status
        .map(|s| s.ephemeral_container_name)
        .unwrap_or_default();
    assert!(
        ec_name.starts_with("dbg-") && ec_name.len() == 9,
        "{ec_name}"
    );
    // GET now shows the new one.
    fake.set_ec_state("ns", "web", &ec_name, state("running"));
    let got = b.get("ns", "web", "dbg", &alice()).await.expect("get");
    let status = got.status.expect("status");
    assert_eq!(
        (status.ephemeral_container_name, status.phase),
        (ec_name, DebugPhase::Running)
    );
    // And while it runs, the name is taken.
    let err = api_err(b.create(create_req(Some("dbg"), None)).await);
    assert_eq!(err.reason(), "AlreadyExists");
}

#[tokio::test]
async fn impersonation_reaches_the_wire_for_pod_calls_only() {
    let mut cfg = config();
    cfg.impersonate = true;
    let (fake, b) = setup(&[pod("web", &[])], cfg);
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("created");
    for r in fake.requests() {
        let users: Vec<_> = r.headers.get_all("impersonate-user").iter().collect();
        let groups: Vec<_> = r.headers.get_all("impersonate-group").iter().collect();
        if r.uri.contains("/events") {
            assert!(users.is_empty(), "events are recorded as the server");
        } else {
            assert_eq!(users, vec!["alice"], "{}", r.uri);
            assert_eq!(groups, vec!["devs"], "{}", r.uri);
        }
    }

    let (fake, b) = setup(&[pod("web", &[])], config());
    b.create(create_req(Some("dbg"), None))
        .await
        .expect("created");
    assert!(fake.requests().iter().all(|r| {
        r.headers
            .keys()
            .all(|k| !k.as_str().starts_with("impersonate-"))
    }));
}

#[tokio::test]
async fn create_with_wait() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    let f = fake.clone();
    let flip = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        f.set_ec_state("ns", "web", "dbg", state("running"));
    });
    let created = b
        .create(create_req(Some("dbg"), Some(Duration::from_secs(5))))
        .await
        .expect("running");
    assert_eq!(created.status.map(|s| s.phase), Some(DebugPhase::Running));
    flip.await.expect("flip");

    let f = fake.clone();
    let fail = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        f.set_ec_state("ns", "web", "dbg2", state("waiting:ErrImagePull"));
    });
    let err = api_err(
        b.create(create_req(Some("dbg2"), Some(Duration::from_millis(1500))))
            .await,
    );
    fail.await.expect("fail");
    assert_eq!(err.code(), 504);
    assert_eq!(
        err.message(),
        "Timeout: debug container \"dbg2\" in pod \"web\" was not running after 1s (ErrImagePull: ErrImagePull happened)"
    );
}

#[tokio::test]
async fn stop_of_terminated_or_unstarted_containers() {
    let p = pod(
        "web",
        &[
            ("done", None, "terminated"),
            ("new", None, "waiting:ContainerCreating"),
        ],
    );
    let (fake, b) = setup(&[p], config());
    let stop = |name: &str| StopRequest {
        namespace: "ns".into(),
        pod: "web".into(),
        name: name.into(),
        grace_period: Duration::from_secs(1),
        caller: alice(),
        timeout: Duration::from_secs(50),
    };
    match b.stop(stop("done")).await.expect("idempotent") {
        StopOutcome::Terminated(obj) => assert_eq!(obj.metadata.name.as_deref(), Some("done")),
        other => panic!("unexpected {other:?}"),
    }
    let err = api_err(b.stop(stop("new")).await);
    assert_eq!(err.code(), 409);
    assert_eq!(
        err.message(),
        "Operation cannot be fulfilled on pods/debug.poddebug.dev \"new\": the debug container has not \
         started (ContainerCreating: ContainerCreating happened), so it has no process to stop"
    );
    let err = api_err(b.stop(stop("nope")).await);
    assert_eq!(err.code(), 404);
    // Neither touched the pod.
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.method == http::Method::GET)
    );
}

#[tokio::test]
async fn stop_refused_by_the_image_records_nothing() {
    // A debug container sharing the target's PID namespace (stoppable from inside).
    let mut p = pod("web", &[("dbg", None, "running")]);
    if let Some(ec) = p
        .spec
        .as_mut()
        .and_then(|s| s.ephemeral_containers.as_mut())
        .and_then(|ecs| ecs.first_mut())
    {
        ec.target_container_name = Some("app".into());
    }
    let (fake, b) = setup(&[p], config());
    fake.set_exec_error(
        500,
        "error executing command in container: failed to exec in container: OCI runtime exec failed: exec \
         failed: unable to start container process: exec: \"sh\": executable file not found in $PATH: unknown",
    );
    let req = StopRequest {
        namespace: "ns".into(),
        pod: "web".into(),
        name: "dbg".into(),
        grace_period: Duration::from_secs(3),
        caller: alice(),
        timeout: Duration::from_secs(50),
    };
    let err = api_err(b.stop(req).await);
    assert_eq!(err.code(), 409);
    assert!(err.message().contains("has no `sh`"), "{}", err.message());
    let reqs = fake.requests();
    let exec = reqs
        .iter()
        .find(|r| r.uri.contains("/exec?"))
        .expect("exec made");
    assert!(exec.uri.contains("container=dbg"), "{}", exec.uri);
    assert!(exec.uri.contains("poddebug-stop"), "{}", exec.uri);
    // Nothing was signalled, so nothing was recorded on the pod.
    assert!(
        reqs.iter().all(|r| r.method != http::Method::PATCH),
        "{reqs:?}"
    );
    let got = b.get("ns", "web", "dbg", &alice()).await.expect("get");
    assert!(got.status.and_then(|s| s.stop_requested).is_none());

    // Any other exec failure passes through as kube-apiserver said it.
    fake.set_exec_error(
        403,
        "pods \"web\" is forbidden: User \"alice\" cannot create resource \"pods/exec\"",
    );
    let req = StopRequest {
        namespace: "ns".into(),
        pod: "web".into(),
        name: "dbg".into(),
        grace_period: Duration::from_secs(3),
        caller: alice(),
        timeout: Duration::from_secs(50),
    };
    let err = api_err(b.stop(req).await);
    assert_eq!(err.code(), 403);
    assert!(err.message().contains("pods/exec"));
}

/// The running debug container "dbg" of pod "web", targeting "app" (so stoppable).
fn targeted_pod() -> Pod {
    let mut p = pod("web", &[("dbg", None, "running")]);
    if let Some(ec) = p
        .spec
        .as_mut()
        .and_then(|s| s.ephemeral_containers.as_mut())
        .and_then(|ecs| ecs.first_mut())
    {
        ec.target_container_name = Some("app".into());
    }
    p
}

#[tokio::test(start_paused = true)]
async fn a_stop_ends_within_the_request_timeout_whatever_the_configured_budgets() {
    // Configured budgets far beyond the request's timeout; a kubelet that never answers.
    let mut cfg = config();
    cfg.stop_exec_timeout = Duration::from_secs(600);
    cfg.stop_status_wait = Duration::from_secs(600);
    cfg.max_grace_period = Duration::from_secs(600);
    let (fake, b) = setup(&[targeted_pod()], cfg);
    fake.set_exec_hangs();
    let start = tokio::time::Instant::now();
    let req = StopRequest {
        namespace: "ns".into(),
        pod: "web".into(),
        name: "dbg".into(),
        grace_period: Duration::from_secs(300),
        caller: alice(),
        timeout: Duration::from_secs(4),
    };
    let err = api_err(b.stop(req).await);
    // Virtual time (the clock is paused): how long the stop took on the request's clock.
    assert!(
        start.elapsed() <= Duration::from_secs(4),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!((err.code(), err.reason()), (504, "Timeout"));
    assert_eq!(
        err.message(),
        "Timeout: the stop did not get its script started within the request's deadline"
    );
    // The script never started, so nothing was signalled and nothing is recorded.
    assert!(fake.events().is_empty());
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.method == http::Method::GET),
        "{:?}",
        fake.requests()
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_pod_read_is_bounded_by_the_request_timeout() {
    let (fake, b) = setup(&[targeted_pod()], config());
    fake.set_get_delay(Duration::from_secs(3600));
    let start = tokio::time::Instant::now();
    let req = StopRequest {
        namespace: "ns".into(),
        pod: "web".into(),
        name: "dbg".into(),
        grace_period: Duration::from_secs(10),
        caller: alice(),
        timeout: Duration::from_secs(5),
    };
    let err = api_err(b.stop(req).await);
    assert!(start.elapsed() <= Duration::from_secs(5));
    assert_eq!(err.code(), 504, "{}", err.message());
    assert!(fake.requests().iter().all(|r| !r.uri.contains("/exec")));
}

#[tokio::test]
async fn stop_of_an_unwrapped_own_pid1_is_refused_before_anything() {
    // No target, no shared PID namespace, the image's entrypoint: the kernel would drop the
    // signals, so nothing is run and nothing is recorded.
    let (fake, b) = setup(&[pod("web", &[("dbg", None, "running")])], config());
    let req = StopRequest {
        namespace: "ns".into(),
        pod: "web".into(),
        name: "dbg".into(),
        grace_period: Duration::from_secs(3),
        caller: alice(),
        timeout: Duration::from_secs(50),
    };
    let err = api_err(b.stop(req).await);
    assert_eq!((err.code(), err.reason()), (409, "Conflict"));
    assert!(
        err.message().contains("PID 1 of its own PID namespace"),
        "{}",
        err.message()
    );
    let reqs = fake.requests();
    assert!(
        reqs.iter()
            .all(|r| !r.uri.contains("/exec") && r.method == http::Method::GET),
        "{reqs:?}"
    );
}

#[tokio::test]
async fn watch_from_a_list_then_events() {
    let (fake, b) = setup(
        &[
            pod("web", &[("dbg", None, "waiting:ContainerCreating")]),
            pod("api", &[]),
        ],
        config(),
    );
    let opts = WatchOptions {
        list: ListOptions {
            namespace: Some("ns".into()),
            ..Default::default()
        },
        timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let mut stream = b.watch(&opts, &alice()).await.expect("watch");
    match next(&mut stream).await {
        Some(DebugWatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("dbg")),
        other => panic!("want ADDED, got {other:?}"),
    }
    // The fake does not replay history: change the pod once the upstream watch is open (the
    // stream opens it when polled).
    let f = fake.clone();
    let change = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        f.set_ec_state("ns", "web", "dbg", state("running"));
    });
    let event = next(&mut stream).await;
    change.await.expect("change");
    let rv = fake
        .pod("ns", "web")
        .and_then(|p| p.metadata.resource_version);
    match event {
        Some(DebugWatchEvent::Modified(o)) => {
            assert_eq!(o.status.map(|s| s.phase), Some(DebugPhase::Running));
            assert_eq!(o.metadata.resource_version, rv);
        }
        other => panic!("want MODIFIED, got {other:?}"),
    }
    fake.delete_pod("ns", "web");
    match next(&mut stream).await {
        Some(DebugWatchEvent::Deleted(o)) => assert_eq!(o.metadata.name.as_deref(), Some("dbg")),
        other => panic!("want DELETED, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_expired_upstream_is_410_expired() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    fake.expire_next_watch();
    let opts = WatchOptions {
        resource_version: Some("1".into()),
        timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    let mut stream = b.watch(&opts, &alice()).await.expect("watch");
    match tokio::time::timeout(Duration::from_secs(3), stream.next())
        .await
        .ok()
        .flatten()
    {
        Some(DebugWatchEvent::Error(e)) => {
            assert_eq!((e.code(), e.reason()), (410, "Expired"));
            assert_eq!(e.message(), "too old resource version: 1 (9)");
        }
        other => panic!("want ERROR, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(3), stream.next())
            .await
            .ok()
            .flatten()
            .is_none()
    );
}

#[tokio::test]
async fn stream_targets() {
    let p = pod(
        "web",
        &[
            ("run", None, "running"),
            ("bad", None, "waiting:ErrImagePull"),
            ("dbg-bcdfg", Some("dbg"), "running"),
        ],
    );
    let (fake, b) = setup(&[p], config());
    let wait = StreamUse::Attach(Duration::from_secs(2));
    let t = b
        .stream_target("ns", "web", "dbg", wait, &alice())
        .await
        .expect("mapped");
    assert_eq!(t.container, "dbg-bcdfg");
    let t = b
        .stream_target("ns", "web", "dbg-bcdfg", wait, &alice())
        .await
        .expect("by ec name");
    assert_eq!(t.container, "dbg-bcdfg");
    let err = api_err(b.stream_target("ns", "web", "app", wait, &alice()).await);
    assert_eq!(
        (err.code(), err.message()),
        (
            400,
            "container app is not a debug container of pod web".to_owned()
        )
    );
    let err = api_err(b.stream_target("ns", "web", "bad", wait, &alice()).await);
    assert_eq!(err.code(), 400);
    // Logs do not wait.
    assert!(
        b.stream_target(
            "ns",
            "web",
            "bad",
            StreamUse::Log { follow: false },
            &alice()
        )
        .await
        .is_ok()
    );
    // A container that starts while we wait.
    fake.set_ec_state("ns", "web", "run", state("waiting:ContainerCreating"));
    let f = fake.clone();
    let start = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        f.set_ec_state("ns", "web", "run", state("running"));
    });
    b.stream_target("ns", "web", "run", wait, &alice())
        .await
        .expect("started");
    start.await.expect("start");
    // One that does not.
    fake.set_ec_state("ns", "web", "run", state("waiting:ContainerCreating"));
    let err = api_err(
        b.stream_target(
            "ns",
            "web",
            "run",
            StreamUse::Attach(Duration::from_millis(1200)),
            &alice(),
        )
        .await,
    );
    assert_eq!(err.code(), 504);
    assert!(
        err.message().contains("ContainerCreating"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn an_expired_container_refuses_attach_and_log_follow_but_not_a_log_read() {
    let mut p = pod(
        "web",
        &[("old", None, "running"), ("fresh", None, "running")],
    );
    if let Some(ecs) = p
        .spec
        .as_mut()
        .and_then(|s| s.ephemeral_containers.as_mut())
    {
        let past = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(5);
        let future = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600);
        poddebug_types::convert::set_expires_at(&mut ecs[0], past);
        poddebug_types::convert::set_expires_at(&mut ecs[1], future);
    }
    let (_fake, b) = setup(&[p], config());
    let attach = StreamUse::Attach(Duration::from_secs(1));
    let follow = StreamUse::Log { follow: true };
    for purpose in [attach, follow] {
        let err = api_err(b.stream_target("ns", "web", "old", purpose, &alice()).await);
        assert_eq!(err.code(), 409, "{purpose:?}: {}", err.message());
        assert!(
            err.message()
                .contains("the time limit of debug container \"old\" passed at ")
                && err.message().contains("it is being stopped"),
            "{}",
            err.message()
        );
        b.stream_target("ns", "web", "fresh", purpose, &alice())
            .await
            .expect("before its deadline");
    }
    b.stream_target(
        "ns",
        "web",
        "old",
        StreamUse::Log { follow: false },
        &alice(),
    )
    .await
    .expect("a plain log read");
}

#[tokio::test]
async fn ping_asks_for_the_version() {
    let (fake, b) = setup(&[], config());
    b.ping().await.expect("ping");
    assert_eq!(fake.requests()[0].uri, "/version");
}

#[tokio::test]
async fn a_dry_run_create_answers_the_would_be_object_and_changes_nothing() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    let before = fake.pod("ns", "web").expect("pod");
    let mut req = create_req(Some("dbg"), None);
    req.options.dry_run = true;
    let obj = b.create(req).await.expect("a would-be object");
    assert_eq!(obj.metadata.name.as_deref(), Some("dbg"));
    assert_eq!(obj.status.map(|s| s.phase), Some(DebugPhase::Waiting));
    assert_eq!(fake.pod("ns", "web"), Some(before));
    assert!(fake.events().is_empty(), "a dry run records no Event");
    let puts: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .map(|r| r.uri)
        .collect();
    assert_eq!(puts.len(), 1, "{puts:?}");
    assert!(puts[0].contains("dryRun=All"), "{puts:?}");
}

#[tokio::test]
async fn what_the_cluster_accepts_is_created_and_counted() {
    // This fake validates nothing: it accepts what the local rules refuse.
    let (fake, b) = setup(&[pod("web", &[])], config());
    let mut req = create_req(Some("dbg"), None);
    req.body.container.ports = Some(vec![Default::default()]);
    let created = b.create(req).await.expect("the cluster decides");
    assert_eq!(created.metadata.name.as_deref(), Some("dbg"));
    let puts: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .map(|r| r.uri)
        .collect();
    // Nothing else refused: the update itself decided, the local validator beside it.
    assert_eq!(puts.len(), 1, "the update alone: {puts:?}");
    assert!(!puts[0].contains("dryRun"), "{puts:?}");
    let d = b.validation_disagreements();
    assert_eq!(d.get(crate::Disagreement::ClusterAccepted), 1);
    assert_eq!(d.get(crate::Disagreement::ClusterRejected), 0);
}

#[tokio::test]
async fn the_callers_admission_check_refuses_before_anything_changes() {
    let (fake, b) = setup(&[pod("web", &[])], config());
    let before = fake.pod("ns", "web").expect("pod");
    let mut req = create_req(Some("dbg"), None);
    req.options.admission = Some(crate::AdmissionCheck(std::sync::Arc::new(|| {
        Box::pin(async {
            Err(poddebug_types::ApiError::forbidden(
                "debugprofiles",
                "poddebug.dev",
                "general",
                "not for you",
            ))
        })
    })));
    let err = api_err(b.create(req).await);
    assert_eq!(err.code(), 403);
    assert_eq!(fake.pod("ns", "web"), Some(before));
    assert!(fake.requests().iter().all(|r| r.method != "PUT"));
}
