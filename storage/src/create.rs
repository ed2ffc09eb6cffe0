//! Create: add a debug container to the pod.
//!
//! 1. Read the pod, first from kube-apiserver's watch cache (`resourceVersion=0`, no etcd
//!    round trip). Whatever depends on the pod's state and refuses (404 `pods "P" not found`,
//!    which passes through as kube-apiserver words it; a name taken; the per-pod limit) is
//!    confirmed by a quorum read first, and a conflict of the update after a cached read is
//!    retried at once with a quorum read: a cache that is behind costs time, never a wrong
//!    answer.
//! 2. Plan ([`plan`]): resolve the names (see [`crate::naming`]) and build the ephemeral
//!    container from the request and profile.
//! 3. The server policy (403: `--allowed-images`, `--max-debug-containers-per-pod`) and the
//!    caller's own check (the profile permissions, begun beside the reads).
//! 4. Validate it with kube-apiserver's own rules, those of the cluster's version
//!    ([`ClusterVersion`](crate::ClusterVersion)). The cluster is the authority. When both
//!    checks of 3 passed (the usual case), the update of 5 is sent at once and the local
//!    validator runs beside it: its answer cannot change the outcome, only what is counted as
//!    a disagreement. Otherwise (a 403 to give, or a dry-run request) it runs first, and when
//!    it refuses, the same `pods/ephemeralcontainers` update is sent with `dryRun=All` and the
//!    cluster's answer decides, so that the answer is always 400, then 422, then 403, then the
//!    create, whatever else is wrong. A 422 answers its causes, moved onto the
//!    `PodDebugContainer`'s fields (`container.X`, `targetContainerName`, `metadata.name`); an
//!    acceptance the local validator refused is a disagreement (logged at debug level,
//!    counted) and the create goes on.
//! 5. `PUT pods/POD/ephemeralcontainers` with the pod as read plus the new container. It does
//!    not carry the resourceVersion (a status write since the read does not turn it back);
//!    kube-apiserver refuses a list that lacks or changes a container the pod has, so a list
//!    read before another container was added answers 422 on `spec.ephemeralContainers`, taken
//!    as a conflict, and the new container carries a per-create identifier, so it never equals
//!    another create's container of the same name (see [`put_body`]). On a conflict the pod is
//!    read again and the plan redone (names re-checked) after a short random pause, at most
//!    `conflict_retries` times, so of N concurrent creates of one name exactly one wins and the
//!    others get 409 AlreadyExists, and concurrent creates of different names all succeed. Pod
//!    Security and webhook refusals of the update reach the caller with their own code and
//!    message; a 422 is retold as in 4. With `?dryRun=All` this update is itself a dry run (reused from 4 when
//!    it was made there), nothing is recorded, and the would-be object is the answer.
//! 6. Record the Event `DebugContainerCreated` beside the answer (a task of its own, bounded;
//!    flushed on shutdown); with `wait`, wait for running or terminated.

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod};
use kube::Api;
use kube::api::{GetParams, PostParams};
use kube::core::Status;
use poddebug_types::convert::{set_expires_at, to_ephemeral_container};
use poddebug_types::decode::PassThroughFields;
use poddebug_types::stoppable::stop_blocker;
use poddebug_types::validation::{
    KubeVersion, debug_container_invalid, validate_ephemeral_container_add_on,
};
use poddebug_types::{ApiError, ErrorList, PodDebugContainer};
use rand::Rng;
use serde_json::value::RawValue;

use crate::cluster::Cluster;
use crate::disagreements::Disagreement;
use crate::error::status_from_kube;
use crate::events::{REASON_CREATED, created_message};
use crate::naming::{self, ResolvedName};
use crate::phases::Phase;
use crate::pod_json::PodJson;
use crate::prefetch::{PrefetchTarget, read_pod};
use crate::state::{EcState, ec_state, ephemeral_containers};
use crate::wait::{Waited, wait_for};
use crate::{CreateRequest, Policy, StorageError, policy, read};
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

/// What a create will do to the pod.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Debug name and ephemeral container name.
    pub(crate) names: ResolvedName,
    /// The container added.
    pub(crate) ec: EphemeralContainer,
    /// Its index in `spec.ephemeralContainers` (it is appended).
    pub(crate) index: usize,
}

