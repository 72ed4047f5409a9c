//! The reflector: what keeps one informer in step with the API server, as client-go's
//! `Reflector` (v1.36 `tools/cache/reflector.go`) and the shared informer's delta processing do
//! together. There is no DeltaFIFO: the reflector applies each change to the cache itself and
//! calls the handlers, in order.
//!
//! # Threads
//!
//! A reflector has a thread only while it lists, backs off or opens a watch. Once a watch is
//! open, the reflector itself becomes that watch's handler on the process's one watch poller
//! (`client::watch_poller`), which applies the events as they arrive and runs the periodic
//! resyncs; when the watch ends, a new short-lived thread carries on from there. So an idle
//! process holds no thread per informer (the garbage collector alone watches ~50 resources).
//!
//! # One reflector for every kind
//!
//! The reflector is not generic: it reaches its informer through [`ReflectorTarget`], whose
//! few operations (list a page, open a watch, decode and apply what came as JSON) are the only
//! code compiled once per informed kind. The loop below is compiled once for all of them.
//!
//! # The cycle (client-go's `Run` → `BackoffUntil(ListAndWatch)`)
//!
//! Each `ListAndWatch` first syncs the cache with the server's current state — with a
//! watch-list, or a list when that is off or fails — then *watches* from there, with bookmarks
//! and a server-side timeout of 5–10 minutes. Every event, bookmarks included, moves the last
//! synced resourceVersion forward, so a re-watch starts from a recent revision even when the
//! watched kind itself is quiet. A watch silent for the client's `watch_idle_timeout` (90 s: a
//! minute between bookmarks plus slack) is taken for a stalled connection and opened again from
//! there. `managedFields` are passed over as objects are decoded (upstream's controller manager
//! trims them as they arrive), and never cached.
//!
//! ## Watch-list (`watchList`; the `WatchListClient` gate, on by default since v1.35)
//!
//! A watch with `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`, bookmarks, the
//! 5–10 minute timeout and, as `resourceVersion`, the last synced one ("" at first, or once
//! that one was unavailable: a consistent read of the latest state). The server sends the state
//! as ADDED events, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`. Until that
//! bookmark the events go to a temporary store (`watch_list`); then the cache is replaced with
//! its objects exactly as after a list (the handlers see the same difference), the last synced
//! resourceVersion becomes the bookmark's, the informer is synced, and the same connection
//! carries on as the ordinary watch. Before that bookmark:
//! - a watch-list that could not be opened because the connection was refused, or that was
//!   answered 429 (opening it or as an ERROR event), backs off and is tried again;
//! - one answered 410 Expired or "too large resource version" is tried again at once from ""
//!   (`isLastSyncResourceVersionUnavailable`, cleared once a watch-list or list succeeds);
//! - one that closed, cleanly or with a broken connection, after a second or after any event,
//!   is tried again at once;
//! - anything else — an error such as a server without WatchList refusing `sendInitialEvents`
//!   (422), or a "very short watch" — falls back to a list, in the same `ListAndWatch`, logged
//!   at debug level (klog's V(4)).
//!
//! ## List
//!
//! Which resourceVersion a list asks for (`relistResourceVersion`): "0" at first (any recent
//! state, from the watch cache), then the last synced one (a list "not older than" it, also
//! served by the watch cache), or "" (a consistent read) once a list at the last synced one
//! was answered 410 Expired or "too large resource version"
//! (`isLastSyncResourceVersionUnavailable`, cleared by the next successful list). Lists at "0"
//! and "" ask for pages of 500 and fall back to one full list when a continue token expires
//! (client-go's pager); a list at a specific resourceVersion is not paged, so that the watch
//! cache can serve it. A list answered 410 or "too large" is retried at once at "" with the
//! same page size, as upstream's `list` reuses its pager.
//!
//! ## Watch
//!
//! How a watch ends decides what follows (client-go's `watch` loop):
//! - it closed, cleanly or with a broken connection, after a second or after any event:
//!   watch again at once from the last synced resourceVersion;
//! - it could not be opened because the connection was refused, or it was answered 429:
//!   back off, then watch again;
//! - anything else — an ERROR event such as 410 "too old resource version", an open that
//!   failed otherwise, or a "very short watch" (closed within a second without any event) —
//!   ends `ListAndWatch`: back off, then sync again (a watch-list, or a list) from the last
//!   synced resourceVersion. A 410 on a watch does not make the resourceVersion unavailable:
//!   the watch-list's and the list's "not older than" semantics serve it from the watch cache.
//!
//! Failures back off as client-go's backoff manager does: 800 ms doubling to 30 s, each wait
//! stretched by up to 100 % jitter, reset when no backoff happened for 2 minutes; a
//! `Retry-After` from the server is honoured instead. Like upstream's `BackoffUntil`, every
//! new `ListAndWatch` after a failure waits out one backoff step first.
//!
//! Requests that may block (a list, opening a watch) run on short-lived helper threads so that
//! the reflector itself only ever waits in `select!` with its stop channel and ends at once on
//! shutdown; an abandoned helper finishes its request and exits on its own. A reflector on the
//! poller ends when the poller next wakes (the factory wakes it at shutdown).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, select};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, ListableResource, Metadata, NamespaceResourceScope, Resource};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::Informer;
use super::watch_list::InitialEvents;
use crate::apimachinery::json::from_bytes_without_managed_fields;
use crate::client::discovery::ApiResource;
use crate::client::metadata::{MetadataApi, PartialObjectMetadata};
use crate::client::watch::{RawEvent, decode_event_with};
use crate::client::watch_connection::WatchConnection;
use crate::client::watch_poller::{self, WatchHandler};
use crate::client::{Api, Client, Error, ListParams, RawList, Result, WatchEvent, WatchParams};

/// Objects per list page (client-go's pager default).
const PAGE_SIZE: u32 = 500;
/// The shortest server-side watch timeout; each watch asks for a random 1–2× of it.
const MIN_WATCH_TIMEOUT_SECONDS: f64 = 300.0;
/// A watch that ends sooner than this without any event is a failure ("very short watch").
const SHORT_WATCH: Duration = Duration::from_secs(1);
const BACKOFF_INITIAL: Duration = Duration::from_millis(800);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const BACKOFF_RESET: Duration = Duration::from_secs(120);

/// Lists and watches a kind in every namespace (or cluster-wide). Implemented for both
/// `k8s_openapi` scopes; it stands in for the client's own scope bound, which is not nameable
/// outside the client module.
pub trait InformerScope: Sized {
    /// One page of the collection, its items still JSON.
    fn list_page<K>(client: &Client, params: &ListParams) -> Result<RawList>
    where
        K: Resource<Scope = Self> + ListableResource + DeserializeOwned;

    /// Opens a watch of the collection for the watch poller.
    fn open_watch<K>(client: &Client, params: &WatchParams) -> Result<WatchConnection>
    where
        K: Resource<Scope = Self> + DeserializeOwned;
}

impl InformerScope for NamespaceResourceScope {
    fn list_page<K>(client: &Client, params: &ListParams) -> Result<RawList>
    where
        K: Resource<Scope = Self> + ListableResource + DeserializeOwned,
    {
        Api::<K>::all(client).list_raw(params)
    }

    fn open_watch<K>(client: &Client, params: &WatchParams) -> Result<WatchConnection>
    where
        K: Resource<Scope = Self> + DeserializeOwned,
    {
        Api::<K>::all(client).open_polled_watch(params)
    }
}

impl InformerScope for ClusterResourceScope {
    fn list_page<K>(client: &Client, params: &ListParams) -> Result<RawList>
    where
        K: Resource<Scope = Self> + ListableResource + DeserializeOwned,
    {
        Api::<K>::cluster(client).list_raw(params)
    }

    fn open_watch<K>(client: &Client, params: &WatchParams) -> Result<WatchConnection>
    where
        K: Resource<Scope = Self> + DeserializeOwned,
    {
        Api::<K>::cluster(client).open_polled_watch(params)
    }
}

/// What a kind needs to be informed on: every `k8s_openapi` resource that can be listed.
pub trait Informable:
    Resource<Scope: InformerScope> + ListableResource + Metadata<Ty = ObjectMeta> + DeserializeOwned + Send + Sync + 'static
{
}

impl<K> Informable for K where
    K: Resource<Scope: InformerScope>
        + ListableResource
        + Metadata<Ty = ObjectMeta>
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// What an informer caches: any object with `ObjectMeta`, typed or metadata-only.
pub trait Cached: Metadata<Ty = ObjectMeta> + Send + Sync + 'static {}

impl<K: Metadata<Ty = ObjectMeta> + Send + Sync + 'static> Cached for K {}

/// One page of a list. Its objects are decoded one at a time when the list is applied, so
/// that a list of thousands of Pods is never held decoded at once (a decoded Pod is ~17 KiB,
/// its JSON 2–5 KiB, its packed form in the cache a fraction of that).
pub struct Page {
    /// The objects of this page, as JSON.
    pub items: Vec<Box<RawValue>>,
    /// The token of the next page; `None` or empty on the last page.
    pub continue_token: Option<String>,
    /// The list's resourceVersion: the last page's is where the watch starts.
    pub resource_version: Option<String>,
}

