//! The chaos bench (issue 21): every fault of `kcm_envtest::envtest::chaos` during every workload,
//! with our `kube-controller-manager` and then upstream's v1.36.2 (from the envtest assets,
//! started as kubeadm starts it), each fault on a fresh real control plane. Prints a table:
//! fault × workload → seconds to converge after the fault (ours, upstream), and whether the
//! invariants held (the violations otherwise).
//!
//! `CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16 cargo bench --bench chaos`
//! (needs `../shared/k8s` and etcd, as the real-server tests; without whole-program LTO the
//! build finishes in minutes on a loaded machine). `-- --fault <substring>` runs only the
//! faults whose name contains it; `-- --ours-only` skips upstream. Takes ~15 minutes on a
//! 2-core machine (the two sides run at once).
//!
//! Per bed, each workload in turn (the node failure last) is prepared, changed, the fault
//! injected, and timed to convergence from the fault's end: each workload gets its own fault,
//! so one that times out does not eat into the next one's figure. A replica that exited (a
//! stall past its renew deadline) is restarted as systemd would; a killed leader's standby
//! takes over (two replicas then). A timeout prints what had not converged.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kcm_envtest::envtest::Assets;
use kcm_envtest::envtest::chaos::{Bed, Fault, Workload, workloads};
use kcm_envtest::envtest::sidebyside::Side;
use serde_json::Value;

const OURS: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
/// kube-controller-manager's default renew deadline and retry period.
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);
/// Past the renew deadline: the leader gives up and exits.
const STALL: Duration = Duration::from_secs(14);
/// How long the last Events may take to land after the last workload converged.
const SETTLE: Duration = Duration::from_secs(45);
const FAULTS: &[Fault] = &[
    Fault::None,
    Fault::CompactEtcd,
    Fault::KillEtcd,
    Fault::KillApiserver,
    Fault::StallApiserver(STALL),
    Fault::StallEtcd(STALL),
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
    print_header();
    for fault in FAULTS.iter().filter(|f| only.as_ref().is_none_or(|o| f.name().contains(o.as_str()))) {
        eprintln!("chaos bench: {}", fault.name());
        let (ours, theirs) = std::thread::scope(|scope| {
            let theirs = (!ours_only).then(|| scope.spawn(|| run(Side::Upstream, &upstream, *fault, &logs)));
            let ours = run(Side::Ours, Path::new(OURS), *fault, &logs);
            (ours, theirs.map(|t| t.join().expect("the upstream run does not panic")))
        });
        // Printed as each fault ends, so that a run cut short still reports what it measured.
        print_rows(&(*fault, ours, theirs));
    }
    eprintln!("logs in {}", logs.display());
}

/// One side, one fault, a fresh bed: each workload in turn with the fault injected during it.
fn run(side: Side, binary: &Path, fault: Fault, logs: &Path) -> Result<Outcome, String> {
    let replicas = if fault == Fault::KillLeader { 2 } else { 1 };
    let dir: PathBuf = logs.join(format!("{}-{}", fault.name().replace(' ', "-"), side.name()));
    let flags: Vec<&str> = workloads::ALL.iter().flat_map(|w| w.flags.iter().copied()).collect();
    let mut bed = Bed::start(side, binary, replicas, &flags, &dir).map_err(|e| e.to_string())?;
    bed.wait_leader(None, Duration::from_secs(90)).map_err(|e| e.to_string())?;
    let timings = workloads::ALL.iter().map(|w| (w.name, timed(&mut bed, w, fault))).collect();
    let found = bed.settled_invariants(RENEW_DEADLINE + RETRY, SETTLE).map_err(|e| e.to_string())?;
    eprintln!("chaos bench: {} ({}): pods past maxSurge: {:?}", fault.name(), side.name(), found.pods_over_surge);
    let outcome = Outcome { timings, violations: found.violations(), pods_over_surge: found.pods_over_surge };
    // Kept for reading afterwards (e.g. which ReplicaSet created pods past the surge).
    let _ = std::fs::copy(bed.plane.audit_log(), dir.join("audit.log"));
    bed.stop();
    Ok(outcome)
}

