//! The controller abstraction and the machinery that runs controllers: each controller has an
//! upstream name, its own API client identity, the shared informers it reads, a workqueue of
//! object keys fed by informer event handlers, and a pool of worker threads that call its
//! `sync(key)`, as client-go controllers do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::flags::Options;

use super::events::EventRecorder;
use super::informer::{CacheSet, Event, Informer, SharedInformerFactory, object_key};
use super::workqueue::WorkQueue;

/// A controller's reconcile logic: make the world match the object named by `key`
/// (`namespace/name`, or `name` for cluster-scoped objects).
pub trait Reconciler: Send + Sync + 'static {
    /// An `Err` re-queues the key with the queue's rate limit.
    fn sync(&self, key: &str) -> Result<(), String>;

    /// Further queues whose keys go to the same `sync`, each served by its own pool of as many
    /// workers as the main queue (e.g. the resource quota controller's priority queue). They
    /// are shut down with the main queue.
    fn extra_queues(&self) -> Vec<WorkQueue<String>> {
        Vec::new()
    }

    /// Starts the controller: what upstream's constructor does with the API (discovery, a first
    /// list through the controller's own client, e.g. node IPAM's CIDR map) and the controller's
    /// own loops besides its workers (upstream's goroutines of `Run`, e.g. the garbage
    /// collector's graph builder). Called once, when this process starts leading, before the
    /// workers: a constructor only wires up informers and queues, so that a standby neither
    /// writes nor makes any request as the controller (upstream builds its controllers only
    /// once it leads). An error stops the process, as a controller that fails to start stops
    /// upstream's.
    fn run_background(self: Arc<Self>) -> Result<(), String> {
        Ok(())
    }

    /// Whether state the controller builds itself (beyond the informers its constructor asked
    /// for) is ready for its workers, e.g. the garbage collector's dependency graph; the
    /// workers wait for it as for their caches.
    fn has_synced(&self) -> bool {
        true
    }
}

/// What a controller's constructor is given. The constructor runs on a standby too (its
/// informers warm up, as the controller manager's own identity): it must make no request with
/// `client`, and leave such work to [`Reconciler::run_background`].
pub struct ControllerContext<'a> {
    /// The controller's upstream name, e.g. `replicaset-controller`.
    pub name: &'static str,
    /// A client of its own: own User-Agent, own `--kube-api-qps`/`--kube-api-burst` budget;
    /// with `--use-service-account-credentials`, its own ServiceAccount, whose first request
    /// gets or creates that account. For the workers and `run_background` only.
    pub client: Client,
    pub informers: &'a SharedInformerFactory,
    pub options: &'a Options,
    /// Records Events with `source.component` = the controller's name.
    pub recorder: EventRecorder,
}

/// A constructed controller, ready to run.
pub struct ControllerHandle {
    pub queue: WorkQueue<String>,
    pub reconciler: Arc<dyn Reconciler>,
    /// Worker threads (its `--concurrent-*-syncs`). Zero: the controller declined to start
    /// (upstream's `started == false`, e.g. node IPAM without `--allocate-node-cidrs`), and the
    /// set leaves it out.
    pub workers: usize,
}

impl ControllerHandle {
    /// What an init function returns when upstream's answers "not started" (e.g. the token
    /// controller without `--service-account-private-key-file`): the set logs `why` and leaves
    /// the controller out.
    pub fn disabled(name: &str, why: &str) -> ControllerHandle {
        struct Idle;
        impl Reconciler for Idle {
            fn sync(&self, _key: &str) -> Result<(), String> {
                Ok(())
            }
        }
        log::info!("{name}: {why}");
        // Unnamed: a controller that does not start exports no queue metrics, as upstream.
        ControllerHandle { queue: WorkQueue::new(""), reconciler: Arc::new(Idle), workers: 0 }
    }

    /// The main queue, then the reconciler's extra queues.
    fn queues(&self) -> Vec<WorkQueue<String>> {
        let mut queues = vec![self.queue.clone()];
        queues.extend(self.reconciler.extra_queues());
        queues
    }
}