impl From<RawList> for Page {
    fn from(list: RawList) -> Page {
        Page {
            items: list.items,
            continue_token: list.metadata.continue_,
            resource_version: list.metadata.resource_version,
        }
    }
}

/// Decodes one listed object.
fn decode_item<K: DeserializeOwned>(item: &RawValue) -> Result<K> {
    from_bytes_without_managed_fields(item.get().as_bytes()).map_err(|e| Error::Decode(format!("listed object: {e}")))
}

/// How a reflector lists and watches its collection (client-go's `ListerWatcher`): typed
/// through [`Api`] for `k8s_openapi` kinds, metadata-only through [`MetadataApi`] for
/// resources discovered at run time.
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// One page of the collection across all namespaces (or cluster-wide).
    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page>;

    /// Decodes one object of a listed page.
    fn decode_item(&self, item: &RawValue) -> Result<K>;

    /// Opens a watch of the collection, to be read by the watch poller.
    fn open_watch(&self, client: &Client, params: &WatchParams) -> Result<WatchConnection>;

    /// Decodes one event of that watch.
    fn decode(&self, event: RawEvent) -> Result<WatchEvent<K>>;

    /// A short lowercase name for threads and logs (`pod`, `replicasets.apps`).
    fn label(&self) -> String;
}

/// Lists and watches a `k8s_openapi` kind.
pub(super) struct Typed<K>(PhantomData<fn() -> K>);

impl<K> Typed<K> {
    pub(super) fn new() -> Self {
        Typed(PhantomData)
    }
}

impl<K: Informable> ListerWatcher<K> for Typed<K> {
    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page> {
        Ok(Page::from(K::Scope::list_page::<K>(client, params)?))
    }

    fn decode_item(&self, item: &RawValue) -> Result<K> {
        decode_item(item)
    }

    fn open_watch(&self, client: &Client, params: &WatchParams) -> Result<WatchConnection> {
        K::Scope::open_watch::<K>(client, params)
    }

    fn decode(&self, event: RawEvent) -> Result<WatchEvent<K>> {
        decode_event_with(event, from_bytes_without_managed_fields::<K>)
    }

    fn label(&self) -> String {
        K::KIND.to_lowercase()
    }
}

/// Lists and watches any resource as metadata only.
pub(super) struct MetadataOnly(pub(super) ApiResource);

impl ListerWatcher<PartialObjectMetadata> for MetadataOnly {
    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page> {
        Ok(Page::from(MetadataApi::new(client, &self.0, None).list_raw(params)?))
    }

    fn decode_item(&self, item: &RawValue) -> Result<PartialObjectMetadata> {
        decode_item(item)
    }

    fn open_watch(&self, client: &Client, params: &WatchParams) -> Result<WatchConnection> {
        MetadataApi::new(client, &self.0, None).open_polled_watch(params)
    }

    fn decode(&self, event: RawEvent) -> Result<WatchEvent<PartialObjectMetadata>> {
        decode_event_with(event, from_bytes_without_managed_fields::<PartialObjectMetadata>)
    }

    fn label(&self) -> String {
        self.0.group_resource()
    }
}

/// What the reflector needs of the informer it feeds: the few operations that depend on the
/// informed kind, on JSON as it comes from the server. Implemented for every [`Informer`], so
/// that the reflector itself (its list, watch and backoff loop) is compiled once rather than
/// once per kind.
pub(super) trait ReflectorTarget: Send + Sync + 'static {
    /// client-go's name for the kind in logs, e.g. `*v1.ConfigMap`.
    fn type_name(&self) -> &str;

    /// The source's short lowercase name for threads and logs (`pod`, `replicasets.apps`).
    fn label(&self) -> String;

    /// How often every cached object is delivered again.
    fn resync_period(&self) -> Option<Duration>;

    /// One page of the collection, from the informer's source.
    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page>;

    /// Opens a watch of the collection, from the informer's source.
    fn open_watch(&self, client: &Client, params: &WatchParams) -> Result<WatchConnection>;

    /// Makes the cache what a list or a watch-list found at `resource_version` (see
    /// [`Informer::replace`]). The objects are decoded one at a time as they are applied; one
    /// that does not decode fails the replace before any deletion is delivered.
    fn replace(&self, objects: Vec<Box<RawValue>>, resource_version: &str) -> Result<()>;

    /// Decodes one watch event and applies it to the cache. Returns the resourceVersion it
    /// moves the last synced one to (already recorded as the informer's), if any; an ERROR
    /// event, or one that does not decode, is an error and changes nothing.
    fn apply_event(&self, event: RawEvent) -> Result<Option<String>>;

    /// Delivers every cached object again.
    fn resync(&self);

    /// How many objects the cache holds.
    fn cached(&self) -> usize;

    /// The informer has its first full list.
    fn mark_synced(&self);

    /// Records the resourceVersion the reflector last synced to.
    fn set_last_sync_resource_version(&self, version: &str);
}

impl<K: Cached> ReflectorTarget for Informer<K> {
    fn type_name(&self) -> &str {
        &self.type_name
    }

    fn label(&self) -> String {
        self.source.label()
    }

    fn resync_period(&self) -> Option<Duration> {
        self.resync
    }

    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page> {
        self.source.list_page(client, params)
    }

    fn open_watch(&self, client: &Client, params: &WatchParams) -> Result<WatchConnection> {
        self.source.open_watch(client, params)
    }

    fn replace(&self, objects: Vec<Box<RawValue>>, resource_version: &str) -> Result<()> {
        let source = &self.source;
        let decoded = objects.into_iter().map(|item| source.decode_item(&item).map(ingest));
        Informer::replace(self, decoded, resource_version)
    }

    fn apply_event(&self, event: RawEvent) -> Result<Option<String>> {
        // The last synced resourceVersion moves before the handlers see the change.
        let advance = |object: &K| {
            let version = object.metadata().resource_version.as_ref().filter(|v| !v.is_empty()).cloned();
            if let Some(version) = &version {
                self.store_last_sync_resource_version(version);
            }
            version
        };
        Ok(match self.source.decode(event)? {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                let version = advance(&object);
                self.upsert(ingest(object));
                version
            }
            WatchEvent::Deleted(object) => {
                let version = advance(&object);
                self.delete(ingest(object));
                version
            }
            WatchEvent::Bookmark { resource_version } if !resource_version.is_empty() => {
                self.bookmark(&resource_version);
                self.store_last_sync_resource_version(&resource_version);
                Some(resource_version)
            }
            WatchEvent::Bookmark { .. } => None,
        })
    }

    fn resync(&self) {
        Informer::resync(self);
    }

    fn cached(&self) -> usize {
        self.store.len()
    }

    fn mark_synced(&self) {
        Informer::mark_synced(self);
    }

    fn set_last_sync_resource_version(&self, version: &str) {
        self.store_last_sync_resource_version(version);
    }
}

/// The reflector was told to stop.
pub(super) struct Stopped;

/// What waiting on a channel gave.
enum Wait<T> {
    Got(T),
    /// The sender is gone.
    Closed,
    TimedOut,
}

/// What follows the end of a watch (client-go's `watch` loop; see the module documentation).
#[derive(Debug)]
enum WatchEnd {
    /// Watch again at once from the last synced resourceVersion.
    Rewatch,
    /// Back off (or wait out the server's `Retry-After`), then watch again.
    RewatchAfterBackoff(Error),
    /// `ListAndWatch` ends: back off, then list again.
    Relist(Error),
}

/// What the reflector does next.
#[derive(Debug)]
enum Next {
    /// client-go's `ListAndWatch` (after backing off for the error, if any): a watch-list when
    /// enabled, else a list followed by a watch.
    ListAndWatch { pause: Option<Error> },
    /// The watch-list again, within the same `ListAndWatch` (`watchList`'s loop), after
    /// backing off for the error, if any.
    WatchList { pause: Option<Error> },
    /// The list that a failed watch-list falls back to, then a watch.
    List,
    /// Watch (after backing off for the error, if any).
    Watch { pause: Option<Error> },
}

impl From<WatchEnd> for Next {
    fn from(end: WatchEnd) -> Next {
        match end {
            WatchEnd::Rewatch => Next::Watch { pause: None },
            WatchEnd::RewatchAfterBackoff(e) => Next::Watch { pause: Some(e) },
            WatchEnd::Relist(e) => Next::ListAndWatch { pause: Some(e) },
        }
    }
}

/// Where a step left the reflector.
enum Step {
    Next(Next),
    /// A watch is open, with its idle timeout; for a watch-list, with the temporary store its
    /// initial events go to.
    Watching(WatchConnection, Duration, Option<Box<InitialEvents>>),
}

