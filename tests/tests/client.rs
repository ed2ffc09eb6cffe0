//! poddebug-client end to end: every verb of the crate through the real server against the fake
//! kube-apiserver, with the same kubeconfig a user would have.
//!
//! Needs the binary: `cargo build -p poddebug-apiserver` first.

use std::time::Duration;

use futures::StreamExt;
use kube::runtime::wait::await_condition;
use kube::runtime::{WatchStreamExt, reflector};
use poddebug_client::{
    AttachOutcome, AttachParams, ConnectOptions, CreateParams, DebugContainers, DebugPhase, Error,
    ListParams, LogParams, PodDebugContainer, SessionMode, Sessions, WatchEvent, WatchParams,
    watcher,
};
use poddebug_tests::fake::{
    ATTACH_EXIT_CODE_ANNOTATION, ATTACH_EXIT_TERMINATES_ANNOTATION, ATTACH_SHARED_ANNOTATION,
};
use poddebug_tests::{FakeKube, PodDebugServer, TempDir};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "shop";
const POD: &str = "web";
/// Bound of every wait in this file (a guard against hanging, never a measured time).
const GUARD: Duration = Duration::from_secs(30);

struct Env {
    fake: FakeKube,
    _server: PodDebugServer,
    _dir: TempDir,
    client: kube::Client,
}

impl Env {
    fn debug(&self) -> DebugContainers {
        DebugContainers::new(self.client.clone(), NS)
    }
}

async fn env() -> Env {
    let fake = FakeKube::start().await;
    fake.allow_all();
    fake.add_namespace(NS, &[]);
    fake.add_simple_pod(NS, POD);
    fake.add_namespace("other", &[]);
    fake.add_simple_pod("other", "api");
    let pki = fake.pki().clone();
    let server = PodDebugServer::start(&fake, &pki, &[]).await;
    let dir = TempDir::new("client");
    let kc = server.write_kubeconfig(dir.path(), "alice", &["devs"], NS);
    let (client, ns) = poddebug_client::connect(&ConnectOptions {
        kubeconfig: Some(kc),
        context: None,
        ..Default::default()
    })
    .await
    .expect("client from the kubeconfig");
    assert_eq!(ns, NS, "the context's namespace");
    Env {
        fake,
        _server: server,
        _dir: dir,
        client,
    }
}

fn spec(name: &str, command: &[&str], stdin: bool, tty: bool) -> PodDebugContainer {
    let mut o = PodDebugContainer::default();
    o.metadata.name = Some(name.into());
    o.container.image = Some("busybox:1.36".into());
    o.container.command = Some(command.iter().map(|s| (*s).to_owned()).collect());
    o.container.stdin = Some(stdin);
    o.container.tty = Some(tty);
    o.target_container_name = Some("app".into());
    o
}

fn waiting() -> CreateParams {
    CreateParams {
        wait: true,
        timeout: Some(Duration::from_secs(20)),
        dry_run: false,
    }
}

fn phase(o: &PodDebugContainer) -> Option<DebugPhase> {
    o.status.as_ref().map(|s| s.phase)
}

