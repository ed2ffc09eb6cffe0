//! `pods/POD/debug[/NAME]`: create, read, list and stop debug containers of one pod.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use std::sync::Arc;

use http::{HeaderMap, StatusCode, Uri};
use poddebug_storage::{
    AdmissionCheck, CreateKind, CreateOptions, CreateRequest, ListOptions, Phase, Phases, Prefetch,
    ReachCheck, StopOutcome, StopRequest,
};
use poddebug_types::field::go_quote;
use poddebug_types::{ApiError, FieldError, FieldValue, GROUP, Profile};

use super::{json_response, list};
use crate::audit::{Action, AuditRecord};
use crate::authn::Authenticated;
use crate::error::Error;
use crate::state::AppState;

/// Time kept out of the request timeout for the work around a `?wait=true` (at most a sixth of
/// the timeout).
const WAIT_MARGIN: Duration = Duration::from_secs(10);

/// Longest `?timeoutSeconds=` honoured for `?wait=true` (the request timeout still applies).
const MAX_WAIT: Duration = Duration::from_secs(600);

fn flag(q: &BTreeMap<String, String>, k: &str) -> bool {
    matches!(q.get(k).map(String::as_str), Some("true" | "1" | ""))
}

pub(crate) fn seconds(q: &BTreeMap<String, String>, k: &str) -> Result<Option<u64>, ApiError> {
    match q.get(k) {
        None => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            ApiError::BadRequest(format!(
                "{k}: invalid value {v:?}: must be a non-negative integer"
            ))
        }),
    }
}

/// `POST .../pods/POD/debug` (generated name).
#[allow(clippy::too_many_arguments)] // the parts of one request, as axum extracts them
pub async fn create_generated(
    st: State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    q: Query<BTreeMap<String, String>>,
    auth: Extension<Authenticated>,
    prefetch: Option<Extension<Prefetch>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let dry_run = create_dry_run(uri.query())?;
    let parts = CreateParts {
        url_name: None,
        q: q.0,
        dry_run,
        auth: auth.0,
        prefetch: prefetch.map(|p| p.0),
    };
    create(st, ns, pod, parts, headers, body).await
}

/// `POST .../pods/POD/debug/NAME`.
#[allow(clippy::too_many_arguments)] // the parts of one request, as axum extracts them
pub async fn create_named(
    st: State<AppState>,
    Path((ns, pod, name)): Path<(String, String, String)>,
    q: Query<BTreeMap<String, String>>,
    auth: Extension<Authenticated>,
    prefetch: Option<Extension<Prefetch>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let dry_run = create_dry_run(uri.query())?;
    let parts = CreateParts {
        url_name: Some(name),
        q: q.0,
        dry_run,
        auth: auth.0,
        prefetch: prefetch.map(|p| p.0),
    };
    create(st, ns, pod, parts, headers, body).await
}

/// What a create's request says besides its pod, headers and body.
struct CreateParts {
    /// The name on the URL, if any.
    url_name: Option<String>,
    /// The query.
    q: BTreeMap<String, String>,
    /// `?dryRun=All`.
    dry_run: bool,
    /// Who asks.
    auth: Authenticated,
    /// The pod read begun beside authorization, if any.
    prefetch: Option<Prefetch>,
}

/// Refuse a dry run where none can be honoured: a stop cannot be simulated, so a DELETE that
/// asks for one is refused before anything happens instead of being carried out for real.
pub(crate) fn refuse_dry_run(q: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if q.get("dryRun").is_some_and(|v| !v.is_empty()) {
        return Err(ApiError::BadRequest("dryRun is not supported".to_owned()));
    }
    Ok(())
}

/// Every `dryRun` value of a query string, decoded as Go's `url.ParseQuery` does (`+` is a
/// space), in order.
fn dry_run_values(query: Option<&str>) -> Vec<String> {
    query
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k == "dryRun").then(|| {
                let v = v.replace('+', " ");
                percent_encoding::percent_decode_str(&v)
                    .decode_utf8_lossy()
                    .into_owned()
            })
        })
        .collect()
}

