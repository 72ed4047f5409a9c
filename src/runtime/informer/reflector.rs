//! The reflector: the thread that keeps one informer in step with the API server, as client-go's
//! `Reflector` and the shared informer's delta processing do together. There is no DeltaFIFO:
//! the thread applies each change to the cache itself and calls the handlers, in order.
//!
//! The cycle: list the kind (pages of 500, `managedFields` dropped as they arrive) and deliver
//! the difference against the cache; then watch from the list's resourceVersion, with
//! bookmarks and a server-side timeout of 5–10 minutes, re-opening each watch that ends from
//! the last resourceVersion seen. A `410 Gone` (the resourceVersion was compacted away) ends
//! the cycle: the next list is a consistent read whose difference against the cache is
//! delivered (Deleted with `final_state_unknown` for objects that vanished meanwhile).
//!
//! Failures back off as client-go's backoff manager does: 800 ms doubling to 30 s, each wait
//! stretched by up to 100 % jitter, reset when no backoff happened for 2 minutes; a
//! `Retry-After` from the server is honoured instead. Like upstream's `BackoffUntil`, every
//! relist waits out one backoff step first.
//!
//! Requests that may block (a list, opening a watch) run on short-lived helper threads so that
//! the reflector itself only ever waits in `select!` with its stop channel and ends at once on
//! shutdown; an abandoned helper finishes its request and exits on its own.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError, select};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, List, ListableResource, Metadata, NamespaceResourceScope, Resource};
use serde::de::DeserializeOwned;

use super::Informer;
use crate::client::discovery::ApiResource;
use crate::client::metadata::{MetadataApi, PartialObjectMetadata};
use crate::client::{Api, Client, Error, ListParams, Result, WatchEvent, WatchParams, WatchReceiver};

/// Objects per list page (client-go's pager default).
const PAGE_SIZE: u32 = 500;
/// The shortest server-side watch timeout; each watch asks for a random 1–2× of it.
const MIN_WATCH_TIMEOUT_SECONDS: f64 = 300.0;
/// A watch that ends sooner than this without any event is a failure ("very short watch").
const SHORT_WATCH: Duration = Duration::from_secs(1);
/// Events buffered between a watch's reading thread and the reflector.
const WATCH_BUFFER: usize = 1024;
const BACKOFF_INITIAL: Duration = Duration::from_millis(800);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const BACKOFF_RESET: Duration = Duration::from_secs(120);

/// Lists and watches a kind in every namespace (or cluster-wide). Implemented for both
/// `k8s_openapi` scopes; it stands in for the client's own scope bound, which is not nameable
/// outside the client module.
pub trait InformerScope: Sized {
    /// One page of the collection.
    fn list_page<K>(client: &Client, params: &ListParams) -> Result<List<K>>
    where
        K: Resource<Scope = Self> + ListableResource + DeserializeOwned;

    /// Opens a watch of the collection, read by its own thread.
    fn watch<K>(client: &Client, params: &WatchParams, capacity: usize) -> Result<WatchReceiver<K>>
    where
        K: Resource<Scope = Self> + DeserializeOwned + Send + 'static;
}

impl InformerScope for NamespaceResourceScope {
    fn list_page<K>(client: &Client, params: &ListParams) -> Result<List<K>>
    where
        K: Resource<Scope = Self> + ListableResource + DeserializeOwned,
    {
        Api::<K>::all(client).list(params)
    }

    fn watch<K>(client: &Client, params: &WatchParams, capacity: usize) -> Result<WatchReceiver<K>>
    where
        K: Resource<Scope = Self> + DeserializeOwned + Send + 'static,
    {
        Api::<K>::all(client).watch_channel(params, capacity)
    }
}

impl InformerScope for ClusterResourceScope {
    fn list_page<K>(client: &Client, params: &ListParams) -> Result<List<K>>
    where
        K: Resource<Scope = Self> + ListableResource + DeserializeOwned,
    {
        Api::<K>::cluster(client).list(params)
    }

