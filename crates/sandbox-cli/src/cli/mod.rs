//! The `kcm-sandbox` command line: `serve`, `demo` (the narrated tour, in [`demo`]), `nodes`,
//! `side-by-side` and `e2e` (in [`e2e`]).

pub mod demo;
pub mod e2e;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Weak};
use std::time::Duration;

use lexopt::prelude::*;
use parking_lot::Mutex;

use crate::apimachinery::duration::parse_go_duration;
use crate::apimachinery::errors::BoxError;
use crate::sandbox::server::{Sandbox, SandboxOptions};

const USAGE: &str = "\
Usage:
  kcm-sandbox serve [options]   run the development API server until SIGINT/SIGTERM; prints one line
                                when ready, and /readyz answers ok from then on (faults spare the
                                health probes; only a restart's downtime interrupts them)
  kcm-sandbox demo [options]    run the server, simulated nodes and kube-controller-manager, and narrate
  kcm-sandbox nodes --kubeconfig F --names a,b,c
                                run simulated nodes (kubelets and a scheduler) against any API server,
                                e.g. a real kube-apiserver, until SIGINT/SIGTERM
  kcm-sandbox side-by-side [options]
                                run scripted scenarios on a real kube-apiserver, once with upstream's
                                kube-controller-manager and once with ours, and print what differs
  kcm-sandbox e2e [options]     run upstream's e2e suite (e2e.test v1.36.2) on its controller specs against
                                a real kube-apiserver, simulated kubelets and a kube-controller-manager

serve options:
  --listen ADDR               address to listen on (default 127.0.0.1:6443; port 0 picks a free one)
  --nodes N                   simulated nodes to register (default 0)
  --kubeconfig-out PATH       write the admin kubeconfig here, controller-manager.conf and sa.key beside it
                              (default ./sandbox/admin.conf)
  --plain-http                serve plain HTTP; requests without credentials act as a cluster admin
  --authorization-mode MODE   AlwaysAllow (default) or RBAC (also Node,RBAC): enforce upstream's bootstrap
                              RBAC policy; simulated nodes act as the admin
  --history N                 changes kept for watches; older resourceVersions are Gone (default 10000)
  --bookmark-interval DUR     how often watches get a BOOKMARK (default 1m0s)

serve faults (health probes /healthz, /livez, /readyz are never failed nor delayed):
  --fail-next N:CODE[:SECS]   answer the next N API requests with HTTP CODE (500, 429, 503), Retry-After SECS
  --latency DUR               delay every API request by DUR
  --close-watches-every DUR   cut every open watch (and connection) this often
  --compact-every DUR         forget the change history this often (older resourceVersions are Gone)
  --restart-every DUR         stop the server this often and listen again on the same port after
                              --restart-downtime, the stored objects kept (open watches end)
  --restart-downtime DUR      how long a restart leaves the port closed (default 1s)

serve signals:
  SIGUSR1                     close every open watch (and connection) now
  SIGUSR2                     restart now: stop, wait --restart-downtime, listen on the same port, state kept
  SIGINT, SIGTERM             stop and exit

serve (with --nodes) and nodes read commands on standard input, answering ok or error: ...:
  add-node NAME               a new simulated node registers and runs its pods
  remove-node NAME            a simulated node stops for good; its Node and Lease are deleted

demo options:
  --controller-manager PATH   the kube-controller-manager binary (default: next to kcm-sandbox)
  --nodes N                   simulated nodes (default 3)
  --real-server               run against etcd + kube-apiserver v1.36.2 (../shared/k8s, or
                              KCM_K8S_ASSETS; etcd from PATH or KCM_ETCD) instead of the sandbox

side-by-side options:
  --scenario NAME             run only this scenario (repeatable; default: all of them)
  --list                      list the scenarios and exit
  --ours PATH                 our kube-controller-manager (default: next to kcm-sandbox)
  --upstream PATH             upstream's (default: the real control plane's assets)
  --logs DIR                  where the controller managers' logs go (default: a temporary folder)

