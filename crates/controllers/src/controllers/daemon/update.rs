//! `rollingUpdate` (upstream's `update.go`): old pods replaced by pods of the current revision,
//! either deleting at most `maxUnavailable` available old pods at a time, or (with `maxSurge`)
//! starting a new pod beside the old one on at most `maxSurge` nodes and deleting the old one
//! once the new one is available.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::util::{
    is_pod_updated, min_ready_seconds, node_should_run_daemon_pod, surge_count, template_generation, unavailable_count,
};
use super::{DaemonSetsController, Error, name_of, node_name};
use crate::apimachinery::pod::{is_pod_available, is_pod_ready};
use crate::runtime::informer::object_key;

/// The limits of one rolling step (`updatedDesiredNodeCounts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub desired: i32,
}

/// `updatedDesiredNodeCounts`: the scaled limits for `desired` nodes; with neither surge nor
/// unavailability allowed, one pod may be unavailable.
pub fn limits(ds: &DaemonSet, desired: i32) -> Result<Limits, Error> {
    let mut max_unavailable = unavailable_count(ds, desired).map_err(|e| Error::InvalidMaxUnavailable(Box::new(e)))?;
    let max_surge = surge_count(ds, desired).map_err(|e| Error::InvalidMaxSurge(Box::new(e)))?;
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        log::info!("DaemonSet is not configured for surge or unavailability, defaulting to accepting unavailability");
        max_unavailable = 1;
    }
    Ok(Limits { max_surge, max_unavailable, desired })
}

/// A node's pod of the current revision and its pod of an older one.
type NewAndOld<'p> = (Option<&'p Arc<Pod>>, Option<&'p Arc<Pod>>);

/// `findUpdatedPodsOnNode`: the node's new and old pod (not being deleted); `None` when there
/// is more than one of either.
fn updated_pods_on_node<'p>(ds: &DaemonSet, pods: &'p [Arc<Pod>], hash: &str) -> Option<NewAndOld<'p>> {
    let generation = template_generation(ds).ok().flatten();
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let slot = if is_pod_updated(pod, hash, generation) { &mut new } else { &mut old };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

