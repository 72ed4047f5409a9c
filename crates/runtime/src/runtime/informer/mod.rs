//! Shared informers, after client-go's `tools/cache`: one cache per kind, shared by every
//! controller of the process, kept current by a list-and-watch loop and announcing each change
//! to the handlers the controllers registered.
//!
//! # Kinds known at compile time, and resources found at run time
//!
//! [`SharedInformerFactory::informer`] gives the typed informer of a `k8s_openapi` kind.
//! [`SharedInformerFactory::metadata_informer`] gives a metadata-only informer
//! ([`PartialObjectMetadata`] objects, client-go's `metadatainformer`) of any resource that
//! discovery reported ([`ApiResource`]), and [`SharedInformerFactory::for_resource`] gives
//! either as a [`ResourceInformer`] (the typed one for built-in kinds, so that one watch
//! serves both). Both kinds of informer run the same reflector, over a [`ListerWatcher`].
//!
//! # Threads
//!
//! [`SharedInformerFactory::start`] starts one *reflector* per requested kind. It syncs the
//! kind with a watch-list (a watch that begins with the current state), or lists it on a
//! short-lived thread and then watches it: open watches are read by the process's one watch
//! poller thread (see the `reflector` module), so an informer costs no thread while it
//! watches. The reflector alone writes the informer's [`Store`] and, right after each write,
//! calls the handlers with the matching [`Event`], so handlers see the changes of an object in
//! order and the store already holds the new state when they run. See the `reflector` module
//! for the list, watch, relist and backoff policy.
//!
//! # Handlers must not block
//!
//! Handlers run on the reflector's thread or the watch poller's (client-go gives each listener a
//! goroutine and an unbounded buffer instead): while one runs, no informer of the process takes
//! a new event. A handler only
//! maps the event to work-queue keys and enqueues them; the per-controller workqueue is the
//! buffer, and the controller's workers do the work. A handler must not call back into
//! [`Informer::add_handler`]; reading stores is fine.
//!
//! # Events
//!
//! Watch events map to [`Event::Added`], [`Event::Updated`] and [`Event::Deleted`] by what the
//! cache held, as client-go's shared informer does. After a `410 Gone` the relist delivers only
//! the difference against the cache: Added for new keys, Updated for a changed
//! resourceVersion, and Deleted with `final_state_unknown` (client-go's
//! `DeletedFinalStateUnknown`) for objects deleted while the watch was away, carrying their
//! last known state. Every resync period, each cached object is delivered as
//! `Updated { old, new }` with `old` and `new` the same `Arc`.

mod metrics;
mod mutation_cache;
mod reflector;
mod resource;
mod store;
mod watch_list;

use std::any::{Any, TypeId};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

use crate::client::Client;
use crate::client::discovery::ApiResource;
use crate::client::metadata::PartialObjectMetadata;
use metrics::FifoMetrics;
pub use mutation_cache::MutationCache;
pub use reflector::{Cached, Informable, InformerScope, ListerWatcher, Page};
use reflector::{MetadataOnly, Reflector, Typed};
pub use resource::{MetadataHandler, ResourceInformer};
pub use store::{NAMESPACE_INDEX, OWNER_UID_INDEX, Store, object_key, split_key};

/// How often [`SharedInformerFactory::wait_for_sync`] checks the informers (client-go's poll).
const SYNC_POLL: Duration = Duration::from_millis(100);

/// A change to a cached object, as handlers receive it.
#[derive(Debug)]
pub enum Event<K> {
    /// The object appeared (in the initial list, or from the watch).
    Added(Arc<K>),
    /// The object changed; on a periodic resync, `old` and `new` are the same `Arc`.
    Updated {
        /// The state cached before.
        old: Arc<K>,
        /// The state now cached.
        new: Arc<K>,
    },
    /// The object is gone. `final_state_unknown`: the deletion was missed while the watch was
    /// away (client-go's `DeletedFinalStateUnknown`) and `object` is the last state cached.
    Deleted {
        /// The deleted object, or the last state cached when `final_state_unknown`.
        object: Arc<K>,
        /// Whether the deletion was missed while the watch was away.
        final_state_unknown: bool,
    },
}

