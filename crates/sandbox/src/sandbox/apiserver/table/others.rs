//! More of kube-apiserver's table printers (pkg/printers/internalversion/printers.go, v1.36):
//! events.k8s.io Events, RBAC bindings, controller revisions, pod templates, storage,
//! scheduling, networking, certificates and resource.k8s.io (DRA).

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::duration::{human_duration, since};
use super::printers::{
    AGE, CONTAINERS_DOC, Column, EVENT, IMAGES_DOC, NAME, Printer, Row, age, array, canonical, containers, event_row,
    format_label_selector, format_labels, integer, len_of, name, or, string, text, wide,
};

/// The printer for a kind [`super::printers::printer_for`] does not cover.
pub fn printer_for(group: &str, kind: &str) -> Option<&'static Printer> {
    let printer = match (group, kind) {
        ("events.k8s.io", "Event") => &EVENTS_V1,
        ("rbac.authorization.k8s.io", "RoleBinding") => &ROLE_BINDING,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => &CLUSTER_ROLE_BINDING,
        ("apps", "ControllerRevision") => &CONTROLLER_REVISION,
        ("", "PodTemplate") => &POD_TEMPLATE,
        ("", "PersistentVolume") => &PERSISTENT_VOLUME,
        ("", "PersistentVolumeClaim") => &PERSISTENT_VOLUME_CLAIM,
        ("storage.k8s.io", "StorageClass") => &STORAGE_CLASS,
        ("storage.k8s.io", "CSINode") => &CSI_NODE,
        ("storage.k8s.io", "CSIDriver") => &CSI_DRIVER,
        ("autoscaling", "HorizontalPodAutoscaler") => &HORIZONTAL_POD_AUTOSCALER,
        ("storage.k8s.io", "VolumeAttachment") => &VOLUME_ATTACHMENT,
        ("scheduling.k8s.io", "PriorityClass") => &PRIORITY_CLASS,
        ("networking.k8s.io", "NetworkPolicy") => &NETWORK_POLICY,
        ("networking.k8s.io", "Ingress") => &INGRESS,
        ("certificates.k8s.io", "CertificateSigningRequest") => &CERTIFICATE_SIGNING_REQUEST,
        ("apiregistration.k8s.io", "APIService") => &API_SERVICE,
        ("storage.k8s.io", "VolumeAttributesClass") => &VOLUME_ATTRIBUTES_CLASS,
        ("networking.k8s.io", "IPAddress") => &IP_ADDRESS,
        ("networking.k8s.io", "ServiceCIDR") => &SERVICE_CIDR,
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => &VALIDATING_ADMISSION_POLICY,
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => &VALIDATING_ADMISSION_POLICY_BINDING,
        ("resource.k8s.io", "DeviceClass" | "ResourceClaimTemplate") => &NAME_AND_AGE,
        ("resource.k8s.io", "ResourceClaim") => &RESOURCE_CLAIM,
        ("resource.k8s.io", "ResourceSlice") => &RESOURCE_SLICE,
        _ => return None,
    };
    Some(printer)
}

const fn boolean(name: &'static str, description: &'static str) -> Column {
    Column::new(name, "boolean", "", description, 0)
}

fn flag(object: &Value, pointer: &str, default: bool) -> bool {
    object.pointer(pointer).and_then(Value::as_bool).unwrap_or(default)
}

// --- events.k8s.io -----------------------------------------------------------------------

/// events.k8s.io Events print as core Events, as the server converts them to the internal
/// type first.
const EVENTS_V1: Printer = Printer { columns: EVENT.columns, row: events_v1_row };

fn events_v1_row(event: &Value, now: Timestamp) -> Row {
    event_row(&crate::sandbox::apiserver::convert::events_v1_as_core(event), now)
}

// --- RBAC --------------------------------------------------------------------------------

const ROLE_BINDING: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Role",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        ),
        AGE,
        wide("Users", "Users in the roleBinding"),
        wide("Groups", "Groups in the roleBinding"),
        wide("ServiceAccounts", "ServiceAccounts in the roleBinding"),
    ],
    row: binding_row,
};

const CLUSTER_ROLE_BINDING: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Role",
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        ),
        AGE,
        wide("Users", "Users in the clusterRoleBinding"),
        wide("Groups", "Groups in the clusterRoleBinding"),
        wide("ServiceAccounts", "ServiceAccounts in the clusterRoleBinding"),
    ],
    row: binding_row,
};