/// A reflector while its watch is open: the poller's handler of that watch.
struct Watching {
    reflector: Reflector,
    opened: Instant,
    events: usize,
    /// A watch-list before the bookmark that ends its initial events: where they go.
    initial: Option<Box<InitialEvents>>,
    /// What comes next, when an event ended the watch.
    end: Option<Next>,
}

impl Watching {
    /// `reflector`'s watch, opened just now; `initial`: a watch-list's temporary store.
    fn new(reflector: Reflector, initial: Option<Box<InitialEvents>>) -> Self {
        Watching { reflector, opened: Instant::now(), events: 0, initial, end: None }
    }

    /// One event of a watch-list before the end of its initial events: into the temporary
    /// store; at the end bookmark, the cache is replaced and the watch carries on as an
    /// ordinary one (`handleListWatch`, then `watchWithResync` on the same watcher).
    fn initial_event(&mut self, event: Result<RawEvent>) -> bool {
        let Some(initial) = self.initial.as_mut() else { return true };
        let now = Instant::now();
        match event.and_then(|raw| initial.receive(raw, now)) {
            Ok(false) => true,
            Ok(true) => {
                let Some(initial) = self.initial.take() else { return true };
                if let Err(e) = self.reflector.watch_list_synced(*initial, self.opened.elapsed()) {
                    self.end = Some(self.reflector.watch_list_failed(e));
                    return false;
                }
                // The ordinary watch's own count, as upstream's `watch` starts `handleWatch` anew.
                self.opened = now;
                self.events = 0;
                true
            }
            Err(e) if e.is_transport() => {
                let events = initial.events();
                self.end = Some(self.reflector.watch_list_closed(self.opened.elapsed(), events, Some(e)));
                false
            }
            Err(e) => {
                self.end = Some(self.reflector.watch_list_failed(e));
                false
            }
        }
    }

    /// What follows a watch that ended without an event saying so.
    fn closed(&mut self, error: Option<Error>) -> Next {
        let lasted = self.opened.elapsed();
        match &self.initial {
            Some(initial) => self.reflector.watch_list_closed(lasted, initial.events(), error),
            None => self.reflector.watch_closed(lasted, self.events, error).into(),
        }
    }
}

impl WatchHandler for Watching {
    fn event(&mut self, event: Result<RawEvent>) -> bool {
        if self.initial.is_some() {
            return self.initial_event(event);
        }
        let reflector = &mut self.reflector;
        match event.and_then(|raw| reflector.target.apply_event(raw)) {
            Ok(version) => {
                self.events += 1;
                if let Some(version) = version {
                    reflector.resource_version = version;
                }
                true
            }
            // A broken stream ends the watch as a close does (client-go's `StreamWatcher`
            // treats a probable EOF as the end of the watch).
            Err(e) if e.is_transport() => {
                self.end = Some(reflector.watch_closed(self.opened.elapsed(), self.events, Some(e)).into());
                false
            }
            Err(e) => {
                self.end = Some(reflector.watch_error(e).into());
                false
            }
        }
    }

    fn ended(mut self: Box<Self>, error: Option<Error>) {
        let next = match self.end.take() {
            Some(next) => next,
            None => self.closed(error),
        };
        let reflector = self.reflector;
        let name = format!("informer-{}", reflector.target.label());
        // Fatal, as Go's `newosproc`: an informer that stops would leave its cache stale for good.
        // The binary's panic hook ends the process (`app::limits`).
        if let Err(e) = std::thread::Builder::new().name(name.clone()).spawn(move || reflector.drive(next)) {
            panic!("{name}: cannot start a thread to relist or rewatch: {e}");
        }
    }

    fn next_tick(&self) -> Option<Instant> {
        let warning = self.initial.as_deref().map(InitialEvents::next_warning);
        [self.reflector.resync.as_ref().map(|r| r.next), warning].into_iter().flatten().min()
    }

    fn tick(&mut self, now: Instant) {
        if let Some(initial) = self.initial.as_mut()
            && let Some(warning) = initial.warning(self.reflector.name(), now)
        {
            log::info!("Warning: event bookmark expired: {warning}");
        }
        self.reflector.resync_if_due(now);
    }

    fn stopped(&self) -> bool {
        matches!(self.reflector.stop.try_recv(), Err(TryRecvError::Disconnected))
    }
}

/// One informer's list-and-watch loop; see [`Reflector::run`].
pub(super) struct Reflector {
    /// The informer it feeds, and through it the source it lists and watches.
    target: Arc<dyn ReflectorTarget>,
    client: Client,
    stop: Receiver<()>,
    /// Each `ListAndWatch` syncs with a watch-list first (the `WatchListClient` gate).
    watch_list: bool,
    /// The resourceVersion of the last list, watch-list, event or bookmark
    /// (`lastSyncResourceVersion`).
    resource_version: String,
    /// A list or watch-list at `resource_version` was answered 410 or "too large": the next
    /// one reads the latest state (client-go's `isLastSyncResourceVersionUnavailable`).
    resource_version_unavailable: bool,
    /// The first list, at "0", came back in pages: the server does not serve lists from a
    /// watch cache, so later lists keep paging (client-go's `paginatedResult`).
    paginated_result: bool,
    backoff: Backoff,
    resync: Option<Resync>,
    /// Never sent on: dropped with the reflector, which tells the factory it has ended.
    _running: Sender<()>,
}

impl Reflector {
    /// A reflector of `target` that runs until `stop` disconnects; `running` disconnects when
    /// it ends. `watch_list`: sync with a watch-list first (see the module documentation).
    pub(super) fn new(
        target: Arc<dyn ReflectorTarget>,
        client: Client,
        watch_list: bool,
        stop: Receiver<()>,
        running: Sender<()>,
    ) -> Self {
        let resync = target.resync_period().map(Resync::new);
        Reflector {
            target,
            client,
            stop,
            watch_list,
            resource_version: String::new(),
            resource_version_unavailable: false,
            paginated_result: false,
            backoff: Backoff::default(),
            resync,
            _running: running,
        }
    }

    /// Starts the reflector of `target` on its own thread; the receiver disconnects once it
    /// has ended.
    pub(super) fn spawn(
        target: Arc<dyn ReflectorTarget>,
        client: Client,
        watch_list: bool,
        stop: Receiver<()>,
    ) -> std::io::Result<Receiver<()>> {
        let name = format!("informer-{}", target.label());
        let (running, ended) = crossbeam_channel::bounded(0);
        let reflector = Reflector::new(target, client, watch_list, stop, running);
        std::thread::Builder::new().name(name).spawn(move || reflector.run())?;
        Ok(ended)
    }

    /// Lists and watches until the stop channel closes: client-go's `Run`, a
    /// `BackoffUntil(ListAndWatch)` that backs off after each return. Runs on a short-lived
    /// thread until a watch is open, which then goes to the watch poller with the reflector
    /// as its handler; when the watch ends, a new thread takes over from there.
    pub(super) fn run(self) {
        let resync = self.target.resync_period().map_or("no resync".to_string(), |p| format!("resync every {p:?}"));
        log::debug!("Starting reflector {} ({resync})", self.name());
        self.drive(Next::ListAndWatch { pause: None });
    }

    fn name(&self) -> &str {
        self.target.type_name()
    }

    /// Steps until a watch is open (handed to the poller) or the reflector is stopped.
    fn drive(mut self, mut next: Next) {
        loop {
            match self.step(next) {
                Ok(Step::Next(step)) => next = step,
                Ok(Step::Watching(connection, idle_timeout, initial)) => {
                    let handler = Watching::new(self, initial);
                    watch_poller::register(connection, idle_timeout, Box::new(handler));
                    return;
                }
                Err(Stopped) => {
                    log::debug!("Stopping reflector {}", self.name());
                    return;
                }
            }
        }
    }

    /// One step of client-go's loop: a (backed-off) watch-list, or list followed by opening
    /// a watch, or a (backed-off) re-watch.
    fn step(&mut self, next: Next) -> Result<Step, Stopped> {
        match next {
            Next::ListAndWatch { pause } => {
                if let Some(why) = pause {
                    self.pause(Some(&why))?;
                }
                if self.watch_list {
                    return self.open_watch_list();
                }
                self.list_then_watch()
            }
            Next::WatchList { pause } => {
                if let Some(why) = pause {
                    self.pause(Some(&why))?;
                }
                self.open_watch_list()
            }
            Next::List => self.list_then_watch(),
            Next::Watch { pause } => {
                if let Some(why) = pause {
                    self.pause(Some(&why))?;
                }
                self.open_watch()
            }
        }
    }

    /// The list of `ListAndWatch` (or its fallback from a watch-list), then a watch.
    fn list_then_watch(&mut self) -> Result<Step, Stopped> {
        if let Err(e) = self.list()? {
            log::info!("Failed to watch {0}: failed to list {0}: {e}", self.name());
            return Ok(Step::Next(Next::ListAndWatch { pause: Some(e) }));
        }
        self.open_watch()
    }

