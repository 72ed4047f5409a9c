//! The storage plugins: DefaultStorageClass (`plugin/pkg/admission/storage/persistentvolume/
//! defaultstorageclass`), StorageObjectInUseProtection (`.../storageobjectinuseprotection`) and
//! PersistentVolumeClaimResize (`.../persistentvolume/resize`).

use serde_json::{Value, json};

use super::{AdmissionContext, Phase, annotation, forbidden, spec_mut, text};
use crate::quantity::Quantity;
use crate::sandbox::apiserver::status::ApiResult;
use crate::sandbox::storage::objects::{finalizers, set_finalizers};
use crate::sandbox::storage::store::Txn;

const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
const DEFAULT_CLASS_ANNOTATIONS: &[&str] =
    &["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"];
const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
const VAC_PROTECTION_FINALIZER: &str = "kubernetes.io/vac-protection";

/// A claim's class: the beta annotation first, then `spec.storageClassName`
/// (`GetPersistentVolumeClaimClass`).
pub(super) fn claim_class(claim: &Value) -> &str {
    annotation(claim, BETA_STORAGE_CLASS_ANNOTATION).unwrap_or_else(|| text(claim, "/spec/storageClassName"))
}

/// DefaultStorageClass: a new claim that names no class (not even `""`) gets the default one:
/// the newest class marked default, the first by name among equally new ones.
pub(super) fn default_storage_class(ctx: &AdmissionContext<'_>, claim: &mut Value, txn: &Txn<'_>) {
    if !ctx.is_core("persistentvolumeclaims") || !ctx.is_create() {
        return;
    }
    if annotation(claim, BETA_STORAGE_CLASS_ANNOTATION).is_some() || !claim["spec"]["storageClassName"].is_null() {
        return;
    }
    let classes = txn.list("storageclasses", None);
    let default = classes
        .iter()
        .filter(|class| DEFAULT_CLASS_ANNOTATIONS.iter().any(|key| annotation(class, key) == Some("true")))
        .max_by(|a, b| {
            let created = |c: &Value| text(c, "/metadata/creationTimestamp").to_string();
            // Newest first; among equals, the smallest name.
            created(a).cmp(&created(b)).then_with(|| text(b, "/metadata/name").cmp(text(a, "/metadata/name")))
        });
    if let Some(class) = default {
        spec_mut(claim)["storageClassName"] = json!(text(class, "/metadata/name"));
    }
}

/// StorageObjectInUseProtection: new claims, volumes and (VolumeAttributesClass GA, v1.34)
/// volume attributes classes get the protection finalizer, which their controllers remove once
/// nothing uses them.
pub(super) fn storage_object_in_use_protection(ctx: &AdmissionContext<'_>, object: &mut Value) {
    if !ctx.is_create() {
        return;
    }
    let finalizer = if ctx.is_core("persistentvolumeclaims") {
        PVC_PROTECTION_FINALIZER
    } else if ctx.is_core("persistentvolumes") {
        PV_PROTECTION_FINALIZER
    } else if ctx.resource.group == "storage.k8s.io" && ctx.resource.plural == "volumeattributesclasses" {
        VAC_PROTECTION_FINALIZER
    } else {
        return;
    };
    let mut list = finalizers(object);
    if !list.iter().any(|f| f == finalizer) {
        list.push(finalizer.to_string());
        set_finalizers(object, &list);
    }
}

/// PersistentVolumeClaimResize: a claim may grow only when bound, and only when its class
/// (unchanged) allows volume expansion.
pub(super) fn persistent_volume_claim_resize(
    ctx: &AdmissionContext<'_>,
    claim: &Value,
    txn: &Txn<'_>,
) -> ApiResult<()> {
    let Some(old) = ctx.old.filter(|_| ctx.is_core("persistentvolumeclaims")) else { return Ok(()) };
    let size =
        |c: &Value| Quantity::from_json(&c["spec"]["resources"]["requests"]["storage"]).unwrap_or(Quantity::zero());
    if size(claim) <= size(old) {
        return Ok(());
    }
    if text(old, "/status/phase") != "Bound" {
        return Err(forbidden(ctx, claim, Phase::Validating, "Only bound persistent volume claims can be expanded"));
    }
    let (class, old_class) = (claim_class(claim), claim_class(old));
    let allowed = !class.is_empty()
        && class == old_class
        && txn.get("storageclasses", "", class).is_some_and(|sc| sc["allowVolumeExpansion"].as_bool() == Some(true));
    if !allowed {
        let why = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";
        return Err(forbidden(ctx, claim, Phase::Validating, why));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use crate::sandbox::storage::store::Store;

    fn claim(name: &str) -> serde_json::Value {
        json!({"metadata": {"namespace": "team", "name": name},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    }

    #[test]
    fn claims_get_the_default_class_and_the_protection_finalizer() {
        let store = Store::default();
        seed(
            &store,
            "storageclasses",
            vec![
                json!({"metadata": {"name": "old", "creationTimestamp": "2024-01-01T00:00:00Z",
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}),
                json!({"metadata": {"name": "new", "creationTimestamp": "2025-01-01T00:00:00Z",
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}),
                json!({"metadata": {"name": "plain", "creationTimestamp": "2026-01-01T00:00:00Z"}}),
            ],
        );
        let stored = create(&store, "", "persistentvolumeclaims", "team", claim("a")).unwrap();
        assert_eq!(stored["spec"]["storageClassName"], "new");
        assert_eq!(stored["metadata"]["finalizers"], json!(["kubernetes.io/pvc-protection"]));
        let mut none = claim("b");
        none["spec"]["storageClassName"] = json!("");
        let stored = create(&store, "", "persistentvolumeclaims", "team", none).unwrap();
        assert_eq!(stored["spec"]["storageClassName"], "");
        let pv = create(&store, "", "persistentvolumes", "", json!({"metadata": {"name": "pv1"}})).unwrap();
        assert_eq!(pv["metadata"]["finalizers"], json!(["kubernetes.io/pv-protection"]));
    }

    #[test]
    fn claims_grow_only_when_bound_and_allowed() {
        let store = Store::default();
        seed(&store, "storageclasses", vec![json!({"metadata": {"name": "fast"}, "allowVolumeExpansion": true})]);
        let mut c = claim("a");
        c["spec"]["storageClassName"] = json!("fast");
        create(&store, "", "persistentvolumeclaims", "team", c.clone()).unwrap();
        let mut bigger = c.clone();
        bigger["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        let err = update(&store, "", "persistentvolumeclaims", bigger.clone()).unwrap_err();
        assert_eq!(
            err.message(),
            "persistentvolumeclaims \"a\" is forbidden: Only bound persistent volume claims can be expanded"
        );
        c["status"] = json!({"phase": "Bound"});
        seed(&store, "persistentvolumeclaims", vec![c]);
        update(&store, "", "persistentvolumeclaims", bigger).unwrap();
    }
}
