//! `POST pods/{name}/eviction` (a `policy/v1` Eviction), answering as kube-apiserver v1.36 does
//! (observed live): 201 with a `Success` Status when the pod is evicted; 429 `TooManyRequests`
//! with a `DisruptionBudget` cause while a PodDisruptionBudget that selects the pod allows no
//! disruption; 500 when more than one selects it; 404 for a missing pod; 409 when the
//! `deleteOptions.preconditions.uid` is another pod's; 400 when the body names another pod; 405
//! for any other method. A pod that is being deleted already is evicted (201) whatever the
//! budgets say, as kube-apiserver does. An evicted pod is deleted at once (the fake's pods have
//! no graceful termination), and a `?dryRun=All` eviction changes nothing.
//!
//! PodDisruptionBudgets are kept as their `status` alone says (`disruptionsAllowed`,
//! `desiredHealthy`, `currentHealthy`): there is no disruption controller here, the tests set
//! them ([`super::FakeKube::set_pdb`]).

use http::{Method, Request};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::http::{Resp, json_response};
use super::router::{Ctx, parse_json, read_body};
use super::state::{Kind, State};
use super::status::{self, KubeStatus};

/// A PodDisruptionBudget as the fake keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdb {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.selector.matchLabels`.
    pub match_labels: Vec<(String, String)>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: u32,
    /// `status.desiredHealthy`.
    pub desired_healthy: u32,
    /// `status.currentHealthy`.
    pub current_healthy: u32,
}

impl Pdb {
    fn selects(&self, pod: &Value) -> bool {
        pod["metadata"]["namespace"].as_str() == Some(self.namespace.as_str())
            && self
                .match_labels
                .iter()
                .all(|(k, v)| pod["metadata"]["labels"][k].as_str() == Some(v.as_str()))
    }
}

/// The handler.
pub async fn handle(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    req: Request<Incoming>,
) -> Result<Resp, KubeStatus> {
    if ctx.method != Method::POST {
        return Err(status::method_not_allowed());
    }
    let body = parse_json(&read_body(req).await?)?;
    let named = body["metadata"]["name"].as_str().unwrap_or("");
    if named != name {
        return Err(status::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let dry_run = super::pod_create::dry_run(&ctx.query.all("dryRun"), "CreateOptions")?;
    let opts = body["deleteOptions"].clone();
    ctx.shared.mutate(|s| evict(s, ns, name, &opts, dry_run))?;
    Ok(json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

fn evict(
    s: &mut State,
    ns: &str,
    name: &str,
    opts: &Value,
    dry_run: bool,
) -> Result<(), KubeStatus> {
    let Some(pod) = s.get(Kind::Pod, ns, name).cloned() else {
        return Err(status::not_found("", "pods", name));
    };
    let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
    let mut budget = None;
    if !terminating {
        let budgets: Vec<usize> = (0..s.pdbs.len())
            .filter(|i| s.pdbs[*i].selects(&pod))
            .collect();
        if budgets.len() > 1 {
            return Err(status::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        budget = budgets.first().copied();
        if let Some(pdb) = budget.map(|i| &s.pdbs[i])
            && pdb.disruptions_allowed == 0
        {
            return Err(KubeStatus::new(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
            )
            .with_details(json!({"causes": [{
                "reason": "DisruptionBudget",
                "message": format!(
                    "The disruption budget {} needs {} healthy pods and has {} currently",
                    pdb.name, pdb.desired_healthy, pdb.current_healthy
                ),
            }]})));
        }
    }
    // The pod's own DELETE, preconditions (and their 409 wording) included.
    super::pods::delete(s, ns, name, opts, dry_run)?;
    // The budget is spent, as kube-apiserver decrements it.
    if let Some(i) = budget
        && !dry_run
    {
        s.pdbs[i].disruptions_allowed -= 1;
    }
    Ok(())
}
