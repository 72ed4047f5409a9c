//! Upstream's `stateful_pod_control.go` (`StatefulPodControl`): creating, updating and deleting
//! a set's pods and claims, with their Events, and the claims' owner references under the
//! retention policy.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Error;
use super::utils::{
    Owner, has_stale_owner_ref, has_unexpected_controller, identity_matches, is_claim_owner_up_to_date, name_of,
    namespace_of, ordinal, pod_claims, retention_policy, spec, storage_matches, update_claim_owner_refs,
    update_identity, update_storage,
};
use crate::apimachinery::errors::Aggregate;
use crate::apimachinery::schema::GroupResource;
use crate::client::{Api, Client, DeleteParams, PostParams};
use crate::runtime::consistency::{ControllerConsistency, pods_resource};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::Informer;

/// `retry.DefaultBackoff`'s delays: 10 ms × 5ⁿ, four attempts.
const CONFLICT_BACKOFF: [Duration; 3] =
    [Duration::from_millis(10), Duration::from_millis(50), Duration::from_millis(250)];

pub struct PodControl {
    pub client: Client,
    pub pods: Arc<Informer<Pod>>,
    pub claims: Arc<Informer<PersistentVolumeClaim>>,
    pub recorder: EventRecorder,
    /// Where the pod and claim creations and updates are recorded for their set (upstream's
    /// `realStatefulPodControlObjectManager.consistencyStore`).
    pub consistency: ControllerConsistency,
}

/// The core group's `persistentvolumeclaims`.
pub fn claims_resource() -> GroupResource {
    GroupResource::new("", "persistentvolumeclaims")
}

