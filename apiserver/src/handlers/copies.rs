//! `pods/POD/copy` and `pods/POD/copies[/NAME]`: debug a copy of a pod.
//!
//! A copy runs with the original's service account and may run other images, so besides
//! `create pods/copy` (the chain's check) its maker needs the core `create pods` in the
//! namespace: asked by SubjectAccessReview, or, with `--impersonate`, the pod is created as the
//! caller and kube-apiserver decides. Every image of the copy passes `--allowed-images`, and
//! the debug container's profile (and any privilege it sets) needs `use` as for a debug
//! container. Once built, the copy needs `use` on every profile its pod amounts to, read from
//! its spec (`poddebug_types::privilege::pod_profiles`: the original's privileges count), and
//! under a moderated one what the caller runs in it must be interactive shells.

use std::collections::BTreeMap;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode, Uri};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use poddebug_storage::{CopyRequest, CreateKind, Phase, Phases, PodAdmission, Prefetch};
use poddebug_types::copy::{KIND_POD_DEBUG_COPY, PodDebugCopy};
use poddebug_types::decode::decode_create_object;
use poddebug_types::{ApiError, PodDebugContainer, Profile};

use super::json_response;
use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::authz::Attributes;
use crate::error::Error;
use crate::state::AppState;

/// The core permission a copy needs: `create pods` in the namespace.
fn core_create_pods(ns: &str) -> Attributes {
    Attributes::Resource {
        verb: "create".to_owned(),
        group: String::new(),
        version: "v1".to_owned(),
        resource: "pods".to_owned(),
        subresource: String::new(),
        namespace: ns.to_owned(),
        name: String::new(),
    }
}

/// `POST .../pods/POD/copy`.
pub async fn create(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
    prefetch: Option<Extension<Prefetch>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let phases = st.metrics.create_phases.phases(CreateKind::Copy);
    let dry_run = super::debug::create_dry_run(uri.query())?;
    super::body::require_json(&headers)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    let req: PodDebugCopy = decode_create_object(&bytes, KIND_POD_DEBUG_COPY)?;
    if let Some(body_ns) = req.metadata.namespace.as_deref().filter(|n| !n.is_empty())
        && body_ns != ns
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .to_owned(),
        )
        .into());
    }
    let profile = match req.profile.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => Profile::parse(p)
            .ok_or_else(|| ApiError::BadRequest(format!("unknown profile {p:?}")))?,
        None => st.config.default_profile,
    };
    // The debug container's profile and any privilege its own securityContext sets.
    let as_debug = PodDebugContainer {
        container: req.container.clone().unwrap_or_default(),
        ..Default::default()
    };
    // The debug request it names: the copy's debug container, and nothing else run in another
    // image or command, when the request names a container.
    let other_programs: Vec<String> = req
        .set_image
        .keys()
        .map(|c| format!("setImage[{c}] (another image)"))
        .chain(
            req.replace
                .iter()
                .filter(|(_, r)| !r.command.is_empty() || !r.args.is_empty())
                .map(|(c, _)| format!("replace[{c}] (another command)")),
        )
        .collect();
    let jit = st
        .requests
        .for_create(
            &auth.user,
            &ns,
            &crate::requests::Asked {
                reason: req.reason.as_deref(),
                ticket: req.ticket.as_deref(),
                debug_request: req.debug_request.as_deref(),
            },
            &crate::requests::Wanted {
                mode: poddebug_types::request::RequestMode::Copy,
                target: &pod,
                profile: None,
                container: req.container.as_ref(),
                // A copy's debug container shares the copy's process namespace (its profiles
                // are read from the copy as built); its body is decoded strictly.
                target_container: None,
                unknown_fields: Vec::new(),
                other_programs,
                default_image: &st.config.policy.default_image,
            },
            (
                KIND_POD_DEBUG_COPY,
                req.metadata.name.as_deref().unwrap_or(""),
            ),
        )
        .await?;
    let grant = jit.grant.clone()?;
    // Both asked at once; a refusal of the profiles is the answer when both refuse.
    let create_pods = async {
        if st.config.impersonate {
            return Ok(());
        }
        let attrs = core_create_pods(&ns);
        let check = crate::filters::check_explained(
            &st,
            &auth.user,
            &attrs,
            Some("a copy of a pod is a new pod: making one needs create on pods in its namespace"),
        );
        phases
            .time(Phase::ReviewCreatePods, check)
            .await
            .map_err(Error::from)
    };
    let own = super::debug::debug_container_profiles(&as_debug, profile);
    let (profiles, create_pods) = futures::join!(
        super::debug::authorize_profiles(&st, &auth, &own, "", grant.as_ref(), &phases),
        create_pods
    );
    profiles?;
    create_pods?;
    let admission = copy_admission(&st, &auth, &pod, &req, grant.clone(), &phases);
    let created = st
        .backend
        .create_copy(CopyRequest {
            namespace: ns.clone(),
            pod: pod.clone(),
            body: req,
            profile,
            caller: auth.user.clone(),
            dry_run,
            admission: Some(admission),
            justification: jit.justification.clone(),
            deadline: jit.deadline,
            prefetch: prefetch.map(|p| p.0),
            phases,
        })
        .await?;
    if !dry_run {
        let name = created.metadata.name.clone().unwrap_or_default();
        let mut record = AuditRecord::new(Action::Create, &auth.user, &ns, &pod, "")
            .justified(&jit.justification);
        record.profile = Some(profile.as_str().to_owned());
        record.outcome = Some(format!("copy {name} created"));
        record.emit();
        if let Some(g) = &grant {
            let made = crate::requests::made(KIND_POD_DEBUG_COPY, &name, &ns, &name, None);
            st.requests.record_made(g, made, &auth.user).await;
        }
    }
    json_response(StatusCode::CREATED, &created)
}

