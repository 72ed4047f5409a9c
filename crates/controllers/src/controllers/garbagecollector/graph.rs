//! The dependency graph and its builder, after upstream's `graph.go` and `graph_builder.go`:
//! one node per uid (observed objects, and "virtual" nodes for owners referenced but not
//! observed yet), each with its owners (the object's ownerReferences) and its dependents.
//!
//! Upstream's nodes are pointers shared by the graph and the queues; here nodes live in one
//! map keyed by uid, dependents are sets of uids, and the two queues carry uids: a worker reads the node's current state from the graph. Graph changes are
//! applied by a single thread ([`GraphBuilder::process_graph_change`]); workers only read, or
//! mark nodes (`deletingDependents`) as upstream's workers do.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use parking_lot::Mutex;

use crate::client::metadata::PartialObjectMetadata;
use crate::controllers::finalizerutil::has_finalizer;
use crate::lru::LruSet;
use crate::runtime::workqueue::WorkQueue;

/// `metav1.FinalizerOrphanDependents`.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
pub const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";

/// Upstream's `ReferenceCache` (`uid_cache.go`): the owners the API server said do not exist,
/// so that dependents of a deleted owner do not each look it up again.
pub type ReferenceCache = Mutex<LruSet<ObjectReference>>;

/// Upstream's `objectReference`: an owner reference's coordinates plus a namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectReference {
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's uid.
    pub uid: String,
    /// The object's namespace (empty when cluster-scoped).
    pub namespace: String,
}

impl ObjectReference {
    /// `ownerReferenceCoordinates` in `namespace`.
    pub fn of_owner(owner: &OwnerReference, namespace: &str) -> ObjectReference {
        ObjectReference {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            namespace: namespace.to_string(),
        }
    }

    /// `ownerReferenceMatchesCoordinates`.
    fn matches(&self, owner: &OwnerReference) -> bool {
        owner.uid == self.uid
            && owner.name == self.name
            && owner.kind == self.kind
            && owner.api_version == self.api_version
    }

    /// upstream `referenceLessThan`: kind, apiVersion, namespace, name, uid.
    fn sort_key(&self) -> (&str, &str, &str, &str, &str) {
        (&self.kind, &self.api_version, &self.namespace, &self.name, &self.uid)
    }
}

impl fmt::Display for ObjectReference {
    /// Upstream's `objectReference.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version, self.kind, self.namespace, self.name, self.uid
        )
    }
}

/// One object (or virtual owner) in the graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// The object (or virtual owner) this node stands for.
    pub identity: ObjectReference,
    /// The uids of the objects that name this one as owner.
    pub dependents: HashSet<String>,
    /// The object's ownerReferences.
    pub owners: Vec<OwnerReference>,
    /// Its deletionTimestamp is set.
    pub being_deleted: bool,
    /// Being deleted with the foregroundDeletion finalizer: waiting for blocking dependents.
    pub deleting_dependents: bool,
    /// Not observed through an informer yet (an owner known only from references).
    pub virtual_: bool,
}

impl Node {
    fn observed(identity: ObjectReference, meta: &ObjectMeta) -> Node {
        let being_deleted = meta.deletion_timestamp.is_some();
        Node {
            identity,
            dependents: HashSet::new(),
            owners: meta.owner_references.clone().unwrap_or_default(),
            deleting_dependents: being_deleted && has_finalizer(meta, FINALIZER_DELETE_DEPENDENTS),
            being_deleted,
            virtual_: false,
        }
    }

    fn virtual_owner(identity: ObjectReference) -> Node {
        Node {
            identity,
            dependents: HashSet::new(),
            owners: Vec::new(),
            being_deleted: false,
            deleting_dependents: false,
            virtual_: true,
        }
    }

    /// Whether an ownerReference of this node to `owner_uid` blocks the owner's deletion.
    pub fn blocks(&self, owner_uid: &str) -> bool {
        self.owners.iter().any(|o| o.uid == owner_uid && o.block_owner_deletion == Some(true))
    }
}

/// What kind of change an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was added.
    Add,
    /// The object was updated.
    Update,
    /// The object was deleted.
    Delete,
}

