//! The controller manager's life: informers warm up at once; controllers start (and make
//! requests as themselves) and their workers run only while this process holds the leader
//! Lease (or always with `--leader-elect=false`); a controller that fails to start, like a lost
//! Lease, stops all work and ends the process with an error; and SIGTERM stops the workers
//! (waiting `--controller-shutdown-timeout` for them, as upstream's `RunControllers`), then
//! releases the Lease so a standby takes over within about one retry period.

use std::time::Duration;

use crossbeam_channel::{Receiver, select};

use super::controllers::{CONTROLLERS, is_implemented};
use super::limits::{FD_PROBE_PERIOD, FdWatch};
use super::sd_notify;
use crate::app::flags::Options;
use crate::client::{self, Client, config::ConfigError};
use crate::leader::{self, LeaderElectionConfig, LeaderElector, LeaderEvent};
use crate::runtime::controller::{ControllerSet, StartError};
use crate::server::{HealthChecks, ServeError};

/// Why the controller manager stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// SIGINT or SIGTERM: a clean stop (exit status 0).
    Signalled,
    /// The Lease was lost: upstream exits with "leaderelection lost" (non-zero), so that the
    /// kubelet or systemd restarts it as a candidate.
    LeaderElectionLost,
    /// No file descriptor could be opened for a while (`limits::FdWatch`): exits non-zero so
    /// that a restart closes whatever leaked.
    OutOfFileDescriptors,
}

