//! The garbage collector (`garbage-collector-controller`), after upstream v1.33's
//! `pkg/controller/garbagecollector` (`garbagecollector.go`, `graph_builder.go`, `graph.go`,
//! `operations.go`, `patch.go`, `uid_cache.go`).
//!
//! Monitors (metadata handlers on shared informers, see
//! [`crate::runtime::informer::SharedInformerFactory::for_resource`]) watch every resource
//! discovery reports with the `list`, `watch` and `delete` verbs, except events; discovery is
//! read again every 30 s and monitors follow the resources that appear and go. Their events
//! feed the uid graph ([`graph::GraphBuilder`]), which queues nodes to delete-check and owners
//! to orphan for. Workers (`--concurrent-gc-syncs` for each kind of work) then:
//!
//! - delete objects whose owners are all gone (checked by uid against the API, with an
//!   absent-owner cache), in the background, or in the foreground when the object waits for
//!   its own dependents; references to gone owners of objects that still have a live owner are
//!   removed instead;
//! - carry out `foregroundDeletion`: the owner's blocking dependents are deleted first, then the
//!   finalizer is removed;
//! - carry out `orphan`: the references to the owner are removed from its dependents, then the
//!   finalizer is removed.

pub mod graph;
pub mod operations;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference as CoreObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use parking_lot::Mutex;

use crate::apimachinery::errors::Aggregate;
use crate::client::discovery::{self, ApiResource, Discovery};
use crate::client::metadata::PartialObjectMetadata;
use crate::client::{Client, PropagationPolicy};
use crate::lru::LruSet;
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::events::{EventRecorder, EventType as RecordedEventType};
use crate::runtime::informer::{Event, ResourceInformer, SharedInformerFactory};
use crate::runtime::workqueue::WorkQueue;

use graph::{
    EventType, FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN, GraphBuilder, GraphEvent, Node, ObjectReference,
};
use operations::{GcError, Operations, RestMapper};

/// Upstream's `NewReferenceCache(500)`: the absent owners remembered.
const ABSENT_OWNER_CACHE_SIZE: usize = 500;
/// How often discovery is read again (`syncPeriod` in `startGarbageCollectorController`).
pub const SYNC_PERIOD: Duration = Duration::from_secs(30);
/// Resources never monitored (`DefaultIgnoredResources`): events, in both groups.
const IGNORED_RESOURCES: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// `garbagecollector_controller_resources_sync_error_total`.
fn sync_errors() -> &'static crate::metrics::ValueFamily {
    static COUNTER: std::sync::OnceLock<Arc<crate::metrics::ValueFamily>> = std::sync::OnceLock::new();
    crate::metrics::registered(&COUNTER, || {
        crate::metrics::ValueFamily::counter(
            "garbagecollector_controller_resources_sync_error_total",
            "[ALPHA] Number of garbage collector resources sync errors",
            &[],
        )
        .at_zero()
    })
}

/// The controller's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--concurrent-gc-syncs`, for each of the two queues.
    pub workers: usize,
}

/// `NewGarbageCollector` + `Run`: the attemptToDelete and attemptToOrphan workers, the graph
/// builder (which feeds them from the monitors' events, so it does not wait for them to sync)
/// and the discovery resync every [`SYNC_PERIOD`]. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    // Registered at start, as upstream's `metrics.Register()`, so that it reads 0 until an error.
    sync_errors();
    // Each deletion takes two requests: upstream doubles the collector's QPS. (The client's
    // identity, `generic-garbage-collector`, comes with the context.)
    let client = context.client.with_rate_limit_factors(2.0, 1);
    let queue = WorkQueue::new("garbage_collector_attempt_to_delete");
    let orphan_queue = WorkQueue::new("garbage_collector_attempt_to_orphan");
    // Discovery is read when the collector starts (`on_start`, once this process leads):
    // the client acts as the collector's own identity, which a standby must not use.
    let collector = Arc::new(GarbageCollector {
        graph: GraphBuilder::new(
            queue.clone(),
            orphan_queue.clone(),
            Arc::new(Mutex::new(LruSet::new(ABSENT_OWNER_CACHE_SIZE))),
            {
                let recorder = context.recorder.clone();
                Box::new(move |dependent, owner| report_invalid_namespace(&recorder, dependent, owner))
            },
        ),
        operations: Operations {
            client: client.clone(),
            mapper: RestMapper::new(client.clone(), Arc::new(Discovery::default())),
        },
        queue: queue.clone(),
        orphan_queue,
        changes: Arc::new(GraphChanges::new()),
        monitors: Mutex::new(HashMap::new()),
        informers: context.informers.clone(),
        client,
        known: Mutex::new(BTreeSet::new()),
    });
    let c = |collector: &Arc<GarbageCollector>| collector.clone();
    let (deleter, orphaner, graph, synced, starter) =
        (c(&collector), c(&collector), c(&collector), c(&collector), c(&collector));
    let changes = collector.changes.queue.clone();
    Controller::new()
        .with_queue(&queue, config.workers, move |uid: &String| Ok(deleter.attempt_to_delete_worker(uid)?))
        .with_queue(&collector.orphan_queue, config.workers, move |uid: &String| {
            Ok(orphaner.attempt_to_orphan_worker(uid)?)
        })
        .with_queue_before_sync(&changes, 1, move |change: &GraphChange| {
            graph.graph.process_graph_change(&change.event);
            Ok(())
        })
        // `Run` waits for `dependencyGraphBuilder.IsSynced` before its workers start.
        .wait_for(move || synced.is_synced())
        .on_start(move || {
            starter.start();
            Ok(())
        })
        .resync_every("discovery", SYNC_PERIOD, move || collector.resync_discovery())
}