/// How to build one controller.
pub struct ControllerDescriptor {
    /// Upstream's canonical name (see `crate::controllers::KNOWN_CONTROLLERS`).
    pub name: &'static str,
    pub init: fn(&ControllerContext<'_>) -> Result<ControllerHandle, String>,
}

/// Enqueues the key of every object an informer reports: the usual mapping for a controller
/// whose queue holds keys of the kind it watches.
pub fn enqueue_object_keys<K>(informer: &Informer<K>, queue: &WorkQueue<String>)
where
    K: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> + Send + Sync + 'static,
{
    let queue = queue.clone();
    informer.add_handler(move |event: &Event<K>| {
        let object = match event {
            Event::Added(o) | Event::Updated { new: o, .. } | Event::Deleted { object: o, .. } => o,
        };
        queue.add(object_key(object.metadata()));
    });
}

/// How long after the drain deadline an Event sink may take to finish the write it has in
/// flight at shutdown.
const IN_FLIGHT_EVENT_WRITE: Duration = Duration::from_secs(5);

/// A controller that is running or ready to run.
struct Running {
    name: &'static str,
    /// The ServiceAccount it acts as (`--use-service-account-credentials`), created when its
    /// workers start.
    service_account: Option<&'static str>,
    handle: ControllerHandle,
    /// The informers its constructor asked for: its workers wait for them to sync.
    caches: CacheSet,
    recorder: EventRecorder,
    workers: Vec<JoinHandle<()>>,
}

/// The set of controllers of one process, with their shared informers.
pub struct ControllerSet {
    /// The root credentials' client, which creates the controllers' ServiceAccounts.
    root: Client,
    informers: SharedInformerFactory,
    controllers: Vec<Running>,
    /// Set when workers must take no further keys (shutdown, lost leadership).
    stopping: Arc<AtomicBool>,
}

impl ControllerSet {
    /// Builds every controller of `descriptors` that `options` selects and starts the
    /// informers they asked for. Workers do not run yet: see [`ControllerSet::run_workers`].
    pub fn start(
        client: &Client,
        options: &Options,
        descriptors: &[ControllerDescriptor],
    ) -> Result<ControllerSet, String> {
        let informers = SharedInformerFactory::new(client.clone(), options.generic.min_resync_period);
        let mut controllers = Vec::new();
        if options.generic.use_service_account_credentials && options.service_account.private_key_file.is_empty() {
            // Another controller manager may be minting the tokens; if none is, TokenRequest still works.
            log::info!(
                "Warning: --use-service-account-credentials was specified without providing a --service-account-private-key-file"
            );
        }
        for descriptor in descriptors.iter().filter(|d| options.starts_controller(d.name)) {
            let controller_client = controller_client(client, options, descriptor.name)?;
            let component = crate::controllers::client_names::event_component_for(descriptor.name);
            let recorder = EventRecorder::new(controller_client.clone(), component);
            let context = ControllerContext {
                name: descriptor.name,
                client: controller_client,
                informers: &informers,
                options,
                recorder: recorder.clone(),
            };
            let (handle, caches) = informers.recording(|| (descriptor.init)(&context));
            let handle = handle.map_err(|e| format!("starting {}: {e}", descriptor.name))?;
            if handle.workers == 0 {
                handle.queue.shut_down();
                recorder.shutdown();
                log::warn!("Skipping controller {}", descriptor.name);
                continue;
            }
            log::info!("started {} ({} workers)", descriptor.name, handle.workers);
            let service_account = controller_service_account(options, descriptor.name);
            controllers.push(Running {
                name: descriptor.name,
                service_account,
                handle,
                caches,
                recorder,
                workers: Vec::new(),
            });
        }
        informers.start();
        Ok(ControllerSet { root: client.clone(), informers, controllers, stopping: Arc::new(AtomicBool::new(false)) })
    }

    /// The names of the controllers in the set.
    pub fn names(&self) -> Vec<&'static str> {
        self.controllers.iter().map(|c| c.name).collect()
    }

