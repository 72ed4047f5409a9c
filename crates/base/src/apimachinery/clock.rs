//! Time sources (k8s.io/utils/clock).
//!
//! Code that schedules work by time asks a [`Clock`] instead of calling `Instant::now()`, so that
//! tests can drive time by hand with a [`FakeClock`]. Go's `time.Time` carries a monotonic and a
//! wall reading; here they are two readings of the same clock: [`Clock::now`] (an `Instant`, for
//! measuring intervals) and [`Clock::wall`] (a `Timestamp`, for what is written into objects).
//! Nothing here sleeps: a component that waits
//! for a point in time waits on its own condition variable with a real-time timeout, and, to
//! notice a fake clock jumping forward, [`Clock::subscribe`]s a [`ClockListener`] that wakes it.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;

/// `metav1.Time`'s precision: what the API stores and serializes (RFC 3339, whole seconds).
pub fn whole_seconds(time: Timestamp) -> Timestamp {
    Timestamp::from_second(time.as_second()).unwrap_or(time)
}

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current time on the monotonic clock, for intervals and deadlines.
    fn now(&self) -> Instant;

    /// The current wall-clock time, for timestamps that leave the process.
    fn wall(&self) -> Timestamp;

    /// Asks to be told whenever this clock's time changes other than by the passing of real time.
    /// Real time never jumps, so the default keeps nothing; [`FakeClock`] calls every listener
    /// that is still alive after each [`FakeClock::advance`] or [`FakeClock::set`]. Listeners are
    /// held weakly: dropping one unsubscribes it.
    fn subscribe(&self, _listener: Weak<dyn ClockListener>) {}
}

/// Something waiting on a clock, to be woken when the clock's time jumps.
pub trait ClockListener: Send + Sync {
    /// Called after the time changed. Called without any of the clock's locks held, so it may
    /// take its own locks and read the clock.
    fn time_changed(&self);
}

/// The system's monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to, for tests. Its two readings move together.
pub struct FakeClock {
    now: Mutex<Readings>,
    listeners: Mutex<Vec<Weak<dyn ClockListener>>>,
}

/// The fake time on both clocks.
#[derive(Debug, Clone, Copy)]
struct Readings {
    monotonic: Instant,
    wall: Timestamp,
}

impl FakeClock {
    /// A fake clock reading the current real time, which it keeps until moved.
    pub fn new() -> Self {
        FakeClock::at(Timestamp::now())
    }

    /// A fake clock whose wall reading starts at `wall` (tests that check written timestamps).
    pub fn at(wall: Timestamp) -> Self {
        let now = Readings { monotonic: Instant::now(), wall };
        FakeClock { now: Mutex::new(now), listeners: Mutex::new(Vec::new()) }
    }

    /// Moves the time forward by `step` and wakes everything waiting on this clock.
    pub fn advance(&self, step: Duration) {
        {
            let mut now = self.now.lock();
            now.monotonic += step;
            now.wall = now.wall.checked_add(step).expect("the fake wall clock stays within jiff's range");
        }
        self.notify();
    }

    /// Sets the time (forwards or backwards; the wall reading moves by as much) and wakes
    /// everything waiting on this clock.
    pub fn set(&self, time: Instant) {
        {
            let mut now = self.now.lock();
            let shift = match time.checked_duration_since(now.monotonic) {
                Some(forward) => SignedDuration::try_from(forward),
                None => SignedDuration::try_from(now.monotonic - time).map(|back| -back),
            }
            .expect("a fake clock moves by less than jiff's range");
            now.monotonic = time;
            now.wall = now.wall.checked_add(shift).expect("the fake wall clock stays within jiff's range");
        }
        self.notify();
    }

    /// Calls the live listeners, with no lock held so that they may read the clock.
    fn notify(&self) {
        let live: Vec<Arc<dyn ClockListener>> = {
            let mut listeners = self.listeners.lock();
            listeners.retain(|l| l.strong_count() > 0);
            listeners.iter().filter_map(Weak::upgrade).collect()
        };
        for listener in live {
            listener.time_changed();
        }
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let now = *self.now.lock();
        f.debug_struct("FakeClock").field("now", &now.monotonic).field("wall", &now.wall).finish_non_exhaustive()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.now.lock().monotonic
    }

    fn wall(&self) -> Timestamp {
        self.now.lock().wall
    }

    fn subscribe(&self, listener: Weak<dyn ClockListener>) {
        let mut listeners = self.listeners.lock();
        listeners.retain(|l| l.strong_count() > 0);
        listeners.push(listener);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl ClockListener for Counter {
        fn time_changed(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn fake_clock_moves_only_when_told() {
        let clock = FakeClock::new();
        let start = clock.now();
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_secs(3));
        assert_eq!(clock.now(), start + Duration::from_secs(3));
        clock.set(start);
        assert_eq!(clock.now(), start);
    }

    #[test]
    fn fake_wall_time_moves_with_the_monotonic_time() {
        let wall: Timestamp = "2026-01-02T03:04:05Z".parse().expect("a timestamp");
        let clock = FakeClock::at(wall);
        let start = clock.now();
        clock.advance(Duration::from_secs(3));
        assert_eq!(clock.wall(), wall + SignedDuration::from_secs(3));
        clock.set(start);
        assert_eq!(clock.wall(), wall);
        clock.set(start + Duration::from_millis(1500));
        assert_eq!(clock.wall(), wall + SignedDuration::from_millis(1500));
    }

    #[test]
    fn fake_clock_wakes_live_listeners_only() {
        let clock = FakeClock::new();
        let kept = Arc::new(Counter::default());
        let dropped = Arc::new(Counter::default());
        let kept_weak: Weak<dyn ClockListener> = Arc::downgrade(&kept) as Weak<dyn ClockListener>;
        let dropped_weak: Weak<dyn ClockListener> = Arc::downgrade(&dropped) as Weak<dyn ClockListener>;
        clock.subscribe(kept_weak);
        clock.subscribe(dropped_weak);
        clock.advance(Duration::from_millis(1));
        drop(dropped);
        clock.set(clock.now());
        assert_eq!(kept.0.load(Ordering::SeqCst), 2);
        assert_eq!(clock.listeners.lock().len(), 1);
    }

    #[test]
    fn real_clock_is_monotonic() {
        let a = RealClock.now();
        assert!(RealClock.now() >= a);
    }
}
