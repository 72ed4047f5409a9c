//! Upstream's `PodControllerRefManager` (`pkg/controller/controller_ref_manager.go`): a
//! controller claims the pods its selector matches, adopting orphans and releasing owned pods
//! that no longer match; pods controlled by someone else are never touched.

use std::cell::OnceCell;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::ReplicaManager;
use super::kind::{ReplicaKind, Selector};
use super::pods::controller_of;
use crate::client::{Api, Patch, PostParams};

impl<K: ReplicaKind> ReplicaManager<K> {
    /// `claimPods` / `ClaimPods`: the pods `rs` owns after adopting and releasing. An error
    /// from any adoption or release is returned after all pods were looked at.
    pub(super) fn claim_pods(&self, rs: &K, selector: &Selector, pods: Vec<Arc<Pod>>) -> Result<Vec<Arc<Pod>>, String> {
        let can_adopt = OnceCell::new();
        let mut claimed = Vec::new();
        let mut errors = Vec::new();
        for pod in pods {
            match self.claim_pod(rs, selector, &pod, &can_adopt) {
                Ok(true) => claimed.push(pod),
                Ok(false) => {}
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() { Ok(claimed) } else { Err(errors.join("; ")) }
    }

    /// `ClaimObject`: whether `rs` owns `pod` afterwards.
    fn claim_pod(
        &self,
        rs: &K,
        selector: &Selector,
        pod: &Pod,
        can_adopt: &OnceCell<Result<(), String>>,
    ) -> Result<bool, String> {
        let rs_meta = rs.metadata();
        let matches = selector.matches(pod.metadata.labels.as_ref());
        if let Some(owner) = controller_of(pod) {
            if Some(&owner.uid) != rs_meta.uid.as_ref() {
                return Ok(false);
            }
            if matches {
                return Ok(true);
            }
            if rs_meta.deletion_timestamp.is_some() {
                return Ok(false);
            }
            self.release(rs, pod)?;
            return Ok(false);
        }
        if rs_meta.deletion_timestamp.is_some() || !matches || pod.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        if pod.metadata.namespace != rs_meta.namespace {
            return Ok(false);
        }
        can_adopt.get_or_init(|| self.recheck_deletion_timestamp(rs)).clone()?;
        self.adopt(rs, pod)
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

    /// `AdoptPod`: adds `rs` as the pod's controller. A pod gone meanwhile is not claimed.
    fn adopt(&self, rs: &K, pod: &Pod) -> Result<bool, String> {
        let patch = json!({"metadata": {"ownerReferences": [self.controller_ref(rs)], "uid": pod.metadata.uid}});
        match self.patch_pod(pod, patch) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `ReleasePod`: removes `rs`'s owner reference. A pod gone or changed meanwhile (NotFound,
    /// Invalid) is fine.
    fn release(&self, rs: &K, pod: &Pod) -> Result<(), String> {
        let delete = json!({"$patch": "delete", "uid": rs.metadata().uid});
        let patch = json!({"metadata": {"ownerReferences": [delete], "uid": pod.metadata.uid}});
        match self.patch_pod(pod, patch) {
            Err(e) if !e.is_not_found() && !e.is_invalid() => Err(e.to_string()),
            _ => Ok(()),
        }
    }

    fn patch_pod(&self, pod: &Pod, patch: Value) -> Result<(), crate::client::Error> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        Api::<Pod>::namespaced(&self.client, namespace).patch(
            name,
            &Patch::Strategic(patch),
            &PostParams::default(),
        )?;
        Ok(())
    }
}
