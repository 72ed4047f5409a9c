//! `syncClaim`: reservations of pods that are gone or done are dropped, a claim no one uses any
//! more is deallocated and loses its delete-protection finalizer, and a claim generated for a
//! pod that is done (or replaced) is deleted.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};

use super::{ResourceClaimController, api_error, is_pod_done};
use crate::client::{Api, DeleteParams, PostParams};
use crate::controllers::resourceclaimutil::{FINALIZER, reserved_for};
use crate::runtime::controller::{SyncError, SyncResult};

/// What a pod's `reservedFor` entry is checked against.
#[derive(Debug, Clone, Copy)]
pub(super) enum PodSeen<'a> {
    /// The pod was seen deleted (`deletedObjects`).
    Deleted,
    /// The informer's pod of that name.
    Cached(&'a Pod),
    /// The API server's pod of that name, which the informer does not have (yet).
    Live(&'a Pod),
    /// Neither the informer nor the API server has a pod of that name.
    Missing,
}

/// Whether a pod's reservation stays: the pod still exists with the reserved UID and, as far
/// as the informer knows, may run (upstream does not ask whether a pod read from the API
/// server is done).
pub(super) fn keep_pod_reservation(reserved: &ResourceClaimConsumerReference, pod: PodSeen<'_>) -> bool {
    let same_pod = |pod: &Pod| pod.metadata.uid.as_deref() == Some(reserved.uid.as_str());
    match pod {
        PodSeen::Deleted | PodSeen::Missing => false,
        PodSeen::Cached(pod) => same_pod(pod) && !is_pod_done(pod),
        PodSeen::Live(pod) => same_pod(pod),
    }
}

/// A `reservedFor` entry for a pod (core group); entries of other kinds are always kept.
fn is_pod_reservation(reserved: &ResourceClaimConsumerReference) -> bool {
    reserved.api_group.as_deref().unwrap_or_default().is_empty() && reserved.resource == "pods"
}

/// `owningPod`: the name and UID of the pod that controls the claim (`apiVersion: v1`).
pub(super) fn owning_pod(claim: &ResourceClaim) -> Option<(&str, &str)> {
    let owners = claim.metadata.owner_references.iter().flatten();
    let mut pods = owners.filter(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod");
    pods.next().map(|o| (o.name.as_str(), o.uid.as_str())).filter(|(name, _)| !name.is_empty())
}

/// Whether a claim generated for `pod` can go: that pod was replaced or is done.
pub(super) fn generated_claim_unused(owner_uid: &str, pod: &Pod) -> bool {
    pod.metadata.uid.as_deref() != Some(owner_uid) || is_pod_done(pod)
}

fn finalizer_index(claim: &ResourceClaim) -> Option<usize> {
    claim.metadata.finalizers.iter().flatten().position(|f| f == FINALIZER)
}

/// `slices.Delete(finalizers, i, i+1)`.
fn remove_finalizer_at(claim: &mut ResourceClaim, index: usize) {
    if let Some(finalizers) = claim.metadata.finalizers.as_mut()
        && index < finalizers.len()
    {
        finalizers.remove(index);
    }
}

/// What `syncClaim` writes once it knows which reservations stay.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Release {
    /// Nothing.
    Nothing,
    /// Some reservations go: this status update (also deallocating when none stays and the
    /// claim has the delete-protection finalizer), then the finalizer's removal if the updated
    /// claim is not allocated.
    Unreserve(ResourceClaim),
    /// An unused claim being deleted keeps the finalizer: the claim with its allocation cleared,
    /// written by a status update first if `deallocate`, then without the finalizer at
    /// `finalizer` (its index in the claim as read) by an update.
    Unprotect {
        /// The claim, deallocated.
        claim: ResourceClaim,
        /// Whether it was allocated, so that the status is written first.
        deallocate: bool,
        /// The finalizer's index.
        finalizer: usize,
    },
}

/// The middle of `syncClaim`: what to write for `claim` given the reservations that stay.
/// DRA deallocates a claim as soon as its last consumer stops using it, so that it can be
/// allocated again elsewhere; the finalizer says the scheduler allocated it. The transition
/// from used to unused triggers it: a claim allocated but never reserved stays allocated,
/// unless it is being deleted.
pub(super) fn release(claim: &ResourceClaim, remaining: Vec<ResourceClaimConsumerReference>) -> Release {
    let finalizer = finalizer_index(claim);
    if remaining.len() < reserved_for(claim).len() {
        let mut updated = claim.clone();
        let status = updated.status.get_or_insert_with(Default::default);
        if remaining.is_empty() && finalizer.is_some() {
            status.allocation = None;
        }
        status.reserved_for = (!remaining.is_empty()).then_some(remaining);
        return Release::Unreserve(updated);
    }
    match finalizer {
        Some(finalizer) if claim.metadata.deletion_timestamp.is_some() && remaining.is_empty() => {
            let mut updated = claim.clone();
            let deallocate = updated.status.as_ref().is_some_and(|s| s.allocation.is_some());
            if let Some(status) = updated.status.as_mut() {
                status.allocation = None;
            }
            Release::Unprotect { claim: updated, deallocate, finalizer }
        }
        _ => Release::Nothing,
    }
}

impl ResourceClaimController {
    /// `syncClaim`.
    pub(super) fn sync_claim(&self, namespace: &str, name: &str) -> SyncResult {
        let Some(claim) = self.claims.store().get_by_name(namespace, name) else { return Ok(()) };
        let reserved = reserved_for(&claim);
        let mut remaining = Vec::with_capacity(reserved.len());
        for reservation in reserved {
            // Only pods are checked; an unknown kind of consumer keeps its reservation.
            if !is_pod_reservation(reservation) || self.keep_reservation(namespace, reservation)? {
                remaining.push(reservation.clone());
            }
        }
        let empty = remaining.is_empty();
        self.write_release(namespace, name, release(&claim, remaining))?;
        if empty {
            self.delete_if_generated_for_done_pod(&claim)?;
        }
        Ok(())
    }

    /// Writes what [`release`] decided.
    fn write_release(&self, namespace: &str, name: &str, release: Release) -> SyncResult {
        let api = Api::<ResourceClaim>::namespaced(&self.client, namespace);
        match release {
            Release::Nothing => {}
            Release::Unreserve(claim) => {
                // An update, not a patch: a change in the meantime fails it.
                let mut updated = api.replace_status(name, &claim, &PostParams::default()).map_err(api_error)?;
                // The finalizer goes too once the claim is not allocated, wherever it is now.
                let unallocated = updated.status.as_ref().is_none_or(|s| s.allocation.is_none());
                if let (Some(index), true) = (finalizer_index(&updated), unallocated) {
                    remove_finalizer_at(&mut updated, index);
                    api.replace(name, &updated, &PostParams::default()).map_err(api_error)?;
                }
            }
            Release::Unprotect { mut claim, deallocate, finalizer } => {
                if deallocate {
                    claim = api.replace_status(name, &claim, &PostParams::default()).map_err(api_error)?;
                }
                remove_finalizer_at(&mut claim, finalizer);
                api.replace(name, &claim, &PostParams::default()).map_err(api_error)?;
            }
        }
        Ok(())
    }

    /// Whether a pod's reservation stays (the `reservedFor` loop of `syncClaim`): a pod seen
    /// deleted goes at once; one the informer lacks is looked up on the API server, since
    /// dropping the reservation of a pod being scheduled would be bad.
    fn keep_reservation(&self, namespace: &str, reserved: &ResourceClaimConsumerReference) -> Result<bool, SyncError> {
        if self.deleted_objects.lock().contains(&reserved.uid) {
            return Ok(keep_pod_reservation(reserved, PodSeen::Deleted));
        }
        if let Some(pod) = self.pods.store().get_by_name(namespace, &reserved.name) {
            return Ok(keep_pod_reservation(reserved, PodSeen::Cached(&pod)));
        }
        let live = Api::<Pod>::namespaced(&self.client, namespace).get_opt(&reserved.name).map_err(api_error)?;
        Ok(keep_pod_reservation(reserved, live.as_ref().map_or(PodSeen::Missing, PodSeen::Live)))
    }

    /// The end of `syncClaim`: an unreserved claim generated for a pod that was replaced or is
    /// done is deleted, without waiting for the pod's deletion and the garbage collector. A pod
    /// the informer does not know (yet) is left to the garbage collector.
    fn delete_if_generated_for_done_pod(&self, claim: &ResourceClaim) -> SyncResult {
        let Some((pod_name, pod_uid)) = owning_pod(claim) else { return Ok(()) };
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let Some(pod) = self.pods.store().get_by_name(namespace, pod_name) else {
            log::debug!("ResourceClaim: pod for claim not found claim=\"{namespace}/{name}\" pod={pod_name:?}");
            return Ok(());
        };
        if !generated_claim_unused(pod_uid, &pod) {
            return Ok(());
        }
        let api = Api::<ResourceClaim>::namespaced(&self.client, namespace);
        api.delete(name, &DeleteParams::default())
            .map_err(|e| api_error(e).context(format!("delete unused generated claim {namespace}/{name}")))?;
        log::debug!("ResourceClaim: deleted unused generated claim claim=\"{namespace}/{name}\" pod={pod_name:?}");
        Ok(())
    }
}
