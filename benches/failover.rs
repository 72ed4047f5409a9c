//! Failover figures, printed (not asserted): on a real kube-apiserver + etcd (`kcm_envtest::envtest`),
//! two replicas of a kube-controller-manager run with kubeadm's flags and its default leader
//! election (lease 15 s, renew deadline 10 s, retry period 2 s); the leader is sent SIGTERM or
//! SIGKILL, and the time from the signal to the new holder's `acquireTime` in the Lease is
//! measured (the Lease's own timestamp, written by the standby as it attempts, so how fast the
//! bench notices does not count). After each round a fresh standby is started beside the new
//! leader. Ours (its standby watches the Lease; SIGTERM releases it) and upstream's v1.36.2
//! (polls; no release) run in turn, each on a fresh control plane.
//!
//! Run with `cargo bench --bench failover [-- --rounds N] [-- --only ours|upstream]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kcm::client::{Api, Client, ClientOptions};
use kcm_envtest::envtest::process::OwnedProcess;
use kcm_envtest::envtest::sidebyside::{Side, controller_manager_args};
use kcm_envtest::envtest::{Assets, ControlPlane};

const OURS: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
const LEASE_NAMESPACE: &str = "kube-system";
const LEASE_NAME: &str = "kube-controller-manager";
/// The longest any step may take (a SIGKILL failover takes a lease plus retries).
const DEADLINE: Duration = Duration::from_secs(90);
/// How long a fresh leader runs before it is signalled, at least: its controllers started
/// (ours notices signals from then on) and the standby made its first attempts.
const SETTLE: Duration = Duration::from_secs(5);

fn main() {
    let mut rounds = 3;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(rounds),
            "--only" => only = args.next(),
            _ => {}
        }
    }
    let upstream = match Assets::locate() {
        Ok(assets) => assets.kube_controller_manager,
        Err(e) => {
            println!("failover: the real binaries are missing ({e}); nothing measured");
            return;
        }
    };
    let sides = [(Side::Ours, PathBuf::from(OURS)), (Side::Upstream, upstream)];
    let mut rows = Vec::new();
    let mut failed = false;
    for (side, binary) in sides {
        if only.as_deref().is_some_and(|o| o != side.name()) {
            continue;
        }
        match measure(side, &binary, rounds) {
            Ok(mut figures) => rows.append(&mut figures),
            Err(e) => {
                println!("failover ({}): FAILED: {e}", side.name());
                failed = true;
            }
        }
    }
    println!(
        "\nfailover on a real kube-apiserver {}, kubeadm's lease 15 s / renew 10 s / retry 2 s",
        kcm_envtest::envtest::KUBERNETES_VERSION
    );
    println!("the new holder's acquireTime in the Lease, after the signal and after the old holder's last");
    println!("renewTime + 15 s (the expiry; negative: released before); {rounds} rounds each\n");
    println!("{:<10} {:<8} {:>29} | {:>29}", "", "", "after the signal", "after the expiry");
    println!(
        "{:<10} {:<8} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9}",
        "binary", "signal", "min", "median", "max", "min", "median", "max"
    );
    for row in &rows {
        println!("{row}");
    }
    if failed {
        std::process::exit(1);
    }
}

/// One binary's rounds: SIGTERM rounds, then SIGKILL rounds, on one fresh control plane.
fn measure(side: Side, binary: &Path, rounds: usize) -> Result<Vec<Row>, String> {
    let plane = ControlPlane::start().map_err(|e| e.to_string())?;
    let dir = plane.dir().join(format!("failover-{}", side.name()));
    let (_, kubeconfig) =
        plane.write_kubeconfigs(&dir.join("kubeadm").join("admin.conf")).map_err(|e| e.to_string())?;
    let admin = Client::new(plane.admin_config(), ClientOptions { qps: -1.0, ..ClientOptions::default() })
        .map_err(|e| e.to_string())?;
    let mut bed = Bed { side, binary, kubeconfig, dir, leases: Api::namespaced(&admin, LEASE_NAMESPACE), started: 0 };
    let mut leader = bed.start_first_leader()?;
    let mut rows = Vec::new();
    for (name, signal) in [("SIGTERM", libc::SIGTERM), ("SIGKILL", libc::SIGKILL)] {
        let mut took = Vec::new();
        for round in 1..=rounds {
            let (new_leader, figure) = bed.round(&mut leader, signal)?;
            eprintln!("{} {name} round {round}: {figure:?}", side.name());
            took.push(figure);
            leader = new_leader;
        }
        rows.push(Row { side, signal: name, took });
    }
    leader.process.stop(Duration::from_secs(10));
    Ok(rows)
}

struct Bed<'a> {
    side: Side,
    binary: &'a Path,
    kubeconfig: PathBuf,
    dir: PathBuf,
    leases: Api<Lease>,
    started: usize,
}

/// A running replica and its name in the Lease, once known.
struct Replica {
    process: OwnedProcess,
    identity: String,
}

