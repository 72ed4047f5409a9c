//! The Eviction API (`pods/eviction`), as `pkg/registry/core/pod/storage/eviction.go`: a pod
//! is deleted unless the PodDisruptionBudget covering it has no disruption left.

use serde_json::{Value, json};

use crate::apimachinery::field::Error as FieldError;
use crate::apimachinery::labels::Selector;
use crate::sandbox::apiserver::handlers::delete::{DeleteOptions, DeleteOutcome, delete_in};
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::subresources::body;
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::storage::objects::{self, name_of, now};
use crate::sandbox::storage::store::Txn;
use crate::server::http::Request;

/// The Eviction API: deletes a pod unless a PodDisruptionBudget forbids it. The budget is
/// charged before the pod's preconditions are checked, and stays charged when they fail, as
/// upstream writes it first.
pub fn evict(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    name: &str,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let eviction = body(request)?;
    if eviction["metadata"]["name"].as_str() != Some(name) {
        return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
    }
    let delete = &eviction["deleteOptions"];
    if delete["ignoreStoreReadErrorWithClusterBreakingPotential"] == true {
        let error = FieldError::invalid(
            "deleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential",
            "true".into(),
            "can not be set for pod eviction, try after removing the option",
        );
        return Err(ApiError::new_invalid("policy", "Eviction", name, &[error]));
    }
    let options = DeleteOptions {
        grace_period_seconds: delete["gracePeriodSeconds"].as_i64(),
        precondition_uid: delete["preconditions"]["uid"].as_str().map(str::to_string),
        dry_run: dry_run(request, delete)?,
        ..DeleteOptions::default()
    };
    let resource_version = delete["preconditions"]["resourceVersion"].as_str().filter(|v| !v.is_empty());
    let ns = target.namespace.as_deref().unwrap_or_default().to_string();
    let pods = target.resource;
    api.store.write(|txn| {
        let pod = txn.get("pods", &ns, name).ok_or_else(|| ApiError::not_found(pods, name))?;
        if !can_ignore_budget(&pod) {
            charge_disruption_budget(txn, &ns, &pod, options.dry_run)?;
        }
        // The budget's write stands whatever follows (`Ok(Err(..))` commits it).
        if let Err(conflict) = check_preconditions(name, &pod, options.precondition_uid.as_deref(), resource_version) {
            return Ok(Err(conflict));
        }
        // `addConditionAndDeletePod`: a status update first (not on a dry run), then the deletion.
        if !options.dry_run {
            let mut marked = (*pod).clone();
            add_eviction_condition(&mut marked);
            txn.put("pods", marked);
        }
        match delete_in(txn, pods, &ns, name, &options, user)? {
            DeleteOutcome::Removed(_) | DeleteOutcome::Marked(_) => Ok(Ok(())),
        }
    })??;
    Ok((201, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})))
}

/// `propagateDryRun`: the request's `dryRun` and the body's `deleteOptions.dryRun`, which must
/// agree when both are given (a plain error, so a 500 without reason).
fn dry_run(request: &Request, delete: &Value) -> ApiResult<bool> {
    let query: Vec<&str> = request.query.iter().filter(|(k, _)| k == "dryRun").map(|(_, v)| v.as_str()).collect();
    let body: Vec<&str> = delete["dryRun"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if !query.is_empty() && !body.is_empty() && query != body {
        return Err(unreasoned(format!(
            "Non-matching dry-run options in request and content: [{}] and [{}]",
            query.join(" "),
            body.join(" ")
        )));
    }
    Ok(query.contains(&"All") || body.contains(&"All"))
}

/// What kube-apiserver answers for an error that is no API status: 500, no reason.
fn unreasoned(message: impl Into<String>) -> ApiError {
    let mut error = ApiError::internal(message);
    if let Some(status) = error.status.as_object_mut() {
        status.remove("reason");
    }
    error
}

/// The UID and resourceVersion preconditions, checked on the pod before its condition is
/// added: a 409 on `Pod` (`addConditionAndDeletePod`'s `NewConflict`, with the resource named
/// so).
fn check_preconditions(name: &str, pod: &Value, uid: Option<&str>, resource_version: Option<&str>) -> ApiResult<()> {
    let conflict = |why: String| {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on Pod \"{name}\": {why}"),
            Some(json!({"name": name, "kind": "Pod"})),
        )
    };
    let actual = pod["metadata"]["uid"].as_str().unwrap_or_default();
    if let Some(wanted) = uid.filter(|u| !u.is_empty() && *u != actual) {
        return Err(conflict(format!(
            "the UID in the precondition ({wanted}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
        )));
    }
    let actual = pod["metadata"]["resourceVersion"].as_str().unwrap_or_default();
    if let Some(wanted) = resource_version.filter(|v| *v != actual) {
        return Err(conflict(format!(
            "the ResourceVersion in the precondition ({wanted}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
        )));
    }
    Ok(())
}

