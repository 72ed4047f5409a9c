//! Admission: kube-apiserver v1.33's default admission plugins, run on every create and update
//! inside its write transaction, after defaulting. Mutating plugins run first, then validating
//! ones, each phase in kube-apiserver's plugin order (`AllOrderedPlugins`). NamespaceLifecycle is
//! the caller's; the webhook and policy plugins have nothing to run (no such objects are served).
//!
//! Every plugin is a small function named after its upstream package under
//! `plugin/pkg/admission/` (ResourceQuota: `k8s.io/apiserver/pkg/admission/plugin/resourcequota`)
//! and refuses with upstream's messages.

use serde_json::Value;

use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::storage::objects::name_of;
use crate::sandbox::storage::resources::ResourceType;
use crate::sandbox::storage::store::Txn;

mod certificates;
mod limit_ranger;
pub mod nodes;
mod priority;
pub mod resource_list;
mod resource_quota;
mod service_account;
mod storage;
mod tolerations;

/// The kind of write being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `admission.Create`: a new object.
    Create,
    /// `admission.Update`: a change to a stored object (its subresources included).
    Update,
}

/// What admission knows about a request.
pub struct AdmissionContext<'a> {
    /// The resource written to.
    pub resource: &'static ResourceType,
    /// e.g. `Some("status")` for status updates.
    pub subresource: Option<&'a str>,
    /// Empty for cluster-scoped objects.
    pub namespace: &'a str,
    /// Create or update.
    pub operation: Operation,
    /// The authenticated requester.
    pub user: &'a UserInfo,
    /// The stored object, on update.
    pub old: Option<&'a Value>,
    /// Nothing may be written to the transaction.
    pub dry_run: bool,
    /// The authorizer plugins ask (upstream's `WantsAuthorizer`): RBAC when on, else AlwaysAllow.
    pub rbac: bool,
}

impl AdmissionContext<'_> {
    /// Whether the request is for a core/v1 resource itself (no subresource).
    fn is_core(&self, plural: &str) -> bool {
        self.resource.group.is_empty() && self.resource.plural == plural && self.subresource.is_none()
    }

    fn is_create(&self) -> bool {
        self.operation == Operation::Create
    }
}

/// Which admission phase refuses: the name in the message differs (see [`forbidden`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Mutating,
    Validating,
}

/// Runs the admission chain over `object`, which mutating plugins may change.
pub fn admit(ctx: &AdmissionContext<'_>, object: &mut Value, txn: &mut Txn<'_>) -> ApiResult<()> {
    // Mutating plugins, in kube-apiserver's order.
    limit_ranger::admit(ctx, object, txn)?;
    service_account::admit(ctx, object, txn)?;
    nodes::taint_nodes_by_condition(ctx, object);
    priority::admit(ctx, object, txn)?;
    tolerations::default_toleration_seconds(ctx, object);
    storage::default_storage_class(ctx, object, txn);
    storage::storage_object_in_use_protection(ctx, object);
    nodes::pod_topology_labels(ctx, object, txn);
    // Validating plugins, in the same order; ResourceQuota is last, as upstream requires.
    limit_ranger::validate(ctx, object, txn)?;
    service_account::validate(ctx, object, txn)?;
    certificates::node_restriction(ctx, object)?;
    priority::validate(ctx, object, txn)?;
    storage::persistent_volume_claim_resize(ctx, object, txn)?;
    certificates::approval(ctx, object, txn)?;
    certificates::signing(ctx, object, txn)?;
    certificates::subject_restriction(ctx, object)?;
    resource_quota::validate(ctx, object, txn)
}

/// `admission.NewForbidden`: 403 on the request's resource and name. Mutating plugins run
/// before a `generateName` is turned into a name, so their refusals name the prefix.
fn forbidden(ctx: &AdmissionContext<'_>, object: &Value, phase: Phase, why: &str) -> ApiError {
    let name = match ctx.old {
        Some(old) => name_of(old).to_string(),
        None if phase == Phase::Mutating => name_before_generation(object),
        None => name_of(object).to_string(),
    };
    ApiError::forbidden(ctx.resource, &name, why)
}

/// The object's name as a mutating plugin saw it upstream: the `generateName` prefix when the
/// name was generated from it (a 5-character suffix on the prefix, cut to 58 characters).
fn name_before_generation(object: &Value) -> String {
    let name = name_of(object);
    let prefix = object["metadata"]["generateName"].as_str().unwrap_or_default();
    let cut: String = prefix.chars().take(58).collect();
    if !prefix.is_empty() && name.len() == cut.len() + 5 && name.starts_with(&cut) {
        prefix.to_string()
    } else {
        name.to_string()
    }
}

