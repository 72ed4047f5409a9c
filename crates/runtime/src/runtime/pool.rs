//! Worker threads started on demand and retired when idle: what serves each controller queue
//! (up to its `--concurrent-*-syncs`) and each Event recorder's sink (one thread), so that an
//! idle process holds no parked thread per potential worker.
//!
//! A [`Pool`] serves one source of [`Jobs`]. Whoever makes a job ready calls [`Pool::notify`],
//! which wakes an idle worker or starts one when there are more ready jobs than workers about
//! to look at the source and fewer live workers than the limit. A worker takes jobs until the
//! source is empty, waits for a signal up to the pool's linger, and then retires.
//!
//! # No lost job
//!
//! A worker decides to wait or retire only under the pool's lock, right after finding the source
//! empty (also under that lock); `notify` runs under the same lock *after* its job was made
//! ready. So either the worker's look at the source sees the job, or `notify` runs after the
//! worker is counted as waiting (it is signalled) or gone (a new worker is started). The source
//! keeps its own lock, taken inside the pool's (never the other way round: `notify` must be
//! called without the source's lock held).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

/// How long an idle worker waits for a job before it retires. Long enough to carry a worker
/// across the gaps of a burst (a rate-limited retry's first delays are 5 ms to about a second,
/// a rollout's syncs follow its pods' status updates), so that a busy queue does not pay a
/// thread start per key; short enough that a process is back to no worker threads within
/// seconds of its last event. Starting a thread costs some tens of microseconds, so even one
/// start per linger and queue is no measurable load.
pub const LINGER: Duration = Duration::from_secs(2);

/// What a worker found when it looked at the source.
#[derive(Debug, PartialEq, Eq)]
pub enum Take<J> {
    /// A job, now the worker's.
    Job(J),
    /// Nothing ready now.
    Empty,
    /// Nothing ready, ever again: the worker exits.
    Closed,
}

/// How much is ready at a source, for [`Pool::notify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// Jobs a worker could take now.
    pub ready: usize,
    /// Whether the source is closed: idle workers are woken to see it and exit.
    pub closed: bool,
}

/// A source of jobs and what to do with each. Its methods are called with the pool's lock held
/// except [`Jobs::run`], so they must not call back into the pool.
pub trait Jobs: Send + Sync + 'static {
    /// One unit of work.
    type Job: Send;
    /// Takes the next job without blocking.
    fn take(&self) -> Take<Self::Job>;
    /// What is ready now.
    fn backlog(&self) -> Backlog;
    /// Does the job (without the pool's lock).
    fn run(&self, job: Self::Job);
}

/// A pool of on-demand worker threads over one source of jobs; cheap to clone.
pub struct Pool<J: Jobs> {
    inner: Arc<Inner<J>>,
}

impl<J: Jobs> Clone for Pool<J> {
    fn clone(&self) -> Self {
        Pool { inner: self.inner.clone() }
    }
}

struct Inner<J> {
    /// The workers' thread name.
    name: String,
    limit: usize,
    linger: Duration,
    jobs: J,
    state: Mutex<State>,
    /// Waiting workers wait here for a signal.
    wake: Condvar,
    /// [`Pool::wait_stopped`] waits here for the last worker to go.
    gone: Condvar,
}

#[derive(Default)]
struct State {
    /// Whether workers may be started (a paused pool keeps ready jobs until opened).
    open: bool,
    /// Set by [`Pool::stop`]: no job is taken and no worker started any more.
    stopped: bool,
    /// Workers started and not yet exited.
    live: usize,
    /// Workers started that have not yet looked at the source.
    starting: usize,
    /// Workers waiting for a signal, not counting those already signalled.
    waiting: usize,
    /// Signals sent and not yet taken by a waiting worker.
    wakeups: usize,
}

/// The face of a pool that does not name its jobs' type.
pub trait Workers: Send + Sync {
    /// Lets the pool start workers, and starts those its ready jobs need.
    fn open(&self);
    /// Takes no job and starts no worker any more; workers finish the job they hold and exit.
    fn stop(&self);
    /// Waits until no worker is left or `deadline` passes; whether none is left.
    fn wait_stopped(&self, deadline: Instant) -> bool;
}

impl<J: Jobs> Pool<J> {
    /// A pool serving `jobs` with at most `limit` workers (at least one) named `name`, each
    /// retiring after `linger` without a job. It starts no worker before [`Workers::open`].
    pub fn paused(name: impl Into<String>, limit: usize, linger: Duration, jobs: J) -> Pool<J> {
        let inner = Inner {
            name: name.into(),
            limit: limit.max(1),
            linger,
            jobs,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            gone: Condvar::new(),
        };
        Pool { inner: Arc::new(inner) }
    }

