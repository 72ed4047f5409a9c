//! Node lifecycle figures at scale, printed (not asserted): the real `kube-controller-manager`
//! binary runs node-lifecycle-controller as a child process against the sandbox holding 5,000
//! Nodes (in 10 zones) and 150,000 Pods bound to them. It prints
//! - the time from start until its first passes have removed admission's
//!   `node.kubernetes.io/not-ready:NoSchedule` taint from every (Ready) node: informer lists of
//!   5,000 nodes and 150,000 pods, then one taint patch per node;
//! - once the nodes stop heartbeating, how long one monitor pass takes to mark all 5,000 nodes
//!   `Unknown` (the spread between the first and the last node flipping: health judgement over
//!   every node and its pods, and one status write per node);
//! - the child's peak resident memory at that size.
//!
//! Nobody renews the nodes' heartbeats, so `--node-monitor-grace-period` (90s here, longer than
//! the first passes take) after the controller first saw them they all go `Unknown` together. Run with
//! `cargo bench --bench nodelifecycle` (release profile); it takes a few minutes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kcm::client::{Api, Client, ListParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::json;

#[allow(dead_code)] // realistic_pod and resident_bytes serve the other benchmarks.
mod common;
use common::{create_default_account, peak_resident_bytes_of, sandbox_and_admin, start_controller_manager, stop};

const NODES: usize = 5_000;
const PODS: usize = 150_000;
const ZONES: usize = 10;
const WRITERS: usize = 8;
const NAMESPACE: &str = "bench";
const PATIENCE: Duration = Duration::from_secs(900);

fn from<T: DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

fn main() {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_kube-controller-manager"));
    match run(&binary) {
        Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
        Err(e) => println!("node lifecycle at {NODES} nodes / {PODS} pods: FAILED: {e}"),
    }
}

fn run(binary: &std::path::Path) -> Result<Vec<String>, String> {
    let (sandbox, client) = sandbox_and_admin(Duration::from_secs(120))?;
    let dir = std::env::temp_dir().join(format!("kcm-bench-nodelifecycle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (_, kcm_kubeconfig) = sandbox.write_kubeconfigs(&dir.join("admin.conf")).map_err(|e| e.to_string())?;

    let started = Instant::now();
    create_nodes(&client)?;
    create_pods(&client)?;
    let mut lines = vec![format!("setup: {NODES} Ready nodes and {PODS} bound pods created in {:.1} s", secs(started))];

    let flags = [
        "--controllers=node-lifecycle-controller",
        "--node-monitor-grace-period=90s",
        "--kube-api-qps=1000",
        "--kube-api-burst=2000",
    ];
    let started = Instant::now();
    let mut child = start_controller_manager(binary, &kcm_kubeconfig, &dir, &flags)?;
    let result = measure(&client, &child, started);
    let peak = peak_resident_bytes_of(child.id());
    stop(&mut child);
    let _ = std::fs::remove_dir_all(&dir);
    let (untainted, pass) = result?;
    lines.push(format!(
        "node-lifecycle-controller (--kube-api-qps=1000 --kube-api-burst=2000): not-ready taint removed from all \
         {NODES} nodes {untainted:.1} s after start (lists of {NODES} nodes and {PODS} pods included)"
    ));
    lines.push(format!("one monitor pass marking all {NODES} nodes Unknown: {pass:.1} s"));
    lines.push(format!("controller manager peak RSS: {:.1} MiB", peak as f64 / (1024.0 * 1024.0)));
    Ok(lines)
}

fn secs(since: Instant) -> f64 {
    since.elapsed().as_secs_f64()
}

/// Nodes `node-0000`… in `zone-0`…, Ready as of now; admission gives each the not-ready
/// NoSchedule taint.
fn create_nodes(client: &Client) -> Result<(), String> {
    in_parallel(NODES, |i| {
        let nodes = Api::<Node>::all(client);
        let name = format!("node-{i:04}");
        let zone = format!("zone-{}", i % ZONES);
        let node: Node = from(json!({"metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}}));
        let mut node = nodes.create(&node, &PostParams::default()).map_err(|e| e.to_string())?;
        let now = Timestamp::now().to_string();
        node.status = Some(from(json!({"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]})));
        nodes.replace_status(&name, &node, &PostParams::default()).map(drop).map_err(|e| e.to_string())
    })
}

/// `PODS` pods spread evenly over the nodes, bound at creation.
fn create_pods(client: &Client) -> Result<(), String> {
    let namespace: Namespace = from(json!({"metadata": {"name": NAMESPACE}}));
    Api::<Namespace>::all(client).create(&namespace, &PostParams::default()).map_err(|e| e.to_string())?;
    create_default_account(client, NAMESPACE)?;
    in_parallel(PODS, |i| {
        let pod: Pod = from(json!({"metadata": {"name": format!("pod-{i:06}"), "labels": {"app": "bench"}},
            "spec": {"nodeName": format!("node-{:04}", i % NODES),
                "containers": [{"name": "app", "image": "nginx:1.27"}]}}));
        Api::<Pod>::namespaced(client, NAMESPACE)
            .create(&pod, &PostParams::default())
            .map(drop)
            .map_err(|e| e.to_string())
    })
}

/// Runs `make(i)` for `i` in `0..count` on `WRITERS` threads; the first error wins.
fn in_parallel(count: usize, make: impl Fn(usize) -> Result<(), String> + Sync) -> Result<(), String> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let make = &make;
                scope.spawn(move || (w..count).step_by(WRITERS).try_for_each(make))
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().unwrap_or_else(|_| Err("a writer panicked".into())))
    })
}

/// Waits for the taints to go, then for every node to turn Unknown; returns both timings.
fn measure(client: &Client, child: &std::process::Child, started: Instant) -> Result<(f64, f64), String> {
    let nodes = Api::<Node>::all(client);
    let untainted = loop {
        let (list, _) = nodes.list_all(&ListParams::default()).map_err(|e| e.to_string())?;
        let tainted = list.iter().filter(|n| has_taint(n, "node.kubernetes.io/not-ready")).count();
        if tainted == 0 {
            break secs(started);
        }
        wait(child, started, &format!("{tainted} nodes still carry the not-ready taint"))?;
    };
    let mut first_unknown = None;
    loop {
        let (list, _) = nodes.list_all(&ListParams::default()).map_err(|e| e.to_string())?;
        let unknown = list.iter().filter(|n| ready_status(n) == Some("Unknown")).count();
        if unknown > 0 && first_unknown.is_none() {
            first_unknown = Some(Instant::now());
        }
        if unknown == NODES {
            return Ok((untainted, first_unknown.map_or(0.0, secs)));
        }
        wait(child, started, &format!("only {unknown} of {NODES} nodes are Unknown"))?;
    }
}

fn wait(child: &std::process::Child, started: Instant, what: &str) -> Result<(), String> {
    if started.elapsed() > PATIENCE {
        return Err(format!("after {PATIENCE:?}, {what}"));
    }
    if std::fs::metadata(format!("/proc/{}", child.id())).is_err() {
        return Err("the controller manager exited".into());
    }
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == key))
}

fn ready_status(node: &Node) -> Option<&str> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status.as_str())
}
