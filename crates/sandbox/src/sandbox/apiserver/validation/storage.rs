//! CSIDrivers, CSINodes and VolumeAttachments (`pkg/apis/storage/validation`): what the
//! attach/detach controller and the simulated CSI driver rely on. Names are checked with the
//! object metadata (DNS subdomains, as each kind's name rule).

use serde_json::Value;

use super::{FieldError, gojson, immutable, quote};
use crate::apimachinery::validation::{is_dns1123_subdomain, is_qualified_name};

/// `csiNodeIDMaxLength` (the longer limit needs a CSIDriver-specific option).
const CSI_NODE_ID_MAX_LENGTH: usize = 192;

/// Core's `ValidateCSIDriverName`: required (and then nothing else is said, since v1.35), at
/// most 63 characters, and (lower-cased) a DNS subdomain.
fn driver_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    if name.len() > 63 {
        causes.push(FieldError::too_long(path, 63));
    }
    let lower = name.to_lowercase();
    causes.extend(is_dns1123_subdomain(&lower).iter().map(|m| FieldError::invalid_str(path, name, m)));
    causes
}

/// `validateCSIDriverSpec`: the defaulted booleans must be set; known enum values.
pub(super) fn csi_driver(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    // Upstream's path says `attachedRequired`.
    for (field, path) in [
        ("attachRequired", "spec.attachedRequired"),
        ("podInfoOnMount", "spec.podInfoOnMount"),
        ("storageCapacity", "spec.storageCapacity"),
        ("seLinuxMount", "spec.seLinuxMount"),
    ] {
        if !spec[field].is_boolean() {
            causes.push(FieldError::required(path, ""));
        }
    }
    if let Some(policy) = spec["fsGroupPolicy"].as_str()
        && !matches!(policy, "File" | "None" | "ReadWriteOnceWithFSType")
    {
        causes.push(FieldError::not_supported(
            "spec.fsGroupPolicy",
            policy,
            &["File", "None", "ReadWriteOnceWithFSType"],
        ));
    }
    for mode in spec["volumeLifecycleModes"].as_array().into_iter().flatten() {
        let mode = mode.as_str().unwrap_or_default();
        if !matches!(mode, "Persistent" | "Ephemeral") {
            causes.push(FieldError::not_supported("spec.volumeLifecycleModes", mode, &["Persistent", "Ephemeral"]));
        }
    }
    causes
}

/// `ValidateCSIDriverUpdate`: `attachRequired` and the lifecycle modes are fixed.
pub(super) fn csi_driver_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if old["spec"]["attachRequired"] != new["spec"]["attachRequired"] {
        causes.push(immutable("spec.attachedRequired", new["spec"]["attachRequired"].to_string()));
    }
    if old["spec"]["volumeLifecycleModes"] != new["spec"]["volumeLifecycleModes"] {
        let modes = go_strings(&new["spec"]["volumeLifecycleModes"]);
        causes.push(immutable("spec.volumeLifecycleModes", modes));
    }
    causes
}

/// `validateCSINodeDrivers`: valid, distinct driver names, node IDs, topology keys.
pub(super) fn csi_node(object: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let mut seen = Vec::new();
    for (i, driver) in drivers(object).iter().enumerate() {
        let path = format!("spec.drivers[{i}]");
        let name = driver["name"].as_str().unwrap_or_default();
        causes.extend(driver_name(name, &format!("{path}.name")));
        let node_id = driver["nodeID"].as_str().unwrap_or_default();
        if node_id.is_empty() {
            causes.push(FieldError::required(&format!("{path}.nodeID"), ""));
        }
        if node_id.len() > CSI_NODE_ID_MAX_LENGTH {
            let detail = format!("must be {CSI_NODE_ID_MAX_LENGTH} characters or less");
            causes.push(FieldError::invalid_str(&format!("{path}.nodeID"), node_id, &detail));
        }
        if seen.contains(&name) {
            causes.push(FieldError::duplicate(&format!("{path}.name"), quote(name)));
        }
        seen.push(name);
        causes.extend(topology_keys(driver, &path));
    }
    causes
}

