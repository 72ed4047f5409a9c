//! The demo's DaemonSet and StatefulSet steps: an agent DaemonSet follows the nodes as they
//! join and leave; a StatefulSet comes up in order, its claims provisioned, bound and their
//! volumes attached, and keeps its claims when scaled down.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use serde_json::json;

use super::{Error, Narrator, STEP_TIMEOUT, all_implemented, sandbox_error, wait_for};
use crate::apimachinery::pod::is_pod_ready;
use crate::client::{Api, Client, ListParams, Patch, PostParams};
use crate::sandbox::nodes::SimulatedNodes;

/// The node that joins and leaves while DaemonSet agent runs.
const JOINING_NODE: &str = "node-4";

/// DaemonSet agent: one pod per node; a node joins and gets one, then leaves. True when the
/// daemonset-controller runs (then [`daemonset_check`] follows near the end).
pub(super) fn daemonset_start(
    client: &Client,
    nodes: &SimulatedNodes,
    ns: &str,
    narrator: &mut Narrator,
) -> Result<bool, Error> {
    let needed = ["daemonset-controller"];
    narrator.step("DaemonSet agent → one pod on every node, following the nodes as they join and leave");
    if !all_implemented(&needed) {
        narrator.skip("DaemonSets", &needed);
        return Ok(false);
    }
    let daemon_set: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {"metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "agent", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}}}))?;
    Api::<DaemonSet>::namespaced(client, ns).create(&daemon_set, &PostParams::default())?;
    let placed = wait_agents(client, ns, nodes.names().len())?;
    narrator.ok(&format!("one agent pod Running on each node: {}", describe(&placed)));

    narrator.step(&format!("{JOINING_NODE} joins the cluster"));
    nodes.add_node(JOINING_NODE).map_err(sandbox_error)?;
    let placed = wait_agents(client, ns, nodes.names().len())?;
    let pod = placed.get(JOINING_NODE).cloned().unwrap_or_default();
    narrator.ok(&format!("daemonset-controller placed {pod} on it (required node affinity on metadata.name)"));

    narrator.step(&format!("{JOINING_NODE} leaves the cluster (its Node is deleted)"));
    nodes.remove_node(JOINING_NODE).map_err(sandbox_error)?;
    narrator.ok("its agent pod is an orphan now: pod-garbage-collector deletes it after 40 s, checked near the end");
    Ok(true)
}

/// The agent pod of the node that left is gone; the other nodes keep theirs. (Its status is
/// not checked: after node-1's outage above it may still count node-1 out, as upstream's
/// would, until an event about the DaemonSet or its pods comes.)
pub(super) fn daemonset_check(
    client: &Client,
    nodes: &SimulatedNodes,
    ns: &str,
    narrator: &mut Narrator,
) -> Result<(), Error> {
    narrator.step(&format!("DaemonSet agent after {JOINING_NODE} left"));
    let mut seen = String::new();
    let placed = wait_for(&format!("the agent pod of {JOINING_NODE} deleted"), STEP_TIMEOUT * 2, || {
        let placed = agents(client, ns)?;
        seen = describe(&placed);
        let settled = !placed.contains_key(JOINING_NODE) && placed.len() == nodes.names().len();
        Ok(settled.then_some(placed))
    })
    .map_err(|e| Error::LastSeen { source: Box::new(e), seen: seen.clone() })?;
    narrator.ok(&format!("pod-garbage-collector deleted its pod; the others run on: {}", describe(&placed)));
    Ok(())
}

/// The Running agent pods by node, once there is one on each of `count` nodes.
fn wait_agents(client: &Client, ns: &str, count: usize) -> Result<BTreeMap<String, String>, Error> {
    wait_for(&format!("{count} agent pods Running"), STEP_TIMEOUT, || {
        let placed = agents(client, ns)?;
        Ok((placed.len() == count).then_some(placed))
    })
}

fn agents(client: &Client, ns: &str) -> Result<BTreeMap<String, String>, Error> {
    let params = ListParams { label_selector: Some("app=agent".into()), ..Default::default() };
    let (pods, _) = Api::<Pod>::namespaced(client, ns).list_all(&params)?;
    Ok(pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| Some((p.spec?.node_name?, p.metadata.name?)))
        .collect())
}

fn describe(placed: &BTreeMap<String, String>) -> String {
    placed.iter().map(|(node, pod)| format!("{pod} on {node}")).collect::<Vec<_>>().join(", ")
}