#[tokio::test]
async fn create_get_list_watch_and_stop() {
    let e = env().await;
    let debug = e.debug();
    let created = debug
        .create(
            POD,
            &spec("dbg", &["sleep", "1000"], false, false),
            &waiting(),
        )
        .await
        .expect("create");
    assert_eq!(created.metadata.name.as_deref(), Some("dbg"));
    assert_eq!(phase(&created), Some(DebugPhase::Running));
    assert_eq!(created.target_container_name.as_deref(), Some("app"));
    // The pod got it as asked.
    let pod = e.fake.pod(NS, POD).expect("pod");
    let ec = &pod.spec.expect("spec").ephemeral_containers.expect("ecs")[0];
    assert_eq!(
        ec.command.as_deref(),
        Some(&["sleep".to_owned(), "1000".to_owned()][..])
    );

    let got = debug.get(POD, "dbg").await.expect("get");
    assert_eq!(phase(&got), Some(DebugPhase::Running));

    let in_pod = debug.list_in_pod(POD).await.expect("list in pod");
    assert_eq!(in_pod.items.len(), 1);
    assert_eq!(in_pod.items[0].metadata.name.as_deref(), Some("dbg"));

    // A generated name, in another namespace.
    let other = DebugContainers::new(e.client.clone(), "other");
    let generated = other
        .create(
            "api",
            &PodDebugContainer::default(),
            &CreateParams::default(),
        )
        .await
        .expect("create with a generated name");
    let gen_name = generated.metadata.name.clone().unwrap_or_default();
    assert!(gen_name.starts_with("debugger-"), "{gen_name}");

    let ns_list = debug.list(&ListParams::default()).await.expect("list");
    let names: Vec<_> = ns_list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["web.dbg"]);
    let all = DebugContainers::all(e.client.clone());
    let all_list = all.list(&ListParams::default()).await.expect("list all");
    let mut names: Vec<_> = all_list
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, [format!("api.{gen_name}"), "web.dbg".to_owned()]);
    let by_label = all
        .list(&ListParams::default().labels("app=api"))
        .await
        .expect("list by label");
    assert_eq!(by_label.items.len(), 1);

    // The crate's watch (kube-runtime's watcher): the list first, then the stop shows up as a
    // change to Terminated.
    let events = debug.watch(watcher::Config::default());
    futures::pin_mut!(events);
    let listed = tokio::time::timeout(GUARD, async {
        let mut listed = Vec::new();
        while let Some(ev) = events.next().await {
            match ev.expect("no watch error") {
                watcher::Event::InitApply(o) => listed.push(o.metadata.name.unwrap_or_default()),
                watcher::Event::InitDone => return listed,
                _ => {}
            }
        }
        listed
    })
    .await
    .expect("the watch lists");
    assert_eq!(listed, ["web.dbg"]);
    let stopped = debug
        .stop(POD, "dbg", Some(Duration::from_secs(1)))
        .await
        .expect("stop");
    assert!(
        stopped
            .status
            .as_ref()
            .is_some_and(|s| s.stop_requested.is_some()),
        "{stopped:?}"
    );
    let terminated = tokio::time::timeout(GUARD, async {
        while let Some(ev) = events.next().await {
            if let Ok(watcher::Event::Apply(o)) = ev
                && phase(&o) == Some(DebugPhase::Terminated)
            {
                return Some(o);
            }
        }
        None
    })
    .await
    .expect("the watch reports the stop")
    .expect("a Terminated event");
    assert_eq!(terminated.metadata.name.as_deref(), Some("web.dbg"));
}

