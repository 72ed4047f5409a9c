//! What the benchmarks share: a Pod of realistic size and the process's resident memory.

use k8s_openapi::api::core::v1::Pod;
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
#[allow(dead_code)] // Only the deployments benchmark measures a child process.
pub fn peak_resident_bytes_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
