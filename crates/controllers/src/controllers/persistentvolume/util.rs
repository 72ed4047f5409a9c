//! Annotations and small helpers of component-helpers' `storage/volume` and
//! `pkg/volume/util` that the binder uses.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use super::Error;

/// The claim is fully bound (set by this controller only).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The binding was made by this controller, not pre-bound by a user.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The node the scheduler chose for a `WaitForFirstConsumer` claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The provisioner that provisioned a volume.
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// The CSI driver an in-tree volume migrated to.
pub const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";
/// The provisioner asked to provision a claim.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The beta form of [`ANN_STORAGE_PROVISIONER`], still set.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The beta class annotation, which wins over `storageClassName`.
const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
const ANN_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
const ANN_BETA_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// Whether the object's annotations have `key`.
pub fn has_annotation(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(key))
}

/// `claimToClaimKey`.
pub fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!("{}/{}", claim.metadata.namespace.as_deref().unwrap_or(""), claim.metadata.name.as_deref().unwrap_or(""))
}

/// `claimrefToClaimKey`.
pub fn claim_ref_key(reference: &ObjectReference) -> String {
    format!("{}/{}", reference.namespace.as_deref().unwrap_or(""), reference.name.as_deref().unwrap_or(""))
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else `storageClassName`.
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    let annotation = claim.metadata.annotations.as_ref().and_then(|a| a.get(ANN_BETA_STORAGE_CLASS));
    annotation.cloned().or_else(|| claim.spec.as_ref().and_then(|s| s.storage_class_name.clone())).unwrap_or_default()
}

/// `PersistentVolumeClaimHasClass`: a class is set, even the empty one.
pub fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    has_annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS)
        || claim.spec.as_ref().is_some_and(|s| s.storage_class_name.is_some())
}

/// `GetPersistentVolumeClass`.
pub fn volume_class(volume: &PersistentVolume) -> String {
    let annotation = volume.metadata.annotations.as_ref().and_then(|a| a.get(ANN_BETA_STORAGE_CLASS));
    annotation.cloned().or_else(|| volume.spec.as_ref().and_then(|s| s.storage_class_name.clone())).unwrap_or_default()
}

/// The volume's `claimRef`, if any.
pub fn claim_ref(volume: &PersistentVolume) -> Option<&ObjectReference> {
    volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
}

/// `IsVolumeBoundToClaim`: the `claimRef` names the claim (and its uid, when it has one).
pub fn is_volume_bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(reference) = claim_ref(volume) else { return false };
    if reference.name != claim.metadata.name || reference.namespace != claim.metadata.namespace {
        return false;
    }
    let uid = reference.uid.as_deref().unwrap_or("");
    uid.is_empty() || Some(uid) == claim.metadata.uid.as_deref()
}

/// The claim's `spec.volumeName` ("" when unset).
pub fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("")
}

/// The claim's phase.
pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// The volume's phase.
pub fn volume_phase(volume: &PersistentVolume) -> &str {
    volume.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// The volume's reclaim policy.
pub fn reclaim_policy(volume: &PersistentVolume) -> &str {
    volume.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()).unwrap_or("")
}

/// `IsDefaultAnnotation`.
fn is_default_class(class: &StorageClass) -> bool {
    let annotations = class.metadata.annotations.as_ref();
    [ANN_DEFAULT_CLASS, ANN_BETA_DEFAULT_CLASS]
        .iter()
        .any(|key| annotations.and_then(|a| a.get(*key)).is_some_and(|v| v == "true"))
}

/// `GetDefaultClass`: of the default classes, the newest; on a tie the first by name.
pub fn default_class(classes: &[Arc<StorageClass>]) -> Option<Arc<StorageClass>> {
    let mut defaults: Vec<&Arc<StorageClass>> = classes.iter().filter(|c| is_default_class(c)).collect();
    defaults.sort_by(|a, b| {
        let created = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(b).cmp(&created(a)).then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    defaults.first().map(|c| (*c).clone())
}

/// `IsDelayBindingMode`: the claim's class binds `WaitForFirstConsumer`. A missing class is
/// not delayed; a class without a binding mode is an error.
pub fn is_delay_binding_mode(claim: &PersistentVolumeClaim, class: Option<&StorageClass>) -> Result<bool, Error> {
    let name = claim_class(claim);
    if name.is_empty() {
        return Ok(false);
    }
    let Some(class) = class else { return Ok(false) };
    match class.volume_binding_mode.as_deref() {
        None => Err(Error::NoBindingMode { class: name.to_string() }),
        Some(mode) => Ok(mode == "WaitForFirstConsumer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, default: bool, created: &str) -> Arc<StorageClass> {
        let annotations = if default { json!({ANN_DEFAULT_CLASS: "true"}) } else { json!({}) };
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations,
                "creationTimestamp": created}, "provisioner": "p"}))
            .unwrap(),
        )
    }

    #[test]
    fn the_newest_default_class_wins() {
        let classes = vec![
            class("old", true, "2026-01-01T00:00:00Z"),
            class("new", true, "2026-02-01T00:00:00Z"),
            class("newest", false, "2026-03-01T00:00:00Z"),
        ];
        assert_eq!(default_class(&classes).unwrap().metadata.name.as_deref(), Some("new"));
        let tie = vec![class("b", true, "2026-01-01T00:00:00Z"), class("a", true, "2026-01-01T00:00:00Z")];
        assert_eq!(default_class(&tie).unwrap().metadata.name.as_deref(), Some("a"));
        assert!(default_class(&classes[2..]).is_none());
    }

    #[test]
    fn the_beta_class_annotation_wins() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "c",
            "annotations": {ANN_BETA_STORAGE_CLASS: "beta"}}, "spec": {"storageClassName": "spec"}}))
        .unwrap();
        assert_eq!(claim_class(&claim), "beta");
        let empty: PersistentVolumeClaim = serde_json::from_value(json!({"spec": {"storageClassName": ""}})).unwrap();
        assert!(claim_has_class(&empty));
        assert!(!claim_has_class(&PersistentVolumeClaim::default()));
    }

    #[test]
    fn a_claim_ref_without_uid_binds_any_claim_of_that_name() {
        let claim: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ns", "uid": "u1"}})).unwrap();
        let volume = |uid: &str| -> PersistentVolume {
            serde_json::from_value(json!({"spec": {"claimRef": {"name": "c", "namespace": "ns", "uid": uid}}})).unwrap()
        };
        assert!(is_volume_bound_to_claim(&volume(""), &claim));
        assert!(is_volume_bound_to_claim(&volume("u1"), &claim));
        assert!(!is_volume_bound_to_claim(&volume("u2"), &claim));
    }
}