    /// Lists the kind and delivers the difference against the cache (client-go's `list`).
    fn list(&mut self) -> Result<Result<()>, Stopped> {
        let from = self.list_resource_version();
        let page_size = self.page_size(&from);
        log::debug!("Listing and watching {} from resourceVersion {from:?}", self.name());
        let client = self.client.clone();
        let target = self.target.clone();
        let thread = format!("list-{}", target.label());
        let answer = background(thread, move || list_with_fallback(target.as_ref(), &client, &from, page_size));
        let listed = match self.wait(&answer, None)? {
            Wait::Got(listed) => listed,
            Wait::Closed | Wait::TimedOut => return Ok(Err(Error::Transport("the list thread gave no answer".into()))),
        };
        self.resource_version_unavailable |= listed.resource_version_unavailable;
        let (objects, resource_version) = match listed.result {
            Ok(listed) => listed,
            Err(e) => return Ok(Err(e)),
        };
        log::debug!("{}: listed {} objects at resourceVersion {resource_version}", self.name(), objects.len());
        if listed.requested == "0" && listed.paginated {
            self.paginated_result = true;
        }
        self.resource_version_unavailable = false;
        if let Err(e) = self.sync_with(objects, resource_version) {
            return Ok(Err(e));
        }
        Ok(Ok(()))
    }

    /// Makes the cache what a list or a watch-list found at `resource_version` and marks the
    /// informer synced (`syncWith`, `setLastSyncResourceVersion`). The objects are decoded
    /// one at a time as they are applied; one that does not decode fails the sync before any
    /// deletion is delivered.
    fn sync_with(&mut self, objects: Vec<Box<RawValue>>, resource_version: String) -> Result<()> {
        self.target.replace(objects, &resource_version)?;
        self.set_resource_version(resource_version);
        self.target.mark_synced();
        log::debug!("Caches populated for {}", self.name());
        Ok(())
    }

    /// client-go's `relistResourceVersion`: "0" (any recent state) at first, "" (the latest,
    /// a consistent read) when the last synced one is unavailable, else the last synced one.
    fn list_resource_version(&self) -> String {
        match (self.resource_version_unavailable, self.resource_version.is_empty()) {
            (true, _) => String::new(),
            (false, true) => "0".into(),
            (false, false) => self.resource_version.clone(),
        }
    }

    /// client-go's `rewatchResourceVersion`, where a watch-list starts: the last synced
    /// resourceVersion ("" at first), or "" (the latest) when that one is unavailable.
    fn watch_list_resource_version(&self) -> String {
        if self.resource_version_unavailable { String::new() } else { self.resource_version.clone() }
    }

    /// The pager's page size for a list from `from`: `None` (no limit) at a specific
    /// resourceVersion unless an earlier list proved that the server pages anyway.
    fn page_size(&self, from: &str) -> Option<u32> {
        let specific = !from.is_empty() && from != "0";
        (self.paginated_result || !specific).then_some(PAGE_SIZE)
    }

    fn set_resource_version(&mut self, version: String) {
        self.target.set_last_sync_resource_version(&version);
        self.resource_version = version;
    }

    /// Opens one watch from the last synced resourceVersion; its events are applied as the
    /// poller reads them.
    fn open_watch(&mut self) -> Result<Step, Stopped> {
        let params = WatchParams {
            resource_version: Some(self.resource_version.clone()),
            allow_bookmarks: true,
            timeout_seconds: Some(watch_timeout_seconds()),
            // Bookmarks keep a live watch from going silent that long (see WATCH_IDLE_TIMEOUT).
            idle_timeout: Some(self.client.watch_idle_timeout()),
            ..WatchParams::default()
        };
        log::debug!("{}: watching from resourceVersion {}", self.name(), self.resource_version);
        let end = match self.open(params)? {
            Ok((connection, idle_timeout)) => return Ok(Step::Watching(connection, idle_timeout, None)),
            Err(e) => self.open_failed(e),
        };
        Ok(Step::Next(end.into()))
    }

    /// Opens a watch-list (`watchList`): a watch that first sends the current state, at least
    /// as new as the last synced resourceVersion, ended by a bookmark. Its initial events go
    /// to a temporary store until then (see [`Watching`]).
    fn open_watch_list(&mut self) -> Result<Step, Stopped> {
        let from = self.watch_list_resource_version();
        log::debug!("Listing and watching {} with a watch-list from resourceVersion {from:?}", self.name());
        let params = WatchParams {
            resource_version: (!from.is_empty()).then_some(from),
            resource_version_match: Some("NotOlderThan".into()),
            send_initial_events: Some(true),
            allow_bookmarks: true,
            timeout_seconds: Some(watch_timeout_seconds()),
            idle_timeout: Some(self.client.watch_idle_timeout()),
            ..WatchParams::default()
        };
        Ok(match self.open(params)? {
            Ok((connection, idle_timeout)) => {
                Step::Watching(connection, idle_timeout, Some(Box::new(InitialEvents::new(Instant::now()))))
            }
            Err(e) => Step::Next(self.watch_list_failed(e)),
        })
    }

    /// Opens a watch on a helper thread; with the idle timeout its poller applies.
    fn open(&mut self, params: WatchParams) -> Result<Result<(WatchConnection, Duration)>, Stopped> {
        let client = self.client.clone();
        let target = self.target.clone();
        let thread = format!("watch-open-{}", target.label());
        let idle_timeout = params.idle_timeout();
        let opening = background(thread, move || target.open_watch(&client, &params));
        Ok(match self.wait(&opening, None)? {
            Wait::Got(opened) => opened.map(|connection| (connection, idle_timeout)),
            Wait::Closed | Wait::TimedOut => Err(Error::Transport("the watch thread gave no answer".into())),
        })
    }

    /// The watch request failed: back off and watch again if the server was unreachable or
    /// throttling (`isWatchErrorRetriable`), else relist.
    fn open_failed(&self, e: Error) -> WatchEnd {
        if is_watch_error_retriable(&e) {
            log::debug!("{}: watch returned {e} - backing off", self.name());
            return WatchEnd::RewatchAfterBackoff(e);
        }
        log::info!("Failed to watch {}: {e}", self.name());
        WatchEnd::Relist(e)
    }

    /// A watch-list failed before the end of its initial events (`watchList`'s
    /// `isErrorRetriableWithSideEffectsFn`, then `ListAndWatch`): back off and try again if
    /// the server was unreachable or throttling; try again at once from the latest state if
    /// the resourceVersion is gone or too large; else fall back to a list.
    fn watch_list_failed(&mut self, e: Error) -> Next {
        if is_watch_error_retriable(&e) {
            log::info!("{}: watch-list failed - backing off: {e}", self.name());
            return Next::WatchList { pause: Some(e) };
        }
        if e.is_gone() || is_too_large_resource_version(&e) {
            log::debug!("{}: watch-list at resourceVersion {:?} failed: {e}", self.name(), self.resource_version);
            self.resource_version_unavailable = true;
            return Next::WatchList { pause: None };
        }
        log::debug!(
            "{}: Data couldn't be fetched in watchlist mode. Falling back to regular list. This is expected if watchlist is not supported or disabled in kube-apiserver. err: {e}",
            self.name()
        );
        Next::List
    }

    /// A watch-list closed before the end of its initial events (`handleAnyWatch` returning
    /// without the bookmark): a very short watch is an error, which falls back to a list;
    /// otherwise the watch-list is tried again at once.
    fn watch_list_closed(&mut self, lasted: Duration, events: usize, error: Option<Error>) -> Next {
        let why = error.map(|e| format!(" ({e})")).unwrap_or_default();
        if events == 0 && lasted < SHORT_WATCH {
            return self.watch_list_failed(self.very_short_watch(&why));
        }
        log::debug!(
            "{}: watch-list closed after {events} events, before the end of its initial events{why}",
            self.name()
        );
        Next::WatchList { pause: None }
    }

    /// The end bookmark came: the cache becomes the temporary store's objects at its
    /// resourceVersion, and the informer is synced (the end of `watchList`).
    fn watch_list_synced(&mut self, initial: InitialEvents, lasted: Duration) -> Result<()> {
        log::debug!(
            "{}: Exiting watch because received the bookmark that marks the end of initial events stream, totalItems {}, duration {lasted:?}",
            self.name(),
            initial.events()
        );
        log::debug!("{}: watch-list streamed {} objects", self.name(), initial.len());
        self.resource_version_unavailable = false;
        let (objects, resource_version) = initial.into_parts();
        self.sync_with(objects, resource_version)
    }

    /// The watch delivered an ERROR event (or one that could not be decoded): back off and
    /// watch again after a 429, else relist.
    fn watch_error(&self, e: Error) -> WatchEnd {
        if e.is_too_many_requests() {
            log::debug!("{}: watch returned 429 - backing off", self.name());
            return WatchEnd::RewatchAfterBackoff(e);
        }
        if e.is_gone() {
            // The list at the last synced resourceVersion is "not older than" it: it does not
            // need the compacted history, so the resourceVersion is not marked unavailable.
            log::debug!("{}: watch closed with: {e}", self.name());
        } else {
            log::info!("{}: watch ended with: {e}", self.name());
        }
        WatchEnd::Relist(e)
    }