/// Decide a create on `pod` without side effects: names and container.
pub(crate) fn plan(
    policy: &Policy,
    pod: &Pod,
    req: &CreateRequest,
    rng: &mut impl Rng,
) -> Result<Plan, ApiError> {
    check_pod_can_run_it(pod, &req.pod)?;
    let names = naming::resolve(pod, req.name.as_deref(), rng)?;
    let ec = to_ephemeral_container(
        &req.body,
        &names.ec_name,
        &names.debug_name,
        req.profile,
        &policy.default_image,
    );
    let mut ec = ec;
    default_target(policy.default_target, pod, &mut ec);
    // Who created it: anyone else attaching joins their session.
    if !req.caller.user.is_empty() {
        poddebug_types::convert::set_owner(&mut ec, &req.caller.user);
    }
    poddebug_types::convert::set_justification(&mut ec, &req.options.justification);
    // Unique to this create, so that the update (which does not carry the pod's
    // resourceVersion, see put_body) can never pass for another create's container of the name.
    let create_id = format!("{:032x}", rng.random::<u128>());
    poddebug_types::convert::set_create_id(&mut ec, &create_id);
    // The command runs as given, never rewritten: a container that is its own PID 1 says in its
    // status that DELETE cannot stop it (poddebug_types::stoppable).
    let index = ephemeral_containers(pod).len();
    Ok(Plan { names, ec, index })
}

/// `--default-target`: a container that names no target, in a pod that shares no process
/// namespace, targets the pod's first container, so that it does not run as its own PID 1
/// (which nothing can stop from inside).
fn default_target(target: crate::DefaultTarget, pod: &Pod, ec: &mut EphemeralContainer) {
    if target != crate::DefaultTarget::FirstContainer || stop_blocker(pod, ec).is_none() {
        return;
    }
    if let Some(first) = pod.spec.as_ref().and_then(|s| s.containers.first()) {
        ec.target_container_name = Some(first.name.clone());
    }
}

/// A debug container with a time limit must be one the expiry loop can stop: 422 on
/// `targetContainerName` otherwise (a promise the server could not keep).
pub(crate) fn check_stoppable_with_deadline(
    pod: &Pod,
    plan: &Plan,
    has_deadline: bool,
) -> Result<(), ApiError> {
    if !has_deadline || stop_blocker(pod, &plan.ec).is_none() {
        return Ok(());
    }
    let mut errs = ErrorList::new();
    errs.push(poddebug_types::FieldError::required(
        "targetContainerName",
        "a debug container with a time limit (ttlSeconds, or the server's --default-debug-ttl \
         or --max-debug-ttl) must be stoppable, and without a target container it would run as \
         PID 1 of its own PID namespace, which no signal from inside can end; name a container \
         of the pod to target, or ask for no time limit (ttlSeconds: 0) where the server allows it",
    ));
    Err(ApiError::invalid(
        poddebug_types::GROUP,
        poddebug_types::api::KIND_POD_DEBUG_CONTAINER,
        &plan.names.debug_name,
        errs,
    ))
}

/// The local validator's answer for the planned container, with the rules of `version`.
pub(crate) fn validate_locally(pod: &Pod, plan: &Plan, version: KubeVersion) -> ErrorList {
    validate_ephemeral_container_add_on(pod, &plan.ec, version)
}

/// The server policy (403), in the order image, then per-pod limit.
pub(crate) fn check_policy(
    policy: &Policy,
    pod: &Pod,
    req: &CreateRequest,
    plan: &Plan,
) -> Result<(), ApiError> {
    policy::check_image(
        policy,
        &req.pod,
        plan.ec.image.as_deref().unwrap_or_default(),
    )?;
    policy::check_count(policy, &req.pod, ephemeral_containers(pod).len())
}

/// The body of the PUT: the pod exactly as read, as JSON, plus the new container.
///
/// The pod is kept as its JSON text ([`PodJson`]) rather than re-serialized from k8s-openapi
/// types, so that fields a newer cluster knows and these types do not (on existing ephemeral
/// containers above all) are sent back unchanged: dropping one would make kube-apiserver answer
/// "existing ephemeral containers may not be changed". The new container carries the request's
/// own unknown fields (`pass_through`) for the same reason. Only spec.ephemeralContainers counts
/// on this subresource; managedFields are left out so the server keeps its own, and the status
/// to keep it small.
///
/// The resourceVersion is left out too: the update is not conditional on it, so a write that
/// changed only the pod's status since the read (the kubelet's, every few seconds on a busy pod)
/// does not turn it back with 409 Conflict. The list it sends is still checked against the
/// pod's current one, by kube-apiserver itself: existing ephemeral containers may not be
/// removed or changed, so a list read before another container was added is refused (422 on
/// `spec.ephemeralContainers`, taken as a conflict: see [`update`]), and the new container
/// carries a per-create identifier (`PODDEBUG_CREATE_ID`), so it can never equal a container
/// of the same name another create added since. The uid stays, a precondition: a pod deleted
/// and made again under the same name answers 409 Conflict.
pub(crate) fn put_body(
    raw_pod: &PodJson,
    ec: &EphemeralContainer,
    pass_through: &PassThroughFields,
) -> Result<Box<RawValue>, ApiError> {
    let mut ec_json = serde_json::to_value(ec)
        .map_err(|_| ApiError::Internal("encoding the debug container failed".to_owned()))?;
    pass_through.apply_to(&mut ec_json);
    raw_pod.put_body(&ec_json).map_err(|_| {
        ApiError::Internal("the pod read from the cluster is not a pod object".to_owned())
    })
}

