//! The PodGroup protection controller (`podgroup-protection-controller`, feature gate
//! `GenericWorkload`), after upstream v1.36's `pkg/controller/scheduling/podgroupprotection`.
//!
//! kube-apiserver's PodGroupProtection admission plugin puts the finalizer
//! `scheduling.k8s.io/podgroup-protection` on every `scheduling.k8s.io/v1alpha2` PodGroup it
//! creates; this controller only removes it, from a PodGroup being deleted, once no active (not
//! Succeeded, not Failed) pod of its namespace names it in `spec.schedulingGroup.podGroupName`.
//! Pods are looked up in the informer's cache through an index of active pods by the PodGroup
//! they name, as upstream.
//!
//! The `podgroupprotection` queue holds `namespace/name` keys of PodGroups; one worker.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1alpha2::PodGroup;

use crate::apimachinery::pod::phase;
use crate::client::{Api, Client};
use crate::controllers::finalizerutil::{is_deletion_candidate, update_finalizer};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

/// `scheduling.PodGroupProtectionFinalizer`.
pub const POD_GROUP_PROTECTION_FINALIZER: &str = "scheduling.k8s.io/podgroup-protection";

/// `activePodSchedulingGroupIndex`: active pods by `namespace/podGroupName`.
pub const ACTIVE_POD_SCHEDULING_GROUP_INDEX: &str = "activePodSchedulingGroup";

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workers; upstream runs one.
    pub workers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { workers: 1 }
    }
}

/// `NewPodGroupProtectionController` + `Run`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("podgroupprotection");
    let pods = context.informers.informer::<Pod>();
    // `addActivePodSchedulingGroupIndexer`; the pod informer is shared, the index may be there.
    if !pods.store().has_index(ACTIVE_POD_SCHEDULING_GROUP_INDEX) {
        pods.add_index(ACTIVE_POD_SCHEDULING_GROUP_INDEX, active_pod_group_keys);
    }
    let controller = Arc::new(PodGroupProtection {
        client: context.client.clone(),
        pod_groups: context.informers.informer::<PodGroup>(),
        pods,
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.pod_groups.add_handler(move |event: &Event<PodGroup>| handler.on_pod_group_event(event));
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.process_pod_group(key))
}

