//! Which revision a sync updates to (upstream's `getStatefulSetRevisions` decision), with the
//! `StatefulSetSemanticRevisionComparison` mitigation of v1.34+ (`setMatchesLatestExistingRevision`):
//! when no stored revision holds the template's bytes, the latest one is still reused if
//! restoring it re-derives the same revision. That is how a set whose revision v1.33 wrote
//! (with `creationTimestamp: null` in its data) keeps it instead of rolling its pods.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use parking_lot::Mutex;

use super::control::{apply_revision, new_revision};
use crate::controllers::history;
use crate::lru::LruSet;

/// `maxRevisionEqualityCacheEntries`.
const MAX_REVISION_EQUALITY_CACHE_ENTRIES: usize = 10_000;

/// `revisionEqualityKey`: a revision (by resourceVersion) found equal to what a set (by uid) at
/// a generation derives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RevisionEqualityKey {
    set_uid: String,
    set_generation: i64,
    revision_resource_version: String,
}

impl RevisionEqualityKey {
    fn new(set: &StatefulSet, revision: &ControllerRevision) -> RevisionEqualityKey {
        RevisionEqualityKey {
            set_uid: set.metadata.uid.clone().unwrap_or_default(),
            set_generation: set.metadata.generation.unwrap_or(0),
            revision_resource_version: revision.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// Upstream's `lru.New(maxRevisionEqualityCacheEntries)` of the equal combinations, so that a
/// steady set is compared once, not on every sync.
pub struct RevisionEqualityCache(Mutex<LruSet<RevisionEqualityKey>>);

impl Default for RevisionEqualityCache {
    fn default() -> Self {
        RevisionEqualityCache(Mutex::new(LruSet::new(MAX_REVISION_EQUALITY_CACHE_ENTRIES)))
    }
}

/// `setMatchesLatestExistingRevision`: whether restoring `latest` on the set derives a revision
/// equal to `proposed` (cached per set uid, set generation and revision resourceVersion).
///
/// Upstream also runs the API defaulting (`legacyscheme.Scheme.Default`) on the restored set; a
/// revision's template was stored defaulted, and the pod template defaults are the same from
/// v1.33 to v1.36, so here the restored template is used as it is.
pub fn set_matches_latest_existing_revision(
    enabled: bool,
    set: &StatefulSet,
    proposed: &ControllerRevision,
    latest: &ControllerRevision,
    memory: &RevisionEqualityCache,
) -> bool {
    if !enabled {
        return false;
    }
    let key = RevisionEqualityKey::new(set, latest);
    if memory.0.lock().contains(&key) {
        return true;
    }
    let Ok(latest_set) = apply_revision(set, latest) else { return false };
    let reconstructed = new_revision(&latest_set, -1, None);
    if history::equal_revision(proposed, &reconstructed) {
        memory.0.lock().insert(key, ());
        return true;
    }
    false
}

/// What `getStatefulSetRevisions` does for the update revision.
#[derive(Debug)]
pub enum UpdateRevision<'a> {
    /// The latest revision is the update revision as it is.
    Latest(&'a Arc<ControllerRevision>),
    /// An older revision equal to the proposed one is renumbered to be the latest (a rollback).
    Renumber(&'a Arc<ControllerRevision>),
    /// The proposed revision is created.
    Create,
}

/// The decision of `getStatefulSetRevisions` for `proposed`, the revision of the set's
/// template, among the set's `revisions` (sorted); `matches_latest` is
/// [`set_matches_latest_existing_revision`] for the latest one.
pub fn choose_update_revision<'a>(
    revisions: &'a [Arc<ControllerRevision>],
    proposed: &ControllerRevision,
    matches_latest: impl FnOnce(&ControllerRevision) -> bool,
) -> UpdateRevision<'a> {
    let equal = history::find_equal_revisions(revisions, proposed);
    match (equal.last(), revisions.last()) {
        (Some(found), Some(latest)) if history::equal_revision(latest, found) => UpdateRevision::Latest(latest),
        (Some(found), _) => UpdateRevision::Renumber(found),
        (None, Some(latest)) if matches_latest(latest) => UpdateRevision::Latest(latest),
        (None, _) => UpdateRevision::Create,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's `testdata` (v1.36.2, `TestStatefulSetCompatibility`): a set and its revision as
    /// v1.33 and as v1.34 stored them.
    fn set(version: &str) -> StatefulSet {
        let text = match version {
            "1.33.0" => include_str!("testdata/compatibility_set_1.33.0.json"),
            _ => include_str!("testdata/compatibility_set_1.34.0.json"),
        };
        serde_json::from_str(text).expect("a StatefulSet")
    }

    fn revision(version: &str) -> Arc<ControllerRevision> {
        let text = match version {
            "1.33.0" => include_str!("testdata/compatibility_revision_1.33.0.json"),
            _ => include_str!("testdata/compatibility_revision_1.34.0.json"),
        };
        Arc::new(serde_json::from_str(text).expect("a ControllerRevision"))
    }

    fn decide(enabled: bool, set: &StatefulSet, revisions: &[Arc<ControllerRevision>]) -> Option<String> {
        let memory = RevisionEqualityCache::default();
        let proposed = new_revision(set, history::next_revision(revisions), Some(0));
        let matches = |latest: &ControllerRevision| {
            set_matches_latest_existing_revision(enabled, set, &proposed, latest, &memory)
        };
        match choose_update_revision(revisions, &proposed, matches) {
            UpdateRevision::Latest(latest) => latest.metadata.name.clone(),
            UpdateRevision::Renumber(_) | UpdateRevision::Create => None,
        }
    }

    #[test]
    fn upstream_compatibility_cases_keep_the_latest_revision() {
        for (name, set, revisions) in [
            ("1.33 set, 1.33 rev", set("1.33.0"), vec![revision("1.33.0")]),
            ("1.34 set, 1.34 rev", set("1.34.0"), vec![revision("1.34.0")]),
            ("1.34 set, 1.33+1.34 rev", set("1.34.0"), vec![revision("1.33.0"), revision("1.34.0")]),
        ] {
            let latest = revisions.last().unwrap().metadata.name.clone();
            assert_eq!(decide(true, &set, &revisions), latest, "{name}");
        }
        // Without the gate a v1.33 revision is not recognised: a new one would be created.
        assert_eq!(decide(false, &set("1.33.0"), &[revision("1.33.0")]), None);
        assert_eq!(decide(false, &set("1.34.0"), &[revision("1.34.0")]).as_deref(), Some("test-776999688b"));
    }

    #[test]
    fn a_changed_template_still_makes_a_new_revision() {
        let mut changed = set("1.33.0");
        changed.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0].image = Some("other".into());
        assert_eq!(decide(true, &changed, &[revision("1.33.0")]), None);
        let revisions = [revision("1.33.0")];
        let proposed = new_revision(&changed, 2, Some(0));
        assert!(matches!(choose_update_revision(&revisions, &proposed, |_| false), UpdateRevision::Create));
    }

    #[test]
    fn an_older_equal_revision_is_renumbered() {
        let set = set("1.34.0");
        let mut newer = (*revision("1.33.0")).clone();
        newer.metadata.name = Some("test-other".into());
        newer.revision = 3;
        newer.data.as_mut().unwrap().0["spec"]["template"]["spec"]["containers"][0]["image"] = "other".into();
        let revisions = [revision("1.34.0"), Arc::new(newer)];
        let proposed = new_revision(&set, 4, Some(0));
        match choose_update_revision(&revisions, &proposed, |_| panic!("not asked: an equal revision exists")) {
            UpdateRevision::Renumber(found) => assert_eq!(found.metadata.name.as_deref(), Some("test-776999688b")),
            other => panic!("expected a renumbering, got {other:?}"),
        }
    }

    #[test]
    fn equal_combinations_are_remembered_per_set_generation_and_revision_version() {
        let memory = RevisionEqualityCache::default();
        let set = set("1.33.0");
        let latest = revision("1.33.0");
        let proposed = new_revision(&set, 3, Some(0));
        assert!(set_matches_latest_existing_revision(true, &set, &proposed, &latest, &memory));
        // Remembered: the same set generation and revision resourceVersion answer from the cache,
        // whatever is proposed.
        let mut other = proposed.clone();
        other.data.as_mut().unwrap().0["spec"]["template"]["metadata"]["labels"]["app"] = "bar".into();
        assert!(set_matches_latest_existing_revision(true, &set, &other, &latest, &memory));
        let mut next_generation = set.clone();
        next_generation.metadata.generation = Some(2);
        assert!(!set_matches_latest_existing_revision(true, &next_generation, &other, &latest, &memory));
    }
}
