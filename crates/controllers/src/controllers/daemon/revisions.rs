//! The DaemonSet's revision history (upstream's `update.go`: `constructHistory`,
//! `controlledHistories`, `dedupCurHistories`, `snapshot`, `cleanupHistory`). A revision is
//! a ControllerRevision `<ds>-<hash>` holding the pod template as a patch
//! (`{"spec":{"template":{…,"$patch":"replace"}}}`); the hash is the one the Deployment
//! controller gives ReplicaSets (`controller.ComputeHash` of the template and the
//! DaemonSet's `status.collisionCount`) and labels both the revision and its pods
//! (`controller-revision-hash`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use super::util::spec;
use super::{DaemonSetsController, Error, hash_label, name_of, namespace_of, selector_of};
use crate::client::{Api, DeleteParams, Patch, PostParams};
use crate::controllers::history::{CONTROLLER_REVISION_HASH_LABEL, template_patch};
use crate::controllers::podutil::template_hash::compute_hash;
use crate::runtime::controller_ref::controller_ref;

/// `Match`: the revision holds the DaemonSet's current template.
fn matches(patch: &Value, revision: &ControllerRevision) -> bool {
    revision.data.as_ref().is_some_and(|data| &data.0 == patch)
}

/// `maxRevision`.
fn max_revision(revisions: &[Arc<ControllerRevision>]) -> i64 {
    revisions.iter().map(|r| r.revision).max().unwrap_or(0).max(0)
}

/// The revision `snapshot` creates for `revision` (before any collision).
pub fn new_revision(ds: &DaemonSet, patch: Value, revision: i64) -> ControllerRevision {
    let template = &spec(ds).template;
    let collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
    let hash = compute_hash(template, collision_count);
    let mut labels: BTreeMap<String, String> =
        template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", name_of(&ds.metadata))),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: ds.metadata.annotations.clone().filter(|a| !a.is_empty()),
            owner_references: Some(vec![controller_ref(ds)]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(patch)),
        revision,
    }
}

impl DaemonSetsController {
    /// `constructHistory`: the current revision (created, or renumbered to be the newest) and
    /// the old ones.
    pub(super) fn construct_history(
        &self,
        ds: &DaemonSet,
    ) -> Result<(Arc<ControllerRevision>, Vec<Arc<ControllerRevision>>), Error> {
        let api = Api::<ControllerRevision>::namespaced(&self.client, namespace_of(&ds.metadata));
        let patch = template_patch(&spec(ds).template);
        let mut current = Vec::new();
        let mut old = Vec::new();
        for mut revision in self.controlled_histories(ds)? {
            if !revision.metadata.labels.as_ref().is_some_and(|l| l.contains_key(CONTROLLER_REVISION_HASH_LABEL)) {
                // Revisions from before the label existed: the name stands for the hash.
                let mut labeled = (*revision).clone();
                let name = name_of(&labeled.metadata).to_string();
                labeled
                    .metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(CONTROLLER_REVISION_HASH_LABEL.into(), name.clone());
                revision = Arc::new(api.replace(&name, &labeled, &PostParams::default())?);
            }
            if matches(&patch, &revision) { current.push(revision) } else { old.push(revision) }
        }
        let next = max_revision(&old) + 1;
        let current = match current.len() {
            0 => Arc::new(self.snapshot(ds, patch, next)?),
            _ => {
                let current = self.dedup_current_histories(ds, current)?;
                if current.revision < next {
                    let mut renumbered = (*current).clone();
                    renumbered.revision = next;
                    api.replace(name_of(&current.metadata), &renumbered, &PostParams::default())?;
                }
                current
            }
        };
        Ok((current, old))
    }

    /// `controlledHistories`: the namespace's revisions the DaemonSet owns after claiming.
    fn controlled_histories(&self, ds: &DaemonSet) -> Result<Vec<Arc<ControllerRevision>>, Error> {
        let selector = selector_of(ds)?;
        let revisions = self.revisions.store().list_namespace(namespace_of(&ds.metadata));
        self.claim::<ControllerRevision>(ds, &selector, revisions, None)
    }

    /// `dedupCurHistories`: of several revisions holding the current template, the newest is
    /// kept; pods labeled with another one's hash are relabeled, the others deleted.
    fn dedup_current_histories(
        &self,
        ds: &DaemonSet,
        mut current: Vec<Arc<ControllerRevision>>,
    ) -> Result<Arc<ControllerRevision>, Error> {
        if current.len() == 1 {
            return Ok(current.remove(0));
        }
        let keep = current
            .iter()
            .fold(None::<&Arc<ControllerRevision>>, |best, r| match best {
                Some(b) if r.revision < b.revision => Some(b),
                _ => Some(r),
            })
            .cloned()
            .unwrap_or_else(|| current[0].clone());
        let keep_hash = hash_label(keep.metadata.labels.as_ref()).to_string();
        let namespace = namespace_of(&ds.metadata);
        let pods = Api::<Pod>::namespaced(&self.client, namespace);
        for pod in self.daemon_pods(ds)? {
            if hash_label(pod.metadata.labels.as_ref()) != keep_hash {
                let patch = json!({"metadata": {"labels": {CONTROLLER_REVISION_HASH_LABEL: keep_hash}}});
                pods.patch(name_of(&pod.metadata), &Patch::Merge(patch), &PostParams::default())?;
            }
        }
        let api = Api::<ControllerRevision>::namespaced(&self.client, namespace);
        for revision in current.iter().filter(|r| r.metadata.name != keep.metadata.name) {
            api.delete(name_of(&revision.metadata), &DeleteParams::default())?;
        }
        Ok(keep)
    }

