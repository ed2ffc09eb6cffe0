//! What an approved debug request grants, decided on its signed record and on what poddebug
//! parsed of the create itself: the requester, in the window, exactly what the request names.

use k8s_openapi::api::core::v1::Container;
use poddebug_types::request::{
    DebugRequest, Justification, MAX_MADE, PLURAL_DEBUG_REQUESTS, RequestMode, RequestPhase,
    RequestedContainer,
};
use poddebug_types::{ApiError, GROUP, Profile};

/// What a create asks for, as poddebug parsed it.
#[derive(Clone, Debug)]
pub struct Wanted<'a> {
    /// Debug container, copy or node debug container.
    pub mode: RequestMode,
    /// The pod (debug, copy) or node.
    pub target: &'a str,
    /// The profile the create is checked against: the one it names (debug containers), the
    /// one its pod amounts to (node debug containers); `None` for a copy, whose profiles are
    /// read from the copy as built (the grant covers the request's wherever it is needed).
    pub profile: Option<Profile>,
    /// The container it adds (a copy may add none).
    pub container: Option<&'a Container>,
    /// The container whose namespaces it joins (`targetContainerName`, as the client sent it).
    pub target_container: Option<&'a str>,
    /// Fields of the container the server's types do not know (passed on to the cluster): a
    /// request cannot bind them, so a create under a request that names its container refuses
    /// them.
    pub unknown_fields: Vec<String>,
    /// What else a copy runs that a request naming a container does not allow (`setImage`,
    /// replaced commands), in words.
    pub other_programs: Vec<String>,
    /// The image a container that names none gets (`--default-image`).
    pub default_image: &'a str,
}

/// A request's approval, resolved for a create or a stream: its profile may be used without
/// `use` on it.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The request, as the replica held it when the grant was resolved.
    pub request: DebugRequest,
    /// The profile it grants.
    pub profile: Profile,
}

impl Grant {
    /// Whether the grant stands in for `use` on `p`.
    pub fn covers(&self, p: Profile) -> bool {
        self.profile == p
    }

    /// The request's namespace and name.
    pub fn key(&self) -> (String, String) {
        (
            self.request.namespace().to_owned(),
            self.request.name().to_owned(),
        )
    }

    /// The reason, ticket, request and approvers everything made under it carries.
    pub fn justification(&self) -> Justification {
        self.request.justification()
    }

    /// The end of its window.
    pub fn expires_at(&self) -> Option<jiff::Timestamp> {
        self.request
            .status
            .as_ref()
            .and_then(|s| s.expires_at.as_ref())
            .map(|t| t.0)
    }
}

fn refused(name: &str, why: impl Into<String>) -> ApiError {
    ApiError::forbidden(PLURAL_DEBUG_REQUESTS, GROUP, name, why)
}

/// Why a request does not grant anything now (its phase), in words; `None` while approved.
pub fn inactive(r: &DebugRequest, now: jiff::Timestamp) -> Option<String> {
    let st = r.status.clone().unwrap_or_default();
    let last = |d: poddebug_types::request::Decision| {
        st.reviews
            .iter()
            .rev()
            .find(|x| x.decision == d)
            .map(|x| x.user.clone())
            .unwrap_or_default()
    };
    Some(match r.phase_at(now) {
        RequestPhase::Approved => return None,
        RequestPhase::Pending => format!(
            "it is Pending: {} of {} approval(s)",
            r.approvers().len(),
            st.approvals_required.max(1)
        ),
        RequestPhase::Denied => format!(
            "it was denied by {}",
            last(poddebug_types::request::Decision::Deny)
        ),
        RequestPhase::Revoked => format!(
            "it was revoked by {}",
            last(poddebug_types::request::Decision::Revoke)
        ),
        RequestPhase::Expired => match st.expires_at {
            Some(t) if st.approved_at.is_some() => format!("it expired at {}", t.0),
            _ => "it expired before it was decided".to_owned(),
        },
    })
}

