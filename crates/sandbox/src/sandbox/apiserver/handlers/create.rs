//! POST (`endpoints/handlers/create.go`): server-set metadata, defaults, the initial status,
//! NamespaceLifecycle, admission, validation and allocations, in one transaction.

use serde_json::{Value, json};

use super::update::{has_resource_version, is_service};
use super::{decode_object, is_dry_run};
use crate::sandbox::admission::{self, AdmissionContext, Operation};
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::apiserver::{convert, defaults, subresources, validation};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::storage::objects::{self, is_deleting, name_of};
use crate::sandbox::storage::resources::{self, ResourceType};
use crate::sandbox::storage::services;
use crate::sandbox::storage::store::Txn;
use crate::server::http::Request;

/// `CreateResource`: decodes the body and creates the object; 201 with the stored object.
pub fn create(api: &ApiServer, request: &Request, target: &Target, user: &UserInfo) -> ApiResult<(u16, Value)> {
    let resource = target.resource;
    let object = decode_object(target, request)?;
    if has_resource_version(&object) && !is_dry_run(request)? {
        return Err(resource_version_on_create());
    }
    let dry_run = is_dry_run(request)?;
    let stored = api.store.write(|txn| create_in(api, txn, target, object, user, dry_run))?;
    Ok((201, convert::to_external(resource, &stored)))
}

/// Creates an object within a transaction: server-set metadata, defaults, the initial
/// status, NamespaceLifecycle, admission, allocations. Used by POST and by PUT for kinds
/// that allow create-on-update.
pub fn create_in(
    api: &ApiServer,
    txn: &mut Txn<'_>,
    target: &Target,
    mut object: Value,
    user: &UserInfo,
    dry_run: bool,
) -> ApiResult<Value> {
    let resource = target.resource;
    let ns = target.namespace.as_deref();
    objects::prepare_create(resource, &mut object, ns)?;
    subresources::csr_prepare_for_create(resource, &mut object, user);
    defaults::apply(resource, &mut object);
    reset_status_on_create(resource, &mut object);
    let name = name_of(&object).to_string();
    if resource.namespaced {
        check_namespace_accepts(txn, resource, ns.unwrap_or_default(), &name)?;
    }
    let ctx = AdmissionContext {
        resource,
        subresource: None,
        namespace: ns.unwrap_or_default(),
        operation: Operation::Create,
        user,
        old: None,
        dry_run,
        rbac: api.options.rbac,
    };
    admission::admit(&ctx, &mut object, txn)?;
    validation::validate_create(resource, &object)?;
    set_qos_class(resource, &mut object);
    if txn.get(resource.storage_key(), ns.unwrap_or_default(), &name).is_some() {
        return Err(ApiError::already_exists(resource, &name));
    }
    if is_service(resource) {
        services::allocate(resource, &mut object, txn, api.options.service_range)?;
    }
    if !dry_run {
        object["metadata"]["resourceVersion"] = txn.next_revision().to_string().into();
        txn.put(resource.storage_key(), object.clone());
        if is_service(resource) {
            services::record_address(txn, &object);
        }
    }
    Ok(object)
}

/// etcd3's store refuses to create an object that carries a resourceVersion; the error is not
/// a `Status`, so kube-apiserver answers 500 with no reason.
fn resource_version_on_create() -> ApiError {
    let mut e = ApiError::new(500, "", "resourceVersion should not be set on objects to be created", None);
    e.status.as_object_mut().map(|s| s.remove("reason"));
    e
}

/// NamespaceLifecycle: no new objects in a namespace that is missing or being deleted.
fn check_namespace_accepts(txn: &Txn<'_>, resource: &ResourceType, ns: &str, name: &str) -> ApiResult<()> {
    let Some(namespace) = txn.get("namespaces", "", ns) else {
        let namespaces = resources::find("", "v1", "namespaces").expect("namespaces are served");
        return Err(ApiError::not_found(namespaces, ns));
    };
    if is_deleting(&namespace) || namespace["status"]["phase"] == "Terminating" {
        let mut error = ApiError::forbidden(
            resource,
            name,
            &format!("unable to create new content in namespace {ns} because it is being terminated"),
        );
        // The cause clients test with `HasStatusCause(err, NamespaceTerminatingCause)`.
        let cause = json!({"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"),
            "field": "metadata.namespace"});
        error.status["details"]["causes"] = json!([cause]);
        return Err(error);
    }
    Ok(())
}

