//! The pod statuses a kubelet writes (`generateAPIPodStatus` and pkg/kubelet/status): while its
//! containers are being created, while they run, and once they have terminated.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodCondition};
use serde_json::{Value, json};

/// The conditions the kubelet owns, in the order it writes them; PodScheduled (the
/// scheduler's) follows, then conditions others own (DisruptionTarget, readiness gates).
const KUBELET_CONDITIONS: [&str; 4] = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"];

/// Where the pod's containers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Sandbox and containers being created (phase Pending, `ContainerCreating`).
    Creating,
    /// The image cannot be pulled (phase Pending, `ImagePullBackOff`): see [`image_pullable`].
    PullFailed,
    /// The containers run but a readiness probe has not passed yet (its `initialDelaySeconds`).
    Unready,
    Running,
    /// Every container exited 0.
    Succeeded,
    /// The containers exited with this code (1: the process failed; 137: killed).
    Failed(i32),
    /// The containers exited with this code and were restarted in place (restartPolicy
    /// `OnFailure`): the pod stays Running. After a back-off, the exit is the one already in
    /// `lastState`.
    Restarted(i32),
    /// The containers exited with this code and wait this long before their restart
    /// (`CrashLoopBackOff`): the pod stays Running, not ready.
    BackOff(i32, std::time::Duration),
    /// The eviction manager killed the pod under memory pressure.
    Evicted,
}

impl Stage {
    /// The containers run (again).
    fn running(self) -> bool {
        matches!(self, Stage::Running | Stage::Unready | Stage::Restarted(_))
    }
}

/// What the kubelet's eviction manager writes (`evictionMessage` for memory, with the
/// threshold it met) as the pod's message and its `DisruptionTarget` condition's.
pub const EVICTION_MESSAGE: &str =
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. ";

/// How a running pod is stopped on deletion: SIGKILL after the grace period.
pub const KILLED_EXIT_CODE: i32 = 137;

/// The status for `stage`, as a merge patch body for the `status` subresource. The pod's
/// resourceVersion is a precondition, so a status computed from a stale copy is refused.
pub fn status_patch(pod: &Pod, stage: Stage, host_ip: &str, pod_ip: Option<&str>, now: &str) -> Value {
    let spec = pod.spec.clone().unwrap_or_default();
    let current = pod.status.clone().unwrap_or_default();
    let existing = |name: &str, init: bool| {
        let list = if init { &current.init_container_statuses } else { &current.container_statuses };
        list.iter().flatten().find(|s| s.name == name).cloned()
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let has_init = spec.init_containers.as_ref().is_some_and(|c| !c.is_empty());
    let described = format!(
        "{}_{}({uid})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default()
    );
    let ctx = ContainerContext { uid: &uid, pod: &described, stage, now, has_init };
    let init_statuses: Vec<Value> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| ctx.status(c, existing(&c.name, true), ContainerRole::of_init(c)))
        .collect();
    let statuses: Vec<Value> =
        spec.containers.iter().map(|c| ctx.status(c, existing(&c.name, false), ContainerRole::App)).collect();
    let mut status = json!({
        "phase": match stage {
            Stage::Creating | Stage::PullFailed => "Pending",
            Stage::Running | Stage::Unready | Stage::Restarted(_) | Stage::BackOff(..) => "Running",
            Stage::Succeeded => "Succeeded",
            Stage::Failed(_) | Stage::Evicted => "Failed",
        },
        "conditions": conditions(pod, stage, now),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": current.start_time.as_ref().map(|t| format_time(&t.0)).unwrap_or_else(|| now.to_string()),
        "containerStatuses": statuses,
    });
    if !init_statuses.is_empty() {
        status["initContainerStatuses"] = init_statuses.into();
    }
    if stage == Stage::Evicted {
        // The eviction manager's `killPodFunc` status function.
        status["reason"] = "Evicted".into();
        status["message"] = EVICTION_MESSAGE.into();
    }
    if let Some(ip) = pod_ip {
        status["podIP"] = ip.into();
        status["podIPs"] = json!([{"ip": ip}]);
    }
    json!({"metadata": {"resourceVersion": pod.metadata.resource_version}, "status": status})
}