impl<K> Event<K> {
    /// The object's latest known state.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Event::Added(object) | Event::Updated { new: object, .. } | Event::Deleted { object, .. } => object,
        }
    }
}

type Handler<K> = Box<dyn Fn(&Event<K>) + Send + Sync>;

/// The cache of one kind with its event handlers.
pub struct Informer<K> {
    /// client-go's name for the kind in logs, e.g. `*v1.ConfigMap`.
    type_name: String,
    /// How its reflector lists and watches.
    source: Arc<dyn ListerWatcher<K>>,
    resync: Option<Duration>,
    store: Store<K>,
    /// The handlers. The lock is held while a change is written and delivered, so that a
    /// handler added meanwhile sees every object exactly once: in its replay or as an event.
    handlers: Mutex<Vec<Handler<K>>>,
    synced: AtomicBool,
    /// Whether [`Informer::last_store_sync_resource_version`] reports the store's version
    /// (client-go's `AtomicFIFO` gate).
    reports_store_version: bool,
    /// Written by the reflector (see `reflector.rs`).
    last_sync_resource_version: Mutex<String>,
    /// What the writes of this process's controllers returned, for those that read their
    /// writes (see [`Informer::get_newest`]).
    mutations: MutationCache<K>,
    /// The informer's series, when its factory has a name (see the `metrics` module).
    fifo_metrics: Option<FifoMetrics>,
}

impl<K: Informable> Informer<K> {
    /// An empty informer of a `k8s_openapi` kind; `resync`: how often to deliver every object
    /// again (`None`: never).
    fn new(resync: Option<Duration>) -> Self {
        Informer::with_source(resync, Arc::new(Typed::<K>::new()))
    }
}

impl Informer<PartialObjectMetadata> {
    /// An empty metadata-only informer of a resource found by discovery.
    fn metadata_only(resync: Option<Duration>, resource: &ApiResource) -> Self {
        Informer::with_source(resync, Arc::new(MetadataOnly(resource.clone())))
    }
}

