//! The scale bench (issue 35): upstream's kube-controller-manager v1.36.2 and ours in turn,
//! same flags, same steps, each on a fresh real control plane with simulated nodes
//! (`kcm_envtest::envtest::scale` says what the steps are and how convergence is read). Prints one
//! table with both binaries and ours/upstream, and the machine.
//!
//! `CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16 cargo bench --bench scale
//! -- [--nodes N] [--deployments N] [--replicas N] [--fail-fraction F] [--qps N] [--burst N]
//! [--toleration-seconds N] [--only ours|upstream] [--ours PATH] [--upstream PATH]`
//! (without whole-program LTO the build takes minutes). The defaults are the size:
//! 1,000 nodes, 300 Deployments × 100 replicas, 10 % of zone-a failing, QPS 500 / burst 1,000.
//! Needs `../shared/k8s` and etcd, as the real-server tests.

use std::path::PathBuf;

use kcm_envtest::envtest::sampler::machine;
use kcm_envtest::envtest::scale::{self, ScaleOptions};
use kcm_envtest::envtest::sidebyside::Side;
use kcm_envtest::envtest::{Assets, Backend};

const USAGE: &str = "usage: cargo bench --bench scale -- [--nodes N] [--deployments N] [--replicas N] \
[--fail-fraction F] [--qps N] [--burst N] [--toleration-seconds N] [--only ours|upstream] [--ours PATH] [--upstream PATH]";

fn main() {
    let _ = env_logger_like();
    match run() {
        Ok(table) => println!("\n{table}\n{}", machine()),
        Err(e) => {
            eprintln!("scale: {e}");
            std::process::exit(1);
        }
    }
}

/// The bench's own progress lines (the library logs each step's figures at info).
fn env_logger_like() -> Result<(), log::SetLoggerError> {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, metadata: &log::Metadata) -> bool {
            metadata.level() <= log::Level::Info
        }
        fn log(&self, record: &log::Record) {
            if self.enabled(record.metadata()) && record.target().contains("scale") {
                eprintln!("{}", record.args());
            }
        }
        fn flush(&self) {}
    }
    log::set_logger(&Stderr).map(|()| log::set_max_level(log::LevelFilter::Info))
}

fn run() -> Result<String, String> {
    let mut options = ScaleOptions {
        nodes: 1000,
        deployments: 300,
        replicas: 100,
        failed_fraction: 0.1,
        qps: 500,
        burst: 1000,
        toleration_seconds: 30,
        dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scale"),
    };
    let mut only: Option<Side> = None;
    let mut ours = PathBuf::from(env!("CARGO_BIN_EXE_kube-controller-manager"));
    let mut upstream: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value\n{USAGE}"));
        let number = |v: String| v.parse::<f64>().map_err(|e| format!("{arg} {v}: {e}"));
        match arg.as_str() {
            "--nodes" => options.nodes = number(value()?)? as usize,
            "--deployments" => options.deployments = number(value()?)? as usize,
            "--replicas" => options.replicas = number(value()?)? as i32,
            "--fail-fraction" => options.failed_fraction = number(value()?)?,
            "--qps" => options.qps = number(value()?)? as u32,
            "--burst" => options.burst = number(value()?)? as u32,
            "--toleration-seconds" => options.toleration_seconds = number(value()?)? as i64,
            "--ours" => ours = PathBuf::from(value()?),
            "--upstream" => upstream = Some(PathBuf::from(value()?)),
            "--only" => {
                only = Some(match value()?.as_str() {
                    "ours" => Side::Ours,
                    "upstream" => Side::Upstream,
                    other => return Err(format!("--only {other}: ours or upstream\n{USAGE}")),
                })
            }
            // cargo bench passes --bench to every harness.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if !Backend::Real.available() {
        return Err("the real server's binaries are missing (../shared/k8s and etcd; scripts/setup.sh test)".into());
    }
    let upstream = match upstream {
        Some(path) => path,
        None => Assets::locate().map_err(|e| e.to_string())?.kube_controller_manager,
    };
    let mut runs = Vec::new();
    for side in [Side::Upstream, Side::Ours] {
        if only.is_some_and(|o| o != side) {
            continue;
        }
        let binary = if side == Side::Ours { &ours } else { &upstream };
        eprintln!("scale: {} ({}), {} pods on {} nodes", side.name(), binary.display(), options.pods(), options.nodes);
        runs.push(scale::run(side, binary, &options).map_err(|e| format!("{}: {e}", side.name()))?);
    }
    Ok(scale::table(&options, &runs))
}