/// kube-apiserver accepts an ephemeral container in a pod that has finished or is being deleted,
/// but no kubelet will ever start it (and `?wait=true` or an attach would only time out), so the
/// create is refused up front with a 409 that says why; the pod is left untouched.
fn check_pod_can_run_it(pod: &Pod, name: &str) -> Result<(), ApiError> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(ApiError::conflict(
            "pods",
            "",
            name,
            "the pod is being deleted, so a debug container would never start",
        ));
    }
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    if matches!(phase, "Succeeded" | "Failed") {
        return Err(ApiError::conflict(
            "pods",
            "",
            name,
            format!(
                "the pod has completed (phase {phase}), so a debug container would never start"
            ),
        ));
    }
    Ok(())
}

/// A random pause before retry `attempt` (1-based) after a conflict: up to 5 ms, doubling per
/// attempt, capped at 160 ms.
fn conflict_backoff(attempt: u32, rng: &mut impl Rng) -> std::time::Duration {
    let cap_ms = 5u64 << attempt.saturating_sub(1).min(5);
    std::time::Duration::from_millis(rng.random_range(0..=cap_ms))
}

/// Whether kube-apiserver refused an update for a stale resourceVersion.
fn is_conflict(s: &Status) -> bool {
    s.code == 409 && s.reason == "Conflict"
}

/// What kube-apiserver answered to the update (or to its dry run).
enum Answer {
    /// Accepted: the pod as updated (or as it would be).
    Done(Box<Pod>),
    /// 409 Conflict: the pod changed since it was read.
    Conflict(StorageError),
    /// 422 about the new container, retold on the `PodDebugContainer`'s fields.
    Invalid(StorageError),
    /// Validation passed, admission refused: a 403 (Pod Security, a webhook's denial, RBAC
    /// as the caller with `--impersonate`).
    AdmissionRefused(StorageError),
    /// Anything else (404, 429, a webhook's own code, 5xx, unreachable): answered as is.
    Failed(StorageError),
}