/// `printRoleBinding` / `printClusterRoleBinding` with `rbac.SubjectsStrings`.
fn binding_row(binding: &Value, now: Timestamp) -> Row {
    let (mut users, mut groups, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in array(binding, "/subjects") {
        match text(subject, "/kind") {
            "User" => users.push(text(subject, "/name").to_string()),
            "Group" => groups.push(text(subject, "/name").to_string()),
            "ServiceAccount" => accounts.push(format!("{}/{}", text(subject, "/namespace"), text(subject, "/name"))),
            _ => {}
        }
    }
    Row::new(vec![
        name(binding),
        json!(format!("{}/{}", text(binding, "/roleRef/kind"), text(binding, "/roleRef/name"))),
        age(binding, now),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(accounts.join(", ")),
    ])
}

// --- Workload support --------------------------------------------------------------------

const CONTROLLER_REVISION: Printer = Printer {
    columns: &[
        NAME,
        string("Controller", "Controller of the object"),
        string("Revision", "Revision indicates the revision of the state represented by Data."),
        AGE,
    ],
    row: controller_revision_row,
};

/// `printControllerRevision`: the controller as `kind.group/name` in lower case.
fn controller_revision_row(revision: &Value, now: Timestamp) -> Row {
    let owner = array(revision, "/metadata/ownerReferences").iter().find(|o| o["controller"] == true);
    let controller = match owner {
        None => "<none>".to_string(),
        Some(owner) => {
            let api_version = text(owner, "/apiVersion");
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            let kind = text(owner, "/kind");
            let group_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
            if group_kind.is_empty() {
                text(owner, "/name").to_string()
            } else {
                format!("{}/{}", group_kind.to_lowercase(), text(owner, "/name"))
            }
        }
    };
    let number = revision.get("revision").and_then(Value::as_i64).unwrap_or_default();
    Row::new(vec![name(revision), json!(controller), json!(number), age(revision, now)])
}

const POD_TEMPLATE: Printer = Printer {
    columns: &[
        NAME,
        string("Containers", CONTAINERS_DOC),
        string("Images", IMAGES_DOC),
        string("Pod Labels", "The labels for the pod template."),
    ],
    row: pod_template_row,
};

/// `printPodTemplate`.
fn pod_template_row(template: &Value, _now: Timestamp) -> Row {
    let (names, images) = containers(template, "/template/spec/containers");
    Row::new(vec![name(template), names, images, json!(format_labels(template.pointer("/template/metadata/labels")))])
}

// --- Storage -----------------------------------------------------------------------------

const PERSISTENT_VOLUME: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Capacity",
            "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
        ),
        string(
            "Access Modes",
            "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes",
        ),
        string(
            "Reclaim Policy",
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
        ),
        string(
            "Status",
            "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
        ),
        string(
            "Claim",
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
        ),
        string("StorageClass", "StorageClass of the pv"),
        string("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
        string(
            "Reason",
            "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        ),
        AGE,
        wide(
            "VolumeMode",
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
        ),
    ],
    row: persistent_volume_row,
};

/// `helper.GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order.
fn access_modes(object: &Value, pointer: &str) -> String {
    let modes: BTreeSet<&str> = array(object, pointer).iter().filter_map(Value::as_str).collect();
    let known =
        [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")];
    known.iter().filter(|(mode, _)| modes.contains(mode)).map(|(_, short)| *short).collect::<Vec<_>>().join(",")
}

/// `GetPersistentVolumeClass` / `GetPersistentVolumeClaimClass`: the beta annotation first.
fn storage_class(object: &Value) -> String {
    match object.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").and_then(Value::as_str) {
        Some(class) => class.to_string(),
        None => text(object, "/spec/storageClassName").to_string(),
    }
}

fn deleting(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null())
}

/// `printPersistentVolume`.
fn persistent_volume_row(volume: &Value, now: Timestamp) -> Row {
    let claim = match volume.pointer("/spec/claimRef").filter(|c| c.is_object()) {
        Some(claim) => format!("{}/{}", text(claim, "/namespace"), text(claim, "/name")),
        None => String::new(),
    };
    let phase = if deleting(volume) { "Terminating" } else { text(volume, "/status/phase") };
    Row::new(vec![
        name(volume),
        json!(canonical(volume.pointer("/spec/capacity/storage"))),
        json!(access_modes(volume, "/spec/accessModes")),
        json!(text(volume, "/spec/persistentVolumeReclaimPolicy")),
        json!(phase),
        json!(claim),
        json!(storage_class(volume)),
        json!(or(text(volume, "/spec/volumeAttributesClassName"), "<unset>")),
        json!(text(volume, "/status/reason")),
        age(volume, now),
        json!(or(text(volume, "/spec/volumeMode"), "<unset>")),
    ])
}

const PERSISTENT_VOLUME_CLAIM: Printer = Printer {
    columns: &[
        NAME,
        string("Status", "phase represents the current phase of PersistentVolumeClaim."),
        string("Volume", "volumeName is the binding reference to the PersistentVolume backing this claim."),
        string("Capacity", "capacity represents the actual resources of the underlying volume."),
        string(
            "Access Modes",
            "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
        ),
        string("StorageClass", "StorageClass of the pvc"),
        string("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
        AGE,
        wide(
            "VolumeMode",
            "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
        ),
    ],
    row: persistent_volume_claim_row,
};

/// `printPersistentVolumeClaim`: capacity and access modes once bound to a volume.
fn persistent_volume_claim_row(claim: &Value, now: Timestamp) -> Row {
    let phase = if deleting(claim) { "Terminating" } else { text(claim, "/status/phase") };
    let volume = text(claim, "/spec/volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (canonical(claim.pointer("/status/capacity/storage")), access_modes(claim, "/status/accessModes"))
    };
    Row::new(vec![
        name(claim),
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(storage_class(claim)),
        json!(or(text(claim, "/spec/volumeAttributesClassName"), "<unset>")),
        age(claim, now),
        json!(or(text(claim, "/spec/volumeMode"), "<unset>")),
    ])
}

const STORAGE_CLASS: Printer = Printer {
    columns: &[
        NAME,
        string("Provisioner", "provisioner indicates the type of the provisioner."),
        string(
            "ReclaimPolicy",
            "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
        ),
        string(
            "VolumeBindingMode",
            "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
        ),
        string("AllowVolumeExpansion", "allowVolumeExpansion shows whether the storage class allow volume expand."),
        AGE,
    ],
    row: storage_class_row,
};

/// `printStorageClass`: the default class is marked "(default)".
fn storage_class_row(class: &Value, now: Timestamp) -> Row {
    let annotation = |key: &str| {
        class.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str) == Some("true")
    };
    let is_default = annotation("storageclass.kubernetes.io/is-default-class")
        || annotation("storageclass.beta.kubernetes.io/is-default-class");
    let class_name = text(class, "/metadata/name");
    let shown = if is_default { format!("{class_name} (default)") } else { class_name.to_string() };
    Row::new(vec![
        json!(shown),
        json!(text(class, "/provisioner")),
        json!(or(text(class, "/reclaimPolicy"), "Delete")),
        json!(or(text(class, "/volumeBindingMode"), "Immediate")),
        json!(flag(class, "/allowVolumeExpansion", false)),
        age(class, now),
    ])
}