/// What kube-apiserver's create strategies do to `status`: most kinds start with an empty
/// status; nodes keep theirs; a few get an initial phase.
fn reset_status_on_create(resource: &ResourceType, object: &mut Value) {
    if !resource.has_status() || (resource.group.is_empty() && resource.plural == "nodes") {
        return;
    }
    let initial = match (resource.group, resource.plural) {
        ("", "namespaces") => json!({"phase": "Active"}),
        // qosClass is set after admission (LimitRanger may add resources).
        ("", "pods") => json!({"phase": "Pending"}),
        ("", "persistentvolumeclaims") => json!({"phase": "Pending"}),
        // `persistentvolumeStrategy.PrepareForCreate`.
        ("", "persistentvolumes") => json!({"phase": "Pending", "lastPhaseTransitionTime": objects::now()}),
        _ => {
            object.as_object_mut().map(|m| m.remove("status"));
            status_zero_values(resource, object);
            return;
        }
    };
    object["status"] = initial;
}

/// The status fields Go's JSON encoding always writes for a kind: its status is a struct, not a
/// pointer, so an empty one reads back as `status: {}`, and fields without `omitempty` as
/// zeros (`replicas: 0`). Filled in wherever missing, on every write.
pub(super) fn status_zero_values(resource: &ResourceType, object: &mut Value) {
    let zeros = match (resource.group, resource.plural) {
        ("apps", "deployments") | ("batch", "jobs" | "cronjobs") | ("", "resourcequotas") => json!({}),
        ("certificates.k8s.io", "certificatesigningrequests") | ("networking.k8s.io", "servicecidrs") => json!({}),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => json!({}),
        ("resource.k8s.io", "resourceclaims") => json!({}),
        ("apps", "replicasets") | ("", "replicationcontrollers") => json!({"replicas": 0}),
        ("apps", "statefulsets") => json!({"replicas": 0, "availableReplicas": 0}),
        ("apps", "daemonsets") => {
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0})
        }
        ("autoscaling", "horizontalpodautoscalers") => json!({"desiredReplicas": 0}),
        ("policy", "poddisruptionbudgets") => {
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
        }
        ("", "services") | ("networking.k8s.io", "ingresses") => json!({"loadBalancer": {}}),
        ("storage.k8s.io", "volumeattachments") => json!({"attached": false}),
        _ => return,
    };
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    for (field, zero) in zeros.as_object().expect("an object") {
        if object["status"][field].is_null() {
            object["status"][field] = zero.clone();
        }
    }
    if (resource.group, resource.plural) == ("batch", "jobs") {
        job_status_omit_empty(&mut object["status"]);
    }
}

/// A Job status as Go encodes it: the `omitempty` counters (not pointers, unlike `ready` and
/// `terminating`) and `completedIndexes` are left out when zero, as are the empty lists of
/// `uncountedTerminatedPods` (which itself, a pointer, stays `{}`).
fn job_status_omit_empty(status: &mut Value) {
    let Some(map) = status.as_object_mut() else { return };
    map.retain(|field, value| match field.as_str() {
        "active" | "succeeded" | "failed" => value.as_i64() != Some(0),
        "completedIndexes" => value.as_str() != Some(""),
        "conditions" => !value.as_array().is_some_and(Vec::is_empty),
        _ => true,
    });
    if let Some(uncounted) = map.get_mut("uncountedTerminatedPods").and_then(Value::as_object_mut) {
        uncounted.retain(|_, list| !list.as_array().is_some_and(Vec::is_empty));
    }
}

/// A new pod's `status.qosClass`, from its resources as admission left them.
fn set_qos_class(resource: &ResourceType, object: &mut Value) {
    if resource.group.is_empty() && resource.plural == "pods" {
        object["status"]["qosClass"] = defaults::pod_qos_class(object).into();
    }
}
