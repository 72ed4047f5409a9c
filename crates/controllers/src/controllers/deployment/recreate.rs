//! Upstream's `recreate.go`: the Recreate strategy. Old ReplicaSets go to zero, and only once
//! none of their pods runs any more is the new ReplicaSet created and scaled up.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::util::{self, replicas, rs_replicas, rs_uid};
use super::{DeploymentController, DeploymentResult, PodMap};

/// `oldPodsRunning`: an old ReplicaSet still reports pods, or a pod of one is not terminal.
pub(super) fn old_pods_running(new_rs: Option<&Arc<ReplicaSet>>, old: &[Arc<ReplicaSet>], pod_map: &PodMap) -> bool {
    if util::actual_replicas_sum(old) > 0 {
        return true;
    }
    pod_map.iter().filter(|(uid, _)| new_rs.is_none_or(|rs| rs_uid(rs) != uid.as_str())).any(|(_, pods)| {
        pods.iter().any(|pod| {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            // Unknown (deprecated) counts as running: it may well be.
            !matches!(phase, Some("Failed" | "Succeeded"))
        })
    })
}

impl DeploymentController {
    /// `rolloutRecreate`.
    pub(super) fn rollout_recreate(
        &self,
        d: &mut Deployment,
        mut rs_list: Vec<Arc<ReplicaSet>>,
        pod_map: &PodMap,
    ) -> DeploymentResult {
        // No new ReplicaSet yet: scale down before scaling up.
        let (mut new_rs, mut old) = self.all_replica_sets_and_sync_revision(d, &mut rs_list, false)?;
        let mut all: Vec<Arc<ReplicaSet>> = old.iter().cloned().chain(new_rs.clone()).collect();
        if self.scale_down_old_replica_sets_for_recreate(&util::active(&old), d)? {
            return self.sync_rollout_status(&all, new_rs.as_ref(), d);
        }
        if old_pods_running(new_rs.as_ref(), &old, pod_map) {
            return self.sync_rollout_status(&all, new_rs.as_ref(), d);
        }
        if new_rs.is_none() {
            (new_rs, old) = self.all_replica_sets_and_sync_revision(d, &mut rs_list, true)?;
            all = old.iter().cloned().chain(new_rs.clone()).collect();
        }
        if let Some(rs) = &new_rs {
            self.scale_replica_set(rs, replicas(d), d, false)?;
        }
        let status = d.status.clone().unwrap_or_default();
        if util::deployment_complete(d, &status) {
            self.cleanup_deployment(&old, d)?;
        }
        self.sync_rollout_status(&all, new_rs.as_ref(), d)
    }

    /// `scaleDownOldReplicaSetsForRecreate`: every active old ReplicaSet to zero.
    fn scale_down_old_replica_sets_for_recreate(
        &self,
        old: &[Arc<ReplicaSet>],
        d: &Deployment,
    ) -> DeploymentResult<bool> {
        let mut scaled = false;
        for rs in old.iter().filter(|rs| rs_replicas(rs) != 0) {
            scaled |= self.scale_replica_set(rs, 0, d, false)?.0;
        }
        Ok(scaled)
    }
}