impl PodControl {
    /// `consistencyStore.WroteAt` for `set`: what a write of one of its pods or claims returned.
    fn wrote(&self, set: &StatefulSet, resource: &GroupResource, written: &ObjectMeta) {
        self.consistency.wrote_for(&set.metadata, resource, written.resource_version.as_deref());
    }

    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get_newest(&format!("{namespace}/{name}"))
    }

    /// `CreateStatefulPod`: the claims first, then the pod, then the claims' owner references.
    pub fn create_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        if let Err(error) = self.create_claims(set, pod) {
            self.record_pod_event("create", set, pod, Some(&error));
            return Err(error);
        }
        let api = Api::<Pod>::namespaced(&self.client, namespace_of(&pod.metadata));
        let result = match api.create(pod, &PostParams::default()) {
            Ok(created) => {
                self.wrote(set, &pods_resource(), &created.metadata);
                self.pods.mutation(created);
                Ok(())
            }
            // An existing pod is only waited for: no Event, no claim update.
            Err(e) if e.is_already_exists() => return Err(e.into()),
            Err(e) => Err(Error::from(e)),
        };
        if let Err(error) = self.update_claims_for_retention_policy(set, pod) {
            self.record_pod_event("update", set, pod, Some(&error));
            return Err(error);
        }
        self.record_pod_event("create", set, pod, result.as_ref().err());
        result
    }

    /// `UpdateStatefulPod`: identity, storage and claim references brought in line, retried on
    /// conflict with the cached pod.
    pub fn update_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        let mut pod = pod.clone();
        let mut attempted = false;
        let mut delays = CONFLICT_BACKOFF.iter();
        let result = loop {
            let mut consistent = true;
            if !identity_matches(set, &pod) {
                update_identity(set, &mut pod);
                consistent = false;
            }
            if !storage_matches(set, &pod) {
                update_storage(set, &mut pod);
                consistent = false;
                if let Err(error) = self.create_claims(set, &pod) {
                    self.record_pod_event("update", set, &pod, Some(&error));
                    break Err(error);
                }
            }
            if !self.claims_match_retention_policy(set, &pod) {
                if let Err(error) = self.update_claims_for_retention_policy(set, &pod) {
                    self.record_pod_event("update", set, &pod, Some(&error));
                    break Err(error);
                }
                consistent = false;
            }
            if consistent {
                break Ok(());
            }
            attempted = true;
            let api = Api::<Pod>::namespaced(&self.client, namespace_of(&pod.metadata));
            match api.replace(name_of(&pod.metadata), &pod, &PostParams::default()) {
                Ok(updated) => {
                    self.wrote(set, &pods_resource(), &updated.metadata);
                    self.pods.mutation(updated);
                    break Ok(());
                }
                Err(e) => {
                    if let Some(fresh) =
                        self.pods.get_newest(&format!("{}/{}", namespace_of(&set.metadata), name_of(&pod.metadata)))
                    {
                        pod = (*fresh).clone();
                    }
                    match delays.next() {
                        Some(delay) if e.is_conflict() => std::thread::sleep(*delay),
                        _ => break Err(e.into()),
                    }
                }
            }
        };
        if attempted {
            self.record_pod_event("update", set, &pod, result.as_ref().err());
        }
        result
    }

    /// `DeleteStatefulPod`: a pod already gone counts as deleted (since v1.34 a NotFound is a
    /// success with its Normal Event, where v1.33 recorded a `FailedDelete`).
    pub fn delete_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        let api = Api::<Pod>::namespaced(&self.client, namespace_of(&pod.metadata));
        match api.delete(name_of(&pod.metadata), &DeleteParams::default()) {
            Err(e) if !e.is_not_found() => {
                let error = Error::from(e);
                self.record_pod_event("delete", set, pod, Some(&error));
                Err(error)
            }
            _ => {
                self.record_pod_event("delete", set, pod, None);
                Ok(())
            }
        }
    }

    /// `ClaimsMatchRetentionPolicy`: every existing claim of the pod has the references the
    /// policy wants (missing claims are picked up later).
    pub fn claims_match_retention_policy(&self, set: &StatefulSet, pod: &Pod) -> bool {
        let ordinal = ordinal(pod);
        spec(set).volume_claim_templates.iter().flatten().all(|template| {
            let name = super::utils::claim_name(set, template, ordinal);
            match self.claim(namespace_of(&set.metadata), &name) {
                None => {
                    log::debug!("Expected claim missing, continuing to pick up in next iteration PVC={name}");
                    true
                }
                Some(claim) => is_claim_owner_up_to_date(&claim, set, pod),
            }
        })
    }

    /// `UpdatePodClaimForRetentionPolicy`.
    pub fn update_claims_for_retention_policy(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        let ordinal = ordinal(pod);
        for template in spec(set).volume_claim_templates.iter().flatten() {
            let name = super::utils::claim_name(set, template, ordinal);
            let Some(claim) = self.claim(namespace_of(&set.metadata), &name) else {
                log::debug!("Expected claim missing, continuing to pick up in next iteration PVC={name}");
                continue;
            };
            if has_unexpected_controller(&claim, set, pod) {
                let message = format!(
                    "PersistentVolumeClaim {name} has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim"
                );
                self.recorder.event_for(set, EventType::Warning, "ConflictingController", &message);
            }
            if !is_claim_owner_up_to_date(&claim, set, pod) {
                let mut claim = (*claim).clone();
                update_claim_owner_refs(&mut claim, set, pod);
                let api = Api::<PersistentVolumeClaim>::namespaced(&self.client, namespace_of(&claim.metadata));
                match api.replace(&name, &claim, &PostParams::default()) {
                    Ok(updated) => {
                        self.wrote(set, &claims_resource(), &updated.metadata);
                        self.claims.mutation(updated);
                    }
                    Err(source) => return Err(Error::UpdateClaimOwnerRefs { name, source }),
                }
            }
        }
        Ok(())
    }

    /// `PodClaimIsStale`: with `whenScaled: Delete`, a claim still owned by an earlier pod of
    /// the same name (to be collected) holds the new pod back.
    pub fn pod_claim_is_stale(&self, set: &StatefulSet, pod: &Pod) -> bool {
        if retention_policy(set).1 == "Retain" {
            return false;
        }
        pod_claims(set, ordinal(pod)).values().any(|claim| {
            self.claim(namespace_of(&claim.metadata), name_of(&claim.metadata))
                .is_some_and(|existing| has_stale_owner_ref(&existing, Owner::pod(pod)))
        })
    }

    /// `createMissingPersistentVolumeClaims`.
    pub fn create_missing_claims(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        self.create_claims(set, pod)?;
        if let Err(error) = self.update_claims_for_retention_policy(set, pod) {
            self.record_pod_event("update", set, pod, Some(&error));
            return Err(error);
        }
        Ok(())
    }

    /// `createPersistentVolumeClaims`: the pod's claims that do not exist yet.
    pub fn create_claims(&self, set: &StatefulSet, pod: &Pod) -> Result<(), Error> {
        let mut errors = Vec::new();
        for claim in pod_claims(set, ordinal(pod)).values() {
            let name = name_of(&claim.metadata);
            match self.claim(namespace_of(&claim.metadata), name) {
                None => {
                    let api = Api::<PersistentVolumeClaim>::namespaced(&self.client, namespace_of(&claim.metadata));
                    match api.create(claim, &PostParams::default()) {
                        Ok(created) => {
                            self.wrote(set, &claims_resource(), &created.metadata);
                            self.claims.mutation(created);
                            self.record_claim_event("create", set, pod, name, None);
                        }
                        Err(e) => {
                            if !e.is_already_exists() {
                                self.record_claim_event("create", set, pod, name, Some(&e.message()));
                            }
                            errors.push(Error::CreateClaim { name: name.to_string(), source: e });
                        }
                    }
                }
                Some(existing) if existing.metadata.deletion_timestamp.is_some() => {
                    errors.push(Error::ClaimBeingDeleted { name: name.to_string() });
                }
                Some(_) => {}
            }
        }
        Ok(Aggregate::from_errors(errors)?)
    }

    /// `recordPodEvent`.
    fn record_pod_event(&self, verb: &str, set: &StatefulSet, pod: &Pod, error: Option<&Error>) {
        let error = error.map(Error::to_string);
        let (reason, message) = pod_event(verb, name_of(&pod.metadata), name_of(&set.metadata), error.as_deref());
        self.recorder.event_for(set, event_type(error.as_deref()), &reason, &message);
    }

    /// `recordClaimEvent`.
    fn record_claim_event(&self, verb: &str, set: &StatefulSet, pod: &Pod, claim: &str, error: Option<&str>) {
        let (reason, message) = claim_event(verb, claim, name_of(&pod.metadata), name_of(&set.metadata), error);
        self.recorder.event_for(set, event_type(error), &reason, &message);
    }
}