    /// Waits until every informer has its first full list.
    pub fn wait_for_sync(&self, timeout: Duration) -> bool {
        self.informers.wait_for_sync(timeout)
    }

    /// Starts every controller's background loops and worker threads (only ever while this
    /// process may act, i.e. while it leads). Each controller's workers take keys once its
    /// own caches have synced, so a cache that never syncs holds back only its readers.
    ///
    /// With `--use-service-account-credentials` each controller's ServiceAccount is got or
    /// created first, in start order, as upstream's `ClientOrDie(name)` does when it starts a
    /// controller: the accounts of all started controllers exist before any of them works, not
    /// only those of the controllers that have written something.
    ///
    /// A controller whose [`Reconciler::run_background`] fails stops the start: the error
    /// (`starting <name>: …`) is for the caller to end the process with, as upstream exits when
    /// a controller fails to start in `OnStartedLeading`.
    pub fn run_workers(&mut self) -> Result<(), String> {
        let mut ensured = std::collections::HashSet::new();
        for controller in &mut self.controllers {
            if !controller.workers.is_empty() {
                continue;
            }
            if let Some(account) = controller.service_account
                && ensured.insert(account)
            {
                ensure_service_account(&self.root, controller.name, account);
            }
            controller
                .handle
                .reconciler
                .clone()
                .run_background()
                .map_err(|e| format!("starting {}: {e}", controller.name))?;
            running_controllers().set(&["kube-controller-manager", controller.name], 1.0);
            let synced = Arc::new(CacheSync::new(controller.name, controller.caches.clone()));
            let mut index = 0;
            for queue in controller.handle.queues() {
                for _ in 0..controller.handle.workers.max(1) {
                    let queue = queue.clone();
                    let reconciler = controller.handle.reconciler.clone();
                    let name = controller.name;
                    let stopping = self.stopping.clone();
                    let synced = synced.clone();
                    let spawned = std::thread::Builder::new().name(format!("{name}-{index}")).spawn(move || {
                        if synced.wait(reconciler.as_ref(), &stopping) {
                            work(name, &queue, reconciler.as_ref(), &stopping);
                        }
                    });
                    match spawned {
                        Ok(thread) => controller.workers.push(thread),
                        Err(e) => log::error!("{name}: cannot start worker {index}: {e}"),
                    }
                    index += 1;
                }
            }
        }
        Ok(())
    }

    /// Stops taking work, lets running syncs finish within `drain`, stops the informers and
    /// flushes pending Events.
    pub fn stop(self, drain: Duration) {
        let deadline = Instant::now() + drain;
        self.stopping.store(true, Ordering::SeqCst);
        for controller in &self.controllers {
            controller.handle.queues().iter().for_each(WorkQueue::shut_down);
            running_controllers().set(&["kube-controller-manager", controller.name], 0.0);
        }
        for controller in &self.controllers {
            for queue in controller.handle.queues() {
                let left = deadline.saturating_duration_since(Instant::now());
                if !queue.shut_down_with_drain(left) {
                    log::warn!("{}: syncs still running after {drain:?}; leaving them", controller.name);
                }
            }
        }
        self.informers.shutdown();
        // One deadline for every recorder's pending Events; none at all after a lost Lease.
        for controller in &self.controllers {
            controller.recorder.flush(deadline.saturating_duration_since(Instant::now()));
        }
        if !drain.is_zero() {
            // Close every recorder first, then wait for all of them against the same deadline
            // (plus the one request a sink may have in flight), so that many controllers
            // with unwritable Events cannot add up to more than one bound.
            self.controllers.iter().for_each(|c| c.recorder.close());
            let deadline = deadline + IN_FLIGHT_EVENT_WRITE;
            for controller in &self.controllers {
                controller.recorder.wait_stopped(deadline.saturating_duration_since(Instant::now()));
            }
        }
        for controller in self.controllers {
            for worker in controller.workers {
                if worker.is_finished() {
                    let _ = worker.join();
                }
            }
        }
    }
}