e2e options (../shared/k8s/v1.36.2/e2e, or KCM_E2E_DIR holding e2e.test and ginkgo):
  --ours PATH                 our kube-controller-manager (default: next to kcm-sandbox); run by default
  --upstream[=PATH]           run upstream's instead (default: the real control plane's assets)
  --both                      run upstream's, then ours, each alone; print the specs whose outcome differs
                              and fail if one passed with upstream's and not with ours
  --ci                        only the short list of fast specs CI runs
  --list                      print the selected specs (a dry run of the suite) and exit
  --focus RE, --skip RE       ginkgo regexes of one's own (default: the controller specs and the skip list)
  --procs N                   ginkgo's parallel processes (default 2)
  --nodes N                   simulated nodes (default 3)
  --timeout DUR               the suite's time limit (default 75m)
  --out DIR                   reports, ginkgo's output and the controller manager's log (default: a temporary folder)
  -v, --verbose               print every spec's outcome
";

/// Why the command line is refused (a usage error) or a command could not run: what `main`
/// prints after `kcm-sandbox: `, exiting with status 2.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line cannot be read.
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    /// An argument no command takes, with the usage.
    #[error("{source}\n{USAGE}")]
    Unexpected {
        /// lexopt's account of it.
        #[source]
        source: lexopt::Error,
    },
    /// A command that does not exist, with the usage.
    #[error("unknown command {command:?}\n{USAGE}")]
    UnknownCommand {
        /// The command given.
        command: String,
    },
    /// A flag `serve` does not take.
    #[error("unknown flag: {flag}")]
    UnknownFlag {
        /// The flag.
        flag: String,
    },
    /// A flag's value is missing.
    #[error("{flag}: {source}")]
    MissingValue {
        /// The flag.
        flag: String,
        /// lexopt's account of it.
        #[source]
        source: lexopt::Error,
    },
    /// A flag's value is not UTF-8.
    #[error("{flag}: not valid UTF-8")]
    ValueNotUtf8 {
        /// The flag.
        flag: String,
    },
    /// A flag's value does not parse.
    #[error("invalid argument {raw:?} for {flag}: {source}")]
    InvalidArgument {
        /// The value.
        raw: String,
        /// The flag.
        flag: String,
        /// Why it does not parse.
        #[source]
        source: BoxError,
    },
    /// A repeated fault's period is zero.
    #[error("invalid argument for {flag}: the period must be positive")]
    NotPositive {
        /// The flag.
        flag: String,
    },
    /// `--fail-next` is not `COUNT:CODE[:RETRY_AFTER_SECONDS]`.
    #[error("invalid argument {raw:?} for --fail-next: want COUNT:CODE or COUNT:CODE:RETRY_AFTER_SECONDS")]
    FailNext {
        /// The value.
        raw: String,
    },
    /// A flag `nodes` needs is missing.
    #[error("nodes: {flag} is required")]
    Required {
        /// The flag.
        flag: &'static str,
    },
    /// A `nodes` command line on standard input that is neither `add-node` nor `remove-node`.
    #[error("unknown command {line:?}: want add-node NAME or remove-node NAME")]
    NodeCommand {
        /// The line.
        line: String,
    },
    /// The signal handlers cannot be installed.
    #[error("cannot install signal handlers: {source}")]
    Signals {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig of `nodes` cannot be loaded.
    #[error(transparent)]
    Kubeconfig(#[from] crate::client::config::ConfigError),
    /// The sandbox, its faults, its kubeconfig files or its simulated nodes failed.
    #[error("{0}")]
    Sandbox(#[source] BoxError),
    /// Upstream's binary is not among the assets.
    #[error(transparent)]
    Assets(#[from] crate::envtest::AssetsError),
    /// A scenario `side-by-side` does not know.
    #[error("unknown scenario {name:?}; known: {known:?}")]
    UnknownScenario {
        /// The name given.
        name: String,
        /// The scenarios there are.
        known: Vec<&'static str>,
    },
    /// An argument `side-by-side` does not take.
    #[error("side-by-side: {source}")]
    SideBySideArgument {
        /// lexopt's account of it.
        #[source]
        source: lexopt::Error,
    },
    /// A side-by-side run could not start.
    #[error(transparent)]
    SideBySide(#[from] crate::envtest::sidebyside::Error),
    /// The demo failed.
    #[error(transparent)]
    Demo(#[from] demo::Error),
    /// The e2e suite failed.
    #[error(transparent)]
    E2e(#[from] e2e::Error),
}

/// The sandbox's errors (text until its helper types them), kept as the source.
fn sandbox_error(e: impl Into<BoxError>) -> Error {
    Error::Sandbox(e.into())
}

/// Runs the command line; `Err` is a usage error (exit status 2).
pub fn run(args: impl IntoIterator<Item = OsString>) -> Result<ExitCode, Error> {
    let mut parser = lexopt::Parser::from_iter(std::iter::once(OsString::from("kcm-sandbox")).chain(args));
    let command = match parser.next()? {
        Some(Value(command)) => command.string()?,
        Some(Long("help") | Short('h')) | None => {
            print!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        }
        Some(other) => return Err(Error::Unexpected { source: other.unexpected() }),
    };
    match command.as_str() {
        "serve" => serve(parse_serve(&mut parser)?),
        "demo" => Ok(crate::cli::demo::run(crate::cli::demo::parse(&mut parser)?)?),
        "nodes" => nodes(parse_nodes(&mut parser)?),
        "side-by-side" => side_by_side(&mut parser),
        "e2e" => Ok(e2e::run(e2e::parse(&mut parser, upstream_binary)?)?),
        other => Err(Error::UnknownCommand { command: other.to_string() }),
    }
}

/// Options of `serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The server's own options (`--listen`, `--plain-http`, `--authorization-mode`, `--history`, ...).
    pub sandbox: SandboxOptions,
    /// `--nodes`: simulated nodes to register.
    pub nodes: usize,
    /// `--kubeconfig-out`: where admin.conf goes, controller-manager.conf and sa.key beside it.
    pub kubeconfig_out: PathBuf,
    /// `--fail-next N:CODE[:SECS]`: (count, HTTP code, Retry-After seconds).
    pub fail_next: Option<(usize, u16, Option<u64>)>,
    /// `--latency`: a delay added to every API request.
    pub latency: Option<Duration>,
    /// `--close-watches-every`: how often every open watch is cut.
    pub close_watches_every: Option<Duration>,
    /// `--compact-every`: how often the change history is forgotten.
    pub compact_every: Option<Duration>,
    /// `--restart-every`: how often the server restarts.
    pub restart_every: Option<Duration>,
    /// How long a restart (periodic or by SIGUSR2) keeps the port closed.
    pub restart_downtime: Duration,
}

/// The port stays closed this long during a restart unless `--restart-downtime` says otherwise.
pub const DEFAULT_RESTART_DOWNTIME: Duration = Duration::from_secs(1);

fn parse_serve(parser: &mut lexopt::Parser) -> Result<ServeOptions, Error> {
    let mut options = ServeOptions {
        sandbox: SandboxOptions::default(),
        nodes: 0,
        kubeconfig_out: PathBuf::from("sandbox/admin.conf"),
        fail_next: None,
        latency: None,
        close_watches_every: None,
        compact_every: None,
        restart_every: None,
        restart_downtime: DEFAULT_RESTART_DOWNTIME,
    };
    while let Some(arg) = parser.next()? {
        let flag = match &arg {
            Long(name) => format!("--{name}"),
            other => return Err(Error::Unexpected { source: other.clone().unexpected() }),
        };
        match arg {
            Long("plain-http") => options.sandbox.plain_http = true,
            Long("authorization-mode") => options.sandbox.authorization_mode = value(parser, &flag)?,
            Long("listen") => options.sandbox.listen = value(parser, &flag)?,
            Long("nodes") => options.nodes = value(parser, &flag)?,
            Long("kubeconfig-out") => options.kubeconfig_out = PathBuf::from(text(parser, &flag)?),
            Long("history") => options.sandbox.history = value(parser, &flag)?,
            Long("bookmark-interval") => options.sandbox.bookmark_interval = duration(parser, &flag)?,
            Long("latency") => options.latency = Some(duration(parser, &flag)?),
            Long("fail-next") => options.fail_next = Some(parse_fail_next(&text(parser, &flag)?)?),
            Long("close-watches-every") => options.close_watches_every = Some(period(parser, &flag)?),
            Long("compact-every") => options.compact_every = Some(period(parser, &flag)?),
            Long("restart-every") => options.restart_every = Some(period(parser, &flag)?),
            Long("restart-downtime") => options.restart_downtime = duration(parser, &flag)?,
            Long("help") => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(Error::UnknownFlag { flag }),
        }
    }
    Ok(options)
}

fn text(parser: &mut lexopt::Parser, flag: &str) -> Result<String, Error> {
    let value = parser.value().map_err(|source| Error::MissingValue { flag: flag.to_string(), source })?;
    value.string().map_err(|_| Error::ValueNotUtf8 { flag: flag.to_string() })
}

fn value<T: std::str::FromStr>(parser: &mut lexopt::Parser, flag: &str) -> Result<T, Error>
where
    T::Err: Into<BoxError>,
{
    let raw = text(parser, flag)?;
    match raw.parse() {
        Ok(value) => Ok(value),
        Err(e) => Err(Error::InvalidArgument { raw, flag: flag.to_string(), source: e.into() }),
    }
}

fn duration(parser: &mut lexopt::Parser, flag: &str) -> Result<Duration, Error> {
    let raw = text(parser, flag)?;
    match parse_go_duration(&raw) {
        Ok(duration) => Ok(duration),
        Err(e) => Err(Error::InvalidArgument { raw, flag: flag.to_string(), source: e.into() }),
    }
}

/// The period of a repeated fault: a positive duration.
fn period(parser: &mut lexopt::Parser, flag: &str) -> Result<Duration, Error> {
    let period = duration(parser, flag)?;
    if period.is_zero() {
        return Err(Error::NotPositive { flag: flag.to_string() });
    }
    Ok(period)
}

fn parse_fail_next(raw: &str) -> Result<(usize, u16, Option<u64>), Error> {
    let bad = || Error::FailNext { raw: raw.to_string() };
    let parts: Vec<&str> = raw.split(':').collect();
    let (count, code, retry) = match parts.as_slice() {
        [count, code] => (count, code, None),
        [count, code, retry] => (count, code, Some(retry.parse::<u64>().map_err(|_| bad())?)),
        _ => return Err(bad()),
    };
    Ok((count.parse().map_err(|_| bad())?, code.parse().map_err(|_| bad())?, retry))
}

/// A running `serve`: the sandbox, its simulated nodes and what restarts it.
pub struct Served {
    /// The running server.
    pub sandbox: Arc<Sandbox>,
    /// The simulated nodes, when `--nodes` asked for some.
    pub nodes: Option<crate::sandbox::nodes::SimulatedNodes>,
    /// Restarts the server (periodically, on SIGUSR2) and stops restarts at shutdown.
    pub restarter: Arc<Restarter>,
}

/// Starts the sandbox with its nodes, applies the fault flags and writes the kubeconfigs.
pub fn start(options: &ServeOptions) -> Result<Served, Error> {
    let sandbox = Arc::new(Sandbox::start(options.sandbox.clone()).map_err(sandbox_error)?);
    let restarter = Arc::new(Restarter::new(&sandbox, options.restart_downtime));
    if let Some(every) = options.close_watches_every {
        repeat(&sandbox, every, Sandbox::close_watches);
    }
    if let Some(every) = options.compact_every {
        repeat(&sandbox, every, Sandbox::compact);
    }
    if let Some(every) = options.restart_every {
        restarter.repeat(every);
    }
    if let Some((count, code, retry)) = options.fail_next {
        sandbox.faults().fail_next(count, code, retry).map_err(sandbox_error)?;
    }
    sandbox.faults().set_latency(options.latency);
    sandbox.write_kubeconfigs(&options.kubeconfig_out).map_err(sandbox_error)?;
    let nodes = (options.nodes > 0).then(|| {
        let names = (1..=options.nodes).map(|i| format!("node-{i}")).collect();
        crate::sandbox::nodes::SimulatedNodes::start(
            sandbox.admin_config(),
            names,
            crate::sandbox::nodes::NodeOptions::default(),
        )
    });
    Ok(Served { sandbox, nodes: nodes.transpose().map_err(sandbox_error)?, restarter })
}

/// Runs a fault every `period` for as long as the sandbox lives.
fn repeat(sandbox: &Arc<Sandbox>, period: Duration, fault: fn(&Sandbox)) {
    every(Arc::downgrade(sandbox), period, move |sandbox| {
        fault(sandbox);
        true
    });
}

/// Calls `tick` on `target` every `period` on a thread of its own, until the target is gone or
/// `tick` answers false.
fn every<T: Send + Sync + 'static>(target: Weak<T>, period: Duration, tick: impl Fn(&T) -> bool + Send + 'static) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(period);
            let Some(target) = target.upgrade() else { return };
            if !tick(&target) {
                return;
            }
        }
    });
}