/// The kubelet's conditions for `stage`, then PodScheduled, then the conditions others own.
/// A condition keeps its transition time while its status stays the same.
fn conditions(pod: &Pod, stage: Stage, now: &str) -> Vec<Value> {
    let spec = pod.spec.clone().unwrap_or_default();
    let existing = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let find = |kind: &str| existing.iter().find(|c| c.type_ == kind);
    let condition = |kind: &str, status: &str, reason: Option<&str>, message: Option<String>| {
        let transition = match find(kind) {
            Some(old) if old.status == status => old.last_transition_time.as_ref().map(|t| format_time(&t.0)),
            _ => None,
        };
        let mut c = json!({"type": kind, "status": status, "lastProbeTime": null,
            "lastTransitionTime": transition.unwrap_or_else(|| now.to_string())});
        if let Some(reason) = reason {
            c["reason"] = reason.into();
        }
        if let Some(message) = message {
            c["message"] = message.into();
        }
        c
    };
    let sidecars: Vec<&Container> =
        spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always")).collect();
    let init_names: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() != Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let app_names: Vec<&str> =
        sidecars.iter().map(|c| c.name.as_str()).chain(spec.containers.iter().map(|c| c.name.as_str())).collect();
    let sandbox_ready =
        if stage.running() || matches!(stage, Stage::BackOff(..) | Stage::PullFailed) { "True" } else { "False" };
    let initialized = match stage {
        Stage::Creating if !init_names.is_empty() || !sidecars.is_empty() => {
            let all: Vec<&str> = spec.init_containers.iter().flatten().map(|c| c.name.as_str()).collect();
            condition(
                "Initialized",
                "False",
                Some("ContainersNotInitialized"),
                Some(format!("containers with incomplete status: [{}]", all.join(" "))),
            )
        }
        Stage::Succeeded => condition("Initialized", "True", Some("PodCompleted"), None),
        _ => condition("Initialized", "True", None, None),
    };
    let containers_ready = match stage {
        Stage::Creating | Stage::BackOff(..) | Stage::PullFailed | Stage::Unready => condition(
            "ContainersReady",
            "False",
            Some("ContainersNotReady"),
            Some(format!("containers with unready status: [{}]", app_names.join(" "))),
        ),
        Stage::Running | Stage::Restarted(_) => condition("ContainersReady", "True", None, None),
        Stage::Succeeded => condition("ContainersReady", "False", Some("PodCompleted"), None),
        Stage::Failed(_) | Stage::Evicted => condition("ContainersReady", "False", Some("PodFailed"), None),
    };
    let ready = if containers_ready["status"] != "True" {
        let reason = containers_ready["reason"].as_str();
        let message = containers_ready["message"].as_str().map(str::to_string);
        condition("Ready", "False", reason, message)
    } else {
        match readiness_gates_message(pod, &existing) {
            Some(message) => condition("Ready", "False", Some("ReadinessGatesNotReady"), Some(message)),
            None => condition("Ready", "True", None, None),
        }
    };
    let scheduled = match find("PodScheduled") {
        Some(c) => serde_json::to_value(c).unwrap_or_else(|_| condition("PodScheduled", "True", None, None)),
        None => condition("PodScheduled", "True", None, None),
    };
    let mut list = vec![
        condition("PodReadyToStartContainers", sandbox_ready, None, None),
        initialized,
        ready,
        containers_ready,
        scheduled,
    ];
    list.extend(
        existing
            .iter()
            .filter(|c| c.type_ != "PodScheduled" && !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
            .filter_map(|c| serde_json::to_value(c).ok()),
    );
    if stage == Stage::Evicted {
        // `podutil.UpdatePodCondition`: replaced in place, or appended.
        let disruption =
            condition("DisruptionTarget", "True", Some("TerminationByKubelet"), Some(EVICTION_MESSAGE.into()));
        match list.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
            Some(old) => *old = disruption,
            None => list.push(disruption),
        }
    }
    list
}