    /// Like [`Pool::paused`], already open.
    pub fn new(name: impl Into<String>, limit: usize, linger: Duration, jobs: J) -> Pool<J> {
        let pool = Pool::paused(name, limit, linger, jobs);
        pool.inner.state.lock().open = true;
        pool
    }

    /// The source of jobs.
    pub fn jobs(&self) -> &J {
        &self.inner.jobs
    }

    /// Tells the pool that jobs may be ready (or the source closed). Call it after making a
    /// job ready, without the source's lock held.
    pub fn notify(&self) {
        self.inner.notify(&mut self.inner.state.lock());
    }

    /// A notification that holds the pool weakly: for a source that keeps it (a work queue's
    /// ready hook), which must not keep the pool alive.
    pub fn notifier(&self) -> impl Fn() + Send + Sync + 'static {
        let weak = Arc::downgrade(&self.inner);
        move || {
            if let Some(inner) = weak.upgrade() {
                inner.notify(&mut inner.state.lock());
            }
        }
    }

    /// How many workers are live.
    pub fn live(&self) -> usize {
        self.inner.state.lock().live
    }
}

impl<J: Jobs> Workers for Pool<J> {
    fn open(&self) {
        let mut state = self.inner.state.lock();
        state.open = true;
        self.inner.notify(&mut state);
    }

    fn stop(&self) {
        let mut state = self.inner.state.lock();
        state.stopped = true;
        Inner::<J>::wake_all(&self.inner.wake, &mut state);
    }

    fn wait_stopped(&self, deadline: Instant) -> bool {
        let mut state = self.inner.state.lock();
        while state.live > 0 {
            if self.inner.gone.wait_until(&mut state, deadline).timed_out() {
                return state.live == 0;
            }
        }
        true
    }
}

impl<J: Jobs> Inner<J> {
    /// Wakes or starts the workers the ready jobs need (see the module's notes).
    fn notify(self: &Arc<Self>, state: &mut MutexGuard<'_, State>) {
        if state.stopped || !state.open {
            return;
        }
        let backlog = self.jobs.backlog();
        if backlog.closed {
            Self::wake_all(&self.wake, state);
        }
        let mut needed = backlog.ready.saturating_sub(state.starting + state.wakeups);
        while needed > 0 && state.waiting > 0 {
            state.waiting -= 1;
            state.wakeups += 1;
            self.wake.notify_one();
            needed -= 1;
        }
        while needed > 0 && state.live < self.limit {
            self.spawn(state);
            needed -= 1;
        }
    }

    /// Signals every waiting worker.
    fn wake_all(wake: &Condvar, state: &mut State) {
        state.wakeups += std::mem::take(&mut state.waiting);
        wake.notify_all();
    }

    /// Starts a worker. A thread the system will not start is fatal, as Go's `newosproc` is for
    /// upstream: a pool that cannot grow would leave its keys queued for good. The binary's
    /// panic hook then ends the process (`app::limits`).
    fn spawn(self: &Arc<Self>, state: &mut State) {
        let inner = self.clone();
        if let Err(e) = std::thread::Builder::new().name(self.name.clone()).spawn(move || inner.work()) {
            panic!("{}: cannot start a worker thread: {e}", self.name);
        }
        state.live += 1;
        state.starting += 1;
    }

    /// A worker: takes jobs until the source is empty, waits up to the linger for a signal, and
    /// exits when none came and the source is still empty, closed, or the pool stopped.
    fn work(self: Arc<Self>) {
        let _panic = CountOutOnPanic(&self);
        let mut state = self.state.lock();
        state.starting -= 1;
        // Whether the linger passed without a signal: the next empty look retires the worker.
        // That look is under the same hold of the lock as the end of the wait, so a job made
        // ready before it is seen, and one made ready after it finds this worker gone.
        let mut lingered = false;
        while !state.stopped {
            match self.jobs.take() {
                Take::Job(job) => {
                    MutexGuard::unlocked(&mut state, || self.jobs.run(job));
                    lingered = false;
                    continue;
                }
                Take::Closed => break,
                Take::Empty if lingered => break,
                Take::Empty => {}
            }
            lingered = !self.wait_for_signal(&mut state);
        }
        // Counted out under the same hold of the lock as the decision to go.
        state.live -= 1;
        if state.live == 0 {
            self.gone.notify_all();
        }
    }

    /// Waits up to the linger for a signal; true when signalled, false (no longer counted as
    /// waiting) when the linger passed.
    fn wait_for_signal(&self, state: &mut MutexGuard<'_, State>) -> bool {
        state.waiting += 1;
        let deadline = Instant::now().checked_add(self.linger);
        loop {
            if state.wakeups > 0 {
                state.wakeups -= 1;
                return true;
            }
            let timed_out = match deadline {
                Some(deadline) => self.wake.wait_until(state, deadline).timed_out(),
                None => {
                    self.wake.wait(state);
                    false
                }
            };
            if timed_out && state.wakeups == 0 {
                state.waiting -= 1;
                return false;
            }
        }
    }
}