#[tokio::test]
async fn kube_rs_api_reflector_and_await_condition_work_on_pod_debug_containers() {
    let e = env().await;
    let debug = e.debug();
    // kube::Api over `poddebugcontainers`: objects are POD.NAME there.
    let api: kube::Api<PodDebugContainer> = kube::Api::namespaced(e.client.clone(), NS);
    let (store, writer) = reflector::store::<PodDebugContainer>();
    let reflect = tokio::spawn(
        watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(|_| futures::future::ready(())),
    );
    debug
        .create(
            POD,
            &spec("dbg", &["sleep", "1000"], false, false),
            &CreateParams::default(),
        )
        .await
        .expect("create");
    // await_condition sees it start, by its collection name.
    let running = tokio::time::timeout(
        GUARD,
        await_condition(api.clone(), "web.dbg", |o: Option<&PodDebugContainer>| {
            o.is_some_and(|o| phase(o) == Some(DebugPhase::Running))
        }),
    )
    .await
    .expect("in time")
    .expect("no watch error")
    .expect("the object");
    assert_eq!(running.metadata.name.as_deref(), Some("web.dbg"));
    assert_eq!(running.metadata.namespace.as_deref(), Some(NS));
    let got = api.get("web.dbg").await.expect("Api::get");
    assert_eq!(phase(&got), Some(DebugPhase::Running));
    let err = api
        .get("web.nosuch")
        .await
        .expect_err("no such debug container");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404 && s.message.contains("web.nosuch")),
        "{err}"
    );
    let listed = api.list(&ListParams::default()).await.expect("Api::list");
    assert_eq!(listed.items.len(), 1);
    // The reflector's store holds it, under the same key.
    let cached = tokio::time::timeout(GUARD, async {
        loop {
            if let Some(o) = store.get(&reflector::ObjectRef::new("web.dbg").within(NS))
                && phase(&o) == Some(DebugPhase::Running)
            {
                return o;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the store catches up");
    assert_eq!(
        cached.container.command.as_deref().map(<[String]>::len),
        Some(2)
    );
    // wait_started answers it as the pod's subresource names it.
    let started = debug
        .wait_started(POD, "dbg", GUARD, |_| {})
        .await
        .expect("started");
    assert_eq!(started.metadata.name.as_deref(), Some("dbg"));
    reflect.abort();
}

#[tokio::test]
async fn errors_keep_the_servers_status() {
    let e = env().await;
    let debug = e.debug();
    let err = debug.get("nosuchpod", "x").await.expect_err("no pod");
    assert_eq!(err.code(), Some(404));
    assert_eq!(
        err.to_string(),
        "Error from server (NotFound): pods \"nosuchpod\" not found"
    );

    let dry = CreateParams {
        dry_run: true,
        ..Default::default()
    };
    // A dry run answers the would-be object and adds nothing.
    let would_be = debug
        .create(POD, &spec("dry", &["sh"], false, false), &dry)
        .await
        .expect("a dry run is answered");
    assert_eq!(would_be.metadata.name.as_deref(), Some("dry"));
    assert!(
        e.fake
            .pod(NS, POD)
            .and_then(|p| p.spec?.ephemeral_containers)
            .is_none()
    );

    let mut bad = spec("bad", &["sh"], false, false);
    bad.container.ports = Some(vec![Default::default()]);
    let err = debug
        .create(POD, &bad, &CreateParams::default())
        .await
        .expect_err("ports are not allowed");
    let status = err.status().expect("a Status");
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert!(
        status
            .details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.field.contains("ports"))),
        "{status:?}"
    );

    let all = DebugContainers::all(e.client.clone());
    assert!(matches!(
        all.get(POD, "x").await,
        Err(Error::NamespaceRequired(_))
    ));
    let tty_with_stderr = AttachParams {
        tty: true,
        stderr: true,
        ..Default::default()
    };
    assert!(matches!(
        debug.attach(POD, "x", &tty_with_stderr).await,
        Err(Error::InvalidParams(_))
    ));
    // Attaching to a debug container that does not exist is the server's refusal.
    let err = debug
        .attach(POD, "nosuch", &AttachParams::default())
        .await
        .expect_err("no such debug container");
    assert!(err.status().is_some(), "{err}");
}

#[tokio::test]
async fn waiting_shows_its_reason_and_gives_up() {
    let e = env().await;
    e.fake.add_bad_image("example.invalid/nosuch:1");
    let debug = e.debug();
    let mut s = spec("pull", &["sh"], false, false);
    s.container.image = Some("example.invalid/nosuch:1".into());
    debug
        .create(POD, &s, &CreateParams::default())
        .await
        .expect("create");
    let mut seen = Vec::new();
    let err = debug
        .wait_started(POD, "pull", Duration::from_secs(3), |o| {
            if let Some(r) = poddebug_client::waiting_reason(o) {
                seen.push(r);
            }
        })
        .await
        .expect_err("never starts");
    let Error::Timeout { name, waiting, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(name, "pull");
    let waiting = waiting.clone().unwrap_or_default();
    assert!(
        waiting.contains("ErrImagePull") || waiting.contains("ImagePullBackOff"),
        "{err}"
    );
    assert!(
        seen.iter()
            .any(|r| r.contains("ErrImagePull") || r.contains("ImagePullBackOff")),
        "{seen:?}"
    );

    // A container that starts ends the wait with its state.
    debug
        .create(
            POD,
            &spec("ok", &["sh"], false, false),
            &CreateParams::default(),
        )
        .await
        .expect("create");
    let started = debug
        .wait_started(POD, "ok", GUARD, |_| {})
        .await
        .expect("starts");
    assert_eq!(phase(&started), Some(DebugPhase::Running));
}

async fn read_until(out: &mut (impl tokio::io::AsyncRead + Unpin), needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let found = tokio::time::timeout(GUARD, async {
        loop {
            match out.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    seen.extend_from_slice(&buf[..n]);
                    if String::from_utf8_lossy(&seen).contains(needle) {
                        return true;
                    }
                }
            }
        }
    })
    .await
    .unwrap_or(false);
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(found, "{needle:?} not in {text:?}");
    text
}

