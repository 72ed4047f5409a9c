//! PUT (`endpoints/handlers/update.go`) and the update path every write shares (patches, the
//! status and scale subresources): optimistic concurrency, what a request may not change,
//! generation, admission, validation, and removal once nothing holds a deleted object.

use serde_json::{Value, json};

use super::create::{create_in, status_zero_values};
use super::{decode_object, is_dry_run};
use crate::apimachinery::field::Error as FieldError;
use crate::sandbox::admission::{self, AdmissionContext, Operation};
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::apiserver::{convert, defaults, subresources, validation};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::storage::objects::{self, finalizers, is_deleting, name_of, should_remove};
use crate::sandbox::storage::resources::ResourceType;
use crate::sandbox::storage::services;
use crate::sandbox::storage::store::Txn;
use crate::server::http::Request;

/// `UpdateResource`: replaces the object (or creates it, for kinds that allow it); 200 or 201.
pub fn update(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    name: &str,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let resource = target.resource;
    let object = decode_object(target, request)?;
    if name_of(&object) != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            name_of(&object)
        )));
    }
    let dry_run = is_dry_run(request)?;
    let ns = target.namespace.as_deref().unwrap_or_default();
    let (code, stored) = api.store.write(|txn| {
        let Some(old) = txn.get(resource.storage_key(), ns, name) else {
            // Creating through an update needs no resourceVersion; one that expects an
            // existing object finds none.
            if resource.create_on_update() && target.subresource.is_none() && !has_resource_version(&object) {
                return create_in(api, txn, target, object.clone(), user, dry_run).map(|o| (201, o));
            }
            return Err(ApiError::not_found(resource, name));
        };
        check_resource_version(resource, name, &old, &object)?;
        let updated = write_update(api, txn, target, &old, object.clone(), user, dry_run)?;
        Ok((200, updated))
    })?;
    Ok((code, convert::to_external(resource, &stored)))
}

/// Writes an update of `old` to `new` within a transaction: keeps what the request may not
/// change, bumps the generation on spec changes, runs admission and removes the object once
/// nothing holds its deletion any longer. Returns the object as stored.
pub fn write_update(
    api: &ApiServer,
    txn: &mut Txn<'_>,
    target: &Target,
    old: &Value,
    new: Value,
    user: &UserInfo,
    dry_run: bool,
) -> ApiResult<Value> {
    let resource = target.resource;
    let name = name_of(old).to_string();
    // A CSR's approval changes its status only, and is written as a status update.
    let status_only = matches!(target.subresource.as_deref(), Some("status" | "approval"));
    check_uid_unchanged(resource, old, &new)?;
    let mut object = merge_for_update(resource, old, new, status_only);
    preserve_server_metadata(old, &mut object);
    let errors = objects::metadata_errors(&object);
    if !status_only && !errors.is_empty() {
        return Err(ApiError::invalid(resource, &name, &errors));
    }
    if is_service(resource) {
        keep_allocations(old, &mut object);
    }
    check_finalizers_while_deleting(resource, &name, old, &object)?;
    if !status_only {
        defaults::apply(resource, &mut object);
        defaults::prepare_update(resource, old, &mut object);
        subresources::csr_prepare_for_update(resource, old, &mut object);
        validation::validate_update(resource, old, &mut object)?;
    } else {
        defaults::prepare_status_update(resource, old, &mut object);
        subresources::volume_phase_transition(resource, old, &mut object);
        let approval = target.subresource.as_deref() == Some("approval");
        subresources::csr_prepare_for_status_update(resource, old, &mut object, approval);
        validation::validate_status_update(resource, old, &object, approval)?;
    }
    // `endpointSliceStrategy.PrepareForUpdate` also counts label changes.
    let labels_changed = resource.kind == "EndpointSlice" && object["metadata"]["labels"] != old["metadata"]["labels"];
    if resource.tracks_generation && (labels_changed || objects::spec_part(&object) != objects::spec_part(old)) {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        object["metadata"]["generation"] = generation.into();
    }
    let ctx = AdmissionContext {
        resource,
        subresource: target.subresource.as_deref(),
        namespace: objects::namespace_of(old),
        operation: Operation::Update,
        user,
        old: Some(old),
        dry_run,
        rbac: api.options.rbac,
    };
    admission::admit(&ctx, &mut object, txn)?;
    status_zero_values(resource, &mut object);
    let mut unchanged = object.clone();
    unchanged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if unchanged == *old {
        // A no-op update is not written and keeps its resourceVersion, as in kube-apiserver.
        return Ok(old.clone());
    }
    if dry_run {
        return Ok(object);
    }
    let revision = txn.next_revision().to_string();
    object["metadata"]["resourceVersion"] = revision.into();
    if should_remove(&object) {
        txn.remove(resource.storage_key(), objects::namespace_of(old), &name);
        if is_service(resource) {
            services::release_addresses(txn, &object);
        }
    } else {
        txn.put(resource.storage_key(), object.clone());
    }
    Ok(object)
}

