//! The chaos bench (issue 21): every fault of `kcm::envtest::chaos` during every workload,
//! with our `kube-controller-manager` and then upstream's v1.33.5 (from the envtest assets,
//! started as kubeadm starts it), each fault on a fresh real control plane. Prints a table:
//! fault × workload → seconds to converge after the fault (ours, upstream), and whether the
//! invariants held (the violations otherwise).
//!
//! `cargo bench --bench chaos` (needs `../shared/k8s` and etcd, as the real-server tests).
//! `-- --fault <substring>` runs only the faults whose name contains it; `-- --ours-only`
//! skips upstream. Takes ~10 minutes on a 2-core machine (the two sides run at once).
//!
//! Per bed: every workload but the node failure is prepared, changed, the fault injected and
//! each timed to convergence from the fault's end; then the node failure is prepared, changed,
//! the fault injected again and timed. A replica that exited (a stall past its renew deadline)
//! is restarted as systemd would; a killed leader's standby takes over (two replicas then).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kcm::envtest::Assets;
use kcm::envtest::chaos::{Bed, Fault, Workload, workloads};
use kcm::envtest::sidebyside::Side;

const OURS: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
/// kube-controller-manager's default renew deadline.
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Past the renew deadline: the leader gives up and exits.
const STALL: Duration = Duration::from_secs(14);
const FAULTS: &[Fault] = &[
    Fault::None,
    Fault::KillApiserver,
    Fault::KillEtcd,
    Fault::CompactEtcd,
    Fault::StallApiserver(STALL),
    Fault::KillLeader,
];

/// One workload's outcome on one side: seconds to converge, or why not.
type Timing = Result<f64, String>;

struct Outcome {
    timings: Vec<(&'static str, Timing)>,
    violations: Vec<String>,
    pods_over_surge: Vec<String>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let only = args.iter().position(|a| a == "--fault").and_then(|i| args.get(i + 1)).cloned();
    let ours_only = args.iter().any(|a| a == "--ours-only");
    let upstream = match Assets::locate() {
        Ok(assets) => assets.kube_controller_manager,
        Err(missing) => {
            eprintln!("chaos bench skipped: {missing}");
            return;
        }
    };
    let logs = std::env::temp_dir().join(format!("kcm-chaos-bench-{}", std::process::id()));
    let mut rows = Vec::new();
    for fault in FAULTS.iter().filter(|f| only.as_ref().is_none_or(|o| f.name().contains(o.as_str()))) {
        eprintln!("chaos bench: {}", fault.name());
        let (ours, theirs) = std::thread::scope(|scope| {
            let theirs = (!ours_only).then(|| scope.spawn(|| run(Side::Upstream, &upstream, *fault, &logs)));
            let ours = run(Side::Ours, Path::new(OURS), *fault, &logs);
            (ours, theirs.map(|t| t.join().expect("the upstream run does not panic")))
        });
        rows.push((*fault, ours, theirs));
    }
    print_table(&rows);
    eprintln!("logs in {}", logs.display());
}

/// One side, one fault, a fresh bed.
fn run(side: Side, binary: &Path, fault: Fault, logs: &Path) -> Result<Outcome, String> {
    let replicas = if fault == Fault::KillLeader { 2 } else { 1 };
    let dir: PathBuf = logs.join(format!("{}-{}", fault.name().replace(' ', "-"), side.name()));
    let flags: Vec<&str> = workloads::ALL.iter().flat_map(|w| w.flags.iter().copied()).collect();
    let mut bed = Bed::start(side, binary, replicas, &flags, &dir)?;
    bed.wait_leader(None, Duration::from_secs(90))?;
    let (first, last) = workloads::ALL.split_at(workloads::ALL.len() - 1);
    let mut timings = phase(&mut bed, first, fault)?;
    timings.extend(phase(&mut bed, last, fault)?);
    let found = bed.settled_invariants(RENEW_DEADLINE, Duration::from_secs(30))?;
    let outcome = Outcome { timings, violations: found.violations(), pods_over_surge: found.pods_over_surge };
    bed.stop();
    Ok(outcome)
}

/// Prepares and changes `workloads`, injects `fault`, and times each to convergence.
fn phase(bed: &mut Bed, workloads: &[Workload], fault: Fault) -> Result<Vec<(&'static str, Timing)>, String> {
    for workload in workloads {
        (workload.prepare)(bed)?;
    }
    for workload in workloads {
        (workload.change)(bed)?;
    }
    fault.inject(bed)?;
    revive(bed)?;
    let started = std::time::Instant::now();
    let mut timings = Vec::new();
    for workload in workloads {
        let converged = bed.converge(workload).map(|_| started.elapsed().as_secs_f64());
        timings.push((workload.name, converged));
    }
    Ok(timings)
}

/// Restarts every replica that exited or was killed, as systemd's `Restart=always` would.
fn revive(bed: &mut Bed) -> Result<(), String> {
    // A stalled leader notices at its renew deadline; give it that long to exit.
    std::thread::sleep(Duration::from_secs(1));
    for index in 0..bed.replicas.len() {
        let exited = bed.replicas[index].as_mut().is_none_or(|r| r.process.exited().is_some());
        if exited {
            bed.restart_replica(index)?;
        }
    }
    Ok(())
}

fn cell(timing: Option<&Timing>) -> String {
    match timing {
        Some(Ok(seconds)) => format!("{seconds:.1} s"),
        Some(Err(e)) => format!("FAILED ({})", e.chars().take(60).collect::<String>()),
        None => "-".into(),
    }
}

/// A fault's outcomes: ours, and upstream's unless `--ours-only`.
type Row = (Fault, Result<Outcome, String>, Option<Result<Outcome, String>>);

fn print_table(rows: &[Row]) {
    println!("| fault | workload | ours | upstream |");
    println!("| --- | --- | --- | --- |");
    for (fault, ours, theirs) in rows {
        for workload in workloads::ALL {
            let find = |o: &Result<Outcome, String>| -> Option<Timing> {
                match o {
                    Ok(o) => o.timings.iter().find(|(n, _)| *n == workload.name).map(|(_, t)| t.clone()),
                    Err(e) => Some(Err(e.clone())),
                }
            };
            let (a, b) = (find(ours), theirs.as_ref().and_then(find));
            println!("| {} | {} | {} | {} |", fault.name(), workload.name, cell(a.as_ref()), cell(b.as_ref()));
        }
        let held = |o: &Result<Outcome, String>| match o {
            Ok(o) if o.violations.is_empty() => "held".to_string(),
            Ok(o) => format!("VIOLATED: {}", o.violations.join("; ")),
            Err(e) => format!("not checked: {e}"),
        };
        let over = |o: &Result<Outcome, String>| match o {
            Ok(o) => o.pods_over_surge.len().to_string(),
            Err(_) => "-".into(),
        };
        let theirs_held = theirs.as_ref().map_or("-".to_string(), held);
        let theirs_over = theirs.as_ref().map_or("-".to_string(), over);
        println!("| {} | invariants | {} | {} |", fault.name(), held(ours), theirs_held);
        println!(
            "| {} | Deployments past maxSurge in pods (figure) | {} | {} |",
            fault.name(),
            over(ours),
            theirs_over
        );
    }
}