fn event_type(error: Option<&str>) -> EventType {
    if error.is_some() { EventType::Warning } else { EventType::Normal }
}

/// The reason and message `recordPodEvent` records: the verb title-cased in both (in the
/// message since v1.34, where v1.33 wrote it lower-case).
fn pod_event(verb: &str, pod: &str, set: &str, error: Option<&str>) -> (String, String) {
    let verb = title(verb);
    match error {
        None => (format!("Successful{verb}"), format!("{verb} Pod {pod} in StatefulSet {set} successful")),
        Some(error) => {
            (format!("Failed{verb}"), format!("{verb} Pod {pod} in StatefulSet {set} failed error: {error}"))
        }
    }
}

/// The reason and message `recordClaimEvent` records, the verb title-cased as in [`pod_event`].
fn claim_event(verb: &str, claim: &str, pod: &str, set: &str, error: Option<&str>) -> (String, String) {
    let verb = title(verb);
    match error {
        None => (format!("Successful{verb}"), format!("{verb} Claim {claim} Pod {pod} in StatefulSet {set} success")),
        Some(error) => (
            format!("Failed{verb}"),
            format!("{verb} Claim {claim} for Pod {pod} in StatefulSet {set} failed error: {error}"),
        ),
    }
}

/// `cases.Title(language.English)` of a lower-case one-word verb.
fn title(verb: &str) -> String {
    let mut chars = verb.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_messages_title_case_the_verb() {
        assert_eq!(
            pod_event("create", "web-0", "web", None),
            ("SuccessfulCreate".to_string(), "Create Pod web-0 in StatefulSet web successful".to_string())
        );
        assert_eq!(
            pod_event("delete", "web-1", "web", Some("boom")),
            ("FailedDelete".to_string(), "Delete Pod web-1 in StatefulSet web failed error: boom".to_string())
        );
        assert_eq!(
            claim_event("update", "data-web-0", "web-0", "web", None),
            (
                "SuccessfulUpdate".to_string(),
                "Update Claim data-web-0 Pod web-0 in StatefulSet web success".to_string()
            )
        );
        assert_eq!(
            claim_event("create", "data-web-0", "web-0", "web", Some("quota")).1,
            "Create Claim data-web-0 for Pod web-0 in StatefulSet web failed error: quota"
        );
    }
}