impl<K: Metadata<Ty = ObjectMeta> + 'static> Informer<K> {
    /// An empty informer fed by `source`.
    fn with_source(resync: Option<Duration>, source: Arc<dyn ListerWatcher<K>>) -> Self {
        Informer {
            type_name: format!("*{}.{}", K::VERSION, K::KIND),
            source,
            resync,
            store: Store::new(),
            handlers: Mutex::new(Vec::new()),
            synced: AtomicBool::new(false),
            reports_store_version: true,
            last_sync_resource_version: Mutex::new(String::new()),
            mutations: MutationCache::default(),
            fifo_metrics: None,
        }
    }

    /// The cache. It is empty until [`Informer::has_synced`].
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The newest resourceVersion the informer's store has seen (from its sync, its events
    /// and its bookmarks), or "" before its first sync or with client-go's `AtomicFIFO` gate
    /// off (client-go v1.36's `threadSafeMap.LastStoreSyncResourceVersion`). What
    /// `runtime::consistency` compares a controller's writes with.
    pub fn last_store_sync_resource_version(&self) -> String {
        if self.reports_store_version { self.store.last_store_sync_resource_version() } else { String::new() }
    }

    /// With `reports` false, [`Informer::last_store_sync_resource_version`] is always "".
    fn reporting_store_version(mut self, reports: bool) -> Self {
        self.reports_store_version = reports;
        self
    }

    /// With `metrics`, the informer keeps its `informer_*` series.
    fn measured(mut self, metrics: Option<FifoMetrics>) -> Self {
        self.fifo_metrics = metrics;
        self
    }

    /// Runs `work`, the processing of one delta (what upstream's RealFIFO pops: an event, a
    /// bookmark, a replace, a resync), timed when the informer has metrics.
    fn process<T>(&self, work: impl FnOnce() -> T) -> T {
        match &self.fifo_metrics {
            Some(metrics) => metrics.process(work),
            None => work(),
        }
    }

    /// Records the object a controller's write (update, create) returned, so that
    /// [`Informer::get_newest`] and [`Informer::newest`] give it until the watch brings it
    /// (client-go's `MutationCache.Mutation`). Returns it.
    pub fn mutation(&self, written: K) -> Arc<K> {
        self.mutations.mutation(written)
    }

    /// The cached object of `key`, or what a recorded write returned if that is newer: a
    /// controller that syncs an object again right after writing it reads its own write, and
    /// its next write does not meet a Conflict. Objects the cache does not have are `None`.
    pub fn get_newest(&self, key: &str) -> Option<Arc<K>> {
        self.store.get(key).map(|cached| self.mutations.newest(cached))
    }

    /// [`Informer::get_newest`] for an object taken from the store (e.g. by a list).
    pub fn newest(&self, cached: Arc<K>) -> Arc<K> {
        self.mutations.newest(cached)
    }

    /// Whether the first full list has been delivered to the cache and the handlers.
    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// How often every cached object is delivered again as `Updated { old == new }`.
    pub fn resync_period(&self) -> Option<Duration> {
        self.resync
    }

    /// Registers a handler. It runs on the reflector thread and must not block (see the module
    /// docs). Added after the informer has objects, it first receives `Added` for each of them
    /// on the calling thread (client-go's `AddEventHandler` replay), then every later change.
    pub fn add_handler(&self, handler: impl Fn(&Event<K>) + Send + Sync + 'static) {
        let mut handlers = self.handlers.lock();
        self.store.for_each(|object| handler(&Event::Added(object)));
        handlers.push(Box::new(handler));
    }

    /// Adds an index for [`Store::by_index`], e.g. pods by `spec.nodeName`. Meant to be called
    /// before the informer starts; a later index is filled from the cached objects. A name
    /// already taken (including the built-in `namespace` and `owner-uid`) is ignored.
    pub fn add_index(&self, name: &'static str, index: impl Fn(&K) -> Vec<String> + Send + Sync + 'static) {
        if !self.store.add_index(name, Box::new(index)) {
            log::warn!("{}: an index named {name:?} exists already; keeping it", self.type_name);
        }
    }

    fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// Caches `object` and announces it, as a watch event would: for other modules' unit
    /// tests, which have no server to watch.
    #[cfg(any(test, feature = "fixtures"))]
    pub fn apply_for_test(&self, object: K) {
        self.upsert(object);
    }

    /// Caches an added or modified object and announces it.
    fn upsert(&self, object: K) {
        self.process(|| {
            let handlers = self.handlers.lock();
            let new = Arc::new(object);
            let event = match self.store.insert(object_key(new.metadata()), new.clone()) {
                Some(old) => Event::Updated { old, new },
                None => Event::Added(new),
            };
            self.store.set_resource_version(resource_version_of(event.object().as_ref()));
            dispatch(&handlers, &event);
        })
    }

    /// Drops a deleted object (`object` is its final state) and announces it.
    fn delete(&self, object: K) {
        self.process(|| {
            let handlers = self.handlers.lock();
            self.store.remove(&object_key(object.metadata()));
            self.store.set_resource_version(resource_version_of(&object));
            dispatch(&handlers, &Event::Deleted { object: Arc::new(object), final_state_unknown: false });
        })
    }

    /// A bookmark: the collection has reached `resource_version` (the store's `Bookmark`).
    fn bookmark(&self, resource_version: &str) {
        self.process(|| {
            let _handlers = self.handlers.lock();
            self.store.set_resource_version(resource_version);
        })
    }

    /// Makes the cache equal to a full list (or a watch-list's initial events) at
    /// `resource_version` and announces the difference (client-go's `Replace`, without events
    /// for unchanged objects): listed objects first, in list order, then the deletions of
    /// cached objects the list no longer has. The objects come one at a time (decoded as they
    /// are applied); the first error ends the replace before the deletions, which only a
    /// complete list can tell, and leaves the store's resourceVersion where it was.
    fn replace(
        &self,
        listed: impl IntoIterator<Item = crate::client::Result<K>>,
        resource_version: &str,
    ) -> crate::client::Result<()> {
        self.process(|| self.replace_locked(listed, resource_version))
    }

    /// [`Informer::replace`]'s work.
    fn replace_locked(
        &self,
        listed: impl IntoIterator<Item = crate::client::Result<K>>,
        resource_version: &str,
    ) -> crate::client::Result<()> {
        let handlers = self.handlers.lock();
        let mut seen = HashSet::new();
        for object in listed {
            let object = object?;
            let key = object_key(object.metadata());
            seen.insert(key.clone());
            // The metadata alone tells, without unpacking a packed object.
            let cached = self.store.metadata(&key);
            if cached.is_some_and(|c| c.resource_version == object.metadata().resource_version) {
                continue;
            }
            let new = Arc::new(object);
            let event = match self.store.insert(key, new.clone()) {
                Some(old) => Event::Updated { old, new },
                None => Event::Added(new),
            };
            dispatch(&handlers, &event);
        }
        for key in self.store.keys() {
            if seen.contains(&key) {
                continue;
            }
            if let Some(object) = self.store.remove(&key) {
                dispatch(&handlers, &Event::Deleted { object, final_state_unknown: true });
            }
        }
        self.store.set_resource_version(resource_version);
        Ok(())
    }

    /// Delivers every cached object as `Updated { old == new }`.
    fn resync(&self) {
        self.process(|| {
            let handlers = self.handlers.lock();
            self.store.for_each(|object| dispatch(&handlers, &Event::Updated { old: object.clone(), new: object }));
        })
    }
}