/// `podutil.UpdatePodCondition` with the Eviction API's `DisruptionTarget` condition.
fn add_eviction_condition(pod: &mut Value) {
    let now = now();
    let mut condition = json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": now, "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"});
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    let conditions = pod["status"]["conditions"].as_array_mut().expect("an array");
    match conditions.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
        Some(old) => {
            if old["status"] == "True" {
                condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = condition;
        }
        None => conditions.push(condition),
    }
}

/// `canIgnorePDB`: pods that are done, not running yet, or already going need no budget.
fn can_ignore_budget(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed" | "Pending")) || objects::is_deleting(pod)
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Finds the budget covering the pod and takes one allowed disruption from it, or refuses.
/// An unready pod is let go without charge when the budget allows unhealthy evictions or is
/// healthy enough without it.
fn charge_disruption_budget(txn: &mut Txn<'_>, ns: &str, pod: &Value, dry_run: bool) -> ApiResult<()> {
    let budgets: Vec<_> = txn
        .list("poddisruptionbudgets", Some(ns))
        .into_iter()
        .filter(|pdb| {
            Selector::from_label_selector_object(&pdb["spec"]["selector"]).is_ok_and(|s| s.matches_object(pod))
        })
        .collect();
    let budget = match budgets.as_slice() {
        [] => return Ok(()),
        [one] => one,
        // A `Status` the registry returns rather than an error: no reason.
        _ => {
            return Err(unreasoned(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let status = &budget["status"];
    if !is_ready(pod) {
        let always_allow = budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
        let desired = status["desiredHealthy"].as_i64().unwrap_or(0);
        if always_allow || (status["currentHealthy"].as_i64().unwrap_or(0) >= desired && desired > 0) {
            return Ok(());
        }
    }
    check_and_decrement(txn, budget, pod, dry_run)
}

/// The eviction registry's `checkAndDecrement`.
fn check_and_decrement(txn: &mut Txn<'_>, budget: &Value, pod: &Value, dry_run: bool) -> ApiResult<()> {
    const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
    /// `MaxDisruptedPodSize`.
    const MAX_DISRUPTED_PODS: usize = 2000;
    let name = name_of(budget);
    let status = &budget["status"];
    let refuse = |retry_after: Option<u64>, cause: String| {
        let mut e = ApiError::too_many_requests(REFUSED, retry_after);
        e.status["details"]["causes"] = json!([{"reason": "DisruptionBudget", "message": cause}]);
        e
    };
    if status["observedGeneration"].as_i64().unwrap_or(0) < budget["metadata"]["generation"].as_i64().unwrap_or(0) {
        return Err(refuse(Some(10), format!("The disruption budget {name} is still being processed by the server.")));
    }
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    let budget_forbidden = |why: &str| {
        ApiError::new(
            403,
            "Forbidden",
            format!("poddisruptionbudget.policy \"{name}\" is forbidden: {why}"),
            Some(json!({"name": name, "group": "policy", "kind": "poddisruptionbudget"})),
        )
    };
    if allowed < 0 {
        return Err(budget_forbidden("pdb disruptions allowed is negative"));
    }
    if status["disruptedPods"].as_object().is_some_and(|p| p.len() > MAX_DISRUPTED_PODS) {
        return Err(budget_forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller"));
    }
    if allowed == 0 {
        return Err(refuse(
            None,
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status["desiredHealthy"].as_i64().unwrap_or(0),
                status["currentHealthy"].as_i64().unwrap_or(0)
            ),
        ));
    }
    let mut budget = budget.clone();
    budget["status"]["disruptionsAllowed"] = (allowed - 1).into();
    if allowed == 1 {
        insufficient_pods_condition(&mut budget);
    }
    if dry_run {
        return Ok(());
    }
    budget["status"]["disruptedPods"][name_of(pod)] = now().into();
    txn.put("poddisruptionbudgets", budget);
    Ok(())
}

/// `UpdateDisruptionAllowedCondition` once no disruption is left: `DisruptionAllowed` False
/// with reason `InsufficientPods` (`meta.SetStatusCondition` semantics).
fn insufficient_pods_condition(budget: &mut Value) {
    let observed = budget["status"]["observedGeneration"].clone();
    let mut conditions = budget["status"]["conditions"].as_array().cloned().unwrap_or_default();
    match conditions.iter_mut().find(|c| c["type"] == "DisruptionAllowed") {
        Some(condition) => {
            if condition["status"] != "False" {
                condition["status"] = "False".into();
                condition["lastTransitionTime"] = now().into();
            }
            condition["reason"] = "InsufficientPods".into();
            condition["message"] = "".into();
            condition["observedGeneration"] = observed;
        }
        None => conditions.push(json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
            "message": "", "observedGeneration": observed, "lastTransitionTime": now()})),
    }
    budget["status"]["conditions"] = Value::Array(conditions);
}
