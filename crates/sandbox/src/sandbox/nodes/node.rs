//! What a kubelet reports about its node: the Node it registers (`initialNode` and the status
//! setters of pkg/kubelet/nodestatus), the status it patches later, and its Lease in
//! `kube-node-lease` (pkg/kubelet/nodelease).

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use serde_json::{Value, json};

/// The namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet's lease duration (`nodeLeaseDurationSeconds`).
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// The version our kubelets claim.
pub const KUBELET_VERSION: &str = "v1.36.2";
/// Set by kubelets that leave attach/detach to the controller manager (the default).
pub const CONTROLLER_MANAGED_ATTACH: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// Machine facts of one simulated node; fixed for its lifetime.
#[derive(Debug, Clone)]
pub struct Machine {
    pub name: String,
    pub index: usize,
    pub internal_ip: String,
    pub zone: Option<String>,
    machine_id: String,
    system_uuid: String,
    boot_id: String,
}

impl Machine {
    /// Node `index` (0-based) of the simulation.
    pub fn new(name: &str, index: usize, zones: &[String]) -> Machine {
        let host = index + 10;
        Machine {
            name: name.to_string(),
            index,
            internal_ip: format!("10.0.{}.{}", host / 256, host % 256),
            zone: (!zones.is_empty()).then(|| zones[index % zones.len()].clone()),
            machine_id: format!("{:016x}{:016x}", crate::random::u64(), crate::random::u64()),
            system_uuid: crate::random::uuid(),
            boot_id: crate::random::uuid(),
        }
    }

