//! DELETE of one object and of a collection (`endpoints/handlers/delete.go`): preconditions,
//! graceful deletion, propagation-policy finalizers, and the registry's answer.

use serde_json::{Value, json};

use super::list::ObjectFilter;
use super::{body_json, is_dry_run};
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::apiserver::{convert, validation};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::storage::objects::{self, finalizers, is_deleting, name_of, set_finalizers, should_remove};
use crate::sandbox::storage::resources::ResourceType;
use crate::sandbox::storage::services;
use crate::sandbox::storage::store::Txn;
use crate::server::http::Request;

/// `DeleteResource`: deletes or marks one object and answers as its registry does.
pub fn delete(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    name: &str,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let resource = target.resource;
    let options = DeleteOptions::from_request(request)?;
    let ns = target.namespace.as_deref().unwrap_or_default();
    let outcome = api.store.write(|txn| delete_in(txn, resource, ns, name, &options, user))?;
    Ok(deleted_answer(resource, outcome))
}

/// `DeleteCollection`: deletes every object the selectors match, one by one.
pub fn delete_collection(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let resource = target.resource;
    let filter = ObjectFilter::from_request(request, resource)?;
    let options = DeleteOptions::from_request(request)?;
    let ns = target.namespace.as_deref();
    let (objects, revision) = api.store.list(resource.storage_key(), ns);
    // As the registry's `DeleteCollection`, the answer is the list as it was read before
    // the deletions (objects without deletion marks), at that list's revision.
    let mut items = Vec::new();
    for object in objects.iter().filter(|o| filter.matches(o)) {
        let (ns, name) = (objects::namespace_of(object), name_of(object));
        match api.store.write(|txn| delete_in(txn, resource, ns, name, &options, user)) {
            Ok(_) | Err(ApiError { code: 404, .. }) => items.push(convert::to_list_item(resource, object)),
            Err(e) => return Err(e),
        }
    }
    Ok((
        200,
        json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.group_version(),
            "metadata": {"resourceVersion": revision.to_string()},
            "items": items,
        }),
    ))
}

/// How a delete was asked for.
#[derive(Debug, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`, from the query or the body.
    pub grace_period_seconds: Option<i64>,
    /// `Orphan`, `Background` or `Foreground`; the legacy `orphanDependents` maps to the first two.
    pub propagation_policy: Option<String>,
    /// `preconditions.uid`: the delete fails with a Conflict unless the stored object has it.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`: likewise for the resourceVersion.
    pub precondition_resource_version: Option<String>,
    /// `dryRun=All`: check and answer, store nothing.
    pub dry_run: bool,
}

impl DeleteOptions {
    fn from_request(request: &Request) -> ApiResult<DeleteOptions> {
        let body: Value = if request.body.is_empty() { json!({}) } else { body_json(request)? };
        let query_or_body = |query: &str, field: &str| -> Option<Value> {
            request.query_param(query).map(|v| v.into()).or_else(|| body.get(field).cloned().filter(|v| !v.is_null()))
        };
        let grace = match query_or_body("gracePeriodSeconds", "gracePeriodSeconds") {
            Some(Value::String(s)) => {
                Some(s.parse::<i64>().map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {s:?}")))?)
            }
            Some(v) => v.as_i64(),
            None => None,
        };
        let policy =
            query_or_body("propagationPolicy", "propagationPolicy").and_then(|v| v.as_str().map(str::to_string));
        let orphan = query_or_body("orphanDependents", "orphanDependents")
            .map(|orphan| orphan.as_bool().unwrap_or_else(|| orphan.as_str() == Some("true")));
        validation::delete_options(policy.as_deref(), orphan.is_some())?;
        let policy = policy.or_else(|| orphan.map(|o| if o { "Orphan" } else { "Background" }.to_string()));
        let dry_run = body["dryRun"].as_array().is_some_and(|d| d.iter().any(|v| v == "All")) || is_dry_run(request)?;
        Ok(DeleteOptions {
            grace_period_seconds: grace,
            propagation_policy: policy,
            precondition_uid: body["preconditions"]["uid"].as_str().map(str::to_string),
            precondition_resource_version: body["preconditions"]["resourceVersion"].as_str().map(str::to_string),
            dry_run,
        })
    }
}

/// What a delete did.
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Removed(Value),
    /// The object stays, marked for deletion (finalizers or a grace period hold it).
    Marked(Value),
}

