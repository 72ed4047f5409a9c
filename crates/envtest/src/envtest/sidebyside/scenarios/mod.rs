//! The scenarios, one file per controller (named as its module under `crates/controllers/src/controllers/`), each
//! with its table entries (`SCENARIOS`) and its steps; the helpers two or more share are here.
//! Adding a controller's scenario adds a file and a line to [`all`].

use serde_json::json;

use super::*;

mod attachdetach;
mod bootstrap;
mod certificates;
mod clusterroleaggregation;
mod cronjob;
mod daemon;
mod deployment;
mod devicetainteviction;
mod disruption;
mod endpoint;
mod ephemeral;
mod expand;
mod garbagecollector;
mod job;
mod namespace;
mod nodeipam;
mod nodelifecycle;
mod persistentvolume;
mod podautoscaler;
mod protection;
mod replicaset;
mod resourceclaim;
mod resourcequota;
mod root_ca_publisher;
mod servicecidrs;
mod statefulset;
mod vacprotection;
mod validatingadmissionpolicystatus;

pub use validatingadmissionpolicystatus::deployment_policy;

/// Every scenario, in the order `side-by-side` runs them.
pub fn all() -> impl Iterator<Item = &'static Scenario> {
    [
        replicaset::SCENARIOS,
        deployment::SCENARIOS,
        garbagecollector::SCENARIOS,
        namespace::SCENARIOS,
        endpoint::SCENARIOS,
        nodelifecycle::SCENARIOS,
        resourcequota::SCENARIOS,
        root_ca_publisher::SCENARIOS,
        certificates::SCENARIOS,
        nodeipam::SCENARIOS,
        job::SCENARIOS,
        cronjob::SCENARIOS,
        daemon::SCENARIOS,
        statefulset::SCENARIOS,
        persistentvolume::SCENARIOS,
        disruption::SCENARIOS,
        podautoscaler::SCENARIOS,
        bootstrap::SCENARIOS,
        clusterroleaggregation::SCENARIOS,
        servicecidrs::SCENARIOS,
        expand::SCENARIOS,
        ephemeral::SCENARIOS,
        protection::SCENARIOS,
        attachdetach::SCENARIOS,
        validatingadmissionpolicystatus::SCENARIOS,
        resourceclaim::SCENARIOS,
        devicetainteviction::SCENARIOS,
        vacprotection::SCENARIOS,
    ]
    .into_iter()
    .flatten()
}

pub(super) const RS: &str = "/apis/apps/v1/namespaces/sbs/replicasets";

pub(super) const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/sbs/deployments";

/// A pod template labelled `app: name`, one container of `image`.
pub(super) fn template(name: &str, image: &str) -> Value {
    json!({"metadata": {"labels": {"app": name}},
           "spec": {"containers": [{"name": "app", "image": image, "ports": [{"containerPort": 8080}]}],
                    "terminationGracePeriodSeconds": 5}})
}

pub(super) fn replica_set(name: &str, replicas: i32) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": template(name, "registry.k8s.io/pause:3.10")}})
}

pub(super) fn deployment(name: &str, replicas: i32, image: &str) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": template(name, image)}})
}

/// Waits until Deployment `name` completed its rollout: `replicas` updated and available, none
/// old, the current generation observed.
pub(super) fn rolled_out(steps: &mut Steps, name: &str, replicas: i64) -> Result<(), Error> {
    let path = format!("{DEPLOYMENTS}/{name}");
    steps.wait(&format!("Deployment {name}: {replicas} replicas rolled out"), |s| {
        let d = s.get(&path)?.unwrap_or_default();
        let status = &d["status"];
        let number = |field: &str| status[field].as_i64().unwrap_or(0);
        let done = status["observedGeneration"] == d["metadata"]["generation"]
            && number("replicas") == replicas
            && number("updatedReplicas") == replicas
            && number("availableReplicas") == replicas
            && number("unavailableReplicas") == 0
            && status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Progressing" && c["reason"] == "NewReplicaSetAvailable");
        Ok(done.then_some(()))
    })?;
    let selector = format!("app={name}");
    steps.wait_pods_ready(NAMESPACE, &selector, replicas as usize).map(|_| ())
}

pub(super) const VOLUMES: &str = "/api/v1/persistentvolumes";

