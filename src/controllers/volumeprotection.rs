//! What the PVC and PV protection controllers share, after upstream v1.33's
//! `pkg/controller/volume/protectionutil` and the finalizer names of `pkg/volume/util`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `volumeutil.PVCProtectionFinalizer`.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// `volumeutil.PVProtectionFinalizer`.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// `IsDeletionCandidate`: being deleted and still holding `finalizer`.
pub fn is_deletion_candidate(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, finalizer)
}

/// `NeedToAddFinalizer`: not being deleted and lacking `finalizer`.
pub fn need_to_add_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_none() && !has_finalizer(meta, finalizer)
}

/// The finalizers without `finalizer` (`slice.RemoveString`), `None` when none are left.
pub fn without_finalizer(meta: &ObjectMeta, finalizer: &str) -> Option<Vec<String>> {
    let rest: Vec<String> = meta.finalizers.iter().flatten().filter(|f| *f != finalizer).cloned().collect();
    (!rest.is_empty()).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn a_deleted_object_with_the_finalizer_is_a_candidate_and_a_live_one_without_it_needs_it() {
        let mut meta =
            ObjectMeta { finalizers: Some(vec!["a".into(), PV_PROTECTION_FINALIZER.into()]), ..ObjectMeta::default() };
        assert!(!need_to_add_finalizer(&meta, PV_PROTECTION_FINALIZER));
        assert!(!is_deletion_candidate(&meta, PV_PROTECTION_FINALIZER));
        assert!(need_to_add_finalizer(&meta, PVC_PROTECTION_FINALIZER));
        meta.deletion_timestamp = Some(Time("2026-11-26T10:00:00Z".parse().expect("time")));
        assert!(is_deletion_candidate(&meta, PV_PROTECTION_FINALIZER));
        assert!(!need_to_add_finalizer(&meta, PVC_PROTECTION_FINALIZER), "never added while deleting");
        assert_eq!(without_finalizer(&meta, PV_PROTECTION_FINALIZER), Some(vec!["a".to_string()]));
        meta.finalizers = Some(vec![PV_PROTECTION_FINALIZER.into()]);
        assert_eq!(without_finalizer(&meta, PV_PROTECTION_FINALIZER), None);
    }
}