/// The differences between the container a request names (with its target) and the one made,
/// in words.
fn container_differences(
    want: &RequestedContainer,
    wanted: &Wanted<'_>,
    target: Option<&str>,
) -> Vec<String> {
    let Some(got) = wanted.container else {
        return vec!["the request names a container, and this adds none".to_owned()];
    };
    let mut out = want.differences(got, wanted.default_image);
    let quoted = |t: Option<&str>| t.map_or_else(|| "none".to_owned(), |t| format!("{t:?}"));
    if target != wanted.target_container {
        out.push(format!(
            "targetContainerName {}, not {}",
            quoted(wanted.target_container),
            quoted(target)
        ));
    }
    if !wanted.unknown_fields.is_empty() {
        out.push(format!(
            "{} unknown to the server, which cannot bind them",
            wanted.unknown_fields.join(", ")
        ));
    }
    out
}

/// The grant of request `r` for `caller` to make `wanted` at `now`, or the 403 that says why
/// not (naming every difference from what the request names).
pub fn resolve(
    r: &DebugRequest,
    caller: &str,
    wanted: &Wanted<'_>,
    now: jiff::Timestamp,
) -> Result<Grant, ApiError> {
    let name = r.name();
    let requester = r.spec.requester.as_deref().unwrap_or_default();
    if requester != caller {
        return Err(refused(
            name,
            format!("it was requested by {requester:?}; only its requester may use it"),
        ));
    }
    if let Some(why) = inactive(r, now) {
        return Err(refused(name, why));
    }
    let Some(profile) = Profile::parse(&r.spec.profile) else {
        return Err(refused(name, "it names no known profile"));
    };
    let mut diffs = Vec::new();
    if r.spec.mode != wanted.mode {
        diffs.push(format!(
            "a {} request, not {}",
            r.spec.mode.as_str(),
            match wanted.mode {
                RequestMode::Debug => "a debug container",
                RequestMode::Copy => "a copy",
                RequestMode::Node => "a node debug container",
            }
        ));
    }
    let what = if r.spec.mode == RequestMode::Node {
        "node"
    } else {
        "pod"
    };
    if r.target() != wanted.target {
        diffs.push(format!("{what} {:?}, not {:?}", wanted.target, r.target()));
    }
    if let Some(p) = wanted.profile
        && p != profile
    {
        diffs.push(format!(
            "profile {:?}, not {:?}",
            p.as_str(),
            profile.as_str()
        ));
    }
    if let Some(c) = &r.spec.container {
        diffs.extend(container_differences(
            c,
            wanted,
            r.spec.target_container_name.as_deref(),
        ));
        diffs.extend(wanted.other_programs.iter().cloned());
    }
    if !diffs.is_empty() {
        return Err(refused(
            name,
            format!(
                "it grants only what it names, and this asks for {}",
                diffs.join("; ")
            ),
        ));
    }
    if r.status.as_ref().is_some_and(|s| s.made.len() >= MAX_MADE) {
        return Err(refused(
            name,
            format!("{MAX_MADE} things were already made under it: make a new request"),
        ));
    }
    Ok(Grant {
        request: r.clone(),
        profile,
    })
}

