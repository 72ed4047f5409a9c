//! The actual state of the world (upstream's `cache/actual_state_of_world.go`): which volumes
//! are attached (or maybe attached) to which nodes, which of them each node says it uses
//! (`status.volumesInUse`), and what each node's `status.volumesAttached` should list.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Error;
use super::volumes::VolumeSpec;

/// `AttachState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachState {
    Attached,
    Uncertain,
    Detached,
}

/// One attachment as the reconciler sees it (`AttachedVolume`).
#[derive(Debug, Clone)]
pub struct Attachment {
    pub volume: String,
    /// Unknown for a volume found only in a node's status, until a pod names it.
    pub spec: Option<VolumeSpec>,
    pub node: String,
    pub mounted_by_node: bool,
    pub confirmed: bool,
}

#[derive(Debug)]
struct AttachedVolume {
    spec: Option<VolumeSpec>,
    device_path: String,
    nodes: BTreeMap<String, NodeAttachedTo>,
}

#[derive(Debug, Clone, Copy)]
struct NodeAttachedTo {
    confirmed: bool,
    detach_requested: Option<Instant>,
}

/// `nodeToUpdateStatusFor`.
#[derive(Debug, Default)]
struct NodeToUpdate {
    update_needed: bool,
    report: BTreeSet<String>,
}

#[derive(Default)]
struct Inner {
    volumes: BTreeMap<String, AttachedVolume>,
    in_use: HashMap<String, BTreeSet<String>>,
    nodes_to_update: BTreeMap<String, NodeToUpdate>,
}

/// `actualStateOfWorld`.
#[derive(Default)]
pub struct ActualState {
    inner: Mutex<Inner>,
}

impl ActualState {
    /// `MarkVolumeAsAttached`.
    pub fn mark_attached(&self, volume: &str, spec: Option<VolumeSpec>, node: &str, device_path: &str) {
        self.add_volume_node(volume, spec, node, device_path, true);
    }

    /// `MarkVolumeAsUncertain`: maybe attached (a VolumeAttachment exists, or an attach failed).
    pub fn mark_uncertain(&self, volume: &str, spec: Option<VolumeSpec>, node: &str) {
        self.add_volume_node(volume, spec, node, "", false);
    }

    /// `AddVolumeNode`.
    fn add_volume_node(&self, volume: &str, spec: Option<VolumeSpec>, node: &str, device_path: &str, attached: bool) {
        let mut inner = self.inner.lock();
        let entry = inner.volumes.entry(volume.to_string()).or_insert_with(|| AttachedVolume {
            spec: None,
            device_path: String::new(),
            nodes: BTreeMap::new(),
        });
        entry.device_path = device_path.to_string();
        if spec.is_some() || entry.spec.is_none() {
            entry.spec = spec;
        }
        let fresh = !entry.nodes.contains_key(node);
        entry
            .nodes
            .entry(node.to_string())
            .or_insert(NodeAttachedTo { confirmed: attached, detach_requested: None })
            .confirmed = attached;
        if fresh {
            // A new attachment counts as mounted until the node says otherwise.
            inner.in_use.entry(node.to_string()).or_default().insert(volume.to_string());
        }
        if attached {
            inner.add_to_report(volume, node);
        }
    }

    /// `MarkVolumeAsDetached` / `DeleteVolumeNode`.
    pub fn mark_detached(&self, volume: &str, node: &str) {
        let mut inner = self.inner.lock();
        if let Some(entry) = inner.volumes.get_mut(volume) {
            entry.nodes.remove(node);
            if entry.nodes.is_empty() {
                inner.volumes.remove(volume);
            }
        }
        inner.remove_from_report(volume, node);
    }

    /// `GetAttachState`.
    pub fn attach_state(&self, volume: &str, node: &str) -> AttachState {
        let inner = self.inner.lock();
        match inner.volumes.get(volume).and_then(|v| v.nodes.get(node)) {
            Some(n) if n.confirmed => AttachState::Attached,
            Some(_) => AttachState::Uncertain,
            None => AttachState::Detached,
        }
    }