fn resource_version_of<K: Metadata<Ty = ObjectMeta>>(object: &K) -> &str {
    object.metadata().resource_version.as_deref().unwrap_or_default()
}

fn dispatch<K>(handlers: &[Handler<K>], event: &Event<K>) {
    for handler in handlers {
        handler(event);
    }
}

/// What the factory needs of an informer whose kind it does not know.
trait Managed: Send + Sync {
    fn has_synced(&self) -> bool;
    /// Starts the informer's reflector (with a watch-list first if `watch_list`); the receiver
    /// disconnects once it has ended.
    fn spawn(self: Arc<Self>, client: Client, watch_list: bool, stop: Receiver<()>) -> std::io::Result<Receiver<()>>;
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<K: Cached> Managed for Informer<K> {
    fn has_synced(&self) -> bool {
        Informer::has_synced(self)
    }

    fn spawn(self: Arc<Self>, client: Client, watch_list: bool, stop: Receiver<()>) -> std::io::Result<Receiver<()>> {
        if let Some(metrics) = &self.fifo_metrics {
            metrics.start();
        }
        Reflector::spawn(self, client, watch_list, stop)
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// The informers one controller reads; see [`SharedInformerFactory::recording`].
#[derive(Clone, Default)]
pub struct CacheSet(Vec<Arc<dyn Managed>>);

impl CacheSet {
    /// Whether every informer of the set has its first full list.
    pub fn has_synced(&self) -> bool {
        self.0.iter().all(|informer| informer.has_synced())
    }

    /// How many informers the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set holds no informer.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What an informer of the factory is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    /// A `k8s_openapi` kind.
    Typed(TypeId),
    /// A resource as metadata only: `group/version/plural`.
    Metadata(String),
}

fn metadata_key(resource: &ApiResource) -> Key {
    Key::Metadata(format!("{}/{}/{}", resource.group, resource.version, resource.plural))
}

/// One informer as the factory keeps it.
struct Registered {
    key: Key,
    informer: Arc<dyn Managed>,
    started: bool,
}

struct FactoryState {
    informers: Vec<Registered>,
    /// While [`SharedInformerFactory::recording`] runs: the informers requested meanwhile.
    recorded: Option<Vec<Arc<dyn Managed>>>,
    /// One per started reflector: disconnects when it has ended.
    running: Vec<Receiver<()>>,
    /// Dropped by shutdown: every reflector sees `stop` disconnect and returns.
    stop_sender: Option<Sender<()>>,
    stop: Receiver<()>,
}

/// How a [`SharedInformerFactory`]'s informers sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InformerOptions {
    /// `--min-resync-period`; each informer resyncs at a random 1–2× of it, as upstream's
    /// `ResyncPeriod`. Zero disables resyncs.
    pub resync: Duration,
    /// client-go's `WatchListClient` feature gate (Beta, on by default since v1.35): each
    /// (re)list is first tried as a watch-list (`sendInitialEvents=true`), with a plain LIST
    /// only as its fallback. See the `reflector` module.
    pub watch_list: bool,
    /// client-go's `AtomicFIFO` gate (Beta, on by default since v1.36). Of what it changes,
    /// only this shows here: with it off, informers report no store resourceVersion
    /// ([`Informer::last_store_sync_resource_version`] is ""), so `runtime::consistency`
    /// never holds a controller back.
    pub atomic_fifo: bool,
    /// The factory's name in the informers' metrics (client-go's `WithInformerName`): with
    /// one, each typed informer keeps `informer_queued_items` and
    /// `informer_processing_latency_seconds` series; metadata-only informers never do.
    pub name: Option<&'static str>,
}

impl InformerOptions {
    /// Resyncs every `resync` (zero: never), with client-go v1.36's default gates, unnamed.
    pub fn new(resync: Duration) -> Self {
        InformerOptions { resync, watch_list: true, atomic_fifo: true, name: None }
    }
}

/// Hands out one shared [`Informer`] per kind (or per resource discovered at run time),
/// across all namespaces and without selectors, and runs their reflector threads. Clones
/// share the same informers (a controller that adds informers later keeps a clone).
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<FactoryInner>,
}

struct FactoryInner {
    client: Client,
    options: InformerOptions,
    state: Mutex<FactoryState>,
}

impl SharedInformerFactory {
    /// `resync`: `--min-resync-period`; each informer resyncs at a random 1–2× of it, as
    /// upstream's `ResyncPeriod`. Zero disables resyncs. Feature gates at their v1.36
    /// defaults ([`InformerOptions::new`]).
    pub fn new(client: Client, resync: Duration) -> Self {
        Self::with_options(client, InformerOptions::new(resync))
    }

