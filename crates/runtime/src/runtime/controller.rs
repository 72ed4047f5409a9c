//! The controller harness: what a controller declares ([`Controller`]: typed queues with their
//! handlers and worker counts, periodic tasks, what its workers wait for, what it does when it
//! starts leading) and the machinery that runs a set of them ([`ControllerSet`]), as
//! client-go controllers do with their informers, workqueues and `wait.Until` loops.
//!
//! A controller knows nothing of flags or of other controllers: the composition root
//! (`crate::app`) builds it from a plain config struct and hands it a [`ControllerContext`].
//!
//! Threads: a queue's workers are started on demand (see [`super::pool`]) up to its worker
//! count and retire when it is idle; one scheduler thread for the whole set waits for the
//! controllers' caches and starts the runs of periodic tasks (see `scheduler`). An idle set
//! has that one thread.

mod scheduler;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::apimachinery::clock::RealClock;
use crate::apimachinery::errors::BoxError;
use crate::client::Client;

use super::events::EventRecorder;
use super::informer::{CacheSet, Event, Informer, InformerOptions, SharedInformerFactory, object_key};
use super::pool::{Backlog, Jobs, LINGER, Pool, Take, Workers};
use super::workqueue::{QueueItem, TryGet, WorkQueue};
use scheduler::{Gated, Scheduler, Task};

/// What a queue handler returns.
pub type SyncResult = Result<(), SyncError>;

/// Why a handler could not finish a key, and so what its worker does with the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncError {
    /// The object changed under the handler (409): requeued at the queue's per-item backoff,
    /// whose first step is 5 ms, as upstream's `AddRateLimited`; the informer has the newer
    /// object by then.
    Conflict(String),
    /// The server asked to come back later (429/5xx with `Retry-After`): requeued after that
    /// delay instead of the backoff.
    RetryAfter {
        /// How long to wait: the server's `Retry-After`.
        delay: Duration,
        /// The error, for the log line.
        message: String,
    },
    /// What the key names no longer exists and there is nothing left to do: the key is dropped
    /// and its backoff forgotten.
    Gone(String),
    /// Anything else: logged and requeued with the queue's rate limit.
    Failed(String),
}

impl SyncError {
    /// A failure with this message.
    pub fn failed(message: impl Into<String>) -> SyncError {
        SyncError::Failed(message.into())
    }

    /// The error's message, whatever its kind.
    pub fn message(&self) -> &str {
        match self {
            SyncError::Conflict(m) | SyncError::Gone(m) | SyncError::Failed(m) => m,
            SyncError::RetryAfter { message, .. } => message,
        }
    }

    /// Any error as the workqueue acts on it: the kind of the first API error in its source
    /// chain (a conflict, a `Retry-After`; see `From<client::Error>`), its whole text as the
    /// message. Wrappers keep the kind as client-go's `%w` does, so a handler may return its
    /// own error type and let `?` or `map_err(SyncError::of)` classify it here.
    pub fn of<E: std::error::Error + 'static>(error: E) -> SyncError {
        let message = error.to_string();
        match crate::client::Error::find(&error) {
            Some(api) => SyncError::from_api(api, message),
            None => SyncError::Failed(message),
        }
    }

    /// The kind the workqueue gives an API error, with `message` as its text.
    fn from_api(error: &crate::client::Error, message: String) -> SyncError {
        if error.is_conflict() {
            SyncError::Conflict(message)
        } else if let Some(delay) = error.retry_after() {
            SyncError::RetryAfter { delay, message }
        } else {
            SyncError::Failed(message)
        }
    }

    /// The same kind of error with `context: ` before its message.
    pub fn context(self, context: impl fmt::Display) -> SyncError {
        let wrap = |m: String| format!("{context}: {m}");
        match self {
            SyncError::Conflict(m) => SyncError::Conflict(wrap(m)),
            SyncError::Gone(m) => SyncError::Gone(wrap(m)),
            SyncError::Failed(m) => SyncError::Failed(wrap(m)),
            SyncError::RetryAfter { delay, message } => SyncError::RetryAfter { delay, message: wrap(message) },
        }
    }
}

impl fmt::Display for SyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for SyncError {}

/// Conflicts and `Retry-After` answers keep their kind; a 404 stays a failure, because it may
/// name another object than the key's (e.g. the namespace of a pod being created).
impl From<crate::client::Error> for SyncError {
    fn from(error: crate::client::Error) -> SyncError {
        let message = error.to_string();
        SyncError::from_api(&error, message)
    }
}

/// What a controller's constructor is given. The constructor runs on a standby too (its
/// informers warm up, as the controller manager's own identity): it must make no request with
/// `client`, and leave such work to [`Controller::on_start`] and its handlers.
pub struct ControllerContext<'a> {
    /// The controller's upstream name, e.g. `replicaset-controller`, for its logs.
    pub name: &'static str,
    /// A client of its own: own User-Agent, own `--kube-api-qps`/`--kube-api-burst` budget;
    /// with `--use-service-account-credentials`, its own ServiceAccount, whose first request
    /// gets or creates that account.
    pub client: Client,
    /// The process's shared informers: the ones the constructor asks for are started for it.
    pub informers: &'a SharedInformerFactory,
    /// Records Events with the controller's `source.component`.
    pub recorder: EventRecorder,
}