/// Stops the server and listens again on the same address after a downtime, the store kept, as
/// a kube-apiserver restarting in front of the same etcd. One restart runs at a time, and none
/// after [`Restarter::shut_down`], so a restart in progress cannot reopen a stopped server.
pub struct Restarter {
    sandbox: Weak<Sandbox>,
    downtime: Duration,
    /// Held for the whole of a restart; `true` once shut down.
    shut_down: Mutex<bool>,
}

impl Restarter {
    /// A restarter that keeps the port closed for `downtime` during each restart.
    pub fn new(sandbox: &Arc<Sandbox>, downtime: Duration) -> Restarter {
        Restarter { sandbox: Arc::downgrade(sandbox), downtime, shut_down: Mutex::new(false) }
    }

    /// Restarts the server now; `Ok(false)` when the sandbox is gone or shut down.
    pub fn restart(&self) -> Result<bool, Error> {
        let shut_down = self.shut_down.lock();
        let Some(sandbox) = self.sandbox.upgrade().filter(|_| !*shut_down) else {
            return Ok(false);
        };
        log::info!("restarting: the server stops for {:?}, its state kept", self.downtime);
        sandbox.pause();
        std::thread::sleep(self.downtime);
        sandbox.resume().map_err(sandbox_error)?;
        log::info!("restarted: serving {} again", sandbox.url());
        Ok(true)
    }