    /// A factory whose informers sync as `options` say.
    pub fn with_options(client: Client, options: InformerOptions) -> Self {
        metrics::register();
        let (stop_sender, stop) = crossbeam_channel::bounded(0);
        let state = FactoryState {
            informers: Vec::new(),
            recorded: None,
            running: Vec::new(),
            stop_sender: Some(stop_sender),
            stop,
        };
        SharedInformerFactory { inner: Arc::new(FactoryInner { client, options, state: Mutex::new(state) }) }
    }

    /// The informer of kind `K`, created on first request; later requests share it. It runs
    /// once [`SharedInformerFactory::start`] is called (again).
    pub fn informer<K: Informable>(&self) -> Arc<Informer<K>> {
        let (resync, atomic_fifo) = (randomized(self.inner.options.resync), self.inner.options.atomic_fifo);
        let metrics = self.inner.options.name.map(|name| FifoMetrics::of::<K>(name));
        self.shared(Key::Typed(TypeId::of::<K>()), || {
            Informer::<K>::new(resync).reporting_store_version(atomic_fifo).measured(metrics)
        })
    }

    /// The metadata-only informer of a resource found by discovery (client-go's
    /// `metadatainformer.SharedInformerFactory.ForResource`), created on first request.
    pub fn metadata_informer(&self, resource: &ApiResource) -> Arc<Informer<PartialObjectMetadata>> {
        self.metadata_informer_measured(resource, None)
    }

    /// [`SharedInformerFactory::metadata_informer`], keeping `metrics` if it creates it.
    fn metadata_informer_measured(
        &self,
        resource: &ApiResource,
        metrics: Option<FifoMetrics>,
    ) -> Arc<Informer<PartialObjectMetadata>> {
        let (resync, atomic_fifo) = (randomized(self.inner.options.resync), self.inner.options.atomic_fifo);
        self.shared(metadata_key(resource), || {
            Informer::metadata_only(resync, resource).reporting_store_version(atomic_fifo).measured(metrics)
        })
    }

