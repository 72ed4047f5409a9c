//! The rate-limited work queue controllers pull keys from (client-go's util/workqueue: the plain,
//! delaying and rate-limiting queues in one type).
//!
//! # Semantics (client-go's)
//!
//! * **Dedup.** An item is *dirty* from the moment it is added until a worker takes it with
//!   [`WorkQueue::get`]. Adding a dirty item again does nothing, so a burst of events for one key
//!   is processed once.
//! * **Exclusivity.** An item taken by a worker is *processing* until the worker calls
//!   [`WorkQueue::done`]. It is never handed to a second worker meanwhile: adding it again only
//!   marks it dirty, and `done` puts it back at the end of the queue.
//! * **Order.** Otherwise items come out first in, first out.
//! * **Delays.** [`WorkQueue::add_after`] adds an item once its time (read from the queue's
//!   [`Clock`]) has come. A per-queue timer thread, started when an item has to wait, keeps a
//!   min-heap of waiting items and ends once none has waited for a moment (the pool's linger);
//!   an item already waiting keeps the earlier of its two times. A zero delay adds at once. Every `add_after` counts as a retry in `workqueue_retries_total`, as upstream.
//! * **Rate limiting.** [`WorkQueue::add_rate_limited`] delays an item by what the queue's
//!   [`RateLimiter`] says; [`WorkQueue::forget`] resets its history there.
//! * **Shutdown.** After [`WorkQueue::shut_down`] adds are ignored, delayed items are dropped
//!   (the timer thread exits), and getters still receive the items already queued; once the queue
//!   is empty they get `None`, and blocked getters wake up to get it. Workers still call `done`
//!   on what they hold. [`WorkQueue::shut_down_with_drain`] additionally waits, up to a timeout,
//!   until no item is processing. Dropping the last handle shuts the queue down.
//!
//! * **Ready hook.** [`WorkQueue::on_ready`] registers a call made (without the queue's lock)
//!   whenever an item becomes available to [`WorkQueue::try_get`] or the queue shuts down: what
//!   starts a worker on demand instead of keeping threads parked in [`WorkQueue::get`].
//!
//! Metrics are upstream's (see the `metrics` submodule), under the queue's name; an unnamed
//! queue (`""`) reports none, as upstream.

mod metrics;
mod rate_limiter;
mod waiting;

#[cfg(test)]
mod tests;

pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter,
    default_controller_rate_limiter,
};

use std::collections::{HashSet, VecDeque};
use std::fmt::{self, Debug};
use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::apimachinery::clock::{Clock, ClockListener, RealClock};
use crate::apimachinery::flowcontrol::INFINITE_DELAY;
use crate::runtime::pool::LINGER;
use metrics::{InFlight, QueueMetrics};
use waiting::Waiting;

/// The longest the timer thread sleeps without looking at its heap (upstream's `maxWait`
/// heartbeat), insurance against a clock that jumps without telling.
const MAX_TIMER_WAIT: Duration = Duration::from_secs(10);

/// What a queue can hold.
pub trait QueueItem: Clone + Eq + Hash + Send + Sync + Debug + 'static {}

impl<T: Clone + Eq + Hash + Send + Sync + Debug + 'static> QueueItem for T {}

/// [`WorkQueue::get_timeout`] waited its whole timeout without an item or a shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeout;

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting for a work queue item")
    }
}

impl std::error::Error for Timeout {}

/// What [`WorkQueue::try_get`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryGet<T> {
    /// An item, now processing: call [`WorkQueue::done`] with it when finished.
    Item(T),
    /// No item is queued now.
    Empty,
    /// The queue is shut down and empty.
    ShutDown,
}

/// A call made when an item becomes available or the queue shuts down.
type ReadyHook = Box<dyn Fn() + Send + Sync>;

/// A handle to a work queue; clones share the queue.
#[derive(Clone)]
pub struct WorkQueue<T: QueueItem> {
    owner: Arc<Owner<T>>,
}

/// Shuts the queue down when the last handle goes, so that its timer thread ends.
struct Owner<T: QueueItem> {
    shared: Arc<Shared<T>>,
}

impl<T: QueueItem> Drop for Owner<T> {
    fn drop(&mut self) {
        self.shared.shut_down();
    }
}

/// The queue itself, shared by the handles, the timer thread, the clock and the metrics.
struct Shared<T: QueueItem> {
    clock: Arc<dyn Clock>,
    limiter: Box<dyn RateLimiter<T>>,
    state: Mutex<State<T>>,
    /// Getters wait here for an item or the shutdown.
    item_ready: Condvar,
    /// `shut_down_with_drain` waits here for the processing set to empty.
    idle: Condvar,
    /// The timer thread waits here for new delayed items, clock jumps and the shutdown.
    timer_wake: Condvar,
    /// Called without the state's lock after an item was queued or the queue shut down.
    ready_hooks: parking_lot::RwLock<Vec<ReadyHook>>,
}

