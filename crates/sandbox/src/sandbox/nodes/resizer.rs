//! A simulated CSI external resizer (external-resizer v1.13 with RecoverVolumeExpansionFailure,
//! GA since 1.34) for the simulated driver [`DRIVER`], so that claims grow without a
//! storage backend. A Bound claim whose storage request exceeds its `status.capacity`, bound to
//! a CSI volume of [`DRIVER`] (or annotated `volume.kubernetes.io/storage-resizer: DRIVER`, as
//! a migrated in-tree volume would be), goes through external-resizer's steps:
//! 1. the claim's status gets the `Resizing` condition, `allocatedResources.storage` = the
//!    request and `allocatedResourceStatuses.storage = ControllerResizeInProgress`; Event
//!    `Resizing` "External resizer is resizing volume <pv>";
//! 2. the volume's `spec.capacity.storage` is raised to the request (ControllerExpandVolume);
//! 3. the simulated driver has no node expansion step (like a driver without the
//!    `EXPAND_VOLUME` node capability), so the resize is finished at once: the claim's
//!    `status.capacity` = the request, the `Resizing` and `FileSystemResizePending` conditions
//!    and `allocatedResourceStatuses.storage` dropped; Event `VolumeResizeSuccessful` "Resize
//!    volume succeeded".
//!
//! Events come from `external-resizer csi.kcm-sandbox.dev`, as the real sidecar's.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::{Value, json};

use super::csi::DRIVER;
use super::{Worker, log_error};
use crate::client::{Api, Client, Patch, PostParams};
use crate::quantity::Quantity;
use crate::runtime::events::{EventRecorder, EventType};

/// The claim annotation naming the resizer of a migrated in-tree volume.
const RESIZER_ANNOTATION: &str = "volume.kubernetes.io/storage-resizer";

/// The resizer's Event recorder and memory.
pub(super) struct Resizer {
    recorder: EventRecorder,
    /// Claims (uid → resourceVersion) whose volume was found not ours: not looked at again
    /// until they change.
    not_ours: HashMap<String, String>,
}

impl Resizer {
    pub(super) fn new(client: Client) -> Resizer {
        Resizer {
            recorder: EventRecorder::new(client, &format!("external-resizer {DRIVER}")),
            not_ours: HashMap::new(),
        }
    }

    /// Whether the claim, at this version, was found not ours.
    fn known_not_ours(&self, claim: &Value) -> bool {
        let uid = claim["metadata"]["uid"].as_str().unwrap_or_default();
        self.not_ours.get(uid).is_some_and(|version| claim["metadata"]["resourceVersion"] == version.as_str())
    }

    fn remember_not_ours(&mut self, claim: &Value) {
        let field = |name: &str| claim["metadata"][name].as_str().unwrap_or_default().to_string();
        self.not_ours.insert(field("uid"), field("resourceVersion"));
    }
}

fn storage_of(value: &Value) -> Option<Quantity> {
    Quantity::from_json(&value["storage"])
}

/// The claim's request when it exceeds its capacity: the size to grow to.
fn wanted_size(claim: &Value) -> Option<Value> {
    if claim["status"]["phase"] != "Bound" || !claim["metadata"]["deletionTimestamp"].is_null() {
        return None;
    }
    let request = storage_of(&claim["spec"]["resources"]["requests"])?;
    let capacity = storage_of(&claim["status"]["capacity"]).unwrap_or_else(Quantity::zero);
    (request > capacity).then(|| claim["spec"]["resources"]["requests"]["storage"].clone())
}

/// Whether the volume is ours (external-resizer's `CanSupport`) and bound to this claim.
fn is_ours(volume: &Value, claim: &Value) -> bool {
    let annotated = claim["metadata"]["annotations"][RESIZER_ANNOTATION] == DRIVER;
    let csi = volume["spec"]["csi"]["driver"] == DRIVER;
    (csi || annotated) && volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
}