/// A change for the graph builder (upstream's `event`).
#[derive(Debug, Clone)]
pub struct GraphEvent {
    /// Made up by the collector (the API said the object is gone), not seen by an informer.
    pub virtual_: bool,
    /// What happened to the object.
    pub event_type: EventType,
    /// The object's apiVersion and kind (from the monitor's resource).
    pub api_version: String,
    /// The object's kind (from the monitor's resource).
    pub kind: String,
    /// The object's metadata after the event (its last state for a delete).
    pub object: Arc<PartialObjectMetadata>,
    /// The metadata before an update; `None` for other events.
    pub old: Option<Arc<PartialObjectMetadata>>,
}

impl GraphEvent {
    /// A virtual delete event for a node the API server does not have.
    pub fn virtual_delete(identity: &ObjectReference) -> GraphEvent {
        let metadata = ObjectMeta {
            name: Some(identity.name.clone()),
            namespace: Some(identity.namespace.clone()).filter(|ns| !ns.is_empty()),
            uid: Some(identity.uid.clone()),
            ..ObjectMeta::default()
        };
        GraphEvent {
            virtual_: true,
            event_type: EventType::Delete,
            api_version: identity.api_version.clone(),
            kind: identity.kind.clone(),
            object: Arc::new(PartialObjectMetadata::from_metadata(metadata)),
            old: None,
        }
    }

    /// `identityFromEvent`.
    fn identity(&self) -> ObjectReference {
        let meta = &self.object.metadata;
        ObjectReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
        }
    }
}

/// Reports an ownerReference to an owner in another namespace: `(dependent, owner as the
/// dependent names it)`.
pub type InvalidOwnerReporter = Box<dyn Fn(&ObjectReference, &ObjectReference) + Send + Sync>;

/// The graph and what changing it feeds: the attemptToDelete and attemptToOrphan queues and
/// the absent-owner cache.
pub struct GraphBuilder {
    nodes: Mutex<HashMap<String, Node>>,
    /// `attemptToDelete`, of node uids.
    queue: WorkQueue<String>,
    /// `attemptToOrphan`, of node uids.
    orphan_queue: WorkQueue<String>,
    absent_owners: Arc<ReferenceCache>,
    report_invalid: InvalidOwnerReporter,
}

