//! Informer handlers (`addDaemonset`, `updateDaemonset`, `deleteDaemonset`, `addHistory`,
//! `updateHistory`, `deleteHistory`, `addPod`, `updatePod`, `deletePod`, `addNode`,
//! `updateNode`) and the node-update queue (`syncNodeUpdate`): they only record what was
//! observed and queue keys.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::util::{min_ready_seconds, node_should_run_daemon_pod};
use super::{DaemonSetsController, selector_of};
use crate::apimachinery::pod::is_pod_ready;
use crate::controllers::nodeutil::pods_on_node;
use crate::controllers::podutil::ranking::pod_key;
use crate::runtime::controller::SyncResult;
use crate::runtime::controller_ref::{controller_of, resolve_controller_ref, selecting_orphan};
use crate::runtime::informer::{Event, object_key};

impl DaemonSetsController {
    pub(super) fn on_daemon_set_event(&self, event: &Event<DaemonSet>) {
        match event {
            Event::Added(ds) => self.enqueue(ds),
            Event::Updated { old, new } => {
                if old.metadata.uid != new.metadata.uid {
                    self.on_daemon_set_deleted(old);
                }
                self.enqueue(new);
            }
            Event::Deleted { object, .. } => self.on_daemon_set_deleted(object),
        }
    }

    fn on_daemon_set_deleted(&self, ds: &DaemonSet) {
        let key = object_key(&ds.metadata);
        self.consistency.clear(&key, ds.metadata.uid.as_deref().unwrap_or(""));
        // A DaemonSet created again under this name starts clean.
        self.expectations.delete(&key);
        self.queue.add(key);
    }

    fn enqueue(&self, ds: &DaemonSet) {
        self.queue.add(object_key(&ds.metadata));
    }

    /// `resolveControllerRef`: the cached DaemonSet a controller reference names.
    fn resolve(&self, namespace: &str, owner: &OwnerReference) -> Option<Arc<DaemonSet>> {
        resolve_controller_ref(&self.daemon_sets, namespace, owner)
    }

    /// `GetPodDaemonSets` / `GetHistoryDaemonSets`: the DaemonSets of the namespace whose
    /// selector matches the labels (none without labels).
    fn selecting(
        &self,
        namespace: &str,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Vec<Arc<DaemonSet>> {
        let sets = selecting_orphan(&self.daemon_sets, namespace, labels, |ds| selector_of(ds).ok());
        if sets.len() > 1 {
            log::error!("user error! more than one daemon is selecting pods with labels: {labels:?}");
        }
        sets
    }

    pub(super) fn on_revision_event(&self, event: &Event<ControllerRevision>) {
        match event {
            Event::Added(revision) => {
                if revision.metadata.deletion_timestamp.is_some() {
                    self.on_revision_deleted(revision);
                    return;
                }
                let namespace = revision.metadata.namespace.as_deref().unwrap_or("");
                if controller_of(&revision.metadata).is_some() {
                    // Owned: its DaemonSet has nothing to do until it changes.
                    return;
                }
                for ds in self.selecting(namespace, revision.metadata.labels.as_ref()) {
                    self.enqueue(&ds);
                }
            }
            Event::Updated { old, new } => self.on_revision_updated(old, new),
            Event::Deleted { object, .. } => self.on_revision_deleted(object),
        }
    }

    /// On an update of a pod or revision: when its controller changed, the previous one (if a
    /// DaemonSet still here) is queued. Returns whether it changed, and the current controller.
    fn enqueue_previous_owner<'a>(&self, old: &ObjectMeta, new: &'a ObjectMeta) -> (bool, Option<&'a OwnerReference>) {
        let namespace = new.namespace.as_deref().unwrap_or("");
        let (current, previous) = (controller_of(new), controller_of(old));
        let changed = current != previous;
        if changed
            && let Some(previous) = previous
            && let Some(ds) = self.resolve(namespace, previous)
        {
            self.enqueue(&ds);
        }
        (changed, current)
    }