    /// The informer of a resource for handlers that only need metadata, as upstream's
    /// `informerfactory.ForResource`: the typed informer when `resource` is a built-in kind
    /// (so controllers reading that kind share one watch with it), else the metadata-only one.
    /// Where upstream's typed factory knows the resource but this process has no typed
    /// informer of its kind, the metadata-only informer keeps the series upstream's typed one
    /// has, so that the metrics show the same informers.
    pub fn for_resource(&self, resource: &ApiResource) -> Arc<dyn ResourceInformer> {
        if let Some(typed) = resource::typed_for_resource(self, resource) {
            return typed;
        }
        let metrics = match self.inner.options.name {
            Some(name) if resource::client_go_typed_factory_knows(resource) => {
                Some(FifoMetrics::of_resource(name, resource))
            }
            _ => None,
        };
        self.metadata_informer_measured(resource, metrics)
    }

    /// The running informer of `resource` (the one [`SharedInformerFactory::for_resource`]
    /// hands out) if one has been requested and started, e.g. as a garbage collector monitor;
    /// never creates one. What the storage version migrator reads instead of upstream's
    /// `GraphBuilder.GetMonitor`.
    pub fn started_for_resource(&self, resource: &ApiResource) -> Option<Arc<dyn ResourceInformer>> {
        struct Started<'a>(&'a SharedInformerFactory);
        impl resource::KindVisitor for Started<'_> {
            type Out = Option<Arc<dyn ResourceInformer>>;
            fn visit<K: Informable>(self) -> Self::Out {
                let informer: Arc<dyn ResourceInformer> = self.0.started::<K>(&Key::Typed(TypeId::of::<K>()))?;
                Some(informer)
            }
        }
        match resource::visit_builtin_kind(resource, Started(self)) {
            Some(typed) => typed,
            None => {
                let informer: Arc<dyn ResourceInformer> =
                    self.started::<PartialObjectMetadata>(&metadata_key(resource))?;
                Some(informer)
            }
        }
    }

    /// The informer registered under `key` if it has been started.
    fn started<K: Cached>(&self, key: &Key) -> Option<Arc<Informer<K>>> {
        let state = self.inner.state.lock();
        let registered = state.informers.iter().find(|r| r.key == *key && r.started)?;
        registered.informer.clone().into_any().downcast::<Informer<K>>().ok()
    }

    /// The informer registered under `key`, or a new one from `create`.
    fn shared<K: Cached>(&self, key: Key, create: impl FnOnce() -> Informer<K>) -> Arc<Informer<K>> {
        let mut state = self.inner.state.lock();
        let existing = state.informers.iter().find(|r| r.key == key);
        let informer = match existing.and_then(|r| r.informer.clone().into_any().downcast::<Informer<K>>().ok()) {
            Some(informer) => informer,
            None => {
                let informer = Arc::new(create());
                state.informers.push(Registered { key, informer: informer.clone(), started: false });
                informer
            }
        };
        if let Some(recorded) = &mut state.recorded {
            let managed: Arc<dyn Managed> = informer.clone();
            if !recorded.iter().any(|r| Arc::ptr_eq(r, &managed)) {
                recorded.push(managed);
            }
        }
        informer
    }

    /// Runs `build` (a controller's constructor) and returns, with its result, the informers
    /// it requested: the caches that controller waits for before its workers take keys, as
    /// upstream's per-controller `WaitForNamedCacheSync`.
    pub fn recording<T>(&self, build: impl FnOnce() -> T) -> (T, CacheSet) {
        let previous = self.inner.state.lock().recorded.replace(Vec::new());
        assert!(previous.is_none(), "informer requests are recorded for one constructor at a time");
        let built = build();
        let recorded = self.inner.state.lock().recorded.take().unwrap_or_default();
        (built, CacheSet(recorded))
    }

    /// Starts the reflector of every informer requested and not started yet. Does nothing
    /// after [`SharedInformerFactory::shutdown`].
    pub fn start(&self) {
        let mut state = self.inner.state.lock();
        if state.stop_sender.is_none() {
            log::warn!("the informer factory is shut down; not starting informers");
            return;
        }
        let FactoryState { informers, running, stop, .. } = &mut *state;
        for registered in informers.iter_mut().filter(|r| !r.started) {
            let watch_list = self.inner.options.watch_list;
            match registered.informer.clone().spawn(self.inner.client.clone(), watch_list, stop.clone()) {
                Ok(ended) => {
                    running.push(ended);
                    registered.started = true;
                }
                Err(e) => log::error!("cannot start an informer thread: {e}"),
            }
        }
    }

    /// Waits until every started informer has synced; `false` if `timeout` passed first.
    pub fn wait_for_sync(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let started: Vec<_> =
                self.inner.state.lock().informers.iter().filter(|r| r.started).map(|r| r.informer.clone()).collect();
            if started.iter().all(|informer| informer.has_synced()) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep(SYNC_POLL.min(deadline - now));
        }
    }

    /// Stops every reflector (their watches close) and waits for them to end.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }
}