    fn watch<K>(client: &Client, params: &WatchParams, capacity: usize) -> Result<WatchReceiver<K>>
    where
        K: Resource<Scope = Self> + DeserializeOwned + Send + 'static,
    {
        Api::<K>::cluster(client).watch_channel(params, capacity)
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

/// One page of a list.
pub struct Page<K> {
    pub items: Vec<K>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
}

/// How a reflector lists and watches its collection (client-go's `ListerWatcher`): typed
/// through [`Api`] for `k8s_openapi` kinds, metadata-only through [`MetadataApi`] for
/// resources discovered at run time.
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// One page of the collection across all namespaces (or cluster-wide).
    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page<K>>;

    /// Opens a watch of the collection, read by its own thread.
    fn watch(&self, client: &Client, params: &WatchParams, capacity: usize) -> Result<WatchReceiver<K>>;

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
    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page<K>> {
        let list = K::Scope::list_page::<K>(client, params)?;
        Ok(Page {
            items: list.items,
            continue_token: list.metadata.continue_,
            resource_version: list.metadata.resource_version,
        })
    }

    fn watch(&self, client: &Client, params: &WatchParams, capacity: usize) -> Result<WatchReceiver<K>> {
        K::Scope::watch::<K>(client, params, capacity)
    }

    fn label(&self) -> String {
        K::KIND.to_lowercase()
    }
}

/// Lists and watches any resource as metadata only.
pub(super) struct MetadataOnly(pub(super) ApiResource);

impl ListerWatcher<PartialObjectMetadata> for MetadataOnly {
    fn list_page(&self, client: &Client, params: &ListParams) -> Result<Page<PartialObjectMetadata>> {
        let list = MetadataApi::new(client, &self.0, None).list(params)?;
        Ok(Page {
            items: list.items,
            continue_token: list.metadata.continue_,
            resource_version: list.metadata.resource_version,
        })
    }

    fn watch(
        &self,
        client: &Client,
        params: &WatchParams,
        capacity: usize,
    ) -> Result<WatchReceiver<PartialObjectMetadata>> {
        MetadataApi::new(client, &self.0, None).watch_channel(params, capacity)
    }

    fn label(&self) -> String {
        self.0.group_resource()
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

/// How a watch ended.
enum WatchEnd {
    /// Cleanly, or cut after a while: watch again from the last resourceVersion.
    Reopen,
    /// The resourceVersion is gone: list again.
    Relist,
    /// It failed: back off, then watch again from the last resourceVersion.
    Retry(Error),
}

/// One informer's list-and-watch loop; runs on the informer's thread until stopped.
pub(super) struct Reflector<K> {
    informer: Arc<Informer<K>>,
    source: Arc<dyn ListerWatcher<K>>,
    client: Client,
    stop: Receiver<()>,
    resource_version: String,
    /// The last list or watch was answered 410: the next list reads the latest state
    /// (client-go's `isLastSyncResourceVersionUnavailable`).
    relist_from_latest: bool,
    backoff: Backoff,
    resync: Option<Resync>,
}

impl<K: Cached> Reflector<K> {
    pub(super) fn new(informer: Arc<Informer<K>>, client: Client, stop: Receiver<()>) -> Self {
        let resync = informer.resync_period().map(Resync::new);
        Reflector {
            source: informer.source(),
            informer,
            client,
            stop,
            resource_version: String::new(),
            relist_from_latest: false,
            backoff: Backoff::default(),
            resync,
        }
    }

    /// Lists and watches until the stop channel closes.
    pub(super) fn run(mut self) {
        let resync = self.informer.resync_period().map_or("no resync".to_string(), |p| format!("resync every {p:?}"));
        log::debug!("Starting reflector {} ({resync})", self.name());
        while self.list_and_watch().is_ok() {}
        log::debug!("Stopping reflector {}", self.name());
    }

    fn name(&self) -> &str {
        self.informer.type_name()
    }

    /// One list, then watches until the resourceVersion is gone; returns ready for the next list.
    fn list_and_watch(&mut self) -> Result<(), Stopped> {
        if let Err(e) = self.list()? {
            log::info!("Failed to watch {0}: failed to list {0}: {e}", self.name());
            self.relist_from_latest |= e.is_gone();
            return self.pause(Some(&e));
        }
        loop {
            match self.watch()? {
                WatchEnd::Reopen => {}
                WatchEnd::Relist => return self.pause(None),
                WatchEnd::Retry(e) => self.pause(Some(&e))?,
            }
        }
    }

    /// Lists the kind and delivers the difference against the cache.
    fn list(&mut self) -> Result<Result<()>, Stopped> {
        let from = self.list_resource_version();
        log::debug!("Listing and watching {} from resourceVersion {from:?}", self.name());
        let client = self.client.clone();
        let source = self.source.clone();
        let answer = background(format!("list-{}", source.label()), move || list_pages(source.as_ref(), &client, from));
        let (objects, resource_version) = match self.wait(&answer, None)? {
            Wait::Got(Ok(listed)) => listed,
            Wait::Got(Err(e)) => return Ok(Err(e)),
            Wait::Closed | Wait::TimedOut => return Ok(Err(Error::Transport("the list thread gave no answer".into()))),
        };
        log::debug!("{}: listed {} objects at resourceVersion {resource_version}", self.name(), objects.len());
        self.informer.replace(objects);
        self.resource_version = resource_version;
        self.relist_from_latest = false;
        self.informer.mark_synced();
        Ok(Ok(()))
    }

    /// client-go's `relistResourceVersion`: "0" (any recent state) at first, "" (the latest,
    /// a consistent read) after a 410, else the last resourceVersion seen.
    fn list_resource_version(&self) -> String {
        match (self.relist_from_latest, self.resource_version.is_empty()) {
            (true, _) => String::new(),
            (false, true) => "0".into(),
            (false, false) => self.resource_version.clone(),
        }
    }

    /// Opens one watch from the last resourceVersion and applies its events until it ends.
    fn watch(&mut self) -> Result<WatchEnd, Stopped> {
        let params = WatchParams {
            resource_version: Some(self.resource_version.clone()),
            allow_bookmarks: true,
            timeout_seconds: Some(watch_timeout_seconds()),
            ..WatchParams::default()
        };
        log::debug!("{}: watching from resourceVersion {}", self.name(), self.resource_version);
        let client = self.client.clone();
        let source = self.source.clone();
        let thread = format!("watch-open-{}", source.label());
        let opening = background(thread, move || source.watch(&client, &params, WATCH_BUFFER));
        let receiver = match self.wait(&opening, None)? {
            Wait::Got(Ok(receiver)) => receiver,
            Wait::Got(Err(e)) => return Ok(self.watch_failed(e)),
            Wait::Closed | Wait::TimedOut => {
                return Ok(self.watch_failed(Error::Transport("the watch thread gave no answer".into())));
            }
        };
        let opened = Instant::now();
        let mut events = 0usize;
        loop {
            match self.wait(receiver.channel(), None)? {
                Wait::Got(Ok(event)) => {
                    events += 1;
                    self.apply(event);
                }
                // The connection broke: as a watch that ended.
                Wait::Got(Err(e)) if e.is_transport() => return Ok(self.watch_ended(opened, events, Some(e))),
                Wait::Got(Err(e)) => return Ok(self.watch_failed(e)),
                Wait::Closed | Wait::TimedOut => return Ok(self.watch_ended(opened, events, None)),
            }
        }
    }

    fn watch_failed(&mut self, e: Error) -> WatchEnd {
        if e.is_gone() {
            log::debug!("{}: watch closed with: {e}; relisting", self.name());
            self.relist_from_latest = true;
            return WatchEnd::Relist;
        }
        log::info!("Failed to watch {}: {e}", self.name());
        WatchEnd::Retry(e)
    }

    fn watch_ended(&self, opened: Instant, events: usize, error: Option<Error>) -> WatchEnd {
        let why = error.map(|e| format!(" ({e})")).unwrap_or_default();
        if events == 0 && opened.elapsed() < SHORT_WATCH {
            log::info!("{}: watch ended with: very short watch{why}", self.name());
            return WatchEnd::Retry(Error::Transport(format!("very short watch{why}")));
        }
        log::debug!("{}: watch ended after {events} events{why}; watching again", self.name());
        WatchEnd::Reopen
    }

    fn apply(&mut self, event: WatchEvent<K>) {
        match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                self.advance(&object);
                self.informer.upsert(ingest(object));
            }
            WatchEvent::Deleted(object) => {
                self.advance(&object);
                self.informer.delete(ingest(object));
            }
            WatchEvent::Bookmark { resource_version } if !resource_version.is_empty() => {
                self.resource_version = resource_version;
            }
            WatchEvent::Bookmark { .. } => {}
        }
    }