/// Why the readiness gates hold the pod back, if they do (`GeneratePodReadyCondition`).
fn readiness_gates_message(pod: &Pod, conditions: &[PodCondition]) -> Option<String> {
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.as_ref())?;
    let messages: Vec<String> = gates
        .iter()
        .filter_map(|gate| match conditions.iter().find(|c| c.type_ == gate.condition_type) {
            None => {
                Some(format!("corresponding condition of pod readiness gate {:?} does not exist.", gate.condition_type))
            }
            Some(c) if c.status != "True" => Some(format!(
                "the status of pod readiness gate {:?} is not \"True\", but {}",
                gate.condition_type, c.status
            )),
            Some(_) => None,
        })
        .collect();
    (!messages.is_empty()).then(|| messages.join(", "))
}

/// Whether the kubelet-owned conditions of `pod` already say what `stage` would (status and
/// reason), so that no status write is needed.
pub fn conditions_current(pod: &Pod, stage: Stage) -> bool {
    let wanted = conditions(pod, stage, "");
    let existing = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    KUBELET_CONDITIONS.iter().all(|kind| {
        let want = wanted.iter().find(|c| c["type"] == *kind);
        let have = existing.iter().find(|c| c.type_ == *kind);
        match (want, have) {
            (Some(w), Some(h)) => w["status"] == h.status.as_str() && w["reason"].as_str() == h.reason.as_deref(),
            _ => false,
        }
    })
}

/// How a container figures in the pod.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ContainerRole {
    App,
    /// A regular init container: runs to completion before the others start.
    Init,
    /// A restartable init container (sidecar): runs alongside the app containers.
    Sidecar,
}

impl ContainerRole {
    fn of_init(container: &Container) -> ContainerRole {
        if container.restart_policy.as_deref() == Some("Always") { ContainerRole::Sidecar } else { ContainerRole::Init }
    }
}

struct ContainerContext<'a> {
    uid: &'a str,
    /// `format.Pod`: `name_namespace(uid)`.
    pod: &'a str,
    stage: Stage,
    now: &'a str,
    /// The pod has init containers (its app containers wait for them).
    has_init: bool,
}

