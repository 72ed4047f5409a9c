//! How many pods a budget expects, after upstream's `getExpectedPodCount`, `getExpectedScale`
//! and its controller finders: each pod's controller is looked up among ReplicationControllers,
//! Deployments (through their ReplicaSets), ReplicaSets and StatefulSets in the caches, then
//! through the `/scale` subresource of whatever kind it is.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Error;
use crate::apimachinery::intstr::scaled_value;
use crate::apimachinery::schema::parse_group_version;
use crate::client::scale::ScaleClient;
use crate::runtime::controller_ref::controller_of;
use crate::runtime::informer::Informer;

/// A controller found for a pod: its uid and desired scale (`controllerAndScale`).
type Found = Option<(String, i32)>;

/// What the finders read.
pub struct Finders {
    pub(super) rcs: Arc<Informer<ReplicationController>>,
    pub(super) rss: Arc<Informer<ReplicaSet>>,
    pub(super) deployments: Arc<Informer<Deployment>>,
    pub(super) sets: Arc<Informer<StatefulSet>>,
    pub(super) scales: ScaleClient,
}

/// What `getExpectedPodCount` gives.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// `expectedPods`.
    pub count: i32,
    /// `desiredHealthy`.
    pub desired_healthy: i32,
    /// Pods with no controller, whose budget's percentage cannot be computed right.
    pub unmanaged: Vec<String>,
}

/// `verifyGroupKind`: the reference is to `kind` in one of `groups`.
fn verify_group_kind(reference: &OwnerReference, kind: &str, groups: &[&str]) -> Result<bool, Error> {
    let (group, _) = parse_group_version(&reference.api_version).map_err(|e| Error::GroupVersion(e.into()))?;
    Ok(reference.kind == kind && groups.contains(&group))
}

/// The cached object's uid when it is the one referenced.
fn uid_matches(uid: Option<&String>, reference: &OwnerReference) -> bool {
    uid == Some(&reference.uid)
}

