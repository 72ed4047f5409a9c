//! Lease-based leader election with client-go's `tools/leaderelection` semantics
//! (`--leader-elect`): only the candidate holding the Lease runs the controllers.
//!
//! [`LeaderElector::start`] runs the election on its own OS thread. The candidate tries to
//! acquire the Lease every retry period (with jitter); the leader renews it every retry period
//! and gives up when no renewal succeeded for the renew deadline. A standby takes the Lease
//! over only after it saw the record unchanged for the lease duration by its *own* clock
//! (see `election`), so with `lease_duration > renew_deadline` an old leader has stopped
//! before a new one starts, whatever the clock skew between machines. Every write is
//! conditional on the Lease's resourceVersion.
//!
//! Beyond upstream's kube-controller-manager, a graceful [`LeaderElector::stop`] can release
//! the Lease (`release_on_cancel`, kubernetes#132599), and a standby also watches the Lease
//! (`watch`): it attempts at once when the Lease is released, and no later than the instant
//! the holder's term runs out by its own clock, instead of up to a jittered retry period
//! after either. The watch only makes attempts earlier; they are still client-go's (read, check
//! expiry by the local clock, update conditionally), and the periodic ones remain the fallback.
//!
//! Module map: `record` (the record in a Lease spec), `election` (acquire / renew /
//! release decisions, free of I/O), `lease_lock` (the Lease over the API, on a worker thread
//! so that requests can be abandoned at their deadline), `run` (the election thread),
//! `watch` (the standby's watch on the Lease), `metrics` (`leader_election_master_status`).

mod election;
mod lease_lock;
mod metrics;
mod record;
mod run;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::client::Client;
pub use election::LeaseNotRenewed;
use election::{Election, Shared};

use crate::apimachinery::clock::RealClock;
use crate::apimachinery::errors::BoxError;
use lease_lock::RemoteLock;
use metrics::LeaderMetrics;
use run::{JITTER_FACTOR, Runner, Timing};
use watch::LeaseWatch;

/// How long past the lease duration a leader may go without renewing before [`LeaderElector::check`]
/// fails (kube-controller-manager's `NewLeaderHealthzAdaptor(time.Second * 20)`).
pub const HEALTHZ_TOLERANCE: Duration = Duration::from_secs(20);

/// What to elect on and how (`--leader-elect-*` flags).
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    /// `--leader-elect-resource-namespace`.
    pub namespace: String,
    /// `--leader-elect-resource-name`.
    pub name: String,
    /// This candidate's name in the Lease; see [`identity`].
    pub identity: String,
    /// How long standbys wait after the last change they saw before taking the Lease over.
    /// The Lease records it in whole seconds.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying failed renewals before giving up.
    pub renew_deadline: Duration,
    /// The pause between attempts to acquire or renew.
    pub retry_period: Duration,
    /// Release the Lease when stopped gracefully while leading.
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// client-go's `NewLeaderElector` checks, plus: the lease duration in the whole seconds
    /// the Lease records must still exceed the renew deadline.
    fn validate(&self) -> Result<(), ConfigError> {
        if self.namespace.is_empty() || self.name.is_empty() {
            return Err(ConfigError::NoLease);
        }
        if self.identity.is_empty() {
            return Err(ConfigError::NoIdentity);
        }
        if self.retry_period.is_zero() || self.renew_deadline.is_zero() {
            return Err(ConfigError::ZeroPeriod);
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenewDeadline);
        }
        if Duration::from_secs(self.lease_duration.as_secs()) <= self.renew_deadline {
            return Err(ConfigError::WholeSecondsNotLongerThanRenewDeadline { seconds: self.lease_duration.as_secs() });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(ConfigError::RenewDeadlineTooShort);
        }
        Ok(())
    }
}