const VOLUME_ATTRIBUTES_CLASS: Printer = Printer {
    columns: &[NAME, string("DriverName", "Name of the CSI driver This field is immutable."), AGE],
    row: volume_attributes_class_row,
};

/// `printVolumeAttributesClass`.
fn volume_attributes_class_row(class: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(class), json!(text(class, "/driverName")), age(class, now)])
}

const CSI_NODE: Printer = Printer {
    columns: &[NAME, integer("Drivers", "Drivers indicates the number of CSI drivers registered on the node"), AGE],
    row: csi_node_row,
};

/// `printCSINode`.
fn csi_node_row(node: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(node), json!(len_of(node, "/spec/drivers")), age(node, now)])
}

const VOLUME_ATTACHMENT: Printer = Printer {
    columns: &[
        NAME,
        // Upstream marks this column, too, as a name.
        Column::new(
            "Attacher",
            "string",
            "name",
            "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().",
            0,
        ),
        string("PV", "persistentVolumeName represents the name of the persistent volume to attach."),
        string("Node", "nodeName represents the node that the volume should be attached to."),
        boolean(
            "Attached",
            "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.",
        ),
        AGE,
    ],
    row: volume_attachment_row,
};

/// `printVolumeAttachment`.
fn volume_attachment_row(attachment: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        name(attachment),
        json!(text(attachment, "/spec/attacher")),
        json!(text(attachment, "/spec/source/persistentVolumeName")),
        json!(text(attachment, "/spec/nodeName")),
        json!(flag(attachment, "/status/attached", false)),
        age(attachment, now),
    ])
}

const CSI_DRIVER: Printer = Printer {
    columns: &[
        NAME,
        boolean(
            "AttachRequired",
            "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.",
        ),
        boolean(
            "PodInfoOnMount",
            "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. \"csi.storage.k8s.io/pod.name\": pod.Name \"csi.storage.k8s.io/pod.namespace\": pod.Namespace \"csi.storage.k8s.io/pod.uid\": string(pod.UID) \"csi.storage.k8s.io/ephemeral\": \"true\" if the volume is an ephemeral inline volume\n                                defined by a CSIVolumeSource, otherwise \"false\"\n\n\"csi.storage.k8s.io/ephemeral\" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the \"Persistent\" and \"Ephemeral\" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn't support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable.",
        ),
        boolean(
            "StorageCapacity",
            "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check can be enabled immediately when deploying a driver. In that case, provisioning new volumes with late binding will pause until the driver deployment has published some suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed with the field unset or false and it can be flipped later when storage capacity information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 and now is mutable.",
        ),
        string(
            "TokenRequests",
            "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and validate the following VolumeContext: \"csi.storage.k8s.io/serviceAccount.tokens\": {\n  \"<audience>\": {\n    \"token\": <token>,\n    \"expirationTimestamp\": <expiration timestamp in RFC3339>,\n  },\n  ...\n}\n\nNote: Audience in each TokenRequest should be different and at most one token is empty string. To receive a new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume periodically.",
        ),
        boolean(
            "RequiresRepublish",
            "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.\n\nNote: After a successful initial NodePublishVolume call, subsequent calls to NodePublishVolume should only update the contents of the volume. New mount points will not be seen by a running container.",
        ),
        string(
            "Modes",
            "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe other mode is \"Ephemeral\". In this mode, volumes are defined inline inside the pod spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A driver has to be aware of this because it is only going to get a NodePublishVolume call for such a volume.\n\nFor more information about implementing this mode, see https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can support one or more of these modes and more modes may be added in the future.\n\nThis field is beta. This field is immutable.",
        ),
        AGE,
    ],
    row: csi_driver_row,
};

/// `printCSIDriver`: attach required unless said otherwise; the token audiences.
fn csi_driver_row(driver: &Value, now: Timestamp) -> Row {
    let token_requests = match driver.pointer("/spec/tokenRequests").and_then(Value::as_array) {
        Some(requests) => requests.iter().map(|r| text(r, "/audience")).collect::<Vec<_>>().join(","),
        None => "<unset>".into(),
    };
    let modes: Vec<&str> = array(driver, "/spec/volumeLifecycleModes").iter().filter_map(Value::as_str).collect();
    Row::new(vec![
        name(driver),
        json!(flag(driver, "/spec/attachRequired", true)),
        json!(flag(driver, "/spec/podInfoOnMount", false)),
        json!(flag(driver, "/spec/storageCapacity", false)),
        json!(token_requests),
        json!(flag(driver, "/spec/requiresRepublish", false)),
        json!(or(&modes.join(","), "<none>")),
        age(driver, now),
    ])
}