/// StatefulSet db: three pods in order, each with its claim; scaled down, the claims stay.
pub(super) fn statefulset_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["statefulset-controller"];
    narrator.step("StatefulSet db (3 replicas, a volume claim template) → db-0, db-1, db-2 in order");
    if !all_implemented(&needed) {
        narrator.skip("StatefulSets", &needed);
        return Ok(());
    }
    let set: StatefulSet = serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {
        "replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "db", "image": "postgres:17",
                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}))?;
    let sets = Api::<StatefulSet>::namespaced(client, ns);
    sets.create(&set, &PostParams::default())?;
    let pods = wait_db(client, ns, 3)?;
    narrator.ok(&format!("{}: each created once the one before was Ready", pods.join(" → ")));
    let claims = bound_claims(client, ns)?;
    narrator.ok(&format!("their claims, created before each pod and Bound: {}", claims.join(", ")));
    let storage = ["persistentvolume-binder-controller", "persistentvolume-attach-detach-controller"];
    if all_implemented(&storage) {
        let attached = wait_attached(client, ns, &pods)?;
        narrator.ok(&format!(
            "each claim bound by the binder to a volume the CSI driver provisioned, attached to its pod's node: {}",
            attached.join(", ")
        ));
    }

    narrator.step("Scaling db to 1: the highest ordinals go first, the claims stay");
    sets.patch("db", &Patch::Merge(json!({"spec": {"replicas": 1}})), &PostParams::default())?;
    wait_db(client, ns, 1)?;
    let claims = bound_claims(client, ns)?;
    narrator.ok(&format!("db-2 and db-1 deleted; db-0 runs; the claims are kept: {}", claims.join(", ")));
    Ok(())
}

/// The db pods in ordinal order, once exactly `count` are Running and Ready; with three or
/// more, each must have been created no earlier than the one before it became Ready.
fn wait_db(client: &Client, ns: &str, count: usize) -> Result<Vec<String>, Error> {
    let params = ListParams { label_selector: Some("app=db".into()), ..Default::default() };
    let mut pods = wait_for(&format!("{count} db pods Ready"), STEP_TIMEOUT, || {
        let (pods, _) = Api::<Pod>::namespaced(client, ns).list_all(&params)?;
        let ready = pods.iter().filter(is_pod_ready).count();
        Ok((pods.len() == count && ready == count).then_some(pods))
    })?;
    pods.sort_by_key(|p| p.metadata.name.clone());
    for pair in pods.windows(2) {
        let became_ready = ready_since(&pair[0]);
        let created = pair[1].metadata.creation_timestamp.as_ref().map(|t| t.0);
        if created < became_ready {
            return Err(Error::Step(format!(
                "{} was created before {} was Ready: not in order",
                name(&pair[1]),
                name(&pair[0])
            )));
        }
    }
    Ok(pods.iter().map(|p| name(p).to_string()).collect())
}

/// For each pod: its `data` claim's volume, provisioned by a CSI driver, and that volume's
/// VolumeAttachment to the pod's node, attached — as `<pod>: <volume> on <node>`.
fn wait_attached(client: &Client, ns: &str, pods: &[String]) -> Result<Vec<String>, Error> {
    wait_for("the db volumes attached", STEP_TIMEOUT, || {
        let attachments = Api::<VolumeAttachment>::cluster(client).list_all(&ListParams::default())?.0;
        let mut lines = Vec::new();
        for pod_name in pods {
            let pod = Api::<Pod>::namespaced(client, ns).get(pod_name)?;
            let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
            let claim = Api::<PersistentVolumeClaim>::namespaced(client, ns).get(&format!("data-{pod_name}"));
            let volume = claim?.spec.and_then(|s| s.volume_name).unwrap_or_default();
            if volume.is_empty() {
                return Ok(None);
            }
            let pv = Api::<PersistentVolume>::cluster(client).get(&volume)?;
            if pv.spec.and_then(|s| s.csi).is_none() {
                return Err(Error::Step(format!("volume {volume} is not a CSI volume")));
            }
            let attached = attachments.iter().any(|a| {
                a.spec.source.persistent_volume_name.as_deref() == Some(volume.as_str())
                    && a.spec.node_name == node
                    && a.status.as_ref().is_some_and(|s| s.attached)
            });
            if !attached {
                return Ok(None);
            }
            lines.push(format!("{pod_name}: {volume} on {node}"));
        }
        Ok(Some(lines))
    })
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// When the pod's Ready condition last became True.
fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready" && c.status == "True")?;
    ready.last_transition_time.as_ref().map(|t| t.0)
}

fn bound_claims(client: &Client, ns: &str) -> Result<Vec<String>, Error> {
    let (claims, _) = Api::<PersistentVolumeClaim>::namespaced(client, ns).list_all(&ListParams::default())?;
    Ok(claims
        .into_iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .filter_map(|c| c.metadata.name)
        .collect())
}