type StartHook = Box<dyn FnOnce() -> Result<(), BoxError> + Send>;
type ReadyCheck = Box<dyn Fn() -> bool + Send + Sync>;

/// A constructed controller: its queues and their handlers, its periodic tasks, what its
/// workers wait for and what it does when this process starts leading. Built by its
/// constructor with the `with_*`/`every`/`on_start` methods; run by a [`ControllerSet`].
#[derive(Default)]
pub struct Controller {
    queues: Vec<Box<dyn QueueWorkers>>,
    periodic: Vec<PeriodicTask>,
    ready: Vec<ReadyCheck>,
    on_start: Vec<StartHook>,
    disabled: Option<String>,
}

impl Controller {
    /// A controller with nothing declared yet.
    pub fn new() -> Controller {
        Controller::default()
    }

    /// What a constructor returns when upstream's answers "not started" (e.g. node IPAM
    /// without `--allocate-node-cidrs`): the set logs `why` and leaves the controller out.
    pub fn disabled(why: impl Into<String>) -> Controller {
        Controller { disabled: Some(why.into()), ..Controller::default() }
    }

    /// Serves `queue` with up to `workers` threads (at least one) calling `handler` for each
    /// key: at most `workers` keys are synced at once, each by one worker.
    pub fn with_queue<K: QueueItem>(
        self,
        queue: &WorkQueue<K>,
        workers: usize,
        handler: impl Fn(&K) -> SyncResult + Send + Sync + 'static,
    ) -> Controller {
        self.push_queue(queue, workers, true, handler)
    }

    /// Like [`Controller::with_queue`], but its workers start as soon as this process leads,
    /// without waiting for the caches: for a queue whose processing is what makes the
    /// controller ready (the garbage collector's graph builder consumes its monitors' events).
    pub fn with_queue_before_sync<K: QueueItem>(
        self,
        queue: &WorkQueue<K>,
        workers: usize,
        handler: impl Fn(&K) -> SyncResult + Send + Sync + 'static,
    ) -> Controller {
        self.push_queue(queue, workers, false, handler)
    }

    fn push_queue<K: QueueItem>(
        mut self,
        queue: &WorkQueue<K>,
        workers: usize,
        gated: bool,
        handler: impl Fn(&K) -> SyncResult + Send + Sync + 'static,
    ) -> Controller {
        let queue = TypedQueue { queue: queue.clone(), workers: workers.max(1), gated, handler: Arc::new(handler) };
        self.queues.push(Box::new(queue));
        self
    }

    /// Runs `task` every `period` (measured from the end of one run to the start of the next,
    /// as `wait.Until`), from when the caches have synced until the set stops.
    pub fn every(
        mut self,
        name: &'static str,
        period: Duration,
        task: impl Fn() + Send + Sync + 'static,
    ) -> Controller {
        self.periodic.push(PeriodicTask { name, schedule: Schedule::Every(period), task: Arc::new(task) });
        self
    }

    /// Runs `task` once, as soon as the caches have synced (a `Run` goroutine started after
    /// `WaitForNamedCacheSync`, e.g. the endpoints controller's leftover check).
    pub fn once_synced(mut self, name: &'static str, task: impl Fn() + Send + Sync + 'static) -> Controller {
        let task = Arc::new(task);
        self.periodic.push(PeriodicTask { name, schedule: Schedule::Once, task });
        self
    }

    /// Runs `task` every `period`, the first time one period after the caches have synced: an
    /// informer handler's resync (`AddEventHandlerWithResyncPeriod`). A zero period never runs
    /// it, as in client-go.
    pub fn resync_every(
        mut self,
        name: &'static str,
        period: Duration,
        task: impl Fn() + Send + Sync + 'static,
    ) -> Controller {
        if !period.is_zero() {
            let task = Arc::new(task);
            self.periodic.push(PeriodicTask { name, schedule: Schedule::EveryAfterOne(period), task });
        }
        self
    }

    /// Makes the workers and periodic tasks also wait for `ready` (state the controller builds
    /// itself, e.g. the garbage collector's dependency graph), as for their caches.
    pub fn wait_for(mut self, ready: impl Fn() -> bool + Send + Sync + 'static) -> Controller {
        self.ready.push(Box::new(ready));
        self
    }

    /// Runs `start` once, when this process starts leading, before the workers: what upstream's
    /// constructor does with the API (discovery, a first list through the controller's own
    /// client). An error stops the process, as a controller that fails to start stops
    /// upstream's.
    pub fn on_start(mut self, start: impl FnOnce() -> Result<(), BoxError> + Send + 'static) -> Controller {
        self.on_start.push(Box::new(start));
        self
    }

    /// The total number of workers over its queues.
    fn worker_count(&self) -> usize {
        self.queues.iter().map(|q| q.workers()).sum()
    }
}

/// One queue of a controller with its handler, behind a type-erased face for the set.
trait QueueWorkers: Send + Sync {
    fn workers(&self) -> usize;
    /// Whether its workers wait for the caches.
    fn gated(&self) -> bool;
    /// A paused pool of workers for the queue, named `name` in logs and threads, started by
    /// the queue's items once opened.
    fn pool(&self, name: &'static str) -> Arc<dyn Workers>;
    fn shut_down(&self);
    fn shut_down_with_drain(&self, timeout: Duration) -> bool;
}

type Handler<K> = Arc<dyn Fn(&K) -> SyncResult + Send + Sync>;

struct TypedQueue<K: QueueItem> {
    queue: WorkQueue<K>,
    workers: usize,
    /// Whether its workers wait for the caches.
    gated: bool,
    handler: Handler<K>,
}

impl<K: QueueItem> QueueWorkers for TypedQueue<K> {
    fn workers(&self) -> usize {
        self.workers
    }

