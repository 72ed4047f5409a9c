//! Informer event handlers of upstream's Deployment controller (`addDeployment`,
//! `updateDeployment`, `deleteDeployment`, `addReplicaSet`, `updateReplicaSet`,
//! `deleteReplicaSet`, `deletePod`): they map changes to Deployment keys.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{DeploymentController, selector_of};
use crate::apimachinery::labels::Selector;
use crate::runtime::controller_ref::{controller_of, resolve_controller_ref, selecting_orphan};
use crate::runtime::informer::{Event, object_key};

impl DeploymentController {
    pub(super) fn add_handlers(self: &Arc<Self>) {
        let this = self.clone();
        self.deployments.add_handler(move |event: &Event<Deployment>| this.enqueue(event.object()));
        let this = self.clone();
        self.replica_sets.add_handler(move |event: &Event<ReplicaSet>| this.on_replica_set_event(event));
        let this = self.clone();
        self.pods.add_handler(move |event: &Event<Pod>| {
            if let Event::Deleted { object, .. } = event {
                this.on_pod_deleted(object);
            }
        });
    }

    fn enqueue(&self, d: &Deployment) {
        self.queue.add(object_key(&d.metadata));
    }

    /// `addReplicaSet` / `updateReplicaSet` / `deleteReplicaSet`.
    fn on_replica_set_event(&self, event: &Event<ReplicaSet>) {
        match event {
            Event::Added(rs) => self.on_replica_set_added(rs),
            Event::Updated { old, new } => self.on_replica_set_updated(old, new),
            Event::Deleted { object, .. } => {
                if let Some(d) = self.resolve(object, controller_of(&object.metadata)) {
                    self.enqueue(&d);
                }
            }
        }
    }

    fn on_replica_set_added(&self, rs: &ReplicaSet) {
        if rs.metadata.deletion_timestamp.is_some() {
            // Seen for the first time while being deleted (e.g. on a restart).
            if let Some(d) = self.resolve(rs, controller_of(&rs.metadata)) {
                self.enqueue(&d);
            }
            return;
        }
        if let Some(owner) = controller_of(&rs.metadata) {
            if let Some(d) = self.resolve(rs, Some(owner)) {
                self.enqueue(&d);
            }
            return;
        }
        // An orphan: every matching Deployment may want to adopt it.
        for d in self.selecting(rs) {
            self.enqueue(&d);
        }
    }

    fn on_replica_set_updated(&self, old: &ReplicaSet, new: &ReplicaSet) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return; // A periodic resync: nothing changed.
        }
        let (old_owner, new_owner) = (controller_of(&old.metadata), controller_of(&new.metadata));
        let owner_changed = old_owner != new_owner;
        if owner_changed && let Some(d) = self.resolve(old, old_owner) {
            self.enqueue(&d);
        }
        if let Some(owner) = new_owner {
            if let Some(d) = self.resolve(new, Some(owner)) {
                self.enqueue(&d);
            }
            return;
        }
        if old.metadata.labels != new.metadata.labels || owner_changed {
            for d in self.selecting(new) {
                self.enqueue(&d);
            }
        }
    }

    /// `resolveControllerRef`: the Deployment a reference names, if the cached one has its uid.
    fn resolve(&self, rs: &ReplicaSet, owner: Option<&OwnerReference>) -> Option<Arc<Deployment>> {
        resolve_controller_ref(&self.deployments, rs.metadata.namespace.as_deref().unwrap_or(""), owner?)
    }

    /// `getDeploymentsForReplicaSet`: Deployments whose (non-empty) selector matches an orphan;
    /// a ReplicaSet without labels belongs to no Deployment.
    fn selecting(&self, rs: &ReplicaSet) -> Vec<Arc<Deployment>> {
        let namespace = rs.metadata.namespace.as_deref().unwrap_or("");
        let selector = |d: &Deployment| Selector::from_label_selector(&selector_of(d)).ok();
        let matching = selecting_orphan(&self.deployments, namespace, rs.metadata.labels.as_ref(), selector);
        if matching.len() > 1 {
            log::info!(
                "user error! more than one deployment is selecting replica set {}/{}",
                namespace,
                rs.metadata.name.as_deref().unwrap_or("")
            );
        }
        matching
    }

    /// `deletePod`: a Recreate Deployment waits for its old pods to be gone; sync it once the
    /// last one is.
    fn on_pod_deleted(&self, pod: &Pod) {
        let Some(d) = self.deployment_for_pod(pod) else { return };
        if super::util::strategy_type(&d) != "Recreate" {
            return;
        }
        let namespace = d.metadata.namespace.as_deref().unwrap_or("");
        let Ok(selector) = Selector::from_label_selector(&selector_of(&d)) else { return };
        let owned: Vec<String> = (self.replica_sets.store().list_namespace(namespace).into_iter())
            .filter(|rs| selector.matches(rs.metadata.labels.as_ref()))
            .filter_map(|rs| rs.metadata.uid.clone())
            .collect();
        let remaining = self
            .pods
            .store()
            .list_namespace_where(namespace, |m| {
                selector.matches(m.labels.as_ref()) && controller_of(m).is_some_and(|r| owned.contains(&r.uid))
            })
            .len();
        if remaining == 0 {
            self.enqueue(&d);
        }
    }

    /// `getDeploymentForPod`: the Deployment controlling the pod's ReplicaSet.
    fn deployment_for_pod(&self, pod: &Pod) -> Option<Arc<Deployment>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let rs = resolve_controller_ref(&self.replica_sets, namespace, controller_of(&pod.metadata)?)?;
        self.resolve(&rs, controller_of(&rs.metadata))
    }
}