impl DaemonSetsController {
    /// `rollingUpdate`.
    pub(super) fn rolling_update(&self, ds: &DaemonSet, nodes: &[Arc<Node>], hash: &str) -> Result<(), Error> {
        let mut node_pods = self.nodes_to_daemon_pods(ds, false).map_err(|e| e.node_pod_mapping(ds))?;
        let mut desired = 0;
        for node in nodes {
            if node_should_run_daemon_pod(node, ds).0 {
                desired += 1;
                node_pods.entry(node_name(node).to_string()).or_default();
            }
        }
        let limits = limits(ds, desired).map_err(|e| Error::UnavailableNumbers(Box::new(e)))?;
        let now = Timestamp::now();
        let min_ready = min_ready_seconds(ds);
        let available = |pod: &Pod| is_pod_available(pod, min_ready, now);
        // Go ranges over a map: any order will do, as upstream's.
        let mut entries: Vec<(&String, &Vec<Arc<Pod>>)> = node_pods.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));

        if limits.max_surge == 0 {
            let mut unavailable = 0;
            let mut allowed = Vec::new();
            let mut candidates = Vec::new();
            for (node, pods) in &entries {
                let Some((new, old)) = updated_pods_on_node(ds, pods, hash) else {
                    log::debug!(
                        "DaemonSet has excess pods on node, skipping to allow the core loop to process node={node}"
                    );
                    unavailable += 1;
                    continue;
                };
                match (new, old) {
                    (None, None) | (Some(_), Some(_)) => unavailable += 1,
                    (Some(new), None) => {
                        if !available(new) {
                            unavailable += 1;
                        }
                    }
                    (None, Some(old)) => {
                        if !available(old) {
                            log::debug!(
                                "DaemonSet pod on node is out of date and not available, allowing replacement node={node}"
                            );
                            allowed.push(name_of(&old.metadata).to_string());
                            unavailable += 1;
                        } else if unavailable < limits.max_unavailable {
                            candidates.push(name_of(&old.metadata).to_string());
                        }
                    }
                }
            }
            let remaining = (limits.max_unavailable - unavailable).max(0) as usize;
            allowed.extend(candidates.into_iter().take(remaining));
            return self.sync_nodes(ds, &allowed, &[], hash);
        }

        let mut old_to_delete = Vec::new();
        let mut should_not_run = Vec::new();
        let mut candidate_nodes = Vec::new();
        let mut allowed_nodes = Vec::new();
        let mut surging = 0;
        let mut number_available = 0;
        for (node_name, pods) in &entries {
            let Some((new, old)) = updated_pods_on_node(ds, pods, hash) else {
                log::debug!(
                    "DaemonSet has excess pods on node, skipping to allow the core loop to process node={node_name}"
                );
                surging += 1;
                continue;
            };
            if let Some(pod) = old.or(new)
                && available(pod)
            {
                number_available += 1;
            }
            let should_run = |name: &str| -> Result<bool, Error> {
                let node =
                    self.nodes.store().get(name).ok_or_else(|| Error::NodeNotFound { name: name.to_string() })?;
                Ok(node_should_run_daemon_pod(&node, ds).0)
            };
            match (new, old) {
                (_, None) => {}
                (None, Some(old)) if !available(old) => {
                    if !should_run(node_name)? {
                        old_to_delete.push(name_of(&old.metadata).to_string());
                        continue;
                    }
                    allowed_nodes.push(node_name.to_string());
                }
                (None, Some(old)) => {
                    if !should_run(node_name)? {
                        should_not_run.push(name_of(&old.metadata).to_string());
                        continue;
                    }
                    if surging >= limits.max_surge {
                        continue;
                    }
                    candidate_nodes.push(node_name.to_string());
                }
                (Some(new), Some(old)) => {
                    if !available(new) {
                        surging += 1;
                        self.requeue_when_ready_for_min_ready(ds, new, min_ready);
                        continue;
                    }
                    log::debug!("DaemonSet pod on node is available, remove old pod node={node_name}");
                    old_to_delete.push(name_of(&old.metadata).to_string());
                }
            }
        }
        let deletable = (number_available - limits.desired).max(0) as usize;
        let namespace = super::namespace_of(&ds.metadata);
        for name in should_not_run.into_iter().take(deletable) {
            if self.pods.store().get(&format!("{namespace}/{name}")).is_some() {
                old_to_delete.push(name);
            }
        }
        let remaining = (limits.max_surge - surging).max(0) as usize;
        allowed_nodes.extend(candidate_nodes.into_iter().take(remaining));
        self.sync_nodes(ds, &old_to_delete, &allowed_nodes, hash)
    }

    /// Not upstream's: requeues the DaemonSet `minReadySeconds` (and a second) after now when
    /// a surge pod is ready but not yet available beside its old pod. Upstream relies on the
    /// requeue its pod handler schedules when the pod turns ready, but a rate-limited requeue
    /// in between (a stale-cache skip) replaces that delayed one in the queue (the queue keeps
    /// one wake-up per key, the earlier), and its status requeue looks only at the oldest
    /// pod of each node, the old one here: the rollout then waited for the informers' resync,
    /// hours. Only the time of a sync changes, never what a sync does.
    fn requeue_when_ready_for_min_ready(&self, ds: &DaemonSet, new: &Pod, min_ready: i32) {
        if min_ready > 0 && is_pod_ready(new) {
            let delay = Duration::from_secs(min_ready as u64 + 1);
            self.queue.add_after(object_key(&ds.metadata), delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ds(rolling: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}}}))
            .unwrap()
    }

    #[test]
    fn limits_default_to_one_unavailable() {
        assert_eq!(limits(&ds(json!({"maxUnavailable": 0, "maxSurge": 0})), 3).unwrap().max_unavailable, 1);
        assert_eq!(limits(&ds(json!({"maxUnavailable": 0, "maxSurge": 0})), 0).unwrap().max_unavailable, 0);
        let surge = limits(&ds(json!({"maxUnavailable": 0, "maxSurge": "34%"})), 3).unwrap();
        assert_eq!((surge.max_surge, surge.max_unavailable), (2, 0));
        assert!(limits(&ds(json!({"maxUnavailable": "x"})), 3).is_err());
    }

    #[test]
    fn a_node_with_two_new_pods_is_left_to_manage() {
        let pod = |name: &str, hash: &str| {
            Arc::new(
                serde_json::from_value::<Pod>(
                    json!({"metadata": {"name": name, "labels": {"controller-revision-hash": hash}}}),
                )
                .unwrap(),
            )
        };
        let d = ds(json!({}));
        let pods = vec![pod("a", "new"), pod("b", "old")];
        let (new, old) = updated_pods_on_node(&d, &pods, "new").unwrap();
        assert_eq!((new.map(|p| name_of(&p.metadata)), old.map(|p| name_of(&p.metadata))), (Some("a"), Some("b")));
        assert!(updated_pods_on_node(&d, &[pod("a", "new"), pod("c", "new")], "new").is_none());
    }
}