impl Finders {
    /// `getPodReplicationController`.
    fn replication_controller(&self, reference: &OwnerReference, namespace: &str) -> Result<Found, Error> {
        if !verify_group_kind(reference, "ReplicationController", &[""])? {
            return Ok(None);
        }
        let Some(rc) = self.rcs.store().get_by_name(namespace, &reference.name) else { return Ok(None) };
        if !uid_matches(rc.metadata.uid.as_ref(), reference) {
            return Ok(None);
        }
        Ok(Some((reference.uid.clone(), rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))))
    }

    /// The ReplicaSet referenced, when cached with that uid.
    fn replica_set(&self, reference: &OwnerReference, namespace: &str) -> Result<Option<Arc<ReplicaSet>>, Error> {
        if !verify_group_kind(reference, "ReplicaSet", &["apps", "extensions"])? {
            return Ok(None);
        }
        let rs = self.rss.store().get_by_name(namespace, &reference.name);
        Ok(rs.filter(|rs| uid_matches(rs.metadata.uid.as_ref(), reference)))
    }

    /// `getPodDeployment`: the Deployment controlling the pod's ReplicaSet.
    fn deployment(&self, reference: &OwnerReference, namespace: &str) -> Result<Found, Error> {
        let Some(rs) = self.replica_set(reference, namespace)? else { return Ok(None) };
        let Some(owner) = controller_of(&rs.metadata) else { return Ok(None) };
        if !verify_group_kind(owner, "Deployment", &["apps", "extensions"])? {
            return Ok(None);
        }
        let Some(deployment) = self.deployments.store().get_by_name(namespace, &owner.name) else { return Ok(None) };
        if !uid_matches(deployment.metadata.uid.as_ref(), owner) {
            return Ok(None);
        }
        Ok(Some((owner.uid.clone(), deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))))
    }

    /// `getPodReplicaSet`: a ReplicaSet no Deployment controls.
    fn replica_set_alone(&self, reference: &OwnerReference, namespace: &str) -> Result<Found, Error> {
        let Some(rs) = self.replica_set(reference, namespace)? else { return Ok(None) };
        if controller_of(&rs.metadata).is_some_and(|owner| owner.kind == "Deployment") {
            return Ok(None);
        }
        Ok(Some((reference.uid.clone(), rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))))
    }

    /// `getPodStatefulSet`.
    fn stateful_set(&self, reference: &OwnerReference, namespace: &str) -> Result<Found, Error> {
        if !verify_group_kind(reference, "StatefulSet", &["apps"])? {
            return Ok(None);
        }
        let Some(set) = self.sets.store().get_by_name(namespace, &reference.name) else { return Ok(None) };
        if !uid_matches(set.metadata.uid.as_ref(), reference) {
            return Ok(None);
        }
        Ok(Some((reference.uid.clone(), set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))))
    }

    /// `getScaleController`: any kind, through its `/scale` subresource.
    fn scale_controller(&self, reference: &OwnerReference, namespace: &str) -> Result<Found, Error> {
        let (group, version) =
            parse_group_version(&reference.api_version).map_err(|e| Error::GroupVersion(e.into()))?;
        let mappings = self.scales.mappings(group, &reference.kind).map_err(Error::ScaleMappings)?;
        // `RESTMapping(gk, version)`: that version only.
        let resource = match mappings.iter().find(|m| version.is_empty() || m.version == version) {
            Some(resource) => resource,
            None => {
                return Err(Error::NoMatchesForKind {
                    kind: reference.kind.clone(),
                    api_version: reference.api_version.clone(),
                });
            }
        };
        let scale = match self.scales.get(resource, namespace, &reference.name) {
            Ok(scale) => scale,
            Err(e) if e.is_not_found() => {
                // Not found: the object is missing, or its kind has no scale subresource.
                if !self.scales.implements_scale(resource).map_err(Error::Scale)? {
                    let group_resource = resource.group_resource().to_string();
                    return Err(Error::NoScaleSubresource { group_resource });
                }
                return Ok(None);
            }
            Err(e) => return Err(Error::Scale(e)),
        };
        if !uid_matches(scale.metadata.uid.as_ref(), reference) {
            return Ok(None);
        }
        Ok(Some((reference.uid.clone(), scale.spec.and_then(|s| s.replicas).unwrap_or(0))))
    }

    /// The finders in upstream's order (`finders()`): the first to find the controller wins.
    fn find(&self, reference: &OwnerReference, namespace: &str) -> Result<Found, Error> {
        type Finder = fn(&Finders, &OwnerReference, &str) -> Result<Found, Error>;
        let finders: [Finder; 5] = [
            Finders::replication_controller,
            Finders::deployment,
            Finders::replica_set_alone,
            Finders::stateful_set,
            Finders::scale_controller,
        ];
        for finder in finders {
            if let Some(found) = finder(self, reference, namespace)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// `getExpectedScale`: the sum of the scales of the pods' controllers, each counted once;
    /// pods without a controller are listed apart.
    fn expected_scale(&self, pods: &[&Pod]) -> Result<(i32, Vec<String>), Error> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(reference) = controller_of(&pod.metadata) else {
                unmanaged.push(name);
                continue;
            };
            if scales.contains_key(&reference.uid) {
                continue;
            }
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            match self.find(reference, namespace)? {
                Some((uid, scale)) => {
                    scales.insert(uid, scale);
                }
                None => {
                    return Err(Error::NoControllers { pod: name });
                }
            }
        }
        Ok((scales.values().sum(), unmanaged))
    }

    /// `getExpectedPodCount` for `pods`.
    pub fn expected_pod_count(&self, pdb: &PodDisruptionBudget, pods: &[&Pod]) -> Result<Expected, Error> {
        expected_pod_count(pdb, pods.len(), || self.expected_scale(pods))
    }
}