    /// Restarts in the background (for a signal handler), logging a failure.
    pub fn restart_in_background(self: &Arc<Self>) {
        let restarter = self.clone();
        std::thread::spawn(move || {
            if let Err(e) = restarter.restart() {
                log::error!("restart failed: {e}");
            }
        });
    }

    /// Restarts every `period` until the sandbox is gone or shut down.
    fn repeat(self: &Arc<Self>, period: Duration) {
        every(Arc::downgrade(self), period, |restarter| match restarter.restart() {
            Ok(keep_going) => keep_going,
            Err(e) => {
                log::error!("restart failed: {e}");
                true
            }
        });
    }

    /// Waits for a restart in progress and prevents any further one.
    pub fn shut_down(&self) {
        *self.shut_down.lock() = true;
    }
}

fn serve(options: ServeOptions) -> Result<ExitCode, Error> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGUSR2])
        .map_err(|source| Error::Signals { source })?;
    let Served { sandbox, nodes, restarter } = match start(&options) {
        Ok(served) => served,
        Err(e) => {
            eprintln!("kcm-sandbox: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!(
        "kcm-sandbox: serving {} with {} simulated node(s); admin kubeconfig {} (controller-manager.conf and sa.key beside it)",
        sandbox.url(),
        options.nodes,
        options.kubeconfig_out.display()
    );
    let nodes = nodes.map(Arc::new);
    if let Some(nodes) = &nodes {
        node_commands(Arc::downgrade(nodes));
    }
    for signal in signals.forever() {
        match signal {
            SIGUSR1 => {
                log::info!("SIGUSR1: closing every open watch");
                sandbox.close_watches();
            }
            SIGUSR2 => {
                log::info!("SIGUSR2: restarting the server");
                restarter.restart_in_background();
            }
            _ => {
                log::info!("received signal {signal}; shutting down");
                break;
            }
        }
    }
    restarter.shut_down();
    // The command reader holds the nodes only while it runs a command.
    if let Some(Ok(nodes)) = nodes.map(Arc::try_unwrap) {
        nodes.stop();
    }
    sandbox.stop();
    Ok(ExitCode::SUCCESS)
}

/// Reads `add-node NAME` and `remove-node NAME` lines from standard input and adds or removes
/// simulated nodes at run time, answering `ok` or `error: …` on one line each.
fn node_commands(nodes: Weak<crate::sandbox::nodes::SimulatedNodes>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { return };
            let Some(nodes) = nodes.upgrade() else { return };
            let answer = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["add-node", name] => nodes.add_node(name).map_err(sandbox_error),
                ["remove-node", name] => nodes.remove_node(name).map_err(sandbox_error),
                [] => continue,
                _ => Err(Error::NodeCommand { line: line.clone() }),
            };
            match answer {
                Ok(()) => println!("ok"),
                Err(e) => println!("error: {e}"),
            }
        }
    });
}