/// Why a [`LeaderElectionConfig`] is refused (client-go's `NewLeaderElector` words, where it has them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No Lease namespace or name.
    #[error("the leader election lease needs a namespace and a name")]
    NoLease,
    /// No candidate identity.
    #[error("Lock identity is empty")]
    NoIdentity,
    /// A zero retry period or renew deadline.
    #[error("retryPeriod and renewDeadline must be greater than zero")]
    ZeroPeriod,
    /// The lease duration does not exceed the renew deadline.
    #[error("leaseDuration must be greater than renewDeadline")]
    LeaseNotLongerThanRenewDeadline,
    /// The lease duration, cut to the whole seconds the Lease records, does not exceed the renew deadline.
    #[error("leaseDuration in whole seconds ({seconds}s, as the Lease records it) must be greater than renewDeadline")]
    WholeSecondsNotLongerThanRenewDeadline {
        /// The lease duration in whole seconds.
        seconds: u64,
    },
    /// The renew deadline leaves no room for a jittered retry.
    #[error("renewDeadline must be greater than retryPeriod*JitterFactor")]
    RenewDeadlineTooShort,
}

/// Why [`LeaderElector::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is refused.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A thread of the election could not be started.
    #[error("cannot start thread {name}: {source}")]
    Thread {
        /// The thread's name.
        name: &'static str,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The thread that talks to the API server could not be started.
    #[error("cannot start the leader election worker: {0}")]
    Worker(#[source] std::io::Error),
}

/// A fresh candidate identity, `<hostname>_<random UUID>`, as kube-controller-manager's.
pub fn identity() -> String {
    format!("{}_{}", hostname(), crate::random::uuid())
}

/// The kernel's host name, else `$HOSTNAME`, else `localhost`.
fn hostname() -> String {
    crate::hostname().unwrap_or_else(|| "localhost".into())
}

/// What the election tells its caller, in order, on a dedicated thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderEvent {
    /// We acquired the Lease: start the controllers.
    StartedLeading,
    /// We no longer lead: lost (see [`LeaderElector::leader_lost`]) or stopped gracefully.
    StoppedLeading,
    /// The Lease holder differs from the last one seen (including the first one seen, and us).
    NewLeader(String),
}

/// A running election; see the module documentation. Dropping it stops it as [`LeaderElector::stop`].
pub struct LeaderElector {
    shared: Arc<Shared>,
    /// Dropped to tell the election thread to stop.
    stop: Option<Sender<()>>,
    abandoned: Arc<AtomicBool>,
    lost: Receiver<()>,
    /// Kept so that `lost` never disconnects while the elector exists.
    _lost_sender: Sender<()>,
    election_thread: Option<JoinHandle<()>>,
    dispatcher_thread: Option<JoinHandle<()>>,
}

impl LeaderElector {
    /// Validates `config` and starts the election thread. `on_event` runs on a thread of its
    /// own, one event at a time, so a slow callback does not delay renewals.
    pub fn start(
        client: Client,
        config: LeaderElectionConfig,
        on_event: impl Fn(&LeaderEvent) + Send + Sync + 'static,
    ) -> Result<LeaderElector, StartError> {
        config.validate()?;
        // Its own rate limit budget and User-Agent, as upstream's "leader-election" client.
        let client = client.for_controller("leader-election");
        let shared = Arc::new(Shared::new(&config.identity, &config.name, config.lease_duration, Arc::new(RealClock)));
        let metrics = LeaderMetrics::global();
        metrics.leader_off(&config.name);
        let (stop, stopped) = crossbeam_channel::bounded(0);
        let (lost_sender, lost) = crossbeam_channel::bounded(1);
        let (events, event_queue) = crossbeam_channel::unbounded::<LeaderEvent>();
        let lock = RemoteLock::spawn(&client, &config.namespace, &config.name, &config.identity, stopped.clone())
            .map_err(StartError::Worker)?;
        let watch = LeaseWatch::new(client.clone(), &config.namespace, &config.name);
        let dispatcher_thread = spawn("leader-election-events", move || {
            for event in event_queue {
                on_event(&event);
            }
        })?;
        let abandoned = Arc::new(AtomicBool::new(false));
        let runner = Runner {
            election: Election::new(lock, shared.clone()),
            shared: shared.clone(),
            timing: Timing { renew_deadline: config.renew_deadline, retry_period: config.retry_period },
            name: config.name,
            release_on_cancel: config.release_on_cancel,
            stop: stopped,
            abandoned: abandoned.clone(),
            events,
            lost: lost_sender.clone(),
            metrics,
            watch,
        };
        let election_thread = spawn("leader-election", move || runner.run())?;
        Ok(LeaderElector {
            shared,
            stop: Some(stop),
            abandoned,
            lost,
            _lost_sender: lost_sender,
            election_thread: Some(election_thread),
            dispatcher_thread: Some(dispatcher_thread),
        })
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// Whether we lead now: we acquired the Lease, have not lost or given it up, and the last
    /// record we saw names us.
    pub fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    /// Waits up to `timeout` for leadership; whether we lead. Returns early once the election
    /// has ended (leadership lost).
    pub fn wait_until_leader(&self, timeout: Duration) -> bool {
        self.shared.wait_until_leader(timeout)
    }

    /// Receives one message when this process stops leading involuntarily (the renew deadline
    /// passed, or the election thread died). The process is then expected to exit non-zero
    /// ("leaderelection lost"), as upstream.
    pub fn leader_lost(&self) -> &Receiver<()> {
        &self.lost
    }

    /// The healthz watchdog (client-go's `HealthzAdaptor`): an error when the last record we
    /// saw names us but we have not renewed it for the lease duration plus
    /// [`HEALTHZ_TOLERANCE`]; a leader that lost the lease and did not exit fails it too.
    pub fn check(&self) -> Result<(), LeaseNotRenewed> {
        self.shared.check(HEALTHZ_TOLERANCE)
    }

    /// [`LeaderElector::check`] as a closure for the health server, which takes any error. It
    /// holds only the election's shared state, not the elector, so a server thread running a
    /// check never keeps the elector from being stopped (and the Lease from being released).
    pub fn health_check(&self) -> impl Fn() -> Result<(), BoxError> + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || Ok(shared.check(HEALTHZ_TOLERANCE)?)
    }

