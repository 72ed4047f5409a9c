//! Upstream's `PodControllerRefManager` (`pkg/controller/controller_ref_manager.go`): a
//! controller claims the pods its selector matches, adopting orphans and releasing owned pods
//! that no longer match; pods controlled by someone else are never touched. The claiming itself
//! is the runtime's [`ControllerRefManager`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::ReplicaManager;
use super::kind::{ReplicaKind, Selector};
use crate::client::Api;
use crate::runtime::controller_ref::ControllerRefManager;

impl<K: ReplicaKind> ReplicaManager<K> {
    /// `claimPods` / `ClaimPods`: the pods `rs` owns after adopting and releasing. An error
    /// from any adoption or release is returned after all pods were looked at.
    pub(super) fn claim_pods(&self, rs: &K, selector: &Selector, pods: Vec<Arc<Pod>>) -> Result<Vec<Arc<Pod>>, String> {
        let can_adopt = || self.recheck_deletion_timestamp(rs);
        let manager = ControllerRefManager {
            client: &self.client,
            owner: rs.metadata(),
            owner_ref: self.controller_ref(rs),
            selector,
            can_adopt: &can_adopt,
            finalizers: &[],
        };
        manager.claim::<Pod, _>(pods)
    }

    /// `RecheckDeletionTimestamp`: adoption needs a fresh read showing the same, live object.
    fn recheck_deletion_timestamp(&self, rs: &K) -> Result<(), String> {
        let meta = rs.metadata();
        let (namespace, name) = (meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""));
        let fresh = Api::<K>::namespaced(&self.client, namespace).get(name).map_err(|e| e.to_string())?;
        if fresh.metadata().uid != meta.uid {
            return Err(format!(
                "original {namespace}/{name} is gone: got uid {}, wanted {}",
                fresh.metadata().uid.as_deref().unwrap_or(""),
                meta.uid.as_deref().unwrap_or("")
            ));
        }
        if let Some(at) = &fresh.metadata().deletion_timestamp {
            return Err(format!("{namespace}/{name} has just been deleted at {}", at.0));
        }
        Ok(())
    }
}
