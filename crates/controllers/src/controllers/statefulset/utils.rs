//! Upstream's `stateful_set_utils.go`: pod identity (names, ordinals, labels), storage (claim
//! names, volumes), the claims' owner references under a retention policy, new pods of a
//! revision, and the status helpers. Pure functions over typed objects.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::apimachinery::pod::{is_pod_available, is_pod_ready, phase};
use crate::runtime::controller_ref::controller_ref;

/// `apps.StatefulSetPodNameLabel`.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// `apps.PodIndexLabel` (always set: the `PodIndexLabel` gate is GA and gone in v1.36).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// `apps.StatefulSetRevisionLabel`.
pub const REVISION_LABEL: &str = "controller-revision-hash";

const RETAIN: &str = "Retain";
const DELETE: &str = "Delete";

/// The set's spec (an empty one if unset).
pub fn spec(set: &StatefulSet) -> &StatefulSetSpec {
    static EMPTY: std::sync::OnceLock<StatefulSetSpec> = std::sync::OnceLock::new();
    set.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
}

/// `*spec.replicas` (defaulted to 1 by the API server).
pub fn replicas(set: &StatefulSet) -> i32 {
    spec(set).replicas.unwrap_or(1)
}

/// The set's status (an empty one if unset).
pub fn status(set: &StatefulSet) -> StatefulSetStatus {
    set.status.clone().unwrap_or_default()
}

pub fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

pub fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("")
}

/// `getParentNameAndOrdinal`: `(.*)-([0-9]+)$`; no match is `("", -1)`, an ordinal beyond 32
/// bits `(parent, -1)`.
pub fn parent_and_ordinal(name: &str) -> (&str, i64) {
    let Some((parent, digits)) = name.rsplit_once('-') else { return ("", -1) };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return ("", -1);
    }
    let ordinal = digits.parse::<i32>().map_or(-1, i64::from);
    (parent, ordinal)
}

/// `getOrdinal`: the ordinal of a pod's name, -1 if it has none.
pub fn ordinal(pod: &Pod) -> i64 {
    parent_and_ordinal(name_of(&pod.metadata)).1
}

/// `getStartOrdinal`: `spec.ordinals.start`, 0 if unset.
pub fn start_ordinal(set: &StatefulSet) -> i64 {
    spec(set).ordinals.as_ref().and_then(|o| o.start).map_or(0, i64::from)
}

/// `getEndOrdinal` (inclusive).
pub fn end_ordinal(set: &StatefulSet) -> i64 {
    start_ordinal(set) + i64::from(replicas(set)) - 1
}

/// `podInOrdinalRange`.
pub fn in_ordinal_range(pod: &Pod, set: &StatefulSet) -> bool {
    let ordinal = ordinal(pod);
    ordinal >= start_ordinal(set) && ordinal <= end_ordinal(set)
}

/// `getPodName`.
pub fn pod_name(set: &StatefulSet, ordinal: i64) -> String {
    format!("{}-{ordinal}", name_of(&set.metadata))
}

/// `getPersistentVolumeClaimName`: `<claim>-<set>-<ordinal>`.
pub fn claim_name(set: &StatefulSet, template: &PersistentVolumeClaim, ordinal: i64) -> String {
    format!("{}-{}-{ordinal}", name_of(&template.metadata), name_of(&set.metadata))
}

/// `isMemberOf`.
pub fn is_member_of(set: &StatefulSet, pod_meta: &ObjectMeta) -> bool {
    let (parent, _) = parent_and_ordinal(name_of(pod_meta));
    parent == name_of(&set.metadata)
}

fn label<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// `identityMatches`.
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let name = name_of(&pod.metadata);
    let (parent, ordinal) = parent_and_ordinal(name);
    ordinal >= 0
        && name_of(&set.metadata) == parent
        && name == pod_name(set, ordinal)
        && pod.metadata.namespace == set.metadata.namespace
        && label(pod, POD_NAME_LABEL) == Some(name)
}

