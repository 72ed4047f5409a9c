//! The workloads: each prepares objects, makes one change whose convergence is timed, and
//! says from the server's state whether it converged (invariant 5).

use serde_json::{Value, json};

use super::{Bed, Error, condition, named};

/// A workload on a [`Bed`].
pub struct Workload {
    /// Its name in the bench's table.
    pub name: &'static str,
    /// Flags the replicas need for it (e.g. the node monitor's periods).
    pub flags: &'static [&'static str],
    /// Creates the objects and waits until they settled.
    pub prepare: fn(&Bed) -> Result<(), Error>,
    /// The change whose convergence is measured.
    pub change: fn(&Bed) -> Result<(), Error>,
    /// `Some(())` once the server's state is the expected one.
    pub converged: fn(&Bed) -> Result<Option<()>, Error>,
}

/// Every workload, in the bench's order.
pub const ALL: &[Workload] = &[ROLLOUT, NAMESPACE_DELETION, NODE_FAILURE, JOB, STATEFUL_SET];

/// 20 Deployments of 2 replicas behind one Service, created, then all given a new image.
pub const ROLLOUT: Workload = Workload {
    name: "rollout of 20 Deployments",
    flags: &[],
    prepare: rollout_prepare,
    change: rollout_change,
    converged: rollout_converged,
};
/// [`ROLLOUT`]'s Deployments given their first image back: their first ReplicaSets scale up
/// again (after [`ROLLOUT`]'s change).
pub const ROLLOUT_BACK: Workload = Workload {
    name: "rollout back of 20 Deployments",
    flags: &[],
    prepare: nothing,
    change: rollout_back_change,
    converged: rollout_back_converged,
};
/// A namespace with ConfigMaps, a Secret, a Service and a ReplicaSet's pods, deleted.
pub const NAMESPACE_DELETION: Workload = Workload {
    name: "namespace deletion",
    flags: &[],
    prepare: namespace_prepare,
    change: namespace_change,
    converged: namespace_converged,
};
/// A node stops heartbeating: tainted, its pods evicted and replaced elsewhere.
pub const NODE_FAILURE: Workload = Workload {
    name: "node failure",
    flags: &["--node-monitor-period=1s", "--node-monitor-grace-period=6s"],
    prepare: node_failure_prepare,
    change: node_failure_change,
    converged: node_failure_converged,
};
/// A Job of 6 completions, 2 at a time, run to completion.
pub const JOB: Workload =
    Workload { name: "Job to completion", flags: &[], prepare: nothing, change: job_change, converged: job_converged };
/// A StatefulSet with claims scaled from 2 to 4.
pub const STATEFUL_SET: Workload = Workload {
    name: "StatefulSet scaled",
    flags: &[],
    prepare: stateful_set_prepare,
    change: stateful_set_change,
    converged: stateful_set_converged,
};

const NAMESPACE: &str = "chaos";
const DEPLOYMENTS: usize = 20;
const IMAGE: &str = "registry.k8s.io/pause:3.10";
const NEW_IMAGE: &str = "registry.k8s.io/pause:3.9";

fn nothing(_: &Bed) -> Result<(), Error> {
    Ok(())
}

fn template(labels: Value, image: &str) -> Value {
    json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app", "image": image}],
        "terminationGracePeriodSeconds": 0}})
}

/// The workloads' namespace, once its default ServiceAccount exists (pods need it).
fn ensure_namespace(bed: &Bed, name: &str) -> Result<(), Error> {
    if bed.get(&format!("/api/v1/namespaces/{name}"))?.is_none() {
        bed.create("/api/v1/namespaces", named(name))?;
    }
    let account = format!("/api/v1/namespaces/{name}/serviceaccounts/default");
    bed.wait("the default ServiceAccount", std::time::Duration::from_secs(60), |b| Ok(b.get(&account)?.map(|_| ())))
}

/// Live (not terminating) pods matching `selector` in `namespace`.
fn live_pods(bed: &Bed, namespace: &str, selector: &str) -> Result<Vec<Value>, Error> {
    let pods = bed.list(&format!("/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"))?;
    Ok(pods.into_iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect())
}

fn running_and_ready(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running" && condition(pod, "Ready") == Some("True")
}

// --- rollout ---------------------------------------------------------------------------------