/// Send the update of `pods/POD/ephemeralcontainers`, for real or as a dry run, and sort the
/// answer: the pod as updated, decoded with only the new container and its status and without
/// `managedFields` ([`PodJson::typed_with_only`]), all that the create reads of it.
async fn update(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    body: &RawValue,
    dry_run: bool,
    plan: &Plan,
) -> Answer {
    use kube::Resource;
    let params = PostParams {
        dry_run,
        ..PostParams::default()
    };
    let sent = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
        .replace_subresource(
            "ephemeralcontainers",
            pod,
            &params,
            body.get().as_bytes().to_vec(),
        )
        .map_err(kube::Error::BuildRequest);
    let answer = match sent {
        Ok(req) => client.request_text(req).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(text) => {
            let ec_name = &plan.names.ec_name;
            match PodJson::parse(text).and_then(|p| p.typed_with_only(ec_name)) {
                Ok(p) => Answer::Done(Box::new(p)),
                Err(e) => Answer::Failed(kube::Error::SerdeError(e).into()),
            }
        }
        Err(kube::Error::Api(s)) if is_conflict(&s) => Answer::Conflict(kube::Error::Api(s).into()),
        Err(kube::Error::Api(s)) if s.code == 422 && changed_since_read(&s) => {
            Answer::Conflict(
                ApiError::conflict(
                    "pods",
                    "",
                    pod,
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
                .into(),
            )
        }
        Err(kube::Error::Api(s)) if s.code == 422 => {
            match debug_container_invalid(&status_from_kube(&s), plan.index, &plan.names.debug_name)
            {
                Some(e) => Answer::Invalid(e.into()),
                None => Answer::Invalid(kube::Error::Api(s).into()),
            }
        }
        Err(kube::Error::Api(s)) if s.code == 403 => {
            Answer::AdmissionRefused(kube::Error::Api(s).into())
        }
        Err(e) => Answer::Failed(e.into()),
    }
}

/// Whether a 422 of the update says that the pod's list of ephemeral containers changed since
/// it was read: kube-apiserver's "existing ephemeral containers "X" may not be removed" (or
/// "may not be changed"), whose field is the list itself. The new container's own errors are
/// on `spec.ephemeralContainers[N]...`, never on the list.
fn changed_since_read(s: &Status) -> bool {
    s.details.as_ref().is_some_and(|d| {
        d.causes
            .iter()
            .any(|c| c.field == "spec.ephemeralContainers")
    })
}

/// After a conflict: pause and go round again, or give up with the conflict once the retries
/// are spent.
async fn retry_after_conflict(
    b: &Cluster,
    conflicts: &mut u32,
    err: StorageError,
    req: &CreateRequest,
) -> Result<(), StorageError> {
    if *conflicts >= b.config().conflict_retries {
        return Err(err);
    }
    *conflicts += 1;
    tracing::debug!(pod = %req.pod, conflicts = *conflicts, "conflict; retrying");
    // Someone else changed the pod (another create, the kubelet's status): back off a random
    // while so that racing creates do not keep colliding in lock step.
    let pause = conflict_backoff(*conflicts, &mut rand::rng());
    req.options
        .phases
        .time(Phase::ConflictPause, tokio::time::sleep(pause))
        .await;
    Ok(())
}

/// Why a step of the create refuses it.
enum Refusal {
    /// Because of the pod's state, as read: confirmed by a quorum read before it is answered.
    OnPodState(ApiError),
    /// Whatever the pod's state.
    Final(ApiError),
}

/// What is sent: the plan, the body of the update, and the rules of the cluster's version.
struct Planned {
    plan: Plan,
    body: Box<RawValue>,
    version: KubeVersion,
}

/// Plan the create on the pod read and build the update's body.
fn plan_on(
    b: &Cluster,
    req: &CreateRequest,
    raw: &PodJson,
    pod: &Pod,
    expires_at: Option<jiff::Timestamp>,
) -> Result<Planned, Refusal> {
    let mut plan =
        plan(&b.config().policy, pod, req, &mut rand::rng()).map_err(Refusal::OnPodState)?;
    check_stoppable_with_deadline(pod, &plan, expires_at.is_some()).map_err(Refusal::OnPodState)?;
    if let Some(at) = expires_at {
        set_expires_at(&mut plan.ec, at);
    }
    let body = put_body(raw, &plan.ec, &req.options.pass_through).map_err(Refusal::Final)?;
    let version = b.cluster_version().rules();
    Ok(Planned {
        plan,
        body,
        version,
    })
}

/// Count where the cluster's `answer` and the local validator's findings `local` disagree,
/// and log it at debug level: the cluster accepts (or only its admission refuses) what the
/// local rules refuse, or refuses as invalid what they accept.
fn judge(
    b: &Cluster,
    answer: &Answer,
    req: &CreateRequest,
    plan: &Plan,
    version: KubeVersion,
    local: &ErrorList,
) {
    let (kind, what) = match answer {
        Answer::Done(_) if !local.is_empty() => (
            Disagreement::ClusterAccepted,
            "the cluster accepts a debug container the local validator refuses",
        ),
        Answer::Invalid(_) if local.is_empty() => (
            Disagreement::ClusterRejected,
            "the cluster refuses a debug container the local validator accepts",
        ),
        Answer::AdmissionRefused(_) if !local.is_empty() => (
            Disagreement::ClusterAdmissionRefused,
            "the cluster's validation accepts what the local validator refuses; its admission refuses",
        ),
        _ => return,
    };
    b.validation_disagreements().count(kind);
    tracing::debug!(
        namespace = %req.namespace, pod = %req.pod, debug = %plan.names.debug_name,
        version = %version, local = ?local.aggregate(), "{what}"
    );
}

/// Start the caller's check (the handler's profile permissions) at once, beside the reads, in a
/// task of its own that ends with the create; its answer is taken in its place
/// ([`admission_answer`]).
fn start_admission(req: &CreateRequest) -> Option<AbortOnDropHandle<Result<(), ApiError>>> {
    let check = req.options.admission.as_ref()?;
    let (fut, phases) = ((check.0)(), req.options.phases.clone());
    let task = tokio::spawn(
        async move { phases.time(Phase::Admission, fut).await }
            .instrument(tracing::Span::current()),
    );
    Some(AbortOnDropHandle::new(task))
}

/// The answer of the caller's check; one that did not finish (it panicked) refuses.
async fn admission_answer(
    task: AbortOnDropHandle<Result<(), ApiError>>,
) -> Result<(), StorageError> {
    match task.await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(ApiError::Internal(
            "the permission check of the create did not complete".to_owned(),
        )
        .into()),
    }
}

