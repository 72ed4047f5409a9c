//! Matching claims to volumes: upstream's `persistentVolumeOrderedIndex` (`index.go`) and
//! component-helpers' `FindMatchingVolume`, `CheckVolumeModeMismatches`, `CheckAccessModes`.
//! The controller passes no node (as upstream's PV controller): a claim of a
//! `WaitForFirstConsumer` class is never matched to an unbound volume here.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::apimachinery::labels::Selector;
use crate::quantity::Quantity;

use super::util::{claim_class, is_volume_bound_to_claim, volume_class};
use super::{Error, Mismatch};

/// The storage a claim requests (0 when none).
pub fn requested_storage(claim: &PersistentVolumeClaim) -> Quantity {
    let requests = claim.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref());
    requests.and_then(|r| r.get("storage")).and_then(|q| Quantity::parse(&q.0).ok()).unwrap_or_else(Quantity::zero)
}

/// A volume's storage capacity (0 when none).
pub fn volume_storage(volume: &PersistentVolume) -> Quantity {
    let capacity = volume.spec.as_ref().and_then(|s| s.capacity.as_ref());
    capacity.and_then(|c| c.get("storage")).and_then(|q| Quantity::parse(&q.0).ok()).unwrap_or_else(Quantity::zero)
}

fn claim_modes(claim: &PersistentVolumeClaim) -> BTreeSet<&str> {
    claim.spec.as_ref().and_then(|s| s.access_modes.as_ref()).into_iter().flatten().map(String::as_str).collect()
}

fn volume_modes(volume: &PersistentVolume) -> BTreeSet<&str> {
    volume.spec.as_ref().and_then(|s| s.access_modes.as_ref()).into_iter().flatten().map(String::as_str).collect()
}

/// `CheckAccessModes`: the volume offers every mode the claim requests.
pub fn check_access_modes(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    claim_modes(claim).is_subset(&volume_modes(volume))
}

/// `CheckVolumeModeMismatches`: an unset mode is `Filesystem`.
pub fn volume_mode_mismatch(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let claim_mode = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem");
    let volume_mode = volume.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem");
    claim_mode != volume_mode
}

/// `FindMatchingVolume`'s VolumeAttributesClass filter: with the gate on (GA and locked since
/// 1.34) the claim and the volume name the same class, or none; with it off a volume naming
/// one is never bound.
fn attributes_class_mismatch(claim: &PersistentVolumeClaim, volume: &PersistentVolume, vac_enabled: bool) -> bool {
    let volume_vac = volume_attributes_class(volume);
    if vac_enabled { claim_attributes_class(claim) != volume_vac } else { !volume_vac.is_empty() }
}

fn claim_attributes_class(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or("")
}

fn volume_attributes_class(volume: &PersistentVolume) -> &str {
    volume.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or("")
}

fn phase(volume: &PersistentVolume) -> &str {
    volume.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// `FindMatchingVolume` without a node: the volume pre-bound to the claim, else the smallest
/// Available volume of the claim's class whose labels match its selector; `vac_enabled` is the
/// `VolumeAttributesClass` gate.
pub fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &[&'a PersistentVolume],
    delay_binding: bool,
    vac_enabled: bool,
) -> Result<Option<&'a PersistentVolume>, Error> {
    if !vac_enabled && !claim_attributes_class(claim).is_empty() {
        return Err(Error::AttributesClassDisabled { claim: super::util::claim_key(claim) });
    }
    let requested = requested_storage(claim);
    let class = claim_class(claim);
    let selector = match claim.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(selector) => Some(
            Selector::from_label_selector(selector)
                .map_err(|e| Error::ClaimSelector { claim: super::util::claim_key(claim), source: e.into() })?,
        ),
        None => None,
    };
    let mut smallest: Option<(&PersistentVolume, Quantity)> = None;
    for &volume in volumes {
        let bound_to_claim = is_volume_bound_to_claim(volume, claim);
        if volume.spec.as_ref().is_some_and(|s| s.claim_ref.is_some()) && !bound_to_claim {
            continue;
        }
        let size = volume_storage(volume);
        if size < requested
            || volume_mode_mismatch(claim, volume)
            || attributes_class_mismatch(claim, volume, vac_enabled)
            || volume.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        if bound_to_claim {
            return Ok(Some(volume));
        }
        if delay_binding || phase(volume) != "Available" {
            continue;
        }
        let labels = volume.metadata.labels.clone().unwrap_or_default();
        if selector.as_ref().is_some_and(|s| !s.matches(&labels)) || volume_class(volume) != class {
            continue;
        }
        if smallest.as_ref().is_none_or(|(_, q)| *q > size) {
            smallest = Some((volume, size));
        }
    }
    Ok(smallest.map(|(v, _)| v))
}