/// One graph change on the `garbage_collector_graph_changes` queue. Upstream queues `*event`
/// pointers, each one distinct, so identity here is a sequence number.
#[derive(Clone, Debug)]
struct GraphChange {
    sequence: u64,
    event: Arc<GraphEvent>,
}

impl PartialEq for GraphChange {
    fn eq(&self, other: &Self) -> bool {
        self.sequence == other.sequence
    }
}

impl Eq for GraphChange {}

impl Hash for GraphChange {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.sequence.hash(state);
    }
}

/// The graph builder's input, upstream's `graphChanges`: a rate-limiting work queue named
/// `garbage_collector_graph_changes`, so that its metrics are upstream's.
struct GraphChanges {
    queue: WorkQueue<GraphChange>,
    next: AtomicU64,
}

impl GraphChanges {
    fn new() -> Self {
        GraphChanges { queue: WorkQueue::new("garbage_collector_graph_changes"), next: AtomicU64::new(0) }
    }

    fn send(&self, event: GraphEvent) {
        let sequence = self.next.fetch_add(1, Ordering::Relaxed);
        self.queue.add(GraphChange { sequence, event: Arc::new(event) });
    }
}

/// `reportInvalidNamespaceOwnerRef`: a Warning Event on the dependent.
fn report_invalid_namespace(recorder: &EventRecorder, dependent: &ObjectReference, owner: &ObjectReference) {
    let reference = CoreObjectReference {
        kind: Some(dependent.kind.clone()),
        api_version: Some(dependent.api_version.clone()),
        namespace: Some(dependent.namespace.clone()).filter(|ns| !ns.is_empty()),
        name: Some(dependent.name.clone()),
        uid: Some(dependent.uid.clone()),
        ..CoreObjectReference::default()
    };
    let message = format!("ownerRef {owner} does not exist in namespace {:?}", dependent.namespace);
    recorder.event(&reference, RecordedEventType::Warning, "OwnerRefInvalidNamespace", &message);
}

/// `GetDeletableResources` minus the ignored resources: preferred resources supporting
/// `delete`, `list` and `watch`.
pub fn deletable_resources(discovered: &Discovery) -> Vec<ApiResource> {
    discovered
        .preferred()
        .into_iter()
        .filter(|r| r.supports_all(&["delete", "list", "watch"]))
        .filter(|r| !IGNORED_RESOURCES.contains(&(r.group.as_str(), r.plural.as_str())))
        .collect()
}

/// One monitored resource.
struct Monitor {
    resource: ApiResource,
    informer: Arc<dyn ResourceInformer>,
    /// Cleared when the resource is no longer monitored: its handler then drops events (the
    /// shared informer itself keeps running, as upstream's shared informers do).
    active: Arc<AtomicBool>,
}