    fn watch_closed(&self, lasted: Duration, events: usize, error: Option<Error>) -> WatchEnd {
        let why = error.map(|e| format!(" ({e})")).unwrap_or_default();
        if events == 0 && lasted < SHORT_WATCH {
            let error = self.very_short_watch(&why);
            log::info!("{}: watch ended with: {error}", self.name());
            return WatchEnd::Relist(error);
        }
        log::debug!("{}: watch closed after {events} events{why}", self.name());
        WatchEnd::Rewatch
    }

    /// client-go's `VeryShortWatchError`.
    fn very_short_watch(&self, why: &str) -> Error {
        Error::Transport(format!(
            "very short watch: {}: Unexpected watch close - watch lasted less than a second and no items received{why}",
            self.name()
        ))
    }

    /// Delivers every cached object again when the resync period is up.
    fn resync_if_due(&mut self, now: Instant) {
        if self.resync.as_mut().is_some_and(|r| r.due(now)) {
            log::debug!("{}: resyncing {} objects", self.name(), self.target.cached());
            self.target.resync();
        }
    }

    /// Waits out a `Retry-After` the error carries, or the next backoff step.
    fn pause(&mut self, error: Option<&Error>) -> Result<(), Stopped> {
        let delay = match error.and_then(Error::retry_after) {
            Some(wait) => wait,
            None => self.backoff.next_delay(),
        };
        log::debug!("{}: retrying in {delay:?}", self.name());
        self.sleep(delay)
    }

    fn sleep(&mut self, duration: Duration) -> Result<(), Stopped> {
        self.wait(&crossbeam_channel::never::<()>(), Some(Instant::now() + duration)).map(|_| ())
    }

    /// Waits for a message on `channel` until `deadline`, running resyncs as they fall due.
    /// Returns `Err(Stopped)` as soon as the stop channel closes.
    fn wait<T>(&mut self, channel: &Receiver<T>, deadline: Option<Instant>) -> Result<Wait<T>, Stopped> {
        loop {
            if let Err(TryRecvError::Disconnected) = self.stop.try_recv() {
                return Err(Stopped);
            }
            let wake = [deadline, self.resync.as_ref().map(|r| r.next)].into_iter().flatten().min();
            let timer = wake.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
            select! {
                recv(self.stop) -> _ => return Err(Stopped),
                recv(channel) -> message => return Ok(message.map_or(Wait::Closed, Wait::Got)),
                recv(timer) -> _ => {
                    let now = Instant::now();
                    self.resync_if_due(now);
                    if deadline.is_some_and(|d| now >= d) {
                        return Ok(Wait::TimedOut);
                    }
                }
            }
        }
    }
}

impl<K> Informer<K> {
    /// The resourceVersion the informer's reflector last synced to, from a list, an event or
    /// a bookmark; empty before the first list (client-go's `LastSyncResourceVersion`).
    pub fn last_sync_resource_version(&self) -> String {
        self.last_sync_resource_version.lock().clone()
    }

    fn store_last_sync_resource_version(&self, version: &str) {
        version.clone_into(&mut self.last_sync_resource_version.lock());
    }
}

/// What one list gave.
struct Listed {
    /// The resourceVersion first asked for.
    requested: String,
    /// The objects, as JSON, and the list's resourceVersion.
    result: Result<(Vec<Box<RawValue>>, String)>,
    /// Whether any answer came in more than one page.
    paginated: bool,
    /// The list at `requested` was answered 410 or "too large", so it was retried at "".
    resource_version_unavailable: bool,
}

/// The requests of client-go's `Reflector.list`: a list from `from` with the pager; if that
/// is answered 410 Expired or "too large resource version", at once a list of the latest
/// state ("") with the same pager (so with the same page size).
fn list_with_fallback(source: &dyn ReflectorTarget, client: &Client, from: &str, page_size: Option<u32>) -> Listed {
    let mut paginated = false;
    let result = list_pages(source, client, from, page_size, &mut paginated);
    match result {
        Err(e) if e.is_gone() || is_too_large_resource_version(&e) => {
            log::debug!("{}: list at resourceVersion {from:?} failed: {e}; listing the latest", source.label());
            let result = list_pages(source, client, "", page_size, &mut paginated);
            Listed { requested: from.to_string(), result, paginated, resource_version_unavailable: true }
        }
        result => Listed { requested: from.to_string(), result, paginated, resource_version_unavailable: false },
    }
}

/// Lists the whole collection as client-go's pager does: pages of `page_size` (`None`: one
/// request without a limit). If a continue token expires between pages, lists everything at
/// once at the requested resourceVersion. The objects stay JSON until they are applied.
/// `paginated` is set when an answer carried a continue token.
fn list_pages(
    source: &dyn ReflectorTarget,
    client: &Client,
    from: &str,
    page_size: Option<u32>,
    paginated: &mut bool,
) -> Result<(Vec<Box<RawValue>>, String)> {
    let first = ListParams {
        limit: page_size,
        resource_version: (!from.is_empty()).then(|| from.to_string()),
        ..ListParams::default()
    };
    let mut params = first.clone();
    let mut objects = Vec::new();
    loop {
        let page = match source.list_page(client, &params) {
            Ok(page) => page,
            Err(e) if e.is_gone() && params.continue_token.is_some() => {
                log::info!("{}: continue token expired while paging; listing everything at once", source.label());
                objects.clear();
                params = ListParams { limit: None, ..first.clone() };
                continue;
            }
            Err(e) => return Err(e),
        };
        objects.extend(page.items);
        match page.continue_token.filter(|c| !c.is_empty()) {
            Some(token) => {
                // Later pages are read at the first page's revision, which the token carries.
                *paginated = true;
                params.continue_token = Some(token);
                params.resource_version = None;
            }
            None => {
                let version = page.resource_version.filter(|v| !v.is_empty());
                let version =
                    version.ok_or_else(|| Error::Decode(format!("{} list without resourceVersion", source.label())))?;
                return Ok((objects, version));
            }
        }
    }
}

/// client-go's `isTooLargeResourceVersionError`: the server has not caught up with the
/// requested resourceVersion (504 with the `ResourceVersionTooLarge` cause, or the older
/// servers' message).
fn is_too_large_resource_version(e: &Error) -> bool {
    e.has_status_cause("ResourceVersionTooLarge")
        || (e.is_server_timeout() && e.message().contains("Too large resource version"))
}

/// apimachinery's `IsConnectionRefused`, on the transport error's text.
fn is_connection_refused(e: &Error) -> bool {
    e.is_transport() && e.to_string().to_lowercase().contains("connection refused")
}

/// client-go's `isWatchErrorRetriable`: the server is unreachable (the connection was
/// refused) or throttling (429), so the same watch is worth another try after a backoff.
fn is_watch_error_retriable(e: &Error) -> bool {
    is_connection_refused(e) || e.is_too_many_requests()
}

/// Drops what the cache does not need (`metadata.managedFields`, often most of an object).
pub(super) fn ingest<K: Metadata<Ty = ObjectMeta>>(mut object: K) -> K {
    object.metadata_mut().managed_fields = None;
    object
}

/// A random 5–10 minutes, as client-go's `minWatchTimeout * (1 + rand)`.
fn watch_timeout_seconds() -> u32 {
    (MIN_WATCH_TIMEOUT_SECONDS * (1.0 + crate::random::unit())) as u32
}

/// Runs `work` on a new thread and hands its result over the returned channel; the channel
/// closes without a message if the thread cannot start or panics. Dropping the receiver
/// abandons the work: its result is dropped when it arrives.
fn background<T: Send + 'static>(name: String, work: impl FnOnce() -> T + Send + 'static) -> Receiver<T> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new().name(name.clone()).spawn(move || {
        let _ = tx.send(work());
    });
    if let Err(e) = spawned {
        log::info!("cannot start thread {name}: {e}");
    }
    rx
}

/// client-go's exponential backoff manager with its reflector settings.
#[derive(Debug)]
struct Backoff {
    step: Duration,
    last: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { step: BACKOFF_INITIAL, last: None }
    }
}

impl Backoff {
    /// The next wait: the current step plus up to 100 % jitter. The step doubles up to 30 s
    /// and starts over at 800 ms when the previous wait began more than 2 minutes ago.
    fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) > BACKOFF_RESET) {
            self.step = BACKOFF_INITIAL;
        }
        self.last = Some(now);
        let step = self.step;
        self.step = (step * 2).min(BACKOFF_MAX);
        step + step.mul_f64(crate::random::unit())
    }
}

/// When the next periodic resync is due.
#[derive(Debug)]
struct Resync {
    period: Duration,
    next: Instant,
}