/// `storageMatches`: the pod's volumes name the claims of every template.
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let ordinal = ordinal(pod);
    if ordinal < 0 {
        return false;
    }
    let volumes: BTreeMap<&str, &Volume> = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    spec(set).volume_claim_templates.iter().flatten().all(|template| {
        volumes
            .get(name_of(&template.metadata))
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .is_some_and(|source| source.claim_name == claim_name(set, template, ordinal))
    })
}

/// `getPersistentVolumeClaimRetentionPolicy`: `(whenDeleted, whenScaled)`, Retain if unset.
pub fn retention_policy(set: &StatefulSet) -> (&str, &str) {
    let policy = spec(set).persistent_volume_claim_retention_policy.as_ref();
    let when_deleted = policy.and_then(|p| p.when_deleted.as_deref()).unwrap_or(RETAIN);
    let when_scaled = policy.and_then(|p| p.when_scaled.as_deref()).unwrap_or(RETAIN);
    (when_deleted, when_scaled)
}

/// The owner a claim's references may name: the set or one of its pods.
#[derive(Clone, Copy)]
pub struct Owner<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub meta: &'a ObjectMeta,
}

impl<'a> Owner<'a> {
    pub fn set(set: &'a StatefulSet) -> Owner<'a> {
        Owner { api_version: "apps/v1", kind: "StatefulSet", meta: &set.metadata }
    }

    pub fn pod(pod: &'a Pod) -> Owner<'a> {
        Owner { api_version: "v1", kind: "Pod", meta: &pod.metadata }
    }

    fn uid(&self) -> &'a str {
        self.meta.uid.as_deref().unwrap_or("")
    }

    /// `matchesRef`: same group-version, kind and name.
    fn matches(&self, reference: &OwnerReference) -> bool {
        reference.api_version == self.api_version && reference.kind == self.kind && reference.name == name_of(self.meta)
    }

    /// `metav1.NewControllerRef`.
    fn controller_ref(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.into(),
            kind: self.kind.into(),
            name: name_of(self.meta).into(),
            uid: self.uid().into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

fn refs(claim: &PersistentVolumeClaim) -> &[OwnerReference] {
    claim.metadata.owner_references.as_deref().unwrap_or_default()
}

/// `hasOwnerRef`: a reference with the owner's uid.
pub fn has_owner_ref(claim: &PersistentVolumeClaim, owner: Owner<'_>) -> bool {
    refs(claim).iter().any(|r| r.uid == owner.uid())
}

/// `hasStaleOwnerRef`: the first reference matching the owner has another uid.
pub fn has_stale_owner_ref(claim: &PersistentVolumeClaim, owner: Owner<'_>) -> bool {
    refs(claim).iter().find(|r| owner.matches(r)).is_some_and(|r| r.uid != owner.uid())
}

/// `hasUnexpectedController`.
pub fn has_unexpected_controller(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    if retention_policy(set) == (RETAIN, RETAIN) {
        return false;
    }
    let (set_owner, pod_owner) = (Owner::set(set), Owner::pod(pod));
    for reference in refs(claim) {
        if set_owner.matches(reference) {
            if reference.uid != set_owner.uid() {
                return true;
            }
            continue;
        }
        if pod_owner.matches(reference) {
            if reference.uid != pod_owner.uid() {
                return true;
            }
            continue;
        }
        if reference.controller == Some(true) {
            return true;
        }
    }
    false
}

/// `hasNonControllerOwner`.
fn has_non_controller_owner(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    let (set_uid, pod_uid) = (Owner::set(set).uid(), Owner::pod(pod).uid());
    refs(claim).iter().any(|r| (r.uid == set_uid || r.uid == pod_uid) && r.controller != Some(true))
}

/// `isClaimOwnerUpToDate`: whether the claim's references agree with the retention policy
/// (stale references and other controllers are left alone).
pub fn is_claim_owner_up_to_date(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    let (set_owner, pod_owner) = (Owner::set(set), Owner::pod(pod));
    if has_stale_owner_ref(claim, set_owner) || has_stale_owner_ref(claim, pod_owner) {
        return true;
    }
    if has_unexpected_controller(claim, set, pod) {
        return !(has_owner_ref(claim, set_owner) || has_owner_ref(claim, pod_owner));
    }
    if has_non_controller_owner(claim, set, pod) {
        return false;
    }
    let (has_set, has_pod) = (has_owner_ref(claim, set_owner), has_owner_ref(claim, pod_owner));
    let scaled_down = !in_ordinal_range(pod, set);
    match retention_policy(set) {
        (DELETE, RETAIN) => has_set && !has_pod,
        (RETAIN, DELETE) => !has_set && scaled_down == has_pod,
        (DELETE, DELETE) => scaled_down != has_set && scaled_down == has_pod,
        (when_deleted, when_scaled) => {
            if (when_deleted, when_scaled) != (RETAIN, RETAIN) {
                log::error!("Unknown policy, treating as Retain whenDeleted={when_deleted} whenScaled={when_scaled}");
            }
            !has_set && !has_pod
        }
    }
}

/// `updateClaimOwnerRefForSetAndPod`: the claim's references to the set and pod rewritten for
/// the retention policy.
pub fn update_claim_owner_refs(claim: &mut PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) {
    let unexpected = has_unexpected_controller(claim, set, pod);
    let (set_owner, pod_owner) = (Owner::set(set), Owner::pod(pod));
    let mut kept: Vec<OwnerReference> =
        refs(claim).iter().filter(|r| !set_owner.matches(r) && !pod_owner.matches(r)).cloned().collect();
    if !unexpected {
        let scaled_down = !in_ordinal_range(pod, set);
        let mut add = |owner: Owner<'_>| {
            if !kept.iter().any(|r| r.uid == owner.uid()) {
                kept.push(owner.controller_ref());
            }
        };
        match retention_policy(set) {
            (DELETE, RETAIN) => add(set_owner),
            (RETAIN, DELETE) if scaled_down => add(pod_owner),
            (DELETE, DELETE) if scaled_down => add(pod_owner),
            (DELETE, DELETE) => add(set_owner),
            (RETAIN, RETAIN) | (RETAIN, DELETE) => {}
            (when_deleted, when_scaled) => {
                log::error!("Unknown policy, treating as Retain whenDeleted={when_deleted} whenScaled={when_scaled}")
            }
        }
    }
    claim.metadata.owner_references = Some(kept);
}

/// `getPersistentVolumeClaims`: the claims of a pod's ordinal, by template name, each labelled
/// with the set's `matchLabels`.
pub fn pod_claims(set: &StatefulSet, ordinal: i64) -> BTreeMap<String, PersistentVolumeClaim> {
    let match_labels = spec(set).selector.match_labels.clone().unwrap_or_default();
    spec(set)
        .volume_claim_templates
        .iter()
        .flatten()
        .map(|template| {
            let mut claim = template.clone();
            claim.metadata.name = Some(claim_name(set, template, ordinal));
            claim.metadata.namespace = set.metadata.namespace.clone();
            match claim.metadata.labels.as_mut() {
                Some(labels) => labels.extend(match_labels.clone()),
                None => claim.metadata.labels = Some(match_labels.clone()),
            }
            (name_of(&template.metadata).to_string(), claim)
        })
        .collect()
}

/// `updateStorage`: the templates' claims as the pod's first volumes, its other volumes after.
pub fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let claims = pod_claims(set, ordinal(pod));
    let pod_spec = pod.spec.get_or_insert_with(Default::default);
    let current = pod_spec.volumes.take().unwrap_or_default();
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(name, claim)| Volume {
            name: name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: name_of(&claim.metadata).to_string(),
                read_only: None,
            }),
            ..Volume::default()
        })
        .collect();
    volumes.extend(current.into_iter().filter(|v| !claims.contains_key(&v.name)));
    pod_spec.volumes = Some(volumes);
}

