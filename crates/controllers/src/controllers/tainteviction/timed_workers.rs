//! Work scheduled for a point in time, after upstream v1.33's
//! `pkg/controller/tainteviction/timed_workers.go` (`TimedWorkerQueue`). Upstream starts a
//! timer per item (`time.AfterFunc`); here the controller's work queue is the timer: adding
//! work schedules its key with a delay, and when the key comes up the worker asks
//! [`TimedWorkers::start_due`] whether the work is (still) due. Cancelled work simply is not
//! found; work rescheduled later is put back for its new time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::apimachinery::clock::Clock;

/// Asks for `key` to be looked at after a delay (the controller's `queue.add_after`).
pub type Schedule = Box<dyn Fn(&str, Duration) + Send + Sync>;

/// One scheduled piece of work (`TimedWorker`).
#[derive(Debug, Clone)]
struct Worker {
    created_at: Instant,
    fire_at: Instant,
    /// When it runs: `delay = fire_at - created_at` after it was added, as upstream's timer.
    due: Instant,
    /// Upstream keeps no timer (a nil worker) for work that runs at once: it cannot be
    /// cancelled and is invisible to [`TimedWorkers::get_worker`].
    timer: bool,
    running: bool,
    id: u64,
}

/// A scheduled work item as [`TimedWorkers::get_worker`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    /// `CreatedAt`: the time the delay is counted from.
    pub created_at: Instant,
    /// `FireAt`: the time the work is for.
    pub fire_at: Instant,
}

/// Work that became due and now runs; hand it back to [`TimedWorkers::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    /// The time the work was for.
    pub fire_at: Instant,
    id: u64,
}

/// `TimedWorkerQueue`.
pub struct TimedWorkers {
    clock: Arc<dyn Clock>,
    schedule: Schedule,
    workers: Mutex<State>,
}

#[derive(Default)]
struct State {
    workers: HashMap<String, Worker>,
    next_id: u64,
}

impl TimedWorkers {
    /// A queue that has `schedule` look at a key when its work is due.
    pub fn new(clock: Arc<dyn Clock>, schedule: Schedule) -> TimedWorkers {
        TimedWorkers { clock, schedule, workers: Mutex::new(State::default()) }
    }

    /// `AddWork`: schedules work for `key` to run `fire_at - created_at` from now; nothing if
    /// work for `key` exists already.
    pub fn add_work(&self, key: &str, created_at: Instant, fire_at: Instant) {
        let now = self.clock.now();
        let delay = fire_at.saturating_duration_since(created_at);
        let mut state = self.workers.lock();
        if state.workers.contains_key(key) {
            log::trace!("trying to add already existing work for {key}, skipping");
            return;
        }
        state.next_id += 1;
        let worker = Worker {
            created_at,
            fire_at,
            due: now + delay,
            timer: !delay.is_zero(),
            running: false,
            id: state.next_id,
        };
        state.workers.insert(key.to_string(), worker);
        drop(state);
        (self.schedule)(key, delay);
    }

    /// `CancelWork`: forgets the work for `key`; true if it had a timer to stop (work that runs
    /// at once cannot be cancelled and reports false).
    pub fn cancel_work(&self, key: &str) -> bool {
        let removed = self.workers.lock().workers.remove(key);
        removed.is_some_and(|w| w.timer)
    }

    /// `GetWorkerUnsafe`: the timed work scheduled for `key` (none for work that runs at once).
    pub fn get_worker(&self, key: &str) -> Option<Scheduled> {
        let state = self.workers.lock();
        let worker = state.workers.get(key).filter(|w| w.timer)?;
        Some(Scheduled { created_at: worker.created_at, fire_at: worker.fire_at })
    }

    /// Called when `key` comes up: the work to run now, if it exists, is due and is not running
    /// already. Work not due yet is scheduled again for its time.
    pub fn start_due(&self, key: &str) -> Option<Started> {
        let now = self.clock.now();
        let mut state = self.workers.lock();
        let worker = state.workers.get_mut(key)?;
        if worker.running {
            return None;
        }
        if worker.due > now {
            let wait = worker.due - now;
            drop(state);
            (self.schedule)(key, wait);
            return None;
        }
        worker.running = true;
        Some(Started { fire_at: worker.fire_at, id: worker.id })
    }