/// The new object of an update: a status update changes only `status`; a main-resource update
/// of a kind with a status subresource keeps the old `status`.
fn merge_for_update(resource: &ResourceType, old: &Value, new: Value, status_only: bool) -> Value {
    if status_only {
        let mut object = old.clone();
        object["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        if object["status"].is_null() {
            object.as_object_mut().map(|m| m.remove("status"));
        }
        if status_update_keeps_metadata(resource) && new["metadata"].is_object() {
            // Only spec (and a Deployment's labels) are reset; the server's own fields are
            // restored later.
            object["metadata"] = new["metadata"].clone();
            if is_deployment(resource) {
                match old["metadata"].get("labels") {
                    Some(labels) => object["metadata"]["labels"] = labels.clone(),
                    None => {
                        objects::metadata_mut(&mut object).remove("labels");
                    }
                }
            }
        }
        return object;
    }
    let mut object = new;
    if resource.has_status() {
        match old.get("status") {
            Some(status) => object["status"] = status.clone(),
            None => {
                object.as_object_mut().map(|m| m.remove("status"));
            }
        }
    }
    object
}

/// Kinds whose status strategy resets only `spec` (and a Deployment's `metadata.labels`), so
/// that a status update also writes the other metadata (kube-apiserver's
/// `deploymentStatusStrategy`, whereby the Deployment controller records the revision
/// annotation; `persistentvolumeclaimStatusStrategy`, whereby the expand controller sets the
/// resizer annotation).
fn status_update_keeps_metadata(resource: &ResourceType) -> bool {
    is_deployment(resource) || (resource.group.is_empty() && resource.plural == "persistentvolumeclaims")
}

fn is_deployment(resource: &ResourceType) -> bool {
    resource.group == "apps" && resource.plural == "deployments"
}

pub(super) fn is_service(resource: &ResourceType) -> bool {
    resource.group.is_empty() && resource.plural == "services"
}

/// An update that leaves out the allocated cluster IPs or node ports keeps them (the Service
/// registry's `patchAllocatedValues`).
fn keep_allocations(old: &Value, object: &mut Value) {
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if object["spec"][field].is_null() && !old["spec"][field].is_null() {
            object["spec"][field] = old["spec"][field].clone();
        }
    }
    let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
    if let Some(ports) = object["spec"]["ports"].as_array_mut() {
        for port in ports.iter_mut().filter(|p| p["nodePort"].is_null()) {
            let same = old_ports.iter().find(|o| o["port"] == port["port"] && o["protocol"] == port["protocol"]);
            if let Some(node_port) = same.map(|o| o["nodePort"].clone()).filter(|n| !n.is_null()) {
                port["nodePort"] = node_port;
            }
        }
    }
}

/// `ValidateObjectMetaUpdate`: a uid sent with an update must be the object's.
fn check_uid_unchanged(resource: &ResourceType, old: &Value, new: &Value) -> ApiResult<()> {
    match new["metadata"]["uid"].as_str().filter(|uid| !uid.is_empty()) {
        Some(uid) if Some(uid) != old["metadata"]["uid"].as_str() => Err(ApiError::invalid(
            resource,
            name_of(old),
            &[FieldError::invalid_json("metadata.uid", &json!(uid), "field is immutable")],
        )),
        _ => Ok(()),
    }
}

/// uid, creationTimestamp, deletion fields and generation are the server's.
fn preserve_server_metadata(old: &Value, object: &mut Value) {
    let old_meta = &old["metadata"];
    let meta = objects::metadata_mut(object);
    for key in
        ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "namespace"]
    {
        match old_meta.get(key) {
            Some(v) => meta.insert(key.into(), v.clone()),
            None => meta.remove(key),
        };
    }
    meta.remove("managedFields");
    meta.remove("selfLink");
}

fn check_finalizers_while_deleting(resource: &ResourceType, name: &str, old: &Value, new: &Value) -> ApiResult<()> {
    if !is_deleting(old) {
        return Ok(());
    }
    let before = finalizers(old);
    let mut added: Vec<String> = finalizers(new).into_iter().filter(|f| !before.contains(f)).collect();
    if added.is_empty() {
        return Ok(());
    }
    // `sets.String.List()`: sorted, without duplicates; shown with Go's `%#v`.
    added.sort();
    added.dedup();
    let error = FieldError::forbidden(
        "metadata.finalizers",
        &format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers {}",
            validation::go_string_slice(Some(&added))
        ),
    );
    // `ValidateObjectMetaUpdate` runs twice, in `rest.BeforeUpdate` and in the kind's own
    // `ValidateUpdate`: the cause is listed twice (the message names it once).
    Err(ApiError::invalid(resource, name, &[error.clone(), error]))
}

pub(super) fn check_resource_version(resource: &ResourceType, name: &str, old: &Value, new: &Value) -> ApiResult<()> {
    match new["metadata"]["resourceVersion"].as_str().filter(|v| !v.is_empty()) {
        Some(v) if Some(v) != old["metadata"]["resourceVersion"].as_str() => Err(ApiError::modified(resource, name)),
        _ => Ok(()),
    }
}

pub(super) fn has_resource_version(object: &Value) -> bool {
    object["metadata"]["resourceVersion"].as_str().is_some_and(|v| !v.is_empty())
}