/// Prepares and changes `workload`, injects `fault`, and times the workload to convergence
/// from the fault's end; a timeout says what had not converged.
fn timed(bed: &mut Bed, workload: &Workload, fault: Fault) -> Timing {
    (workload.prepare)(bed).map_err(|e| format!("prepare: {e}"))?;
    (workload.change)(bed).map_err(|e| e.to_string())?;
    fault.inject(bed).map_err(|e| e.to_string())?;
    revive(bed)?;
    let started = std::time::Instant::now();
    match bed.converge(workload) {
        Ok(_) => Ok(started.elapsed().as_secs_f64()),
        Err(e) => {
            let stuck = stuck(bed);
            eprintln!("chaos bench: {} ({}): {e}; not converged: {stuck}", workload.name, fault.name());
            Err(format!("{e}; {stuck}"))
        }
    }
}

/// What had not converged: the workloads' pods that are not Running and Ready, and the
/// Deployments whose status is not 2 updated, ready, available.
fn stuck(bed: &Bed) -> String {
    let mut found = Vec::new();
    for namespace in ["chaos", "chaos-doomed"] {
        let pods = bed.list(&format!("/api/v1/namespaces/{namespace}/pods")).unwrap_or_default();
        for pod in pods {
            let ready = kcm_envtest::envtest::chaos::condition(&pod, "Ready").unwrap_or("-").to_string();
            let phase = pod["status"]["phase"].as_str().unwrap_or("-");
            let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
            if phase == "Succeeded" || (phase == "Running" && ready == "True" && !terminating) {
                continue;
            }
            let node = pod["spec"]["nodeName"].as_str().unwrap_or("unbound");
            let name = pod["metadata"]["name"].as_str().unwrap_or("?");
            found.push(format!(
                "pod {name} {phase} ready={ready} on {node}{}",
                if terminating { " terminating" } else { "" }
            ));
        }
    }
    let deployments = bed.list("/apis/apps/v1/namespaces/chaos/deployments").unwrap_or_default();
    for d in deployments {
        let status = &d["status"];
        let done = ["replicas", "updatedReplicas", "readyReplicas", "availableReplicas"].iter().all(|f| status[f] == 2)
            && status["observedGeneration"] == d["metadata"]["generation"];
        if !done {
            let name = d["metadata"]["name"].as_str().unwrap_or("?");
            found.push(format!("deployment {name} status {status}"));
        }
    }
    let nodes = bed.list("/api/v1/nodes").unwrap_or_default();
    for n in nodes {
        let taints = n["spec"]["taints"].as_array().cloned().unwrap_or_default();
        if !taints.is_empty() {
            found.push(format!("node {} taints {}", n["metadata"]["name"], Value::from(taints)));
        }
    }
    found.join("; ")
}

/// Restarts every replica that exited or was killed, as systemd's `Restart=always` would.
fn revive(bed: &mut Bed) -> Result<(), String> {
    // A stalled leader notices at its renew deadline; give it that long to exit.
    std::thread::sleep(Duration::from_secs(1));
    for index in 0..bed.replicas.len() {
        let exited = bed.replicas[index].as_mut().is_none_or(|r| r.process.exited().is_some());
        if exited {
            bed.restart_replica(index).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn cell(timing: Option<&Timing>) -> String {
    match timing {
        Some(Ok(seconds)) => format!("{seconds:.1} s"),
        Some(Err(e)) => format!("FAILED ({})", e.chars().take(200).collect::<String>()),
        None => "-".into(),
    }
}

/// A fault's outcomes: ours, and upstream's unless `--ours-only`.
type Row = (Fault, Result<Outcome, String>, Option<Result<Outcome, String>>);

fn print_header() {
    println!("| fault | workload | ours | upstream |");
    println!("| --- | --- | --- | --- |");
}

fn print_rows((fault, ours, theirs): &Row) {
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
    println!("| {} | Deployments past maxSurge in pods (figure) | {} | {} |", fault.name(), over(ours), theirs_over);
}