/// Upstream's `GarbageCollector`: the graph, the API operations, the two work queues and the
/// monitors that feed the graph.
pub struct GarbageCollector {
    graph: GraphBuilder,
    operations: Operations,
    /// `attemptToDelete`, the main queue.
    queue: WorkQueue<String>,
    /// `attemptToOrphan`, with workers of its own.
    orphan_queue: WorkQueue<String>,
    /// The graph builder's input (upstream's `graphChanges`).
    changes: Arc<GraphChanges>,
    monitors: Mutex<HashMap<String, Monitor>>,
    informers: SharedInformerFactory,
    /// The client discovery is read with (the collector's own identity), only while leading.
    client: Client,
    /// The monitored resources, by monitor key, as of the last discovery.
    known: Mutex<BTreeSet<String>>,
}

/// An item's references by what their owners are: (solid, dangling, waitingForDependentsDeletion).
type Classified = (Vec<OwnerReference>, Vec<OwnerReference>, Vec<OwnerReference>);

/// What a queue item's processing asks for (`workQueueItemAction`).
type Outcome = Result<(), GcError>;

impl From<GcError> for SyncError {
    fn from(e: GcError) -> SyncError {
        SyncError::of(e)
    }
}

impl GarbageCollector {
    /// `startGarbageCollectorController` and `Run`: the first discovery (as the collector's own
    /// identity) and the monitors start only while leading, as upstream's (the graph reports
    /// invalid owner references as Events). Discovery's failure is only logged.
    fn start(&self) {
        let discovered = discovery::server_resources(&self.client).unwrap_or_else(|e| {
            log::info!("failed to discover preferred resources: {e}");
            Discovery::default()
        });
        let discovered = Arc::new(discovered);
        self.operations.mapper.reset(discovered.clone());
        log::info!("Starting controller garbagecollector");
        let mut known = self.known.lock();
        self.resync_monitors(&deletable_resources(&discovered), &mut known);
        self.informers.start();
    }
}

impl GarbageCollector {
    /// `syncMonitors`: a monitor for each of `resources`, none for the rest. It cannot fail:
    /// a monitor's informer is made without a request.
    fn resync_monitors(&self, resources: &[ApiResource], known: &mut BTreeSet<String>) {
        let wanted: BTreeMap<String, &ApiResource> = resources.iter().map(|r| (r.monitor_key(), r)).collect();
        let mut monitors = self.monitors.lock();
        let gone: Vec<String> = monitors.keys().filter(|k| !wanted.contains_key(*k)).cloned().collect();
        for key in &gone {
            if let Some(monitor) = monitors.remove(key) {
                monitor.active.store(false, Ordering::Release);
            }
        }
        let mut added = 0;
        for (key, resource) in &wanted {
            if monitors.contains_key(key) {
                continue;
            }
            monitors.insert(key.clone(), self.monitor(resource));
            added += 1;
        }
        drop(monitors);
        log::debug!("synced monitors; added {added}, kept {}, removed {}", wanted.len() - added, gone.len());
        *known = wanted.keys().cloned().collect();
    }

    /// `controllerFor`: a handler turning the resource's events into graph changes.
    fn monitor(&self, resource: &ApiResource) -> Monitor {
        let informer = self.informers.for_resource(resource);
        let active = Arc::new(AtomicBool::new(true));
        let (changes, api_version, kind, on) =
            (self.changes.clone(), resource.api_version(), resource.kind.clone(), active.clone());
        informer.add_metadata_handler(Box::new(move |event: &Event<PartialObjectMetadata>| {
            if !on.load(Ordering::Acquire) {
                return;
            }
            let (event_type, object, old) = match event {
                Event::Added(o) => (EventType::Add, o.clone(), None),
                // Monitors have no resync period (`ResourceResyncTime` is 0).
                Event::Updated { old, new } if Arc::ptr_eq(old, new) => return,
                Event::Updated { old, new } => (EventType::Update, new.clone(), Some(old.clone())),
                Event::Deleted { object, .. } => (EventType::Delete, object.clone(), None),
            };
            let event = GraphEvent {
                virtual_: false,
                event_type,
                api_version: api_version.clone(),
                kind: kind.clone(),
                object,
                old,
            };
            changes.send(event);
        }));
        Monitor { resource: resource.clone(), informer, active }
    }

    /// Whether every monitor has synced (`IsSynced`; false without monitors).
    fn is_synced(&self) -> bool {
        let monitors = self.monitors.lock();
        !monitors.is_empty() && monitors.values().all(|m| m.informer.has_synced())
    }

