//! Informer handlers (`addPod`, `updatePod`, `deletePod`, the set's add/update/delete): they
//! only queue the sets concerned.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::StatefulSetController;
use super::utils::{namespace_of, spec};
use crate::apimachinery::labels::Selector;
use crate::apimachinery::pod::is_pod_ready;
use crate::runtime::controller_ref::{controller_of, resolve_controller_ref, selecting_orphan};
use crate::runtime::informer::{Event, object_key};

impl StatefulSetController {
    pub(super) fn on_set_event(&self, event: &Event<StatefulSet>) {
        if let Event::Updated { old, new } = event
            && old.status.as_ref().map(|s| s.replicas) != new.status.as_ref().map(|s| s.replicas)
        {
            log::debug!("Observed updated replica count for StatefulSet statefulSet={}", object_key(&new.metadata));
        }
        self.enqueue(event.object());
    }

    pub(super) fn on_pod_event(&self, event: &Event<Pod>) {
        match event {
            Event::Added(pod) => self.on_pod_added(pod),
            Event::Updated { old, new } => self.on_pod_updated(old, new),
            Event::Deleted { object, .. } => self.on_pod_deleted(object),
        }
    }

    /// `resolveControllerRef`.
    fn resolve(&self, namespace: &str, owner: &OwnerReference) -> Option<Arc<StatefulSet>> {
        resolve_controller_ref(&self.sets, namespace, owner)
    }

    /// `getStatefulSetsForPod` (`GetPodStatefulSets`): the sets whose selector matches an orphan
    /// (none without labels).
    fn sets_for_pod(&self, pod: &Pod) -> Vec<Arc<StatefulSet>> {
        let labels = pod.metadata.labels.as_ref();
        let selector = |set: &StatefulSet| Selector::from_label_selector(&spec(set).selector).ok();
        let sets = selecting_orphan(&self.sets, namespace_of(&pod.metadata), labels, selector);
        if sets.len() > 1 {
            let names: Vec<&str> = sets.iter().map(|s| s.metadata.name.as_deref().unwrap_or("")).collect();
            log::error!(
                "user error: more than one StatefulSet is selecting pods with labels: {labels:?}. Sets: {names:?}"
            );
        }
        sets
    }

    fn on_pod_added(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.on_pod_deleted(pod);
            return;
        }
        if let Some(owner) = controller_of(&pod.metadata) {
            if let Some(set) = self.resolve(namespace_of(&pod.metadata), owner) {
                self.enqueue(&set);
            }
            return;
        }
        for set in self.sets_for_pod(pod) {
            self.enqueue(&set);
        }
    }

    fn on_pod_updated(&self, old: &Pod, new: &Pod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let namespace = namespace_of(&new.metadata);
        let labels_changed = old.metadata.labels != new.metadata.labels;
        let (current, previous) = (controller_of(&new.metadata), controller_of(&old.metadata));
        let owner_changed = current != previous;
        if owner_changed
            && let Some(previous) = previous
            && let Some(set) = self.resolve(namespace, previous)
        {
            self.enqueue(&set);
        }
        if let Some(current) = current {
            let Some(set) = self.resolve(namespace, current) else { return };
            self.enqueue(&set);
            let min_ready = spec(&set).min_ready_seconds.unwrap_or(0);
            // Exactly `minReadySeconds` (v1.33 added a second); pods that became ready at other
            // times are caught by the requeue at the end of a sync.
            if !is_pod_ready(old) && is_pod_ready(new) && min_ready > 0 {
                let delay = Duration::from_secs(min_ready as u64);
                self.queue.add_after(object_key(&set.metadata), delay);
            }
            return;
        }
        if labels_changed || owner_changed {
            for set in self.sets_for_pod(new) {
                self.enqueue(&set);
            }
        }
    }

    fn on_pod_deleted(&self, pod: &Pod) {
        let Some(owner) = controller_of(&pod.metadata) else { return };
        if let Some(set) = self.resolve(namespace_of(&pod.metadata), owner) {
            self.enqueue(&set);
        }
    }
}
