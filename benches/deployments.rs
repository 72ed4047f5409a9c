//! Deployment figures, printed (not asserted): the time for 100 Deployments × 10 replicas to
//! become fully available on the sandbox with simulated nodes, with the real
//! `kube-controller-manager` binary (deployment-controller and replicaset-controller) running as
//! a child process at the default `--kube-api-qps=20 --kube-api-burst=30` and at
//! `--kube-api-qps=500 --kube-api-burst=1000`, and the child's peak resident memory (VmHWM).
//!
//! Each run gets a fresh sandbox and fresh nodes. Run with `cargo bench --bench deployments`
//! (release profile).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kcm::client::{Api, Client, ListParams, PostParams};
use kcm_sandbox::sandbox::nodes::{NodeOptions, SimulatedNodes};
use serde_json::json;

#[allow(dead_code)] // realistic_pod and resident_bytes serve the other benchmarks.
mod common;
use common::{create_default_account, peak_resident_bytes_of, sandbox_and_admin, start_controller_manager, stop};

const DEPLOYMENTS: usize = 100;
const REPLICAS: i32 = 10;
/// 110 pods fit a simulated node; 12 nodes leave room for 1,000 pods and surges.
const NODES: usize = 12;
const PATIENCE: Duration = Duration::from_secs(900);

fn main() {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_kube-controller-manager"));
    for (label, flags) in [
        ("default QPS (--kube-api-qps=20 --kube-api-burst=30)", vec![]),
        ("--kube-api-qps=500 --kube-api-burst=1000", vec!["--kube-api-qps=500", "--kube-api-burst=1000"]),
    ] {
        match run(&binary, &flags) {
            Ok((elapsed, peak)) => println!(
                "{DEPLOYMENTS} Deployments x {REPLICAS} replicas fully available, {label}: {:.1} s; \
                 controller manager peak RSS {:.1} MiB",
                elapsed.as_secs_f64(),
                peak as f64 / (1024.0 * 1024.0)
            ),
            Err(e) => println!("{label}: FAILED: {e}"),
        }
    }
}

/// One run: returns the time to full availability and the child's peak RSS in bytes.
fn run(binary: &Path, flags: &[&str]) -> Result<(Duration, u64), String> {
    let (sandbox, client) = sandbox_and_admin(Duration::from_secs(60))?;
    let dir =
        std::env::temp_dir().join(format!("kcm-bench-deployments-{}-{}", std::process::id(), sandbox.addr().port()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (_, kcm_kubeconfig) = sandbox.write_kubeconfigs(&dir.join("admin.conf")).map_err(|e| e.to_string())?;
    create_default_account(&client, "default")?;
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    let nodes =
        SimulatedNodes::start(sandbox.admin_config(), names, NodeOptions::default()).map_err(|e| e.to_string())?;

    let controllers = "--controllers=deployment-controller,replicaset-controller";
    let mut child = start_controller_manager(binary, &kcm_kubeconfig, &dir, &[&[controllers], flags].concat())?;
    let result = measure(&client, &child);
    let peak = peak_resident_bytes_of(child.id());
    stop(&mut child);
    nodes.stop();
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|elapsed| (elapsed, peak))
}

/// Creates the Deployments and waits until every one reports all replicas available.
fn measure(client: &Client, child: &Child) -> Result<Duration, String> {
    let deployments = Api::<Deployment>::namespaced(client, "default");
    let started = Instant::now();
    for i in 0..DEPLOYMENTS {
        let name = format!("web-{i:03}");
        let d: Deployment = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"replicas": REPLICAS,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}],
                    "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]}}}}))
        .map_err(|e| e.to_string())?;
        deployments.create(&d, &PostParams::default()).map_err(|e| e.to_string())?;
    }
    loop {
        let (list, _) = deployments.list_all(&ListParams::default()).map_err(|e| e.to_string())?;
        let done = list
            .iter()
            .filter(|d| d.status.as_ref().and_then(|s| s.available_replicas) == Some(REPLICAS))
            .filter(|d| d.status.as_ref().and_then(|s| s.updated_replicas) == Some(REPLICAS))
            .count();
        if done == DEPLOYMENTS {
            return Ok(started.elapsed());
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("only {done} of {DEPLOYMENTS} Deployments available after {PATIENCE:?}"));
        }
        if std::fs::metadata(format!("/proc/{}", child.id())).is_err() {
            return Err("the controller manager exited".into());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