    /// One pass of `Sync`: reads discovery and follows the resources that appear and go.
    fn resync_discovery(&self) {
        let mut known = self.known.lock();
        {
            let (discovered, error) = match discovery::server_resources(&self.client) {
                Ok(d) => (d, None),
                Err(e) => (Discovery::default(), Some(e)),
            };
            if let Some(e) = &error {
                log::info!("failed to discover preferred resources: {e}");
            } else if discovered.is_partial() {
                let groups: Vec<&String> = discovered.failed.keys().collect();
                log::info!("failed to discover some groups: {groups:?}");
            }
            let mut resources = deletable_resources(&discovered);
            if resources.is_empty() {
                log::debug!("no resources reported by discovery, skipping garbage collector sync");
                sync_errors().inc(&[]);
                return;
            }
            self.keep_failed_groups(&discovered, &mut resources);
            let wanted: BTreeSet<String> = resources.iter().map(ApiResource::monitor_key).collect();
            if wanted == *known {
                log::trace!("no resource updates from discovery, skipping garbage collector sync");
                return;
            }
            let added: Vec<&String> = wanted.difference(&known).collect();
            let removed: Vec<&String> = known.difference(&wanted).collect();
            log::debug!(
                "syncing garbage collector with updated resources from discovery: added: {added:?}, removed: {removed:?}"
            );
            self.operations.mapper.reset(Arc::new(discovered));
            self.resync_monitors(&resources, &mut known);
            // `startMonitors`: the informers of new monitors start now (those of the first
            // sync start with every other controller's).
            self.informers.start();
            if self.wait_for_monitors(SYNC_PERIOD) {
                log::debug!("synced garbage collector");
            } else {
                log::error!("timed out waiting for dependency graph builder sync during GC sync");
                sync_errors().inc(&[]);
            }
        }
    }

    /// With partial discovery, resources of the failed groups that are monitored and synced
    /// stay monitored.
    fn keep_failed_groups(&self, discovered: &Discovery, resources: &mut Vec<ApiResource>) {
        if !discovered.is_partial() {
            return;
        }
        let monitors = self.monitors.lock();
        let kept = monitors.values().filter(|m| discovered.failed.contains_key(&m.resource.api_version()));
        let kept: Vec<ApiResource> = kept.filter(|m| m.informer.has_synced()).map(|m| m.resource.clone()).collect();
        for resource in kept {
            if !resources.iter().any(|r| r.monitor_key() == resource.monitor_key()) {
                resources.push(resource);
            }
        }
    }