    fn gated(&self) -> bool {
        self.gated
    }

    fn pool(&self, name: &'static str) -> Arc<dyn Workers> {
        let jobs = QueueJobs { name, queue: self.queue.clone(), handler: self.handler.clone() };
        let pool = Pool::paused(name, self.workers, LINGER, jobs);
        self.queue.on_ready(pool.notifier());
        Arc::new(pool)
    }

    fn shut_down(&self) {
        self.queue.shut_down();
    }

    fn shut_down_with_drain(&self, timeout: Duration) -> bool {
        self.queue.shut_down_with_drain(timeout)
    }
}

/// A queue's keys as the jobs of its worker pool.
struct QueueJobs<K: QueueItem> {
    name: &'static str,
    queue: WorkQueue<K>,
    handler: Handler<K>,
}

impl<K: QueueItem> Jobs for QueueJobs<K> {
    type Job = K;

    fn take(&self) -> Take<K> {
        match self.queue.try_get() {
            TryGet::Item(key) => Take::Job(key),
            TryGet::Empty => Take::Empty,
            TryGet::ShutDown => Take::Closed,
        }
    }

    fn backlog(&self) -> Backlog {
        Backlog { ready: self.queue.len(), closed: self.queue.is_shutting_down() }
    }

    fn run(&self, key: K) {
        sync_key(self.name, &self.queue, self.handler.as_ref(), key);
    }
}

/// A task a controller runs on a schedule while it leads.
struct PeriodicTask {
    name: &'static str,
    schedule: Schedule,
    task: Arc<dyn Fn() + Send + Sync>,
}

/// When a periodic task runs, counted from when the controller's caches have synced.
#[derive(Debug, Clone, Copy)]
enum Schedule {
    /// At once, then every period (`wait.Until`).
    Every(Duration),
    /// Every period, the first time one period in (an informer handler's resync).
    EveryAfterOne(Duration),
    /// Once.
    Once,
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

/// Who a controller is to the API server and in its Events: what the composition root tells
/// the set about each controller it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerIdentity {
    /// Upstream's canonical name, e.g. `replicaset-controller`.
    pub name: &'static str,
    /// The name its client is built under when it runs on the root credentials (its User-Agent
    /// ends with it).
    pub client_name: &'static str,
    /// The ServiceAccount it acts as, in [`SERVICE_ACCOUNT_NAMESPACE`]
    /// (`--use-service-account-credentials`); `None`: the root credentials.
    pub service_account: Option<&'static str>,
    /// The `source.component` of its Events.
    pub event_component: &'static str,
}

/// The namespace of the controllers' service accounts (`metav1.NamespaceSystem`).
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "kube-system";

/// Builds a controller in its context.
pub type BuildFn<'a> = Box<dyn FnOnce(&ControllerContext<'_>) -> Result<Controller, BoxError> + 'a>;

/// One controller for [`ControllerSet::start`]: who it is and how to build it.
pub struct ControllerSpec<'a> {
    /// Its names: in logs, its service account, its Events.
    pub identity: ControllerIdentity,
    /// Builds it once its context (client, informers, recorder) is ready.
    pub build: BuildFn<'a>,
}

/// Why a controller of a [`ControllerSet`] did not start: which one, and its error as the
/// source (`starting <name>: …`, the text upstream exits with).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its ServiceAccount's client cannot be set up (`--use-service-account-credentials`).
    #[error("{controller}: cannot set up the credentials of service account {account}: {source}")]
    Credentials {
        /// The controller.
        controller: &'static str,
        /// Its ServiceAccount, in [`SERVICE_ACCOUNT_NAMESPACE`].
        account: &'static str,
        /// Why its client cannot be built.
        #[source]
        source: crate::client::Error,
    },
    /// Its constructor failed.
    #[error("starting {controller}: {source}")]
    Build {
        /// The controller.
        controller: &'static str,
        /// The constructor's error.
        #[source]
        source: BoxError,
    },
    /// One of its start hooks ([`Controller::on_start`]) failed.
    #[error("starting {controller}: {source}")]
    Start {
        /// The controller.
        controller: &'static str,
        /// The hook's error.
        #[source]
        source: BoxError,
    },
}

impl StartError {
    /// The controller that did not start.
    pub fn controller(&self) -> &'static str {
        match self {
            StartError::Credentials { controller, .. }
            | StartError::Build { controller, .. }
            | StartError::Start { controller, .. } => controller,
        }
    }
}

/// How long after the drain deadline an Event sink may take to finish the write it has in
/// flight at shutdown.
const IN_FLIGHT_EVENT_WRITE: Duration = Duration::from_secs(5);