    /// `snapshot`: creates the current revision. A name taken by another template bumps the
    /// DaemonSet's `status.collisionCount` and fails, so that the next sync hashes anew.
    fn snapshot(&self, ds: &DaemonSet, patch: Value, revision: i64) -> Result<ControllerRevision, Error> {
        let namespace = namespace_of(&ds.metadata);
        let api = Api::<ControllerRevision>::namespaced(&self.client, namespace);
        let history = new_revision(ds, patch.clone(), revision);
        let name = name_of(&history.metadata).to_string();
        let outer = match api.create(&history, &PostParams::default()) {
            Ok(created) => return Ok(created),
            Err(e) if e.is_already_exists() => e,
            Err(e) => return Err(e.into()),
        };
        let existing = api.get(&name)?;
        if matches(&patch, &existing) {
            return Ok(existing);
        }
        let daemon_sets = Api::<DaemonSet>::namespaced(&self.client, namespace);
        let mut current = daemon_sets.get(name_of(&ds.metadata))?;
        let ours = ds.status.as_ref().and_then(|s| s.collision_count);
        let theirs = current.status.as_ref().and_then(|s| s.collision_count);
        if ours != theirs {
            return Err(Error::StaleCollisionCount { ours, theirs, name: name_of(&ds.metadata).to_string() });
        }
        let status = current.status.get_or_insert_with(Default::default);
        let count = status.collision_count.unwrap_or(0) + 1;
        status.collision_count = Some(count);
        daemon_sets.replace_status(name_of(&ds.metadata), &current, &PostParams::default())?;
        log::info!(
            "Found a hash collision for DaemonSet - bumping collisionCount to resolve it daemonset={namespace}/{} collisionCount={count}",
            name_of(&ds.metadata)
        );
        Err(outer.into())
    }

    /// `cleanupHistory`: old revisions beyond `revisionHistoryLimit` deleted, oldest first,
    /// except those a pod still carries the hash of.
    pub(super) fn cleanup_history(&self, ds: &DaemonSet, old: &[Arc<ControllerRevision>]) -> Result<(), Error> {
        let node_pods = self.nodes_to_daemon_pods(ds, true).map_err(|e| e.node_pod_mapping(ds))?;
        let keep = spec(ds).revision_history_limit.unwrap_or(10).max(0) as usize;
        let Some(mut to_kill) = old.len().checked_sub(keep).filter(|n| *n > 0) else { return Ok(()) };
        let live: HashSet<&str> = node_pods
            .values()
            .flatten()
            .map(|p| hash_label(p.metadata.labels.as_ref()))
            .filter(|h| !h.is_empty())
            .collect();
        let mut old = old.to_vec();
        old.sort_by_key(|r| r.revision);
        let api = Api::<ControllerRevision>::namespaced(&self.client, namespace_of(&ds.metadata));
        for revision in old {
            if to_kill == 0 {
                break;
            }
            if live.contains(hash_label(revision.metadata.labels.as_ref())) {
                continue;
            }
            api.delete(name_of(&revision.metadata), &DeleteParams::default())?;
            to_kill -= 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Templates a kube-apiserver v1.36.2 stored and the revisions upstream's
    /// kube-controller-manager v1.36.2 made of them (`history/testdata`).
    const UPSTREAM_V1_36_2: &str = include_str!("../history/testdata/upstream_v1.36.2.json");

    fn daemon_set(name: &str, template: &Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": "ds-uid"},
            "spec": {"selector": {"matchLabels": template["metadata"]["labels"].clone()}, "template": template}
        }))
        .expect("a DaemonSet")
    }

    #[test]
    fn revisions_are_named_and_filled_as_upstream_v1_36_2_does() {
        let cases: Vec<Value> = serde_json::from_str(UPSTREAM_V1_36_2).expect("the fixture parses");
        for case in cases {
            let name = format!("ds-{}", case["name"].as_str().expect("a name"));
            let ds = daemon_set(&name, &case["template"]);
            let patch = template_patch(&spec(&ds).template);
            let revision = new_revision(&ds, patch.clone(), 1);
            let hash = case["podTemplateHash"].as_str().expect("a hash");
            assert_eq!(revision.metadata.name, Some(format!("{name}-{hash}")));
            assert_eq!(revision.metadata.labels.as_ref().unwrap()[CONTROLLER_REVISION_HASH_LABEL], hash);
            assert_eq!(revision.data.as_ref().map(|d| &d.0), Some(&case["revisionData"]), "{name}");
            assert!(matches(&patch, &revision));
        }
    }

    #[test]
    fn a_revision_written_by_v1_33_no_longer_matches() {
        let cases: Vec<Value> = serde_json::from_str(UPSTREAM_V1_36_2).expect("the fixture parses");
        let ds = daemon_set("ds", &cases[0]["template"]);
        let patch = template_patch(&spec(&ds).template);
        // v1.33 wrote the template's zero creation time as null; `Match` compares the bytes, so
        // the v1.36 controller makes a new revision (its pods keep running: they still carry the
        // DaemonSet's template generation).
        let mut v133 = patch.clone();
        v133["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
        let old = new_revision(&ds, v133, 1);
        assert!(!matches(&patch, &old));
        let current = new_revision(&ds, patch.clone(), 2);
        assert!(matches(&patch, &current));
        // A pod of the v1.33 revision, whose hash (v1.33's `ComputeHash`) was another one.
        let old_pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "labels": {
            CONTROLLER_REVISION_HASH_LABEL: "8ff954c69", super::super::util::TEMPLATE_GENERATION_LABEL: "1"}}}))
        .expect("a pod");
        let current_hash = hash_label(current.metadata.labels.as_ref());
        assert!(super::super::util::is_pod_updated(&old_pod, current_hash, Some(1)));
    }
}
