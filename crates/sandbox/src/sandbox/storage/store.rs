//! The sandbox's storage: every object as JSON under one lock, a cluster-wide revision counter
//! (the resourceVersion) and a bounded history of changes that feeds watches, like etcd behind
//! kube-apiserver's watch cache.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use serde_json::Value;

/// Changes kept for watches and consistent paging by default.
pub const DEFAULT_HISTORY: usize = 10_000;

/// (namespace, name); the namespace is empty for cluster-scoped objects.
pub type ObjectKey = (String, String);

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created: a watch's `ADDED`.
    Added,
    /// Changed: a watch's `MODIFIED`.
    Modified,
    /// Removed for good: a watch's `DELETED`.
    Deleted,
}

/// One committed change.
#[derive(Debug)]
pub struct Change {
    /// The revision (resourceVersion) the change committed at.
    pub revision: u64,
    /// The resource's storage key (`ResourceType::storage_key`, e.g. `pods`).
    pub storage: &'static str,
    /// Added, modified or deleted.
    pub kind: ChangeKind,
    /// The object after the change (for a deletion: its last state, at the deletion's revision).
    pub object: Arc<Value>,
    /// The object before the change (`None` for an addition).
    pub previous: Option<Arc<Value>>,
}

/// The requested revision is older than the kept history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    /// The oldest revision that can still be asked for.
    pub oldest: u64,
}

/// A watch's starting point: the changes after `from` and a channel of the ones to come.
pub struct Subscription {
    /// The kept changes after the subscription's starting revision.
    pub backlog: Vec<Arc<Change>>,
    /// The changes committed from now on.
    pub changes: Receiver<Arc<Change>>,
}

#[derive(Default)]
struct State {
    revision: u64,
    objects: HashMap<&'static str, BTreeMap<ObjectKey, Arc<Value>>>,
    history: VecDeque<Arc<Change>>,
    /// Every change after this revision is in `history`.
    compacted: u64,
    /// Watches may not start before this revision (kube-apiserver's watch cache begins where it
    /// first listed), though lists at an older revision still can (etcd keeps the history).
    watch_floor: u64,
    history_limit: usize,
    subscribers: Vec<(&'static str, Sender<Arc<Change>>)>,
}

/// All objects of the sandbox.
pub struct Store {
    state: Mutex<State>,
}

impl Default for Store {
    fn default() -> Self {
        Store::new(DEFAULT_HISTORY)
    }
}

impl Store {
    /// A store keeping `history_limit` changes (at least one) for watches.
    pub fn new(history_limit: usize) -> Store {
        Store { state: Mutex::new(State { history_limit: history_limit.max(1), ..State::default() }) }
    }

    /// The latest revision.
    pub fn revision(&self) -> u64 {
        self.state.lock().revision
    }