/// `?dryRun=` of a create, as kube-apiserver's `ValidateCreateOptions` reads it: absent is a
/// real create, `All` (possibly repeated) a dry run, and any other value (the empty one too)
/// a 422 for `CreateOptions.meta.k8s.io` naming the values, as kube-apiserver answers it.
pub(crate) fn create_dry_run(query: Option<&str>) -> Result<bool, ApiError> {
    let values = dry_run_values(query);
    if values.iter().all(|v| v == "All") {
        return Ok(!values.is_empty());
    }
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    let errs = [FieldError::not_supported(
        "dryRun",
        FieldValue::Raw(format!("[]string{{{}}}", quoted.join(", "))),
        &["All"],
    )]
    .into_iter()
    .collect();
    Err(ApiError::invalid("meta.k8s.io", "CreateOptions", "", errs))
}

async fn create(
    State(st): State<AppState>,
    ns: String,
    pod: String,
    parts: CreateParts,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let CreateParts {
        url_name,
        q,
        dry_run,
        auth,
        prefetch,
    } = parts;
    let phases = st.metrics.create_phases.phases(CreateKind::DebugContainer);
    // A pod of the node-debug namespace is a node debug pod: the host's namespaces and its root
    // filesystem. Its debug containers are made, reached and judged through nodes/NODE/debug,
    // never by adding another to its pod.
    if ns == st.config.node_debug_namespace {
        return Err(ApiError::forbidden(
            "pods/debug",
            GROUP,
            &pod,
            format!(
                "pods in {ns:?} are node debug pods: debug the node with \
                 /apis/{GROUP}/v1alpha1/nodes/NODE/debug/NAME instead of adding a debug \
                 container to one"
            ),
        )
        .into());
    }
    // The query first (a bad one is a 400, before anything about the body), as kube-apiserver
    // decodes the options before the object.
    let wait = if flag(&q, "wait") {
        let secs = seconds(&q, "timeoutSeconds")?
            .map(Duration::from_secs)
            .unwrap_or(Duration::from_secs(30));
        // The reads, the update and the Event come before the wait, and kube-apiserver ends
        // the proxied request at its own deadline (1m): keep a margin so the client gets our 504
        // with the waiting reason, not the aggregator's bare timeout.
        Some(
            secs.min(MAX_WAIT).min(
                st.config
                    .request_timeout
                    .saturating_sub(WAIT_MARGIN.min(st.config.request_timeout / 6)),
            ),
        )
    } else {
        None
    };
    super::body::require_json(&headers)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    // Container fields newer than our types go on to the cluster, which decides about them.
    let decoded = poddebug_types::decode::decode_create_body(&bytes)?;
    let pdc = decoded.object;

    let body_name = pdc.metadata.name.clone().filter(|n| !n.is_empty());
    if let (Some(u), Some(b)) = (&url_name, &body_name)
        && u != b
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({b}) does not match the name on the URL ({u})"
        ))
        .into());
    }
    if let Some(body_ns) = pdc.metadata.namespace.as_deref().filter(|n| !n.is_empty())
        && body_ns != ns
    {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .to_owned(),
        )
        .into());
    }
    // The name comes from the URL, else `metadata.name`, else `container.name` (validation
    // checks that those agree); without any, one is generated.
    let container_name = Some(pdc.container.name.clone()).filter(|n| !n.is_empty());
    let name = url_name.or(body_name).or(container_name);
    let errs = poddebug_types::validation::validate_pod_debug_container(&pdc, name.as_deref());
    if !errs.is_empty() {
        return Err(ApiError::invalid(
            GROUP,
            "PodDebugContainer",
            name.as_deref().unwrap_or(""),
            errs,
        )
        .into());
    }

    let profile = match pdc.profile.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => Profile::parse(p)
            .ok_or_else(|| ApiError::BadRequest(format!("unknown profile {p:?}")))?,
        None => st.config.default_profile,
    };
    // The debug request it names (a grant, or the 403 kept for the profile checks) and the
    // reason it carries.
    let jit = st
        .requests
        .for_create(
            &auth.user,
            &ns,
            &crate::requests::Asked {
                reason: pdc.reason.as_deref(),
                ticket: pdc.ticket.as_deref(),
                debug_request: pdc.debug_request.as_deref(),
            },
            &crate::requests::Wanted {
                mode: poddebug_types::request::RequestMode::Debug,
                target: &pod,
                profile: Some(profile),
                container: Some(&pdc.container),
                target_container: pdc.target_container_name.as_deref(),
                unknown_fields: decoded.pass_through.paths(),
                other_programs: Vec::new(),
                default_image: &st.config.policy.default_image,
            },
            ("PodDebugContainer", name.as_deref().unwrap_or("")),
        )
        .await?;
    // The profile permissions and the moderated-shell rule are 403s, answered after the
    // container is known valid (422).
    let unknown_fields = decoded.pass_through.paths();
    // The profiles the request itself amounts to are judged beside the pod's read; those the pod
    // lends the container (its target, the volumes it mounts, the host's namespaces) once it is
    // read ([`ProfileJudge::reach_check`]).
    let judge = ProfileJudge {
        st: st.clone(),
        auth: auth.clone(),
        pdc: pdc.clone(),
        pod: pod.clone(),
        unknown_fields,
        grant: jit.grant.clone(),
        phases: phases.clone(),
    };
    let own = debug_container_profiles(&pdc, profile);
    let admission = {
        let (judge, own) = (judge.clone(), own.clone());
        AdmissionCheck(Arc::new(move || {
            let (judge, own) = (judge.clone(), own.clone());
            Box::pin(async move { judge.judge(own, "").await })
        }))
    };
    let reach = judge.reach_check();

    let (audit_ns, audit_pod) = (ns.clone(), pod.clone());
    let created = st
        .backend
        .create(CreateRequest {
            namespace: ns,
            pod,
            name,
            body: pdc,
            profile,
            caller: auth.user.clone(),
            // A dry run changes nothing, so there is nothing to wait for.
            wait: wait.filter(|_| !dry_run),
            options: CreateOptions {
                dry_run,
                pass_through: decoded.pass_through,
                admission: Some(admission),
                reach: Some((reach, own)),
                justification: jit.justification.clone(),
                deadline: jit.deadline,
                prefetch,
                phases,
            },
        })
        .await?;
    if !dry_run {
        let mut record =
            AuditRecord::for_object(Action::Create, &auth.user, &audit_ns, &audit_pod, &created)
                .justified(&jit.justification);
        record.profile = Some(profile.as_str().to_owned());
        record.emit();
        if let Ok(Some(g)) = &jit.grant {
            let name = created.metadata.name.clone().unwrap_or_default();
            let ec = created
                .status
                .as_ref()
                .map(|s| s.ephemeral_container_name.clone());
            let made = crate::requests::made(
                "PodDebugContainer",
                &name,
                &audit_ns,
                &audit_pod,
                Some(ec.as_deref().unwrap_or(&name)),
            );
            st.requests.record_made(g, made, &auth.user).await;
        }
    }
    // kube-apiserver answers a dry-run create 201 as well.
    let mut resp = json_response(StatusCode::CREATED, &created)?;
    if let Some(w) = not_stoppable_warning(&created) {
        resp.headers_mut().append(http::header::WARNING, w);
    }
    Ok(resp)
}

