//! The desired state of the world (upstream's `cache/desired_state_of_world.go`): the managed
//! nodes, and per node the attachable volumes that scheduled pods need there.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use super::Error;
use super::volumes::VolumeSpec;

/// A pod that needs a volume: enough to record Events on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// `VolumeToAttach`.
#[derive(Debug, Clone)]
pub struct VolumeToAttach {
    pub volume: String,
    pub spec: VolumeSpec,
    pub node: String,
    pub pods: Vec<PodRef>,
    pub multi_attach_error_reported: bool,
}

#[derive(Debug)]
struct DesiredVolume {
    spec: VolumeSpec,
    /// By pod UID (`GetUniquePodName`).
    pods: BTreeMap<String, PodRef>,
    multi_attach_error_reported: bool,
}

/// `desiredStateOfWorld`: node → unique volume name → volume.
#[derive(Default)]
pub struct DesiredState {
    nodes: Mutex<BTreeMap<String, BTreeMap<String, DesiredVolume>>>,
}

impl DesiredState {
    /// `AddNode`: the node is managed from now on (idempotent).
    pub fn add_node(&self, node: &str) {
        self.nodes.lock().entry(node.to_string()).or_default();
    }

    /// `DeleteNode`: refused while pods still need volumes there.
    pub fn delete_node(&self, node: &str) -> Result<(), Error> {
        let mut nodes = self.nodes.lock();
        match nodes.get(node) {
            Some(volumes) if !volumes.is_empty() => {
                Err(Error::NodeStillHasVolumes { node: node.to_string(), volumes: volumes.len() })
            }
            _ => {
                nodes.remove(node);
                Ok(())
            }
        }
    }

    pub fn node_exists(&self, node: &str) -> bool {
        self.nodes.lock().contains_key(node)
    }

    /// `AddPod`: the pod needs `spec` on `node`; an error when the node is not managed.
    pub fn add_pod(&self, pod: PodRef, spec: &VolumeSpec, node: &str) -> Result<String, Error> {
        let mut nodes = self.nodes.lock();
        let Some(volumes) = nodes.get_mut(node) else {
            return Err(Error::NodeNotManaged { node: node.to_string() });
        };
        let name = spec.unique_name();
        let volume = volumes.entry(name.clone()).or_insert_with(|| DesiredVolume {
            spec: spec.clone(),
            pods: BTreeMap::new(),
            multi_attach_error_reported: false,
        });
        volume.pods.insert(pod.uid.clone(), pod);
        Ok(name)
    }

    /// `DeletePod`: the volume leaves the node once no pod needs it there.
    pub fn delete_pod(&self, pod_uid: &str, volume: &str, node: &str) {
        let mut nodes = self.nodes.lock();
        let Some(volumes) = nodes.get_mut(node) else { return };
        let Some(entry) = volumes.get_mut(volume) else { return };
        entry.pods.remove(pod_uid);
        if entry.pods.is_empty() {
            volumes.remove(volume);
        }
    }

    /// `VolumeExists`.
    pub fn volume_exists(&self, volume: &str, node: &str) -> bool {
        self.nodes.lock().get(node).is_some_and(|v| v.contains_key(volume))
    }

    /// `GetVolumesToAttach`.
    pub fn volumes_to_attach(&self) -> Vec<VolumeToAttach> {
        let nodes = self.nodes.lock();
        let mut out = Vec::new();
        for (node, volumes) in nodes.iter() {
            for (name, volume) in volumes {
                out.push(VolumeToAttach {
                    volume: name.clone(),
                    spec: volume.spec.clone(),
                    node: node.clone(),
                    pods: volume.pods.values().cloned().collect(),
                    multi_attach_error_reported: volume.multi_attach_error_reported,
                });
            }
        }
        out
    }

    /// `SetMultiAttachError`: reported once per volume and node.
    pub fn set_multi_attach_error(&self, volume: &str, node: &str) {
        if let Some(entry) = self.nodes.lock().get_mut(node).and_then(|v| v.get_mut(volume)) {
            entry.multi_attach_error_reported = true;
        }
    }

    /// `GetVolumePodsOnNodes`: the pods needing `volume` on these nodes.
    pub fn volume_pods_on_nodes(&self, nodes: &[String], volume: &str) -> Vec<PodRef> {
        let all = self.nodes.lock();
        nodes
            .iter()
            .filter_map(|n| all.get(n).and_then(|v| v.get(volume)))
            .flat_map(|v| v.pods.values().cloned())
            .collect()
    }

    /// `GetPodToAdd`: every (pod, volume, node) held, for the populator.
    pub fn pods(&self) -> Vec<(PodRef, String, String)> {
        let nodes = self.nodes.lock();
        let mut out = Vec::new();
        for (node, volumes) in nodes.iter() {
            for (name, volume) in volumes {
                out.extend(volume.pods.values().map(|p| (p.clone(), name.clone(), node.clone())));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> VolumeSpec {
        VolumeSpec { name: "pv1".into(), driver: "d".into(), handle: "h".into(), multi_attach: false }
    }

    fn pod(uid: &str) -> PodRef {
        PodRef { namespace: "default".into(), name: uid.into(), uid: uid.into() }
    }

    #[test]
    fn volumes_stay_desired_while_a_pod_needs_them() {
        let desired = DesiredState::default();
        assert!(desired.add_pod(pod("a"), &spec(), "n1").is_err(), "the node is not managed");
        desired.add_node("n1");
        let name = desired.add_pod(pod("a"), &spec(), "n1").expect("added");
        desired.add_pod(pod("b"), &spec(), "n1").expect("added");
        assert_eq!(desired.volumes_to_attach()[0].pods.len(), 2);
        assert!(desired.delete_node("n1").is_err(), "the node still has volumes");
        desired.delete_pod("a", &name, "n1");
        assert!(desired.volume_exists(&name, "n1"));
        desired.delete_pod("b", &name, "n1");
        assert!(!desired.volume_exists(&name, "n1"));
        assert!(desired.delete_node("n1").is_ok());
        assert!(!desired.node_exists("n1"));
    }
}