/// `updateIdentity`: name, namespace, the pod-name and pod-index labels.
pub fn update_identity(set: &StatefulSet, pod: &mut Pod) {
    let ordinal = ordinal(pod);
    let name = pod_name(set, ordinal);
    pod.metadata.name = Some(name.clone());
    pod.metadata.namespace = set.metadata.namespace.clone();
    let labels = pod.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(POD_NAME_LABEL.into(), name);
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
}

/// `newStatefulSetPod`: `GetPodFromTemplate`, the identity (hostname, subdomain) and storage.
pub fn new_pod(set: &StatefulSet, ordinal: i64) -> Pod {
    let template = spec(set).template.clone();
    let template_meta = template.metadata.unwrap_or_default();
    let metadata = ObjectMeta {
        generate_name: Some(format!("{}-", name_of(&set.metadata))),
        name: Some(pod_name(set, ordinal)),
        labels: template_meta.labels,
        annotations: template_meta.annotations,
        finalizers: template_meta.finalizers,
        owner_references: Some(vec![controller_ref(set)]),
        ..ObjectMeta::default()
    };
    let mut pod = Pod { metadata, spec: template.spec, status: None };
    update_identity(set, &mut pod);
    let name = pod.metadata.name.clone();
    let pod_spec = pod.spec.get_or_insert_with(Default::default);
    pod_spec.hostname = name;
    pod_spec.subdomain = spec(set).service_name.clone().filter(|s| !s.is_empty());
    update_storage(set, &mut pod);
    pod
}