/// The claim's conditions without the resize ones.
fn other_conditions(claim: &Value) -> Vec<Value> {
    let conditions = claim["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.into_iter().filter(|c| c["type"] != "Resizing" && c["type"] != "FileSystemResizePending").collect()
}

/// Step 1: `markControllerResizeInProgress`.
fn in_progress_patch(claim: &Value, size: &Value, now: &str) -> Value {
    let mut conditions = other_conditions(claim);
    conditions.push(json!({"type": "Resizing", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
    json!({"metadata": {"resourceVersion": claim["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions, "allocatedResources": {"storage": size},
        "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"}}})
}

/// Step 3: `markPVCResizeFinished`. Emptied lists and maps are dropped, as kube-apiserver
/// drops them (Go's `omitempty`).
fn finished_patch(claim: &Value, size: &Value) -> Value {
    let conditions = other_conditions(claim);
    let mut statuses = claim["status"]["allocatedResourceStatuses"].as_object().cloned().unwrap_or_default();
    statuses.remove("storage");
    let statuses = if statuses.is_empty() { Value::Null } else { json!({"storage": null}) };
    let conditions = if conditions.is_empty() { Value::Null } else { json!(conditions) };
    json!({"status": {"capacity": {"storage": size}, "conditions": conditions, "allocatedResourceStatuses": statuses}})
}

impl Worker {
    /// Resizes every claim of ours whose request exceeds its capacity.
    pub(super) fn resize(&mut self) {
        let wanted: Vec<(Value, Value)> = self
            .claims
            .values()
            .filter_map(|claim| {
                let value = serde_json::to_value(claim).ok()?;
                let size = wanted_size(&value)?;
                Some((value, size))
            })
            .filter(|(claim, _)| !self.resizer.known_not_ours(claim))
            .collect();
        let live: std::collections::HashSet<&str> =
            self.claims.values().filter_map(|c| c.metadata.uid.as_deref()).collect();
        self.resizer.not_ours.retain(|uid, _| live.contains(uid.as_str()));
        for (claim, size) in wanted {
            if self.stopping() {
                return;
            }
            self.resize_claim(&claim, &size);
        }
    }

    fn resize_claim(&mut self, claim: &Value, size: &Value) {
        let client = self.shared.client.clone();
        let namespace = claim["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = claim["metadata"]["name"].as_str().unwrap_or_default();
        let volume_name = claim["spec"]["volumeName"].as_str().unwrap_or_default();
        if volume_name.is_empty() {
            return;
        }
        let volumes = Api::<PersistentVolume>::cluster(&client);
        let volume = match volumes.get(volume_name) {
            Ok(volume) => volume,
            Err(e) => return log_error(&format!("simulated resizer: cannot get volume {volume_name}"), &e),
        };
        let Ok(volume_json) = serde_json::to_value(&volume) else { return };
        if !is_ours(&volume_json, claim) {
            return self.resizer.remember_not_ours(claim);
        }
        let claims = Api::<PersistentVolumeClaim>::namespaced(&client, namespace);
        let Ok(typed) = serde_json::from_value::<PersistentVolumeClaim>(claim.clone()) else { return };
        let message = format!("External resizer is resizing volume {volume_name}");
        self.resizer.recorder.event_for(&typed, EventType::Normal, "Resizing", &message);
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let started = match claims.patch_status(
            name,
            &Patch::Merge(in_progress_patch(claim, size, &now)),
            &PostParams::default(),
        ) {
            Ok(started) => started,
            Err(e) => return log_error(&format!("simulated resizer: cannot mark {namespace}/{name} resizing"), &e),
        };
        let grow = json!({"spec": {"capacity": {"storage": size}}});
        if let Err(e) = volumes.patch(volume_name, &Patch::Merge(grow), &PostParams::default()) {
            self.claims.observe(started);
            return log_error(&format!("simulated resizer: cannot resize volume {volume_name}"), &e);
        }
        let started_json = serde_json::to_value(&started).unwrap_or_default();
        match claims.patch_status(name, &Patch::Merge(finished_patch(&started_json, size)), &PostParams::default()) {
            Ok(finished) => {
                log::debug!("simulated resizer: resized {namespace}/{name} to {size}");
                self.resizer.recorder.event_for(
                    &finished,
                    EventType::Normal,
                    "VolumeResizeSuccessful",
                    "Resize volume succeeded",
                );
                self.claims.observe(finished);
            }
            Err(e) => {
                self.claims.observe(started);
                log_error(&format!("simulated resizer: cannot finish resizing {namespace}/{name}"), &e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(request: &str, capacity: &str) -> Value {
        json!({"metadata": {"name": "data", "namespace": "team", "uid": "c1", "resourceVersion": "7"},
            "spec": {"resources": {"requests": {"storage": request}}, "volumeName": "pv1"},
            "status": {"phase": "Bound", "capacity": {"storage": capacity},
                "conditions": [{"type": "ModifyingVolume", "status": "True"},
                    {"type": "Resizing", "status": "True"}]}})
    }

    #[test]
    fn only_bound_claims_whose_request_exceeds_capacity_are_resized() {
        assert_eq!(wanted_size(&claim("2Gi", "1Gi")), Some(json!("2Gi")));
        assert_eq!(wanted_size(&claim("1Gi", "1Gi")), None);
        assert_eq!(wanted_size(&claim("1024Mi", "1Gi")), None);
        let mut pending = claim("2Gi", "1Gi");
        pending["status"]["phase"] = json!("Pending");
        assert_eq!(wanted_size(&pending), None);
    }

    #[test]
    fn only_our_volumes_bound_to_the_claim_are_resized() {
        let ours = json!({"spec": {"csi": {"driver": DRIVER}, "claimRef": {"uid": "c1"}}});
        assert!(is_ours(&ours, &claim("2Gi", "1Gi")));
        let theirs = json!({"spec": {"csi": {"driver": "ebs.csi.aws.com"}, "claimRef": {"uid": "c1"}}});
        assert!(!is_ours(&theirs, &claim("2Gi", "1Gi")));
        let mut annotated = claim("2Gi", "1Gi");
        annotated["metadata"]["annotations"] = json!({RESIZER_ANNOTATION: DRIVER});
        assert!(is_ours(&json!({"spec": {"awsElasticBlockStore": {}, "claimRef": {"uid": "c1"}}}), &annotated));
        let other_claim = json!({"spec": {"csi": {"driver": DRIVER}, "claimRef": {"uid": "c2"}}});
        assert!(!is_ours(&other_claim, &claim("2Gi", "1Gi")));
    }

    #[test]
    fn the_status_goes_through_in_progress_to_finished() {
        let c = claim("2Gi", "1Gi");
        let started = in_progress_patch(&c, &json!("2Gi"), "2026-11-26T10:00:00Z");
        assert_eq!(started["status"]["allocatedResourceStatuses"], json!({"storage": "ControllerResizeInProgress"}));
        assert_eq!(started["status"]["allocatedResources"], json!({"storage": "2Gi"}));
        let types: Vec<&Value> =
            started["status"]["conditions"].as_array().unwrap().iter().map(|c| &c["type"]).collect();
        assert_eq!(types, [&json!("ModifyingVolume"), &json!("Resizing")]);
        let mut c = c;
        c["status"]["allocatedResourceStatuses"] = json!({"storage": "ControllerResizeInProgress"});
        let finished = finished_patch(&c, &json!("2Gi"));
        assert_eq!(finished["status"]["capacity"], json!({"storage": "2Gi"}));
        assert_eq!(finished["status"]["allocatedResourceStatuses"], Value::Null, "emptied");
        assert_eq!(finished["status"]["conditions"], json!([{"type": "ModifyingVolume", "status": "True"}]));
        c["status"]["allocatedResourceStatuses"]["other"] = json!("x");
        c["status"]["conditions"] = json!([{"type": "Resizing", "status": "True"}]);
        let finished = finished_patch(&c, &json!("2Gi"));
        assert_eq!(finished["status"]["allocatedResourceStatuses"], json!({"storage": null}));
        assert_eq!(finished["status"]["conditions"], Value::Null, "emptied");
    }
}