/// The `Warning` header (kube-apiserver's `299 - "text"`, which kubectl prints) of a created
/// debug container that DELETE cannot stop.
fn not_stoppable_warning(created: &poddebug_types::PodDebugContainer) -> Option<http::HeaderValue> {
    let status = created.status.as_ref().filter(|s| !s.stoppable)?;
    let text = format!(
        "debug container {:?} cannot be stopped with DELETE: {}",
        created.metadata.name.as_deref().unwrap_or_default(),
        status.stoppable_message.as_deref().unwrap_or_default()
    );
    // Quoted as apimachinery's NewWarningHeader quotes; anything a header cannot carry is
    // replaced rather than dropping the warning.
    let mut quoted = String::from("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            ' '..='~' => quoted.push(c),
            _ => quoted.push('?'),
        }
    }
    quoted.push('"');
    http::HeaderValue::from_str(&quoted).ok()
}

/// What judges the profiles of one debug container's create: the `use` permission on each
/// gated profile (or the debug request's grant), and, under a moderated profile, the rule that
/// only an interactive shell is admitted. Asked first about the profiles the request amounts
/// to, then about those the pod lends the container ([`Self::reach_check`]).
#[derive(Clone)]
struct ProfileJudge {
    st: AppState,
    auth: Authenticated,
    pdc: poddebug_types::PodDebugContainer,
    /// The pod's name, for the Status.
    pod: String,
    /// Container fields the server does not know (they may run anything).
    unknown_fields: Vec<String>,
    grant: Result<Option<crate::requests::Grant>, ApiError>,
    phases: Phases,
}