/// A controller that is running or ready to run.
struct Running {
    identity: ControllerIdentity,
    queues: Vec<Arc<dyn QueueWorkers>>,
    periodic: Vec<PeriodicTask>,
    ready: Arc<Vec<ReadyCheck>>,
    on_start: Vec<StartHook>,
    /// The informers its constructor asked for: its workers wait for them to sync.
    caches: CacheSet,
    recorder: EventRecorder,
    /// Its queues' worker pools, once it runs.
    pools: Vec<Arc<dyn Workers>>,
    started: bool,
}

/// The set of controllers of one process, with their shared informers.
pub struct ControllerSet {
    /// The root credentials' client, which creates the controllers' ServiceAccounts.
    root: Client,
    informers: SharedInformerFactory,
    controllers: Vec<Running>,
    /// Opens the pools of gated queues and runs the periodic tasks.
    scheduler: Scheduler,
}

impl ControllerSet {
    /// Builds every controller of `specs` (in order) and starts the informers they asked for,
    /// which resync every `min_resync_period` (randomized) with client-go's default gates.
    /// Workers do not run yet: see [`ControllerSet::run_workers`].
    pub fn start(
        root: &Client,
        min_resync_period: Duration,
        specs: Vec<ControllerSpec<'_>>,
    ) -> Result<ControllerSet, StartError> {
        Self::start_with(root, InformerOptions::new(min_resync_period), specs)
    }

    /// [`ControllerSet::start`] with the informers' options given (`--min-resync-period`,
    /// the client-go feature gates of `--feature-gates`).
    pub fn start_with(
        root: &Client,
        informer_options: InformerOptions,
        specs: Vec<ControllerSpec<'_>>,
    ) -> Result<ControllerSet, StartError> {
        // The informers' lists and watches have their own rate limit budget, as upstream's
        // "shared-informers" client: with root's, a start hook's informers (the garbage
        // collector's ~60 monitors) would hold back every later controller's ServiceAccount
        // lookup, and so its start, by seconds.
        let informers = SharedInformerFactory::with_options(root.for_controller("shared-informers"), informer_options);
        let mut controllers = Vec::new();
        for spec in specs {
            let identity = spec.identity;
            let name = identity.name;
            let controller_client = controller_client(root, &identity)?;
            let recorder = EventRecorder::new(controller_client.clone(), identity.event_component);
            let context = ControllerContext {
                name,
                client: controller_client,
                informers: &informers,
                recorder: recorder.clone(),
            };
            let (built, caches) = informers.recording(|| (spec.build)(&context));
            let controller = built.map_err(|source| StartError::Build { controller: name, source })?;
            if let Some(why) = controller.disabled {
                log::info!("{name}: {why}");
                recorder.shutdown();
                log::warn!("Skipping controller {name}");
                continue;
            }
            log::info!("started {name} ({} workers)", controller.worker_count());
            controllers.push(Running {
                identity,
                queues: controller.queues.into_iter().map(Arc::from).collect(),
                periodic: controller.periodic,
                ready: Arc::new(controller.ready),
                on_start: controller.on_start,
                caches,
                recorder,
                pools: Vec::new(),
                started: false,
            });
        }
        informers.start();
        Ok(ControllerSet { root: root.clone(), informers, controllers, scheduler: Scheduler::new(Arc::new(RealClock)) })
    }