const HORIZONTAL_POD_AUTOSCALER: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Reference",
            "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
        ),
        string(
            "Targets",
            "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.",
        ),
        string(
            "MinPods",
            "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
        ),
        string(
            "MaxPods",
            "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
        ),
        string(
            "Replicas",
            "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
        ),
        AGE,
    ],
    row: horizontal_pod_autoscaler_row,
};

/// `printHorizontalPodAutoscaler`.
fn horizontal_pod_autoscaler_row(hpa: &Value, now: Timestamp) -> Row {
    let reference = format!("{}/{}", text(hpa, "/spec/scaleTargetRef/kind"), text(hpa, "/spec/scaleTargetRef/name"));
    let min_pods = hpa.pointer("/spec/minReplicas").and_then(Value::as_i64).map_or("<unset>".into(), |m| m.to_string());
    Row::new(vec![
        name(hpa),
        json!(reference),
        json!(format_hpa_metrics(array(hpa, "/spec/metrics"), array(hpa, "/status/currentMetrics"))),
        json!(min_pods),
        json!(hpa.pointer("/spec/maxReplicas").and_then(Value::as_i64).unwrap_or_default()),
        json!(hpa.pointer("/status/currentReplicas").and_then(Value::as_i64).unwrap_or_default()),
        age(hpa, now),
    ])
}

/// `formatHPAMetrics`: "current/target" per metric (resources prefixed by their name), two
/// at most, then "+ N more...".
fn format_hpa_metrics(specs: &[Value], statuses: &[Value]) -> String {
    const MAX: usize = 2;
    if specs.is_empty() {
        return "<none>".into();
    }
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let status = statuses.get(i);
            let source = |field: &str| status.and_then(|s| s.get(field)).filter(|v| v.is_object());
            let quantity = |value: Option<&Value>| canonical(value);
            match text(spec, "/type") {
                kind @ ("External" | "Object") => {
                    let field = if kind == "External" { "external" } else { "object" };
                    let target = &spec[field]["target"];
                    if target.get("averageValue").is_some_and(|v| !v.is_null()) {
                        let current = source(field)
                            .and_then(|s| s.pointer("/current/averageValue"))
                            .filter(|v| !v.is_null())
                            .map_or("<unknown>".into(), |v| quantity(Some(v)));
                        format!("{current}/{} (avg)", quantity(target.get("averageValue")))
                    } else {
                        let current =
                            source(field).map_or("<unknown>".into(), |s| quantity(s.pointer("/current/value")));
                        format!("{current}/{}", quantity(target.get("value")))
                    }
                }
                "Pods" => {
                    let current =
                        source("pods").map_or("<unknown>".into(), |s| quantity(s.pointer("/current/averageValue")));
                    format!("{current}/{}", quantity(spec.pointer("/pods/target/averageValue")))
                }
                kind @ ("Resource" | "ContainerResource") => {
                    let field = if kind == "Resource" { "resource" } else { "containerResource" };
                    let metric = &spec[field];
                    let resource = text(metric, "/name");
                    if metric.pointer("/target/averageValue").is_some_and(|v| !v.is_null()) {
                        let current =
                            source(field).map_or("<unknown>".into(), |s| quantity(s.pointer("/current/averageValue")));
                        format!("{resource}: {current}/{}", quantity(metric.pointer("/target/averageValue")))
                    } else {
                        let current = source(field)
                            .and_then(|s| s.pointer("/current/averageUtilization"))
                            .and_then(Value::as_i64)
                            .map_or("<unknown>".into(), |u| format!("{u}%"));
                        let target = metric
                            .pointer("/target/averageUtilization")
                            .and_then(Value::as_i64)
                            .map_or("<auto>".into(), |u| format!("{u}%"));
                        format!("{resource}: {current}/{target}")
                    }
                }
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    if list.len() > MAX {
        format!("{} + {} more...", list[..MAX].join(", "), list.len() - MAX)
    } else {
        list.join(", ")
    }
}

// --- apiregistration.k8s.io --------------------------------------------------------------

/// kube-aggregator's own table (`registry/apiservice/etcd`): where the API is served and
/// whether it is available.
const API_SERVICE: Printer = Printer {
    columns: &[
        NAME,
        string("Service", "The reference to the service that hosts this API endpoint."),
        string("Available", "Whether this service is available."),
        AGE,
    ],
    row: api_service_row,
};

fn api_service_row(service: &Value, now: Timestamp) -> Row {
    let reference = &service["spec"]["service"];
    let host = match reference["name"].as_str() {
        Some(name) => format!("{}/{name}", reference["namespace"].as_str().unwrap_or_default()),
        None => "Local".to_string(),
    };
    let conditions = service["status"]["conditions"].as_array().into_iter().flatten();
    let available = match conditions.into_iter().find(|c| c["type"] == "Available") {
        None => "Unknown".to_string(),
        Some(c) if c["status"] == "True" => "True".to_string(),
        Some(c) => match c["reason"].as_str().filter(|r| !r.is_empty()) {
            Some(reason) => format!("{} ({reason})", c["status"].as_str().unwrap_or_default()),
            None => c["status"].as_str().unwrap_or_default().to_string(),
        },
    };
    Row::new(vec![name(service), json!(host), json!(available), age(service, now)])
}

// --- Scheduling, networking, certificates ------------------------------------------------

const PRIORITY_CLASS: Printer = Printer {
    columns: &[
        NAME,
        integer(
            "Value",
            "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
        ),
        boolean(
            "Global-Default",
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
        ),
        AGE,
        string(
            "PreemptionPolicy",
            "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
        ),
    ],
    row: priority_class_row,
};

/// `printPriorityClass`.
fn priority_class_row(class: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        name(class),
        json!(class.get("value").and_then(Value::as_i64).unwrap_or_default()),
        json!(flag(class, "/globalDefault", false)),
        age(class, now),
        json!(text(class, "/preemptionPolicy")),
    ])
}