    fn advance(&mut self, object: &K) {
        if let Some(version) = object.metadata().resource_version.as_ref().filter(|v| !v.is_empty()) {
            self.resource_version.clone_from(version);
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
                    if self.resync.as_mut().is_some_and(|r| r.due(now)) {
                        log::debug!("{}: resyncing {} objects", self.name(), self.informer.store().len());
                        self.informer.resync();
                    }
                    if deadline.is_some_and(|d| now >= d) {
                        return Ok(Wait::TimedOut);
                    }
                }
            }
        }
    }
}

/// Lists the whole collection page by page, dropping `managedFields` as pages arrive. If a
/// continue token expires between pages, lists everything at once, as client-go's pager does.
fn list_pages<K: Cached>(source: &dyn ListerWatcher<K>, client: &Client, from: String) -> Result<(Vec<K>, String)> {
    let first = ListParams {
        limit: Some(PAGE_SIZE),
        resource_version: (!from.is_empty()).then_some(from),
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
        objects.extend(page.items.into_iter().map(ingest));
        match page.continue_token.filter(|c| !c.is_empty()) {
            Some(token) => {
                // Later pages are read at the first page's revision, which the token carries.
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

/// Drops what the cache does not need (`metadata.managedFields`, often most of an object).
fn ingest<K: Metadata<Ty = ObjectMeta>>(mut object: K) -> K {
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

    #[test]
    fn resync_is_due_once_per_period() {
        let mut resync = Resync::new(Duration::from_secs(10));
        let start = Instant::now();
        assert!(!resync.due(start));
        assert!(resync.due(start + Duration::from_secs(11)));
        assert!(!resync.due(start + Duration::from_secs(12)));
    }
}