    /// The names of the controllers in the set.
    pub fn names(&self) -> Vec<&'static str> {
        self.controllers.iter().map(|c| c.identity.name).collect()
    }

    /// Waits until every informer has its first full list.
    pub fn wait_for_sync(&self, timeout: Duration) -> bool {
        self.informers.wait_for_sync(timeout)
    }

    /// Starts every controller's start hooks, workers and periodic tasks (only ever while this
    /// process may act, i.e. while it leads). Each controller's workers take keys once its own
    /// caches have synced, so a cache that never syncs holds back only its readers; keys queued
    /// before then are taken when they have.
    ///
    /// With `--use-service-account-credentials` each controller's ServiceAccount is got or
    /// created first, in start order, as upstream's `ClientOrDie(name)` does when it starts a
    /// controller: the accounts of all started controllers exist before any of them works.
    ///
    /// A failing start hook stops the start: the error (`starting <name>: …`) is for the caller
    /// to end the process with, as upstream exits when a controller fails to start.
    pub fn run_workers(&mut self) -> Result<(), StartError> {
        // Two passes, as upstream builds every controller (its ServiceAccount got or created
        // then) before it runs any: every account and start hook first, then every controller's
        // workers together, so that no controller starts seconds after the ones it works with
        // (a ReplicaSet controller starting behind the Deployment controller with a backlog
        // lets new pods come before old ones go, past maxSurge).
        let mut ensured = std::collections::HashSet::new();
        let starting: Vec<usize> = (0..self.controllers.len()).filter(|&i| !self.controllers[i].started).collect();
        for &i in &starting {
            let running = &mut self.controllers[i];
            running.started = true;
            let name = running.identity.name;
            if let Some(account) = running.identity.service_account
                && ensured.insert(account)
            {
                ensure_service_account(&self.root, name, account);
            }
            for start in running.on_start.drain(..) {
                start().map_err(|source| StartError::Start { controller: name, source })?;
            }
        }
        for &i in &starting {
            self.open_workers(i);
        }
        Ok(())
    }

    /// Opens controller `i`'s ungated worker pools, and schedules its gated pools and periodic
    /// tasks to start once its caches have synced.
    fn open_workers(&mut self, i: usize) {
        let running = &mut self.controllers[i];
        let name = running.identity.name;
        running_controllers().set(&["kube-controller-manager", name], 1.0);
        let mut gated_pools = Vec::new();
        for queue in &running.queues {
            let pool = queue.pool(name);
            if queue.gated() {
                gated_pools.push(pool.clone());
            } else {
                pool.open();
            }
            running.pools.push(pool);
        }
        let tasks: Vec<Task> = (running.periodic.iter())
            .map(|task| Task {
                thread: format!("{name}-{}", task.name),
                schedule: task.schedule,
                run: task.task.clone(),
            })
            .collect();
        if gated_pools.is_empty() && tasks.is_empty() {
            return;
        }
        let gate = StartGate::new(name, running.caches.clone(), running.ready.clone());
        self.scheduler.add(Gated {
            open: Box::new(move || gate.is_open()),
            on_open: Box::new(move || gated_pools.iter().for_each(|pool| pool.open())),
            tasks,
        });
    }

    /// Stops taking work, lets running syncs and periodic runs finish within `drain`, stops
    /// the informers and flushes pending Events; what is still running then is left to end
    /// with the process. Quiet: for a stop that is not a shutdown (`Duration::ZERO` after a
    /// lost Lease), or where nobody waits for the answer.
    pub fn stop(self, drain: Duration) {
        let _ = self.shut_down_quietly(Some(drain), false);
    }

    /// Stops taking work and waits for the controllers' syncs and periodic runs in flight, as
    /// upstream's `RunControllers` waits for each controller's `Run` once its context is
    /// cancelled: at most `timeout` (`None`: as long as they take), logging the controllers
    /// still running every third of it (every 5 s without one). Then stops the informers and
    /// flushes pending Events. Whether every controller ended in time; when not, upstream's
    /// `run` fails with "controller shutdown timeout reached".
    pub fn shut_down(self, timeout: Option<Duration>) -> bool {
        self.shut_down_quietly(timeout, true)
    }

    fn shut_down_quietly(mut self, timeout: Option<Duration>, report: bool) -> bool {
        let started = Instant::now();
        let deadline = timeout.and_then(|t| started.checked_add(t));
        let runs = self.scheduler.stop();
        for running in &self.controllers {
            running.pools.iter().for_each(|pool| pool.stop());
            running.queues.iter().for_each(|q| q.shut_down());
            running_controllers().set(&["kube-controller-manager", running.identity.name], 0.0);
        }
        let terminated = match timeout {
            Some(t) if t.is_zero() => false,
            _ => self.wait_until_terminated(runs, timeout, report),
        };
        self.informers.shutdown();
        // Pending Events get what is left of the timeout (10 s without one); none at all after
        // a lost Lease.
        let events_deadline = deadline.unwrap_or_else(|| Instant::now() + EVENTS_WITHOUT_TIMEOUT);
        for running in &self.controllers {
            running.recorder.flush(events_deadline.saturating_duration_since(Instant::now()));
        }
        if timeout.is_none_or(|t| !t.is_zero()) {
            // Close every recorder first, then wait for all of them against the same deadline
            // (plus the one request a sink may have in flight), so that many controllers
            // with unwritable Events cannot add up to more than one bound.
            self.controllers.iter().for_each(|c| c.recorder.close());
            let deadline = events_deadline + IN_FLIGHT_EVENT_WRITE;
            for running in &self.controllers {
                running.recorder.wait_stopped(deadline.saturating_duration_since(Instant::now()));
            }
        }
        terminated
    }

    /// Waits for every controller's syncs in flight and periodic runs, each controller on a
    /// thread of its own that reports when it has nothing running; logs the ones still running
    /// as upstream does. Whether all ended within `timeout`.
    fn wait_until_terminated(&self, mut runs: Vec<JoinHandle<()>>, timeout: Option<Duration>, report: bool) -> bool {
        let (ended, done) = crossbeam_channel::unbounded();
        let mut running: std::collections::BTreeSet<&'static str> = std::collections::BTreeSet::new();
        for controller in &self.controllers {
            let name = controller.identity.name;
            let prefix = format!("{name}-");
            let (own, others): (Vec<_>, Vec<_>) =
                runs.into_iter().partition(|run| run.thread().name().is_some_and(|n| n.starts_with(&prefix)));
            runs = others;
            let (queues, pools, ended) = (controller.queues.clone(), controller.pools.clone(), ended.clone());
            let waiter = std::thread::Builder::new().name(format!("{name}-stop")).spawn(move || {
                queues.iter().for_each(|queue| {
                    queue.shut_down_with_drain(Duration::MAX);
                });
                pools.iter().for_each(|pool| {
                    pool.wait_stopped(far_future());
                });
                own.into_iter().for_each(|run| {
                    let _ = run.join();
                });
                let _ = ended.send(name);
            });
            if waiter.is_ok() {
                running.insert(name);
            }
        }
        drop(ended);
        let list = |running: &std::collections::BTreeSet<&str>| running.iter().copied().collect::<Vec<_>>().join(" ");
        let deadline = timeout.map_or_else(crossbeam_channel::never, crossbeam_channel::after);
        let period = timeout.map(|t| t / 3).filter(|p| !p.is_zero()).unwrap_or(STILL_WAITING_PERIOD);
        let ticks = crossbeam_channel::tick(period);
        while !running.is_empty() {
            crossbeam_channel::select! {
                recv(done) -> name => match name {
                    Ok(name) => { running.remove(name); }
                    Err(_) => break,
                },
                recv(ticks) -> _ => if report {
                    log::info!("\"Still waiting for some controllers to terminate...\" runningControllers=[{}]", list(&running));
                },
                recv(deadline) -> _ => {
                    if report {
                        let timeout = timeout.map(crate::apimachinery::duration::format_go_duration).unwrap_or_default();
                        log::info!(
                            "\"Controller shutdown timeout reached\" timeout=\"{timeout}\" runningControllers=[{}]",
                            list(&running)
                        );
                    }
                    return false;
                },
            }
        }
        if report {
            log::info!("All controllers terminated");
        }
        true
    }
}