impl ContainerContext<'_> {
    /// One container's status for the pod's stage.
    fn status(&self, container: &Container, existing: Option<ContainerStatus>, role: ContainerRole) -> Value {
        let image = normalize_image(container.image.as_deref().unwrap_or_default());
        let container_id = existing
            .as_ref()
            .and_then(|s| s.container_id.clone())
            .unwrap_or_else(|| format!("containerd://{}", hex64(&[self.uid, &container.name])));
        let started_at = existing
            .as_ref()
            .and_then(|s| s.state.as_ref())
            .and_then(|s| s.running.as_ref().and_then(|r| r.started_at.clone()))
            .map(|t| format_time(&t.0));
        let ever_started = existing.as_ref().is_some_and(|s| s.container_id.is_some());
        let restart_count = existing.as_ref().map_or(0, |s| s.restart_count);
        let last_state = existing
            .as_ref()
            .and_then(|s| s.last_state.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_else(|| json!({}));
        let mut status = json!({
            "name": container.name,
            "image": image,
            "imageID": "",
            "ready": false,
            "restartCount": restart_count,
            "started": false,
            "lastState": last_state,
        });
        let mounts = volume_mounts(container);
        if !mounts.is_empty() {
            status["volumeMounts"] = mounts.into();
        }
        let with_id = |status: &mut Value| {
            status["containerID"] = container_id.clone().into();
            status["imageID"] = image_id(&image).into();
        };
        // An evicted pod's containers are killed.
        let stage = if self.stage == Stage::Evicted { Stage::Failed(KILLED_EXIT_CODE) } else { self.stage };
        match (stage, role) {
            (Stage::Restarted(code), ContainerRole::App) => {
                // The container exited and the kubelet started a new one (`OnFailure`); after a
                // back-off (no running state) the exit is already in `lastState`.
                let new_id =
                    format!("containerd://{}", hex64(&[self.uid, &container.name, &(restart_count + 1).to_string()]));
                with_id(&mut status);
                if started_at.is_some() || !has_last_termination(&existing) {
                    status["lastState"] = terminated_error(code, started_at, self.now, &container_id);
                }
                status["containerID"] = new_id.into();
                status["restartCount"] = (restart_count + 1).into();
                status["ready"] = true.into();
                status["started"] = true.into();
                status["state"] = json!({"running": {"startedAt": self.now}});
            }
            (Stage::BackOff(code, back_off), ContainerRole::App) => {
                // `doBackOff`: the exited container waits for its restart.
                with_id(&mut status);
                status["lastState"] = terminated_error(code, started_at, self.now, &container_id);
                let message = format!(
                    "back-off {} restarting failed container={} pod={}",
                    crate::apimachinery::duration::format_go_duration(back_off),
                    container.name,
                    self.pod
                );
                status["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": message}});
            }
            (Stage::PullFailed, ContainerRole::App) => {
                let reference = container.image.as_deref().unwrap_or_default();
                let message = format!(
                    "Back-off pulling image \"{reference}\": ErrImagePull: failed to pull and unpack image \"{image}\": \
                     pull access denied, repository does not exist or may require authorization"
                );
                status["state"] = json!({"waiting": {"reason": "ImagePullBackOff", "message": message}});
            }
            (Stage::Unready, ContainerRole::App | ContainerRole::Sidecar) => {
                with_id(&mut status);
                status["started"] = true.into();
                status["state"] = json!({"running": {"startedAt": started_at.unwrap_or_else(|| self.now.to_string())}});
            }
            (Stage::Creating | Stage::PullFailed, ContainerRole::Init | ContainerRole::Sidecar) => {
                status["state"] = json!({"waiting": {"reason": "PodInitializing"}});
            }
            (Stage::Creating, ContainerRole::App) => {
                let reason = if self.has_init { "PodInitializing" } else { "ContainerCreating" };
                status["state"] = json!({"waiting": {"reason": reason}});
            }
            (Stage::Running | Stage::Unready | Stage::Restarted(_) | Stage::BackOff(..), ContainerRole::Init)
            | (Stage::Succeeded, _) => {
                with_id(&mut status);
                status["ready"] = (role == ContainerRole::Init).into();
                status["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": started_at.unwrap_or_else(|| self.now.to_string()), "finishedAt": self.now,
                    "containerID": container_id}});
            }
            (Stage::Running, ContainerRole::App | ContainerRole::Sidecar)
            | (Stage::Restarted(_) | Stage::BackOff(..), ContainerRole::Sidecar) => {
                with_id(&mut status);
                status["ready"] = true.into();
                status["started"] = true.into();
                status["state"] = json!({"running": {"startedAt": started_at.unwrap_or_else(|| self.now.to_string())}});
            }
            (Stage::Failed(_), ContainerRole::Init) if existing_terminated_ok(&existing) => {
                // A completed init container stays completed.
                with_id(&mut status);
                status["ready"] = true.into();
                status["state"] =
                    existing.as_ref().and_then(|s| serde_json::to_value(&s.state).ok()).unwrap_or_default();
            }
            (Stage::Failed(code), _) if ever_started => {
                with_id(&mut status);
                status["state"] = json!({"terminated": {"exitCode": code, "reason": "Error",
                    "startedAt": started_at.unwrap_or_else(|| self.now.to_string()), "finishedAt": self.now,
                    "containerID": container_id}});
            }
            (Stage::Failed(code), _) => {
                status["state"] = json!({"terminated": {"exitCode": code, "reason": "ContainerStatusUnknown",
                    "message": "The container could not be located when the pod was terminated",
                    "startedAt": null, "finishedAt": null}});
            }
            // Taken as `Failed(KILLED_EXIT_CODE)` above.
            (Stage::Evicted, _) => {}
        }
        status
    }
}

/// The terminated state of a container that exited with `code` (reason `Error`).
fn terminated_error(code: i32, started_at: Option<String>, now: &str, container_id: &str) -> Value {
    json!({"terminated": {"exitCode": code, "reason": "Error", "startedAt": started_at.unwrap_or_else(|| now.to_string()),
        "finishedAt": now, "containerID": container_id}})
}

/// Whether the container has a last termination on record.
fn has_last_termination(existing: &Option<ContainerStatus>) -> bool {
    existing.as_ref().and_then(|s| s.last_state.as_ref()).is_some_and(|s| s.terminated.is_some())
}

fn existing_terminated_ok(existing: &Option<ContainerStatus>) -> bool {
    existing
        .as_ref()
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .is_some_and(|t| t.exit_code == 0)
}