/// `newVersionedStatefulSetPod`: below the partition (or, without a rollingUpdate, below the
/// current replicas) a pod of the current revision, else of the update revision.
pub fn new_versioned_pod(
    current_set: &StatefulSet,
    update_set: &StatefulSet,
    current_revision: &str,
    update_revision: &str,
    ordinal: i64,
) -> Pod {
    let strategy = spec(current_set).update_strategy.as_ref();
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let is_rolling = strategy.and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate") == "RollingUpdate";
    let start = start_ordinal(current_set);
    let current_replicas = i64::from(current_set.status.as_ref().and_then(|s| s.current_replicas).unwrap_or(0));
    // Go's precedence: `(rolling && nil && below current) || (non-nil && below partition)`.
    let current = (is_rolling && rolling.is_none() && ordinal < start + current_replicas)
        || rolling.is_some_and(|r| ordinal < start + i64::from(r.partition.unwrap_or(0)));
    let (set, revision) = if current { (current_set, current_revision) } else { (update_set, update_revision) };
    let mut pod = new_pod(set, ordinal);
    set_revision(&mut pod, revision);
    pod
}

/// `setPodRevision`.
pub fn set_revision(pod: &mut Pod, revision: &str) {
    pod.metadata.labels.get_or_insert_with(Default::default).insert(REVISION_LABEL.into(), revision.into());
}

/// `getPodRevision`.
pub fn revision_of(pod: &Pod) -> &str {
    label(pod, REVISION_LABEL).unwrap_or("")
}

/// `isRunningAndReady`.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_pod_ready(pod)
}

/// `isRunningAndAvailable` (despite its name, only `IsPodAvailable` at the sync's `now`).
pub fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    is_pod_available(pod, min_ready_seconds, now)
}

/// `isCreated`: the API server gave it a phase.
pub fn is_created(pod: &Pod) -> bool {
    !phase(pod).is_empty()
}

pub fn is_pending(pod: &Pod) -> bool {
    phase(pod) == "Pending"
}

/// `isFailed || isSucceeded`.
pub fn is_finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Failed" | "Succeeded")
}

/// `isTerminating`.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `isUnavailable`: not available at `now` (ready for `minReadySeconds`), or terminating. It
/// replaced v1.33's `isHealthy` (running, ready, not terminating), so that scale-down and the
/// rolling update wait for availability.
pub fn is_unavailable(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    !is_pod_available(pod, min_ready_seconds, now) || is_terminating(pod)
}

/// `allowsBurst`: `podManagementPolicy: Parallel`.
pub fn allows_burst(set: &StatefulSet) -> bool {
    spec(set).pod_management_policy.as_deref() == Some("Parallel")
}