struct State<T> {
    /// The order to hand items out in: always dirty, never processing.
    queue: VecDeque<T>,
    /// Items needing processing.
    dirty: HashSet<T>,
    /// Items handed out and not yet done; they may be dirty again.
    processing: HashSet<T>,
    shutting_down: bool,
    /// A `shut_down_with_drain` is waiting (cleared by `shut_down`).
    drain: bool,
    /// Items waiting for their `add_after` time.
    waiting: Waiting<T>,
    /// The timer thread while it runs, until the shutdown takes it to join it.
    timer: Option<JoinHandle<()>>,
    /// Whether a timer thread runs (its handle may already be taken by the shutdown).
    timer_started: bool,
    metrics: Option<QueueMetrics<T>>,
}

impl<T: QueueItem> WorkQueue<T> {
    /// A queue with client-go's default controller rate limiter and the real clock, reporting
    /// metrics under `name`.
    pub fn new(name: &str) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(RealClock);
        let limiter = default_controller_rate_limiter(clock.clone());
        Self::with_parts(name, Box::new(limiter), clock)
    }

    /// Client-go's plain queue (`workqueue.NewTypedWithConfig`), for a queue that is never
    /// delayed: the same queue, but like upstream's its metrics have no `workqueue_retries_total`
    /// series (only delaying queues create one).
    pub fn plain(name: &str) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(RealClock);
        let limiter = default_controller_rate_limiter(clock.clone());
        Self::build(name, false, Box::new(limiter), clock)
    }

    /// A queue with the given rate limiter and clock, reporting metrics under `name`.
    pub fn with_parts(name: &str, limiter: Box<dyn RateLimiter<T>>, clock: Arc<dyn Clock>) -> Self {
        Self::build(name, true, limiter, clock)
    }

    fn build(name: &str, delaying: bool, limiter: Box<dyn RateLimiter<T>>, clock: Arc<dyn Clock>) -> Self {
        let state = State {
            queue: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashSet::new(),
            shutting_down: false,
            drain: false,
            waiting: Waiting::new(),
            timer: None,
            timer_started: false,
            metrics: (!name.is_empty()).then(|| QueueMetrics::new(name, delaying)),
        };
        let shared = Arc::new(Shared {
            clock,
            limiter,
            state: Mutex::new(state),
            item_ready: Condvar::new(),
            idle: Condvar::new(),
            timer_wake: Condvar::new(),
            ready_hooks: parking_lot::RwLock::new(Vec::new()),
        });
        let weak = Arc::downgrade(&shared);
        shared.clock.subscribe(weak.clone() as Weak<dyn ClockListener>);
        if !name.is_empty() {
            metrics::watch_in_flight(weak as Weak<dyn InFlight>);
        }
        WorkQueue { owner: Arc::new(Owner { shared }) }
    }

    fn shared(&self) -> &Arc<Shared<T>> {
        &self.owner.shared
    }

    /// Marks `item` as needing processing (ignored once shutting down, or if already dirty).
    pub fn add(&self, item: T) {
        let shared = self.shared();
        let queued = shared.add_locked(&mut shared.state.lock(), item);
        shared.ready_if(queued);
    }

    /// Adds `item` once `delay` has passed on the queue's clock; at once for a zero delay. An
    /// item already waiting keeps the earlier time. Counts a retry.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.shared().add_after(item, delay);
    }

    /// Adds `item` after the delay the rate limiter gives it now (which records a requeue).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.shared().limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Tells the rate limiter to stop tracking `item`: its next failure starts from scratch. The
    /// worker still calls [`WorkQueue::done`].
    pub fn forget(&self, item: &T) {
        self.shared().limiter.forget(item);
    }

    /// How many times `item` has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.shared().limiter.num_requeues(item)
    }

    /// Blocks until an item is available and takes it; `None` once the queue is shut down and
    /// empty. Call [`WorkQueue::done`] with the item when finished with it.
    pub fn get(&self) -> Option<T> {
        let shared = self.shared();
        let mut state = shared.state.lock();
        while state.queue.is_empty() && !state.shutting_down {
            shared.item_ready.wait(&mut state);
        }
        shared.take_locked(&mut state)
    }

    /// Like [`WorkQueue::get`], but gives up after `timeout` of real time, so that a worker loop
    /// can also watch something else (a stop flag).
    pub fn get_timeout(&self, timeout: Duration) -> Result<Option<T>, Timeout> {
        let Some(deadline) = Instant::now().checked_add(timeout) else {
            return Ok(self.get());
        };
        let shared = self.shared();
        let mut state = shared.state.lock();
        while state.queue.is_empty() && !state.shutting_down {
            if shared.item_ready.wait_until(&mut state, deadline).timed_out()
                && state.queue.is_empty()
                && !state.shutting_down
            {
                return Err(Timeout);
            }
        }
        Ok(shared.take_locked(&mut state))
    }

    /// Takes the head of the queue without waiting.
    pub fn try_get(&self) -> TryGet<T> {
        let shared = self.shared();
        let mut state = shared.state.lock();
        match shared.take_locked(&mut state) {
            Some(item) => TryGet::Item(item),
            None if state.shutting_down => TryGet::ShutDown,
            None => TryGet::Empty,
        }
    }

    /// Calls `hook` (without the queue's lock, from whichever thread queued the item) each time
    /// an item becomes available to [`WorkQueue::try_get`], and once when the queue shuts down.
    /// The hook must not keep the queue alive (hold it weakly), or the queue is never dropped.
    pub fn on_ready(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.shared().ready_hooks.write().push(Box::new(hook));
    }

    /// Marks `item` as no longer processing; if it was added meanwhile, queues it again.
    pub fn done(&self, item: &T) {
        self.shared().done(item);
    }

    /// How many items are queued (not counting those processing or waiting for a delay).
    pub fn len(&self) -> usize {
        self.shared().state.lock().queue.len()
    }

    /// Whether no item is queued (see [`WorkQueue::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the queue: new adds are ignored, delayed items dropped, and getters get `None` once
    /// the queue is empty. Also ends a `shut_down_with_drain` that is still waiting.
    pub fn shut_down(&self) {
        self.shared().shut_down();
    }

    /// Shuts the queue down, then waits up to `timeout` until every item being processed is
    /// done. Returns whether none is left processing. The workers must keep calling `done`.
    pub fn shut_down_with_drain(&self, timeout: Duration) -> bool {
        self.shared().shut_down_with_drain(timeout)
    }

    /// Whether the queue was shut down (see [`WorkQueue::shut_down`]); adds are then ignored.
    pub fn is_shutting_down(&self) -> bool {
        self.shared().state.lock().shutting_down
    }

    /// How many distinct items wait for their `add_after` time.
    #[cfg(test)]
    fn waiting_len(&self) -> usize {
        self.shared().state.lock().waiting.len()
    }
}