const NETWORK_POLICY: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Pod-Selector",
            "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is optional. If it is not specified, it defaults to an empty selector.",
        ),
        AGE,
    ],
    row: network_policy_row,
};

/// `printNetworkPolicy`.
fn network_policy_row(policy: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        name(policy),
        json!(format_label_selector(Some(policy.pointer("/spec/podSelector").unwrap_or(&json!({}))))),
        age(policy, now),
    ])
}

const INGRESS: Printer = Printer {
    columns: &[
        NAME,
        string("Class", "The name of the IngressClass resource that should be used for additional configuration"),
        string("Hosts", "Hosts that incoming requests are matched against before the ingress rule"),
        string("Address", "Address is a list containing ingress points for the load-balancer"),
        string("Ports", "Ports of TLS configurations that open"),
        AGE,
    ],
    row: ingress_row,
};

/// `printIngress` with `formatHosts` (up to three, then "+ N more...") and `formatPorts`.
fn ingress_row(ingress: &Value, now: Timestamp) -> Row {
    const MAX: usize = 3;
    let rules = array(ingress, "/spec/rules");
    let (mut hosts, mut more) = (Vec::new(), false);
    for rule in rules {
        more |= hosts.len() == MAX;
        if !more && !text(rule, "/host").is_empty() {
            hosts.push(text(rule, "/host"));
        }
    }
    let hosts = match (hosts.is_empty(), more) {
        (true, _) => "*".to_string(),
        (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - MAX),
        (false, false) => hosts.join(","),
    };
    let addresses: BTreeSet<&str> = array(ingress, "/status/loadBalancer/ingress")
        .iter()
        .filter_map(|i| [text(i, "/ip"), text(i, "/hostname")].into_iter().find(|s| !s.is_empty()))
        .collect();
    let ports = if array(ingress, "/spec/tls").is_empty() { "80" } else { "80, 443" };
    Row::new(vec![
        name(ingress),
        json!(or(text(ingress, "/spec/ingressClassName"), "<none>")),
        json!(hosts),
        json!(addresses.into_iter().collect::<Vec<_>>().join(",")),
        json!(ports),
        age(ingress, now),
    ])
}

const CERTIFICATE_SIGNING_REQUEST: Printer = Printer {
    columns: &[
        NAME,
        AGE,
        string(
            "SignerName",
            "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`.",
        ),
        // Upstream describes REQUESTOR with the `request` field's documentation.
        string("Requestor", "Base64-encoded PKCS#10 CSR data"),
        string(
            "RequestedDuration",
            "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.\n\nThe v1.22+ in-tree implementations of the well-known Kubernetes signers will honor this field as long as the requested duration is not greater than the maximum duration they will honor per the --cluster-signing-duration CLI flag to the Kubernetes controller manager.\n\nCertificate signers may not honor this field for various reasons:\n\n  1. Old signer that is unaware of the field (such as the in-tree\n     implementations prior to v1.22)\n  2. Signer whose configured maximum is shorter than the requested duration\n  3. Signer whose configured minimum is longer than the requested duration\n\nThe minimum valid value for expirationSeconds is 600, i.e. 10 minutes.",
        ),
        string("Condition", "Conditions applied to the request, such as approval or denial."),
    ],
    row: certificate_signing_request_row,
};

/// `printCertificateSigningRequest` with `extractCSRStatus`: Denied, Approved or Pending,
/// then ",Failed" and ",Issued".
fn certificate_signing_request_row(csr: &Value, now: Timestamp) -> Row {
    let has = |kind: &str| array(csr, "/status/conditions").iter().any(|c| c["type"] == kind);
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !text(csr, "/status/certificate").is_empty() {
        status.push_str(",Issued");
    }
    let duration = match csr.pointer("/spec/expirationSeconds").and_then(Value::as_i64) {
        Some(seconds) => human_duration(i128::from(seconds) * 1_000_000_000),
        None => "<none>".into(),
    };
    Row::new(vec![
        name(csr),
        json!(since(csr.pointer("/metadata/creationTimestamp"), now)),
        json!(or(text(csr, "/spec/signerName"), "<none>")),
        json!(text(csr, "/spec/username")),
        json!(duration),
        json!(status),
    ])
}

// --- networking and admission policies --------------------------------------------------