/// `getExpectedPodCount`: `maxUnavailable` and a percentage `minAvailable` count the
/// controllers' scale (`scale`, asked only then), rounding percentages up; a number
/// `minAvailable` counts the `pods`.
fn expected_pod_count(
    pdb: &PodDisruptionBudget,
    pods: usize,
    scale: impl FnOnce() -> Result<(i32, Vec<String>), Error>,
) -> Result<Expected, Error> {
    let spec = pdb.spec.clone().unwrap_or_default();
    if let Some(max_unavailable) = &spec.max_unavailable {
        let (count, unmanaged) = scale()?;
        let max = scaled_value(max_unavailable, count, true).map_err(|e| Error::ScaledValue(e.into()))?;
        return Ok(Expected { count, desired_healthy: (count - max).max(0), unmanaged });
    }
    match &spec.min_available {
        Some(IntOrString::Int(min)) => {
            Ok(Expected { count: pods as i32, desired_healthy: *min, unmanaged: Vec::new() })
        }
        Some(percent) => {
            let (count, unmanaged) = scale()?;
            let desired_healthy = scaled_value(percent, count, true).map_err(|e| Error::ScaledValue(e.into()))?;
            Ok(Expected { count, desired_healthy, unmanaged })
        }
        None => Ok(Expected::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(api_version: &str, kind: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "x".into(),
            uid: "u".into(),
            ..Default::default()
        }
    }

    #[test]
    fn group_versions_and_kinds_are_verified_as_upstream() {
        assert!(
            verify_group_kind(&reference("apps/v1", "ReplicaSet"), "ReplicaSet", &["apps", "extensions"])
                .expect("valid")
        );
        assert!(
            verify_group_kind(&reference("extensions/v1beta1", "ReplicaSet"), "ReplicaSet", &["apps", "extensions"])
                .expect("valid")
        );
        assert!(!verify_group_kind(&reference("v1", "ReplicaSet"), "ReplicaSet", &["apps"]).expect("valid"));
        assert!(!verify_group_kind(&reference("apps/v1", "StatefulSet"), "ReplicaSet", &["apps"]).expect("valid"));
        assert!(verify_group_kind(&reference("a/b/c", "ReplicaSet"), "ReplicaSet", &["apps"]).is_err());
    }

    fn budget(spec: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "b"}, "spec": spec})).expect("a budget")
    }

    fn count(spec: serde_json::Value, pods: usize, scale: i32) -> Result<Expected, String> {
        expected_pod_count(&budget(spec), pods, || Ok((scale, vec!["orphan".to_string()]))).map_err(|e| e.to_string())
    }

    /// A failure of the scale lookup, as the finders give one.
    fn failing(text: &str) -> Result<(i32, Vec<String>), Error> {
        Err(Error::GroupVersion(text.into()))
    }

    #[test]
    fn expected_counts_round_percentages_up() {
        // A number minAvailable counts the pods, not the scale (which is not even asked).
        let fixed = expected_pod_count(&budget(serde_json::json!({"minAvailable": 2})), 3, || failing("not asked"));
        assert_eq!(fixed.map_err(|e| e.to_string()), Ok(Expected { count: 3, desired_healthy: 2, unmanaged: vec![] }));
        let half = count(serde_json::json!({"minAvailable": "50%"}), 2, 5).expect("counted");
        assert_eq!((half.count, half.desired_healthy, half.unmanaged), (5, 3, vec!["orphan".to_string()]));
        let unavailable = count(serde_json::json!({"maxUnavailable": 1}), 2, 4).expect("counted");
        assert_eq!((unavailable.count, unavailable.desired_healthy), (4, 3));
        // 30% of 4 is 1.2, rounded up to 2 unavailable.
        assert_eq!(count(serde_json::json!({"maxUnavailable": "30%"}), 4, 4).map(|e| e.desired_healthy), Ok(2));
        assert_eq!(count(serde_json::json!({"maxUnavailable": 9}), 4, 4).map(|e| e.desired_healthy), Ok(0));
        assert_eq!(count(serde_json::json!({}), 4, 4), Ok(Expected::default()));
        assert!(count(serde_json::json!({"minAvailable": "half"}), 4, 4).is_err());
        let failed = expected_pod_count(&budget(serde_json::json!({"maxUnavailable": 1})), 1, || failing("boom"));
        assert_eq!(failed.map_err(|e| e.to_string()), Err("boom".to_string()));
    }
}