pub(super) const CLAIMS: &str = "/api/v1/namespaces/sbs/persistentvolumeclaims";

/// POSTs an Eviction of pod `name`.
pub(super) fn evict(steps: &Steps, name: &str) -> Result<Value, Error> {
    let eviction =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NAMESPACE}});
    steps.create(&format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}/eviction"), eviction)
}

/// The simulated CSI driver (`crates/sandbox/src/sandbox/nodes`).
pub(super) const CSI_DRIVER: &str = crate::sandbox::nodes::csi::DRIVER;

pub(super) const RESOURCE_CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/sbs/resourceclaims";

pub(super) const DEVICE_CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";

pub(super) const PODS: &str = "/api/v1/namespaces/sbs/pods";

/// The simulated DRA driver, also its DeviceClass's name.
pub(super) const DRA_DRIVER: &str = "gpu.example.com";

/// The finalizer kube-scheduler puts on a claim before it allocates it.
pub(super) const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// A scheduler name nothing serves: the steps bind such pods themselves.
pub(super) const MANUAL_SCHEDULER: &str = "sbs-manual";

/// The DeviceClass of the simulated driver, compared as a cluster object.
pub(super) fn device_class(steps: &mut Steps) -> Result<(), Error> {
    let class = json!({"metadata": {"name": DRA_DRIVER}, "spec": {"selectors": [
        {"cel": {"expression": format!("device.driver == '{DRA_DRIVER}'")}}]}});
    steps.create(DEVICE_CLASSES, class)?;
    steps.cluster_objects.push(format!("{DEVICE_CLASSES}/{DRA_DRIVER}"));
    Ok(())
}

/// A pod whose container uses the claim `gpu` from `source` (`resourceClaimTemplateName` or
/// `resourceClaimName`), with `spec` merged in.
pub(super) fn dra_pod(name: &str, source: Value, spec: Value) -> Value {
    let mut claim = json!({"name": "gpu"});
    if let (Some(claim), Some(source)) = (claim.as_object_mut(), source.as_object()) {
        claim.extend(source.clone());
    }
    let mut pod = json!({"metadata": {"name": name, "labels": {"app": name}}, "spec": {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [claim], "terminationGracePeriodSeconds": 5}});
    if let (Some(pod_spec), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        pod_spec.extend(extra.clone());
    }
    pod
}

/// What kube-scheduler writes when it allocates `device` of node-1's pool to claim `name`: its
/// finalizer first, then the allocation (with `tolerations` of the device's taints).
pub(super) fn allocate(steps: &Steps, name: &str, device: &str, tolerations: Value) -> Result<(), Error> {
    let path = format!("{RESOURCE_CLAIMS}/{name}");
    steps.patch(&path, json!({"metadata": {"finalizers": [DELETE_PROTECTION]}}))?;
    let mut result = json!({"request": "gpu", "driver": DRA_DRIVER, "pool": "node-1", "device": device});
    if !tolerations.is_null() {
        result["tolerations"] = tolerations;
    }
    let selector = json!({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]});
    let allocation = json!({"devices": {"results": [result]}, "nodeSelector": selector});
    steps.patch(&format!("{path}/status"), json!({"status": {"allocation": allocation}}))?;
    Ok(())
}

/// Binds pod `name` to node-1, as kube-scheduler does.
pub(super) fn bind(steps: &Steps, name: &str) -> Result<(), Error> {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    steps.create(&format!("{PODS}/{name}/binding"), binding)?;
    Ok(())
}

/// Waits until claim `claim` is reserved for pod `pod`.
pub(super) fn wait_reserved(steps: &mut Steps, claim: &str, pod: &str) -> Result<(), Error> {
    steps.wait(&format!("claim {claim} reserved for pod {pod}"), |s| {
        let claim = s.get(&format!("{RESOURCE_CLAIMS}/{claim}"))?.unwrap_or_default();
        let reserved = claim["status"]["reservedFor"].as_array().cloned().unwrap_or_default();
        Ok(reserved.iter().any(|r| r["name"] == pod).then_some(()))
    })
}

/// Waits for an Event of `reason` in the scenario namespace.
pub(super) fn wait_event(steps: &mut Steps, reason: &str) -> Result<(), Error> {
    steps.wait(&format!("the {reason} Event"), |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == reason).then_some(()))
    })
}