fn being_deleted(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// `deletionStartsWithFinalizer`: the new state is being deleted with `finalizer` and the old
/// one (if any) was not.
fn deletion_starts_with_finalizer(old: Option<&ObjectMeta>, new: &ObjectMeta, finalizer: &str) -> bool {
    if !being_deleted(new) || !has_finalizer(new, finalizer) {
        return false;
    }
    old.is_none_or(|old| !being_deleted(old) || !has_finalizer(old, finalizer))
}

/// `referencesDiffs`: added, removed, and changed (old, new) references by uid.
type ChangedRefs = Vec<(OwnerReference, OwnerReference)>;

fn references_diffs(
    old: &[OwnerReference],
    new: &[OwnerReference],
) -> (Vec<OwnerReference>, Vec<OwnerReference>, ChangedRefs) {
    let mut old_by_uid: HashMap<&str, &OwnerReference> = old.iter().map(|r| (r.uid.as_str(), r)).collect();
    let (mut added, mut changed) = (Vec::new(), Vec::new());
    for reference in new {
        match old_by_uid.remove(reference.uid.as_str()) {
            Some(previous) if previous != reference => changed.push((previous.clone(), reference.clone())),
            Some(_) => {}
            None => added.push(reference.clone()),
        }
    }
    let removed = old.iter().filter(|r| old_by_uid.contains_key(r.uid.as_str())).cloned().collect();
    (added, removed, changed)
}

impl GraphBuilder {
    /// A builder with an empty graph, feeding `queue` (`attemptToDelete`), `orphan_queue`
    /// (`attemptToOrphan`) and `absent_owners`, and reporting invalid owner references to
    /// `report_invalid`.
    pub fn new(
        queue: WorkQueue<String>,
        orphan_queue: WorkQueue<String>,
        absent_owners: Arc<ReferenceCache>,
        report_invalid: InvalidOwnerReporter,
    ) -> Self {
        GraphBuilder { nodes: Mutex::new(HashMap::new()), queue, orphan_queue, absent_owners, report_invalid }
    }

    /// The cache of owners known not to exist.
    pub fn absent_owners(&self) -> &ReferenceCache {
        &self.absent_owners
    }

    /// A copy of the node with this uid.
    pub fn node(&self, uid: &str) -> Option<Node> {
        self.nodes.lock().get(uid).cloned()
    }

    /// Copies of the node's dependents.
    pub fn dependents(&self, uid: &str) -> Vec<Node> {
        let nodes = self.nodes.lock();
        let Some(node) = nodes.get(uid) else { return Vec::new() };
        node.dependents.iter().filter_map(|d| nodes.get(d).cloned()).collect()
    }

    /// `blockingDependents`: dependents whose reference to the node blocks its deletion.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<Node> {
        self.dependents(uid).into_iter().filter(|d| d.blocks(uid)).collect()
    }

    /// `markDeletingDependents`.
    pub fn mark_deleting_dependents(&self, uid: &str) {
        if let Some(node) = self.nodes.lock().get_mut(uid) {
            node.deleting_dependents = true;
        }
    }

    /// How many nodes the graph holds.
    pub fn len(&self) -> usize {
        self.nodes.lock().len()
    }

    /// Whether the graph holds no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn enqueue_delete(&self, uid: &str) {
        self.queue.add(uid.to_string());
    }

    /// `processGraphChanges` for one event.
    pub fn process_graph_change(&self, event: &GraphEvent) {
        let meta = &event.object.metadata;
        let Some(uid) = meta.uid.clone().filter(|u| !u.is_empty()) else {
            log::debug!("garbage collector: ignoring an object without uid ({} {})", event.kind, event.api_version);
            return;
        };
        let mut nodes = self.nodes.lock();
        let found = nodes.contains_key(&uid);
        if found && !event.virtual_ && nodes[&uid].virtual_ {
            self.observe(&mut nodes, &uid, event.identity());
        }
        match event.event_type {
            EventType::Add | EventType::Update if !found => {
                nodes.insert(uid.clone(), Node::observed(event.identity(), meta));
                let owners = nodes[&uid].owners.clone();
                self.add_dependent_to_owners(&mut nodes, &uid, &owners);
                self.process_transitions(&mut nodes, event.old.as_deref().map(|o| &o.metadata), meta, &uid);
            }
            EventType::Add | EventType::Update => self.update_node(&mut nodes, &uid, event),
            EventType::Delete if !found => {
                log::trace!("item {uid} doesn't exist in the graph, this shouldn't happen");
            }
            EventType::Delete => self.delete_node(&mut nodes, &uid, event),
        }
    }

    /// A virtual node was observed by an informer: dependents that named it by other
    /// coordinates are checked again, then it takes the observed identity.
    fn observe(&self, nodes: &mut HashMap<String, Node>, uid: &str, observed: ObjectReference) {
        if observed != nodes[uid].identity {
            let dependents: Vec<String> = nodes[uid].dependents.iter().cloned().collect();
            let (_, invalid) = partition_dependents(nodes, &dependents, &observed);
            for dependent in invalid {
                let identity = nodes[&dependent].identity.clone();
                if !observed.namespace.is_empty() && identity.namespace != observed.namespace {
                    log::debug!("item {identity} references an owner {observed} but does not match namespaces");
                    self.report_invalid_namespace_owner_ref(&nodes[&dependent], &observed.uid);
                }
                self.enqueue_delete(&dependent);
            }
            log::debug!("replacing virtual item {} with observed item {observed}", nodes[uid].identity);
            if let Some(node) = nodes.get_mut(uid) {
                node.identity = observed;
            }
        }
        if let Some(node) = nodes.get_mut(uid) {
            node.virtual_ = false;
        }
    }

    /// The update branch of `processGraphChanges` for a node already in the graph.
    fn update_node(&self, nodes: &mut HashMap<String, Node>, uid: &str, event: &GraphEvent) {
        let meta = &event.object.metadata;
        if let Some(node) = nodes.get_mut(uid)
            && !event.virtual_
            && (node.identity.api_version != event.api_version || node.identity.kind != event.kind)
        {
            node.identity.api_version.clone_from(&event.api_version);
            node.identity.kind.clone_from(&event.kind);
        }
        let new_owners = meta.owner_references.clone().unwrap_or_default();
        let (added, removed, changed) = references_diffs(&nodes[uid].owners, &new_owners);
        if !added.is_empty() || !removed.is_empty() || !changed.is_empty() {
            self.add_unblocked_owners_to_delete_queue(nodes, &removed, &changed);
            if let Some(node) = nodes.get_mut(uid) {
                node.owners = new_owners;
            }
            self.add_dependent_to_owners(nodes, uid, &added);
            remove_dependent_from_owners(nodes, uid, &removed);
        }
        if being_deleted(meta)
            && let Some(node) = nodes.get_mut(uid)
        {
            node.being_deleted = true;
        }
        self.process_transitions(nodes, event.old.as_deref().map(|o| &o.metadata), meta, uid);
    }

    /// The delete branch of `processGraphChanges`.
    fn delete_node(&self, nodes: &mut HashMap<String, Node>, uid: &str, event: &GraphEvent) {
        let mut remove_existing = true;
        if event.virtual_ {
            let deleted = event.identity();
            let existing = nodes[uid].clone();
            let dependents: Vec<String> = existing.dependents.iter().cloned().collect();
            if existing.virtual_ {
                let (matching, nonmatching) = partition_dependents(nodes, &dependents, &deleted);
                if !nonmatching.is_empty() {
                    // Some dependents disagree on the owner's coordinates: keep the node.
                    remove_existing = false;
                    if !matching.is_empty() {
                        self.absent_owners.lock().insert(deleted.clone(), ());
                        matching.iter().for_each(|d| self.enqueue_delete(d));
                    }
                    if existing.identity == deleted
                        && let Some(replacement) = alternate_owner_identity(nodes, &nonmatching, &deleted)
                    {
                        log::debug!("replacing virtual item {deleted} with {replacement}");
                        if let Some(node) = nodes.get_mut(uid) {
                            node.identity = replacement;
                        }
                        self.queue.add_rate_limited(uid.to_string());
                    }
                }
            } else if existing.identity != deleted {
                // An observed node is not removed on a virtual event for other coordinates.
                remove_existing = false;
                let (matching, _) = partition_dependents(nodes, &dependents, &deleted);
                if !matching.is_empty() {
                    self.absent_owners.lock().insert(deleted, ());
                    matching.iter().for_each(|d| self.enqueue_delete(d));
                }
            }
        }
        if !remove_existing {
            return;
        }
        let Some(removed) = nodes.remove(uid) else { return };
        remove_dependent_from_owners(nodes, uid, &removed.owners);
        if !removed.dependents.is_empty() {
            self.absent_owners.lock().insert(event.identity(), ());
        }
        removed.dependents.iter().for_each(|d| self.enqueue_delete(d));
        for owner in &removed.owners {
            // The owner may be waiting for this dependent to go.
            if nodes.get(&owner.uid).is_some_and(|o| o.deleting_dependents) {
                self.enqueue_delete(&owner.uid);
            }
        }
    }

    /// `addDependentToOwners`: links `uid` under each of `owners`, creating virtual owners
    /// (queued to be verified) for those not in the graph.
    fn add_dependent_to_owners(&self, nodes: &mut HashMap<String, Node>, uid: &str, owners: &[OwnerReference]) {
        let dependent = nodes[uid].identity.clone();
        let mut potentially_invalid = false;
        for owner in owners {
            let Some(owner_node) = nodes.get_mut(&owner.uid) else {
                let mut virtual_owner = Node::virtual_owner(ObjectReference::of_owner(owner, &dependent.namespace));
                log::trace!("add virtual item {}", virtual_owner.identity);
                virtual_owner.dependents.insert(uid.to_string());
                nodes.insert(owner.uid.clone(), virtual_owner);
                self.enqueue_delete(&owner.uid);
                continue;
            };
            owner_node.dependents.insert(uid.to_string());
            if potentially_invalid {
                continue;
            }
            let owner_identity = owner_node.identity.clone();
            let owner_observed = !owner_node.virtual_;
            let owner_namespaced = !owner_identity.namespace.is_empty();
            if owner_namespaced && owner_identity.namespace != dependent.namespace {
                if owner_observed {
                    log::debug!("item {dependent} references an owner {owner_identity} but does not match namespaces");
                    self.report_invalid_namespace_owner_ref(&nodes[uid], &owner.uid);
                }
                potentially_invalid = true;
            } else if !owner_identity.matches(owner) {
                if owner_observed {
                    log::debug!(
                        "item {dependent} references an owner with coordinates that do not match the observed identity {owner_identity}"
                    );
                }
                potentially_invalid = true;
            } else if !owner_namespaced && owner_identity.namespace != dependent.namespace && !owner_observed {
                // A virtual cluster-scoped owner: maybe a namespaced owner named from a cluster-scoped child.
                potentially_invalid = true;
            }
        }
        if potentially_invalid {
            self.enqueue_delete(uid);
        }
    }

    /// `reportInvalidNamespaceOwnerRef`.
    fn report_invalid_namespace_owner_ref(&self, dependent: &Node, invalid_owner_uid: &str) {
        let Some(owner) = dependent.owners.iter().find(|o| o.uid == invalid_owner_uid) else { return };
        let invalid = ObjectReference::of_owner(owner, &dependent.identity.namespace);
        (self.report_invalid)(&dependent.identity, &invalid);
    }

    /// `addUnblockedOwnersToDeleteQueue`: owners whose blocking reference went away.
    fn add_unblocked_owners_to_delete_queue(
        &self,
        nodes: &HashMap<String, Node>,
        removed: &[OwnerReference],
        changed: &[(OwnerReference, OwnerReference)],
    ) {
        let unblocked_removed = removed.iter().filter(|r| r.block_owner_deletion == Some(true));
        let unblocked_changed = changed
            .iter()
            .filter(|(old, new)| old.block_owner_deletion == Some(true) && new.block_owner_deletion != Some(true))
            .map(|(_, new)| new);
        for reference in unblocked_removed.chain(unblocked_changed) {
            if nodes.contains_key(&reference.uid) {
                self.enqueue_delete(&reference.uid);
            } else {
                log::trace!("cannot find uid {} in uidToNode", reference.uid);
            }
        }
    }

    /// `processTransitions`: deletion with the orphan finalizer queues the node to orphan its
    /// dependents; with foregroundDeletion, its dependents and itself to be deleted.
    fn process_transitions(
        &self,
        nodes: &mut HashMap<String, Node>,
        old: Option<&ObjectMeta>,
        new: &ObjectMeta,
        uid: &str,
    ) {
        if deletion_starts_with_finalizer(old, new, FINALIZER_ORPHAN) {
            log::trace!("add item {uid} to attemptToOrphan");
            self.orphan_queue.add(uid.to_string());
            return;
        }
        if deletion_starts_with_finalizer(old, new, FINALIZER_DELETE_DEPENDENTS) {
            let Some(node) = nodes.get_mut(uid) else { return };
            log::debug!(
                "add item {} to attemptToDelete, because it's waiting for its dependents to be deleted",
                node.identity
            );
            node.deleting_dependents = true;
            node.dependents.iter().for_each(|d| self.enqueue_delete(d));
            self.enqueue_delete(uid);
        }
    }
}