/// `printIPAddress`. Its column definitions name no Age column, though each row ends with one.
const IP_ADDRESS: Printer = Printer {
    columns: &[
        NAME,
        string(
            "ParentRef",
            "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object.",
        ),
    ],
    row: ip_address_row,
};

fn ip_address_row(address: &Value, now: Timestamp) -> Row {
    let parent = match address.pointer("/spec/parentRef").filter(|p| p.is_object()) {
        None => "<none>".to_string(),
        Some(parent) => {
            let (group, resource) = (text(parent, "/group"), text(parent, "/resource"));
            let mut name = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
            name = name.to_lowercase();
            let namespace = text(parent, "/namespace");
            if !namespace.is_empty() {
                name = format!("{name}/{namespace}");
            }
            format!("{name}/{}", text(parent, "/name"))
        }
    };
    Row::new(vec![name(address), json!(parent), age(address, now)])
}

const SERVICE_CIDR: Printer = Printer {
    columns: &[
        NAME,
        string(
            "CIDRs",
            "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.",
        ),
        AGE,
    ],
    row: service_cidr_row,
};

/// `printServiceCIDR`.
fn service_cidr_row(cidr: &Value, now: Timestamp) -> Row {
    let cidrs: Vec<&str> = array(cidr, "/spec/cidrs").iter().filter_map(Value::as_str).collect();
    Row::new(vec![name(cidr), json!(cidrs.join(",")), age(cidr, now)])
}

const VALIDATING_ADMISSION_POLICY: Printer = Printer {
    columns: &[
        NAME,
        integer("Validations", "Validations indicates the number of validation rules defined in this configuration"),
        string("ParamKind", "ParamKind specifies the kind of resources used to parameterize this policy"),
        AGE,
    ],
    row: validating_admission_policy_row,
};

/// `printValidatingAdmissionPolicy`.
fn validating_admission_policy_row(policy: &Value, now: Timestamp) -> Row {
    let param_kind = match policy.pointer("/spec/paramKind").filter(|p| p.is_object()) {
        Some(kind) => format!("{}/{}", text(kind, "/apiVersion"), text(kind, "/kind")),
        None => "<unset>".into(),
    };
    Row::new(vec![name(policy), json!(len_of(policy, "/spec/validations")), json!(param_kind), age(policy, now)])
}

const VALIDATING_ADMISSION_POLICY_BINDING: Printer = Printer {
    columns: &[
        NAME,
        string("PolicyName", "PolicyName indicates the policy definition which the policy binding binded to"),
        string("ParamRef", "ParamRef indicates the param resource which sets the configuration param"),
        AGE,
    ],
    row: validating_admission_policy_binding_row,
};

/// `printValidatingAdmissionPolicyBinding`; a parameter selector shows as its generated
/// `String()` (`&LabelSelector{...}`).
fn validating_admission_policy_binding_row(binding: &Value, now: Timestamp) -> Row {
    let param = match binding.pointer("/spec/paramRef").filter(|p| p.is_object()) {
        None => "<unset>".to_string(),
        Some(param) => match (text(param, "/name"), text(param, "/namespace")) {
            ("", _) if param["selector"].is_object() => go_label_selector_string(&param["selector"]),
            ("", _) => "<unset>".to_string(),
            (name, "") => format!("*/{name}"),
            (name, namespace) => format!("{namespace}/{name}"),
        },
    };
    Row::new(vec![name(binding), json!(text(binding, "/spec/policyName")), json!(param), age(binding, now)])
}

/// The gogo-protobuf `String()` of a `metav1.LabelSelector`.
fn go_label_selector_string(selector: &Value) -> String {
    let labels: Vec<String> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {},", v.as_str().unwrap_or_default()))
        .collect();
    let expressions: Vec<String> = array(selector, "/matchExpressions")
        .iter()
        .map(|r| {
            let values: Vec<String> =
                array(r, "/values").iter().map(|v| format!("{:?}", v.as_str().unwrap_or_default())).collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[]string{{{}}},}},",
                text(r, "/key"),
                text(r, "/operator"),
                values.join(",")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{}}},MatchExpressions:[]LabelSelectorRequirement{{{}}},}}",
        labels.join(""),
        expressions.join("")
    )
}

// --- resource.k8s.io ---------------------------------------------------------------------

/// `printDeviceClass` and `printResourceClaimTemplate`.
const NAME_AND_AGE: Printer = Printer { columns: &[NAME, AGE], row: name_and_age_row };

fn name_and_age_row(object: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(object), age(object, now)])
}

const RESOURCE_CLAIM: Printer = Printer {
    columns: &[NAME, string("State", "A summary of the current state (allocated, pending, reserved, etc.)."), AGE],
    row: resource_claim_row,
};