fn rollout_prepare(bed: &Bed) -> Result<(), Error> {
    ensure_namespace(bed, NAMESPACE)?;
    let service = json!({"metadata": {"name": "web"},
        "spec": {"selector": {"tier": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}});
    bed.create(&format!("/api/v1/namespaces/{NAMESPACE}/services"), service)?;
    for i in 0..DEPLOYMENTS {
        let name = format!("web-{i}");
        let deployment = json!({"metadata": {"name": name}, "spec": {"replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": template(json!({"app": name, "tier": "web"}), IMAGE)}});
        bed.create(&format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments"), deployment)?;
    }
    bed.wait("20 Deployments available", super::CONVERGE_TIMEOUT, |b| rolled_out(b, IMAGE))
}

fn rollout_change(bed: &Bed) -> Result<(), Error> {
    set_image(bed, NEW_IMAGE)
}

fn rollout_converged(bed: &Bed) -> Result<Option<()>, Error> {
    rolled_out(bed, NEW_IMAGE)
}

fn rollout_back_change(bed: &Bed) -> Result<(), Error> {
    set_image(bed, IMAGE)
}

fn rollout_back_converged(bed: &Bed) -> Result<Option<()>, Error> {
    rolled_out(bed, IMAGE)
}

/// Gives every Deployment's pods `image`.
fn set_image(bed: &Bed, image: &str) -> Result<(), Error> {
    for i in 0..DEPLOYMENTS {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
        bed.patch(&format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments/web-{i}"), patch)?;
    }
    Ok(())
}

/// Every Deployment observed its spec and has 2 updated, ready, available replicas, exactly 2
/// live pods of `image`, Running and Ready, and the Service's slices list all 40 once, ready.
fn rolled_out(bed: &Bed, image: &str) -> Result<Option<()>, Error> {
    let deployments = bed.list(&format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments"))?;
    let done = deployments.len() == DEPLOYMENTS
        && deployments.iter().all(|d| {
            let status = &d["status"];
            status["observedGeneration"] == d["metadata"]["generation"]
                && ["replicas", "updatedReplicas", "readyReplicas", "availableReplicas"].iter().all(|f| status[f] == 2)
        });
    if !done {
        return Ok(None);
    }
    let pods = live_pods(bed, NAMESPACE, "tier=web")?;
    let pods_done = pods.len() == 2 * DEPLOYMENTS
        && pods.iter().all(|p| running_and_ready(p) && p["spec"]["containers"][0]["image"] == image);
    if !pods_done {
        return Ok(None);
    }
    let slices = bed.list(&format!(
        "/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices?labelSelector=kubernetes.io/service-name=web"
    ))?;
    let mut addresses: Vec<&str> = slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .filter(|e| e["conditions"]["ready"] == true)
        .filter_map(|e| e["addresses"][0].as_str())
        .collect();
    addresses.sort();
    let mut expected: Vec<&str> = pods.iter().filter_map(|p| p["status"]["podIP"].as_str()).collect();
    expected.sort();
    Ok((addresses == expected).then_some(()))
}

// --- namespace deletion ----------------------------------------------------------------------

const DOOMED: &str = "chaos-doomed";

fn namespace_prepare(bed: &Bed) -> Result<(), Error> {
    ensure_namespace(bed, DOOMED)?;
    let ns = |path: &str| format!("/api/v1/namespaces/{DOOMED}/{path}");
    for name in ["settings", "more-settings"] {
        bed.create(&ns("configmaps"), named(name))?;
    }
    bed.create(&ns("secrets"), json!({"metadata": {"name": "password"}, "stringData": {"password": "hunter2"}}))?;
    bed.create(
        &ns("services"),
        json!({"metadata": {"name": "cache"},
        "spec": {"selector": {"app": "cache"}, "ports": [{"port": 80}]}}),
    )?;
    let rs = json!({"metadata": {"name": "cache"}, "spec": {"replicas": 3,
        "selector": {"matchLabels": {"app": "cache"}}, "template": template(json!({"app": "cache"}), IMAGE)}});
    bed.create(&format!("/apis/apps/v1/namespaces/{DOOMED}/replicasets"), rs)?;
    bed.wait("3 cache pods ready", super::CONVERGE_TIMEOUT, |b| {
        let pods = live_pods(b, DOOMED, "app=cache")?;
        Ok((pods.len() == 3 && pods.iter().all(running_and_ready)).then_some(()))
    })
}

fn namespace_change(bed: &Bed) -> Result<(), Error> {
    bed.delete(&format!("/api/v1/namespaces/{DOOMED}"))
}

fn namespace_converged(bed: &Bed) -> Result<Option<()>, Error> {
    Ok(bed.get(&format!("/api/v1/namespaces/{DOOMED}"))?.is_none().then_some(()))
}

// --- node failure ----------------------------------------------------------------------------

/// The label that marks the node the workload fails: one that runs an evictable pod (the
/// scheduler spreads by pod count, so no fixed node is sure to have one).
const FAILING: &str = "chaos.kcm.dev/failing";

/// The node marked [`FAILING`], if any.
fn failing_node(bed: &Bed) -> Result<Option<String>, Error> {
    let nodes = bed.list(&format!("/api/v1/nodes?labelSelector={FAILING}"))?;
    Ok(nodes.first().and_then(|n| n["metadata"]["name"].as_str()).map(str::to_string))
}

fn node_failure_prepare(bed: &Bed) -> Result<(), Error> {
    ensure_namespace(bed, NAMESPACE)?;
    // Pods tolerate an unreachable or not-ready node for 2 s (DefaultTolerationSeconds: 300 s).
    let mut pod = template(json!({"app": "evictable"}), IMAGE);
    pod["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
    ]);
    let rs = json!({"metadata": {"name": "evictable"}, "spec": {"replicas": 3,
        "selector": {"matchLabels": {"app": "evictable"}}, "template": pod}});
    bed.create(&format!("/apis/apps/v1/namespaces/{NAMESPACE}/replicasets"), rs)?;
    let node = bed.wait("3 evictable pods ready", super::CONVERGE_TIMEOUT, |b| {
        let pods = live_pods(b, NAMESPACE, "app=evictable")?;
        let ready = pods.len() == 3 && pods.iter().all(running_and_ready);
        Ok(ready.then(|| pods[0]["spec"]["nodeName"].as_str().map(str::to_string)).flatten())
    })?;
    bed.patch(&format!("/api/v1/nodes/{node}"), json!({"metadata": {"labels": {FAILING: "true"}}})).map(|_| ())
}

fn node_failure_change(bed: &Bed) -> Result<(), Error> {
    let node = failing_node(bed)?.ok_or_else(|| Error::Workload("no node marked to fail".into()))?;
    bed.nodes.stop_heartbeat(&node);
    Ok(())
}

fn node_failure_converged(bed: &Bed) -> Result<Option<()>, Error> {
    let Some(failing) = failing_node(bed)? else { return Ok(None) };
    let node = bed.get(&format!("/api/v1/nodes/{failing}"))?.unwrap_or_default();
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    let tainted = taints.iter().any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute");
    let pods = live_pods(bed, NAMESPACE, "app=evictable")?;
    let moved =
        pods.len() == 3 && pods.iter().all(|p| p["spec"]["nodeName"] != failing.as_str() && running_and_ready(p));
    Ok((tainted && moved).then_some(()))
}

// --- Job -------------------------------------------------------------------------------------

fn job_change(bed: &Bed) -> Result<(), Error> {
    ensure_namespace(bed, NAMESPACE)?;
    let mut pod = template(json!({"app": "batch"}), IMAGE);
    pod["spec"]["restartPolicy"] = json!("Never");
    pod["metadata"]["annotations"] = json!({"kcm-sandbox.dev/run-seconds": "1"});
    let job = json!({"metadata": {"name": "batch"}, "spec": {"completions": 6, "parallelism": 2, "template": pod}});
    bed.create(&format!("/apis/batch/v1/namespaces/{NAMESPACE}/jobs"), job).map(|_| ())
}

fn job_converged(bed: &Bed) -> Result<Option<()>, Error> {
    let job = bed.get(&format!("/apis/batch/v1/namespaces/{NAMESPACE}/jobs/batch"))?.unwrap_or_default();
    let done = job["status"]["succeeded"] == 6 && condition(&job, "Complete") == Some("True");
    Ok(done.then_some(()))
}

// --- StatefulSet -----------------------------------------------------------------------------

const STATEFUL_SETS: &str = "/apis/apps/v1/namespaces/chaos/statefulsets";

fn stateful_set_prepare(bed: &Bed) -> Result<(), Error> {
    ensure_namespace(bed, NAMESPACE)?;
    let set = json!({"metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": template(json!({"app": "db"}), IMAGE),
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]}});
    bed.create(STATEFUL_SETS, set)?;
    bed.wait("StatefulSet db: 2 ready", super::CONVERGE_TIMEOUT, |b| stateful_set_ready(b, 2))
}

fn stateful_set_change(bed: &Bed) -> Result<(), Error> {
    bed.patch(&format!("{STATEFUL_SETS}/db"), json!({"spec": {"replicas": 4}})).map(|_| ())
}

fn stateful_set_converged(bed: &Bed) -> Result<Option<()>, Error> {
    stateful_set_ready(bed, 4)
}

/// The set observed its generation with `replicas` ready, current and updated, exactly
/// `replicas` live pods Running and Ready, and a Bound claim for each.
fn stateful_set_ready(bed: &Bed, replicas: i64) -> Result<Option<()>, Error> {
    let set = bed.get(&format!("{STATEFUL_SETS}/db"))?.unwrap_or_default();
    let status = &set["status"];
    let done = status["observedGeneration"] == set["metadata"]["generation"]
        && ["replicas", "readyReplicas", "availableReplicas", "currentReplicas", "updatedReplicas"]
            .iter()
            .all(|f| status[f].as_i64() == Some(replicas));
    let pods = live_pods(bed, NAMESPACE, "app=db")?;
    let claims = bed.list(&format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"))?;
    let bound = claims.iter().filter(|c| c["status"]["phase"] == "Bound").count();
    let replicas = usize::try_from(replicas).unwrap_or(0);
    Ok((done && pods.len() == replicas && pods.iter().all(running_and_ready) && bound == replicas).then_some(()))
}
