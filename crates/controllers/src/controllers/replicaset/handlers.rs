//! Informer event handlers of upstream's ReplicaSet controller (`addRS`, `updateRS`,
//! `deleteRS`, `addPod`, `updatePod`, `deletePod`): they map changes to controller keys and
//! lower expectations as pods are seen created or deleted.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::ReplicaManager;
use super::kind::ReplicaKind;
use crate::apimachinery::pod::is_pod_ready;
use crate::controllers::podutil::ranking::{controller_of, pod_key};
use crate::runtime::controller_ref::{resolve_controller_ref, selecting_orphan};
use crate::runtime::informer::{Event, object_key};

impl<K: ReplicaKind> ReplicaManager<K> {
    /// `addRS` / `updateRS` / `deleteRS`.
    pub(super) fn on_controller_event(&self, event: &Event<K>) {
        match event {
            Event::Added(rs) => self.enqueue(rs),
            Event::Updated { old, new } => {
                if old.metadata().uid != new.metadata().uid {
                    self.on_controller_deleted(old);
                }
                self.enqueue(new);
            }
            Event::Deleted { object, .. } => self.on_controller_deleted(object),
        }
    }

    fn on_controller_deleted(&self, rs: &K) {
        let key = object_key(rs.metadata());
        self.consistency.clear(&key, rs.metadata().uid.as_deref().unwrap_or(""));
        self.expectations.delete(&key);
        self.queue.add(key);
    }

    fn enqueue(&self, rs: &K) {
        self.queue.add(object_key(rs.metadata()));
    }

    /// `addPod` / `updatePod` / `deletePod`.
    pub(super) fn on_pod_event(&self, event: &Event<Pod>) {
        match event {
            Event::Added(pod) => self.on_pod_added(pod),
            Event::Updated { old, new } => self.on_pod_updated(old, new),
            Event::Deleted { object, .. } => self.on_pod_deleted(object),
        }
    }

    /// `resolveControllerRef`: the controller a reference names, if it is of our kind and the
    /// cached object has the referenced UID.
    fn resolve(&self, namespace: &str, owner: &OwnerReference) -> Option<Arc<K>> {
        resolve_controller_ref(&self.controllers, namespace, owner)
    }

    /// `getPodReplicaSets`: the controllers whose selector matches an orphan pod (none without
    /// labels).
    fn selecting(&self, pod: &Pod) -> Vec<Arc<K>> {
        let labels = pod.metadata.labels.as_ref();
        let matching = selecting_orphan(&self.controllers, Self::namespace(pod), labels, |rs| rs.selector().ok());
        if matching.len() > 1 {
            log::info!("user error: more than one {} selects pod {}", K::KIND, pod_key(pod));
        }
        matching
    }

    fn namespace(pod: &Pod) -> &str {
        pod.metadata.namespace.as_deref().unwrap_or("")
    }

    fn on_pod_added(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            // On a restart the controller can see a pod already being deleted.
            self.on_pod_deleted(pod);
            return;
        }
        if let Some(owner) = controller_of(pod) {
            if let Some(rs) = self.resolve(Self::namespace(pod), owner) {
                let key = object_key(rs.metadata());
                self.expectations.creation_observed(&key);
                self.queue.add(key);
            }
            return;
        }
        for rs in self.selecting(pod) {
            self.enqueue(&rs);
        }
    }

    fn on_pod_updated(&self, old: &Pod, new: &Pod) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return; // A periodic resync: nothing changed.
        }
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            // A graceful deletion started: the pod no longer counts, count it as deleted now.
            self.on_pod_deleted(new);
            if labels_changed {
                self.on_pod_deleted(old);
            }
            return;
        }
        let (old_owner, new_owner) = (controller_of(old), controller_of(new));
        let owner_changed = old_owner != new_owner;
        if owner_changed && let Some(rs) = old_owner.and_then(|o| self.resolve(Self::namespace(old), o)) {
            self.enqueue(&rs);
        }
        if let Some(owner) = new_owner {
            let Some(rs) = self.resolve(Self::namespace(new), owner) else { return };
            self.enqueue(&rs);
            if let Some(delay) = became_ready_requeue(old, new, rs.min_ready_seconds()) {
                self.queue.add_after(object_key(rs.metadata()), delay);
            }
            return;
        }
        if labels_changed || owner_changed {
            for rs in self.selecting(new) {
                self.enqueue(&rs);
            }
        }
    }

    fn on_pod_deleted(&self, pod: &Pod) {
        let Some(owner) = controller_of(pod) else { return };
        let Some(rs) = self.resolve(Self::namespace(pod), owner) else { return };
        let key = object_key(rs.metadata());
        self.expectations.deletion_observed(&key, &pod_key(pod));
        self.queue.add(key);
    }
}

/// The `updatePod` requeue of a pod that became ready: its owner is synced again when the pod
/// becomes available, exactly `minReadySeconds` later (v1.33 added a second of slack; in v1.36
/// the sync's own availability requeue covers pods that are due at other times).
fn became_ready_requeue(old: &Pod, new: &Pod, min_ready_seconds: i32) -> Option<Duration> {
    let became_ready = !is_pod_ready(old) && is_pod_ready(new);
    (became_ready && min_ready_seconds > 0).then(|| Duration::from_secs(u64::try_from(min_ready_seconds).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(ready: &str) -> Pod {
        let status = json!({"conditions": [{"type": "Ready", "status": ready}]});
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).expect("a pod")
    }

    #[test]
    fn a_pod_that_became_ready_is_checked_after_exactly_min_ready_seconds() {
        let (unready, ready) = (pod("False"), pod("True"));
        assert_eq!(became_ready_requeue(&unready, &ready, 5), Some(Duration::from_secs(5)));
        assert_eq!(became_ready_requeue(&unready, &ready, 0), None, "available at once");
        assert_eq!(became_ready_requeue(&ready, &ready, 5), None, "ready before");
        assert_eq!(became_ready_requeue(&ready, &unready, 5), None);
    }
}