impl ProfileJudge {
    /// Judge `profiles`; `lent` says how the container gets them when the pod lends them
    /// (empty: its own request).
    async fn judge(
        &self,
        profiles: Vec<poddebug_types::privilege::Elevation>,
        lent: &str,
    ) -> Result<(), ApiError> {
        let grant = self.grant.clone()?;
        authorize_profiles(
            &self.st,
            &self.auth,
            &profiles,
            lent,
            grant.as_ref(),
            &self.phases,
        )
        .await
        .map_err(|e| e.api_error())?;
        let mut refusals = poddebug_types::moderated::container_refusals(
            "container",
            &self.pdc.container,
            &self.st.config.moderated_shells,
        );
        if !self.unknown_fields.is_empty() {
            refusals.push(format!(
                "{} unknown to the server, which cannot tell what they run",
                self.unknown_fields.join(", ")
            ));
        }
        super::moderated::require_interactive_shell(
            &self.st,
            &profiles,
            "pods/debug",
            &self.pod,
            "the debug container",
            refusals,
        )
    }

    /// The check of what the pod lends the container, for storage to ask once the pod is read.
    fn reach_check(self) -> ReachCheck {
        ReachCheck(Arc::new(move |lent| {
            let judge = self.clone();
            Box::pin(async move { judge.judge(lent, "reaches").await })
        }))
    }
}

/// The `use` permission on every gated profile of `profiles` (the one a create names, and the
/// one any privilege in its own `securityContext` belongs to — privileged, extra capabilities,
/// unconfined seccomp… —, or, `lent` = `"reaches"`, those its pod lends it), so an ungated
/// profile cannot smuggle a gated one's privileges in. The reviews are asked at once; the
/// answer is that of the first refusal in that order.
pub(crate) async fn authorize_profiles(
    st: &AppState,
    auth: &Authenticated,
    profiles: &[poddebug_types::privilege::Elevation],
    lent: &str,
    grant: Option<&crate::requests::Grant>,
    phases: &Phases,
) -> Result<(), Error> {
    let verb = if lent.is_empty() { "sets" } else { lent };
    let reviews = profiles
        .iter()
        .filter(|e| st.config.profile_requires_permission(e.profile))
        .map(|e| {
            let p = e.profile;
            let why = (!e.setting.is_empty()).then(|| {
                format!(
                    "the debug container {verb} {}, which only the {p} profile grants",
                    e.setting
                )
            });
            async move {
                let check = crate::requests::check_use(st, &auth.user, p, why.as_deref(), grant);
                phases
                    .time(Phase::ReviewProfileUse, check)
                    .await
                    .map(|_| ())
            }
        });
    crate::filters::all_allowed(reviews).await?;
    Ok(())
}

/// The profiles a debug container amounts to: the one it names (with no setting), then the
/// gated one of each privilege its final `securityContext` sets, each profile once — what
/// attach and log read back from the ephemeral container later.
pub(crate) fn debug_container_profiles(
    pdc: &poddebug_types::PodDebugContainer,
    profile: Profile,
) -> Vec<poddebug_types::privilege::Elevation> {
    // The container as it will be added, profile applied, to see its final securityContext.
    let preview = poddebug_types::convert::to_ephemeral_container(
        pdc, "preview", "preview", profile, "preview",
    );
    let mut needed = vec![poddebug_types::privilege::Elevation {
        profile,
        setting: String::new(),
    }];
    for e in poddebug_types::privilege::elevations(&preview) {
        if !needed.iter().any(|n| n.profile == e.profile) {
            needed.push(e);
        }
    }
    needed
}

/// `GET .../pods/POD/debug/NAME`.
pub async fn get(
    State(st): State<AppState>,
    Path((ns, pod, name)): Path<(String, String, String)>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let obj = st.backend.get(&ns, &pod, &name, &auth.user).await?;
    if super::table::wants_table(&headers) {
        let include = super::table::include_object(&q);
        return json_response(
            StatusCode::OK,
            &super::table::table(std::slice::from_ref(&obj), None, include),
        );
    }
    let mut resp = json_response(StatusCode::OK, &obj)?;
    offer_ticket(&st, &auth, &headers, &mut resp);
    Ok(resp)
}

/// A page of the server's own origin (the browser says so; no page can forge it) gets, with
/// the object it reads, the ticket its WebSocket handshake to the container needs
/// (crate::attach_ticket).
pub(crate) fn offer_ticket(
    st: &AppState,
    auth: &Authenticated,
    headers: &HeaderMap,
    resp: &mut Response,
) {
    let same_origin = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("same-origin"));
    if same_origin
        && let Some(ticket) = st
            .tickets
            .issue(&auth.user.user, std::time::SystemTime::now())
        && let Ok(value) = http::HeaderValue::from_str(&ticket)
    {
        let h = resp.headers_mut();
        h.insert(crate::attach_ticket::HEADER, value);
        h.insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-store"),
        );
    }
}