/// The grant for a stream to a container made under request `r` (the target's pod and
/// container are among what `r` says was made under it), for `caller` at `now`.
pub fn for_stream(
    r: &DebugRequest,
    caller: &str,
    pod: &str,
    container: &str,
    now: jiff::Timestamp,
) -> Option<Grant> {
    if r.spec.requester.as_deref() != Some(caller) || inactive(r, now).is_some() {
        return None;
    }
    let profile = Profile::parse(&r.spec.profile)?;
    let made = r
        .status
        .as_ref()?
        .made
        .iter()
        .any(|m| m.pod == pod && m.container.as_deref().is_none_or(|c| c == container));
    made.then(|| Grant {
        request: r.clone(),
        profile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use poddebug_types::request::{DebugRequestSpec, DebugRequestStatus, Decision, Made, Review};

    const NOW: &str = "2026-01-01T00:10:00Z";

    fn now() -> jiff::Timestamp {
        NOW.parse().unwrap()
    }

    fn approved() -> DebugRequest {
        let mut r = DebugRequest {
            spec: DebugRequestSpec {
                pod: Some("web".into()),
                profile: "sysadmin".into(),
                reason: "INC-7".into(),
                requester: Some("alice".into()),
                container: Some(RequestedContainer {
                    image: Some("busybox:1.36".into()),
                    command: Some(vec!["sh".into()]),
                    stdin: Some(true),
                    tty: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            },
            status: Some(DebugRequestStatus {
                phase: RequestPhase::Approved,
                approvals_required: 1,
                reviews: vec![Review {
                    user: "bob".into(),
                    time: Time("2026-01-01T00:01:00Z".parse().unwrap()),
                    decision: Decision::Approve,
                    comment: None,
                }],
                approved_at: Some(Time("2026-01-01T00:01:00Z".parse().unwrap())),
                expires_at: Some(Time("2026-01-01T00:31:00Z".parse().unwrap())),
                made: Vec::new(),
            }),
            ..Default::default()
        };
        r.metadata.name = Some("web-sysadmin".into());
        r.metadata.namespace = Some("shop".into());
        r
    }

    fn container(image: &str, command: &[&str]) -> Container {
        Container {
            image: Some(image.into()),
            command: Some(command.iter().map(|s| (*s).to_owned()).collect()),
            stdin: Some(true),
            tty: Some(true),
            ..Default::default()
        }
    }

    fn wanted<'a>(target: &'a str, c: Option<&'a Container>) -> Wanted<'a> {
        Wanted {
            mode: RequestMode::Debug,
            target,
            profile: Some(Profile::Sysadmin),
            container: c,
            target_container: None,
            unknown_fields: Vec::new(),
            other_programs: Vec::new(),
            default_image: "busybox:1.36",
        }
    }

    #[test]
    fn the_requester_gets_exactly_what_was_approved() {
        let c = container("busybox:1.36", &["sh"]);
        let g = resolve(&approved(), "alice", &wanted("web", Some(&c)), now()).expect("granted");
        assert!(g.covers(Profile::Sysadmin) && !g.covers(Profile::Netadmin));
        assert_eq!(g.justification().approvers, ["bob"]);
    }

    #[test]
    fn anything_else_is_403_naming_the_difference() {
        let c = container("alpine:3", &["bash"]);
        let err = resolve(&approved(), "alice", &wanted("db", Some(&c)), now()).expect_err("no");
        assert_eq!(err.code(), 403);
        assert_eq!(
            err.message(),
            "debugrequests.poddebug.dev \"web-sysadmin\" is forbidden: it grants only what it \
             names, and this asks for pod \"db\", not \"web\"; image \"alpine:3\", not \
             \"busybox:1.36\"; command [\"bash\"], not [\"sh\"]"
        );
        let err = resolve(&approved(), "mallory", &wanted("web", Some(&c)), now()).expect_err("no");
        assert!(
            err.message().contains("only its requester"),
            "{}",
            err.message()
        );
        let late: jiff::Timestamp = "2026-01-01T00:31:00Z".parse().unwrap();
        let ok = container("busybox:1.36", &["sh"]);
        let err = resolve(&approved(), "alice", &wanted("web", Some(&ok)), late).expect_err("no");
        assert!(
            err.message()
                .ends_with("it expired at 2026-01-01T00:31:00Z"),
            "{}",
            err.message()
        );
        let mut privileged = ok.clone();
        privileged.security_context = Some(k8s_openapi::api::core::v1::SecurityContext {
            privileged: Some(true),
            ..Default::default()
        });
        let err = resolve(
            &approved(),
            "alice",
            &wanted("web", Some(&privileged)),
            now(),
        )
        .expect_err("no");
        assert!(
            err.message()
                .contains("securityContext {\"privileged\":true}, not null"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn an_approval_binds_the_whole_container_and_its_target() {
        let exact = container("busybox:1.36", &["sh"]);
        let ok = resolve(&approved(), "alice", &wanted("web", Some(&exact)), now());
        assert!(ok.is_ok(), "{ok:?}");
        // Each field the approver never saw, added to the approved container.
        let variants: Vec<(Container, &str)> = vec![
            (
                Container {
                    env: Some(vec![k8s_openapi::api::core::v1::EnvVar {
                        name: "PATH".into(),
                        value: Some("/tmp/evil".into()),
                        ..Default::default()
                    }]),
                    ..exact.clone()
                },
                "env [{\"name\":\"PATH\",\"value\":\"/tmp/evil\"}], not null",
            ),
            (
                Container {
                    volume_mounts: Some(vec![k8s_openapi::api::core::v1::VolumeMount {
                        name: "data".into(),
                        mount_path: "/bin".into(),
                        ..Default::default()
                    }]),
                    ..exact.clone()
                },
                "volumeMounts [{\"mountPath\":\"/bin\",\"name\":\"data\"}], not null",
            ),
            (
                Container {
                    working_dir: Some("/tmp".into()),
                    ..exact.clone()
                },
                "workingDir \"/tmp\", not null",
            ),
            (
                Container {
                    tty: Some(false),
                    ..exact.clone()
                },
                "tty false, not true",
            ),
        ];
        for (c, diff) in variants {
            let err = resolve(&approved(), "alice", &wanted("web", Some(&c)), now())
                .expect_err("refused");
            assert_eq!(err.code(), 403);
            assert!(err.message().ends_with(diff), "{}", err.message());
        }
        // An empty list is no list.
        let empty_env = Container {
            env: Some(Vec::new()),
            ..exact.clone()
        };
        assert!(
            resolve(
                &approved(),
                "alice",
                &wanted("web", Some(&empty_env)),
                now()
            )
            .is_ok()
        );
        // The target is bound: none approved, so none may be named; one approved, that one.
        let mut w = wanted("web", Some(&exact));
        w.target_container = Some("app");
        let err = resolve(&approved(), "alice", &w, now()).expect_err("refused");
        assert!(
            err.message()
                .ends_with("targetContainerName \"app\", not none"),
            "{}",
            err.message()
        );
        let mut targeted = approved();
        targeted.spec.target_container_name = Some("app".into());
        assert!(resolve(&targeted, "alice", &w, now()).is_ok());
        w.target_container = Some("sidecar");
        assert!(resolve(&targeted, "alice", &w, now()).is_err());
        // Fields the server does not know cannot be approved.
        let mut w = wanted("web", Some(&exact));
        w.unknown_fields = vec!["container.futureField".into()];
        let err = resolve(&approved(), "alice", &w, now()).expect_err("refused");
        assert!(
            err.message().contains("container.futureField unknown"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn streams_are_granted_only_to_what_was_made_under_it() {
        let mut r = approved();
        assert!(for_stream(&r, "alice", "web", "dbg", now()).is_none());
        r.status.as_mut().unwrap().made.push(Made {
            kind: "PodDebugContainer".into(),
            name: "dbg".into(),
            namespace: "shop".into(),
            pod: "web".into(),
            container: Some("dbg".into()),
            time: Time(now()),
        });
        assert!(for_stream(&r, "alice", "web", "dbg", now()).is_some());
        assert!(for_stream(&r, "alice", "web", "other", now()).is_none());
        assert!(for_stream(&r, "bob", "web", "dbg", now()).is_none());
        let mut revoked = r.clone();
        revoked.status.as_mut().unwrap().phase = RequestPhase::Revoked;
        assert!(for_stream(&revoked, "alice", "web", "dbg", now()).is_none());
    }
}
