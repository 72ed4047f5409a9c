//! The election itself, free of threads and HTTP: client-go's `tryAcquireOrRenew`, `release`
//! and `maybeReportTransition` over any [`Lock`], with an injectable [`Clock`].
//!
//! As upstream, a candidate never compares the record's timestamps with its own clock. It
//! remembers when, by its local monotonic clock, it last saw the record *change*; the holder's
//! term runs out `leaseDurationSeconds` after that moment. Clock skew between machines thus
//! does not matter, only their clock rates do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::record::{Record, micro};
use crate::apimachinery::clock::Clock;

/// Why a lock operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The API server refused the request, or it got no HTTP answer.
    #[error("{0}")]
    Api(#[from] crate::client::Error),
    /// An update before any get or create: there is no object to update.
    #[error("lease not initialized, call get or create first")]
    NotInitialized,
    /// An Event before any get or create: there is no Lease to record it on.
    #[error("no Lease to record the event on")]
    NoLease,
    /// The worker thread that makes the requests has ended.
    #[error("the leader election worker has stopped")]
    WorkerStopped,
    /// The worker dropped the request without answering.
    #[error("the request was dropped")]
    Dropped,
    /// No answer came before the call's deadline (the request is abandoned).
    #[error("no answer from the API server before the deadline")]
    Deadline,
    /// The worker answered a read with a write's answer.
    #[error("unexpected answer to a read")]
    UnexpectedAnswer,
    /// The elector is stopping: the caller no longer waits for answers.
    #[error("the leader elector is stopping")]
    Cancelled,
}

/// The object that carries the record (client-go's `resourcelock.Interface`). Every write is
/// conditional on the object last read or written being current (optimistic concurrency).
pub trait Lock {
    /// `namespace/name`, for logs.
    fn describe(&self) -> &str;
    /// The current record, or `None` when the object does not exist.
    fn get(&mut self, deadline: Instant) -> Result<Option<Record>, LockError>;
    fn create(&mut self, record: &Record, deadline: Instant) -> Result<(), LockError>;
    /// Replaces the record of the object last read or written; fails if it changed since.
    fn update(&mut self, record: &Record, deadline: Instant) -> Result<(), LockError>;
}