/// The ServiceAccount a controller acts as: with `--use-service-account-credentials`, the one
/// its upstream client name gives (none for the token controller, which uses the root
/// credentials).
fn controller_service_account(options: &Options, name: &str) -> Option<&'static str> {
    options
        .generic
        .use_service_account_credentials
        .then(|| crate::controllers::client_names::service_account_for(name))
        .flatten()
}

/// Gets or creates `kube-system/<account>` for `controller`. A failure is logged and the
/// controller starts anyway: its client gets or creates the account again before its first
/// token (upstream's `ClientOrDie` exits the process instead).
fn ensure_service_account(root: &Client, controller: &str, account: &str) {
    use crate::controllers::client_names::SERVICE_ACCOUNT_NAMESPACE;
    if let Err(e) = crate::client::credentials::get_or_create_service_account(root, SERVICE_ACCOUNT_NAMESPACE, account)
    {
        log::error!("{controller}: cannot get or create service account {SERVICE_ACCOUNT_NAMESPACE}/{account}: {e}");
    }
}

/// The client a controller runs with: with `--use-service-account-credentials`, one that
/// authenticates as its own ServiceAccount (upstream's dynamic client builder); otherwise the
/// root credentials with its own User-Agent and rate limit (the simple client builder).
fn controller_client(root: &Client, options: &Options, name: &'static str) -> Result<Client, String> {
    use crate::controllers::client_names::{SERVICE_ACCOUNT_NAMESPACE, client_name_for};
    match controller_service_account(options, name) {
        Some(account) => {
            crate::client::credentials::service_account_client(root, SERVICE_ACCOUNT_NAMESPACE, account, name)
                .map_err(|e| format!("{name}: cannot set up the credentials of service account {account}: {e}"))
        }
        None => Ok(root.for_controller(client_name_for(name))),
    }
}

/// `running_managed_controllers{manager,name}`: 1 for each controller whose workers run.
fn running_controllers() -> &'static crate::metrics::GaugeVec {
    static GAUGE: std::sync::OnceLock<Arc<crate::metrics::GaugeVec>> = std::sync::OnceLock::new();
    GAUGE.get_or_init(|| {
        let gauge = Arc::new(crate::metrics::GaugeVec::gauge(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            &["manager", "name"],
        ));
        crate::metrics::global().register(gauge.clone());
        gauge
    })
}

/// One controller's wait for its caches (upstream's `WaitForNamedCacheSync`), shared by its
/// workers: the first to see the caches synced logs it.
struct CacheSync {
    name: &'static str,
    caches: CacheSet,
    logged: AtomicBool,
}

impl CacheSync {
    fn new(name: &'static str, caches: CacheSet) -> CacheSync {
        if !caches.has_synced() {
            log::info!("Waiting for caches to sync for {name}");
        }
        CacheSync { name, caches, logged: AtomicBool::new(false) }
    }

    /// Blocks until the caches and the reconciler's own state have synced (true) or the set is
    /// stopping (false).
    fn wait(&self, reconciler: &dyn Reconciler, stopping: &AtomicBool) -> bool {
        while !(self.caches.has_synced() && reconciler.has_synced()) {
            if stopping.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(CACHE_SYNC_POLL);
        }
        if !self.logged.swap(true, Ordering::SeqCst) {
            log::info!("Caches are synced for {}", self.name);
        }
        true
    }
}

/// How often a waiting worker looks at its caches (client-go polls every 100 ms).
const CACHE_SYNC_POLL: Duration = Duration::from_millis(100);

/// One worker: takes keys until the queue shuts down or the set is stopping.
fn work(name: &str, queue: &WorkQueue<String>, reconciler: &dyn Reconciler, stopping: &AtomicBool) {
    while let Some(key) = queue.get() {
        if stopping.load(Ordering::SeqCst) {
            queue.done(&key);
            return;
        }
        let started = Instant::now();
        match reconciler.sync(&key) {
            Ok(()) => queue.forget(&key),
            Err(e) => {
                log::error!("{name}: error syncing {key:?}, requeuing: {e}");
                queue.add_rate_limited(key.clone());
            }
        }
        log::trace!("{name}: synced {key:?} in {:?}", started.elapsed());
        queue.done(&key);
    }
}
