//! Upstream's `PodControllerRefManager` (`pkg/controller/controller_ref_manager.go`): a
//! controller claims the pods its selector matches, adopting orphans and releasing owned pods
//! that no longer match; pods controlled by someone else are never touched. The claiming itself
//! is the runtime's [`ControllerRefManager`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::kind::{ReplicaKind, Selector};
use super::{Error, ReplicaManager};
use crate::apimachinery::pod::PodSummary;
use crate::runtime::controller_ref::{ControllerRefManager, recheck_deletion_timestamp};

impl<K: ReplicaKind> ReplicaManager<K> {
    /// `claimPods` / `ClaimPods`: the pods `rs` owns after adopting and releasing. An error
    /// from any adoption or release is returned after all pods were looked at.
    pub(super) fn claim_pods(
        &self,
        rs: &K,
        selector: &Selector,
        pods: Vec<Arc<PodSummary>>,
    ) -> Result<Vec<Arc<PodSummary>>, Error> {
        let can_adopt = || recheck_deletion_timestamp::<K>(&self.client, rs.metadata(), "");
        // Adoptions are pod writes (`RealPodControl.PatchPod` calls `OnWrite`).
        let on_write = |pod: &ObjectMeta| self.consistency.pod_written(pod);
        let manager = ControllerRefManager {
            client: &self.client,
            owner: rs.metadata(),
            owner_ref: self.controller_ref(rs),
            selector,
            can_adopt: &can_adopt,
            finalizers: &[],
            on_write: Some(&on_write),
        };
        manager.claim_by::<Pod, _>(pods, |pod| &pod.metadata, |_| true).map_err(|e| Error::Claim(e.into()))
    }
}