    /// [`LeaderElector::check`] with another tolerance than [`HEALTHZ_TOLERANCE`] (tests).
    #[doc(hidden)]
    pub fn check_with_tolerance(&self, tolerance: Duration) -> Result<(), LeaseNotRenewed> {
        self.shared.check(tolerance)
    }

    /// Stops gracefully: no more renewals; if leading, stops claiming leadership, releases the
    /// Lease when `release_on_cancel` is set, and delivers `StoppedLeading`, all before
    /// returning. Pending API calls are abandoned at once; the release may take up to the renew
    /// deadline if the API server does not answer. Waits for a pending `on_event` call to return.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Stops as a crash would (tests; and a controller that fails to start, upon which upstream
    /// exits at once): no release, no further events; the Lease stays ours until it expires.
    #[doc(hidden)]
    pub fn abandon(mut self) {
        self.abandoned.store(true, Ordering::SeqCst);
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stop.take());
        for thread in [self.election_thread.take(), self.dispatcher_thread.take()].into_iter().flatten() {
            if thread.join().is_err() {
                log::error!("a leader election thread panicked");
            }
        }
    }
}

impl Drop for LeaderElector {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn(name: &'static str, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, StartError> {
    std::thread::Builder::new().name(name.into()).spawn(body).map_err(|source| StartError::Thread { name, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: "kube-system".into(),
            name: "kube-controller-manager".into(),
            identity: identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
        }
    }

    #[test]
    fn upstream_defaults_are_valid() {
        assert_eq!(config().validate(), Ok(()));
    }

    #[test]
    fn durations_must_nest() {
        let check = |edit: fn(&mut LeaderElectionConfig)| {
            let mut c = config();
            edit(&mut c);
            c.validate().expect_err("invalid").to_string()
        };
        assert_eq!(check(|c| c.renew_deadline = c.lease_duration), "leaseDuration must be greater than renewDeadline");
        assert!(check(|c| c.lease_duration = Duration::from_millis(10_900)).contains("whole seconds (10s"));
        assert_eq!(
            check(|c| c.retry_period = Duration::from_millis(8_400)),
            "renewDeadline must be greater than retryPeriod*JitterFactor"
        );
        assert!(check(|c| c.retry_period = Duration::ZERO).contains("greater than zero"));
        assert_eq!(check(|c| c.identity.clear()), "Lock identity is empty");
        assert!(check(|c| c.name.clear()).contains("namespace and a name"));
    }

    #[test]
    fn the_elector_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<LeaderElector>();
    }

    #[test]
    fn identities_are_host_and_uuid() {
        let id = identity();
        let (host, uuid) = id.rsplit_once('_').expect("host_uuid");
        assert!(!host.is_empty());
        assert_eq!(uuid.len(), 36);
        assert_ne!(id, identity());
    }
}