/// `nodes`: the kubeconfig and the node names.
fn parse_nodes(parser: &mut lexopt::Parser) -> Result<(PathBuf, Vec<String>), Error> {
    let (mut kubeconfig, mut names) = (None, Vec::new());
    while let Some(arg) = parser.next()? {
        match arg {
            Long("kubeconfig") => kubeconfig = Some(PathBuf::from(text(parser, "--kubeconfig")?)),
            Long("names") => names = text(parser, "--names")?.split(',').map(str::to_string).collect(),
            other => return Err(Error::Unexpected { source: other.unexpected() }),
        }
    }
    names.retain(|n| !n.is_empty());
    let kubeconfig = kubeconfig.ok_or(Error::Required { flag: "--kubeconfig" })?;
    if names.is_empty() {
        return Err(Error::Required { flag: "--names" });
    }
    Ok((kubeconfig, names))
}

/// Runs simulated nodes against the server of `kubeconfig` until SIGINT/SIGTERM.
fn nodes((kubeconfig, names): (PathBuf, Vec<String>)) -> Result<ExitCode, Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(|source| Error::Signals { source })?;
    let config = crate::client::config::load(Some(&kubeconfig), None)?;
    let count = names.len();
    let nodes = Arc::new(
        crate::sandbox::nodes::SimulatedNodes::start(config, names, crate::sandbox::nodes::NodeOptions::default())
            .map_err(sandbox_error)?,
    );
    println!("kcm-sandbox: running {count} simulated node(s)");
    node_commands(Arc::downgrade(&nodes));
    signals.forever().next();
    if let Ok(nodes) = Arc::try_unwrap(nodes) {
        nodes.stop();
    }
    Ok(ExitCode::SUCCESS)
}