/// The mounts as the kubelet reports them (with recursive read-only mounts supported).
fn volume_mounts(container: &Container) -> Vec<Value> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let mut mount = json!({"name": m.name, "mountPath": m.mount_path});
            if m.read_only == Some(true) {
                mount["readOnly"] = true.into();
                mount["recursiveReadOnly"] = m.recursive_read_only.clone().unwrap_or_else(|| "Disabled".into()).into();
            }
            mount
        })
        .collect()
}

/// Whether the simulated container runtime can pull `image`: not when its tag is `404` (the
/// e2e suite's `webserver:404`, an image that does not exist) or its name says it does not exist
/// (`nonexistent`, `non-existent`, `does-not-exist`).
pub fn image_pullable(image: &str) -> bool {
    let name = image.split('@').next().unwrap_or_default();
    let last = name.rsplit('/').next().unwrap_or_default();
    let tag = last.split_once(':').map(|(_, tag)| tag);
    let missing = ["nonexistent", "non-existent", "does-not-exist"].iter().any(|word| name.contains(word));
    tag != Some("404") && !missing
}

/// How long a container's readiness probe keeps the pod unready once it runs: the longest
/// `initialDelaySeconds` among the app containers' readiness probes (simulated probes pass from
/// their first try).
pub fn readiness_delay(pod: &Pod) -> std::time::Duration {
    let spec = pod.spec.as_ref();
    let delays = spec.into_iter().flat_map(|s| s.containers.iter()).filter_map(|c| c.readiness_probe.as_ref());
    let seconds = delays.map(|p| p.initial_delay_seconds.unwrap_or(0).max(0)).max().unwrap_or(0);
    std::time::Duration::from_secs(seconds as u64)
}

/// An image reference as containerd reports it: `nginx` → `docker.io/library/nginx:latest`.
pub fn normalize_image(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_registry = name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut full = match (has_registry, name.contains('/')) {
        (true, _) => name.to_string(),
        (false, true) => format!("docker.io/{name}"),
        (false, false) => format!("docker.io/library/{name}"),
    };
    let last = full.rsplit('/').next().unwrap_or_default();
    match digest {
        Some(digest) => {
            full.push('@');
            full.push_str(digest);
        }
        None if !last.contains(':') => full.push_str(":latest"),
        None => {}
    }
    full
}

/// `repository@sha256:<digest>` for a normalized image: the digest is made up, but the same for
/// the same image everywhere.
fn image_id(image: &str) -> String {
    if image.contains("@sha256:") {
        return image.to_string();
    }
    let repository = match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    };
    format!("{repository}@sha256:{}", hex64(&[image]))
}