/// `printResourceClaim`, its state as `resourceClaimState` sums it up.
fn resource_claim_row(claim: &Value, now: Timestamp) -> Row {
    let deleted = !claim["metadata"]["deletionTimestamp"].is_null();
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if claim["status"]["allocation"].is_null() {
        if !deleted {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if !array(claim, "/status/reservedFor").is_empty() {
            states.push("reserved");
        }
    }
    Row::new(vec![name(claim), json!(states.join(",")), age(claim, now)])
}

const RESOURCE_SLICE: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Node",
            "NodeName identifies the node which provides the resources in this pool. A field selector can be used to list only ResourceSlice objects belonging to a certain node.\n\nThis field can be used to limit access from nodes to ResourceSlices with the same node name. It also indicates to autoscalers that adding new nodes of the same type as some old node might also make new resources available.\n\nExactly one of NodeName, NodeSelector, AllNodes, and PerDeviceNodeSelection must be set. This field is immutable.",
        ),
        string(
            "Driver",
            "Driver identifies the DRA driver providing the capacity information. A field selector can be used to list only ResourceSlice objects with a certain driver name.\n\nMust be a DNS subdomain and should end with a DNS domain owned by the vendor of the driver. It should use only lower case characters. This field is immutable.",
        ),
        string(
            "Pool",
            "Name is used to identify the pool. For node-local devices, this is often the node name, but this is not required.\n\nIt must not be longer than 253 characters and must consist of one or more DNS sub-domains separated by slashes. This field is immutable.",
        ),
        AGE,
    ],
    row: resource_slice_row,
};