/// Counts out a worker whose job panicked, and starts a replacement if its jobs need one.
struct CountOutOnPanic<'a, J: Jobs>(&'a Arc<Inner<J>>);

impl<J: Jobs> Drop for CountOutOnPanic<'_, J> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let inner = self.0;
        let mut state = inner.state.lock();
        state.live -= 1;
        if state.live == 0 {
            inner.gone.notify_all();
        }
        inner.notify(&mut state);
    }
}

#[cfg(test)]
impl<J: Jobs> Pool<J> {
    /// How many workers wait for a signal.
    fn waiting(&self) -> usize {
        self.inner.state.lock().waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::{Receiver, Sender};
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A bound on waits that only a broken pool reaches (the test then fails instead of hanging).
    const LONG: Duration = Duration::from_secs(60);

    type Hook = Box<dyn FnOnce(&Mutex<VecDeque<u32>>) + Send>;

    /// A queue of numbers; each run reports its number, then waits for a release if `hold`.
    #[derive(Default)]
    struct Numbers {
        queue: Mutex<VecDeque<u32>>,
        closed: Mutex<bool>,
        ran: Mutex<Option<Sender<u32>>>,
        hold: Option<Receiver<()>>,
        running: AtomicUsize,
        most_running: AtomicUsize,
        /// Called (with the queue) at the empty look of this number (1-based), under the pool's lock.
        on_empty: Mutex<Option<(usize, Hook)>>,
        empty_looks: AtomicUsize,
    }

    impl Jobs for Numbers {
        type Job = u32;

        fn take(&self) -> Take<u32> {
            if let Some(n) = self.queue.lock().pop_front() {
                return Take::Job(n);
            }
            let look = self.empty_looks.fetch_add(1, Ordering::SeqCst) + 1;
            let mut hook = self.on_empty.lock();
            if hook.as_ref().is_some_and(|(at, _)| *at == look) {
                let (_, hook) = hook.take().unwrap();
                hook(&self.queue);
            }
            if *self.closed.lock() { Take::Closed } else { Take::Empty }
        }

        fn backlog(&self) -> Backlog {
            Backlog { ready: self.queue.lock().len(), closed: *self.closed.lock() }
        }

        fn run(&self, n: u32) {
            let running = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_running.fetch_max(running, Ordering::SeqCst);
            if let Some(ran) = self.ran.lock().as_ref() {
                let _ = ran.send(n);
            }
            if let Some(hold) = &self.hold {
                let _ = hold.recv_timeout(LONG);
            }
            self.running.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn numbers(hold: Option<Receiver<()>>) -> (Numbers, Receiver<u32>) {
        let (ran, runs) = crossbeam_channel::unbounded();
        (Numbers { ran: Mutex::new(Some(ran)), hold, ..Numbers::default() }, runs)
    }

    fn push(pool: &Pool<Numbers>, n: u32) {
        pool.jobs().queue.lock().push_back(n);
        pool.notify();
    }

    fn next(runs: &Receiver<u32>) -> u32 {
        runs.recv_timeout(LONG).expect("a job runs")
    }

    fn wait_until(what: impl Fn() -> bool) {
        let deadline = Instant::now() + LONG;
        while !what() {
            assert!(Instant::now() < deadline, "never happened");
            std::thread::yield_now();
        }
    }

    #[test]
    fn workers_start_on_demand_up_to_the_limit() {
        let (release, hold) = crossbeam_channel::unbounded();
        let (jobs, runs) = numbers(Some(hold));
        let pool = Pool::new("test-pool", 2, Duration::from_secs(3600), jobs);
        assert_eq!(pool.live(), 0, "no job, no worker");
        for n in 0..5 {
            push(&pool, n);
        }
        let mut seen = vec![next(&runs), next(&runs)];
        assert_eq!(pool.live(), 2, "two jobs held: two workers, the limit");
        for _ in 0..5 {
            release.send(()).unwrap();
        }
        seen.extend([next(&runs), next(&runs), next(&runs)]);
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        assert_eq!(pool.jobs().most_running.load(Ordering::SeqCst), 2);

        // An idle worker is woken rather than a new one started.
        wait_until(|| pool.waiting() == 2);
        release.send(()).unwrap();
        push(&pool, 5);
        assert_eq!(pool.live(), 2);
        assert_eq!(next(&runs), 5);
        pool.stop();
        assert!(pool.wait_stopped(Instant::now() + LONG));
        assert_eq!(pool.live(), 0);
    }

    #[test]
    fn a_job_made_ready_as_the_last_worker_retires_starts_another() {
        let (jobs, runs) = numbers(None);
        // No linger: a worker retires at its second empty look in a row (the first is before it
        // waits). At that look, under the pool's lock, job 2 is made ready and its notification
        // sent from another thread, which can only take the lock once the worker decided to go.
        let pool = Pool::new("test-pool", 1, Duration::ZERO, jobs);
        let notifier = pool.clone();
        let (notified, notified_rx) = crossbeam_channel::bounded(1);
        *pool.jobs().on_empty.lock() = Some((
            2,
            Box::new(move |queue| {
                queue.lock().push_back(2);
                std::thread::spawn(move || {
                    notifier.notify();
                    notified.send(()).unwrap();
                });
            }),
        ));
        push(&pool, 1);
        assert_eq!(next(&runs), 1);
        assert_eq!(next(&runs), 2, "the job made ready at the retirement is run");
        notified_rx.recv_timeout(LONG).unwrap();
        assert!(pool.wait_stopped(Instant::now() + LONG), "the second worker retires too");
        assert!(pool.jobs().empty_looks.load(Ordering::SeqCst) >= 4, "two workers, two empty looks each");
    }

    #[test]
    fn the_last_look_before_retiring_sees_a_job_made_ready_while_lingering() {
        let (jobs, runs) = numbers(None);
        // Job 2 is made ready (without a notification) at the worker's first empty look: the
        // look after its linger finds it.
        *jobs.on_empty.lock() = Some((1, Box::new(|queue| queue.lock().push_back(2))));
        let pool = Pool::new("test-pool", 1, Duration::ZERO, jobs);
        push(&pool, 1);
        assert_eq!(next(&runs), 1);
        assert_eq!(next(&runs), 2);
        assert!(pool.wait_stopped(Instant::now() + LONG));
    }

    #[test]
    fn a_paused_pool_starts_workers_when_opened() {
        let (jobs, runs) = numbers(None);
        let pool = Pool::paused("test-pool", 3, Duration::ZERO, jobs);
        push(&pool, 1);
        push(&pool, 2);
        assert_eq!(pool.live(), 0);
        pool.open();
        let mut seen = [next(&runs), next(&runs)];
        seen.sort();
        assert_eq!(seen, [1, 2]);
        assert!(pool.wait_stopped(Instant::now() + LONG));
    }

    #[test]
    fn a_stopped_pool_finishes_the_jobs_held_and_takes_no_other() {
        let (release, hold) = crossbeam_channel::unbounded();
        let (jobs, runs) = numbers(Some(hold));
        let pool = Pool::new("test-pool", 1, Duration::from_secs(3600), jobs);
        push(&pool, 1);
        assert_eq!(next(&runs), 1);
        push(&pool, 2);
        pool.stop();
        push(&pool, 3);
        release.send(()).unwrap();
        assert!(pool.wait_stopped(Instant::now() + LONG));
        assert_eq!(*pool.jobs().queue.lock(), [2, 3], "nothing taken after the stop");
        assert!(runs.try_recv().is_err());
    }

    #[test]
    fn closing_the_source_ends_lingering_workers() {
        let (jobs, runs) = numbers(None);
        let pool = Pool::new("test-pool", 1, Duration::from_secs(3600), jobs);
        push(&pool, 1);
        assert_eq!(next(&runs), 1);
        wait_until(|| pool.waiting() == 1);
        *pool.jobs().closed.lock() = true;
        pool.notify();
        assert!(pool.wait_stopped(Instant::now() + LONG));
    }

    #[test]
    fn a_panicking_job_is_counted_out_and_replaced() {
        struct Panicky(Mutex<VecDeque<bool>>, Sender<()>);
        impl Jobs for Panicky {
            type Job = bool;
            fn take(&self) -> Take<bool> {
                self.0.lock().pop_front().map_or(Take::Empty, Take::Job)
            }
            fn backlog(&self) -> Backlog {
                Backlog { ready: self.0.lock().len(), closed: false }
            }
            fn run(&self, panics: bool) {
                assert!(!panics, "a job panics on purpose");
                self.1.send(()).unwrap();
            }
        }
        let (ran, runs) = crossbeam_channel::unbounded();
        let pool = Pool::new("test-pool", 1, Duration::ZERO, Panicky(Mutex::new(VecDeque::new()), ran));
        pool.jobs().0.lock().extend([true, false]);
        pool.notify();
        runs.recv_timeout(LONG).expect("the job after the panic runs");
        assert!(pool.wait_stopped(Instant::now() + LONG));
    }
}