/// 64 hex digits derived from `parts` (container IDs, image digests).
fn hex64(parts: &[&str]) -> String {
    (0..4u8)
        .map(|round| {
            let mut hasher = DefaultHasher::new();
            (round, parts).hash(&mut hasher);
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

fn format_time(time: &jiff::Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u-1", "resourceVersion": "7"},
            "spec": spec,
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2030-01-01T00:00:00Z"},
                {"type": "DisruptionTarget", "status": "True", "reason": "X"}]},
        }))
        .expect("a Pod")
    }

    fn types(status: &Value) -> Vec<String> {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["type"].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn missing_images_cannot_be_pulled() {
        assert!(!image_pullable("webserver:404"));
        assert!(!image_pullable("registry.example/nonexistent:1"));
        assert!(image_pullable("registry.k8s.io/e2e-test-images/httpd:2.4.38-4"));
        assert!(image_pullable("localhost:404/app"));
    }

    #[test]
    fn pull_failures_and_unready_containers() {
        let p = pod(json!({"containers": [{"name": "app", "image": "webserver:404"}]}));
        let patch = status_patch(&p, Stage::PullFailed, "10.0.0.1", None, "2026-01-01T00:00:00Z");
        let status = &patch["status"];
        assert_eq!(status["phase"], "Pending");
        let waiting = &status["containerStatuses"][0]["state"]["waiting"];
        assert_eq!(waiting["reason"], "ImagePullBackOff");
        assert!(waiting["message"].as_str().unwrap().starts_with("Back-off pulling image \"webserver:404\""));
        let unready = status_patch(&p, Stage::Unready, "10.0.0.1", Some("10.244.0.5"), "2026-01-01T00:00:00Z");
        let container = &unready["status"]["containerStatuses"][0];
        assert_eq!((&container["ready"], &container["started"]), (&json!(false), &json!(true)));
        assert!(container["state"]["running"].is_object());
        let ready = unready["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!("ContainersNotReady")));
        assert_eq!(unready["status"]["phase"], "Running");
        let probed = pod(json!({"containers": [{"name": "app", "image": "x",
            "readinessProbe": {"httpGet": {"port": 80}, "initialDelaySeconds": 20}}, {"name": "b", "image": "y"}]}));
        assert_eq!(readiness_delay(&probed), std::time::Duration::from_secs(20));
        assert_eq!(readiness_delay(&p), std::time::Duration::ZERO);
    }

    #[test]
    fn images_are_normalized_as_containerd_reports_them() {
        assert_eq!(normalize_image("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(normalize_image("nginx:1.27"), "docker.io/library/nginx:1.27");
        assert_eq!(normalize_image("bitnami/redis:7"), "docker.io/bitnami/redis:7");
        assert_eq!(normalize_image("registry.k8s.io/pause:3.10"), "registry.k8s.io/pause:3.10");
        assert_eq!(normalize_image("localhost:5000/app"), "localhost:5000/app:latest");
        assert!(image_id("docker.io/library/nginx:1.27").starts_with("docker.io/library/nginx@sha256:"));
        assert_eq!(image_id("docker.io/library/nginx:1.27").len(), "docker.io/library/nginx@sha256:".len() + 64);
    }

    #[test]
    fn running_status_is_ready_with_ips() {
        let p = pod(json!({"containers": [{"name": "web", "image": "nginx"}], "readinessGates": []}));
        let patch = status_patch(&p, Stage::Running, "10.0.0.10", Some("10.244.0.2"), "2030-01-02T00:00:00Z");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let status = &patch["status"];
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["podIPs"], json!([{"ip": "10.244.0.2"}]));
        assert_eq!(
            types(status),
            [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
                "DisruptionTarget"
            ]
        );
        assert!(status["conditions"].as_array().into_iter().flatten().take(4).all(|c| c["status"] == "True"));
        assert_eq!(status["conditions"][4]["lastTransitionTime"], "2030-01-01T00:00:00Z");
        let container = &status["containerStatuses"][0];
        assert_eq!(container["ready"], true);
        assert!(container["containerID"].as_str().is_some_and(|id| id.starts_with("containerd://")));
        assert_eq!(container["state"]["running"]["startedAt"], "2030-01-02T00:00:00Z");
    }

    #[test]
    fn completed_and_failed_statuses() {
        let p = pod(json!({"containers": [{"name": "job", "image": "busybox"}]}));
        let done = status_patch(&p, Stage::Succeeded, "10.0.0.10", Some("10.244.0.2"), "2030-01-02T00:00:00Z");
        let terminated = &done["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!((terminated["exitCode"].as_i64(), terminated["reason"].as_str()), (Some(0), Some("Completed")));
        let ready = &done["status"]["conditions"][2];
        assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("PodCompleted")));
        let failed = status_patch(&p, Stage::Failed(1), "10.0.0.10", None, "2030-01-02T00:00:00Z");
        assert_eq!(failed["status"]["phase"], "Failed");
        assert_eq!(failed["status"]["conditions"][3]["reason"], "PodFailed");
    }

    #[test]
    fn evicted_and_restarted_statuses() {
        let p = pod(json!({"containers": [{"name": "job", "image": "busybox"}], "restartPolicy": "OnFailure"}));
        let running = status_patch(&p, Stage::Running, "10.0.0.10", Some("10.244.0.2"), "2030-01-02T00:00:00Z");
        let mut p: Pod = serde_json::from_value(json!({"metadata": p.metadata, "spec": p.spec,
            "status": running["status"]}))
        .expect("a Pod");
        let restarted = status_patch(&p, Stage::Restarted(2), "10.0.0.10", None, "2030-01-02T00:00:05Z");
        let container = &restarted["status"]["containerStatuses"][0];
        assert_eq!(restarted["status"]["phase"], "Running");
        assert_eq!(container["restartCount"], 1);
        assert_eq!(container["lastState"]["terminated"]["exitCode"], 2);
        assert_eq!(container["lastState"]["terminated"]["reason"], "Error");
        assert_eq!(container["lastState"]["terminated"]["startedAt"], "2030-01-02T00:00:00Z");
        assert_eq!(container["state"]["running"]["startedAt"], "2030-01-02T00:00:05Z");
        assert_ne!(container["containerID"], container["lastState"]["terminated"]["containerID"]);
        p.status = serde_json::from_value(restarted["status"].clone()).expect("a status");
        // Later statuses keep the last state.
        let done = status_patch(&p, Stage::Succeeded, "10.0.0.10", None, "2030-01-02T00:00:09Z");
        assert_eq!(done["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 2);
        assert_eq!(done["status"]["containerStatuses"][0]["restartCount"], 1);

        let evicted = status_patch(&p, Stage::Evicted, "10.0.0.10", None, "2030-01-02T00:00:09Z");
        let status = &evicted["status"];
        assert_eq!((status["phase"].as_str(), status["reason"].as_str()), (Some("Failed"), Some("Evicted")));
        assert_eq!(status["message"], EVICTION_MESSAGE);
        let terminated = &status["containerStatuses"][0]["state"]["terminated"];
        assert_eq!((terminated["exitCode"].as_i64(), terminated["reason"].as_str()), (Some(137), Some("Error")));
        let disruption: Vec<&Value> =
            status["conditions"].as_array().into_iter().flatten().filter(|c| c["type"] == "DisruptionTarget").collect();
        assert_eq!(disruption.len(), 1, "replaced, not added");
        assert_eq!(disruption[0]["reason"], "TerminationByKubelet");
        assert_eq!(disruption[0]["message"], EVICTION_MESSAGE);
    }

    #[test]
    fn crash_loop_back_off_waits_not_ready() {
        let p = pod(json!({"containers": [{"name": "job", "image": "busybox"}], "restartPolicy": "OnFailure"}));
        let running = status_patch(&p, Stage::Running, "10.0.0.10", Some("10.244.0.2"), "2030-01-02T00:00:00Z");
        let mut p: Pod = serde_json::from_value(json!({"metadata": p.metadata, "spec": p.spec,
            "status": running["status"]}))
        .expect("a Pod");
        let waiting = status_patch(
            &p,
            Stage::BackOff(3, std::time::Duration::from_secs(20)),
            "10.0.0.10",
            None,
            "2030-01-02T00:00:05Z",
        );
        let status = &waiting["status"];
        assert_eq!(status["phase"], "Running");
        let container = &status["containerStatuses"][0];
        assert_eq!(container["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(
            container["state"]["waiting"]["message"],
            "back-off 20s restarting failed container=job pod=p_default(u-1)"
        );
        assert_eq!((container["ready"].as_bool(), container["restartCount"].as_i64()), (Some(false), Some(0)));
        assert_eq!(container["lastState"]["terminated"]["exitCode"], 3);
        let ready = &status["conditions"][2];
        assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("ContainersNotReady")));
        // Started again: one restart, the exit kept as the last state.
        p.status = serde_json::from_value(status.clone()).expect("a status");
        let again = status_patch(&p, Stage::Restarted(3), "10.0.0.10", None, "2030-01-02T00:00:25Z");
        let container = &again["status"]["containerStatuses"][0];
        assert_eq!(container["restartCount"], 1);
        assert_eq!(container["lastState"]["terminated"]["finishedAt"], "2030-01-02T00:00:05Z");
        assert_eq!(container["state"]["running"]["startedAt"], "2030-01-02T00:00:25Z");
    }

    #[test]
    fn readiness_gates_hold_ready_back() {
        let p = pod(
            json!({"containers": [{"name": "web", "image": "nginx"}], "readinessGates": [{"conditionType": "lb/ready"}]}),
        );
        let status = status_patch(&p, Stage::Running, "10.0.0.10", Some("10.244.0.2"), "2030-01-02T00:00:00Z");
        let ready = &status["status"]["conditions"][2];
        assert_eq!(ready["reason"], "ReadinessGatesNotReady");
        assert!(!conditions_current(&p, Stage::Running));
    }
}