/// `printResourceSlice`.
fn resource_slice_row(slice: &Value, now: Timestamp) -> Row {
    Row::new(vec![
        name(slice),
        json!(text(slice, "/spec/nodeName")),
        json!(text(slice, "/spec/driver")),
        json!(text(slice, "/spec/pool/name")),
        age(slice, now),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2025-06-01T12:00:00Z";

    fn cells(group: &str, kind: &str, object: Value) -> Vec<Value> {
        (printer_for(group, kind).expect(kind).row)(&object, NOW.parse().unwrap()).cells
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "creationTimestamp": "2025-06-01T11:00:00Z"})
    }

    #[test]
    fn api_services_show_their_service_and_availability() {
        let local = json!({"metadata": meta("v1.apps"), "spec": {"group": "apps", "version": "v1"},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(
            cells("apiregistration.k8s.io", "APIService", local),
            [json!("v1.apps"), json!("Local"), json!("True"), json!("60m")]
        );
        let remote = json!({"metadata": meta("v1beta1.metrics.k8s.io"),
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(
            cells("apiregistration.k8s.io", "APIService", remote)[1..3],
            [json!("kube-system/metrics-server"), json!("False (MissingEndpoints)")]
        );
        let fresh = json!({"metadata": meta("v1.x")});
        assert_eq!(cells("apiregistration.k8s.io", "APIService", fresh)[2], json!("Unknown"));
    }

    #[test]
    fn events_v1_print_as_core_events() {
        let event = json!({
            "metadata": meta("web.1"), "regarding": {"kind": "Pod", "name": "web"}, "note": "Pulled", "reason": "Pulled",
            "type": "Normal", "eventTime": "2025-06-01T11:59:00.000000Z", "reportingController": "kubelet",
            "reportingInstance": "node-a", "series": {"count": 3, "lastObservedTime": "2025-06-01T11:59:30.000000Z"},
        });
        assert_eq!(
            cells("events.k8s.io", "Event", event),
            [
                json!("30s"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/web"),
                json!(""),
                json!("kubelet, node-a"),
                json!("Pulled"),
                json!("60s"),
                json!(3),
                json!("web.1")
            ]
        );
    }

    #[test]
    fn bindings_and_revisions() {
        let binding = json!({
            "metadata": meta("read"), "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "ann"}, {"kind": "User", "name": "bob"}, {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "namespace": "ci", "name": "bot"}],
        });
        assert_eq!(
            cells("rbac.authorization.k8s.io", "RoleBinding", binding.clone()),
            [json!("read"), json!("ClusterRole/view"), json!("60m"), json!("ann, bob"), json!("devs"), json!("ci/bot")]
        );
        assert_eq!(cells("rbac.authorization.k8s.io", "ClusterRoleBinding", binding)[1], "ClusterRole/view");
        let mut revision = json!({"metadata": meta("db-6f7"), "revision": 2});
        revision["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": true}]);
        assert_eq!(
            cells("apps", "ControllerRevision", revision),
            [json!("db-6f7"), json!("statefulset.apps/db"), json!(2), json!("60m")]
        );
        assert_eq!(cells("apps", "ControllerRevision", json!({"metadata": meta("x"), "revision": 1}))[1], "<none>");
        let template = json!({"metadata": meta("t"), "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "i"}]}}});
        assert_eq!(cells("", "PodTemplate", template), [json!("t"), json!("a"), json!("i"), json!("app=web")]);
    }

    #[test]
    fn volumes_and_claims() {
        let volume = json!({
            "metadata": meta("pv-1"),
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": "default", "name": "data"}, "storageClassName": "fast", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"},
        });
        assert_eq!(
            cells("", "PersistentVolume", volume),
            [
                json!("pv-1"),
                json!("10Gi"),
                json!("RWO,RWX"),
                json!("Retain"),
                json!("Bound"),
                json!("default/data"),
                json!("fast"),
                json!("<unset>"),
                json!(""),
                json!("60m"),
                json!("Filesystem")
            ]
        );
        let pending = json!({"metadata": meta("data"), "spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Pending"}});
        assert_eq!(
            cells("", "PersistentVolumeClaim", pending),
            [
                json!("data"),
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!(""),
                json!("<unset>"),
                json!("60m"),
                json!("<unset>")
            ]
        );
        let mut bound = json!({"metadata": meta("data"), "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
                               "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOncePod"]}});
        bound["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "legacy"});
        bound["metadata"]["deletionTimestamp"] = json!(NOW);
        assert_eq!(
            cells("", "PersistentVolumeClaim", bound)[1..6],
            [json!("Terminating"), json!("pv-1"), json!("10Gi"), json!("RWOP"), json!("legacy")]
        );
        let class = json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"});
        assert_eq!(
            cells("storage.k8s.io", "StorageClass", class)[..5],
            [
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("Immediate"),
                json!(false)
            ]
        );
        let attachment = json!({"metadata": meta("csi-1"), "spec": {"attacher": "ebs", "nodeName": "node-a", "source": {"persistentVolumeName": "pv-1"}}, "status": {"attached": true}});
        assert_eq!(
            cells("storage.k8s.io", "VolumeAttachment", attachment),
            [json!("csi-1"), json!("ebs"), json!("pv-1"), json!("node-a"), json!(true), json!("60m")]
        );
        assert_eq!(cells("storage.k8s.io", "CSINode", json!({"metadata": meta("n"), "spec": {"drivers": [{}]}}))[1], 1);
    }

    #[test]
    fn scheduling_networking_and_certificates() {
        let class =
            json!({"metadata": meta("high"), "value": 1000, "globalDefault": true, "preemptionPolicy": "Never"});
        assert_eq!(
            cells("scheduling.k8s.io", "PriorityClass", class),
            [json!("high"), json!(1000), json!(true), json!("60m"), json!("Never")]
        );
        let policy = json!({"metadata": meta("deny"), "spec": {"podSelector": {}}});
        assert_eq!(cells("networking.k8s.io", "NetworkPolicy", policy)[1], "<none>");
        let policy = json!({"metadata": meta("web"), "spec": {"podSelector": {"matchLabels": {"app": "web"}}}});
        assert_eq!(cells("networking.k8s.io", "NetworkPolicy", policy)[1], "app=web");
        let ingress = json!({
            "metadata": meta("site"),
            "spec": {"rules": [{}, {"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}], "tls": [{}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}, {"hostname": "lb"}]}},
        });
        assert_eq!(
            cells("networking.k8s.io", "Ingress", ingress),
            [
                json!("site"),
                json!("<none>"),
                json!("a,b,c + 2 more..."),
                json!("5.6.7.8,lb"),
                json!("80, 443"),
                json!("60m")
            ]
        );
        assert_eq!(
            cells("networking.k8s.io", "Ingress", json!({"metadata": meta("x"), "spec": {}}))[2..5],
            [json!("*"), json!(""), json!("80")]
        );
        let csr = json!({
            "metadata": meta("node-csr"), "spec": {"signerName": "kubernetes.io/kubelet-serving", "username": "system:node:a", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved"}], "certificate": "LS0t"},
        });
        assert_eq!(
            cells("certificates.k8s.io", "CertificateSigningRequest", csr),
            [
                json!("node-csr"),
                json!("60m"),
                json!("kubernetes.io/kubelet-serving"),
                json!("system:node:a"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
        let denied = json!({"metadata": meta("x"), "spec": {}, "status": {"conditions": [{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}]}});
        assert_eq!(
            cells("certificates.k8s.io", "CertificateSigningRequest", denied)[2..],
            [json!("<none>"), json!(""), json!("<none>"), json!("Denied,Failed")]
        );
    }
    #[test]
    fn autoscalers_and_csi_drivers() {
        let hpa = json!({
            "metadata": meta("web"),
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 10, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
            ]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42, "averageValue": "210m"}}},
            ]},
        });
        assert_eq!(
            cells("autoscaling", "HorizontalPodAutoscaler", hpa),
            [
                json!("web"),
                json!("Deployment/web"),
                json!("cpu: 42%/80%, memory: <unknown>/500Mi + 1 more..."),
                json!("1"),
                json!(10),
                json!(3),
                json!("60m")
            ]
        );
        let external = json!({"metadata": meta("q"), "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "w"}, "maxReplicas": 2, "metrics": [
            {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "30"}}},
            {"type": "Object", "object": {"metric": {"name": "rps"}, "target": {"type": "Value", "value": "2k"}}},
        ]}, "status": {"currentMetrics": [{}, {"type": "Object", "object": {"current": {"value": "1500"}}}]}});
        assert_eq!(
            cells("autoscaling", "HorizontalPodAutoscaler", external)[2..4],
            [json!("<unknown>/30 (avg), 1500/2k"), json!("<unset>")]
        );
        let none = json!({"metadata": meta("n"), "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "w"}, "maxReplicas": 1}});
        assert_eq!(cells("autoscaling", "HorizontalPodAutoscaler", none)[2], "<none>");

        let driver = json!({"metadata": meta("ebs.csi.aws.com"), "spec": {"tokenRequests": [{"audience": "a"}, {"audience": "b"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        assert_eq!(
            cells("storage.k8s.io", "CSIDriver", driver),
            [
                json!("ebs.csi.aws.com"),
                json!(true),
                json!(false),
                json!(false),
                json!("a,b"),
                json!(false),
                json!("Persistent,Ephemeral"),
                json!("60m")
            ]
        );
        let bare = json!({"metadata": meta("x"), "spec": {"attachRequired": false}});
        assert_eq!(
            cells("storage.k8s.io", "CSIDriver", bare)[1..7],
            [json!(false), json!(false), json!(false), json!("<unset>"), json!(false), json!("<none>")]
        );
    }
}