impl<T: QueueItem> Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared().state.lock();
        f.debug_struct("WorkQueue")
            .field("name", &state.metrics.as_ref().map_or("", |m| m.name()))
            .field("len", &state.queue.len())
            .field("processing", &state.processing.len())
            .field("waiting", &state.waiting.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

impl<T: QueueItem> Shared<T> {
    /// Client-go's `Add`, with the lock held; whether the item was queued (the ready hooks are
    /// then due, once the lock is released).
    fn add_locked(&self, state: &mut State<T>, item: T) -> bool {
        if state.shutting_down || state.dirty.contains(&item) {
            return false;
        }
        if let Some(metrics) = &mut state.metrics {
            metrics.add(&item, self.clock.now());
        }
        state.dirty.insert(item.clone());
        if state.processing.contains(&item) {
            return false;
        }
        state.queue.push_back(item);
        self.item_ready.notify_one();
        true
    }

    /// Calls the ready hooks if `queued`. The state's lock must not be held.
    fn ready_if(&self, queued: bool) {
        if queued {
            self.ready_hooks.read().iter().for_each(|hook| hook());
        }
    }

    /// Hands the head of the queue to a worker; `None` if the queue is empty.
    fn take_locked(&self, state: &mut State<T>) -> Option<T> {
        let item = state.queue.pop_front()?;
        if let Some(metrics) = &mut state.metrics {
            metrics.get(&item, self.clock.now());
        }
        state.dirty.remove(&item);
        state.processing.insert(item.clone());
        Some(item)
    }

    fn done(&self, item: &T) {
        let mut state = self.state.lock();
        if let Some(metrics) = &mut state.metrics {
            metrics.done(item, self.clock.now());
        }
        // `done` for an item nobody holds must not queue a second copy of it.
        if !state.processing.remove(item) {
            return;
        }
        let requeued = state.dirty.contains(item);
        if requeued {
            state.queue.push_back(item.clone());
            self.item_ready.notify_one();
        }
        if state.processing.is_empty() {
            self.idle.notify_all();
        }
        drop(state);
        self.ready_if(requeued);
    }

    fn add_after(self: &Arc<Self>, item: T, delay: Duration) {
        let mut state = self.state.lock();
        if state.shutting_down {
            return;
        }
        if let Some(metrics) = &state.metrics {
            metrics::retry(metrics.name());
        }
        if delay.is_zero() || !self.ensure_timer(&mut state) {
            // Without a timer thread the item would never come due; better early than never.
            let queued = self.add_locked(&mut state, item);
            drop(state);
            self.ready_if(queued);
            return;
        }
        let ready_at = ready_time(self.clock.now(), delay);
        state.waiting.insert(item, ready_at);
        self.timer_wake.notify_one();
    }

    /// Starts the timer thread unless it runs already; false if it cannot be started.
    fn ensure_timer(self: &Arc<Self>, state: &mut State<T>) -> bool {
        if state.timer_started {
            return true;
        }
        let shared = Arc::clone(self);
        let name = state.metrics.as_ref().map_or("", |m| m.name()).replace('\0', "");
        match std::thread::Builder::new().name(format!("workqueue {name}")).spawn(move || shared.run_timer()) {
            Ok(handle) => {
                state.timer = Some(handle);
                state.timer_started = true;
                true
            }
            Err(e) => {
                log::error!("cannot start the timer thread of work queue {name:?}: {e}; adding delayed items at once");
                false
            }
        }
    }

    /// The timer thread: adds waiting items as they come due, until the shutdown or until no
    /// item has waited for [`LINGER`] (the next delayed add starts another).
    fn run_timer(&self) {
        let mut state = self.state.lock();
        // Real time: how long the heap has been empty, whatever the queue's clock does.
        let mut empty_since: Option<Instant> = None;
        while !state.shutting_down {
            let now = self.clock.now();
            let mut queued = false;
            while let Some(item) = state.waiting.pop_due(now) {
                queued |= self.add_locked(&mut state, item);
            }
            if queued {
                // Then look again: what came in or changed meanwhile is not waited past.
                MutexGuard::unlocked(&mut state, || self.ready_if(true));
                continue;
            }
            let wait = match state.waiting.next_ready_at() {
                Some(at) => {
                    empty_since = None;
                    at.saturating_duration_since(now).min(MAX_TIMER_WAIT)
                }
                None => {
                    let empty = empty_since.get_or_insert_with(Instant::now).elapsed();
                    if empty >= LINGER {
                        // Gone under the lock: an `add_after` from now on starts another.
                        state.timer_started = false;
                        drop(state.timer.take());
                        return;
                    }
                    LINGER - empty
                }
            };
            self.timer_wake.wait_for(&mut state, wait);
        }
        state.waiting.clear();
    }

    /// Marks the queue as shutting down and wakes every waiter; returns the timer thread to join.
    fn begin_shutdown(&self, state: &mut State<T>, drain: bool) -> Option<JoinHandle<()>> {
        state.drain = drain;
        state.shutting_down = true;
        state.waiting.clear();
        self.item_ready.notify_all();
        self.idle.notify_all();
        self.timer_wake.notify_all();
        state.timer.take()
    }

    fn shut_down(&self) {
        let timer = self.begin_shutdown(&mut self.state.lock(), false);
        self.ready_if(true);
        join_timer(timer);
    }

    fn shut_down_with_drain(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.state.lock();
        let timer = self.begin_shutdown(&mut state, true);
        MutexGuard::unlocked(&mut state, || self.ready_if(true));
        while !state.processing.is_empty() && state.drain {
            if wait_or_time_out(&self.idle, &mut state, deadline) {
                break;
            }
        }
        let drained = state.processing.is_empty();
        drop(state);
        join_timer(timer);
        drained
    }
}

impl<T: QueueItem> ClockListener for Shared<T> {
    fn time_changed(&self) {
        // Taking the lock orders this wake-up after the timer thread's read of the clock.
        let _state = self.state.lock();
        self.timer_wake.notify_all();
    }
}

impl<T: QueueItem> InFlight for Shared<T> {
    fn in_flight(&self) -> Option<(String, f64, f64)> {
        let state = self.state.lock();
        let metrics = state.metrics.as_ref()?;
        let (total, longest) = metrics.in_flight(self.clock.now());
        Some((metrics.name().to_string(), total, longest))
    }
}

/// `now + delay`, or [`INFINITE_DELAY`] ahead when that does not fit (every platform's `Instant`
/// reaches that far).
fn ready_time(now: Instant, delay: Duration) -> Instant {
    now.checked_add(delay).or_else(|| now.checked_add(INFINITE_DELAY)).unwrap_or(now)
}

/// Waits on `condvar` until notified or `deadline` (forever without one); true if timed out.
fn wait_or_time_out<T>(condvar: &Condvar, guard: &mut MutexGuard<'_, T>, deadline: Option<Instant>) -> bool {
    match deadline {
        Some(deadline) => condvar.wait_until(guard, deadline).timed_out(),
        None => {
            condvar.wait(guard);
            false
        }
    }
}

/// Waits for the timer thread to end (it does promptly once the queue is shutting down).
fn join_timer(timer: Option<JoinHandle<()>>) {
    let Some(timer) = timer else { return };
    if timer.thread().id() == std::thread::current().id() {
        return;
    }
    if timer.join().is_err() {
        log::error!("a work queue timer thread panicked");
    }
}