/// The profiles `pod` lends the container as planned beyond those the caller's check judged
/// already ([`crate::ReachCheck`]), and the caller's answer about them; `Ok` when it lends
/// nothing more (no review is asked).
async fn reach_answer(req: &CreateRequest, pod: &Pod, plan: &Plan) -> Result<(), StorageError> {
    let Some((check, judged)) = &req.options.reach else {
        return Ok(());
    };
    let more: Vec<_> = poddebug_types::reach::effective_profiles(pod, &plan.ec, Some(req.profile))
        .into_iter()
        .filter(|e| !judged.iter().any(|j| j.profile == e.profile))
        .collect();
    if more.is_empty() {
        return Ok(());
    }
    let answer = req.options.phases.time(Phase::Admission, (check.0)(more));
    Ok(answer.await?)
}

/// Create a debug container (the whole flow described in the module docs).
pub(crate) async fn create(
    b: &Cluster,
    req: CreateRequest,
) -> Result<PodDebugContainer, StorageError> {
    let client = b.client_for(&req.caller)?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &req.namespace);
    let policy = &b.config().policy;
    let phases = &req.options.phases;
    // The deadline counts from the create, however many conflicts it takes (422 on
    // `ttlSeconds` before anything else is looked at).
    let expires_at = crate::ttl::deadline(
        &b.config().ttl,
        req.body.ttl_seconds,
        req.name.as_deref().unwrap_or_default(),
        jiff::Timestamp::now(),
    )?;
    let expires_at = crate::ttl::earliest(expires_at, req.options.deadline);
    // The caller's check runs beside the reads; its answer is taken after the server policy.
    let mut admission = start_admission(&req);
    // The first read is served from kube-apiserver's watch cache (`resourceVersion=0`: no etcd
    // round trip), begun beside authorization when the handler could ([`crate::Prefetch`]).
    // It may be behind: a list of ephemeral containers that misses one added since is refused
    // by kube-apiserver (see put_body) and ends in a conflict, a pod made again under its name
    // fails the uid precondition, and every answer that depends on the pod's state (404, name
    // taken, not running, limits) is confirmed by a quorum read before it is given.
    let mut prefetched = match &req.options.prefetch {
        Some(p) => {
            let target = PrefetchTarget::Pod {
                namespace: req.namespace.clone(),
                name: req.pod.clone(),
                cached: true,
            };
            p.take(&target, &req.caller).await
        }
        None => None,
    };
    let mut conflicts = 0;
    let mut quorum_read = false;
    // The caller's check refused (its answer is taken once, and given after any 422).
    let mut admission_refused: Option<StorageError> = None;
    // Go round the 'attempt loop again, reading the pod from etcd. (Both macros are used only
    // directly in that loop, never in a loop inside it.)
    macro_rules! again_with_quorum_read {
        () => {{
            quorum_read = true;
            continue;
        }};
    }
    macro_rules! confirm_with_quorum_read {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(_) if !quorum_read => again_with_quorum_read!(),
                Err(e) => return Err(e.into()),
            }
        };
    }
    let (updated, plan) = 'attempt: loop {
        let read = if quorum_read {
            GetParams::default()
        } else {
            GetParams::any()
        };
        let got = match prefetched.take() {
            Some(answer) if !quorum_read => answer,
            _ => {
                let read = read_pod(&client, &req.namespace, &req.pod, &read);
                phases.time(Phase::PodRead, read).await
            }
        };
        // Only a 404 from the cache is confirmed (the pod may be newer than the cache); any other
        // failure of the read is the cluster's answer.
        let raw = match got {
            Err(kube::Error::Api(s)) if s.code == 404 && !quorum_read => {
                again_with_quorum_read!()
            }
            got => got?,
        };
        let planned = phases.time_sync(Phase::Plan, || {
            let (raw, pod) = PodJson::parse(raw)
                .and_then(|raw| raw.typed().map(|pod| (raw, pod)))
                .map_err(|_| {
                    Refusal::Final(ApiError::Internal(
                        "the pod read from the cluster cannot be decoded".to_owned(),
                    ))
                })?;
            plan_on(b, &req, &raw, &pod, expires_at).map(|v| (pod, v))
        });
        let (
            pod,
            Planned {
                plan,
                body,
                version,
            },
        ) = match planned {
            Ok(v) => v,
            Err(Refusal::OnPodState(_)) if !quorum_read => again_with_quorum_read!(),
            Err(Refusal::OnPodState(e) | Refusal::Final(e)) => return Err(e.into()),
        };
        let policy_answer =
            phases.time_sync(Phase::Policy, || check_policy(policy, &pod, &req, &plan));
        if policy_answer.is_ok()
            && let Some(task) = admission.take()
            && let Err(e) = admission_answer(task).await
        {
            admission_refused = Some(e);
        }
        // What the pod lends the container (its target, the volumes it mounts, the host's
        // namespaces) is judged on the pod as read, each attempt.
        if policy_answer.is_ok()
            && admission_refused.is_none()
            && let Err(e) = reach_answer(&req, &pod, &plan).await
        {
            admission_refused = Some(e);
        }

        // The usual case, every check passed: the update is sent and the local validator runs
        // beside it. Its answer cannot change the outcome (when it refuses, the cluster
        // decides), only what is counted as a disagreement.
        if policy_answer.is_ok() && admission_refused.is_none() && !req.options.dry_run {
            let update = phases.time(
                Phase::Update,
                update(&client, &req.namespace, &req.pod, &body, false, &plan),
            );
            let local = async {
                phases.time_sync(Phase::Validation, || validate_locally(&pod, &plan, version))
            };
            let (answer, local) = tokio::join!(update, local);
            judge(b, &answer, &req, &plan, version, &local);
            match answer {
                Answer::Done(p) => break (*p, plan),
                Answer::Conflict(_) if !quorum_read => again_with_quorum_read!(),
                Answer::Conflict(e) => {
                    retry_after_conflict(b, &mut conflicts, e, &req).await?;
                    continue 'attempt;
                }
                Answer::Invalid(e) | Answer::AdmissionRefused(e) | Answer::Failed(e) => {
                    return Err(e);
                }
            }
        }

        // Otherwise (a refusal to give, or a dry run) in order: 422, then 403, then the update.
        let local = phases.time_sync(Phase::Validation, || validate_locally(&pod, &plan, version));
        // 422: when the local rules refuse, the cluster decides.
        let mut would_be = None;
        let mut cluster_admission_refusal = None;
        if !local.is_empty() {
            let dry_run = update(&client, &req.namespace, &req.pod, &body, true, &plan);
            let answer = phases.time(Phase::DryRun, dry_run).await;
            judge(b, &answer, &req, &plan, version, &local);
            match answer {
                Answer::Done(p) => would_be = Some(p),
                Answer::Conflict(_) if !quorum_read => again_with_quorum_read!(),
                Answer::Conflict(e) => {
                    retry_after_conflict(b, &mut conflicts, e, &req).await?;
                    continue 'attempt;
                }
                Answer::AdmissionRefused(e) => cluster_admission_refusal = Some(e),
                Answer::Invalid(e) | Answer::Failed(e) => return Err(e),
            }
        }

        // 403: the server policy, then the caller's own check, once.
        confirm_with_quorum_read!(policy_answer);
        if let Some(task) = admission.take() {
            admission_answer(task).await?;
        }
        if let Some(e) = admission_refused.take() {
            return Err(e);
        }
        if let Some(e) = cluster_admission_refusal {
            return Err(e);
        }

        let dry_run = req.options.dry_run;
        let answer = match would_be {
            Some(p) if dry_run => Answer::Done(p),
            _ => {
                let update = update(&client, &req.namespace, &req.pod, &body, dry_run, &plan);
                phases.time(Phase::Update, update).await
            }
        };
        if local.is_empty() {
            // (When the local rules refused, the dry run's answer was judged already.)
            judge(b, &answer, &req, &plan, version, &local);
        }
        match answer {
            Answer::Done(p) if dry_run => {
                tracing::debug!(pod = %req.pod, debug = %plan.names.debug_name, "dry run: the debug container would be created");
                return Ok(read::object_by_ec_name(&p, &plan.names.ec_name, None)?);
            }
            Answer::Done(p) => break (*p, plan),
            Answer::Conflict(_) if !quorum_read => again_with_quorum_read!(),
            Answer::Conflict(e) => {
                retry_after_conflict(b, &mut conflicts, e, &req).await?;
            }
            Answer::Invalid(e) | Answer::AdmissionRefused(e) | Answer::Failed(e) => {
                return Err(e);
            }
        }
    };
    let ResolvedName {
        debug_name,
        ec_name,
    } = &plan.names;
    tracing::info!(
        namespace = %req.namespace, pod = %req.pod, debug = %debug_name, container = %ec_name,
        user = %req.caller.user, "debug container created"
    );
    let message = created_message(
        &req.caller,
        debug_name,
        ec_name,
        plan.ec.image.as_deref().unwrap_or_default(),
        req.profile.as_str(),
        &req.options.justification,
    );
    // The Event is written beside the answer, not before it: creates do not wait for the
    // events API.
    b.record_event_detached(&updated, ec_name, REASON_CREATED, message, phases)
        .await;

    let Some(timeout) = req.wait else {
        return Ok(read::object_by_ec_name(&updated, ec_name, None)?);
    };
    let started = |p: &Pod| {
        matches!(
            ec_state(p, ec_name),
            EcState::Running | EcState::Terminated { .. }
        )
    };
    let waited = wait_for(&api, updated, timeout, started);
    match phases.time(Phase::Wait, waited).await? {
        Waited::Done(pod) => Ok(read::object_by_ec_name(&pod, ec_name, None)?),
        Waited::TimedOut(pod) => Err(ApiError::Timeout(format!(
            "debug container {debug_name:?} in pod {:?} was not running after {}s ({})",
            req.pod,
            timeout.as_secs(),
            ec_state(&pod, ec_name).describe()
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Caller;
    use crate::state::testutil::pod;
    use poddebug_types::Profile;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn policy(allowed: &[&str], max: usize) -> Policy {
        Policy {
            allowed_images: allowed.iter().map(|s| (*s).to_owned()).collect(),
            default_image: "busybox:1.36".to_owned(),
            default_profile: Profile::General,
            max_debug_containers_per_pod: max,
            default_target: crate::DefaultTarget::None,
        }
    }

    fn request(name: Option<&str>, image: Option<&str>) -> CreateRequest {
        let mut body = PodDebugContainer::default();
        body.container.image = image.map(str::to_owned);
        CreateRequest {
            namespace: "ns".into(),
            pod: "web".into(),
            name: name.map(str::to_owned),
            body,
            profile: Profile::General,
            caller: Caller {
                user: "alice".into(),
                ..Default::default()
            },
            wait: None,
            options: Default::default(),
        }
    }

    fn rng() -> StdRng {
        StdRng::seed_from_u64(1)
    }

    #[test]
    fn conflict_backoff_grows_and_is_capped() {
        let mut r = rng();
        for _ in 0..100 {
            assert!(conflict_backoff(1, &mut r) <= std::time::Duration::from_millis(5));
            assert!(conflict_backoff(3, &mut r) <= std::time::Duration::from_millis(20));
            assert!(conflict_backoff(40, &mut r) <= std::time::Duration::from_millis(160));
        }
    }

    #[test]
    fn plan_appends_with_default_image() {
        let p = pod("web", &[("old", None, "terminated")]);
        let plan =
            plan(&policy(&[], 0), &p, &request(Some("dbg"), None), &mut rng()).expect("plan");
        assert_eq!(plan.names.ec_name, "dbg");
        assert_eq!(plan.ec.image.as_deref(), Some("busybox:1.36"));
        let mut raw = serde_json::to_value(&p).expect("json");
        // A field these types do not know, as a newer cluster may send it.
        raw["spec"]["ephemeralContainers"][0]["futureField"] = serde_json::json!({"x": 1});
        raw["metadata"]["managedFields"] = serde_json::json!([{"manager": "kubectl"}]);
        let raw_uid = raw["metadata"]["uid"].clone();
        assert!(raw_uid.is_string(), "{raw}");
        let raw = PodJson::parse(raw.to_string()).expect("parses");
        let body = put_body(&raw, &plan.ec, &Default::default()).expect("body");
        let body: serde_json::Value = serde_json::from_str(body.get()).expect("JSON");
        let ecs = body["spec"]["ephemeralContainers"]
            .as_array()
            .expect("list");
        assert_eq!(ecs.len(), 2);
        assert_eq!(
            ecs[0]["futureField"],
            serde_json::json!({"x": 1}),
            "unknown fields survive"
        );
        assert_eq!(ecs[1]["name"], "dbg");
        // Not conditional on the resourceVersion; the uid stays, a precondition.
        assert!(body["metadata"].get("resourceVersion").is_none(), "{body}");
        assert_eq!(body["metadata"]["uid"], raw_uid);
        assert!(body.get("status").is_none());
        assert!(body["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn plan_refuses_pods_that_will_never_run_it() {
        let mut p = pod("web", &[]);
        p.status.get_or_insert_default().phase = Some("Succeeded".into());
        let err = plan(&policy(&[], 0), &p, &request(Some("dbg"), None), &mut rng())
            .expect_err("completed");
        assert_eq!(err.code(), 409);
        assert_eq!(
            err.message(),
            "Operation cannot be fulfilled on pods \"web\": the pod has completed (phase Succeeded), so a debug container would never start"
        );
        let mut p = pod("web", &[]);
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ));
        let err = plan(&policy(&[], 0), &p, &request(Some("dbg"), None), &mut rng())
            .expect_err("deleting");
        assert!(err.message().contains("being deleted"), "{}", err.message());
        let mut p = pod("web", &[]);
        p.status.get_or_insert_default().phase = Some("Pending".into());
        assert!(
            plan(&policy(&[], 0), &p, &request(Some("dbg"), None), &mut rng()).is_ok(),
            "a pending pod will run it later"
        );
    }

    #[test]
    fn policy_refuses_image_then_limit() {
        let p = pod("web", &[("a", None, "running")]);
        let req = request(Some("dbg"), Some("alpine"));
        let planned = plan(&policy(&[], 0), &p, &req, &mut rng()).expect("a plan");
        let err = check_policy(&policy(&["registry.example/*"], 1), &p, &req, &planned)
            .expect_err("image refused");
        assert_eq!(err.code(), 403);
        assert!(
            err.message().contains("--allowed-images"),
            "{}",
            err.message()
        );
        let err = check_policy(&policy(&[], 1), &p, &req, &planned).expect_err("limit");
        assert_eq!(err.code(), 403);
        assert!(err.message().contains("--max-debug-containers-per-pod"));
        assert!(check_policy(&policy(&[], 2), &p, &req, &planned).is_ok());
    }

    #[test]
    fn pass_through_fields_reach_the_new_container_only() {
        let p = pod("web", &[("old", None, "terminated")]);
        let decoded = poddebug_types::decode::decode_create_body(
            br#"{"container": {"image": "busybox", "futureField": {"x": 1}}}"#,
        )
        .expect("decodes");
        let mut req = request(Some("dbg"), None);
        req.body = decoded.object;
        let planned = plan(&policy(&[], 0), &p, &req, &mut rng()).expect("a plan");
        let raw = PodJson::parse(serde_json::to_string(&p).expect("json")).expect("parses");
        let body = put_body(&raw, &planned.ec, &decoded.pass_through).expect("body");
        let body: serde_json::Value = serde_json::from_str(body.get()).expect("JSON");
        let ecs = &body["spec"]["ephemeralContainers"];
        assert_eq!(ecs[1]["futureField"], serde_json::json!({"x": 1}));
        assert!(ecs[0].get("futureField").is_none());
    }

    #[test]
    fn plan_refuses_running_name() {
        let p = pod("web", &[("dbg", None, "running")]);
        let err =
            plan(&policy(&[], 0), &p, &request(Some("dbg"), None), &mut rng()).expect_err("exists");
        assert_eq!(err.reason(), "AlreadyExists");
    }

    #[test]
    fn plan_reuses_terminated_name() {
        let p = pod("web", &[("dbg", None, "terminated")]);
        let plan =
            plan(&policy(&[], 0), &p, &request(Some("dbg"), None), &mut rng()).expect("plan");
        assert_ne!(plan.names.ec_name, "dbg");
        assert_eq!(poddebug_types::convert::debug_name_of(&plan.ec), "dbg");
    }

    #[test]
    fn local_validation_is_at_the_appended_index() {
        // A clash with the regular container "app" is kube-apiserver's Duplicate value.
        let p = pod("web", &[("x", None, "running")]);
        let planned =
            plan(&policy(&[], 0), &p, &request(Some("app"), None), &mut rng()).expect("a plan");
        assert_eq!(planned.index, 1);
        let errs = validate_locally(&p, &planned, KubeVersion::NEWEST_KNOWN);
        assert!(
            errs.iter()
                .any(|e| e.field == "spec.ephemeralContainers[1].name"),
            "{errs:?}"
        );
    }
}