/// Upstream's kube-controller-manager among the real control plane's assets.
fn upstream_binary() -> Result<PathBuf, crate::envtest::AssetsError> {
    crate::envtest::Assets::locate().map(|assets| assets.kube_controller_manager)
}

/// `side-by-side`: runs the chosen scenarios and prints each one's differences; fails when a run
/// failed or a difference is not a known one.
fn side_by_side(parser: &mut lexopt::Parser) -> Result<ExitCode, Error> {
    use crate::envtest::sidebyside::{self, RunOptions, scenarios};
    let mut chosen = Vec::new();
    let mut options = RunOptions {
        ours: crate::cli::demo::default_controller_manager(),
        upstream: None,
        log_dir: std::env::temp_dir().join(format!("kcm-side-by-side-{}", std::process::id())),
    };
    while let Some(arg) = parser.next()? {
        match arg {
            Long("scenario") => {
                let name = text(parser, "--scenario")?;
                let known: Vec<&str> = scenarios::all().map(|s| s.name).collect();
                chosen.push(sidebyside::scenario(&name).ok_or(Error::UnknownScenario { name, known })?);
            }
            Long("list") => {
                scenarios::all().for_each(|s| println!("{:<24} {}", s.name, s.summary));
                return Ok(ExitCode::SUCCESS);
            }
            Long("ours") => options.ours = PathBuf::from(text(parser, "--ours")?),
            Long("upstream") => options.upstream = Some(PathBuf::from(text(parser, "--upstream")?)),
            Long("logs") => options.log_dir = PathBuf::from(text(parser, "--logs")?),
            other => return Err(Error::SideBySideArgument { source: other.unexpected() }),
        }
    }
    if chosen.is_empty() {
        chosen = scenarios::all().collect();
    }
    let mut clean = true;
    for scenario in chosen {
        println!("--- {}: {} (upstream and ours, at once)", scenario.name, scenario.summary);
        let outcome = sidebyside::compare(scenario, &options)?;
        print!("{outcome}");
        clean &= outcome.upstream.error.is_none() && outcome.ours.error.is_none() && outcome.unexpected().is_empty();
    }
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ServeOptions, Error> {
        let mut parser = lexopt::Parser::from_iter(std::iter::once("kcm-sandbox").chain(args.iter().copied()));
        parse_serve(&mut parser)
    }

    #[test]
    fn nodes_need_a_kubeconfig_and_names() {
        let nodes = |args: &[&str]| {
            let mut parser = lexopt::Parser::from_iter(std::iter::once("kcm-sandbox").chain(args.iter().copied()));
            parse_nodes(&mut parser)
        };
        let (kubeconfig, names) = nodes(&["--kubeconfig", "a.conf", "--names", "n1,n2,"]).unwrap();
        assert_eq!((kubeconfig, names), (PathBuf::from("a.conf"), vec!["n1".to_string(), "n2".to_string()]));
        assert!(nodes(&["--names", "n1"]).unwrap_err().to_string().contains("--kubeconfig"));
        assert!(nodes(&["--kubeconfig", "a.conf"]).unwrap_err().to_string().contains("--names"));
        assert!(nodes(&["--kubeconfig", "a.conf", "--names", "n1", "--bogus"]).is_err());
    }

    #[test]
    fn fault_flags_parse() {
        let options = parse(&[
            "--fail-next",
            "3:429:2",
            "--latency",
            "250ms",
            "--close-watches-every",
            "30s",
            "--compact-every",
            "1m",
            "--restart-every",
            "2m",
            "--restart-downtime",
            "3s",
        ])
        .unwrap();
        assert_eq!(options.fail_next, Some((3, 429, Some(2))));
        assert_eq!(options.latency, Some(Duration::from_millis(250)));
        assert_eq!(options.close_watches_every, Some(Duration::from_secs(30)));
        assert_eq!(options.compact_every, Some(Duration::from_secs(60)));
        assert_eq!(options.restart_every, Some(Duration::from_secs(120)));
        assert_eq!(options.restart_downtime, Duration::from_secs(3));
    }

    #[test]
    fn restarts_default_to_none_with_a_one_second_downtime() {
        let options = parse(&[]).unwrap();
        assert_eq!((options.restart_every, options.restart_downtime), (None, DEFAULT_RESTART_DOWNTIME));
    }

    #[test]
    fn bad_fault_flags_are_refused_by_name() {
        for (args, needle) in [
            (["--restart-every", "0s"], "--restart-every: the period must be positive"),
            (["--close-watches-every", "0"], "--close-watches-every: the period must be positive"),
            (["--restart-downtime", "soon"], "for --restart-downtime"),
            (["--fail-next", "2"], "for --fail-next"),
        ] {
            let error = parse(&args).unwrap_err().to_string();
            assert!(error.contains(needle), "{error}");
        }
    }

    /// What `main` prints after `kcm-sandbox: ` reads as before the errors were typed.
    #[test]
    fn usage_errors_read_as_before() {
        let run = |args: &[&str]| run(args.iter().map(OsString::from)).unwrap_err().to_string();
        assert_eq!(run(&["bogus"]), format!("unknown command \"bogus\"\n{USAGE}"));
        assert_eq!(run(&["serve", "--bogus"]), "unknown flag: --bogus");
        assert_eq!(
            run(&["serve", "--nodes", "x"]),
            "invalid argument \"x\" for --nodes: invalid digit found in string"
        );
        assert_eq!(
            run(&["serve", "--fail-next", "1"]),
            "invalid argument \"1\" for --fail-next: want COUNT:CODE or COUNT:CODE:RETRY_AFTER_SECONDS"
        );
        assert_eq!(run(&["nodes", "--names", "a"]), "nodes: --kubeconfig is required");
        assert!(run(&["side-by-side", "--scenario", "nope"]).starts_with("unknown scenario \"nope\"; known: ["));
        assert_eq!(run(&["demo", "--nodes", "1"]), "--nodes: the demo needs at least 2 nodes");
        assert_eq!(run(&["e2e", "--procs", "0"]), "e2e: --procs and --nodes must be at least 1");
    }
}