    /// The object stored as `storage`/`namespace`/`name`, if any.
    pub fn get(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let state = self.state.lock();
        state.objects.get(storage)?.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    /// The objects of a resource (in one namespace, or all) and the revision they are at, in
    /// (namespace, name) order.
    pub fn list(&self, storage: &str, namespace: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let state = self.state.lock();
        (collect(state.objects.get(storage), namespace), state.revision)
    }

    /// The objects as they were at `revision`: the current ones with every later change undone.
    pub fn list_at(&self, storage: &str, namespace: Option<&str>, revision: u64) -> Result<Vec<Arc<Value>>, TooOld> {
        let state = self.state.lock();
        if revision < state.compacted {
            return Err(TooOld { oldest: state.compacted });
        }
        let mut objects = state.objects.get(storage).cloned().unwrap_or_default();
        for change in state.history.iter().rev().take_while(|c| c.revision > revision) {
            if change.storage != storage {
                continue;
            }
            let key = object_key(&change.object);
            match &change.previous {
                Some(previous) => objects.insert(key, previous.clone()),
                None => objects.remove(&key),
            };
        }
        Ok(collect(Some(&objects), namespace))
    }

    /// Runs `f` atomically over the store; its writes are committed in order, each with its
    /// own revision, and announced to watchers once `f` returns `Ok`. On `Err` nothing is
    /// written.
    pub fn write<T, E>(&self, f: impl FnOnce(&mut Txn<'_>) -> Result<T, E>) -> Result<T, E> {
        let mut state = self.state.lock();
        let mut txn = Txn { state: &mut state, writes: Vec::new() };
        let result = f(&mut txn)?;
        let writes = std::mem::take(&mut txn.writes);
        for (storage, key, value) in writes {
            state.commit(storage, key, value);
        }
        Ok(result)
    }

    /// Subscribes to the changes of one resource after `from` (`None`: from now on).
    pub fn subscribe(&self, storage: &'static str, from: Option<u64>) -> Result<Subscription, TooOld> {
        let mut state = self.state.lock();
        let backlog = match from {
            Some(from) if from < state.compacted.max(state.watch_floor) => {
                return Err(TooOld { oldest: state.compacted.max(state.watch_floor) });
            }
            Some(from) => state.history.iter().filter(|c| c.revision > from && c.storage == storage).cloned().collect(),
            None => Vec::new(),
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        state.subscribers.push((storage, tx));
        Ok(Subscription { backlog, changes: rx })
    }

    /// The current objects of a resource and a subscription to every later change, taken
    /// atomically (a watch from "now" that starts with the existing objects).
    pub fn snapshot_and_subscribe(&self, storage: &'static str) -> (Vec<Arc<Value>>, u64, Receiver<Arc<Change>>) {
        let mut state = self.state.lock();
        let objects = collect(state.objects.get(storage), None);
        let (tx, rx) = crossbeam_channel::unbounded();
        state.subscribers.push((storage, tx));
        (objects, state.revision, rx)
    }

    /// Starts the watch window at the current revision: watches from an older resourceVersion
    /// are too old from now on, lists at one are still served.
    pub fn start_watch_window(&self) {
        let mut state = self.state.lock();
        state.watch_floor = state.revision;
    }

    /// Forgets the history: any older resourceVersion is now Gone (fault injection).
    pub fn compact(&self) {
        let mut state = self.state.lock();
        state.history.clear();
        state.compacted = state.revision;
    }

    /// How many changes the history keeps.
    pub fn set_history_limit(&self, limit: usize) {
        let mut state = self.state.lock();
        state.history_limit = limit.max(1);
        state.trim_history();
    }
}

/// A transaction: reads see its own earlier writes.
pub struct Txn<'a> {
    state: &'a mut State,
    writes: Vec<(&'static str, ObjectKey, Option<Value>)>,
}

impl Txn<'_> {
    /// The object as the transaction sees it: its own pending write, else the stored one.
    pub fn get(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let key = (namespace.to_string(), name.to_string());
        if let Some((_, _, pending)) = self.writes.iter().rev().find(|(s, k, _)| *s == storage && *k == key) {
            return pending.clone().map(Arc::new);
        }
        self.state.objects.get(storage)?.get(&key).cloned()
    }

    /// The objects of a resource as the transaction sees them.
    pub fn list(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let mut objects = self.state.objects.get(storage).cloned().unwrap_or_default();
        for (s, key, pending) in &self.writes {
            if *s == storage {
                match pending {
                    Some(v) => objects.insert(key.clone(), Arc::new(v.clone())),
                    None => objects.remove(key),
                };
            }
        }
        collect(Some(&objects), namespace)
    }

    /// The revision the next write will get.
    pub fn next_revision(&self) -> u64 {
        self.state.revision + self.writes.len() as u64 + 1
    }

    /// Stores `object` (its metadata.resourceVersion is set on commit).
    pub fn put(&mut self, storage: &'static str, object: Value) {
        let key = object_key(&object);
        self.writes.push((storage, key, Some(object)));
    }

    /// Deletes the object (on commit).
    pub fn remove(&mut self, storage: &'static str, namespace: &str, name: &str) {
        self.writes.push((storage, (namespace.to_string(), name.to_string()), None));
    }
}

impl State {
    fn commit(&mut self, storage: &'static str, key: ObjectKey, value: Option<Value>) {
        let objects = self.objects.entry(storage).or_default();
        let previous = objects.get(&key).cloned();
        let revision = self.revision + 1;
        let (kind, object) = match value {
            Some(mut value) => {
                value["metadata"]["resourceVersion"] = revision.to_string().into();
                let value = Arc::new(value);
                objects.insert(key, value.clone());
                (if previous.is_some() { ChangeKind::Modified } else { ChangeKind::Added }, value)
            }
            None => {
                let Some(last) = objects.remove(&key) else { return };
                let mut last = (*last).clone();
                last["metadata"]["resourceVersion"] = revision.to_string().into();
                (ChangeKind::Deleted, Arc::new(last))
            }
        };
        self.revision = revision;
        let change = Arc::new(Change { revision, storage, kind, object, previous });
        self.subscribers.retain(|(s, tx)| *s != storage || tx.send(change.clone()).is_ok());
        self.history.push_back(change);
        self.trim_history();
    }

    fn trim_history(&mut self) {
        while self.history.len() > self.history_limit {
            if let Some(oldest) = self.history.pop_front() {
                self.compacted = oldest.revision;
            }
        }
    }
}

/// (namespace, name) of a stored object.
pub fn object_key(object: &Value) -> ObjectKey {
    let text = |field: &str| object["metadata"][field].as_str().unwrap_or_default().to_string();
    (text("namespace"), text("name"))
}

fn collect(objects: Option<&BTreeMap<ObjectKey, Arc<Value>>>, namespace: Option<&str>) -> Vec<Arc<Value>> {
    let Some(objects) = objects else { return Vec::new() };
    match namespace {
        Some(ns) => objects
            .range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .map(|(_, v)| v.clone())
            .collect(),
        None => objects.values().cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: &str, name: &str, phase: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}, "status": {"phase": phase}})
    }