    /// `SetVolumesMountedByNode`: the node's `status.volumesInUse`.
    pub fn set_volumes_mounted_by_node(&self, volumes: &[String], node: &str) {
        self.inner.lock().in_use.insert(node.to_string(), volumes.iter().cloned().collect());
    }

    /// `ResetDetachRequestTime`.
    pub fn reset_detach_request_time(&self, volume: &str, node: &str) {
        if let Some(n) = self.inner.lock().volumes.get_mut(volume).and_then(|v| v.nodes.get_mut(node)) {
            n.detach_requested = None;
        }
    }

    /// `SetDetachRequestTime`: how long ago detaching was first wanted.
    pub fn set_detach_request_time(&self, volume: &str, node: &str) -> Result<Duration, Error> {
        let mut inner = self.inner.lock();
        let found = inner.volumes.get_mut(volume).and_then(|v| v.nodes.get_mut(node));
        let n = found.ok_or_else(|| Error::NotAttached { volume: volume.to_string(), node: node.to_string() })?;
        Ok(n.detach_requested.get_or_insert_with(Instant::now).elapsed())
    }

    /// `RemoveVolumeFromReportAsAttached`.
    pub fn remove_from_report(&self, volume: &str, node: &str) {
        self.inner.lock().remove_from_report(volume, node);
    }

    /// `AddVolumeToReportAsAttached`.
    pub fn add_to_report(&self, volume: &str, node: &str) {
        let mut inner = self.inner.lock();
        if inner.volumes.get(volume).is_some_and(|v| v.nodes.contains_key(node)) {
            inner.add_to_report(volume, node);
        }
    }

    /// `SetNodeStatusUpdateNeeded`.
    pub fn set_node_status_update_needed(&self, node: &str) {
        if let Some(n) = self.inner.lock().nodes_to_update.get_mut(node) {
            n.update_needed = true;
        }
    }

    /// `GetAttachedVolumes`: every attachment, confirmed or not.
    pub fn attached_volumes(&self) -> Vec<Attachment> {
        let inner = self.inner.lock();
        let mut out = Vec::new();
        for (name, volume) in &inner.volumes {
            for (node, n) in &volume.nodes {
                out.push(Attachment {
                    volume: name.clone(),
                    spec: volume.spec.clone(),
                    node: node.clone(),
                    mounted_by_node: inner.in_use.get(node).is_some_and(|s| s.contains(name)),
                    confirmed: n.confirmed,
                });
            }
        }
        out
    }

    /// `GetNodesForAttachedVolume`: the nodes the volume is confirmed attached to.
    pub fn nodes_for_attached_volume(&self, volume: &str) -> Vec<String> {
        let inner = self.inner.lock();
        let nodes = inner.volumes.get(volume).map(|v| &v.nodes);
        nodes.into_iter().flatten().filter(|(_, n)| n.confirmed).map(|(node, _)| node.clone()).collect()
    }

    /// `GetVolumesToReportAttached`: the `volumesAttached` of every node flagged for an update
    /// (sorted by name), clearing the flags.
    pub fn volumes_to_report_attached(&self) -> BTreeMap<String, Vec<(String, String)>> {
        let mut inner = self.inner.lock();
        let flagged: Vec<String> =
            inner.nodes_to_update.iter().filter(|(_, n)| n.update_needed).map(|(name, _)| name.clone()).collect();
        let mut out = BTreeMap::new();
        for node in flagged {
            out.insert(node.clone(), inner.report_of(&node));
            if let Some(n) = inner.nodes_to_update.get_mut(&node) {
                n.update_needed = false;
            }
        }
        out
    }