    fn wait_for_monitors(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.is_synced() {
            if Instant::now() >= deadline || self.queue.is_shutting_down() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        true
    }

    fn enqueue_virtual_delete(&self, identity: &ObjectReference) {
        self.changes.send(GraphEvent::virtual_delete(identity));
    }

    /// `attemptToDeleteWorker`.
    fn attempt_to_delete_worker(&self, uid: &str) -> Outcome {
        let Some(node) = self.graph.node(uid) else {
            log::trace!("item {uid} no longer in the graph, skipping attemptToDeleteItem");
            return Ok(());
        };
        match self.attempt_to_delete_item(&node) {
            Ok(()) => {}
            Err(GcError::VirtualDeleteEnqueued | GcError::NamespacedOwnerOfClusterScoped) => return Ok(()),
            Err(e) => return Err(GcError::SyncItem { item: Box::new(node.identity.clone()), source: Box::new(e) }),
        }
        // Requeued until observed by an informer, so that a virtual node for an object added
        // and removed while a watch was down does not stay in the graph.
        if self.graph.node(uid).is_some_and(|n| n.virtual_) {
            return Err(GcError::NotObserved { item: Box::new(node.identity.clone()) });
        }
        Ok(())
    }

    /// `attemptToDeleteItem`.
    fn attempt_to_delete_item(&self, item: &Node) -> Result<(), GcError> {
        log::debug!("Processing item {} (virtual: {})", item.identity, item.virtual_);
        if item.being_deleted && !item.deleting_dependents {
            return Ok(());
        }
        let latest = match self.operations.get_object(&item.identity) {
            Err(e) if e.is_not_found() => {
                self.enqueue_virtual_delete(&item.identity);
                return Err(GcError::VirtualDeleteEnqueued);
            }
            other => other?,
        };
        if latest.metadata.uid.as_deref() != Some(item.identity.uid.as_str()) {
            self.enqueue_virtual_delete(&item.identity);
            return Err(GcError::VirtualDeleteEnqueued);
        }
        if item.deleting_dependents {
            return self.process_deleting_dependents_item(item);
        }
        let owners = latest.metadata.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            log::debug!("item {} doesn't have an owner, continue on next item", item.identity);
            return Ok(());
        }
        let (solid, dangling, waiting) = self.classify_references(item, &owners)?;
        let resource_version = latest.metadata.resource_version.clone().unwrap_or_default();
        if !solid.is_empty() {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            // References to gone owners and to owners waiting for this dependent are removed,
            // or those owners would wait forever.
            let owner_uids: Vec<String> = dangling.iter().chain(&waiting).map(|r| r.uid.clone()).collect();
            let strategic = operations::delete_owner_refs_strategic_patch(&item.identity.uid, &owner_uids);
            self.operations.patch(&item.identity, strategic, |live| {
                operations::delete_owner_refs_merge_patch(live, &owner_uids)
            })?;
            return Ok(());
        }
        let policy = if !waiting.is_empty() && !self.graph.dependents(&item.identity.uid).is_empty() {
            if self.graph.dependents(&item.identity.uid).iter().any(|d| d.deleting_dependents) {
                log::debug!(
                    "processing item {}, some of its owners and its dependent have FinalizerDeletingDependents, to prevent potential cycle, its ownerReferences are going to be modified to be non-blocking, then the item is going to be deleted with Foreground",
                    item.identity
                );
                let strategic = operations::unblock_owner_refs_strategic_patch(item);
                self.operations.patch(&item.identity, strategic, operations::unblock_owner_refs_merge_patch)?;
            }
            PropagationPolicy::Foreground
        } else {
            let finalizers = latest.metadata.finalizers.clone().unwrap_or_default();
            if finalizers.iter().any(|f| f == FINALIZER_ORPHAN) {
                PropagationPolicy::Orphan
            } else if finalizers.iter().any(|f| f == FINALIZER_DELETE_DEPENDENTS) {
                PropagationPolicy::Foreground
            } else {
                PropagationPolicy::Background
            }
        };
        log::debug!("Deleting item {} with propagationPolicy {policy:?}", item.identity);
        match self.operations.delete_object(&item.identity, &resource_version, &owners, policy) {
            Err(e) if e.is_not_found() => {
                self.enqueue_virtual_delete(&item.identity);
                Err(GcError::VirtualDeleteEnqueued)
            }
            other => other,
        }
    }

    /// `processDeletingDependentsItem`.
    fn process_deleting_dependents_item(&self, item: &Node) -> Result<(), GcError> {
        let blocking = self.graph.blocking_dependents(&item.identity.uid);
        if blocking.is_empty() {
            log::debug!("remove DeleteDependents finalizer for item {}", item.identity);
            return self.operations.remove_finalizer(item, FINALIZER_DELETE_DEPENDENTS);
        }
        for dependent in blocking.iter().filter(|d| !d.deleting_dependents) {
            log::debug!(
                "adding dependent {} to attemptToDelete, because its owner {} is deletingDependents",
                dependent.identity,
                item.identity
            );
            self.queue.add(dependent.identity.uid.clone());
        }
        Ok(())
    }