/// Why an attempt to acquire or renew did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    /// Another candidate holds a term that has not run out yet.
    #[error("lock is held by {0} and has not yet expired")]
    HeldBy(String),
    #[error("error retrieving resource lock: {0}")]
    Get(#[source] LockError),
    #[error("error initially creating leader election record: {0}")]
    Create(#[source] LockError),
    #[error("failed to update lock: {0}")]
    Update(#[source] LockError),
}

/// The healthz watchdog's failure: we hold the Lease by the last record we saw, but have not
/// renewed it for longer than the lease duration plus the tolerance (client-go's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed election to renew leadership on lease {lease}")]
pub struct LeaseNotRenewed {
    /// The Lease's name.
    pub lease: String,
}

/// The record as last seen, and when it was seen to change (local monotonic time).
#[derive(Clone, Debug)]
pub struct Observed {
    pub record: Record,
    pub at: Instant,
}

impl Observed {
    /// Whether the holder's term is still running at `now`: the record has not changed for
    /// less than its `leaseDurationSeconds` (client-go's `isLeaseValid`).
    pub fn is_valid(&self, now: Instant) -> bool {
        self.expiry() > now
    }

    /// When the holder's term runs out by our clock, unless the record changes before.
    pub fn expiry(&self) -> Instant {
        self.at + Duration::from_secs(u64::try_from(self.record.lease_duration_seconds).unwrap_or(0))
    }
}

/// What a record seen outside an attempt (by the standby's watch) asks of the election thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The record is the one already seen: keep the schedule (and the term's start).
    Unchanged,
    /// Nobody holds the lock (released, or deleted), or the record names us: attempt now.
    Now,
    /// Another holds a term that runs out at this instant by our clock: attempt then at the latest.
    HeldUntil(Instant),
}

#[derive(Default)]
struct State {
    observed: Option<Observed>,
    /// Between acquiring and stopping or losing the lease.
    leading: bool,
    /// The election thread has ended.
    finished: bool,
}

/// The election's state, written by the election thread and read by the elector's handle.
pub struct Shared {
    pub identity: String,
    /// The lock's name, for the health check's error.
    pub name: String,
    pub lease_duration: Duration,
    /// Where the election reads the time: the monotonic reading for expiry, the wall reading
    /// for the record's informational timestamps. Tests inject a fake.
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    pub fn new(identity: &str, name: &str, lease_duration: Duration, clock: Arc<dyn Clock>) -> Shared {
        Shared {
            identity: identity.to_string(),
            name: name.to_string(),
            lease_duration,
            clock,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    pub fn observed(&self) -> Option<Observed> {
        self.state.lock().observed.clone()
    }

    /// Remembers `record` as seen now (client-go's `setObservedRecord`).
    fn set_observed(&self, record: Record) -> Observed {
        let observed = Observed { record, at: self.clock.now() };
        self.state.lock().observed = Some(observed.clone());
        self.changed.notify_all();
        observed
    }

    /// Whether the last record seen names us as holder (client-go's `IsLeader`).
    #[cfg(test)]
    pub fn holds_lock(&self) -> bool {
        self.holds(&self.state.lock())
    }

    fn holds(&self, state: &State) -> bool {
        state.observed.as_ref().is_some_and(|o| o.record.holder_identity == self.identity)
    }

    /// Leading: we acquired the lease, have not stopped or lost it, and the record still names us.
    pub fn is_leader(&self) -> bool {
        let state = self.state.lock();
        state.leading && self.holds(&state)
    }

    pub fn set_leading(&self, leading: bool) {
        self.state.lock().leading = leading;
        self.changed.notify_all();
    }

    /// Marks the election thread as ended: nobody will lead through this elector any more.
    pub fn finish(&self) {
        let mut state = self.state.lock();
        state.leading = false;
        state.finished = true;
        drop(state);
        self.changed.notify_all();
    }

    /// Waits until we lead, the election ends, or `timeout` passes; whether we lead.
    pub fn wait_until_leader(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock();
        loop {
            if state.leading && self.holds(&state) {
                return true;
            }
            if state.finished || self.changed.wait_until(&mut state, deadline).timed_out() {
                return state.leading && self.holds(&state);
            }
        }
    }

    /// client-go's `Check`: an error when the record names us but we have not renewed it for
    /// longer than the lease duration plus `tolerance`. Standbys are always healthy.
    pub fn check(&self, tolerance: Duration) -> Result<(), LeaseNotRenewed> {
        let state = self.state.lock();
        let Some(observed) = state.observed.as_ref().filter(|_| self.holds(&state)) else {
            return Ok(());
        };
        if self.clock.now().saturating_duration_since(observed.at) > self.lease_duration + tolerance {
            return Err(LeaseNotRenewed { lease: self.name.clone() });
        }
        Ok(())
    }
}

/// One candidate's view of the election over a lock.
pub struct Election<L> {
    pub lock: L,
    shared: Arc<Shared>,
    /// The term we ask for, in the whole seconds a Lease records.
    lease_duration_seconds: i32,
    /// The last holder reported as new leader (client-go's `reportedLeader`).
    reported_leader: String,
}

impl<L: Lock> Election<L> {
    pub fn new(lock: L, shared: Arc<Shared>) -> Election<L> {
        let lease_duration_seconds = i32::try_from(shared.lease_duration.as_secs()).unwrap_or(i32::MAX);
        Election { lock, shared, lease_duration_seconds, reported_leader: String::new() }
    }

    /// One attempt to take the lock, or to renew it when we hold it (client-go's
    /// `tryAcquireOrRenew`). Requests give up at `deadline`.
    pub fn try_acquire_or_renew(&mut self, deadline: Instant) -> Result<(), AttemptError> {
        let now = self.shared.clock.now();
        let desired = self.desired_record();
        // 1. Fast path: the holder updates on top of the object it last wrote.
        if let Some(observed) = self.shared.observed().filter(|o| self.is_ours(&o.record) && o.is_valid(now)) {
            let renewal = Self::continued(desired.clone(), &observed.record);
            match self.lock.update(&renewal, deadline) {
                Ok(()) => {
                    self.shared.set_observed(renewal);
                    return Ok(());
                }
                Err(LockError::Cancelled) => return Err(AttemptError::Update(LockError::Cancelled)),
                Err(e) => {
                    log::error!(
                        "failed to update lock {} optimistically: {e}, falling back to slow path",
                        self.describe()
                    )
                }
            }
        }
        // 2. Read the record, or create it.
        let Some(current) = self.lock.get(deadline).map_err(AttemptError::Get)? else {
            self.lock.create(&desired, deadline).map_err(AttemptError::Create)?;
            self.shared.set_observed(desired);
            return Ok(());
        };
        // 3. The clock of the holder's term restarts whenever the record changes.
        let observed = match self.shared.observed() {
            Some(o) if o.record == current => o,
            _ => self.shared.set_observed(current.clone()),
        };
        let ours = self.is_ours(&current);
        if !current.holder_identity.is_empty() && observed.is_valid(now) && !ours {
            return Err(AttemptError::HeldBy(current.holder_identity));
        }
        // 4. Renew our term, or start a new one. A renewal here is client-go's slow path,
        // counted where `tryAcquireOrRenew` counts it: after the read, before the update.
        let record = if ours {
            super::metrics::LeaderMetrics::global().slowpath_exercised(&self.shared.name);
            Self::continued(desired, &current)
        } else {
            Record { leader_transitions: current.leader_transitions.saturating_add(1), ..desired }
        };
        self.lock.update(&record, deadline).map_err(AttemptError::Update)?;
        self.shared.set_observed(record);
        Ok(())
    }

    /// Takes in a record seen without asking (the standby's watch; `None`: the object was
    /// deleted) by the rule of an attempt's read: the term restarts only when the record
    /// changed. Says when the next attempt is due.
    pub fn observe(&mut self, current: Option<Record>) -> Wake {
        let Some(current) = current else {
            return Wake::Now;
        };
        if self.shared.observed().is_some_and(|o| o.record == current) {
            return Wake::Unchanged;
        }
        let observed = self.shared.set_observed(current);
        if observed.record.holder_identity.is_empty() || self.is_ours(&observed.record) {
            return Wake::Now;
        }
        Wake::HeldUntil(observed.expiry())
    }

    /// When to attempt again after a failed attempt, given the `regular` retry: no later than
    /// the instant the term last seen held by another runs out by our clock.
    pub fn next_attempt(&self, regular: Instant) -> Instant {
        match self.shared.observed() {
            Some(o) if !o.record.holder_identity.is_empty() && !self.is_ours(&o.record) => regular.min(o.expiry()),
            _ => regular,
        }
    }

    /// Gives the lock up if the record names us (client-go's `release`): no holder, a
    /// one-second term, both times set to now, the transition count kept. Whether we released.
    pub fn release(&mut self, deadline: Instant) -> Result<bool, LockError> {
        let Some(observed) = self.shared.observed().filter(|o| self.is_ours(&o.record)) else {
            return Ok(false);
        };
        let now = Some(micro(self.shared.clock.wall()));
        let record = Record {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: now,
            renew_time: now,
            leader_transitions: observed.record.leader_transitions,
        };
        self.lock.update(&record, deadline)?;
        self.shared.set_observed(record);
        Ok(true)
    }

    /// The holder just seen, when it differs from the last one seen (client-go's
    /// `maybeReportTransition`). The first holder seen counts as new. An empty holder (a
    /// released lock) is noted but not reported: it is nobody.
    pub fn take_new_leader(&mut self) -> Option<String> {
        let holder = self.shared.observed().map(|o| o.record.holder_identity).unwrap_or_default();
        if holder == self.reported_leader {
            return None;
        }
        self.reported_leader.clone_from(&holder);
        (!holder.is_empty()).then_some(holder)
    }

    pub fn describe(&self) -> &str {
        self.lock.describe()
    }

    /// A fresh term for us starting now.
    fn desired_record(&self) -> Record {
        let now = Some(micro(self.shared.clock.wall()));
        Record {
            holder_identity: self.shared.identity.clone(),
            lease_duration_seconds: self.lease_duration_seconds,
            acquire_time: now,
            renew_time: now,
            leader_transitions: 0,
        }
    }

    /// `desired` as a renewal of our term in `current`: same acquire time and transition count.
    fn continued(desired: Record, current: &Record) -> Record {
        Record { acquire_time: current.acquire_time, leader_transitions: current.leader_transitions, ..desired }
    }

    fn is_ours(&self, record: &Record) -> bool {
        record.holder_identity == self.shared.identity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;

    /// A clock that moves only when told.
    fn manual_clock() -> Arc<FakeClock> {
        Arc::new(FakeClock::at("2026-11-22T10:00:00Z".parse().expect("timestamp")))
    }

    /// An in-memory object with a resourceVersion, shared by the candidates of a test.
    #[derive(Default)]
    struct Store {
        object: Option<(Record, u64)>,
        next_version: u64,
    }

    /// One candidate's handle on the store: remembers the version it last read or wrote.
    struct MemoryLock {
        store: Arc<Mutex<Store>>,
        seen: Option<u64>,
        /// Answer every call as a stopping elector's lock does.
        cancelled: bool,
        calls: usize,
    }

    fn api_error(code: u16, reason: &str) -> crate::client::Error {
        let status = serde_json::json!({"status": "Failure", "reason": reason, "code": code}).to_string();
        crate::client::ApiError::from_response(code, status.as_bytes(), None).into()
    }

    impl MemoryLock {
        fn new(store: &Arc<Mutex<Store>>) -> MemoryLock {
            MemoryLock { store: store.clone(), seen: None, cancelled: false, calls: 0 }
        }

        fn call(&mut self) -> Result<(), LockError> {
            self.calls += 1;
            if self.cancelled { Err(LockError::Cancelled) } else { Ok(()) }
        }
    }

    impl Lock for MemoryLock {
        fn describe(&self) -> &str {
            "kube-system/test"
        }

        fn get(&mut self, _: Instant) -> Result<Option<Record>, LockError> {
            self.call()?;
            let store = self.store.lock();
            self.seen = store.object.as_ref().map(|(_, version)| *version);
            Ok(store.object.as_ref().map(|(record, _)| record.clone()))
        }

        fn create(&mut self, record: &Record, _: Instant) -> Result<(), LockError> {
            self.call()?;
            let mut store = self.store.lock();
            if store.object.is_some() {
                return Err(LockError::Api(api_error(409, "AlreadyExists")));
            }
            store.next_version += 1;
            store.object = Some((record.clone(), store.next_version));
            self.seen = Some(store.next_version);
            Ok(())
        }

        fn update(&mut self, record: &Record, _: Instant) -> Result<(), LockError> {
            self.call()?;
            let mut store = self.store.lock();
            let current = store.object.as_ref().map(|(_, version)| *version);
            if self.seen.is_none() || current != self.seen {
                return Err(LockError::Api(api_error(409, "Conflict")));
            }
            store.next_version += 1;
            store.object = Some((record.clone(), store.next_version));
            self.seen = Some(store.next_version);
            Ok(())
        }
    }

    const LEASE: Duration = Duration::from_secs(15);

    #[test]
    fn an_api_error_keeps_its_kind_through_an_attempt() {
        let attempt = AttemptError::Update(LockError::Api(api_error(409, "Conflict")));
        assert!(attempt.to_string().starts_with("failed to update lock: "), "{attempt}");
        assert!(crate::client::Error::find(&attempt).is_some_and(|e| e.is_conflict()));
    }

    fn candidate(name: &str, store: &Arc<Mutex<Store>>, clock: &Arc<FakeClock>) -> Election<MemoryLock> {
        let shared = Arc::new(Shared::new(name, "test", LEASE, clock.clone()));
        Election::new(MemoryLock::new(store), shared)
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    fn stored(store: &Arc<Mutex<Store>>) -> Record {
        store.lock().object.clone().expect("the lock exists").0
    }

    /// Rewrites the stored record as another writer would, bumping its version.
    fn overwrite(store: &Arc<Mutex<Store>>, edit: impl FnOnce(&mut Record)) {
        let mut store = store.lock();
        let mut record = store.object.clone().expect("the lock exists").0;
        edit(&mut record);
        store.next_version += 1;
        store.object = Some((record, store.next_version));
    }

    #[test]
    fn first_candidate_creates_the_lock() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        let record = stored(&store);
        assert_eq!(record.holder_identity, "a");
        assert_eq!(record.lease_duration_seconds, 15);
        assert_eq!(record.leader_transitions, 0);
        assert_eq!(record.acquire_time, Some(clock.wall()));
        assert_eq!(record.renew_time, Some(clock.wall()));
        assert!(a.shared.holds_lock());
        assert_eq!(a.take_new_leader().as_deref(), Some("a"));
        assert_eq!(a.take_new_leader(), None);
    }

    #[test]
    fn standby_waits_a_full_lease_duration_of_local_time() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        // The holder's clock is an hour behind: its timestamps must not make the term look over.
        let skewed = clock.wall() - jiff::SignedDuration::from_hours(1);
        overwrite(&store, |r| r.renew_time = Some(skewed));
        let mut b = candidate("b", &store, &clock);
        assert!(matches!(b.try_acquire_or_renew(far()), Err(AttemptError::HeldBy(h)) if h == "a"));
        clock.advance(Duration::from_millis(14_900));
        assert!(matches!(b.try_acquire_or_renew(far()), Err(AttemptError::HeldBy(h)) if h == "a"));
        clock.advance(Duration::from_millis(200));
        b.try_acquire_or_renew(far()).expect("taken over after expiry");
        let record = stored(&store);
        assert_eq!(record.holder_identity, "b");
        assert_eq!(record.leader_transitions, 1);
        assert_eq!(record.acquire_time, Some(clock.wall()));
    }

    #[test]
    fn future_timestamps_do_not_extend_a_term() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        let ahead = clock.wall() + jiff::SignedDuration::from_hours(1);
        overwrite(&store, |r| r.renew_time = Some(ahead));
        let mut b = candidate("b", &store, &clock);
        assert!(b.try_acquire_or_renew(far()).is_err());
        clock.advance(LEASE + Duration::from_millis(1));
        b.try_acquire_or_renew(far()).expect("taken over after expiry");
    }

    #[test]
    fn the_term_runs_from_the_last_change_seen() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let mut b = candidate("b", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        assert!(b.try_acquire_or_renew(far()).is_err());
        clock.advance(Duration::from_secs(10));
        a.try_acquire_or_renew(far()).expect("renewed");
        assert!(b.try_acquire_or_renew(far()).is_err(), "the renewal is seen at t=10s");
        clock.advance(Duration::from_secs(10));
        assert!(b.try_acquire_or_renew(far()).is_err(), "t=20s is within 15s of the change seen at t=10s");
        clock.advance(Duration::from_millis(5_100));
        b.try_acquire_or_renew(far()).expect("taken over at t=25.1s");
    }

    #[test]
    fn expiry_uses_the_duration_in_the_record() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        let shared = Arc::new(Shared::new("b", "test", Duration::from_secs(60), clock.clone()));
        let mut b = Election::new(MemoryLock::new(&store), shared);
        assert!(b.try_acquire_or_renew(far()).is_err());
        clock.advance(LEASE + Duration::from_millis(1));
        b.try_acquire_or_renew(far()).expect("the holder's 15s term is over");
        assert_eq!(stored(&store).lease_duration_seconds, 60);
    }

    #[test]
    fn renewal_keeps_the_acquire_time_and_survives_a_foreign_write() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        let acquired = clock.wall();
        clock.advance(Duration::from_secs(2));
        a.try_acquire_or_renew(far()).expect("renewed on the fast path");
        // Someone else wrote the object (a label, say): the fast path conflicts, the slow path
        // re-reads and renews.
        overwrite(&store, |_| {});
        clock.advance(Duration::from_secs(2));
        a.try_acquire_or_renew(far()).expect("renewed on the slow path");
        let record = stored(&store);
        assert_eq!(record.acquire_time, Some(acquired));
        assert_eq!(record.renew_time, Some(clock.wall()));
        assert_eq!(record.leader_transitions, 0);
    }

    #[test]
    fn only_renewals_after_a_read_count_as_the_slow_path() {
        let (store, clock) = (Arc::default(), manual_clock());
        let name = format!("slowpath-{}", crate::random::u64());
        let shared = Arc::new(Shared::new("a", &name, LEASE, clock.clone()));
        let mut a = Election::new(MemoryLock::new(&store), shared);
        let slowpath = || super::super::metrics::LeaderMetrics::global().slowpath_count(&name);
        a.try_acquire_or_renew(far()).expect("acquired");
        clock.advance(Duration::from_secs(2));
        a.try_acquire_or_renew(far()).expect("renewed on the fast path");
        assert_eq!(slowpath(), 0.0, "creating and fast renewals are not the slow path");
        overwrite(&store, |_| {});
        clock.advance(Duration::from_secs(2));
        a.try_acquire_or_renew(far()).expect("renewed on the slow path");
        assert_eq!(slowpath(), 1.0);
        // Taking over another holder's expired term reads first too, but is no renewal.
        let mut b = Election::new(MemoryLock::new(&store), Arc::new(Shared::new("b", &name, LEASE, clock.clone())));
        assert!(b.try_acquire_or_renew(far()).is_err(), "a's term runs from when b first saw it");
        clock.advance(LEASE + Duration::from_secs(1));
        b.try_acquire_or_renew(far()).expect("the term is over");
        assert_eq!(slowpath(), 1.0);
    }

    #[test]
    fn a_stopping_elector_does_not_fall_back_to_the_slow_path() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        a.lock.cancelled = true;
        a.lock.calls = 0;
        assert!(matches!(a.try_acquire_or_renew(far()), Err(AttemptError::Update(LockError::Cancelled))));
        assert_eq!(a.lock.calls, 1, "no read after the cancelled renewal");
    }

    #[test]
    fn a_holder_whose_term_was_taken_cannot_renew() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let mut b = candidate("b", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        assert!(b.try_acquire_or_renew(far()).is_err());
        clock.advance(LEASE + Duration::from_secs(1));
        b.try_acquire_or_renew(far()).expect("taken over");
        assert!(matches!(a.try_acquire_or_renew(far()), Err(AttemptError::HeldBy(h)) if h == "b"));
        assert!(!a.shared.holds_lock());
        assert_eq!(a.take_new_leader().as_deref(), Some("b"));
    }

    #[test]
    fn a_released_lock_is_taken_at_once() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let mut b = candidate("b", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        assert_eq!(a.take_new_leader().as_deref(), Some("a"));
        assert!(b.try_acquire_or_renew(far()).is_err());
        clock.advance(Duration::from_secs(1));
        assert!(matches!(a.release(far()), Ok(true)));
        let released = stored(&store);
        assert_eq!(released.holder_identity, "");
        assert_eq!(released.lease_duration_seconds, 1);
        assert_eq!(released.acquire_time, Some(clock.wall()));
        assert_eq!(released.renew_time, Some(clock.wall()));
        assert_eq!(released.leader_transitions, 0);
        assert!(!a.shared.holds_lock());
        assert!(matches!(a.release(far()), Ok(false)), "nothing left to release");
        assert_eq!(b.take_new_leader().as_deref(), Some("a"));
        b.try_acquire_or_renew(far()).expect("taken at once");
        assert_eq!(stored(&store).leader_transitions, 1);
        assert_eq!(b.take_new_leader().as_deref(), Some("b"));
        assert_eq!(a.take_new_leader(), None, "the empty holder a released to is nobody");
    }

    #[test]
    fn a_watched_renewal_restarts_the_term_and_sets_the_attempt_at_its_expiry() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let mut b = candidate("b", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        let seen = clock.now();
        assert_eq!(b.observe(Some(stored(&store))), Wake::HeldUntil(seen + LEASE));
        clock.advance(Duration::from_secs(5));
        assert_eq!(b.observe(Some(stored(&store))), Wake::Unchanged, "the same record does not restart the term");
        assert_eq!(b.shared.observed().expect("seen").at, seen);
        a.try_acquire_or_renew(far()).expect("renewed");
        assert_eq!(b.observe(Some(stored(&store))), Wake::HeldUntil(clock.now() + LEASE), "a renewal does");
        assert_eq!(b.take_new_leader().as_deref(), Some("a"), "the watch reports the leader too");
    }

    #[test]
    fn a_term_seen_by_the_watch_runs_out_for_the_next_read() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let mut b = candidate("b", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        let Wake::HeldUntil(expiry) = b.observe(Some(stored(&store))) else { panic!("held by a") };
        clock.advance(LEASE - Duration::from_millis(1));
        assert!(matches!(b.try_acquire_or_renew(far()), Err(AttemptError::HeldBy(h)) if h == "a"), "not yet");
        clock.advance(Duration::from_millis(1));
        assert_eq!(clock.now(), expiry);
        b.try_acquire_or_renew(far()).expect("the read finds the record unchanged since the watch saw it");
        assert_eq!(stored(&store).holder_identity, "b");
    }

    #[test]
    fn a_watched_release_or_deletion_wakes_the_standby_at_once() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let mut b = candidate("b", &store, &clock);
        a.try_acquire_or_renew(far()).expect("acquired");
        assert!(matches!(b.observe(Some(stored(&store))), Wake::HeldUntil(_)));
        assert!(matches!(a.release(far()), Ok(true)));
        assert_eq!(b.observe(Some(stored(&store))), Wake::Now);
        assert_eq!(b.observe(None), Wake::Now, "a deleted Lease is free to create");
        b.try_acquire_or_renew(far()).expect("taken at once");
        assert_eq!(b.observe(Some(stored(&store))), Wake::Unchanged, "its own write, as already seen");
    }

    #[test]
    fn the_next_attempt_is_due_at_the_expiry_when_sooner_than_the_retry() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let mut b = candidate("b", &store, &clock);
        let regular = clock.now() + Duration::from_secs(20);
        assert_eq!(b.next_attempt(regular), regular, "nothing seen yet");
        a.try_acquire_or_renew(far()).expect("acquired");
        assert!(b.try_acquire_or_renew(far()).is_err());
        assert_eq!(b.next_attempt(regular), clock.now() + LEASE, "the term runs out first");
        let soon = clock.now() + Duration::from_secs(2);
        assert_eq!(b.next_attempt(soon), soon, "the retry comes first");
        assert_eq!(a.next_attempt(regular), regular, "our own term is renewed, not waited for");
        assert!(matches!(a.release(far()), Ok(true)));
        assert!(matches!(b.observe(Some(stored(&store))), Wake::Now));
        assert_eq!(b.next_attempt(regular), regular, "a released lock has no term to wait for");
    }

    #[test]
    fn health_check_fails_once_renewals_stall_past_the_tolerance() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        let b = candidate("b", &store, &clock);
        let tolerance = Duration::from_secs(20);
        assert_eq!(a.shared.check(tolerance), Ok(()));
        a.try_acquire_or_renew(far()).expect("acquired");
        clock.advance(LEASE + tolerance);
        assert_eq!(a.shared.check(tolerance), Ok(()));
        clock.advance(Duration::from_millis(1));
        let error = a.shared.check(tolerance).expect_err("stalled").to_string();
        assert_eq!(error, "failed election to renew leadership on lease test");
        assert_eq!(b.shared.check(tolerance), Ok(()), "standbys are healthy");
    }

    #[test]
    fn leading_needs_the_record_to_name_us() {
        let (store, clock) = (Arc::default(), manual_clock());
        let mut a = candidate("a", &store, &clock);
        a.shared.set_leading(true);
        assert!(!a.shared.is_leader(), "no record seen yet");
        a.try_acquire_or_renew(far()).expect("acquired");
        assert!(a.shared.is_leader());
        assert!(a.shared.wait_until_leader(Duration::ZERO));
        a.shared.finish();
        assert!(!a.shared.is_leader());
        assert!(!a.shared.wait_until_leader(Duration::from_secs(5)), "returns at once when finished");
    }
}