/// `removeDependentFromOwners`.
fn remove_dependent_from_owners(nodes: &mut HashMap<String, Node>, uid: &str, owners: &[OwnerReference]) {
    for owner in owners {
        if let Some(owner_node) = nodes.get_mut(&owner.uid) {
            owner_node.dependents.remove(uid);
        }
    }
}

/// `partitionDependents`: dependents whose reference to `owner.uid` matches `owner`'s
/// coordinates, and those with one that does not (a dependent can be in both).
fn partition_dependents(
    nodes: &HashMap<String, Node>,
    dependents: &[String],
    owner: &ObjectReference,
) -> (Vec<String>, Vec<String>) {
    let owner_namespaced = !owner.namespace.is_empty();
    let (mut matching, mut nonmatching) = (Vec::new(), Vec::new());
    for uid in dependents {
        let Some(dependent) = nodes.get(uid) else { continue };
        let (mut found_match, mut found_mismatch) = (false, false);
        if owner_namespaced && owner.namespace != dependent.identity.namespace {
            found_mismatch = true;
        } else {
            for reference in dependent.owners.iter().filter(|r| r.uid == owner.uid) {
                if owner.matches(reference) {
                    found_match = true;
                } else {
                    found_mismatch = true;
                }
            }
        }
        if found_match {
            matching.push(uid.clone());
        }
        if found_mismatch {
            nonmatching.push(uid.clone());
        }
    }
    (matching, nonmatching)
}