    /// `classifyReferences`: (solid, dangling, waitingForDependentsDeletion).
    fn classify_references(&self, item: &Node, references: &[OwnerReference]) -> Result<Classified, GcError> {
        let (mut solid, mut dangling, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
        for reference in references {
            match self.is_dangling(reference, item)? {
                None => dangling.push(reference.clone()),
                Some(owner) => {
                    let meta = &owner.metadata;
                    let deleting_dependents = meta.deletion_timestamp.is_some()
                        && meta.finalizers.iter().flatten().any(|f| f == FINALIZER_DELETE_DEPENDENTS);
                    if deleting_dependents { waiting.push(reference.clone()) } else { solid.push(reference.clone()) }
                }
            }
        }
        Ok((solid, dangling, waiting))
    }

    /// `isDangling`: `None` when the owner does not exist (or has another uid), else its
    /// latest state.
    fn is_dangling(&self, reference: &OwnerReference, item: &Node) -> Result<Option<PartialObjectMetadata>, GcError> {
        let absent = self.graph.absent_owners();
        let mut key = ObjectReference::of_owner(reference, "");
        if absent.lock().contains(&key) {
            return Ok(None);
        }
        key.namespace.clone_from(&item.identity.namespace);
        if absent.lock().contains(&key) {
            return Ok(None);
        }
        let resource = self.operations.mapper.resource(&reference.api_version, &reference.kind)?;
        if !resource.namespaced {
            key.namespace.clear();
        }
        if item.identity.namespace.is_empty() && resource.namespaced {
            log::debug!(
                "item {} is cluster-scoped, but refers to a namespaced owner of type {}/{}",
                item.identity,
                reference.api_version,
                reference.kind
            );
            return Err(GcError::NamespacedOwnerOfClusterScoped);
        }
        match self.operations.get_owner(&resource, &item.identity.namespace, &reference.name) {
            Err(e) if e.is_not_found() => {
                absent.lock().insert(key, ());
                Ok(None)
            }
            Err(e) => Err(e.into()),
            Ok(owner) if owner.metadata.uid.as_deref() != Some(reference.uid.as_str()) => {
                absent.lock().insert(key, ());
                Ok(None)
            }
            Ok(owner) => Ok(Some(owner)),
        }
    }

    /// `attemptToOrphanWorker`: removes the owner from its dependents' references, then its
    /// `orphan` finalizer.
    fn attempt_to_orphan_worker(&self, uid: &str) -> Outcome {
        let Some(owner) = self.graph.node(uid) else { return Ok(()) };
        let dependents = self.graph.dependents(uid);
        let mut errors = Vec::new();
        for dependent in &dependents {
            let owner_uids = [owner.identity.uid.clone()];
            let strategic = operations::delete_owner_refs_strategic_patch(&dependent.identity.uid, &owner_uids);
            let result = self.operations.patch(&dependent.identity, strategic, |live| {
                operations::delete_owner_refs_merge_patch(live, &owner_uids)
            });
            match result {
                // A dependent already gone needs no orphaning.
                Err(e) if !e.is_not_found() => errors.push(GcError::OrphanDependent {
                    dependent: Box::new(dependent.identity.clone()),
                    source: Box::new(e),
                }),
                _ => {}
            }
        }
        if let Err(errors) = Aggregate::from_errors(errors) {
            return Err(GcError::OrphanDependents { owner: Box::new(owner.identity.clone()), errors });
        }
        log::trace!("successfully updated all dependents of owner {}", owner.identity);
        self.operations.remove_finalizer(&owner, FINALIZER_ORPHAN).map_err(|e| GcError::RemoveOrphanFinalizer {
            owner: Box::new(owner.identity.clone()),
            source: Box::new(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, plural: &str, verbs: &[&str]) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: "v1".into(),
            kind: plural.into(),
            plural: plural.into(),
            namespaced: true,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn deletable_resources_need_delete_list_watch_and_skip_events() {
        let all = ["create", "delete", "get", "list", "watch"];
        let discovered = Discovery {
            all: vec![
                resource("", "pods", &all),
                resource("", "events", &all),
                resource("events.k8s.io", "events", &all),
                resource("", "bindings", &["create"]),
                resource("authorization.k8s.io", "selfsubjectreviews", &["create"]),
                resource("apps", "replicasets", &["delete", "list", "watch"]),
            ],
            failed: BTreeMap::new(),
        };
        let names: Vec<String> = deletable_resources(&discovered).iter().map(ApiResource::group_resource).collect();
        assert_eq!(names, ["pods", "replicasets.apps"]);
    }

    use crate::controllers::testutil::conflict;

    /// A conflict of a patch inside `attemptToDeleteItem` reaches the queue as one (every
    /// error was a plain failure).
    #[test]
    fn a_conflict_of_an_attempt_reaches_the_queue_as_one() {
        let item = ObjectReference { name: "web".into(), ..ObjectReference::default() };
        let error = GcError::SyncItem { item: Box::new(item), source: Box::new(GcError::Api(conflict())) };
        assert!(matches!(SyncError::from(error), SyncError::Conflict(_)));
        let orphaned =
            GcError::OrphanDependent { dependent: Box::default(), source: Box::new(GcError::Api(conflict())) };
        let owner = Box::default();
        let error =
            GcError::OrphanDependents { owner, errors: Aggregate::from_errors([orphaned]).expect_err("one error") };
        let SyncError::Conflict(message) = SyncError::from(error) else { panic!("a conflict") };
        assert!(
            message.ends_with(
                "got errors: orphaning [/, namespace: , name: , uid: ] failed, the object has been modified (409 Conflict)"
            ),
            "{message}"
        );
    }
}