/// A string field (empty when missing).
fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The entries of an array field (none when missing).
fn items<'v>(value: &'v Value, pointer: &str) -> &'v [Value] {
    value.pointer(pointer).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// An array field to append to, created when missing (and replacing a non-array).
fn array_mut<'v>(value: &'v mut Value, parent: &str, field: &str) -> Option<&'v mut Vec<Value>> {
    let parent = value.pointer_mut(parent)?;
    if !parent.is_object() {
        *parent = Value::Object(Default::default());
    }
    let slot = &mut parent[field];
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
}

/// The object's spec, created when missing.
fn spec_mut(object: &mut Value) -> &mut Value {
    if !object["spec"].is_object() {
        object["spec"] = Value::Object(Default::default());
    }
    &mut object["spec"]
}

/// An annotation of an object.
fn annotation<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object["metadata"]["annotations"].get(key).and_then(Value::as_str)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the plugins' tests.

    use serde_json::{Value, json};

    use super::*;
    use crate::sandbox::storage::resources::RESOURCES;
    use crate::sandbox::storage::store::Store;

    pub fn admin() -> UserInfo {
        UserInfo::new("admin", &["system:masters"])
    }

    pub fn resource(group: &str, plural: &str) -> &'static ResourceType {
        RESOURCES
            .iter()
            .find(|r| r.group == group && r.plural == plural)
            .unwrap_or_else(|| panic!("no resource {group}/{plural}"))
    }

    /// Stores objects directly (no admission).
    pub fn seed(store: &Store, storage: &'static str, objects: Vec<Value>) {
        store
            .write::<_, ()>(|txn| {
                for object in objects {
                    txn.put(storage, object);
                }
                Ok(())
            })
            .unwrap();
    }

    /// Admits and stores a create, as the API layer does; returns the stored object.
    pub fn create(store: &Store, group: &str, plural: &str, namespace: &str, object: Value) -> ApiResult<Value> {
        let resource = resource(group, plural);
        let user = admin();
        store.write(|txn| {
            let mut object = object;
            let ctx = AdmissionContext {
                resource,
                subresource: None,
                namespace,
                operation: Operation::Create,
                user: &user,
                old: None,
                dry_run: false,
                rbac: false,
            };
            admit(&ctx, &mut object, txn)?;
            txn.put(resource.storage_key(), object.clone());
            Ok(object)
        })
    }

    /// Admits an update of the stored object to `object`, and stores it.
    pub fn update(store: &Store, group: &str, plural: &str, object: Value) -> ApiResult<Value> {
        let resource = resource(group, plural);
        let user = admin();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        store.write(|txn| {
            let old = txn.get(resource.storage_key(), &namespace, &name).expect("stored");
            let mut object = object;
            let ctx = AdmissionContext {
                resource,
                subresource: None,
                namespace: &namespace,
                operation: Operation::Update,
                user: &user,
                old: Some(&old),
                dry_run: false,
                rbac: false,
            };
            admit(&ctx, &mut object, txn)?;
            txn.put(resource.storage_key(), object.clone());
            Ok(object)
        })
    }

    pub fn namespace_default_sa(store: &Store, namespace: &str) {
        seed(store, "serviceaccounts", vec![json!({"metadata": {"namespace": namespace, "name": "default"}})]);
    }

    pub fn pod(namespace: &str, name: &str) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testing::*;
    use crate::sandbox::storage::store::Store;

    #[test]
    fn mutating_refusals_name_the_generate_name_prefix() {
        let store = Store::default();
        let mut pod = pod("team", "web-7d4b9c-x2b4z");
        pod["metadata"]["generateName"] = json!("web-7d4b9c-");
        let err = create(&store, "", "pods", "team", pod).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"web-7d4b9c-\" is forbidden: error looking up service account team/default: serviceaccount \"default\" not found"
        );
    }

    #[test]
    fn a_pod_passes_every_plugin() {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        let stored = create(&store, "", "pods", "team", pod("team", "p")).unwrap();
        assert_eq!(stored["spec"]["serviceAccountName"], "default");
        assert_eq!(stored["spec"]["priority"], 0);
        assert_eq!(stored["spec"]["tolerations"].as_array().map(Vec::len), Some(2));
    }
}