#[tokio::test]
async fn attach_outcomes() {
    let e = env().await;
    let debug = e.debug();
    debug
        .create(POD, &spec("sh", &["sh"], true, true), &waiting())
        .await
        .expect("create");

    // A TTY session: input echoed, resizes reach the container, detaching leaves it running.
    let mut s = debug
        .attach(POD, "sh", &AttachParams::interactive_tty())
        .await
        .expect("attach");
    assert!(s.stderr().is_none(), "no separate stderr with a TTY");
    let mut stdin = s.stdin().expect("stdin");
    let mut stdout = s.stdout().expect("stdout");
    let mut resizer = s.resizer().expect("resizer");
    stdin.write_all(b"hello client\r").await.expect("write");
    read_until(&mut stdout, "hello client").await;
    resizer.resize(100, 40).await.expect("resize");
    read_until(&mut stdout, "resize 100x40").await;
    let detacher = s.detacher();
    let join = tokio::spawn(s.join());
    detacher.detach();
    let outcome = tokio::time::timeout(GUARD, join)
        .await
        .expect("join ends")
        .expect("task")
        .expect("outcome");
    assert_eq!(outcome, AttachOutcome::Detached);
    assert_eq!(e.fake.container_state(NS, POD, "sh"), Some("running"));

    // Closing our input ends the session; the container still runs.
    let mut s = debug
        .attach(
            POD,
            "sh",
            &AttachParams {
                stdin: true,
                ..Default::default()
            },
        )
        .await
        .expect("attach");
    let mut stdin = s.stdin().expect("stdin");
    let mut stdout = s.stdout().expect("stdout");
    stdin.write_all(b"line\n").await.expect("write");
    read_until(&mut stdout, "line").await;
    stdin.shutdown().await.expect("close stdin");
    let drain = tokio::spawn(async move {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest).await;
    });
    let outcome = tokio::time::timeout(GUARD, s.join())
        .await
        .expect("join ends")
        .expect("outcome");
    let _ = drain.await;
    assert_eq!(outcome, AttachOutcome::Detached);

    // Dropping our stdin closes the container's just the same.
    let mut s = debug
        .attach(
            POD,
            "sh",
            &AttachParams {
                stdin: true,
                ..Default::default()
            },
        )
        .await
        .expect("attach");
    let mut stdin = s.stdin().expect("stdin");
    let mut stdout = s.stdout().expect("stdout");
    stdin.write_all(b"dropped\n").await.expect("write");
    read_until(&mut stdout, "dropped").await;
    drop(stdin);
    let drain = tokio::spawn(async move {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest).await;
    });
    let outcome = tokio::time::timeout(GUARD, s.join())
        .await
        .expect("join ends once stdin is dropped")
        .expect("outcome");
    let _ = drain.await;
    assert_eq!(outcome, AttachOutcome::Detached);

    // The shell exits 7: the runtime says Success on the stream, the status says 7.
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"][ATTACH_EXIT_CODE_ANNOTATION] = "7".into();
        p["metadata"]["annotations"][ATTACH_EXIT_TERMINATES_ANNOTATION] = "true".into();
    });
    let mut s = debug
        .attach(POD, "sh", &AttachParams::interactive_tty())
        .await
        .expect("attach");
    let mut stdin = s.stdin().expect("stdin");
    let mut stdout = s.stdout().expect("stdout");
    let drain = tokio::spawn(async move {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest).await;
    });
    stdin.write_all(b"exit 7\r\x04").await.expect("write");
    let outcome = tokio::time::timeout(GUARD, s.join())
        .await
        .expect("join ends")
        .expect("outcome");
    let _ = drain.await;
    assert_eq!(
        outcome,
        AttachOutcome::Exited {
            exit_code: 7,
            reason: Some("Error".into())
        }
    );
    assert_eq!(outcome.exit_code(), 7);
    let after = debug.get(POD, "sh").await.expect("get");
    assert_eq!(phase(&after), Some(DebugPhase::Terminated));
    drop(stdin);
}