/// The namespaces NamespaceLifecycle admission never lets anyone delete.
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Deletes one object within a transaction, as kube-apiserver's `BeforeDelete` + graceful
/// deletion + garbage-collection finalizers.
pub fn delete_in(
    txn: &mut Txn<'_>,
    resource: &ResourceType,
    ns: &str,
    name: &str,
    options: &DeleteOptions,
    _user: &UserInfo,
) -> ApiResult<DeleteOutcome> {
    let storage = resource.storage_key();
    let old = txn.get(storage, ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
    check_delete_preconditions(resource, name, &old, options)?;
    let is_namespace = resource.group.is_empty() && resource.plural == "namespaces";
    if is_namespace && IMMORTAL_NAMESPACES.contains(&name) {
        // The NamespaceLifecycle admission plugin.
        return Err(ApiError::forbidden(resource, name, "this namespace may not be deleted"));
    }
    if is_namespace && is_deleting(&old) && old["spec"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
        // The namespace registry's `Delete`: while its content is purged, a second delete
        // answers with the namespace as it is.
        return Ok(DeleteOutcome::Marked((*old).clone()));
    }
    let mut object = (*old).clone();
    let grace = grace_period(resource, &object, options.grace_period_seconds);
    apply_propagation_policy(resource, &mut object, options.propagation_policy.as_deref());
    mark_deleting(&mut object, grace, is_namespace);
    if is_namespace {
        object["status"]["phase"] = "Terminating".into();
    }
    if options.dry_run {
        return Ok(DeleteOutcome::Marked(object));
    }
    object["metadata"]["resourceVersion"] = txn.next_revision().to_string().into();
    if should_remove(&object) {
        txn.remove(storage, ns, name);
        if resource.group.is_empty() && resource.plural == "services" {
            services::release_addresses(txn, &object);
        }
        Ok(DeleteOutcome::Removed(object))
    } else {
        txn.put(storage, object.clone());
        Ok(DeleteOutcome::Marked(object))
    }
}

/// `rest.BeforeDelete`'s early precondition checks: 409 Conflict naming the object by its kind
/// (`GroupResource{Group: gvk.Group, Resource: gvk.Kind}`), as upstream does.
fn check_delete_preconditions(
    resource: &ResourceType,
    name: &str,
    old: &Value,
    options: &DeleteOptions,
) -> ApiResult<()> {
    let field = |key: &str| old["metadata"][key].as_str().unwrap_or_default().to_string();
    let why = if let Some(uid) = options.precondition_uid.as_ref().filter(|uid| **uid != field("uid")) {
        format!(
            "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
            field("uid")
        )
    } else if let Some(rv) =
        options.precondition_resource_version.as_ref().filter(|rv| **rv != field("resourceVersion"))
    {
        format!(
            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
            field("resourceVersion")
        )
    } else {
        return Ok(());
    };
    let kind = if resource.group.is_empty() {
        resource.kind.to_string()
    } else {
        format!("{}.{}", resource.kind, resource.group)
    };
    let mut details = json!({"name": name, "kind": resource.kind});
    if !resource.group.is_empty() {
        details["group"] = resource.group.into();
    }
    Err(ApiError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {kind} \"{name}\": {why}"),
        Some(details),
    ))
}

