//! The one thread of a controller set that waits: it opens each controller's worker pools once
//! the controller's caches have synced (polling its gate every 100 ms, as client-go's
//! `WaitForCacheSync`), and starts the runs of its periodic tasks when they are due, each on a
//! short-lived thread of its own. A task's next run is due one period after its previous run
//! finished (`wait.Until`), so runs of one task never overlap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::Schedule;
use crate::apimachinery::clock::{Clock, ClockListener};

/// How often closed gates are looked at (client-go polls caches every 100 ms).
const GATE_POLL: Duration = Duration::from_millis(100);

/// A task run on a schedule once its gate opens.
pub(super) struct Task {
    /// The name of the threads of its runs.
    pub thread: String,
    pub schedule: Schedule,
    pub run: Arc<dyn Fn() + Send + Sync>,
}

/// What a controller waits for, and what then starts.
pub(super) struct Gated {
    /// Whether the controller may start working; looked at until it says so.
    pub open: Box<dyn FnMut() -> bool + Send>,
    /// Called once when it opens (opens the worker pools).
    pub on_open: Box<dyn FnOnce() + Send>,
    /// Scheduled when it opens.
    pub tasks: Vec<Task>,
}

/// The scheduler of a controller set; its thread starts with the first [`Scheduler::add`].
pub(super) struct Scheduler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    stopped: bool,
    /// Gates not yet open.
    gates: Vec<Gated>,
    tasks: Vec<Task>,
    /// The next runs: (when, index in `tasks`).
    due: BinaryHeap<Reverse<(Instant, usize)>>,
    /// The threads of runs, joined when finished and at stop.
    runs: Vec<JoinHandle<()>>,
}

impl Scheduler {
    pub(super) fn new(clock: Arc<dyn Clock>) -> Scheduler {
        let shared = Arc::new(Shared { clock, state: Mutex::new(State::default()), wake: Condvar::new() });
        shared.clock.subscribe(Arc::downgrade(&shared) as Weak<dyn ClockListener>);
        Scheduler { shared, thread: None }
    }

    /// Adds a controller: its gate is looked at at once, then every 100 ms until it opens.
    pub(super) fn add(&mut self, gated: Gated) {
        let mut state = self.shared.state.lock();
        if state.stopped {
            return;
        }
        state.gates.push(gated);
        self.shared.wake.notify_all();
        drop(state);
        if self.thread.is_none() {
            let shared = self.shared.clone();
            match std::thread::Builder::new().name("controller-scheduler".into()).spawn(move || shared.run()) {
                Ok(thread) => self.thread = Some(thread),
                Err(e) => log::error!("cannot start the controllers' scheduler thread: {e}"),
            }
        }
    }

    /// Stops the thread at once (no gate opens and no run starts afterwards) and returns the
    /// threads of the runs still going, for the caller to wait for.
    pub(super) fn stop(&mut self) -> Vec<JoinHandle<()>> {
        let mut state = self.shared.state.lock();
        state.stopped = true;
        state.gates.clear();
        state.due.clear();
        self.shared.wake.notify_all();
        let runs = std::mem::take(&mut state.runs);
        drop(state);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        runs
    }

    /// When the next run of task `index` (in the order added) is due.
    #[cfg(test)]
    fn next_run(&self, index: usize) -> Option<Instant> {
        let state = self.shared.state.lock();
        state.due.iter().find(|Reverse((_, i))| *i == index).map(|Reverse((at, _))| *at)
    }
}

/// A set dropped without being stopped leaves no thread polling its gates.
impl Drop for Scheduler {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn run(self: Arc<Self>) {
        let mut state = self.state.lock();
        while !state.stopped {
            self.open_gates(&mut state);
            let now = self.clock.now();
            while let Some(&Reverse((at, index))) = state.due.peek()
                && at <= now
            {
                state.due.pop();
                self.start(&mut state, index);
            }
            let next = state.due.peek().map(|Reverse((at, _))| at.saturating_duration_since(now));
            let poll = (!state.gates.is_empty()).then_some(GATE_POLL);
            match next.into_iter().chain(poll).min() {
                Some(wait) => _ = self.wake.wait_for(&mut state, wait),
                None => self.wake.wait(&mut state),
            }
        }
    }

    /// Opens the gates that are ready and schedules their tasks' first runs.
    fn open_gates(&self, state: &mut MutexGuard<'_, State>) {
        let mut index = 0;
        while index < state.gates.len() {
            if !(state.gates[index].open)() {
                index += 1;
                continue;
            }
            let gated = state.gates.swap_remove(index);
            (gated.on_open)();
            let now = self.clock.now();
            for task in gated.tasks {
                let first = match task.schedule {
                    Schedule::Every(_) | Schedule::Once => now,
                    Schedule::EveryAfterOne(period) => now.checked_add(period).unwrap_or(now),
                };
                let task_index = state.tasks.len();
                state.tasks.push(task);
                state.due.push(Reverse((first, task_index)));
            }
        }
    }

    /// Starts a run of task `index` on a thread of its own.
    fn start(self: &Arc<Self>, state: &mut State, index: usize) {
        state.runs.retain(|run| !run.is_finished());
        let task = &state.tasks[index];
        let (shared, run) = (self.clone(), task.run.clone());
        let spawned = std::thread::Builder::new().name(task.thread.clone()).spawn(move || {
            let _finished = Finished { shared, index };
            run();
        });
        match spawned {
            Ok(thread) => state.runs.push(thread),
            Err(e) => {
                log::error!("cannot start {}: {e}", task.thread);
                self.schedule_next(state, index);
            }
        }
    }