/// The check of the copy as built, before it is created: `use` on every profile it amounts to
/// (from its spec: the original's privileges count as much as the debug container's), and,
/// when one is moderated, the moderated-shell rule for what the caller chose to run in it (the
/// debug container, a replaced command, a changed image).
fn copy_admission(
    st: &AppState,
    auth: &Authenticated,
    original: &str,
    req: &PodDebugCopy,
    grant: Option<crate::requests::Grant>,
    phases: &Phases,
) -> PodAdmission {
    let (st, auth, original, req) = (st.clone(), auth.clone(), original.to_owned(), req.clone());
    let phases = phases.clone();
    PodAdmission(Arc::new(move |pod: Pod| {
        let (st, auth, original, req) = (st.clone(), auth.clone(), original.clone(), req.clone());
        let phases = phases.clone();
        let grant = grant.clone();
        Box::pin(async move {
            let profiles = poddebug_types::privilege::pod_profiles(&pod);
            // Every review at once; the first refusal in this order is the answer.
            let reviews = profiles
                .iter()
                .filter(|e| st.config.profile_requires_permission(e.profile))
                .map(|e| {
                    let p = e.profile;
                    let why = if e.setting.is_empty() {
                        format!("the copy's pod is of the {p} profile, which needs use on it")
                    } else {
                        format!(
                            "the copy's pod gets {}, which only the {p} profile grants",
                            e.setting
                        )
                    };
                    let (st, auth, phases, grant) = (&st, &auth, &phases, grant.as_ref());
                    async move {
                        let check =
                            crate::requests::check_use(st, &auth.user, p, Some(&why), grant);
                        phases
                            .time(Phase::ReviewProfileUse, check)
                            .await
                            .map(|_| ())
                    }
                });
            crate::filters::all_allowed(reviews).await?;
            super::moderated::require_interactive_shell(
                &st,
                &profiles,
                "pods/copy",
                &original,
                "the copy",
                copy_refusals(&req, &pod, &st.config.moderated_shells),
            )
        })
    }))
}

/// Why what the caller chose to run in a copy is not interactive shells only: the debug
/// container, each replaced command, each changed image (the original's command then runs a
/// program of the caller's image).
fn copy_refusals(req: &PodDebugCopy, pod: &Pod, shells: &[String]) -> Vec<String> {
    use poddebug_types::moderated::{container_refusals, mount_refusals, shell_refusals};
    let containers = pod
        .spec
        .as_ref()
        .map(|s| &s.containers[..])
        .unwrap_or_default();
    let find = |name: &str| containers.iter().find(|c| c.name == name);
    let mut out = Vec::new();
    if let Some(dc) = &req.container {
        let name = if dc.name.is_empty() {
            poddebug_types::copy::DEFAULT_COPY_CONTAINER
        } else {
            dc.name.as_str()
        };
        if let Some(c) = find(name) {
            out.extend(container_refusals("container", c, shells));
        }
    }
    for (name, r) in &req.replace {
        if r.command.is_empty() && r.args.is_empty() {
            continue;
        }
        if let Some(c) = find(name) {
            out.extend(shell_refusals(
                &format!("replace[{name}]"),
                c.command.as_deref().unwrap_or_default(),
                c.args.as_deref().unwrap_or_default(),
                c.stdin == Some(true),
                c.tty == Some(true),
                shells,
            ));
            // The original's mounts stay: one may be over the shell's own files.
            out.extend(mount_refusals(&format!("replace[{name}]"), c));
        }
    }
    for name in req.set_image.keys() {
        out.push(format!(
            "setImage[{name}] runs programs of another image under the container's own command"
        ));
    }
    out
}

/// `GET .../pods/POD/copies`.
pub async fn list(
    State(st): State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    Extension(auth): Extension<Authenticated>,
) -> Result<Response, Error> {
    let list = st.backend.list_copies(&ns, &pod, &auth.user).await?;
    json_response(StatusCode::OK, &list)
}

/// `GET .../pods/POD/copies/NAME` (with the portal's attach ticket for a same-origin page).
pub async fn get(
    State(st): State<AppState>,
    Path((ns, pod, name)): Path<(String, String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let copy = st.backend.get_copy(&ns, &pod, &name, &auth.user).await?;
    let mut resp = json_response(StatusCode::OK, &copy)?;
    super::debug::offer_ticket(&st, &auth, &headers, &mut resp);
    Ok(resp)
}

/// `gracePeriodSeconds` of a DELETE, from the query or the DeleteOptions body.
pub(crate) async fn grace_period(
    st: &AppState,
    q: &BTreeMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Option<u32>, Error> {
    super::debug::refuse_dry_run(q)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    super::body::require_json_if_any(headers, &bytes)?;
    let mut grace = super::debug::seconds(q, "gracePeriodSeconds")?;
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        let opts = poddebug_types::decode::decode_delete_options(&bytes)?;
        if grace.is_none() {
            grace = opts.grace_period_seconds;
        }
    }
    Ok(grace.map(|g| u32::try_from(g).unwrap_or(u32::MAX)))
}

/// `DELETE .../pods/POD/copies/NAME`: delete the copy.
pub async fn delete(
    State(st): State<AppState>,
    Path((ns, pod, name)): Path<(String, String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let grace = grace_period(&st, &q, &headers, body).await?;
    let copy = st
        .backend
        .delete_copy(&ns, &pod, &name, grace, &auth.user)
        .await?;
    let mut record = AuditRecord::new(Action::Stop, &auth.user, &ns, &pod, "");
    record.outcome = Some(format!("copy {name} deleted"));
    record.emit();
    json_response(StatusCode::OK, &copy)
}
