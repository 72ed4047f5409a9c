//! `syncPod` and what it calls: claims created from the pod's templates, their names applied to
//! the pod's `status.resourceClaimStatuses`, and the pod added to `status.reservedFor` of its
//! allocated claims once it is scheduled.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use super::{
    CLAIM_POD_OWNER_INDEX, Error, ResourceClaimController, api_error, claim_pod_owner_index, metrics, node_name,
};
use crate::apimachinery::strconv::quote;
use crate::client::{Api, Patch, PostParams};
use crate::controllers::resourceclaimutil::{
    self, ClaimName, NameError, POD_RESOURCE_CLAIM_ANNOTATION, can_be_reserved, is_for_pod, is_reserved_for_pod,
};
use crate::runtime::controller::{SyncError, SyncResult};
use crate::runtime::events::EventType;
use crate::runtime::informer::object_key;

/// `fieldManager`: the manager of the pod's `status.resourceClaimStatuses`.
const FIELD_MANAGER: &str = "ResourceClaimController";
/// The Warning Event on a pod whose claim could not be created.
const FAILED_RESOURCE_CLAIM_CREATION: &str = "FailedResourceClaimCreation";
/// Room for the hyphen and 5 random characters the API server adds in a 63-character name.
const MAX_BASE_LEN: usize = 57;

/// `pod claim name -> ResourceClaim name` of the claims created or found in one sync, in the
/// order of the pod's claims (upstream applies them in map order, which any order matches).
type NewPodClaims = Vec<(String, String)>;

impl ResourceClaimController {
    /// `syncPod`.
    pub(super) fn sync_pod(&self, namespace: &str, name: &str) -> SyncResult {
        let Some(pod) = self.pods.store().get_by_name(namespace, name) else { return Ok(()) };
        // Pods being deleted are left alone.
        if pod.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let mut new_pod_claims = NewPodClaims::new();
        for pod_claim in super::pod_claims(&pod) {
            if let Err(e) = self.handle_claim(&pod, pod_claim, &mut new_pod_claims) {
                let message = format!("PodResourceClaim {}: {}", pod_claim.name, e.message());
                self.recorder.event_for(&*pod, EventType::Warning, FAILED_RESOURCE_CLAIM_CREATION, &message);
                return Err(e.context(format!("pod {namespace}/{name}, PodResourceClaim {}", pod_claim.name)));
            }
        }
        if !new_pod_claims.is_empty() {
            let params =
                PostParams { field_manager: Some(FIELD_MANAGER.to_string()), force: true, ..PostParams::default() };
            let patch = Patch::Apply(status_apply(namespace, name, &new_pod_claims));
            Api::<Pod>::namespaced(&self.client, namespace)
                .patch_status(name, &patch, &params)
                .map_err(|e| api_error(e).context(format!("update pod {namespace}/{name} ResourceClaimStatuses")))?;
        }
        if node_name(&pod).is_empty() {
            // The scheduler makes the reservations.
            return Ok(());
        }
        self.reserve_allocated_claims(&pod)
    }

    /// The second half of `syncPod`: a scheduled pod reserves each of its allocated claims.
    /// `pod` is the one read before this sync's apply, so a claim created just now has no name
    /// yet and fails the sync, which is retried, as upstream's.
    fn reserve_allocated_claims(&self, pod: &Pod) -> SyncResult {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for pod_claim in super::pod_claims(pod) {
            let ClaimName { name, must_check_owner } = resourceclaimutil::name(pod, pod_claim).map_err(Error::from)?;
            let Some(name) = name else { continue };
            let Some(claim) = self.claims.store().get_by_name(namespace, &name) else { return Ok(()) };
            if must_check_owner {
                is_for_pod(pod, &claim, self.features.workload_resource_claims).map_err(Error::from)?;
            }
            let allocated = claim.status.as_ref().is_some_and(|s| s.allocation.is_some());
            if allocated
                && !is_reserved_for_pod(pod, &claim, self.features.workload_resource_claims)
                && can_be_reserved(&claim)
            {
                let consumer = resourceclaimutil::bind_to(pod, pod_claim).map_err(Error::from)?;
                self.reserve_for(consumer, &claim)?;
            }
        }
        Ok(())
    }

