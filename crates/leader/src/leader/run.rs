//! The election thread (client-go's `Run`, `acquire` and `renew`): try to acquire every retry
//! period with jitter; once leading, renew every retry period, retrying failed renewals until
//! the renew deadline since the last successful one; then lose the lease, or on a graceful stop
//! release it.
//!
//! A standby also follows the Lease through a watch (see `watch`): a released Lease is
//! attempted at once, and an attempt is due no later than the instant the holder's term runs
//! out by our clock. The periodic attempts remain, whether the watch works or not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::LeaderEvent;
use super::election::{AttemptError, Election, Shared, Wake};
use super::lease_lock::RemoteLock;
use super::metrics::LeaderMetrics;
use super::record::Record;
use super::watch::{LeaseWatch, Seen};

/// client-go's `JitterFactor`: acquisition retries wait between 1 and 2.2 retry periods.
pub const JITTER_FACTOR: f64 = 1.2;

/// The election's durations (see [`super::LeaderElectionConfig`]).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// Everything the election thread owns.
pub struct Runner {
    pub election: Election<RemoteLock>,
    pub shared: Arc<Shared>,
    pub timing: Timing,
    /// The lease name, the metric's label.
    pub name: String,
    pub release_on_cancel: bool,
    /// Disconnected when the elector stops.
    pub stop: Receiver<()>,
    /// Set before a stop that must look like a crash: no release, no events.
    pub abandoned: Arc<AtomicBool>,
    pub events: Sender<LeaderEvent>,
    /// Receives one message when leadership is lost involuntarily.
    pub lost: Sender<()>,
    pub metrics: &'static LeaderMetrics,
    /// The standby's watch on the Lease; closed while leading.
    pub watch: LeaseWatch,
}

/// Why leading ended.
enum Ended {
    Stopped,
    Lost,
}

impl Runner {
    /// The thread's body: acquire, lead, then lose or give up the lease.
    pub fn run(mut self) {
        let _finish = FinishGuard {
            shared: self.shared.clone(),
            metrics: self.metrics,
            name: self.name.clone(),
            lost: self.lost.clone(),
        };
        log::info!("attempting to acquire leader lease {}...", self.election.describe());
        if !self.acquire() {
            return;
        }
        self.start_leading();
        match self.renew() {
            Ended::Lost => self.lose(),
            Ended::Stopped => self.stop_leading(),
        }
    }

    /// Tries to acquire until it succeeds (`true`) or the elector stops (`false`).
    fn acquire(&mut self) -> bool {
        loop {
            let started = Instant::now();
            let result = self.election.try_acquire_or_renew(started + self.timing.renew_deadline);
            self.report_new_leader();
            if self.stopping() {
                // Told to stop as the attempt ended: give up a lease it may just have won.
                self.give_up();
                return false;
            }
            match result {
                Ok(()) => {
                    self.watch.stop();
                    return true;
                }
                Err(AttemptError::HeldBy(holder)) => {
                    log::debug!("lock is held by {holder} and has not yet expired: {}", self.election.describe())
                }
                Err(e) => log::error!("failed to acquire lease {}: {e}", self.election.describe()),
            }
            let due = self.election.next_attempt(Instant::now() + jittered(self.timing.retry_period));
            if self.wait_for_attempt(due) {
                return false;
            }
        }
    }

    /// Waits until the next attempt is due: at `due`, or earlier when the watch sees the Lease
    /// free or a term that runs out sooner. Keeps the watch open meanwhile. Whether the elector
    /// was told to stop.
    fn wait_for_attempt(&mut self, mut due: Instant) -> bool {
        loop {
            let now = Instant::now();
            self.watch.open_if_due(now);
            if now >= due {
                self.log_expiry(now);
                return false;
            }
            let wake = self.watch.reopen_at().map_or(due, |at| at.min(due));
            let news = self.watch.news().clone();
            crossbeam_channel::select! {
                recv(self.stop) -> _ => return true,
                recv(news) -> seen => match seen {
                    Ok(Seen::Record(record)) => due = self.on_record(record, due),
                    Ok(Seen::Ended { generation, events }) => self.watch.ended(generation, events, Instant::now()),
                    Err(_) => {}
                },
                default(wake.saturating_duration_since(now)) => {}
            }
        }
    }

    /// A record from the watch, taken in as an attempt's read would; the attempt's new due time.
    fn on_record(&mut self, record: Option<Record>, due: Instant) -> Instant {
        let wake = self.election.observe(record);
        self.report_new_leader();
        match wake {
            Wake::Unchanged => due,
            Wake::Now => {
                log::info!("leader lease {} is free, attempting to acquire it now", self.election.describe());
                Instant::now()
            }
            Wake::HeldUntil(expiry) => due.min(expiry),
        }
    }

    /// Says so when an attempt is made because the holder's term ran out by our clock.
    fn log_expiry(&self, now: Instant) {
        let Some(observed) = self.shared.observed() else { return };
        let holder = &observed.record.holder_identity;
        if !holder.is_empty() && *holder != self.shared.identity && !observed.is_valid(now) {
            log::info!(
                "the term of {holder} on leader lease {} ran out by our clock, attempting to acquire it",
                self.election.describe()
            );
        }
    }

    fn start_leading(&mut self) {
        self.shared.set_leading(true);
        self.election.lock.record_event("became leader", Instant::now() + self.timing.renew_deadline);
        self.metrics.leader_on(&self.name);
        log::info!("successfully acquired lease {}", self.election.describe());
        self.emit(LeaderEvent::StartedLeading);
    }