    /// `GetVolumesToReportAttachedForNode`: `None` unless flagged; clears the flag.
    pub fn volumes_to_report_for_node(&self, node: &str) -> Option<Vec<(String, String)>> {
        let mut inner = self.inner.lock();
        let flagged = inner.nodes_to_update.get(node).is_some_and(|n| n.update_needed);
        if !flagged {
            return None;
        }
        let report = inner.report_of(node);
        if let Some(n) = inner.nodes_to_update.get_mut(node) {
            n.update_needed = false;
        }
        Some(report)
    }

    /// The number of attachments per plugin name, for the metrics.
    pub fn specs(&self) -> Vec<Option<VolumeSpec>> {
        let inner = self.inner.lock();
        inner.volumes.values().flat_map(|v| v.nodes.keys().map(|_| v.spec.clone())).collect()
    }
}

impl Inner {
    fn add_to_report(&mut self, volume: &str, node: &str) {
        let entry = self.nodes_to_update.entry(node.to_string()).or_default();
        entry.report.insert(volume.to_string());
        entry.update_needed = true;
    }

    fn remove_from_report(&mut self, volume: &str, node: &str) {
        if let Some(entry) = self.nodes_to_update.get_mut(node) {
            entry.report.remove(volume);
            entry.update_needed = true;
        }
    }

    /// `getAttachedVolumeFromUpdateObject`: names with their device paths.
    fn report_of(&self, node: &str) -> Vec<(String, String)> {
        let names = self.nodes_to_update.get(node).map(|n| &n.report);
        let device_path = |name: &String| self.volumes.get(name).map(|v| v.device_path.clone()).unwrap_or_default();
        names.into_iter().flatten().map(|name| (name.clone(), device_path(name))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_move_through_their_states() {
        let actual = ActualState::default();
        assert_eq!(actual.attach_state("v", "n1"), AttachState::Detached);
        actual.mark_uncertain("v", None, "n1");
        assert_eq!(actual.attach_state("v", "n1"), AttachState::Uncertain);
        assert!(actual.nodes_for_attached_volume("v").is_empty());
        assert!(actual.volumes_to_report_attached().is_empty(), "uncertain volumes are not reported");
        actual.mark_attached("v", None, "n1", "");
        assert_eq!(actual.attach_state("v", "n1"), AttachState::Attached);
        assert_eq!(actual.nodes_for_attached_volume("v"), vec!["n1".to_string()]);
        let report = actual.volumes_to_report_attached();
        assert_eq!(report["n1"], vec![("v".to_string(), String::new())]);
        assert!(actual.volumes_to_report_for_node("n1").is_none(), "the flag was cleared");
        actual.mark_detached("v", "n1");
        assert_eq!(actual.attach_state("v", "n1"), AttachState::Detached);
        assert_eq!(actual.volumes_to_report_for_node("n1"), Some(vec![]));
    }

    #[test]
    fn a_new_attachment_counts_as_mounted_until_the_node_reports() {
        let actual = ActualState::default();
        actual.mark_attached("v", None, "n1", "");
        assert!(actual.attached_volumes()[0].mounted_by_node);
        actual.set_volumes_mounted_by_node(&[], "n1");
        assert!(!actual.attached_volumes()[0].mounted_by_node);
        actual.set_volumes_mounted_by_node(&["v".to_string()], "n1");
        assert!(actual.attached_volumes()[0].mounted_by_node);
    }

    #[test]
    fn the_detach_request_time_is_kept_until_reset() {
        let actual = ActualState::default();
        assert!(actual.set_detach_request_time("v", "n1").is_err());
        actual.mark_attached("v", None, "n1", "");
        let requested = |a: &ActualState| a.inner.lock().volumes["v"].nodes["n1"].detach_requested;
        actual.set_detach_request_time("v", "n1").expect("attached");
        let first = requested(&actual).expect("set");
        actual.set_detach_request_time("v", "n1").expect("attached");
        assert_eq!(requested(&actual), Some(first), "the first request time is kept");
        actual.reset_detach_request_time("v", "n1");
        assert_eq!(requested(&actual), None);
    }
}