    /// `handleClaim`: creates the claim of a template entry unless it exists and is the pod's
    /// (or an orphan of the pod's is found), and notes its name in `new_pod_claims`.
    fn handle_claim(&self, pod: &Pod, pod_claim: &PodResourceClaim, new_pod_claims: &mut NewPodClaims) -> SyncResult {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        // Called for named claims too: an entry this code does not know fails here.
        match resourceclaimutil::name(pod, pod_claim) {
            Err(NameError::ClaimNotFound { .. }) => {}
            Err(e) => return Err(Error::CheckBeforeCreate(e).into()),
            Ok(ClaimName { name: None, .. }) => return Ok(()),
            Ok(ClaimName { name: Some(name), must_check_owner }) if !name.is_empty() => {
                // The claim is recorded in the pod status; it is created again if it was deleted
                // or is no longer the pod's.
                if let Some(claim) = self.claims.store().get_by_name(namespace, &name) {
                    let owned = if must_check_owner {
                        is_for_pod(pod, &claim, self.features.workload_resource_claims)
                    } else {
                        Ok(())
                    };
                    match owned {
                        Ok(()) => return Ok(()),
                        Err(e) => log::error!(
                            "Claim that was created for the pod is no longer owned by the pod, creating a new one \
                             err={e:?} podClaim={:?} resourceClaim={name:?}",
                            pod_claim.name
                        ),
                    }
                }
            }
            Ok(_) => {}
        }
        let Some(template_name) = &pod_claim.resource_claim_template_name else { return Ok(()) };
        // Without PodGroups (DRAWorkloadResourceClaims) the claim binds to the pod.
        resourceclaimutil::bind_to(pod, pod_claim).map_err(Error::from)?;
        // An orphan covers a create whose pod status update failed.
        let claim = match self.find_pod_resource_claim(pod, pod_claim) {
            Some(claim) => claim,
            None => self.create_claim(pod, pod_claim, template_name)?,
        };
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        new_pod_claims.push((pod_claim.name.clone(), claim_name));
        Ok(())
    }

    /// The creating half of `handleClaim`: the claim from the template, counted in
    /// `resourceclaim_controller_creates_total` and remembered in the claim cache.
    fn create_claim(
        &self,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
        template_name: &str,
    ) -> Result<Arc<ResourceClaim>, SyncError> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(template) = self.templates.store().get_by_name(namespace, template_name) else {
            return Err(Error::TemplateNotFound { quoted: quote(template_name) }.into());
        };
        if !self.features.admin_access && needs_admin_access(&template) {
            return Err(Error::AdminAccessDisabled.into());
        }
        if !self.features.prioritized_list && has_prioritized_list(&template) {
            return Err(Error::PrioritizedListDisabled.into());
        }
        let claim = claim_from_template(pod, pod_claim, &template);
        let admin_access = metrics::admin_access_label(&claim);
        match Api::<ResourceClaim>::namespaced(&self.client, namespace).create(&claim, &PostParams::default()) {
            Ok(created) => {
                metrics::created(true, admin_access);
                log::debug!("ResourceClaim: created claim={:?}", object_key(&created.metadata));
                Ok(self.claim_cache.mutation(created))
            }
            Err(e) => {
                metrics::created(false, admin_access);
                // The claim has only a generateName, so upstream's message names no claim.
                Err(api_error(e).context("create ResourceClaim "))
            }
        }
    }

    /// `findPodResourceClaim`: a claim controlled by the pod (seen by the informer or just
    /// created by us) and annotated with the pod claim's name.
    fn find_pod_resource_claim(&self, pod: &Pod, pod_claim: &PodResourceClaim) -> Option<Arc<ResourceClaim>> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let indexed = self.claims.store().by_index(CLAIM_POD_OWNER_INDEX, &uid);
        let owned = self.claim_cache.by_index_including_adds(indexed, |c| claim_pod_owner_index(c).contains(&uid));
        // The first one; there should not be more than one, and any other goes with the pod.
        owned.into_iter().find(|claim| {
            let annotations = claim.metadata.annotations.as_ref();
            annotations.and_then(|a| a.get(POD_RESOURCE_CLAIM_ANNOTATION)) == Some(&pod_claim.name)
        })
    }

    /// `reserveFor`: an update of the status, not a patch, so that a concurrent change fails it.
    fn reserve_for(&self, consumer: ResourceClaimConsumerReference, claim: &ResourceClaim) -> SyncResult {
        let mut claim = claim.clone();
        let reserved = claim.status.get_or_insert_with(Default::default).reserved_for.get_or_insert_with(Vec::new);
        reserved.push(consumer);
        let (namespace, name) = (
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        Api::<ResourceClaim>::namespaced(&self.client, namespace)
            .replace_status(name, &claim, &PostParams::default())
            .map_err(|e| api_error(e).context(format!("reserve claim {namespace}/{name}")))?;
        Ok(())
    }
}