/// `getAlternateOwnerIdentity`: another identity the dependents give the absent owner's uid,
/// the first following `absent` in `referenceLessThan` order, else the first overall.
fn alternate_owner_identity(
    nodes: &HashMap<String, Node>,
    dependents: &[String],
    absent: &ObjectReference,
) -> Option<ObjectReference> {
    let absent_cluster_scoped = absent.namespace.is_empty();
    let mut seen: HashSet<ObjectReference> = HashSet::from([absent.clone()]);
    let (mut first, mut first_following): (Option<ObjectReference>, Option<ObjectReference>) = (None, None);
    for dependent in dependents.iter().filter_map(|uid| nodes.get(uid)) {
        for reference in dependent.owners.iter().filter(|r| r.uid == absent.uid) {
            if absent.matches(reference) && (absent_cluster_scoped || absent.namespace == dependent.identity.namespace)
            {
                continue;
            }
            let mut candidate = ObjectReference::of_owner(reference, &dependent.identity.namespace);
            if absent_cluster_scoped && candidate.api_version == absent.api_version && candidate.kind == absent.kind {
                candidate.namespace.clear();
            }
            if !seen.insert(candidate.clone()) {
                continue;
            }
            if first.as_ref().is_none_or(|f| candidate.sort_key() < f.sort_key()) {
                first = Some(candidate.clone());
            }
            if absent.sort_key() < candidate.sort_key()
                && first_following.as_ref().is_none_or(|f| candidate.sort_key() < f.sort_key())
            {
                first_following = Some(candidate);
            }
        }
    }
    first_following.or(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex as PlMutex;

    fn owner_ref(kind: &str, name: &str, uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            block_owner_deletion: block.then_some(true),
            controller: None,
        }
    }

    fn object(namespace: &str, name: &str, uid: &str, owners: Vec<OwnerReference>) -> Arc<PartialObjectMetadata> {
        Arc::new(PartialObjectMetadata::from_metadata(ObjectMeta {
            namespace: Some(namespace.into()).filter(|n: &String| !n.is_empty()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            owner_references: Some(owners).filter(|o| !o.is_empty()),
            ..ObjectMeta::default()
        }))
    }

    fn event(event_type: EventType, object: Arc<PartialObjectMetadata>) -> GraphEvent {
        GraphEvent {
            virtual_: false,
            event_type,
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            object,
            old: None,
        }
    }

    struct Harness {
        builder: GraphBuilder,
        queue: WorkQueue<String>,
        orphan_queue: WorkQueue<String>,
        reports: Arc<PlMutex<Vec<String>>>,
        absent: Arc<ReferenceCache>,
    }

    fn harness() -> Harness {
        let (queue, orphan_queue) = (WorkQueue::new(""), WorkQueue::new(""));
        let reports = Arc::new(PlMutex::new(Vec::new()));
        let sink = reports.clone();
        let absent = Arc::new(Mutex::new(LruSet::new(10)));
        let report: InvalidOwnerReporter = Box::new(move |dependent, owner| {
            sink.lock().push(format!("{} -> {owner}", dependent.name));
        });
        Harness {
            builder: GraphBuilder::new(queue.clone(), orphan_queue.clone(), absent.clone(), report),
            queue,
            orphan_queue,
            reports,
            absent,
        }
    }

    impl Harness {
        /// Every uid queued so far, as `delete/<uid>` or `orphan/<uid>` by queue, sorted.
        fn drain(&self) -> Vec<String> {
            let mut keys = Vec::new();
            for (queue, label) in [(&self.queue, "delete"), (&self.orphan_queue, "orphan")] {
                while !queue.is_empty() {
                    let Some(uid) = queue.get() else { break };
                    queue.done(&uid);
                    keys.push(format!("{label}/{uid}"));
                }
            }
            keys.sort();
            keys
        }
    }

    #[test]
    fn unknown_owners_become_virtual_nodes_queued_for_verification() {
        let h = harness();
        h.builder.process_graph_change(&event(
            EventType::Add,
            object("ns", "child", "c1", vec![owner_ref("ConfigMap", "parent", "p1", true)]),
        ));
        let parent = h.builder.node("p1").expect("a virtual owner");
        assert!(parent.virtual_);
        assert_eq!(parent.identity.namespace, "ns");
        assert!(parent.dependents.contains("c1"));
        assert_eq!(h.drain(), ["delete/p1"]);

        // The owner is observed: the virtual node becomes real, no dependent is re-checked.
        h.builder.process_graph_change(&event(EventType::Add, object("ns", "parent", "p1", vec![])));
        assert!(!h.builder.node("p1").expect("observed").virtual_);
        assert!(h.drain().is_empty());
        assert_eq!(h.builder.blocking_dependents("p1").len(), 1);

        // The owner goes: its dependents are queued and it is remembered as absent.
        h.builder.process_graph_change(&event(EventType::Delete, object("ns", "parent", "p1", vec![])));
        assert!(h.builder.node("p1").is_none());
        assert_eq!(h.drain(), ["delete/c1"]);
        let identity = ObjectReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "parent".into(),
            uid: "p1".into(),
            namespace: "ns".into(),
        };
        assert!(h.absent.lock().contains(&identity));
    }

    #[test]
    fn deletion_with_finalizers_queues_orphaning_or_foreground_deletion() {
        let h = harness();
        h.builder.process_graph_change(&event(EventType::Add, object("ns", "parent", "p1", vec![])));
        h.builder.process_graph_change(&event(
            EventType::Add,
            object("ns", "child", "c1", vec![owner_ref("ConfigMap", "parent", "p1", true)]),
        ));
        h.drain();
        let deleting = |finalizer: &str| {
            let mut meta = object("ns", "parent", "p1", vec![]).metadata.clone();
            meta.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
            meta.finalizers = Some(vec![finalizer.to_string()]);
            Arc::new(PartialObjectMetadata::from_metadata(meta))
        };
        let mut update = event(EventType::Update, deleting(FINALIZER_ORPHAN));
        update.old = Some(object("ns", "parent", "p1", vec![]));
        h.builder.process_graph_change(&update);
        assert_eq!(h.drain(), ["orphan/p1"]);
        assert!(h.builder.node("p1").expect("node").being_deleted);

        let mut update = event(EventType::Update, deleting(FINALIZER_DELETE_DEPENDENTS));
        update.old = Some(object("ns", "parent", "p1", vec![]));
        h.builder.process_graph_change(&update);
        assert_eq!(h.drain(), ["delete/c1", "delete/p1"]);
        assert!(h.builder.node("p1").expect("node").deleting_dependents);

        // The blocking reference is dropped: the waiting owner is queued again.
        h.builder.process_graph_change(&event(EventType::Update, object("ns", "child", "c1", vec![])));
        assert_eq!(h.drain(), ["delete/p1"]);
        assert!(h.builder.dependents("p1").is_empty());
    }

    #[test]
    fn owners_in_another_namespace_are_reported_and_the_dependent_checked() {
        let h = harness();
        h.builder.process_graph_change(&event(EventType::Add, object("a", "owner", "o1", vec![])));
        h.builder.process_graph_change(&event(
            EventType::Add,
            object("b", "child", "c1", vec![owner_ref("ConfigMap", "owner", "o1", false)]),
        ));
        assert_eq!(
            h.reports.lock().as_slice(),
            ["child -> [v1/ConfigMap, namespace: b, name: owner, uid: o1]".to_string()]
        );
        assert_eq!(h.drain(), ["delete/c1"]);
    }

    #[test]
    fn a_virtual_delete_keeps_a_node_other_dependents_name_differently() {
        let h = harness();
        h.builder.process_graph_change(&event(
            EventType::Add,
            object("ns", "one", "c1", vec![owner_ref("ConfigMap", "parent", "p1", false)]),
        ));
        h.builder.process_graph_change(&event(
            EventType::Add,
            object("ns", "two", "c2", vec![owner_ref("Secret", "parent", "p1", false)]),
        ));
        h.drain();
        let virtual_identity = h.builder.node("p1").expect("virtual").identity;
        assert_eq!(virtual_identity.kind, "ConfigMap");
        h.builder.process_graph_change(&GraphEvent::virtual_delete(&virtual_identity));
        let replaced = h.builder.node("p1").expect("kept for the other identity");
        assert_eq!(replaced.identity.kind, "Secret");
        assert!(h.absent.lock().contains(&virtual_identity));
        // (The replacement is queued again rate-limited, so it may or may not be there yet.)
        assert!(h.drain().contains(&"delete/c1".to_string()), "the dependent naming the absent identity is checked");
    }

    #[test]
    fn reference_diffs_by_uid() {
        let a = owner_ref("ConfigMap", "a", "1", true);
        let b = owner_ref("ConfigMap", "b", "2", false);
        let a_unblocked = owner_ref("ConfigMap", "a", "1", false);
        let c = owner_ref("ConfigMap", "c", "3", false);
        let (added, removed, changed) = references_diffs(&[a.clone(), b.clone()], &[a_unblocked.clone(), c.clone()]);
        assert_eq!(added, [c]);
        assert_eq!(removed, [b]);
        assert_eq!(changed, [(a, a_unblocked)]);
    }
}