    /// Renews until a renewal round fails or the elector stops: a round at once (client-go's
    /// `wait.Until` runs its first round without waiting, so an acquisition that took long is
    /// followed by a renewal straight away), then one a retry period after each success.
    fn renew(&mut self) -> Ended {
        loop {
            if let Err(ended) = self.renew_round() {
                return ended;
            }
            if self.sleep(self.timing.retry_period) {
                return Ended::Stopped;
            }
        }
    }

    /// Tries to renew every retry period until it succeeds, or the renew deadline since the
    /// round began passes (client-go's `PollUntilContextTimeout(retryPeriod, renewDeadline)`
    /// in `renew`): a leader cut off gives up between one renew deadline and a retry period
    /// more after its last successful renewal, as upstream's does, which is still within the
    /// lease duration that standbys wait (kube-controller-manager refuses flags where it is not).
    fn renew_round(&mut self) -> Result<(), Ended> {
        let deadline = Instant::now() + self.timing.renew_deadline;
        loop {
            if Instant::now() >= deadline {
                return Err(Ended::Lost);
            }
            let result = self.election.try_acquire_or_renew(deadline);
            self.report_new_leader();
            if self.stopping() {
                return Err(Ended::Stopped);
            }
            match result {
                Ok(()) => {
                    log::trace!("successfully renewed lease {}", self.election.describe());
                    return Ok(());
                }
                Err(e) => log::info!("failed to renew lease {}: {e}", self.election.describe()),
            }
            let pause = self.timing.retry_period.min(deadline.saturating_duration_since(Instant::now()));
            if self.sleep(pause) {
                return Err(Ended::Stopped);
            }
        }
    }

    /// Leadership lost involuntarily: stop claiming it, tell, then record the Event. The lease
    /// is not released: our controllers may still be winding down, so a standby must wait for
    /// the lease to expire. The Event comes last: the API may be out of reach (that is often
    /// why renewing failed), and waiting for it would keep the process working past its renew
    /// deadline, towards the moment a standby may take over (client-go records it
    /// asynchronously for the same reason).
    fn lose(&mut self) {
        self.shared.set_leading(false);
        self.metrics.leader_off(&self.name);
        log::error!(
            "failed to renew lease {}: no successful renewal within {:?}; leaderelection lost",
            self.election.describe(),
            self.timing.renew_deadline
        );
        self.emit(LeaderEvent::StoppedLeading);
        let _ = self.lost.try_send(());
        self.election.lock.record_event("stopped leading", Instant::now() + self.timing.renew_deadline);
    }

    /// Stopped while leading: stop claiming leadership, release the lease if configured, and
    /// tell (unless abandoned, as a crash would not).
    fn stop_leading(&mut self) {
        self.shared.set_leading(false);
        self.metrics.leader_off(&self.name);
        if self.give_up() {
            self.election.lock.record_event("stopped leading", Instant::now() + self.timing.renew_deadline);
            self.emit(LeaderEvent::StoppedLeading);
        } else {
            log::info!("abandoned lease {} without releasing it", self.election.describe());
        }
    }

    /// On a stop, releases the lease if the record names us and `release_on_cancel` is set;
    /// an abandoned elector keeps it until it expires. Whether the stop was graceful.
    fn give_up(&mut self) -> bool {
        if self.abandoned.load(Ordering::SeqCst) {
            return false;
        }
        if self.release_on_cancel {
            self.election.lock.ignore_stop();
            match self.election.release(Instant::now() + self.timing.renew_deadline) {
                Ok(true) => log::info!("released lease {}", self.election.describe()),
                Ok(false) => {}
                Err(e) => log::error!("failed to release lock {}: {e}", self.election.describe()),
            }
        }
        true
    }

    fn report_new_leader(&mut self) {
        if let Some(leader) = self.election.take_new_leader() {
            log::info!("new leader elected: {leader}");
            self.emit(LeaderEvent::NewLeader(leader));
        }
    }

    fn emit(&self, event: LeaderEvent) {
        // The dispatcher outlives this thread; a send fails only if it panicked.
        let _ = self.events.send(event);
    }

    /// Whether the elector was told to stop.
    fn stopping(&self) -> bool {
        matches!(self.stop.try_recv(), Err(TryRecvError::Disconnected))
    }

    /// Sleeps for `duration`, or less if the elector is told to stop; whether it was.
    fn sleep(&self, duration: Duration) -> bool {
        !matches!(self.stop.recv_timeout(duration), Err(RecvTimeoutError::Timeout))
    }
}

/// Marks the election as over when the thread ends, however it ends. A panic counts as
/// losing the lease: nobody renews it any more.
struct FinishGuard {
    shared: Arc<Shared>,
    metrics: &'static LeaderMetrics,
    name: String,
    lost: Sender<()>,
}

impl Drop for FinishGuard {
    fn drop(&mut self) {
        let was_leading = self.shared.is_leader();
        self.shared.finish();
        if std::thread::panicking() && was_leading {
            log::error!("the leader election thread for {} panicked; leaderelection lost", self.name);
            self.metrics.leader_off(&self.name);
            let _ = self.lost.try_send(());
        }
    }
}

/// `period` stretched by a random factor in [1, 1 + JITTER_FACTOR) (apimachinery's `wait.Jitter`).
fn jittered(period: Duration) -> Duration {
    period + period.mul_f64(JITTER_FACTOR * crate::random::unit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_the_factor() {
        let period = Duration::from_millis(100);
        for _ in 0..1000 {
            let wait = jittered(period);
            assert!(wait >= period && wait < period.mul_f64(1.0 + JITTER_FACTOR), "{wait:?}");
        }
    }
}