impl Resync {
    fn new(period: Duration) -> Self {
        Resync { period, next: Instant::now() + period }
    }

    /// Whether a resync is due at `now`; if so, schedules the next one.
    fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + self.period;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ApiError;
    use crate::client::watch::decode_event;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Status, StatusCause, StatusDetails};
    use parking_lot::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    fn config_map(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                resource_version: Some(version.into()),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("kubectl".into()),
                    operation: Some("Apply".into()),
                    ..ManagedFieldsEntry::default()
                }]),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn api_error(code: u16, reason: &str, message: &str, cause: Option<&str>) -> Error {
        let details = cause.map(|c| StatusDetails {
            causes: Some(vec![StatusCause { reason: Some(c.into()), ..StatusCause::default() }]),
            ..StatusDetails::default()
        });
        let status = Status {
            code: Some(code.into()),
            reason: Some(reason.into()),
            message: Some(message.into()),
            details,
            ..Status::default()
        };
        ApiError::from_status(status, code, None).into()
    }

    fn expired() -> Error {
        api_error(410, "Expired", "too old resource version: 5 (9)", None)
    }

    /// One list request as the fake saw it.
    #[derive(Debug, Clone, PartialEq)]
    struct Request {
        resource_version: Option<String>,
        limit: Option<u32>,
        continued: bool,
    }

    /// A fake `ListerWatcher` with `objects` objects named `cm-0000`… at revision 100. It pages
    /// as etcd does (continue tokens carry the last key), and `failures` are answered to the
    /// next requests, in order, instead of serving them (`None`: serve that one). Watches are
    /// never opened: each is answered the next of `watch_failures`, or a transport error.
    #[derive(Default)]
    struct FakeLister {
        objects: AtomicUsize,
        /// Each page ends with an object that does not decode.
        garbage: AtomicBool,
        failures: Mutex<Vec<Option<Error>>>,
        requests: Mutex<Vec<Request>>,
        watch_failures: Mutex<Vec<Error>>,
        /// The query of each watch asked for.
        watches: Mutex<Vec<String>>,
    }

    impl FakeLister {
        fn with(objects: usize, failures: Vec<Option<Error>>) -> Self {
            FakeLister { objects: AtomicUsize::new(objects), failures: Mutex::new(failures), ..FakeLister::default() }
        }

        fn requests(&self) -> Vec<Request> {
            self.requests.lock().clone()
        }
    }

    impl ListerWatcher<ConfigMap> for FakeLister {
        fn list_page(&self, _: &Client, params: &ListParams) -> Result<Page> {
            self.requests.lock().push(Request {
                resource_version: params.resource_version.clone(),
                limit: params.limit,
                continued: params.continue_token.is_some(),
            });
            let mut failures = self.failures.lock();
            if !failures.is_empty()
                && let Some(e) = failures.remove(0)
            {
                return Err(e);
            }
            let start: usize = params.continue_token.as_deref().map_or(0, |t| t.parse().expect("a numeric token"));
            let objects = self.objects.load(Ordering::Relaxed);
            let end = params.limit.map_or(objects, |l| (start + l as usize).min(objects));
            Ok(Page {
                items: (start..end)
                    .map(|i| serde_json::value::to_raw_value(&config_map(&format!("cm-{i:04}"), "100")).unwrap())
                    .chain(
                        self.garbage
                            .load(Ordering::Relaxed)
                            .then(|| RawValue::from_string("{\"metadata\": 7}".into()).unwrap()),
                    )
                    .collect(),
                continue_token: (end < objects).then(|| end.to_string()),
                resource_version: Some("100".into()),
            })
        }

        fn decode_item(&self, item: &RawValue) -> Result<ConfigMap> {
            decode_item(item)
        }

        fn open_watch(&self, _: &Client, params: &WatchParams) -> Result<WatchConnection> {
            self.watches.lock().push(params.query());
            let mut failures = self.watch_failures.lock();
            Err(if failures.is_empty() {
                Error::Transport("the fake does not watch".into())
            } else {
                failures.remove(0)
            })
        }

        fn decode(&self, event: RawEvent) -> Result<WatchEvent<ConfigMap>> {
            decode_event(event)
        }

        fn label(&self) -> String {
            "configmap".into()
        }
    }

    fn request(resource_version: Option<&str>, limit: Option<u32>, continued: bool) -> Request {
        Request { resource_version: resource_version.map(str::to_string), limit, continued }
    }

    /// A reflector over `fake` that syncs with watch-lists, with the informer it feeds and the
    /// stop channel's sender to keep it running.
    fn reflector(fake: Arc<FakeLister>) -> (Reflector, Arc<Informer<ConfigMap>>, crossbeam_channel::Sender<()>) {
        let informer = Arc::new(Informer::with_source(None, fake));
        let (stop_tx, stop) = crossbeam_channel::bounded(0);
        let reflector = Reflector::new(
            informer.clone(),
            crate::client::unreachable_client(),
            true,
            stop,
            crossbeam_channel::bounded(0).0,
        );
        (reflector, informer, stop_tx)
    }

    /// An informer over `fake`, as the pager sees it.
    fn target(fake: &Arc<FakeLister>) -> Informer<ConfigMap> {
        Informer::with_source(None, fake.clone())
    }

    #[test]
    fn ingest_drops_managed_fields() {
        let object = config_map("a", "1");
        assert!(object.metadata.managed_fields.is_some());
        let kept = ingest(object);
        assert_eq!(kept.metadata.managed_fields, None);
        assert_eq!(kept.metadata.name.as_deref(), Some("a"), "the rest is kept");
    }

    #[test]
    fn lists_in_pages_of_500_following_continue_tokens() {
        let fake = Arc::new(FakeLister::with(1200, vec![]));
        let mut paginated = false;
        let (objects, version) =
            list_pages(&target(&fake), &crate::client::unreachable_client(), "", Some(PAGE_SIZE), &mut paginated)
                .expect("a list");
        assert_eq!(version, "100");
        assert_eq!(objects.len(), 1200);
        let mut names: Vec<_> = objects.iter().filter_map(|o| fake.decode_item(o).unwrap().metadata.name).collect();
        names.dedup();
        assert_eq!(names.len(), 1200, "no object twice");
        assert!(paginated);
        assert_eq!(
            fake.requests(),
            [request(None, Some(500), false), request(None, Some(500), true), request(None, Some(500), true)]
        );
    }

    #[test]
    fn an_expired_continue_token_falls_back_to_one_full_list() {
        // The second page's token has expired (etcd compacted its revision meanwhile).
        let fake = Arc::new(FakeLister::with(1200, vec![None, Some(expired())]));
        let mut paginated = false;
        let (objects, _) =
            list_pages(&target(&fake), &crate::client::unreachable_client(), "0", Some(PAGE_SIZE), &mut paginated)
                .expect("a list");
        assert_eq!(objects.len(), 1200, "the first page is not kept twice");
        assert_eq!(
            fake.requests(),
            [
                request(Some("0"), Some(500), false),
                request(None, Some(500), true),
                // The full list, at the resourceVersion first asked for.
                request(Some("0"), None, false),
            ]
        );
        // An expired first page is the caller's problem: the pager does not retry it.
        let fake = Arc::new(FakeLister::with(10, vec![Some(expired())]));
        let listed = list_pages(&target(&fake), &crate::client::unreachable_client(), "7", None, &mut paginated);
        assert!(listed.is_err_and(|e| e.is_gone()));
        assert_eq!(fake.requests().len(), 1);
    }

    #[test]
    fn a_list_at_the_last_synced_version_is_not_paged_and_falls_back_to_the_latest() {
        let fake = Arc::new(FakeLister::with(600, vec![]));
        let (mut reflector, informer, _stop) = reflector(fake.clone());
        // The first list: at "0", paged (the watch cache ignores the limit; the fake does not).
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        assert_eq!(fake.requests()[0], request(Some("0"), Some(500), false));
        assert_eq!(informer.store().len(), 600);
        assert_eq!(informer.last_sync_resource_version(), "100");
        let cached = informer.store().list();
        assert!(cached.iter().all(|o| o.metadata.managed_fields.is_none()), "managedFields dropped on ingest");

        // A paginated answer at "0": the server does not serve from a watch cache, keep paging.
        assert!(reflector.paginated_result);
        reflector.paginated_result = false;

        // After a watch ended with 410: a list at the last synced version, without a limit.
        let end = reflector.watch_error(expired());
        assert!(matches!(end, WatchEnd::Relist(_)), "{end:?}");
        assert!(!reflector.resource_version_unavailable, "a watch 410 leaves the version available");
        fake.requests.lock().clear();
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        assert_eq!(fake.requests(), [request(Some("100"), None, false)]);

        // That list answered 410: retried at once at "" with the same (no) page size.
        fake.requests.lock().clear();
        *fake.failures.lock() = vec![Some(expired())];
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        assert_eq!(fake.requests(), [request(Some("100"), None, false), request(None, None, false)]);
        assert!(!reflector.resource_version_unavailable, "cleared by the successful list");

        // "Too large resource version" is handled the same way; if the retry fails too, the
        // next list is a consistent one, paged by 500.
        let too_large =
            api_error(504, "Timeout", "Too large resource version: 200, current: 100", Some("ResourceVersionTooLarge"));
        let internal = api_error(500, "InternalError", "etcd is sad", None);
        fake.requests.lock().clear();
        *fake.failures.lock() = vec![Some(too_large), Some(internal)];
        assert!(matches!(reflector.list(), Ok(Err(e)) if e.is_internal_error()));
        assert!(reflector.resource_version_unavailable);
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        assert_eq!(
            fake.requests(),
            [
                request(Some("100"), None, false),
                request(None, None, false),
                request(None, Some(500), false),
                request(None, Some(500), true),
            ]
        );
        assert!(!reflector.resource_version_unavailable);
    }

    #[test]
    fn a_list_with_an_object_that_does_not_decode_fails_before_any_deletion() {
        let fake = Arc::new(FakeLister::with(3, vec![]));
        let (mut reflector, informer, _stop) = reflector(fake.clone());
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        // The next list has one object left, then one that does not decode.
        fake.objects.store(1, Ordering::Relaxed);
        fake.garbage.store(true, Ordering::Relaxed);
        assert!(matches!(reflector.list(), Ok(Err(Error::Decode(_)))));
        assert_eq!(informer.store().len(), 3, "nothing deleted on the strength of a list cut short");
        assert_eq!(informer.last_sync_resource_version(), "100", "from the list before");
    }

    #[test]
    fn bookmarks_and_events_move_the_last_synced_version() {
        let fake = Arc::new(FakeLister::with(1, vec![]));
        let (mut reflector, informer, _stop) = reflector(fake);
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        let mut watching = Watching::new(reflector, None);
        let modified = serde_json::to_value(config_map("cm-0000", "120")).unwrap();
        assert!(watching.event(Ok(raw("MODIFIED", modified))));
        assert_eq!(watching.reflector.list_resource_version(), "120");
        assert_eq!(informer.last_sync_resource_version(), "120");
        assert!(watching.event(Ok(raw("BOOKMARK", serde_json::json!({"metadata": {"resourceVersion": "150"}})))));
        assert_eq!(watching.reflector.list_resource_version(), "150");
        assert_eq!(informer.last_sync_resource_version(), "150");
        assert_eq!(watching.events, 2);
        let cached = informer.store().get("default/cm-0000").expect("cached");
        assert_eq!(cached.metadata.resource_version.as_deref(), Some("120"));
        assert!(cached.metadata.managed_fields.is_none(), "managedFields dropped from watch events too");
    }

    #[test]
    fn how_a_watch_ends_decides_between_rewatch_and_relist() {
        let (reflector, _informer, _stop) = reflector(Arc::new(FakeLister::default()));
        let second = Duration::from_secs(1);
        let broken = || Some(Error::Transport("watch stream broken: connection reset".into()));
        assert!(matches!(reflector.watch_closed(second * 300, 0, None), WatchEnd::Rewatch));
        assert!(matches!(reflector.watch_closed(Duration::ZERO, 1, broken()), WatchEnd::Rewatch));
        assert!(matches!(reflector.watch_closed(second * 2, 0, broken()), WatchEnd::Rewatch));
        assert!(matches!(reflector.watch_closed(Duration::from_millis(10), 0, None), WatchEnd::Relist(_)));

        let throttled = api_error(429, "TooManyRequests", "slow down", None);
        assert!(matches!(reflector.watch_error(throttled), WatchEnd::RewatchAfterBackoff(_)));
        assert!(matches!(reflector.watch_error(expired()), WatchEnd::Relist(_)));
        let internal = api_error(500, "InternalError", "unable to decode an event from the watch stream", None);
        assert!(matches!(reflector.watch_error(internal), WatchEnd::Relist(_)));

        let refused = Error::Transport("GET https://127.0.0.1:1/api: io: Connection refused (os error 111)".into());
        assert!(matches!(reflector.open_failed(refused), WatchEnd::RewatchAfterBackoff(_)));
        let throttled = api_error(429, "TooManyRequests", "slow down", None);
        assert!(matches!(reflector.open_failed(throttled), WatchEnd::RewatchAfterBackoff(_)));
        let reset = Error::Transport("GET https://127.0.0.1:1/api: io: Connection reset by peer".into());
        assert!(matches!(reflector.open_failed(reset), WatchEnd::Relist(_)));
        let forbidden = api_error(403, "Forbidden", "no", None);
        assert!(matches!(reflector.open_failed(forbidden), WatchEnd::Relist(_)));
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_the_cap() {
        let mut backoff = Backoff::default();
        let mut step = BACKOFF_INITIAL;
        for _ in 0..10 {
            let delay = backoff.next_delay();
            assert!(delay >= step && delay < step * 2, "{delay:?} for step {step:?}");
            step = (step * 2).min(BACKOFF_MAX);
        }
        // Quiet for longer than the reset period: back to the first step.
        if let Some(long_ago) = Instant::now().checked_sub(BACKOFF_RESET + Duration::from_secs(1)) {
            backoff.last = Some(long_ago);
            assert!(backoff.next_delay() < BACKOFF_INITIAL * 2);
        }
    }

    #[test]
    fn watch_timeouts_are_five_to_ten_minutes() {
        for _ in 0..100 {
            assert!((300..600).contains(&watch_timeout_seconds()));
        }
    }

    fn raw(event_type: &str, object: serde_json::Value) -> RawEvent {
        RawEvent { event_type: event_type.into(), object: serde_json::value::to_raw_value(&object).unwrap() }
    }

    fn cm_json(name: &str, version: &str) -> serde_json::Value {
        serde_json::json!({"metadata": {"namespace": "default", "name": name, "resourceVersion": version}})
    }

    fn end_bookmark(version: &str) -> RawEvent {
        let annotations = serde_json::json!({"k8s.io/initial-events-end": "true"});
        raw("BOOKMARK", serde_json::json!({"metadata": {"resourceVersion": version, "annotations": annotations}}))
    }

    /// A watch-list in progress over `reflector`, opened long enough ago not to be "very short".
    fn watch_listing(reflector: Reflector) -> Watching {
        let mut watching = Watching::new(reflector, Some(Box::new(InitialEvents::new(Instant::now()))));
        watching.opened = Instant::now().checked_sub(Duration::from_secs(5)).unwrap_or(watching.opened);
        watching
    }

    /// Events as `kind key@version`.
    fn recorded(informer: &Informer<ConfigMap>) -> Arc<Mutex<Vec<String>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        informer.add_handler(move |event: &super::super::Event<ConfigMap>| {
            use super::super::Event;
            let at = |o: &ConfigMap| {
                format!(
                    "{}@{}",
                    o.metadata.name.as_deref().unwrap_or(""),
                    o.metadata.resource_version.as_deref().unwrap_or("")
                )
            };
            sink.lock().push(match event {
                Event::Added(o) => format!("added {}", at(o)),
                Event::Updated { old, new } => format!("updated {} to {}", at(old), at(new)),
                Event::Deleted { object, final_state_unknown: true } => format!("vanished {}", at(object)),
                Event::Deleted { object, .. } => format!("deleted {}", at(object)),
            });
        });
        seen
    }

    #[test]
    fn a_watch_list_asks_for_the_initial_events_and_falls_back_to_a_list_when_refused() {
        let fake = Arc::new(FakeLister::with(3, vec![]));
        let refused = api_error(
            422,
            "Invalid",
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            None,
        );
        *fake.watch_failures.lock() = vec![refused];
        let (mut reflector, informer, _stop) = reflector(fake.clone());
        let next = match reflector.step(Next::ListAndWatch { pause: None }) {
            Ok(Step::Next(next)) => next,
            _ => panic!("the fake opens no watch"),
        };
        assert!(matches!(next, Next::List), "{next:?}");
        let query = fake.watches.lock()[0].clone();
        assert!(query.starts_with("?watch=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&allowWatchBookmarks=true&timeoutSeconds="), "{query}");
        assert!(!query.contains("resourceVersion="), "at first from \"\" (omitted): {query}");
        let timeout: u32 = query.rsplit('=').next().unwrap().parse().unwrap();
        assert!((300..600).contains(&timeout), "{timeout}");
        assert!(fake.requests().is_empty(), "no list yet");

        // The fallback: a list at "0" in the same ListAndWatch, then a plain watch from its version.
        assert!(matches!(reflector.step(next), Ok(Step::Next(Next::ListAndWatch { pause: Some(_) }))));
        assert_eq!(fake.requests()[0], request(Some("0"), Some(500), false));
        assert!(informer.has_synced());
        let watch = fake.watches.lock()[1].clone();
        assert!(watch.starts_with("?watch=true&resourceVersion=100&allowWatchBookmarks=true"), "{watch}");
        assert!(!watch.contains("sendInitialEvents"));

        // The next ListAndWatch tries a watch-list again, from the last synced version.
        fake.watches.lock().clear();
        assert!(matches!(reflector.open_watch_list(), Ok(Step::Next(Next::List))));
        assert!(fake.watches.lock()[0].contains("&resourceVersion=100&resourceVersionMatch=NotOlderThan"));
    }

    #[test]
    fn without_the_gate_list_and_watch_lists() {
        let fake = Arc::new(FakeLister::with(1, vec![]));
        let informer = Arc::new(Informer::with_source(None, fake.clone()));
        let (_stop_tx, stop) = crossbeam_channel::bounded(0);
        let mut reflector =
            Reflector::new(informer, crate::client::unreachable_client(), false, stop, crossbeam_channel::bounded(0).0);
        assert!(matches!(reflector.step(Next::ListAndWatch { pause: None }), Ok(Step::Next(_))));
        assert_eq!(fake.requests(), [request(Some("0"), Some(500), false)]);
        assert!(!fake.watches.lock()[0].contains("sendInitialEvents"));
    }

    #[test]
    fn watch_list_errors_retry_or_fall_back_as_client_go_does() {
        let (mut reflector, _informer, _stop) = reflector(Arc::new(FakeLister::default()));
        reflector.resource_version = "100".into();
        let refused = Error::Transport("GET https://127.0.0.1:1/api: io: Connection refused (os error 111)".into());
        assert!(matches!(reflector.watch_list_failed(refused), Next::WatchList { pause: Some(_) }));
        let throttled = api_error(429, "TooManyRequests", "slow down", None);
        assert!(matches!(reflector.watch_list_failed(throttled), Next::WatchList { pause: Some(_) }));
        assert!(!reflector.resource_version_unavailable);
        assert_eq!(reflector.watch_list_resource_version(), "100");

        // Gone or too large: again at once, from the latest state.
        assert!(matches!(reflector.watch_list_failed(expired()), Next::WatchList { pause: None }));
        assert!(reflector.resource_version_unavailable);
        assert_eq!(reflector.watch_list_resource_version(), "");
        reflector.resource_version_unavailable = false;
        let too_large =
            api_error(504, "Timeout", "Too large resource version: 200, current: 100", Some("ResourceVersionTooLarge"));
        assert!(matches!(reflector.watch_list_failed(too_large), Next::WatchList { pause: None }));
        assert!(reflector.resource_version_unavailable);

        // Anything else falls back to a list.
        for other in [
            api_error(500, "InternalError", "etcd is sad", None),
            api_error(403, "Forbidden", "no", None),
            Error::Transport("GET https://127.0.0.1:1/api: io: Connection reset by peer".into()),
        ] {
            assert!(matches!(reflector.watch_list_failed(other), Next::List));
        }
    }

    #[test]
    fn initial_events_wait_for_the_end_bookmark_then_replace_the_cache() {
        let fake = Arc::new(FakeLister::with(3, vec![]));
        let (mut reflector, informer, _stop) = reflector(fake);
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        let seen = recorded(&informer);
        seen.lock().clear();
        let mut watching = watch_listing(reflector);

        for event in [
            raw("ADDED", cm_json("cm-0000", "100")),
            raw("ADDED", cm_json("cm-0001", "150")),
            raw("ADDED", cm_json("cm-0009", "140")),
            raw("BOOKMARK", serde_json::json!({"metadata": {"resourceVersion": "155"}})),
        ] {
            assert!(watching.event(Ok(event)));
        }
        assert!(seen.lock().is_empty(), "nothing delivered before the end bookmark");
        assert_eq!(informer.store().len(), 3);
        assert_eq!(informer.last_sync_resource_version(), "100", "the last synced version waits too");
        assert_eq!(informer.store().last_store_sync_resource_version(), "100");

        assert!(watching.event(Ok(end_bookmark("160"))));
        assert!(watching.initial.is_none(), "the watch carries on as an ordinary watch");
        // The difference, as after a list: the unchanged object gets no event.
        assert_eq!(*seen.lock(), ["updated cm-0001@100 to cm-0001@150", "added cm-0009@140", "vanished cm-0002@100"]);
        assert_eq!(informer.last_sync_resource_version(), "160");
        assert_eq!(informer.store().last_store_sync_resource_version(), "160");
        assert!(informer.store().get("default/cm-0009").is_some_and(|o| o.metadata.managed_fields.is_none()));

        // Later events apply at once, on the same watch.
        seen.lock().clear();
        assert!(watching.event(Ok(raw("MODIFIED", cm_json("cm-0009", "170")))));
        assert_eq!(*seen.lock(), ["updated cm-0009@140 to cm-0009@170"]);
        assert_eq!(watching.reflector.resource_version, "170");
        assert_eq!(watching.events, 1, "the ordinary watch counts its own events");
        assert!(matches!(watching.closed(None), Next::Watch { pause: None }), "a rewatch, from 170");
    }

    #[test]
    fn a_first_watch_list_syncs_the_informer_at_its_end_bookmark() {
        let (reflector, informer, _stop) = reflector(Arc::new(FakeLister::default()));
        let mut watching = watch_listing(reflector);
        assert!(watching.event(Ok(raw("ADDED", cm_json("a", "7")))));
        assert!(!informer.has_synced());
        assert!(informer.store().is_empty());
        assert!(watching.event(Ok(end_bookmark("9"))));
        assert!(informer.has_synced());
        assert_eq!(informer.store().keys(), ["default/a"]);
        assert_eq!(informer.last_sync_resource_version(), "9");
    }

    #[test]
    fn a_watch_list_that_ends_before_its_end_bookmark_is_tried_again_or_falls_back() {
        let (reflector, informer, _stop) = reflector(Arc::new(FakeLister::default()));
        let mut watching = watch_listing(reflector);
        assert!(watching.event(Ok(raw("ADDED", cm_json("a", "7")))));
        // Closed, cleanly or broken, after an event: again at once.
        assert!(matches!(watching.closed(None), Next::WatchList { pause: None }));
        let broken = Error::Transport("watch stream broken: connection reset".into());
        assert!(!watching.event(Err(broken)));
        assert!(matches!(watching.end.take(), Some(Next::WatchList { pause: None })));
        assert!(informer.store().is_empty(), "nothing of an unfinished watch-list is kept");
        assert!(!informer.has_synced());

        // An ERROR event: 410 tries again from the latest state; other errors fall back to a list.
        let status = |code: u16, reason: &str| serde_json::json!({"kind": "Status", "status": "Failure", "reason": reason, "code": code, "message": "m"});
        assert!(!watching.event(Ok(raw("ERROR", status(410, "Expired")))));
        assert!(matches!(watching.end.take(), Some(Next::WatchList { pause: None })));
        assert!(watching.reflector.resource_version_unavailable);
        assert!(!watching.event(Ok(raw("ERROR", status(500, "InternalError")))));
        assert!(matches!(watching.end.take(), Some(Next::List)));

        // A very short watch-list (no event within a second) falls back to a list.
        let reflector = &mut watching.reflector;
        assert!(matches!(reflector.watch_list_closed(Duration::from_millis(10), 0, None), Next::List));
        assert!(matches!(reflector.watch_list_closed(Duration::from_millis(10), 1, None), Next::WatchList { .. }));
    }

    #[test]
    fn an_initial_object_that_does_not_decode_falls_back_to_a_list_before_any_deletion() {
        let fake = Arc::new(FakeLister::with(2, vec![]));
        let (mut reflector, informer, _stop) = reflector(fake);
        assert!(matches!(reflector.list(), Ok(Ok(()))));
        let mut watching = watch_listing(reflector);
        let garbage = serde_json::json!({"metadata": {"namespace": "default", "name": "bad", "resourceVersion": "120"}, "data": 7});
        assert!(watching.event(Ok(raw("ADDED", garbage))));
        assert!(!watching.event(Ok(end_bookmark("130"))));
        assert!(matches!(watching.end.take(), Some(Next::List)));
        assert_eq!(informer.store().len(), 2, "no deletion on the strength of a sync cut short");
        assert_eq!(informer.last_sync_resource_version(), "100");
    }

    #[test]
    fn the_end_bookmark_warning_ticks_with_the_resyncs() {
        let (reflector, _informer, _stop) = reflector(Arc::new(FakeLister::default()));
        let mut watching = watch_listing(reflector);
        let warning = watching.initial.as_deref().map(InitialEvents::next_warning);
        assert_eq!(watching.next_tick(), warning, "no resync period: the warning alone");
        assert!(watching.event(Ok(end_bookmark("9"))));
        assert_eq!(watching.next_tick(), None);
    }

    #[test]
    fn resync_is_due_once_per_period() {
        let mut resync = Resync::new(Duration::from_secs(10));
        let start = Instant::now();
        assert!(!resync.due(start));
        assert!(resync.due(start + Duration::from_secs(11)));
        assert!(!resync.due(start + Duration::from_secs(12)));
    }
}