    fn on_revision_updated(&self, old: &ControllerRevision, new: &ControllerRevision) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let namespace = new.metadata.namespace.as_deref().unwrap_or("");
        let (changed, current) = self.enqueue_previous_owner(&old.metadata, &new.metadata);
        if let Some(current) = current {
            if let Some(ds) = self.resolve(namespace, current) {
                self.enqueue(&ds);
            }
            return;
        }
        if changed || old.metadata.labels != new.metadata.labels {
            for ds in self.selecting(namespace, new.metadata.labels.as_ref()) {
                self.enqueue(&ds);
            }
        }
    }

    fn on_revision_deleted(&self, revision: &ControllerRevision) {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or("");
        if let Some(owner) = controller_of(&revision.metadata)
            && let Some(ds) = self.resolve(namespace, owner)
        {
            self.enqueue(&ds);
        }
    }

    pub(super) fn on_pod_event(&self, event: &Event<Pod>) {
        match event {
            Event::Added(pod) => self.on_pod_added(pod),
            Event::Updated { old, new } => self.on_pod_updated(old, new),
            Event::Deleted { object, .. } => self.on_pod_deleted(object),
        }
    }

    fn on_pod_added(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Seen already being deleted (after a restart): no creation observed.
            self.on_pod_deleted(pod);
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        if let Some(owner) = controller_of(&pod.metadata) {
            if let Some(ds) = self.resolve(namespace, owner) {
                self.expectations.creation_observed(&object_key(&ds.metadata));
                self.enqueue(&ds);
            }
            return;
        }
        // An orphan: the DaemonSets that may adopt it.
        for ds in self.selecting(namespace, pod.metadata.labels.as_ref()) {
            self.enqueue(&ds);
        }
    }

    fn on_pod_updated(&self, old: &Pod, new: &Pod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        if new.metadata.deletion_timestamp.is_some() {
            // A graceful deletion: replace the pod now rather than when the kubelet is done.
            self.on_pod_deleted(new);
            return;
        }
        let namespace = new.metadata.namespace.as_deref().unwrap_or("");
        let (changed, current) = self.enqueue_previous_owner(&old.metadata, &new.metadata);
        if let Some(current) = current {
            let Some(ds) = self.resolve(namespace, current) else { return };
            self.enqueue(&ds);
            let min_ready = min_ready_seconds(&ds);
            if !is_pod_ready(old) && is_pod_ready(new) && min_ready > 0 {
                // A second more against sub-second skew.
                self.queue.add_after(object_key(&ds.metadata), Duration::from_secs(min_ready as u64 + 1));
            }
            return;
        }
        if changed || old.metadata.labels != new.metadata.labels {
            for ds in self.selecting(namespace, new.metadata.labels.as_ref()) {
                self.enqueue(&ds);
            }
        }
    }

    fn on_pod_deleted(&self, pod: &Pod) {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let Some(owner) = controller_of(&pod.metadata) else { return };
        let Some(ds) = self.resolve(namespace, owner) else { return };
        self.expectations.deletion_observed(&object_key(&ds.metadata), &pod_key(pod));
        self.enqueue(&ds);
    }

    pub(super) fn on_node_event(&self, event: &Event<Node>) {
        match event {
            Event::Added(node) => self.node_queue.add(node.metadata.name.clone().unwrap_or_default()),
            // `shouldIgnoreNodeUpdate`: only labels and taints matter.
            Event::Updated { old, new } => {
                let taints = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
                if old.metadata.labels.clone().unwrap_or_default() != new.metadata.labels.clone().unwrap_or_default()
                    || taints(old) != taints(new)
                {
                    self.node_queue.add(new.metadata.name.clone().unwrap_or_default());
                }
            }
            // Upstream has no node delete handler: the DaemonSets learn of it from their pods.
            Event::Deleted { .. } => {}
        }
    }

    /// `syncNodeUpdate`: queues the DaemonSets that should now run on the node and have no pod
    /// there, or have one there and should not, or have one there while they count misscheduled
    /// pods (since v1.34, so that the count is recomputed when, say, the node's taints clear).
    pub(super) fn sync_node_update(&self, name: &str) -> SyncResult {
        let Some(node) = self.nodes.store().get(name) else {
            log::debug!("Node not found, skipping update node={name}");
            return Ok(());
        };
        let mut by_daemon_set: HashMap<String, usize> = HashMap::new();
        for pod in pods_on_node(&self.pods, name) {
            if let Some(owner) = controller_of(&pod.metadata).filter(|o| o.kind == "DaemonSet") {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
                *by_daemon_set.entry(format!("{namespace}/{}", owner.name)).or_default() += 1;
            }
        }
        for ds in self.daemon_sets.store().list() {
            let (should_run, should_continue_running) = node_should_run_daemon_pod(&node, &ds);
            let scheduled = by_daemon_set.contains_key(&object_key(&ds.metadata));
            if needs_sync_for_node(should_run, should_continue_running, scheduled, &ds) {
                self.enqueue(&ds);
            }
        }
        Ok(())
    }
}

/// `syncNodeUpdate`'s test whether a node's change concerns the DaemonSet: upstream's
/// `(shouldRun && !scheduled) || (!shouldContinueRunning && scheduled) ||
/// (scheduled && NumberMisscheduled > 0)`.
fn needs_sync_for_node(should_run: bool, should_continue_running: bool, scheduled: bool, ds: &DaemonSet) -> bool {
    let misscheduled = ds.status.as_ref().map_or(0, |s| s.number_misscheduled);
    if scheduled { !should_continue_running || misscheduled > 0 } else { should_run }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_change_concerns_daemon_sets_with_misscheduled_pods_there() {
        let mut ds = DaemonSet::default();
        // (should run, should continue running, scheduled) -> enqueue, with no misscheduled pods.
        for (run, keep, scheduled, expected) in [
            (true, true, false, true),
            (true, true, true, false),
            (false, false, true, true),
            (false, false, false, false),
            (false, true, true, false),
        ] {
            assert_eq!(needs_sync_for_node(run, keep, scheduled, &ds), expected, "{run} {keep} {scheduled}");
        }
        ds.status = Some(k8s_openapi::api::apps::v1::DaemonSetStatus { number_misscheduled: 1, ..Default::default() });
        assert!(needs_sync_for_node(true, true, true, &ds));
        assert!(needs_sync_for_node(false, true, true, &ds));
        assert!(!needs_sync_for_node(false, true, false, &ds), "no pod on the node: nothing to recount");
    }
}