/// A slice of strings as a field error shows it: JSON, `null` if unset.
fn go_strings(list: &Value) -> String {
    gojson::untyped(list).json()
}

/// A `storage.CSINodeDriver` as a field error shows it.
fn go_csi_node_driver(driver: &Value) -> String {
    gojson::structure(driver, gojson::CSI_NODE_DRIVER).json()
}

/// A `storage.VolumeAttachmentSpec` as a field error shows it.
fn go_attachment_spec(spec: &Value) -> String {
    gojson::structure(spec, gojson::VOLUME_ATTACHMENT_SPEC).json()
}

fn drivers(object: &Value) -> Vec<Value> {
    object["spec"]["drivers"].as_array().cloned().unwrap_or_default()
}

fn topology_keys(driver: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let mut seen = Vec::new();
    for key in driver["topologyKeys"].as_array().into_iter().flatten() {
        let key = key.as_str().unwrap_or_default();
        if key.is_empty() {
            causes.push(FieldError::required(path, ""));
        }
        if seen.contains(&key) {
            causes.push(FieldError::duplicate(path, quote(key)));
        }
        seen.push(key);
        causes.extend(is_qualified_name(key).iter().map(|m| FieldError::invalid_str(path, key, m)));
    }
    causes
}

/// `ValidateCSINodeUpdate`: a driver listed before and after keeps its entry as it was, but
/// for its allocatable count (`MutableCSINodeAllocatableCount`, GA and on in v1.36: the entries
/// are compared, and shown, without it).
pub(super) fn csi_node_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let without_allocatable = |driver: &Value| {
        let mut driver = driver.clone();
        driver.as_object_mut().map(|m| m.remove("allocatable"));
        driver
    };
    let mut causes = Vec::new();
    for before in drivers(old) {
        for after in drivers(new) {
            let (before, after) = (without_allocatable(&before), without_allocatable(&after));
            if before["name"] == after["name"] && before != after {
                causes.push(immutable("spec.drivers", go_csi_node_driver(&after)));
            }
        }
    }
    causes
}

/// `ValidateVolumeAttachment` and `ValidateVolumeAttachmentV1`.
pub(super) fn volume_attachment(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    // v1.36's `validateVolumeAttachmentSpec`: the attacher as a CSI driver name, the source,
    // the node name; then the persistent volume's name.
    let attacher = spec["attacher"].as_str().unwrap_or_default();
    let mut causes = driver_name(attacher, "spec.attacher");
    let source = &spec["source"];
    let (inline, volume) = (!source["inlineVolumeSpec"].is_null(), source["persistentVolumeName"].as_str());
    const EXACTLY_ONE: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (inline, volume) {
        (false, None) => causes.push(FieldError::required("spec.source", EXACTLY_ONE)),
        (true, Some(_)) => causes.push(FieldError::forbidden("spec.source", EXACTLY_ONE)),
        (false, Some("")) => causes.push(FieldError::required(
            "spec.source.persistentVolumeName",
            "must specify non empty persistentVolumeName",
        )),
        _ => {}
    }
    let node = spec["nodeName"].as_str().unwrap_or_default();
    causes.extend(is_dns1123_subdomain(node).iter().map(|m| FieldError::invalid_str("spec.nodeName", node, m)));
    if let Some(name) = volume {
        causes.extend(
            is_dns1123_subdomain(name)
                .iter()
                .map(|m| FieldError::invalid_str("spec.source.persistentVolumeName", name, m)),
        );
    }
    causes
}

/// `ValidateVolumeAttachmentUpdate`: the spec is fixed.
pub(super) fn volume_attachment_update(old: &Value, new: &Value) -> Vec<FieldError> {
    if old["spec"] == new["spec"] { Vec::new() } else { vec![immutable("spec", go_attachment_spec(&new["spec"]))] }
}

/// `maxProvisionerParameterLen` and `maxProvisionerParameterSize`.
const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_BYTES: usize = 256 * 1024;