/// `GET .../pods/POD/debug`: the debug containers of one pod.
pub async fn list_in_pod(
    st: State<AppState>,
    Path((ns, pod)): Path<(String, String)>,
    auth: Extension<Authenticated>,
    headers: HeaderMap,
    q: Query<BTreeMap<String, String>>,
) -> Result<Response, Error> {
    let opts = ListOptions {
        namespace: Some(ns),
        pod: Some(pod),
        pod_must_exist: true,
        ..Default::default()
    };
    list::respond(st.0, opts, auth.0, headers, q.0, false).await
}

/// The time a stop may take: the request's deadline (the server's `--request-timeout`, or the
/// client's shorter `?timeout=`, which kube-apiserver also enforces on the proxied request),
/// less the margin a wait keeps so that the answer leaves before the deadline cuts it.
fn stop_timeout(st: &AppState, q: &BTreeMap<String, String>) -> Duration {
    let deadline = q
        .get("timeout")
        .and_then(|t| crate::options::parse_duration(t).ok())
        .filter(|t| !t.is_zero())
        .map_or(st.config.request_timeout, |t| {
            t.min(st.config.request_timeout)
        });
    deadline.saturating_sub(WAIT_MARGIN.min(deadline / 6))
}

/// `DELETE .../pods/POD/debug/NAME`: stop the debug container's processes.
pub async fn delete(
    State(st): State<AppState>,
    Path((ns, pod, name)): Path<(String, String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    // DeleteOptions may come in the body (kubectl sends them); only gracePeriodSeconds matters.
    refuse_dry_run(&q)?;
    let bytes = super::body::read_limited(body, st.config.max_request_body_bytes).await?;
    super::body::require_json_if_any(&headers, &bytes)?;
    let mut grace = seconds(&q, "gracePeriodSeconds")?;
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        let opts = poddebug_types::decode::decode_delete_options(&bytes)?;
        if opts.dry_run {
            return Err(ApiError::BadRequest("dryRun is not supported".to_owned()).into());
        }
        if grace.is_none() {
            grace = opts.grace_period_seconds;
        }
    }
    // The storage caps it so that a stop fits in the request timeout.
    let grace_period = Duration::from_secs(grace.unwrap_or(10));
    let (audit_ns, audit_pod) = (ns.clone(), pod.clone());
    let outcome = st
        .backend
        .stop(StopRequest {
            namespace: ns,
            pod,
            name,
            grace_period,
            caller: auth.user.clone(),
            timeout: stop_timeout(&st, &q),
        })
        .await?;
    let (code, obj) = match &outcome {
        StopOutcome::Terminated(obj) => (StatusCode::OK, obj),
        StopOutcome::InProgress(obj) => (StatusCode::ACCEPTED, obj),
    };
    let mut record = AuditRecord::for_object(Action::Stop, &auth.user, &audit_ns, &audit_pod, obj);
    if code == StatusCode::ACCEPTED {
        record.outcome = Some("in progress".to_owned());
    }
    record.emit();
    json_response(code, obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_all_is_honoured_and_absent_is_a_real_create() {
        assert_eq!(create_dry_run(None).ok(), Some(false));
        assert_eq!(create_dry_run(Some("wait=true")).ok(), Some(false));
        assert_eq!(create_dry_run(Some("dryRun=All")).ok(), Some(true));
        assert_eq!(
            create_dry_run(Some("dryRun=All&wait=true&dryRun=All")).ok(),
            Some(true)
        );
        assert_eq!(create_dry_run(Some("dryRun=%41ll")).ok(), Some(true));
    }

    #[test]
    fn other_dry_run_values_get_kube_apiservers_422() {
        let err = create_dry_run(Some("dryRun=true")).expect_err("refused");
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.message(),
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"true\"}: supported values: \"All\""
        );
        let status = err.to_status();
        let details = status.details.expect("details");
        assert_eq!(details.group.as_deref(), Some("meta.k8s.io"));
        assert_eq!(details.kind.as_deref(), Some("CreateOptions"));
        assert_eq!(details.name, None);
        let err = create_dry_run(Some("dryRun=All&dryRun=&dryRun=a+b")).expect_err("refused");
        assert!(
            err.message()
                .contains("Unsupported value: []string{\"All\", \"\", \"a b\"}"),
            "{}",
            err.message()
        );
    }
}