#[tokio::test]
async fn logs_and_profiles() {
    let e = env().await;
    let debug = e.debug();
    debug
        .create(POD, &spec("out", &["sh"], false, false), &waiting())
        .await
        .expect("create");
    e.fake.append_log(NS, POD, "out", "one\ntwo\nthree\n");
    let all = debug
        .logs(POD, "out", &LogParams::default())
        .await
        .expect("logs");
    assert_eq!(all, "one\ntwo\nthree\n");
    let tail = debug
        .logs(
            POD,
            "out",
            &LogParams {
                tail_lines: Some(1),
                ..Default::default()
            },
        )
        .await
        .expect("tail");
    assert_eq!(tail, "three\n");
    // Following: what was there, then what comes.
    let follow = debug
        .log_stream(
            POD,
            "out",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .expect("follow");
    let mut lines = futures::AsyncBufReadExt::lines(follow);
    let mut seen = Vec::new();
    let followed = tokio::time::timeout(GUARD, async {
        while let Some(Ok(l)) = lines.next().await {
            if l == "three" {
                e.fake.append_log(NS, POD, "out", "four\n");
            }
            let done = l == "four";
            seen.push(l);
            if done {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(followed, "{seen:?}");
    assert_eq!(seen, ["one", "two", "three", "four"]);

    let profiles = debug.profiles().await.expect("profiles");
    let sysadmin = profiles
        .items
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("sysadmin"))
        .expect("sysadmin");
    assert!(sysadmin.requires_use_permission);
    assert_eq!(profiles.items.iter().filter(|p| p.default).count(), 1);
}

#[tokio::test]
async fn sessions_listed_watched_joined_as_moderator_and_terminated() {
    let e = env().await;
    // Streams attached to one container share its output, as the kubelet's do.
    e.fake.update_pod(NS, POD, |p| {
        p["metadata"]["annotations"][ATTACH_SHARED_ANNOTATION] = "true".into();
    });
    let debug = e.debug();
    debug
        .create(POD, &spec("sh", &["sh"], true, true), &waiting())
        .await
        .expect("create");
    let sessions = debug.sessions();
    let mut events = Box::pin(
        sessions
            .watch(&WatchParams::default(), "0")
            .await
            .expect("watch"),
    );

    // alice's own session: listed, in the pod and in the namespace, and seen by the watch.
    let mut mine = debug
        .attach(POD, "sh", &AttachParams::interactive_tty())
        .await
        .expect("attach");
    let mut stdin = mine.stdin().expect("stdin");
    let mut stdout = mine.stdout().expect("stdout");
    let added = tokio::time::timeout(GUARD, async {
        loop {
            match events.next().await {
                Some(Ok(WatchEvent::Added(s))) => break s,
                Some(Ok(_)) => continue,
                other => panic!("the watch ended: {other:?}"),
            }
        }
    })
    .await
    .expect("an ADDED event");
    assert_eq!(
        (added.spec.user.as_str(), added.spec.mode),
        ("alice", SessionMode::Owner)
    );
    let id = added.metadata.name.clone().expect("name");
    assert_eq!(sessions.list().await.expect("list").items.len(), 1);
    let in_pod = sessions.list_in_pod(POD).await.expect("list in pod");
    assert_eq!(in_pod.items[0].metadata.name.as_deref(), Some(id.as_str()));
    assert_eq!(sessions.get(&id).await.expect("get").spec.container, "sh");
    assert!(matches!(
        Sessions::all(e.client.clone()).get(&id).await,
        Err(Error::NamespaceRequired(_))
    ));

    // A moderator never types: the client refuses stdin before asking the server.
    let moderate = |stdin| AttachParams {
        stdin,
        stdout: true,
        stderr: false,
        tty: true,
        mode: Some(SessionMode::Moderator),
        ..Default::default()
    };
    assert!(matches!(
        debug.attach(POD, "sh", &moderate(true)).await,
        Err(Error::InvalidParams(m)) if m.contains("observers and moderators do not send input")
    ));
    // Joined as a moderator (the mode reaches the server), alice's typing is seen.
    let mut moderator = debug
        .attach(POD, "sh", &moderate(false))
        .await
        .expect("attach as moderator");
    assert!(moderator.stdin().is_none());
    let mut watching = moderator.stdout().expect("stdout");
    let modes = || async {
        let list = sessions.list().await.expect("list");
        list.items.iter().map(|s| s.spec.mode).collect::<Vec<_>>()
    };
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = modes().await;
        if seen.contains(&SessionMode::Moderator) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.contains(&SessionMode::Moderator), "{seen:?}");
    // An observer (another way in) sees the same.
    let mut observer = debug.observe(POD, "sh", true).await.expect("observe");
    assert!(observer.stdin().is_none());
    let mut observed = observer.stdout().expect("stdout");
    for _ in 0..100 {
        if modes().await.contains(&SessionMode::Observer) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stdin.write_all(b"hello moderator\r").await.expect("type");
    read_until(&mut watching, "hello moderator").await;
    read_until(&mut observed, "hello moderator").await;
    drop(observer);

    // Terminating alice's session ends her stream with the reason; the moderator stays.
    let gone = sessions.terminate(POD, &id).await.expect("terminate");
    assert_eq!(gone.metadata.name.as_deref(), Some(id.as_str()));
    let drain = tokio::spawn(async move {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest).await;
        String::from_utf8_lossy(&rest).into_owned()
    });
    let ended = tokio::time::timeout(GUARD, mine.join())
        .await
        .expect("alice's session ends");
    let said = format!("{ended:?} {}", drain.await.expect("drain"));
    assert!(said.contains("session terminated by alice"), "{said}");
    // Her record goes when the relay ends: when the client closed first, the relay still lets
    // the upstream finish for up to its linger (5 s) before it does. Polled with a bound past it.
    let mut left = modes().await;
    for _ in 0..300 {
        if left == vec![SessionMode::Moderator] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = modes().await;
    }
    assert_eq!(
        left,
        vec![SessionMode::Moderator],
        "the observer left, the moderator stays"
    );
    assert!(matches!(
        sessions.get(&id).await,
        Err(Error::Api(s)) if s.code == 404
    ));
    drop(moderator);
}