    /// Schedules the run after the one that just ended, if the task repeats.
    fn schedule_next(&self, state: &mut State, index: usize) {
        let period = match state.tasks[index].schedule {
            Schedule::Every(period) | Schedule::EveryAfterOne(period) => period,
            Schedule::Once => return,
        };
        let now = self.clock.now();
        state.due.push(Reverse((now.checked_add(period).unwrap_or(now), index)));
        self.wake.notify_all();
    }
}

impl ClockListener for Shared {
    fn time_changed(&self) {
        // Taking the lock orders this wake-up after the thread's read of the clock.
        let _state = self.state.lock();
        self.wake.notify_all();
    }
}

/// Schedules a task's next run when its run ends (however it ends).
struct Finished {
    shared: Arc<Shared>,
    index: usize,
}

impl Drop for Finished {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        if !state.stopped {
            self.shared.schedule_next(&mut state, self.index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use crossbeam_channel::{Receiver, Sender};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    const LONG: Duration = Duration::from_secs(60);
    const HOUR: Duration = Duration::from_secs(3600);

    fn wait_until(what: impl Fn() -> bool) {
        let deadline = Instant::now() + LONG;
        while !what() {
            assert!(Instant::now() < deadline, "never happened");
            std::thread::yield_now();
        }
    }

    /// A task that reports each run's start and, when `hold` is given, waits for a release.
    fn task(schedule: Schedule, started: Sender<()>, hold: Option<Receiver<()>>) -> Task {
        let run = move || {
            started.send(()).unwrap();
            if let Some(hold) = &hold {
                hold.recv_timeout(LONG).unwrap();
            }
        };
        Task { thread: "test-task".into(), schedule, run: Arc::new(run) }
    }

    fn open_gate(tasks: Vec<Task>) -> Gated {
        Gated { open: Box::new(|| true), on_open: Box::new(|| {}), tasks }
    }

    #[test]
    fn the_next_run_is_one_period_after_the_previous_run_finished() {
        let clock = Arc::new(FakeClock::new());
        let t0 = clock.now();
        let mut scheduler = Scheduler::new(clock.clone());
        let (started, starts) = crossbeam_channel::unbounded();
        let (release, hold) = crossbeam_channel::unbounded();
        scheduler.add(open_gate(vec![task(Schedule::Every(HOUR), started, Some(hold))]));
        starts.recv_timeout(LONG).expect("runs at once");
        assert_eq!(scheduler.next_run(0), None, "nothing scheduled while it runs");
        clock.advance(2 * HOUR);
        release.send(()).unwrap();
        wait_until(|| scheduler.next_run(0).is_some());
        assert_eq!(scheduler.next_run(0), Some(t0 + 3 * HOUR), "one period after it finished");
        assert!(starts.try_recv().is_err(), "runs never overlap");
        clock.advance(HOUR);
        starts.recv_timeout(LONG).expect("runs again when due");
        release.send(()).unwrap();
        let runs = scheduler.stop();
        runs.into_iter().for_each(|run| run.join().unwrap());
        assert_eq!(scheduler.next_run(0), None);
    }

    #[test]
    fn resyncs_wait_one_period_and_once_tasks_run_once() {
        let clock = Arc::new(FakeClock::new());
        let t0 = clock.now();
        let mut scheduler = Scheduler::new(clock.clone());
        let (resynced, resyncs) = crossbeam_channel::unbounded();
        let (ran, once) = crossbeam_channel::unbounded();
        scheduler
            .add(open_gate(vec![task(Schedule::EveryAfterOne(HOUR), resynced, None), task(Schedule::Once, ran, None)]));
        once.recv_timeout(LONG).expect("runs at once");
        wait_until(|| scheduler.shared.state.lock().runs.iter().all(|r| r.is_finished()));
        assert_eq!(scheduler.next_run(1), None, "never again");
        assert_eq!(scheduler.next_run(0), Some(t0 + HOUR));
        assert!(resyncs.try_recv().is_err());
        clock.advance(HOUR);
        resyncs.recv_timeout(LONG).expect("one period in");
        wait_until(|| scheduler.next_run(0).is_some());
        assert_eq!(scheduler.next_run(0), Some(t0 + 2 * HOUR));
        scheduler.stop();
        assert!(once.try_recv().is_err());
    }

    #[test]
    fn nothing_starts_before_the_gate_opens_nor_after_the_stop() {
        let clock = Arc::new(FakeClock::new());
        let mut scheduler = Scheduler::new(clock.clone());
        let (started, starts) = crossbeam_channel::unbounded();
        let (opened_tx, opened) = crossbeam_channel::unbounded();
        let gate = Arc::new(AtomicBool::new(false));
        let looks = Arc::new(AtomicUsize::new(0));
        let (open, counted) = (gate.clone(), looks.clone());
        scheduler.add(Gated {
            open: Box::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                open.load(Ordering::SeqCst)
            }),
            on_open: Box::new(move || opened_tx.send(()).unwrap()),
            tasks: vec![task(Schedule::Every(HOUR), started, None)],
        });
        wait_until(|| looks.load(Ordering::SeqCst) >= 2);
        assert!(opened.try_recv().is_err() && starts.try_recv().is_err(), "closed gate");
        gate.store(true, Ordering::SeqCst);
        opened.recv_timeout(LONG).expect("the pools open");
        starts.recv_timeout(LONG).expect("the task runs");
        wait_until(|| scheduler.next_run(0).is_some());
        scheduler.stop();
        clock.advance(HOUR);
        assert!(starts.try_recv().is_err(), "no run after the stop");
        assert_eq!(opened.try_recv(), Err(crossbeam_channel::TryRecvError::Disconnected), "opened once");
    }
}