impl FactoryInner {
    fn shutdown(&self) {
        let running = {
            let mut state = self.state.lock();
            state.stop_sender = None;
            std::mem::take(&mut state.running)
        };
        // Reflectors whose watch is open live on the poller, which drops them once woken.
        crate::client::watch_poller::wake();
        for ended in running {
            let _ = ended.recv();
        }
    }
}

impl Drop for FactoryInner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A random 1–2× of `period` (upstream's `ResyncPeriod`); `None` for zero.
fn randomized(period: Duration) -> Option<Duration> {
    (!period.is_zero()).then(|| period.mul_f64(1.0 + crate::random::unit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config_map(name: &str, version: &str) -> ConfigMap {
        let metadata = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        };
        ConfigMap { metadata, ..ConfigMap::default() }
    }

    /// Events as `kind key@version`.
    fn recorded(informer: &Informer<ConfigMap>) -> Arc<Mutex<Vec<String>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        informer.add_handler(move |event: &Event<ConfigMap>| {
            let at = |o: &ConfigMap| {
                format!("{}@{}", object_key(&o.metadata), o.metadata.resource_version.as_deref().unwrap_or(""))
            };
            sink.lock().push(match event {
                Event::Added(o) => format!("added {}", at(o)),
                Event::Updated { old, new } if Arc::ptr_eq(old, new) => format!("resynced {}", at(new)),
                Event::Updated { old, new } => format!("updated {} to {}", at(old), at(new)),
                Event::Deleted { object, final_state_unknown: true } => format!("vanished {}", at(object)),
                Event::Deleted { object, .. } => format!("deleted {}", at(object)),
            });
        });
        seen
    }

    /// The named factory's typed informers time each delta; metadata-only informers and the
    /// informers of an unnamed factory keep no series (client-go's unreserved identifiers).
    #[test]
    fn a_named_factorys_typed_informers_time_each_delta() {
        let options = InformerOptions { name: Some("t-informer-metrics"), ..InformerOptions::new(Duration::ZERO) };
        let factory = SharedInformerFactory::with_options(crate::client::unreachable_client(), options);
        let informer = factory.informer::<ConfigMap>();
        informer.upsert(config_map("a", "1"));
        informer.upsert(config_map("a", "2"));
        informer.bookmark("3");
        informer.resync();
        informer.replace([Ok(config_map("b", "4"))], "4").unwrap();
        informer.delete(config_map("b", "5"));
        let labels = "{group=\"\",name=\"t-informer-metrics\",resource=\"configmaps\",version=\"v1\"}";
        let endpoints = factory.informer::<k8s_openapi::api::core::v1::Endpoints>();
        endpoints.bookmark("1");
        let text = crate::metrics::global().render();
        let informer_gen =
            "informer_queued_items{group=\"\",name=\"t-informer-metrics\",resource=\"endpointss\",version=\"v1\"} 0\n";
        assert!(text.contains(informer_gen), "informer-gen's resource, the kind plus s: {text}");
        let text = crate::metrics::global().render();
        assert!(text.contains(&format!("informer_processing_latency_seconds_count{labels} 6\n")), "{text}");
        assert!(text.contains(&format!("informer_queued_items{labels} 0\n")), "{text}");
        let widgets = ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            namespaced: true,
            verbs: Vec::new(),
        };
        factory.for_resource(&widgets);
        assert!(factory.metadata_informer(&widgets).fifo_metrics.is_none(), "a custom resource has no series");
        let ingress_classes = ApiResource {
            group: "networking.k8s.io".into(),
            version: "v1".into(),
            kind: "IngressClass".into(),
            plural: "ingressclasses".into(),
            namespaced: true,
            verbs: Vec::new(),
        };
        factory.for_resource(&ingress_classes);
        let measured =
            factory.metadata_informer(&ingress_classes).fifo_metrics.as_ref().map(|m| m.labels().map(str::to_string));
        let expected = ["t-informer-metrics", "networking.k8s.io", "v1", "ingressclasss"].map(str::to_string);
        assert_eq!(measured, Some(expected), "a kind upstream's typed factory informs keeps its series");
        let unnamed = SharedInformerFactory::new(crate::client::unreachable_client(), Duration::ZERO);
        assert!(unnamed.informer::<ConfigMap>().fifo_metrics.is_none());
    }

    #[test]
    fn watch_changes_map_to_events_by_what_the_cache_held() {
        let informer = Informer::<ConfigMap>::new(None);
        let seen = recorded(&informer);
        informer.upsert(config_map("a", "1"));
        informer.upsert(config_map("a", "2"));
        informer.delete(config_map("a", "3"));
        informer.resync();
        assert_eq!(*seen.lock(), ["added ns/a@1", "updated ns/a@1 to ns/a@2", "deleted ns/a@3"]);
        assert!(informer.store().is_empty());
    }

    #[test]
    fn a_relist_delivers_only_the_difference() {
        let informer = Informer::<ConfigMap>::new(None);
        informer
            .replace([config_map("same", "1"), config_map("changed", "2"), config_map("gone", "3")].map(Ok), "4")
            .unwrap();
        let seen = recorded(&informer);
        assert_eq!(seen.lock().len(), 3, "the replay");
        seen.lock().clear();
        informer
            .replace([config_map("same", "1"), config_map("changed", "5"), config_map("new", "6")].map(Ok), "7")
            .unwrap();
        assert_eq!(*seen.lock(), ["updated ns/changed@2 to ns/changed@5", "added ns/new@6", "vanished ns/gone@3"]);
        let mut keys = informer.store().keys();
        keys.sort();
        assert_eq!(keys, ["ns/changed", "ns/new", "ns/same"]);
        seen.lock().clear();
        informer.resync();
        assert_eq!(seen.lock().len(), 3);
        assert!(seen.lock().iter().all(|s| s.starts_with("resynced")));
    }

    #[test]
    fn the_store_follows_lists_events_and_bookmarks() {
        let informer = Informer::<ConfigMap>::new(None);
        let version = || informer.store().last_store_sync_resource_version();
        assert_eq!(version(), "");
        informer.replace([config_map("a", "3"), config_map("b", "5")].map(Ok), "9").unwrap();
        assert_eq!(version(), "9", "a list's own resourceVersion, not its objects'");
        informer.upsert(config_map("a", "11"));
        assert_eq!(version(), "11");
        informer.delete(config_map("b", "12"));
        assert_eq!(version(), "12", "the deleted object's final resourceVersion");
        informer.bookmark("15");
        assert_eq!(version(), "15");
        assert_eq!(informer.last_store_sync_resource_version(), "15");
        let failed = informer.replace([Ok(config_map("a", "11")), Err(crate::client::Error::Decode("x".into()))], "20");
        assert!(failed.is_err());
        assert_eq!(version(), "15", "a replace cut short does not claim its version");
        let without_atomic_fifo = Informer::<ConfigMap>::new(None).reporting_store_version(false);
        without_atomic_fifo.bookmark("15");
        assert_eq!(without_atomic_fifo.last_store_sync_resource_version(), "");
    }

    #[test]
    fn resync_periods_are_one_to_two_times_the_minimum() {
        assert_eq!(randomized(Duration::ZERO), None);
        for _ in 0..100 {
            let period = randomized(Duration::from_secs(10)).unwrap_or_default();
            assert!(period >= Duration::from_secs(10) && period < Duration::from_secs(20), "{period:?}");
        }
    }
}