    /// The work started by [`TimedWorkers::start_due`] finished: it is forgotten (unless it
    /// was cancelled and replaced meanwhile).
    pub fn finish(&self, key: &str, started: Started) {
        let mut state = self.workers.lock();
        if state.workers.get(key).is_some_and(|w| w.id == started.id) {
            state.workers.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;

    /// What the workers asked to be scheduled: key and delay.
    type ScheduleLog = Arc<Mutex<Vec<(String, Duration)>>>;

    fn workers() -> (Arc<FakeClock>, ScheduleLog, TimedWorkers) {
        let clock = Arc::new(FakeClock::new());
        let scheduled = Arc::new(Mutex::new(Vec::new()));
        let sink = scheduled.clone();
        let schedule: Schedule = Box::new(move |key, delay| sink.lock().push((key.to_string(), delay)));
        (clock.clone(), scheduled, TimedWorkers::new(clock, schedule))
    }

    #[test]
    fn work_runs_once_when_due() {
        let (clock, scheduled, workers) = workers();
        let now = clock.now();
        workers.add_work("ns/p", now, now + Duration::from_secs(2));
        assert_eq!(*scheduled.lock(), [("ns/p".to_string(), Duration::from_secs(2))]);
        assert_eq!(workers.get_worker("ns/p").map(|w| w.fire_at), Some(now + Duration::from_secs(2)));
        clock.advance(Duration::from_secs(1));
        assert_eq!(workers.start_due("ns/p"), None, "not due yet");
        assert_eq!(scheduled.lock().last(), Some(&("ns/p".to_string(), Duration::from_secs(1))));
        clock.advance(Duration::from_secs(1));
        let started = workers.start_due("ns/p").expect("due");
        assert_eq!(workers.start_due("ns/p"), None, "running already");
        workers.finish("ns/p", started);
        assert_eq!(workers.get_worker("ns/p"), None);
        assert_eq!(workers.start_due("ns/p"), None);
    }

    #[test]
    fn cancelled_work_does_not_run() {
        let (clock, _, workers) = workers();
        let now = clock.now();
        workers.add_work("ns/p", now, now + Duration::from_secs(5));
        assert!(workers.cancel_work("ns/p"));
        assert!(!workers.cancel_work("ns/p"));
        clock.advance(Duration::from_secs(5));
        assert_eq!(workers.start_due("ns/p"), None);
    }

    #[test]
    fn immediate_work_has_no_timer_and_cannot_be_replaced() {
        let (clock, scheduled, workers) = workers();
        let now = clock.now();
        workers.add_work("ns/p", now, now);
        assert_eq!(*scheduled.lock(), [("ns/p".to_string(), Duration::ZERO)]);
        assert_eq!(workers.get_worker("ns/p"), None, "upstream's nil worker");
        workers.add_work("ns/p", now, now + Duration::from_secs(9));
        assert_eq!(scheduled.lock().len(), 1, "existing work is kept");
        let started = workers.start_due("ns/p").expect("due at once");
        assert_eq!(started.fire_at, now);
        assert!(!workers.cancel_work("ns/p"), "no timer to stop");
    }

    #[test]
    fn the_delay_counts_from_now_as_upstream_timers_do() {
        let (clock, scheduled, workers) = workers();
        let created = clock.now();
        clock.advance(Duration::from_secs(3));
        workers.add_work("ns/p", created, created + Duration::from_secs(5));
        assert_eq!(scheduled.lock()[0].1, Duration::from_secs(5));
        clock.advance(Duration::from_secs(2));
        assert_eq!(workers.start_due("ns/p"), None);
        clock.advance(Duration::from_secs(3));
        assert!(workers.start_due("ns/p").is_some());
    }

    #[test]
    fn a_replacement_is_not_forgotten_by_the_old_run() {
        let (clock, _, workers) = workers();
        let now = clock.now();
        workers.add_work("ns/p", now, now + Duration::from_secs(1));
        clock.advance(Duration::from_secs(1));
        let old = workers.start_due("ns/p").expect("due");
        assert!(workers.cancel_work("ns/p"));
        workers.add_work("ns/p", clock.now(), clock.now() + Duration::from_secs(1));
        workers.finish("ns/p", old);
        assert!(workers.get_worker("ns/p").is_some());
    }
}