    fn put(store: &Store, object: Value) {
        store
            .write::<_, ()>(|txn| {
                txn.put("pods", object);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn writes_get_increasing_revisions_and_reach_subscribers() {
        let store = Store::default();
        let sub = store.subscribe("pods", Some(0)).unwrap();
        put(&store, pod("a", "p1", "Pending"));
        put(&store, pod("a", "p1", "Running"));
        store
            .write::<_, ()>(|txn| {
                txn.remove("pods", "a", "p1");
                Ok(())
            })
            .unwrap();
        let changes: Vec<_> = sub.changes.try_iter().collect();
        let kinds: Vec<_> = changes.iter().map(|c| (c.kind, c.revision)).collect();
        assert_eq!(kinds, [(ChangeKind::Added, 1), (ChangeKind::Modified, 2), (ChangeKind::Deleted, 3)]);
        assert_eq!(changes[2].object["metadata"]["resourceVersion"], "3");
        assert_eq!(changes[1].previous.as_ref().unwrap()["status"]["phase"], "Pending");
        assert!(store.get("pods", "a", "p1").is_none());
    }

    #[test]
    fn lists_by_namespace_in_order() {
        let store = Store::default();
        for (ns, name) in [("b", "x"), ("a", "z"), ("a", "y"), ("ab", "w")] {
            put(&store, pod(ns, name, "Running"));
        }
        let names = |objs: Vec<Arc<Value>>| {
            objs.iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(names(store.list("pods", Some("a")).0), ["y", "z"]);
        assert_eq!(names(store.list("pods", None).0), ["y", "z", "w", "x"]);
        assert_eq!(store.list("pods", None).1, 4);
    }

    #[test]
    fn list_at_undoes_later_changes() {
        let store = Store::default();
        put(&store, pod("a", "p1", "Pending"));
        put(&store, pod("a", "p2", "Pending"));
        put(&store, pod("a", "p1", "Running"));
        store
            .write::<_, ()>(|txn| {
                txn.remove("pods", "a", "p2");
                Ok(())
            })
            .unwrap();
        let at2 = store.list_at("pods", None, 2).unwrap();
        assert_eq!(at2.len(), 2);
        assert_eq!(at2[0]["status"]["phase"], "Pending");
        assert_eq!(store.list_at("pods", None, 1).unwrap().len(), 1);
    }

    #[test]
    fn history_is_bounded_and_old_revisions_are_too_old() {
        let store = Store::new(2);
        for i in 0..5 {
            put(&store, pod("a", &format!("p{i}"), "Pending"));
        }
        assert_eq!(store.subscribe("pods", Some(1)).err(), Some(TooOld { oldest: 3 }));
        let sub = store.subscribe("pods", Some(3)).unwrap();
        assert_eq!(sub.backlog.iter().map(|c| c.revision).collect::<Vec<_>>(), [4, 5]);
        store.compact();
        assert!(store.subscribe("pods", Some(4)).is_err());
        assert!(store.subscribe("pods", Some(5)).is_ok());
    }

    #[test]
    fn a_failed_transaction_writes_nothing() {
        let store = Store::default();
        let result: Result<(), &str> = store.write(|txn| {
            txn.put("pods", pod("a", "p1", "Pending"));
            assert!(txn.get("pods", "a", "p1").is_some(), "reads see pending writes");
            Err("refused")
        });
        assert!(result.is_err());
        assert_eq!(store.revision(), 0);
        assert!(store.get("pods", "a", "p1").is_none());
    }
}