/// `findByClaim`: the volumes grouped by their access modes, the groups offering all the
/// claim's modes tried from the fewest modes up; the first group's match wins.
pub fn find_best_match_for_claim<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [PersistentVolume],
    delay_binding: bool,
    vac_enabled: bool,
) -> Result<Option<&'a PersistentVolume>, Error> {
    let wanted = claim_modes(claim);
    let mut groups: Vec<BTreeSet<&str>> = volumes.iter().map(volume_modes).collect();
    groups.sort();
    groups.dedup();
    groups.retain(|modes| wanted.is_subset(modes));
    groups.sort_by_key(BTreeSet::len);
    for modes in groups {
        let members: Vec<&PersistentVolume> = volumes.iter().filter(|v| volume_modes(v) == modes).collect();
        if let Some(volume) = find_matching_volume(claim, &members, delay_binding, vac_enabled)? {
            return Ok(Some(volume));
        }
    }
    Ok(None)
}

/// `checkVolumeSatisfyClaim`: why a volume the claim names cannot be bound to it; `vac_enabled`
/// is the `VolumeAttributesClass` gate.
pub fn check_volume_satisfy_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
    vac_enabled: bool,
) -> Result<(), Mismatch> {
    if volume.metadata.deletion_timestamp.is_some() {
        return Err(Mismatch::BeingDeleted { volume: volume.metadata.name.clone().unwrap_or_default() });
    }
    if volume_storage(volume).value() < requested_storage(claim).value() {
        return Err(Mismatch::TooSmall);
    }
    if volume_class(volume) != claim_class(claim) {
        return Err(Mismatch::StorageClass);
    }
    let (claim_vac, volume_vac) = (claim_attributes_class(claim), volume_attributes_class(volume));
    if vac_enabled && claim_vac != volume_vac {
        return Err(Mismatch::AttributesClass);
    }
    if !vac_enabled && (!claim_vac.is_empty() || !volume_vac.is_empty()) {
        return Err(Mismatch::AttributesClassDisabled);
    }
    if volume_mode_mismatch(claim, volume) {
        return Err(Mismatch::VolumeMode);
    }
    if !check_access_modes(claim, volume) {
        return Err(Mismatch::AccessMode);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume(name: &str, size: &str, modes: &[&str], class: &str) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"size": size}},
            "spec": {"capacity": {"storage": size}, "accessModes": modes, "storageClassName": class},
            "status": {"phase": "Available"}}))
        .expect("a volume")
    }

    fn claim(size: &str, modes: &[&str], class: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({"metadata": {"name": "data", "namespace": "default", "uid": "c1"},
            "spec": {"accessModes": modes, "storageClassName": class,
                "resources": {"requests": {"storage": size}}}}))
        .expect("a claim")
    }

    fn best<'a>(claim: &PersistentVolumeClaim, volumes: &'a [PersistentVolume]) -> Option<&'a str> {
        find_best_match_for_claim(claim, volumes, false, true).unwrap().and_then(|v| v.metadata.name.as_deref())
    }

    #[test]
    fn the_smallest_volume_that_fits_is_chosen() {
        let volumes = vec![
            volume("big", "10Gi", &["ReadWriteOnce"], ""),
            volume("small", "1Gi", &["ReadWriteOnce"], ""),
            volume("medium", "5Gi", &["ReadWriteOnce"], ""),
        ];
        assert_eq!(best(&claim("1Gi", &["ReadWriteOnce"], ""), &volumes), Some("small"));
        assert_eq!(best(&claim("2Gi", &["ReadWriteOnce"], ""), &volumes), Some("medium"));
        assert_eq!(best(&claim("6Gi", &["ReadWriteOnce"], ""), &volumes), Some("big"));
        assert_eq!(best(&claim("11Gi", &["ReadWriteOnce"], ""), &volumes), None);
    }

    #[test]
    fn access_modes_class_and_selector_must_match() {
        let volumes = vec![
            volume("rwx", "10Gi", &["ReadWriteOnce", "ReadWriteMany"], ""),
            volume("fast", "1Gi", &["ReadWriteOnce"], "fast"),
        ];
        assert_eq!(best(&claim("1Gi", &["ReadWriteMany"], ""), &volumes), Some("rwx"));
        assert_eq!(best(&claim("1Gi", &["ReadWriteOnce"], "fast"), &volumes), Some("fast"));
        assert_eq!(best(&claim("1Gi", &["ReadOnlyMany"], ""), &volumes), None);
        let mut selective = claim("1Gi", &["ReadWriteOnce"], "");
        selective.spec.as_mut().unwrap().selector =
            Some(serde_json::from_value(json!({"matchLabels": {"size": "5Gi"}})).unwrap());
        assert_eq!(best(&selective, &volumes), None);
        selective.spec.as_mut().unwrap().selector =
            Some(serde_json::from_value(json!({"matchLabels": {"size": "10Gi"}})).unwrap());
        assert_eq!(best(&selective, &volumes), Some("rwx"));
    }

    #[test]
    fn fewer_access_modes_are_preferred_over_size() {
        let volumes = vec![
            volume("rwx", "1Gi", &["ReadWriteOnce", "ReadWriteMany"], ""),
            volume("rwo", "10Gi", &["ReadWriteOnce"], ""),
        ];
        assert_eq!(best(&claim("1Gi", &["ReadWriteOnce"], ""), &volumes), Some("rwo"));
    }

    #[test]
    fn delayed_binding_takes_only_a_pre_bound_volume() {
        let mut prebound = volume("pre", "5Gi", &["ReadWriteOnce"], "");
        prebound.spec.as_mut().unwrap().claim_ref =
            Some(serde_json::from_value(json!({"namespace": "default", "name": "data"})).unwrap());
        let volumes = vec![volume("free", "1Gi", &["ReadWriteOnce"], ""), prebound];
        let wanted = claim("1Gi", &["ReadWriteOnce"], "");
        let found = find_best_match_for_claim(&wanted, &volumes, true, true).unwrap();
        assert_eq!(found.and_then(|v| v.metadata.name.as_deref()), Some("pre"));
        assert_eq!(find_best_match_for_claim(&wanted, &volumes[..1], true, true).unwrap(), None);
    }

    #[test]
    fn a_named_volume_is_checked() {
        let wanted = claim("2Gi", &["ReadWriteOnce"], "");
        assert_eq!(
            check_volume_satisfy_claim(&volume("v", "1Gi", &["ReadWriteOnce"], ""), &wanted, true)
                .map_err(|e| e.to_string()),
            Err("requested PV is too small".into())
        );
        assert_eq!(
            check_volume_satisfy_claim(&volume("v", "2Gi", &["ReadWriteOnce"], "x"), &wanted, true)
                .map_err(|e| e.to_string()),
            Err("storageClassName does not match".into())
        );
        assert_eq!(
            check_volume_satisfy_claim(&volume("v", "2Gi", &["ReadOnlyMany"], ""), &wanted, true)
                .map_err(|e| e.to_string()),
            Err("incompatible accessMode".into())
        );
        assert_eq!(check_volume_satisfy_claim(&volume("v", "2Gi", &["ReadWriteOnce"], ""), &wanted, true), Ok(()));
    }

    #[test]
    fn the_attributes_class_must_match_with_the_gate_and_be_unset_without() {
        let mut gold = volume("gold", "1Gi", &["ReadWriteOnce"], "");
        gold.spec.as_mut().unwrap().volume_attributes_class_name = Some("gold".into());
        let plain = volume("plain", "1Gi", &["ReadWriteOnce"], "");
        let mut wanted = claim("1Gi", &["ReadWriteOnce"], "");
        wanted.spec.as_mut().unwrap().volume_attributes_class_name = Some("gold".into());
        let volumes = [plain.clone(), gold.clone()];
        let found = find_best_match_for_claim(&wanted, &volumes, false, true).unwrap();
        assert_eq!(found.and_then(|v| v.metadata.name.as_deref()), Some("gold"));
        assert_eq!(check_volume_satisfy_claim(&gold, &wanted, true), Ok(()));
        let mismatch = check_volume_satisfy_claim(&plain, &wanted, true).map_err(|e| e.to_string());
        assert_eq!(mismatch, Err("volumeAttributesClassName does not match".into()));
        let off = find_best_match_for_claim(&wanted, &volumes, false, false).unwrap_err().to_string();
        assert!(off.contains("when the feature-gate VolumeAttributesClass is disabled"), "{off}");
        let unset = claim("1Gi", &["ReadWriteOnce"], "");
        let found = find_best_match_for_claim(&unset, &volumes, false, false).unwrap();
        assert_eq!(found.and_then(|v| v.metadata.name.as_deref()), Some("plain"));
    }
}
