//! What the benchmarks share: a Pod of realistic size, resident memory, and the real
//! `kube-controller-manager` run as a child process.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kcm::client::{Api, Client, ClientOptions, PostParams};
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use serde_json::json;

/// A pod of the size a real workload's has: labels, an owner, two containers with env, resources
/// and a probe.
pub fn realistic_pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("web-{i:05}"), "labels": {"app": "web", "pod-template-hash": "7d4b9c8f5d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f5d",
                "uid": "0b6e8f0e-6f5e-4a53-9a51-3c8f8b7f6a11", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [
            {"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80, "name": "http"}],
             "env": [{"name": "MODE", "value": "production"}],
             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
             "readinessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 5}},
            {"name": "sidecar", "image": "busybox:1.36", "command": ["sh", "-c", "sleep infinity"]}
        ]}
    }))
    .expect("pod")
}

/// VmRSS of this process, in bytes.
pub fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// VmHWM (peak resident set) of process `pid`, in bytes; 0 when it cannot be read.
pub fn peak_resident_bytes_of(pid: u32) -> u64 {
    status_bytes_of(pid, "VmHWM:")
}

/// VmRSS (resident set now) of process `pid`, in bytes; 0 when it cannot be read.
pub fn resident_bytes_of(pid: u32) -> u64 {
    status_bytes_of(pid, "VmRSS:")
}

/// A `kB` field of `/proc/<pid>/status`, in bytes.
fn status_bytes_of(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `kcm-sandbox serve` as a child process on a free loopback port, its kubeconfigs in `dir`,
/// once it has printed its ready line; returns the child and the admin kubeconfig's path.
pub fn start_sandbox_server(binary: &Path, dir: &Path, flags: &[&str]) -> Result<(Child, std::path::PathBuf), String> {
    use std::io::BufRead;
    let kubeconfig = dir.join("admin.conf");
    let mut child = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let mut ready = String::new();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    std::io::BufReader::new(stdout).read_line(&mut ready).map_err(|e| e.to_string())?;
    if !ready.starts_with("kcm-sandbox: serving") {
        stop(&mut child);
        return Err(format!("kcm-sandbox did not start: {ready:?}"));
    }
    Ok((child, kubeconfig))
}

/// An admin client of a sandbox started by [`start_sandbox_server`], without a client-side rate
/// limit, whose requests time out after `timeout`.
pub fn admin_client(kubeconfig: &Path, timeout: Duration) -> Result<Client, String> {
    let config = kcm::client::config::load(Some(kubeconfig), None).map_err(|e| e.to_string())?;
    Client::new(config, ClientOptions { qps: -1.0, burst: 1, timeout }).map_err(|e| e.to_string())
}

/// Starts the real controller manager against `kubeconfig` without leader election, its secure
/// port on a free loopback port and its log in `dir`; `flags` choose the controllers and more.
pub fn start_controller_manager(binary: &Path, kubeconfig: &Path, dir: &Path, flags: &[&str]) -> Result<Child, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0);
    let log = std::fs::File::create(dir.join("kube-controller-manager.log")).map_err(|e| e.to_string())?;
    Command::new(binary)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--leader-elect=false", "--bind-address=127.0.0.1", "--v=1"])
        .arg(format!("--secure-port={port}"))
        .args(flags)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))
}

/// SIGTERM, then a bounded wait, then SIGKILL.
pub fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with our child's pid and a valid signal number has no memory effects.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// An in-process sandbox on a free loopback port, and an admin client without a client-side rate
/// limit whose requests time out after `timeout`.
pub fn sandbox_and_admin(timeout: Duration) -> Result<(Sandbox, Client), String> {
    let sandbox =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..SandboxOptions::default() })
            .map_err(|e| e.to_string())?;
    let client = Client::new(sandbox.admin_config(), ClientOptions { qps: -1.0, burst: 1, timeout })
        .map_err(|e| e.to_string())?;
    Ok((sandbox, client))
}

/// Creates the `default` ServiceAccount of `namespace`, which pod admission requires.
pub fn create_default_account(client: &Client, namespace: &str) -> Result<(), String> {
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    Api::<ServiceAccount>::namespaced(client, namespace)
        .create(&account, &PostParams::default())
        .map(drop)
        .map_err(|e| e.to_string())
}