/// `inconsistentStatus`: the status computed differs from the set's.
pub fn inconsistent_status(set: &StatefulSet, new: &StatefulSetStatus) -> bool {
    let old = status(set);
    new.observed_generation.unwrap_or(0) > old.observed_generation.unwrap_or(0)
        || new.replicas != old.replicas
        || new.current_replicas.unwrap_or(0) != old.current_replicas.unwrap_or(0)
        || new.ready_replicas.unwrap_or(0) != old.ready_replicas.unwrap_or(0)
        || new.updated_replicas.unwrap_or(0) != old.updated_replicas.unwrap_or(0)
        || new.current_revision.as_deref().unwrap_or("") != old.current_revision.as_deref().unwrap_or("")
        || new.available_replicas.unwrap_or(0) != old.available_replicas.unwrap_or(0)
        || new.update_revision.as_deref().unwrap_or("") != old.update_revision.as_deref().unwrap_or("")
}

/// `completeRollingUpdate`: once every replica is updated and ready, the update revision
/// becomes the current one.
pub fn complete_rolling_update(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let wanted = replicas(set);
    let strategy = spec(set).update_strategy.as_ref().and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate");
    if strategy == "RollingUpdate"
        && status.updated_replicas.unwrap_or(0) == wanted
        && status.ready_replicas.unwrap_or(0) == wanted
        && status.replicas == wanted
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testutil::merge_json;
    use serde_json::json;

    fn set(extra: serde_json::Value) -> StatefulSet {
        let mut value = json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid"},
            "spec": {
                "replicas": 3,
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}],
                    "volumes": [{"name": "other", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
            }
        });
        merge_json(&mut value, extra);
        serde_json::from_value(value).unwrap()
    }

    fn pod_named(name: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")}}))
            .unwrap()
    }

    #[test]
    fn ordinals_are_parsed_as_upstream_regex() {
        assert_eq!(parent_and_ordinal("web-0"), ("web", 0));
        assert_eq!(parent_and_ordinal("my-web-12"), ("my-web", 12));
        assert_eq!(parent_and_ordinal("web"), ("", -1));
        assert_eq!(parent_and_ordinal("web-"), ("", -1));
        assert_eq!(parent_and_ordinal("web-x1"), ("", -1));
        assert_eq!(parent_and_ordinal("web-99999999999"), ("web", -1));
    }

    #[test]
    fn new_pods_carry_identity_storage_and_start_ordinal() {
        let set = set(json!({"spec": {"ordinals": {"start": 5}}}));
        assert_eq!((start_ordinal(&set), end_ordinal(&set)), (5, 7));
        let pod = new_pod(&set, 6);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-6"));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[POD_NAME_LABEL], "web-6");
        assert_eq!(labels[POD_INDEX_LABEL], "6");
        let pod_spec = pod.spec.as_ref().unwrap();
        assert_eq!(pod_spec.hostname.as_deref(), Some("web-6"));
        assert_eq!(pod_spec.subdomain.as_deref(), Some("nginx"));
        let volumes = pod_spec.volumes.as_ref().unwrap();
        assert_eq!(volumes[0].persistent_volume_claim.as_ref().unwrap().claim_name, "data-web-6");
        assert_eq!(volumes[1].name, "other");
        assert!(identity_matches(&set, &pod) && storage_matches(&set, &pod));
        assert!(in_ordinal_range(&pod, &set));
        assert!(!in_ordinal_range(&pod_named("web-4"), &set));
        let claims = pod_claims(&set, 6);
        assert_eq!(claims["data"].metadata.labels.as_ref().unwrap()["app"], "web");
    }

    #[test]
    fn the_partition_decides_the_revision_of_a_new_pod() {
        let set =
            set(json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}}));
        assert_eq!(revision_of(&new_versioned_pod(&set, &set, "cur", "upd", 1)), "cur");
        assert_eq!(revision_of(&new_versioned_pod(&set, &set, "cur", "upd", 2)), "upd");
        let on_delete = self::set(
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}, "status": {"replicas": 3, "currentReplicas": 3}}),
        );
        assert_eq!(revision_of(&new_versioned_pod(&on_delete, &on_delete, "cur", "upd", 0)), "upd");
        let rolling = self::set(
            json!({"spec": {"updateStrategy": {"type": "RollingUpdate"}}, "status": {"replicas": 3, "currentReplicas": 2}}),
        );
        assert_eq!(revision_of(&new_versioned_pod(&rolling, &rolling, "cur", "upd", 1)), "cur");
        assert_eq!(revision_of(&new_versioned_pod(&rolling, &rolling, "cur", "upd", 2)), "upd");
    }

    #[test]
    fn claim_owner_refs_follow_the_retention_policy() {
        let policy = |deleted: &str, scaled: &str| {
            set(
                json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": deleted, "whenScaled": scaled}}}),
            )
        };
        let claim = || PersistentVolumeClaim::default();
        let in_range = pod_named("web-1");
        let scaled = pod_named("web-4");
        let owners = |c: &PersistentVolumeClaim| -> Vec<String> {
            c.metadata.owner_references.iter().flatten().map(|r| r.kind.clone()).collect()
        };
        for (deleted, scaled_policy, pod, expected) in [
            ("Retain", "Retain", &in_range, vec![]),
            ("Delete", "Retain", &in_range, vec!["StatefulSet"]),
            ("Delete", "Retain", &scaled, vec!["StatefulSet"]),
            ("Retain", "Delete", &in_range, vec![]),
            ("Retain", "Delete", &scaled, vec!["Pod"]),
            ("Delete", "Delete", &in_range, vec!["StatefulSet"]),
            ("Delete", "Delete", &scaled, vec!["Pod"]),
        ] {
            let set = policy(deleted, scaled_policy);
            let mut c = claim();
            let up_to_date = is_claim_owner_up_to_date(&c, &set, pod);
            assert_eq!(up_to_date, expected.is_empty(), "{deleted}/{scaled_policy}");
            update_claim_owner_refs(&mut c, &set, pod);
            assert_eq!(owners(&c), expected, "{deleted}/{scaled_policy}");
            assert!(is_claim_owner_up_to_date(&c, &set, pod));
        }
        // Another controller's claim is left alone.
        let set = policy("Delete", "Delete");
        let mut foreign = claim();
        foreign.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Other".into(),
            name: "x".into(),
            uid: "x".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        assert!(is_claim_owner_up_to_date(&foreign, &set, &in_range));
    }

    #[test]
    fn a_pod_is_unavailable_until_ready_for_min_ready_seconds_or_while_terminating() {
        use crate::apimachinery::pod::fixtures::at;
        let ready_since = |phase: &str, since: i64| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "web-0"}, "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": at(since).to_string()}]}}))
            .unwrap()
        };
        let pod = ready_since("Running", 100);
        assert!(!is_unavailable(&pod, 0, at(100)));
        assert!(is_unavailable(&pod, 10, at(105)), "ready, not yet available");
        assert!(!is_unavailable(&pod, 10, at(111)));
        // Ready suffices: the phase is not looked at (v1.33's isHealthy wanted Running).
        assert!(!is_unavailable(&ready_since("Pending", 100), 0, at(100)));
        let mut terminating = pod.clone();
        terminating.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(120)));
        assert!(is_unavailable(&terminating, 0, at(130)));
        assert!(is_running_and_available(&pod, 10, at(111)) && !is_running_and_available(&pod, 10, at(105)));
    }

    #[test]
    fn a_rolling_update_completes_when_every_replica_is_updated_and_ready() {
        let set = set(json!({}));
        let mut status = StatefulSetStatus {
            replicas: 3,
            ready_replicas: Some(3),
            updated_replicas: Some(3),
            current_replicas: Some(1),
            current_revision: Some("a".into()),
            update_revision: Some("b".into()),
            ..Default::default()
        };
        complete_rolling_update(&set, &mut status);
        assert_eq!((status.current_replicas, status.current_revision.as_deref()), (Some(3), Some("b")));
        assert!(inconsistent_status(&set, &status));
    }
}