/// How often the controllers still running at shutdown are logged without a shutdown timeout
/// (upstream's `RunControllers`).
const STILL_WAITING_PERIOD: Duration = Duration::from_secs(5);

/// How long pending Events may take to be written at a shutdown without a timeout.
const EVENTS_WITHOUT_TIMEOUT: Duration = Duration::from_secs(10);

/// A deadline that never comes in practice (a century on).
fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)).unwrap_or(now)
}

/// Gets or creates `kube-system/<account>` for `controller`. A failure is logged and the
/// controller starts anyway: its client gets or creates the account again before its first
/// token (upstream's `ClientOrDie` exits the process instead).
fn ensure_service_account(root: &Client, controller: &str, account: &str) {
    if let Err(e) = crate::client::credentials::get_or_create_service_account(root, SERVICE_ACCOUNT_NAMESPACE, account)
    {
        log::error!("{controller}: cannot get or create service account {SERVICE_ACCOUNT_NAMESPACE}/{account}: {e}");
    }
}

/// The client a controller runs with: as its ServiceAccount when it has one (upstream's
/// dynamic client builder); otherwise the root credentials with its own User-Agent and rate
/// limit (the simple client builder).
fn controller_client(root: &Client, identity: &ControllerIdentity) -> Result<Client, StartError> {
    let name = identity.name;
    match identity.service_account {
        Some(account) => {
            crate::client::credentials::service_account_client(root, SERVICE_ACCOUNT_NAMESPACE, account, name)
                .map_err(|source| StartError::Credentials { controller: name, account, source })
        }
        None => Ok(root.for_controller(identity.client_name)),
    }
}

/// `running_managed_controllers{manager,name}`: 1 for each controller whose workers run.
fn running_controllers() -> &'static crate::metrics::GaugeVec {
    static GAUGE: std::sync::OnceLock<Arc<crate::metrics::GaugeVec>> = std::sync::OnceLock::new();
    crate::metrics::registered(&GAUGE, || {
        crate::metrics::GaugeVec::gauge(
            "running_managed_controllers",
            "[BETA] Indicates where instances of a controller are currently running",
            &["manager", "name"],
        )
    })
}

/// One controller's wait for its caches (upstream's `WaitForNamedCacheSync`), looked at by the
/// set's scheduler until it opens.
struct StartGate {
    name: &'static str,
    caches: CacheSet,
    ready: Arc<Vec<ReadyCheck>>,
    logged: AtomicBool,
}

impl StartGate {
    fn new(name: &'static str, caches: CacheSet, ready: Arc<Vec<ReadyCheck>>) -> StartGate {
        if !caches.has_synced() {
            log::info!("Waiting for caches to sync for {name}");
        }
        StartGate { name, caches, ready, logged: AtomicBool::new(false) }
    }

    /// Whether the caches and the controller's own state are ready; logs it the first time.
    fn is_open(&self) -> bool {
        if !(self.caches.has_synced() && self.ready.iter().all(|ready| ready())) {
            return false;
        }
        if !self.logged.swap(true, Ordering::SeqCst) {
            log::info!("Caches are synced for {}", self.name);
        }
        true
    }
}