    /// The labels the kubelet sets on its node (`initialNode`, plus the topology labels a cloud
    /// provider would add).
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_string(), self.name.clone()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
            ("kubernetes.io/arch".to_string(), "amd64".to_string()),
            ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
            ("beta.kubernetes.io/arch".to_string(), "amd64".to_string()),
        ]);
        if let Some(zone) = &self.zone {
            labels.insert("topology.kubernetes.io/zone".into(), zone.clone());
            labels.insert("topology.kubernetes.io/region".into(), region_of(zone));
        }
        labels
    }

    /// The Node the kubelet registers: labels, the attach/detach annotation, an empty spec (no
    /// taints, no pod CIDR: those are the controller manager's), and a full status.
    pub fn initial_node(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": self.labels(),
                "annotations": {CONTROLLER_MANAGED_ATTACH: "true"},
            },
            "spec": {},
            "status": self.status(None, &now()),
        })
    }

    /// The status the kubelet reports, with heartbeat time `now`. Condition transition times
    /// are kept from `current` when the condition's status did not change.
    pub fn status(&self, current: Option<&Node>, now: &str) -> Value {
        let existing = current.and_then(|n| n.status.as_ref()).and_then(|s| s.conditions.as_ref());
        let conditions: Vec<Value> = NODE_CONDITIONS
            .iter()
            .map(|(kind, status, reason, message)| {
                let old = existing.and_then(|list| list.iter().find(|c| c.type_ == *kind));
                let transition = match old {
                    Some(c) if c.status == *status => transition_time(c).unwrap_or_else(|| now.to_string()),
                    _ => now.to_string(),
                };
                json!({"type": kind, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": now, "lastTransitionTime": transition})
            })
            .collect();
        // Conditions that others own (NetworkUnavailable from the route controller, …) stay.
        let others = existing
            .into_iter()
            .flatten()
            .filter(|c| !NODE_CONDITIONS.iter().any(|(kind, ..)| c.type_ == *kind))
            .filter_map(|c| serde_json::to_value(c).ok());
        let resources = |memory: &str, storage: &str| {
            json!({"cpu": "4", "memory": memory, "pods": "110", "ephemeral-storage": storage,
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"})
        };
        json!({
            // 16 GiB of memory and 100 GiB of disk; allocatable leaves the default hard eviction
            // thresholds (memory.available<100Mi, nodefs.available<10%).
            "capacity": resources("16777216Ki", "104857600Ki"),
            "allocatable": resources("16674816Ki", "96636764160"),
            "conditions": conditions.into_iter().chain(others).collect::<Vec<_>>(),
            "addresses": [
                {"type": "InternalIP", "address": self.internal_ip},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": self.machine_id,
                "systemUUID": self.system_uuid,
                "bootID": self.boot_id,
                "kernelVersion": "6.8.0-60-generic",
                "osImage": "Ubuntu 24.04.2 LTS",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "runtimeHandlers": [
                {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
            ],
            "features": {"supplementalGroupsPolicy": true},
        })
    }

    /// The pod CIDR pods of this node get their IPs from when the controller manager gave the
    /// node none (`10.244.<index>.0/24`, continuing into `10.245.…` past 256 nodes).
    pub fn fallback_pod_cidr(&self) -> String {
        format!("10.{}.{}.0/24", 244 + self.index / 256, self.index % 256)
    }
}

/// The kubelet's own conditions: type, status, reason, message (pkg/kubelet/nodestatus).
const NODE_CONDITIONS: [(&str, &str, &str, &str); 4] = [
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
];

/// Whether the kubelet's conditions on `node` differ from what it would report (ignoring
/// heartbeat times), i.e. whether a status report is due now rather than at the next interval.
pub fn conditions_differ(node: &Node) -> bool {
    let existing = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    NODE_CONDITIONS.iter().any(|(kind, status, reason, message)| {
        !existing.iter().any(|c: &NodeCondition| {
            c.type_ == *kind
                && c.status == *status
                && c.reason.as_deref() == Some(*reason)
                && c.message.as_deref() == Some(*message)
        })
    })
}

fn transition_time(condition: &NodeCondition) -> Option<String> {
    let time = condition.last_transition_time.as_ref()?;
    Some(time.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The region of a zone: `us-east-1a` → `us-east-1`, `europe-west4-b` → `europe-west4`,
/// anything else is its own region.
pub fn region_of(zone: &str) -> String {
    let bytes = zone.as_bytes();
    match bytes {
        [.., digit, letter] if digit.is_ascii_digit() && letter.is_ascii_alphabetic() => zone[..zone.len() - 1].into(),
        _ => match zone.rsplit_once('-') {
            Some((region, suffix)) if suffix.len() == 1 && !region.is_empty() => region.to_string(),
            _ => zone.to_string(),
        },
    }
}

/// The node's Lease as the kubelet's lease controller writes it: held by the node, 40 s long,
/// renewed now, owned by the Node (when its UID is known).
pub fn renewed_lease(existing: Option<Lease>, node: &str, node_uid: Option<&str>) -> Lease {
    let mut lease = existing.unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(LEASE_NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        spec: None,
    });
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(node.to_string());
    spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
    spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
    // As the kubelet's SetNodeOwnerFunc: set once, when missing and the node exists.
    if lease.metadata.owner_references.as_ref().is_none_or(|o| o.is_empty())
        && let Some(uid) = node_uid
    {
        lease.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node.to_string(),
            uid: uid.to_string(),
            ..OwnerReference::default()
        }]);
    }
    lease
}

/// The current time as a `metav1.Time`.
pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_follow_cloud_naming() {
        assert_eq!(region_of("us-east-1a"), "us-east-1");
        assert_eq!(region_of("europe-west4-b"), "europe-west4");
        assert_eq!(region_of("zone-a"), "zone");
        assert_eq!(region_of("lab"), "lab");
    }

    #[test]
    fn initial_node_is_ready_without_taints_or_cidr() {
        let machine = Machine::new("node-1", 0, &["us-east-1a".to_string()]);
        let node: Node = serde_json::from_value(machine.initial_node()).expect("a Node");
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["kubernetes.io/hostname"], "node-1");
        assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1a");
        assert_eq!(labels["topology.kubernetes.io/region"], "us-east-1");
        let spec = node.spec.clone().unwrap_or_default();
        assert!(spec.taints.is_none() && spec.pod_cidr.is_none());
        assert!(!conditions_differ(&node));
        let status = node.status.expect("status");
        assert_eq!(status.node_info.expect("nodeInfo").kubelet_version, KUBELET_VERSION);
        assert_eq!(status.addresses.expect("addresses")[0].address, "10.0.0.10");
    }

    #[test]
    fn a_changed_ready_condition_gets_a_new_transition_time() {
        let machine = Machine::new("node-1", 0, &[]);
        let mut node: Node = serde_json::from_value(machine.initial_node()).expect("a Node");
        let conditions = node.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions");
        let ready = conditions.iter_mut().find(|c| c.type_ == "Ready").expect("Ready");
        ready.status = "Unknown".into();
        ready.reason = Some("NodeStatusUnknown".into());
        assert!(conditions_differ(&node));
        let status = machine.status(Some(&node), "2030-01-01T00:00:00Z");
        let ready = status["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready")).cloned();
        let ready = ready.expect("Ready");
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["lastTransitionTime"], "2030-01-01T00:00:00Z");
        let memory = &status["conditions"][0];
        assert_ne!(memory["lastTransitionTime"], "2030-01-01T00:00:00Z");
    }

    #[test]
    fn leases_are_owned_by_their_node() {
        let lease = renewed_lease(None, "node-1", Some("uid-1"));
        let spec = lease.spec.clone().expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("node-1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert!(spec.renew_time.is_some());
        let owner = &lease.metadata.owner_references.expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "uid-1"));
        assert_eq!(lease.metadata.namespace.as_deref(), Some(LEASE_NAMESPACE));
    }
}