/// `ValidateVolumeAttributesClass`: a driver (`validateProvisioner`: required, a qualified name
/// once lower-cased) and at least one parameter (`validateParameters`: at most 512, 256 KiB
/// together, no empty key).
pub(super) fn volume_attributes_class(object: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let driver = object["driverName"].as_str().unwrap_or_default();
    if driver.is_empty() {
        causes.push(FieldError::required("driverName", ""));
    } else {
        causes.extend(
            is_qualified_name(&driver.to_lowercase())
                .iter()
                .map(|m| FieldError::invalid_str("driverName", &driver.to_lowercase(), m)),
        );
    }
    let parameters = object["parameters"].as_object();
    let count = parameters.map_or(0, |p| p.len());
    if count > MAX_PARAMETERS {
        causes.push(FieldError::too_long("parameters", MAX_PARAMETERS));
        return causes;
    }
    let mut size = 0;
    for (key, value) in parameters.into_iter().flatten() {
        if key.is_empty() {
            causes.push(FieldError::invalid_str("parameters", key, "field can not be empty."));
        }
        size += key.len() + value.as_str().map_or(0, str::len);
    }
    if size > MAX_PARAMETERS_BYTES {
        causes.push(FieldError::too_long("parameters", MAX_PARAMETERS_BYTES));
    }
    if count == 0 {
        causes.push(FieldError::required("parameters", "must contain at least one key/value pair"));
    }
    causes
}

/// `ValidateVolumeAttributesClassUpdate`: neither the driver nor the parameters change.
pub(super) fn volume_attributes_class_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if old["driverName"] != new["driverName"] {
        causes.push(FieldError::forbidden("driverName", "updates to driverName are forbidden."));
    }
    if old["parameters"] != new["parameters"] {
        causes.push(FieldError::forbidden("parameters", "updates to parameters are forbidden."));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(causes: &[FieldError]) -> Vec<String> {
        causes.iter().map(|c| c.body()).collect()
    }

    #[test]
    fn attachments_need_an_attacher_a_source_and_a_node() {
        let good = json!({"spec": {"attacher": "csi.example.dev", "nodeName": "node-a",
            "source": {"persistentVolumeName": "pv1"}}});
        assert!(volume_attachment(&good).is_empty());
        let bad = json!({"spec": {"attacher": "", "nodeName": "Node_A", "source": {}}});
        let causes = volume_attachment(&bad);
        // The attacher (required, then nothing more), the source, the node name.
        assert_eq!(causes.len(), 3, "{:?}", fields(&causes));
        assert_eq!(fields(&causes)[0], "Required value");
        assert!(fields(&causes)[1].contains("must specify exactly one of inlineVolumeSpec and persistentVolumeName"));
        let mut moved = good.clone();
        moved["spec"]["nodeName"] = json!("node-b");
        assert_eq!(volume_attachment_update(&good, &moved).len(), 1);
    }

    #[test]
    fn drivers_keep_their_defaults_and_attachment_mode() {
        let driver = json!({"spec": {"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
            "seLinuxMount": false, "volumeLifecycleModes": ["Persistent"]}});
        assert!(csi_driver(&driver).is_empty());
        assert_eq!(csi_driver(&json!({"spec": {}})).len(), 4);
        let mut changed = driver.clone();
        changed["spec"]["attachRequired"] = json!(false);
        assert_eq!(csi_driver_update(&driver, &changed).len(), 1);
    }

    #[test]
    fn csi_nodes_list_each_driver_once_with_an_id() {
        let node = json!({"spec": {"drivers": [{"name": "csi.example.dev", "nodeID": "n1",
            "topologyKeys": ["topology.kubernetes.io/zone"]}]}});
        assert!(csi_node(&node).is_empty());
        let twice = json!({"spec": {"drivers": [{"name": "d", "nodeID": "n1"}, {"name": "d", "nodeID": ""}]}});
        assert_eq!(csi_node(&twice).len(), 2);
        let mut moved = node.clone();
        moved["spec"]["drivers"][0]["nodeID"] = json!("n2");
        assert_eq!(csi_node_update(&node, &moved).len(), 1);
        let mut added = node.clone();
        added["spec"]["drivers"]
            .as_array_mut()
            .expect("drivers")
            .push(json!({"name": "other.example.dev", "nodeID": "n1"}));
        assert!(csi_node_update(&node, &added).is_empty(), "a driver may be added");
    }
}