/// `isPodTerminated`: Succeeded or Failed.
pub fn is_pod_terminated(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// The key of the PodGroup a pod names, `namespace/podGroupName`, if it names one.
pub fn pod_group_key(pod: &Pod) -> Option<String> {
    let name = pod.spec.as_ref()?.scheduling_group.as_ref()?.pod_group_name.as_deref()?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    Some(format!("{namespace}/{name}"))
}

/// The index function of `activePodSchedulingGroup`: a terminated pod keeps no PodGroup.
pub fn active_pod_group_keys(pod: &Pod) -> Vec<String> {
    if is_pod_terminated(pod) {
        return Vec::new();
    }
    pod_group_key(pod).into_iter().collect()
}

/// The pods of an event whose PodGroup may have lost its last active pod
/// (`handlePodChange`): the new pod once terminated, the old one when it is gone or was
/// replaced by another pod of the same name (an update may hide a delete and a create).
pub fn pods_that_may_free_their_group<'a>(old: Option<&'a Pod>, new: Option<&'a Pod>) -> Vec<&'a Pod> {
    let mut pods = Vec::new();
    if let Some(new) = new.filter(|pod| is_pod_terminated(pod)) {
        pods.push(new);
    }
    match (old, new) {
        (Some(old), Some(new)) if old.metadata.uid != new.metadata.uid => pods.push(old),
        (Some(old), None) => pods.push(old),
        _ => {}
    }
    pods
}

/// Upstream's PodGroup protection `Controller`.
struct PodGroupProtection {
    client: Client,
    pod_groups: Arc<Informer<PodGroup>>,
    pods: Arc<Informer<Pod>>,
    queue: WorkQueue<String>,
}

impl PodGroupProtection {
    /// `handlePodGroupUpdate` (adds and updates; deletes are not watched): only a PodGroup being
    /// deleted that still has the finalizer needs work.
    fn on_pod_group_event(&self, event: &Event<PodGroup>) {
        let group = match event {
            Event::Added(group) | Event::Updated { new: group, .. } => group,
            Event::Deleted { .. } => return,
        };
        if !is_deletion_candidate(&group.metadata, POD_GROUP_PROTECTION_FINALIZER) {
            return;
        }
        let key = object_key(&group.metadata);
        log::debug!("Got event on PodGroup podGroup=\"{key}\"");
        self.queue.add(key);
    }

    /// `handlePodChange` + `enqueuePodGroupForPod`.
    fn on_pod_event(&self, event: &Event<Pod>) {
        let (old, new) = match event {
            Event::Added(pod) => (None, Some(pod.as_ref())),
            Event::Updated { old, new } => (Some(old.as_ref()), Some(new.as_ref())),
            Event::Deleted { object, .. } => (Some(object.as_ref()), None),
        };
        for pod in pods_that_may_free_their_group(old, new) {
            let Some(key) = pod_group_key(pod) else { continue };
            log::debug!("Enqueuing PodGroup for pod event pod=\"{}\" podGroup=\"{key}\"", object_key(&pod.metadata));
            self.queue.add(key);
        }
    }

    /// `processNextWorkItem` + `processPodGroup`.
    fn process_pod_group(&self, key: &str) -> SyncResult {
        self.sync(key).map_err(|e| e.context(format!("PodGroup {key} failed with")))
    }

    fn sync(&self, key: &str) -> SyncResult {
        log::debug!("Processing PodGroup podGroup=\"{key}\"");
        let Some(group) = self.pod_groups.store().get(key) else {
            log::debug!("PodGroup not found, ignoring podGroup=\"{key}\"");
            return Ok(());
        };
        if !is_deletion_candidate(&group.metadata, POD_GROUP_PROTECTION_FINALIZER) {
            return Ok(());
        }
        if self.has_active_pods(key) {
            log::debug!("Keeping PodGroup finalizer because it is still being used by pods podGroup=\"{key}\"");
            return Ok(());
        }
        self.remove_finalizer(&group)
    }

    /// `hasActivePods`: the index holds only active pods.
    fn has_active_pods(&self, key: &str) -> bool {
        let pods = self.pods.store().by_index(ACTIVE_POD_SCHEDULING_GROUP_INDEX, key);
        match pods.first() {
            Some(pod) => {
                log::debug!("Pod is using PodGroup pod=\"{}\" podGroup=\"{key}\"", object_key(&pod.metadata));
                true
            }
            None => {
                log::debug!("No active pods found using PodGroup podGroup=\"{key}\"");
                false
            }
        }
    }

    /// `removeFinalizer`: an `Update` of the cached PodGroup without the finalizer.
    fn remove_finalizer(&self, group: &PodGroup) -> SyncResult {
        let key = object_key(&group.metadata);
        let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
        let api = Api::<PodGroup>::namespaced(&self.client, namespace);
        match update_finalizer(&api, &self.pod_groups, group, POD_GROUP_PROTECTION_FINALIZER, false) {
            Ok(()) => {
                log::info!("Removed protection finalizer from PodGroup podGroup=\"{key}\"");
                Ok(())
            }
            Err(e) => {
                log::error!("Error removing protection finalizer from PodGroup err=\"{e}\" podGroup=\"{key}\"");
                Err(SyncError::from(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, group: Option<&str>, phase: &str) -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "pause"}]});
        if let Some(group) = group {
            spec["schedulingGroup"] = json!({"podGroupName": group});
        }
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "p", "uid": uid},
            "spec": spec,
            "status": {"phase": phase},
        }))
        .expect("a pod")
    }

    fn uids(pods: Vec<&Pod>) -> Vec<&str> {
        pods.into_iter().map(|p| p.metadata.uid.as_deref().unwrap_or_default()).collect()
    }

    #[test]
    fn only_active_pods_naming_a_group_are_indexed() {
        assert_eq!(active_pod_group_keys(&pod("u", Some("gang"), "Running")), ["ns/gang"]);
        assert_eq!(active_pod_group_keys(&pod("u", Some("gang"), "Pending")), ["ns/gang"]);
        assert_eq!(active_pod_group_keys(&pod("u", Some("gang"), "")), ["ns/gang"], "no phase yet: active");
        assert!(active_pod_group_keys(&pod("u", Some("gang"), "Succeeded")).is_empty());
        assert!(active_pod_group_keys(&pod("u", Some("gang"), "Failed")).is_empty());
        assert!(active_pod_group_keys(&pod("u", None, "Running")).is_empty());
        let unnamed: Pod = serde_json::from_value(json!({"metadata": {"namespace": "ns", "name": "p"},
            "spec": {"containers": [], "schedulingGroup": {}}}))
        .unwrap();
        assert!(active_pod_group_keys(&unnamed).is_empty(), "a schedulingGroup without podGroupName");
    }

    #[test]
    fn pod_events_enqueue_only_what_may_free_a_group() {
        let running = pod("u1", Some("gang"), "Running");
        let done = pod("u1", Some("gang"), "Succeeded");
        let other = pod("u2", Some("gang"), "Running");
        assert!(pods_that_may_free_their_group(None, Some(&running)).is_empty(), "a new active pod");
        assert_eq!(uids(pods_that_may_free_their_group(None, Some(&done))), ["u1"], "added terminated");
        assert!(pods_that_may_free_their_group(Some(&running), Some(&running)).is_empty());
        assert_eq!(uids(pods_that_may_free_their_group(Some(&running), Some(&done))), ["u1"]);
        assert_eq!(uids(pods_that_may_free_their_group(Some(&running), None)), ["u1"], "deleted");
        assert_eq!(uids(pods_that_may_free_their_group(Some(&running), Some(&other))), ["u1"], "replaced");
        let other_done = pod("u2", Some("gang"), "Failed");
        assert_eq!(uids(pods_that_may_free_their_group(Some(&running), Some(&other_done))), ["u2", "u1"]);
    }

    #[test]
    fn a_pod_names_its_group_in_its_namespace() {
        assert_eq!(pod_group_key(&pod("u", Some("gang"), "Running")).as_deref(), Some("ns/gang"));
        assert_eq!(pod_group_key(&pod("u", None, "Running")), None);
    }
}