impl Bed<'_> {
    fn start(&self, index: usize) -> Result<OwnedProcess, String> {
        let mut args = controller_manager_args(self.side, &self.kubeconfig, &[]);
        for arg in &mut args {
            if arg.starts_with("-v=") {
                *arg = "-v=2".into();
            }
        }
        let mut command = Command::new(self.binary);
        command.args(&args);
        let log = self.dir.join(format!("{}-{index}.log", self.side.name()));
        OwnedProcess::spawn(&format!("kube-controller-manager ({} #{index})", self.side.name()), command, &log)
            .map_err(|e| e.to_string())
    }

    /// The first replica, alone, until it holds the Lease.
    fn start_first_leader(&self) -> Result<Replica, String> {
        let process = self.start(0)?;
        let identity = wait("the first leader", || self.holder().filter(|h| !h.is_empty()))?;
        Ok(Replica { process, identity })
    }

    /// Starts a standby beside `leader`, lets both settle, signals the leader and waits for the
    /// standby to hold the Lease: the new leader, and the time from the signal to its acquireTime.
    fn round(&mut self, leader: &mut Replica, signal: i32) -> Result<(Replica, Figure), String> {
        self.started += 1;
        let standby = self.start(self.started)?;
        // client-go v1.36 logs "Attempting to acquire leader lease...", v1.33 and ours "attempting ...".
        let attempted = || {
            logged(&standby, "attempting to acquire leader lease")
                || logged(&standby, "Attempting to acquire leader lease")
        };
        wait("the standby's first attempt", || attempted().then_some(()))?;
        let settled = Instant::now() + SETTLE;
        if self.side == Side::Ours {
            wait("the leader's controllers", || logged(&leader.process, "workers of ").then_some(()))?;
        }
        std::thread::sleep(settled.saturating_duration_since(Instant::now()));
        let signalled = Timestamp::now();
        leader.process.signal(signal);
        let old = leader.identity.clone();
        // The old holder's last renewal: polling cannot miss it, it stays for a lease or until
        // the release.
        let mut last_renewal = None;
        let spec = wait("the standby to take over", || {
            let spec = self.lease()?;
            let holder = spec.holder_identity.clone().unwrap_or_default();
            if holder == old {
                last_renewal = spec.renew_time.as_ref().map(|t| t.0);
            }
            (!holder.is_empty() && holder != old).then_some(spec)
        })?;
        leader.process.stop(Duration::from_secs(10));
        let acquired = acquire_time(&spec).ok_or("the new term has no acquireTime")?;
        let past_expiry = last_renewal.map(|renewed| acquired.duration_since(renewed) - LEASE);
        let identity = spec.holder_identity.unwrap_or_default();
        let figure = Figure { after_signal: positive(acquired.duration_since(signalled)), past_expiry };
        Ok((Replica { process: standby, identity }, figure))
    }

    fn lease(&self) -> Option<LeaseSpec> {
        self.leases.get_opt(LEASE_NAME).ok().flatten().and_then(|l| l.spec)
    }

    fn holder(&self) -> Option<String> {
        self.lease().map(|s| s.holder_identity.unwrap_or_default())
    }
}

/// kubeadm's (and both binaries' default) lease duration.
const LEASE: SignedDuration = SignedDuration::from_secs(15);

/// One failover: from the signal to the new term's acquireTime, and how long after the old
/// holder's last renewal plus the lease duration the new term began (negative: before the
/// lease ran out, which only a release allows).
#[derive(Debug, Clone, Copy)]
struct Figure {
    after_signal: Duration,
    past_expiry: Option<SignedDuration>,
}

/// One line of the table.
struct Row {
    side: Side,
    signal: &'static str,
    took: Vec<Figure>,
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut after: Vec<f64> = self.took.iter().map(|t| t.after_signal.as_secs_f64()).collect();
        let mut past: Vec<f64> = self.took.iter().filter_map(|t| t.past_expiry.map(|d| d.as_secs_f64())).collect();
        write!(f, "{:<10} {:<8} {} | {}", self.side.name(), self.signal, stats(&mut after), stats(&mut past))
    }
}

/// min, median and max of `values`, in seconds.
fn stats(values: &mut [f64]) -> String {
    values.sort_by(f64::total_cmp);
    let show = |v: Option<&f64>| v.map_or("-".to_string(), |v| format!("{v:.2} s"));
    let (min, median, max) = (values.first(), values.get(values.len() / 2), values.last());
    format!("{:>9} {:>9} {:>9}", show(min), show(median), show(max))
}

/// Polls `check` every 20 ms until it answers, or fails after [`DEADLINE`].
fn wait<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> Result<T, String> {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return Ok(value);
        }
        if started.elapsed() > DEADLINE {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn logged(process: &OwnedProcess, text: &str) -> bool {
    std::fs::read_to_string(process.log_path()).is_ok_and(|log| log.contains(text))
}

fn acquire_time(spec: &LeaseSpec) -> Option<Timestamp> {
    spec.acquire_time.as_ref().map(|t| t.0)
}

fn positive(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or_default()
}