/// Syncs one key taken from `queue`, acts on the handler's outcome and marks the key done.
fn sync_key<K: QueueItem>(
    name: &str,
    queue: &WorkQueue<K>,
    handler: &(dyn Fn(&K) -> SyncResult + Send + Sync),
    key: K,
) {
    let started = Instant::now();
    match handler(&key) {
        Ok(()) => queue.forget(&key),
        Err(SyncError::Gone(why)) => {
            log::debug!("{name}: dropping {key:?}: {why}");
            queue.forget(&key);
        }
        Err(SyncError::RetryAfter { delay, message }) => {
            log::error!("{name}: error syncing {key:?}, retrying after {delay:?}: {message}");
            queue.add_after(key.clone(), delay);
        }
        Err(SyncError::Conflict(message) | SyncError::Failed(message)) => {
            log::error!("{name}: error syncing {key:?}, requeuing: {message}");
            queue.add_rate_limited(key.clone());
        }
    }
    log::trace!("{name}: synced {key:?} in {:?}", started.elapsed());
    queue.done(&key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use crate::client::{ApiError, Error};
    use crate::runtime::workqueue::ItemExponentialFailureRateLimiter;

    fn api_error(code: u16, retry_after: Option<Duration>) -> Error {
        Error::Api(Box::new(ApiError::from_response(code, b"not a Status", retry_after)))
    }

    #[test]
    fn client_errors_keep_the_kinds_a_worker_acts_on() {
        assert!(matches!(SyncError::from(api_error(409, None)), SyncError::Conflict(_)));
        let throttled = SyncError::from(api_error(429, Some(Duration::from_secs(3))));
        assert!(matches!(throttled, SyncError::RetryAfter { delay, .. } if delay == Duration::from_secs(3)));
        // A 404 may name another object than the key's (a pod's namespace): not `Gone`.
        assert!(matches!(SyncError::from(api_error(404, None)), SyncError::Failed(_)));
        let wrapped = SyncError::from(api_error(409, None)).context("updating status");
        assert!(matches!(&wrapped, SyncError::Conflict(m) if m.starts_with("updating status: ")));
    }

    /// A handler's own error wrapping an API error, as a controller module declares one.
    #[derive(Debug, thiserror::Error)]
    #[error("updating status of {key}: {source}")]
    struct StatusUpdate {
        key: String,
        source: Error,
    }

    #[test]
    fn any_error_is_classified_by_the_api_error_in_its_chain() {
        let wrapped = StatusUpdate { key: "ns/a".into(), source: api_error(409, None) };
        let text = wrapped.to_string();
        assert!(matches!(SyncError::of(wrapped), SyncError::Conflict(m) if m == text));
        let throttled = StatusUpdate { key: "ns/a".into(), source: api_error(429, Some(Duration::from_secs(2))) };
        assert!(
            matches!(SyncError::of(throttled), SyncError::RetryAfter { delay, .. } if delay == Duration::from_secs(2))
        );
        let members: Vec<crate::apimachinery::errors::BoxError> = vec!["local".into(), Box::new(api_error(409, None))];
        let batch = crate::apimachinery::errors::Aggregate::from_errors(members).unwrap_err();
        assert!(matches!(SyncError::of(batch), SyncError::Conflict(m) if m.starts_with("[local, ")));
        let local = StatusUpdate { key: "ns/a".into(), source: Error::Request("bad name".into()) };
        assert!(matches!(SyncError::of(local), SyncError::Failed(_)));
    }

    fn queue(clock: &Arc<FakeClock>) -> WorkQueue<String> {
        let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
        WorkQueue::with_parts("", Box::new(limiter), clock.clone())
    }

    /// Syncs one key whose handler answers `outcome`.
    fn work_once(queue: &WorkQueue<String>, outcome: SyncResult) {
        queue.add("ns/a".to_string());
        let TryGet::Item(key) = queue.try_get() else { panic!("the key is queued") };
        sync_key("test", queue, &move |_: &String| outcome.clone(), key);
    }

    #[test]
    fn the_worker_drops_gone_keys_and_honours_retry_after() {
        let clock = Arc::new(FakeClock::new());
        let gone = queue(&clock);
        work_once(&gone, Err(SyncError::Gone("deleted".into())));
        assert_eq!(gone.num_requeues(&"ns/a".to_string()), 0);
        assert!(gone.is_empty());

        let throttled = queue(&clock);
        let delay = Duration::from_secs(7);
        work_once(&throttled, Err(SyncError::RetryAfter { delay, message: "429".into() }));
        assert!(throttled.is_empty(), "nothing before the delay");
        assert_eq!(throttled.num_requeues(&"ns/a".to_string()), 0, "not counted as a failure");

        let failed = queue(&clock);
        work_once(&failed, Err(SyncError::failed("boom")));
        assert_eq!(failed.num_requeues(&"ns/a".to_string()), 1, "rate-limited");
    }

    #[test]
    fn keys_start_workers_once_the_pool_opens_and_after_the_workers_retired() {
        const LONG: Duration = Duration::from_secs(60);
        let clock = Arc::new(FakeClock::new());
        let queue = queue(&clock);
        let (synced, syncs) = crossbeam_channel::unbounded();
        let handler: Handler<String> = Arc::new(move |key: &String| {
            synced.send(key.clone()).unwrap();
            Ok(())
        });
        let jobs = QueueJobs { name: "test", queue: queue.clone(), handler };
        // No linger: workers retire as soon as the queue is empty.
        let pool = Pool::paused("test", 2, Duration::ZERO, jobs);
        queue.on_ready(pool.notifier());
        queue.add("a".to_string());
        queue.add("b".to_string());
        assert_eq!(pool.live(), 0, "no worker before the caches synced");
        pool.open();
        let mut first = [syncs.recv_timeout(LONG).unwrap(), syncs.recv_timeout(LONG).unwrap()];
        first.sort();
        assert_eq!(first, ["a", "b"]);
        assert!(pool.wait_stopped(Instant::now() + LONG), "idle workers retire");
        queue.add("c".to_string());
        assert_eq!(syncs.recv_timeout(LONG).unwrap(), "c");
        queue.add_after("d".to_string(), Duration::from_secs(1));
        clock.advance(Duration::from_secs(1));
        assert_eq!(syncs.recv_timeout(LONG).unwrap(), "d", "a delayed key starts a worker too");
        pool.stop();
        queue.shut_down();
        assert!(pool.wait_stopped(Instant::now() + LONG));
    }

    /// A set of one controller, `name`, whose queue holds one key and whose handler reports
    /// that it started, then waits until `release` has a message (or is dropped).
    fn set_with_a_running_sync(name: &'static str) -> (ControllerSet, crossbeam_channel::Sender<()>) {
        let client = crate::client::unreachable_client();
        let (release, released) = crossbeam_channel::bounded::<()>(1);
        let (started, running) = crossbeam_channel::bounded::<()>(1);
        let build: BuildFn<'static> = Box::new(move |_: &ControllerContext<'_>| {
            let queue = WorkQueue::<String>::new(name);
            queue.add("ns/a".to_string());
            let (started, released) = (started.clone(), released.clone());
            Ok(Controller::new().with_queue(&queue, 1, move |_: &String| {
                let _ = started.send(());
                let _ = released.recv();
                Ok(())
            }))
        });
        let identity = ControllerIdentity { name, client_name: name, service_account: None, event_component: name };
        let mut set =
            ControllerSet::start(&client, Duration::from_secs(3600), vec![ControllerSpec { identity, build }]).unwrap();
        set.run_workers().unwrap();
        running.recv_timeout(Duration::from_secs(60)).expect("the sync starts");
        (set, release)
    }

    #[test]
    fn no_controller_works_before_every_controller_has_started() {
        let client = crate::client::unreachable_client();
        let (synced, syncs) = crossbeam_channel::unbounded::<()>();
        let first: BuildFn<'static> = Box::new(move |_: &ControllerContext<'_>| {
            let queue = WorkQueue::<String>::new("first-controller");
            queue.add("ns/a".to_string());
            let synced = synced.clone();
            Ok(Controller::new().with_queue(&queue, 1, move |_: &String| {
                let _ = synced.send(());
                Ok(())
            }))
        });
        // The later controller's start hook (a slow one, as the garbage collector's) sees
        // whether the earlier controller's worker ran meanwhile; it cannot, so the hook waits
        // out its whole window.
        let (seen, saw) = crossbeam_channel::bounded::<bool>(1);
        let early = syncs.clone();
        let second: BuildFn<'static> = Box::new(move |_: &ControllerContext<'_>| {
            let (seen, early) = (seen.clone(), early.clone());
            Ok(Controller::new().on_start(move || {
                let _ = seen.send(early.recv_timeout(Duration::from_secs(2)).is_ok());
                Ok(())
            }))
        });
        let identity =
            |name| ControllerIdentity { name, client_name: name, service_account: None, event_component: name };
        let specs = vec![
            ControllerSpec { identity: identity("first-controller"), build: first },
            ControllerSpec { identity: identity("second-controller"), build: second },
        ];
        let mut set = ControllerSet::start(&client, Duration::from_secs(3600), specs).unwrap();
        set.run_workers().unwrap();
        assert_eq!(saw.recv_timeout(Duration::from_secs(60)), Ok(false), "the first worked during the second's start");
        syncs.recv_timeout(Duration::from_secs(60)).expect("the first works once every controller started");
        assert!(set.shut_down(Some(Duration::from_secs(10))));
    }

    #[test]
    fn a_failing_controller_is_named_and_its_error_kept_as_the_source() {
        let client = crate::client::unreachable_client();
        let identity =
            |name| ControllerIdentity { name, client_name: name, service_account: None, event_component: name };
        let broken: BuildFn<'static> = Box::new(|_: &ControllerContext<'_>| Err("no informer".into()));
        let specs = vec![ControllerSpec { identity: identity("broken-controller"), build: broken }];
        let Err(error) = ControllerSet::start(&client, Duration::from_secs(3600), specs) else {
            panic!("a constructor's error stops the start")
        };
        assert_eq!(error.controller(), "broken-controller");
        assert_eq!(error.to_string(), "starting broken-controller: no informer");
        assert_eq!(std::error::Error::source(&error).map(ToString::to_string).as_deref(), Some("no informer"));

        // A start hook's API error stays findable through the start error, as client-go's `%w`.
        let hook: BuildFn<'static> =
            Box::new(|_: &ControllerContext<'_>| Ok(Controller::new().on_start(|| Err(api_error(409, None).into()))));
        let specs = vec![ControllerSpec { identity: identity("hooked-controller"), build: hook }];
        let mut set = ControllerSet::start(&client, Duration::from_secs(3600), specs).unwrap();
        let error = set.run_workers().expect_err("the hook fails");
        assert!(matches!(error, StartError::Start { controller: "hooked-controller", .. }));
        assert!(error.to_string().starts_with("starting hooked-controller: "), "{error}");
        assert!(Error::find(&error).is_some_and(Error::is_conflict));
        set.stop(Duration::ZERO);
    }

    #[test]
    fn shut_down_waits_for_running_syncs_up_to_the_timeout() {
        // The sync outlasts the timeout: upstream's "controller shutdown timeout reached".
        let (set, release) = set_with_a_running_sync("stuck-controller");
        let began = Instant::now();
        assert!(!set.shut_down(Some(Duration::from_millis(300))));
        assert!(began.elapsed() >= Duration::from_millis(300));
        drop(release);
        // The sync ends while the set waits: every controller terminated.
        let (set, release) = set_with_a_running_sync("quick-controller");
        let releaser = std::thread::spawn(move || release.send(()).unwrap());
        assert!(set.shut_down(None), "no timeout: as long as it takes");
        releaser.join().unwrap();
    }
}
