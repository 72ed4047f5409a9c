//! Side-by-side scenario of the `statefulset` controller: `statefulset`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "statefulset",
    summary: "an OrderedReady StatefulSet of 3 with a volume claim template (whenDeleted: Delete) scaled to 5 and back to 2, a partitioned rolling update, then deleted; a second (whenScaled: Delete, whenDeleted: Retain) scaled down and deleted",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: stateful_set,
}];

pub(super) const STATEFUL_SETS: &str = "/apis/apps/v1/namespaces/sbs/statefulsets";

/// Waits until StatefulSet `name` observed its generation with `replicas` ready, current and
/// updated as given, and exactly `replicas` live pods Running and Ready.
pub(super) fn stateful_set_status(
    steps: &mut Steps,
    name: &str,
    replicas: i64,
    current: i64,
    updated: i64,
) -> Result<(), Error> {
    let path = format!("{STATEFUL_SETS}/{name}");
    steps.wait(&format!("StatefulSet {name}: {replicas} ready, {current} current, {updated} updated"), |s| {
        let set = s.get(&path)?.unwrap_or_default();
        let status = &set["status"];
        let number = |field: &str| status[field].as_i64().unwrap_or(0);
        let done = status["observedGeneration"] == set["metadata"]["generation"]
            && number("replicas") == replicas
            && number("readyReplicas") == replicas
            && number("availableReplicas") == replicas
            && number("currentReplicas") == current
            && number("updatedReplicas") == updated;
        Ok(done.then_some(()))
    })?;
    steps.wait_pods_ready(NAMESPACE, &format!("app={name}"), replicas as usize).map(|_| ())
}

pub(super) fn stateful_set(steps: &mut Steps) -> Result<(), Error> {
    let set = json!({"metadata": {"name": "web"},
        "spec": {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
            "template": template("web", "registry.k8s.io/pause:3.10"),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]}});
    steps.create(STATEFUL_SETS, set)?;
    stateful_set_status(steps, "web", 3, 3, 3)?;
    steps.checkpoint("3 replicas with bound claims")?;
    let path = format!("{STATEFUL_SETS}/web");
    steps.patch(&path, json!({"spec": {"replicas": 5}}))?;
    stateful_set_status(steps, "web", 5, 5, 5)?;
    steps.patch(&path, json!({"spec": {"replicas": 2}}))?;
    stateful_set_status(steps, "web", 2, 2, 2)?;
    steps.checkpoint("scaled to 5 and back to 2, the claims kept")?;
    let update = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}},
        "template": {"metadata": {"annotations": {"version": "2"}}}}});
    steps.patch(&path, update)?;
    stateful_set_status(steps, "web", 2, 1, 1)?;
    steps.checkpoint("web-1 updated, web-0 below the partition")?;
    steps.delete(&path, None)?;
    steps.wait_gone(&path)?;
    steps.wait("the pods gone", |s| {
        Ok(s.list(&format!("/api/v1/namespaces/{NAMESPACE}/pods"))?.is_empty().then_some(()))
    })?;
    // The garbage collector deletes the claims; the pvc-protection controller lets them go once
    // their pods are gone.
    steps.wait("the claims gone", |s| {
        Ok(s.list(&format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"))?.is_empty().then_some(()))
    })?;
    steps.checkpoint("deleted: its pods and claims gone (garbage collector, pvc-protection)")?;
    stateful_set_retained(steps)
}

/// The other retention policies: `whenScaled: Delete` hands a scaled-down ordinal's claim to its
/// pod (collected with it); `whenDeleted: Retain` keeps the rest when the set goes.
pub(super) fn stateful_set_retained(steps: &mut Steps) -> Result<(), Error> {
    let set = json!({"metadata": {"name": "cache"},
        "spec": {"replicas": 2, "serviceName": "cache", "selector": {"matchLabels": {"app": "cache"}},
            "template": template("cache", "registry.k8s.io/pause:3.10"),
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]}});
    steps.create(STATEFUL_SETS, set)?;
    stateful_set_status(steps, "cache", 2, 2, 2)?;
    let path = format!("{STATEFUL_SETS}/cache");
    steps.patch(&path, json!({"spec": {"replicas": 1}}))?;
    stateful_set_status(steps, "cache", 1, 1, 1)?;
    let claims = format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims");
    steps.wait("the claim of cache-1 collected with its pod", |s| Ok((s.list(&claims)?.len() == 1).then_some(())))?;
    steps.delete(&path, None)?;
    steps.wait_gone(&path)?;
    steps.wait("the pods gone", |s| {
        Ok(s.list(&format!("/api/v1/namespaces/{NAMESPACE}/pods"))?.is_empty().then_some(()))
    })?;
    steps.checkpoint("whenScaled: Delete and whenDeleted: Retain: the claim of cache-0 kept")
}