/// Why the controller manager could not start, or stopped with an error: the lower layers'
/// errors as sources, each message as upstream's (or ours where upstream has none).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The kubeconfig (or in-cluster configuration) is unusable.
    #[error("invalid API server configuration: {0}")]
    Config(#[source] ConfigError),
    /// The API client cannot be built from it.
    #[error("cannot set up the API client: {0}")]
    Client(#[source] client::Error),
    /// The API server did not answer `/version` in time, or refused.
    #[error("cannot reach the API server at {server}: {source}")]
    ApiServer {
        /// The server's URL.
        server: String,
        /// Its last answer.
        #[source]
        source: client::Error,
    },
    /// SIGINT and SIGTERM cannot be caught.
    #[error("cannot install signal handlers: {0}")]
    SignalHandlers(#[source] std::io::Error),
    /// The thread that reads the signals cannot be started.
    #[error("cannot start the signal thread: {0}")]
    SignalThread(#[source] std::io::Error),
    /// The secure port cannot serve.
    #[error("{0}")]
    Serve(#[from] ServeError),
    /// A controller cannot be built.
    #[error("{0}")]
    BuildControllers(#[source] StartError),
    /// The leader election cannot start.
    #[error("{0}")]
    LeaderElection(#[from] leader::StartError),
    /// The systemd watchdog cannot start.
    #[error("{0}")]
    Watchdog(#[from] sd_notify::Error),
    /// A controller failed to start once leading (upstream's "Error starting controllers").
    #[error("error starting controllers: {0}")]
    StartControllers(#[source] StartError),
    /// On a signal, the controllers did not stop within `--controller-shutdown-timeout`.
    #[error("controller shutdown timeout reached")]
    ShutdownTimeout,
}

/// The health check of the leader election, named as upstream's.
const LEADER_ELECTION_CHECK: &str = "leaderElection";

/// Runs the controller manager until a signal or the loss of the Lease.
pub fn run(options: &Options, client: &Client) -> Result<Exit, RunError> {
    let signals = signal_channel()?;
    report_selection(options);
    super::metrics::register(options);
    let checks = HealthChecks::new();
    // As upstream's `HealthzAdaptor`, the leader election check is there before the port serves
    // (healthy until the elector runs), so no `/healthz` ever answers with `ping` alone.
    if options.generic.leader_election.leader_elect {
        checks.add(LEADER_ELECTION_CHECK, || Ok(()));
    }
    let server = super::serve_securely(options, checks.clone())?;
    if let Some(server) = &server {
        log::info!("serving securely on {}", server.addr());
    }
    let mut controllers = super::start_controllers(client, options, CONTROLLERS).map_err(RunError::BuildControllers)?;
    let elector = start_election(options, client)?;
    if let Some(elector) = &elector {
        checks.add(LEADER_ELECTION_CHECK, elector.health_check());
    }
    // The secure port listens and the election runs: a standby is as ready as the leader.
    let notifier = sd_notify::Notifier::from_env().map(std::sync::Arc::new);
    let watchdog = match &notifier {
        Some(notifier) => {
            notifier.notify("READY=1\nSTATUS=serving; leader election started");
            sd_notify::Watchdog::start(notifier.clone(), checks.clone())?
        }
        None => None,
    };
    let outcome = lead_and_work(&mut controllers, elector.as_ref(), &signals, &checks);
    drop(watchdog);
    if let Some(notifier) = &notifier {
        notifier.notify("STOPPING=1");
    }
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            // A controller failed to start: upstream logs "Error starting controllers" and exits
            // at once, without releasing the Lease.
            controllers.stop(Duration::ZERO);
            if let Some(elector) = elector {
                elector.abandon();
            }
            return Err(RunError::StartControllers(e));
        }
    };
    match outcome {
        Exit::Signalled => {
            // Upstream's `--controller-shutdown-timeout`: 0 waits as long as the controllers take.
            let timeout = Some(options.generic.controller_shutdown_timeout).filter(|t| !t.is_zero());
            let terminated = controllers.shut_down(timeout);
            if let Some(server) = server {
                server.stop();
            }
            if let Some(elector) = elector {
                elector.stop();
            }
            if !terminated {
                return Err(RunError::ShutdownTimeout);
            }
            log::info!("stopped");
        }
        Exit::LeaderElectionLost => {
            // Stop taking work at once; no release: another candidate may already lead.
            controllers.stop(Duration::ZERO);
            log::error!("leaderelection lost");
        }
        Exit::OutOfFileDescriptors => {
            // Releasing the Lease would need a connection: a standby takes over at expiry.
            controllers.stop(Duration::ZERO);
            if let Some(elector) = elector {
                elector.abandon();
            }
        }
    }
    Ok(outcome)
}

/// Waits for the Lease, starts the controllers and runs their workers (each controller's once
/// its own caches synced), and returns what ended it, or why a controller could not start.
fn lead_and_work(
    controllers: &mut ControllerSet,
    elector: Option<&LeaderElector>,
    signals: &Receiver<i32>,
    checks: &HealthChecks,
) -> Result<Exit, StartError> {
    let never = crossbeam_channel::never();
    let lost = elector.map_or(&never, |e| e.leader_lost());
    let tick = Duration::from_millis(200);
    let mut fds = FdWatch::default();
    if let Some(elector) = elector {
        log::info!("waiting to acquire the leader lease");
        while !elector.wait_until_leader(tick) {
            if let Some(exit) = interrupted(signals, lost, &mut fds) {
                return Ok(exit);
            }
        }
    }
    exit_if_lost_meanwhile(lost, || controllers.run_workers())?;
    for name in controllers.names() {
        // As upstream, whose controller checks are added once the controllers start (after
        // `leaderElection`): the default check of a running controller passes.
        checks.add(name, || Ok(()));
    }
    log::info!("workers of {} controllers running", controllers.names().len());
    let probes = crossbeam_channel::tick(FD_PROBE_PERIOD);
    loop {
        select! {
            recv(signals) -> signal => {
                log::info!("received signal {}; shutting down", signal.unwrap_or_default());
                return Ok(Exit::Signalled);
            }
            recv(lost) -> _ => return Ok(Exit::LeaderElectionLost),
            recv(probes) -> _ => if let Err(e) = fds.check(std::time::Instant::now()) {
                log::error!("{e}");
                return Ok(Exit::OutOfFileDescriptors);
            },
        }
    }
}

/// Runs `start` (the controllers' start once leading, which may wait long on an unreachable API
/// server: ServiceAccounts, discovery, node-ipam's first list) while watching the Lease: if it
/// is lost meanwhile, the process exits at once with "leaderelection lost", as upstream's fatal
/// `OnStoppedLeading` does, so that nothing this process starts acts after a standby may lead.
fn exit_if_lost_meanwhile<T>(lost: &Receiver<()>, start: impl FnOnce() -> T) -> T {
    let (started, done) = crossbeam_channel::bounded::<()>(0);
    let lost = lost.clone();
    let guard = std::thread::Builder::new().name("lease-guard".into()).spawn(move || {
        select! {
            recv(lost) -> message => if message.is_ok() {
                log::error!("leaderelection lost");
                log::logger().flush();
                std::process::exit(1);
            },
            recv(done) -> _ => {}
        }
    });
    let result = start();
    drop(started);
    if let Ok(guard) = guard {
        let _ = guard.join();
    }
    result
}

fn interrupted(signals: &Receiver<i32>, lost: &Receiver<()>, fds: &mut FdWatch) -> Option<Exit> {
    if let Ok(signal) = signals.try_recv() {
        log::info!("received signal {signal}; shutting down");
        return Some(Exit::Signalled);
    }
    if let Err(e) = fds.check(std::time::Instant::now()) {
        log::error!("{e}");
        return Some(Exit::OutOfFileDescriptors);
    }
    lost.try_recv().ok().map(|()| Exit::LeaderElectionLost)
}

/// Starts the election when `--leader-elect` is on.
fn start_election(options: &Options, client: &Client) -> Result<Option<LeaderElector>, leader::StartError> {
    let flags = &options.generic.leader_election;
    if !flags.leader_elect {
        log::info!("leader election is off (--leader-elect=false): controllers run at once");
        return Ok(None);
    }
    let config = LeaderElectionConfig {
        namespace: flags.resource_namespace.clone(),
        name: flags.resource_name.clone(),
        identity: crate::leader::identity(),
        lease_duration: flags.lease_duration,
        renew_deadline: flags.renew_deadline,
        retry_period: flags.retry_period,
        release_on_cancel: releases_lease_on_exit(options),
    };
    log::info!("attempting to acquire leader lease {}/{} as {}", config.namespace, config.name, config.identity);
    let elector = LeaderElector::start(client.clone(), config, |event| match event {
        LeaderEvent::StartedLeading => log::info!("started leading"),
        LeaderEvent::StoppedLeading => log::info!("stopped leading"),
        LeaderEvent::NewLeader(identity) => log::info!("new leader elected: {identity}"),
    })?;
    Ok(Some(elector))
}

/// Whether a graceful exit releases the Lease. Upstream v1.36 does only with its alpha gate
/// `ControllerManagerReleaseLeaderElectionLockOnExit` on; we do by default (a standby takes over
/// at once instead of after the lease duration), and keep upstream's switch: the gate set to
/// `false` explicitly gives upstream's default, the Lease left to expire.
fn releases_lease_on_exit(options: &Options) -> bool {
    let explicit = options.generic.feature_gates.explicit();
    explicit.get("ControllerManagerReleaseLeaderElectionLockOnExit") != Some(&false)
}

/// SIGINT and SIGTERM as a channel.
fn signal_channel() -> Result<Receiver<i32>, RunError> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
        .map_err(RunError::SignalHandlers)?;
    let (tx, rx) = crossbeam_channel::bounded(4);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if tx.send(signal).is_err() {
                    return;
                }
            }
        })
        .map_err(RunError::SignalThread)?;
    Ok(rx)
}

/// Logs which selected controllers run and which are not built yet.
fn report_selection(options: &Options) {
    let selected: Vec<&str> =
        CONTROLLERS.iter().map(|c| c.name).filter(|name| options.starts_controller(name)).collect();
    log::info!("{} controllers selected by --controllers: {}", selected.len(), selected.join(", "));
    let (built, not_built): (Vec<&str>, Vec<&str>) = selected.iter().partition(|name| is_implemented(name));
    if !not_built.is_empty() {
        log::warn!("selected but not built yet: {}", not_built.join(", "));
    }
    if built.is_empty() {
        log::warn!("none of the selected controllers is built; the controller manager idles until it is stopped");
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::app::flags::{Command, parse};

    fn options(args: &[&str]) -> Options {
        match parse(args.iter().map(OsString::from)) {
            Ok(Command::Run(options)) => *options,
            other => panic!("expected options, got {other:?}"),
        }
    }

    #[test]
    fn start_up_errors_read_as_before_and_keep_what_failed() {
        let forbidden = client::Error::Api(Box::new(client::ApiError::from_response(403, b"", None)));
        let error = RunError::ApiServer { server: "https://10.0.0.1:6443".into(), source: forbidden };
        assert!(error.to_string().starts_with("cannot reach the API server at https://10.0.0.1:6443: "), "{error}");
        assert!(client::Error::find(&error).is_some_and(client::Error::is_forbidden), "the API error's kind is kept");
        let hook = StartError::Start { controller: "ttl-controller", source: "boom".into() };
        let error = RunError::StartControllers(hook);
        assert_eq!(error.to_string(), "error starting controllers: starting ttl-controller: boom");
        let found = crate::apimachinery::errors::find_in_chain::<StartError>(&error);
        assert!(matches!(found, Some(StartError::Start { controller: "ttl-controller", .. })));
    }

    #[test]
    fn the_lease_is_released_on_exit_unless_upstreams_gate_is_set_off() {
        assert!(releases_lease_on_exit(&options(&[])));
        let gate = "--feature-gates=ControllerManagerReleaseLeaderElectionLockOnExit";
        assert!(releases_lease_on_exit(&options(&[&format!("{gate}=true")])));
        assert!(!releases_lease_on_exit(&options(&[&format!("{gate}=false")])));
    }
}