/// Sets the deletion fields as `rest.BeforeDelete` and the store's `markAsDeleting` do. The first
/// delete stamps `deletionTimestamp` (now + grace) and the grace period, and bumps a tracked
/// generation (fencing controllers' in-flight writes); a later one may only shorten the grace
/// period, moving the timestamp with it. The namespace registry sets the timestamp alone.
fn mark_deleting(object: &mut Value, grace: i64, is_namespace: bool) {
    let meta = objects::metadata_mut(object);
    let Some(stamped) = meta.get("deletionTimestamp").and_then(Value::as_str) else {
        let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(grace);
        meta.insert("deletionTimestamp".into(), format_time(at).into());
        if !is_namespace {
            meta.insert("deletionGracePeriodSeconds".into(), grace.into());
        }
        if let Some(generation) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
            meta.insert("generation".into(), (generation + 1).into());
        }
        return;
    };
    let current = meta.get("deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0);
    if grace < current {
        if let Ok(at) = stamped.parse::<jiff::Timestamp>() {
            let moved = at - jiff::SignedDuration::from_secs(current) + jiff::SignedDuration::from_secs(grace);
            meta.insert("deletionTimestamp".into(), format_time(moved).into());
        }
        meta.insert("deletionGracePeriodSeconds".into(), grace.into());
    }
}

fn format_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Pods get a grace period while a kubelet may still run them; everything else is deleted at
/// once (finalizers permitting). A negative grace period counts as 1 second.
fn grace_period(resource: &ResourceType, object: &Value, requested: Option<i64>) -> i64 {
    if !(resource.group.is_empty() && resource.plural == "pods") {
        return 0;
    }
    let unscheduled = object["spec"]["nodeName"].as_str().unwrap_or_default().is_empty();
    let terminal = matches!(object["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    if unscheduled || terminal {
        return 0;
    }
    let grace = requested.unwrap_or_else(|| object["spec"]["terminationGracePeriodSeconds"].as_i64().unwrap_or(30));
    if grace < 0 { 1 } else { grace }
}

/// `orphan` and `foregroundDeletion` finalizers, as kube-apiserver records the policy for the
/// garbage collector.
fn apply_propagation_policy(resource: &ResourceType, object: &mut Value, policy: Option<&str>) {
    let policy = policy.or_else(|| default_propagation(resource));
    let mut list = finalizers(object);
    let already_deleting = is_deleting(object);
    match policy {
        Some("Orphan") if !already_deleting || list.iter().any(|f| f == "foregroundDeletion") => {
            list.retain(|f| f != "foregroundDeletion");
            if !list.iter().any(|f| f == "orphan") {
                list.push("orphan".into());
            }
        }
        Some("Foreground") => {
            list.retain(|f| f != "orphan");
            if !list.iter().any(|f| f == "foregroundDeletion") {
                list.push("foregroundDeletion".into());
            }
        }
        Some("Background") => list.retain(|f| f != "orphan" && f != "foregroundDeletion"),
        _ => {}
    }
    set_finalizers(object, &list);
}

/// Kinds whose registry orphans dependents unless told otherwise: the strategies'
/// `DefaultGarbageCollectionPolicy` returns `OrphanDependents` for batch/v1 Jobs and v1
/// ReplicationControllers (the pre-garbage-collector behaviour); apps/v1 workloads and every
/// other kind default to deleting dependents (in the background: no finalizer).
fn default_propagation(resource: &ResourceType) -> Option<&'static str> {
    let legacy = matches!(
        (resource.group, resource.version, resource.plural),
        ("batch", "v1", "jobs") | ("", "v1", "replicationcontrollers")
    );
    legacy.then_some("Orphan")
}

fn deleted_answer(resource: &ResourceType, outcome: DeleteOutcome) -> (u16, Value) {
    match outcome {
        DeleteOutcome::Marked(object) => (200, convert::to_external(resource, &object)),
        DeleteOutcome::Removed(object) if resource.returns_deleted_object() => {
            (200, convert::to_external(resource, &object))
        }
        DeleteOutcome::Removed(object) => {
            let mut details =
                json!({"name": name_of(&object), "kind": resource.plural, "uid": object["metadata"]["uid"]});
            if !resource.group.is_empty() {
                details["group"] = resource.group.into();
            }
            (
                200,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
            )
        }
    }
}