/// `needsAdminAccess`: a request (not a sub-request) of the template asks for admin access.
fn needs_admin_access(template: &ResourceClaimTemplate) -> bool {
    template_requests(template).iter().any(|r| r.exactly.as_ref().and_then(|e| e.admin_access).unwrap_or(false))
}

/// `hasPrioritizedList`: a request of the template lists `firstAvailable` sub-requests.
fn has_prioritized_list(template: &ResourceClaimTemplate) -> bool {
    template_requests(template).iter().any(|r| r.first_available.as_ref().is_some_and(|f| !f.is_empty()))
}

fn template_requests(template: &ResourceClaimTemplate) -> &[k8s_openapi::api::resource::v1::DeviceRequest] {
    template.spec.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default()
}

/// The prefix of at most `len` bytes of a name (names are ASCII; a cut never splits a character).
fn prefix(name: &str, len: usize) -> &str {
    let mut end = len.min(name.len());
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The claim's `generateName`: `<pod>-<claim>-`, or, when that is longer than 57 characters,
/// both names cut in proportion to their length and joined by one hyphen (no trailing hyphen),
/// so that the pod claim's name is not lost as the API server's cut at the end would lose it.
pub(super) fn generate_name(pod: &str, pod_claim: &str) -> String {
    let name = format!("{pod}-{pod_claim}-");
    let len = name.len();
    if len <= MAX_BASE_LEN {
        return name;
    }
    format!(
        "{}-{}",
        prefix(pod, pod.len() * MAX_BASE_LEN / len),
        prefix(pod_claim, pod_claim.len() * MAX_BASE_LEN / len)
    )
}

/// The claim `handleClaim` creates: the template's labels, annotations (plus the pod claim's
/// name) and spec, controlled by the pod (without `blockOwnerDeletion`).
pub(super) fn claim_from_template(
    pod: &Pod,
    pod_claim: &PodResourceClaim,
    template: &ResourceClaimTemplate,
) -> ResourceClaim {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let meta = template.spec.metadata.as_ref();
    let mut annotations = meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(POD_RESOURCE_CLAIM_ANNOTATION.to_string(), pod_claim.name.clone());
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod_name.clone(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    ResourceClaim {
        metadata: ObjectMeta {
            generate_name: Some(generate_name(&pod_name, &pod_claim.name)),
            owner_references: Some(vec![owner]),
            annotations: Some(annotations),
            labels: meta.and_then(|m| m.labels.clone()),
            ..ObjectMeta::default()
        },
        spec: template.spec.spec.clone(),
        status: None,
    }
}

/// The apply configuration of `corev1apply.Pod(name, namespace)` with the new
/// `status.resourceClaimStatuses`.
fn status_apply(namespace: &str, name: &str, claims: &NewPodClaims) -> Value {
    let statuses: Vec<Value> =
        claims.iter().map(|(pod_claim, claim)| json!({"name": pod_claim, "resourceClaimName": claim})).collect();
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"resourceClaimStatuses": statuses},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_names_are_pod_and_claim_with_a_trailing_hyphen() {
        assert_eq!(generate_name("web", "gpu"), "web-gpu-");
        // 57 characters exactly are kept.
        let pod = "p".repeat(50);
        assert_eq!(generate_name(&pod, "gpu").len(), 55);
        let pod = "p".repeat(52);
        assert_eq!(generate_name(&pod, "gpu"), format!("{pod}-gpu-"));
        assert_eq!(generate_name(&pod, "gpu").len(), 57);
    }

    #[test]
    fn long_names_are_cut_in_proportion_without_a_trailing_hyphen() {
        // 53 + 3 + 2 = 58 > 57: 53*57/58 = 52 and 3*57/58 = 2.
        let pod = "p".repeat(53);
        assert_eq!(generate_name(&pod, "gpu"), format!("{}-gp", "p".repeat(52)));
        // Two names of 63 characters each.
        let (pod, claim) = ("a".repeat(63), "b".repeat(63));
        // L = 128: 63*57/128 = 28 each.
        assert_eq!(generate_name(&pod, &claim), format!("{}-{}", "a".repeat(28), "b".repeat(28)));
        assert_eq!(generate_name(&pod, &claim).len(), 57);
        // Uneven lengths keep their proportion.
        let (pod, claim) = ("x".repeat(90), "y".repeat(10));
        // L = 102: 90*57/102 = 50, 10*57/102 = 5.
        assert_eq!(generate_name(&pod, &claim), format!("{}-{}", "x".repeat(50), "y".repeat(5)));
    }

    fn template(spec: Value) -> ResourceClaimTemplate {
        serde_json::from_value(json!({"metadata": {"name": "t", "namespace": "team"}, "spec": spec}))
            .expect("a template")
    }

    #[test]
    fn the_claim_comes_from_the_template_and_is_controlled_by_the_pod() {
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "team", "uid": "p1"}})).unwrap();
        let pod_claim: PodResourceClaim =
            serde_json::from_value(json!({"name": "gpu", "resourceClaimTemplateName": "t"})).unwrap();
        let template = template(json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"note": "x"}},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}));
        let claim = claim_from_template(&pod, &pod_claim, &template);
        let expected = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": "web-gpu-",
                "labels": {"app": "web"},
                "annotations": {"note": "x", "resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p1", "controller": true}],
            },
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        });
        assert_eq!(serde_json::to_value(&claim).unwrap(), expected);
        // Without labels and annotations in the template: the annotation alone, no labels.
        let bare = claim_from_template(&pod, &pod_claim, &super::tests::template(json!({"spec": {}})));
        assert_eq!(bare.metadata.labels, None);
        assert_eq!(bare.metadata.annotations.map(|a| a.len()), Some(1));
    }

    #[test]
    fn admin_access_and_prioritized_lists_are_found_in_templates() {
        let plain =
            template(json!({"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}}}));
        assert!(!needs_admin_access(&plain) && !has_prioritized_list(&plain));
        let admin = template(json!({"spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "c", "adminAccess": true}}]}}}));
        assert!(needs_admin_access(&admin));
        let listed = template(json!({"spec": {"devices": {"requests": [
            {"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": "c"}]}]}}}));
        assert!(has_prioritized_list(&listed) && !needs_admin_access(&listed));
    }

    #[test]
    fn the_status_apply_names_the_pod_and_its_new_claims() {
        let claims = vec![("gpu".to_string(), "web-gpu-x1y2z".to_string())];
        assert_eq!(
            status_apply("team", "web", &claims),
            json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web", "namespace": "team"},
                "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-x1y2z"}]}})
        );
    }
}
