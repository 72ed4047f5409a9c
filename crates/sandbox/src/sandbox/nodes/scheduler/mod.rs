//! The simulated kube-scheduler's pass (`schedule_one.go`): pending pods of `default-scheduler`
//! in the scheduling queue's order, each placed counting the pods placed before it, then bound
//! with a Binding or marked PodScheduled=False with kube-scheduler's message. Which nodes a pod
//! fits is decided by the filter [`plugins`], which do no I/O.

mod plugins;

pub(super) use plugins::{NODE_PORTS_REASON, host_ports_taken};

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Binding, ObjectReference, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use self::plugins::{Candidate, Load, Placement};
use super::{Worker, is_terminal, log_error, namespace_and_name, node, uid_of};
use crate::apimachinery;
use crate::client::{Api, Client, Error, Patch, PostParams};
use crate::runtime::slow_start::map_concurrently;

/// kube-scheduler's pod back-off after a failed attempt: initial and longest.
const BIND_BACK_OFF_INITIAL: Duration = Duration::from_secs(1);
const BIND_BACK_OFF_MAX: Duration = Duration::from_secs(10);

/// How long a pod waits after its `attempts`-th failed Binding.
fn bind_back_off(attempts: u32) -> Duration {
    BIND_BACK_OFF_INITIAL.saturating_mul(1 << attempts.saturating_sub(1).min(8)).min(BIND_BACK_OFF_MAX)
}

/// The most pods one scheduling pass places; the rest wait for the next tick, in queue order.
const PODS_PER_PASS: usize = 256;

/// How many Bindings are POSTed at once (kube-scheduler runs each binding cycle in its own
/// goroutine, beside the scheduling of the next pods).
const CONCURRENT_BINDINGS: usize = 16;

/// The node the scheduler chose for a delayed claim.
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

impl Worker {
    /// Binds every pending pod it can; marks the others unschedulable.
    pub(super) fn schedule(&mut self) {
        self.bind_waiting_for_volumes();
        let now = Instant::now();
        // The scheduling queue's order: higher priority first, then older first. Only the
        // queue's head is copied out: a scale test has tens of thousands of pending pods.
        let mut queue: Vec<(Reverse<i32>, Option<jiff::Timestamp>, &str, &str)> = self
            .pods
            .values()
            .filter(|p| {
                needs_scheduling(p)
                    && !self.assumed.contains_key(uid_of(p))
                    && self.bind_back_off.get(uid_of(p)).is_none_or(|(_, until)| now >= *until)
                    && !self.volume_waits.contains_key(uid_of(p))
            })
            .map(|p| {
                let priority = p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
                let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let (namespace, name) = namespace_and_name(p);
                (Reverse(priority), created, namespace, name)
            })
            .collect();
        queue.sort();
        let queue: Vec<(String, String)> =
            queue.into_iter().map(|(_, _, namespace, name)| (namespace.to_string(), name.to_string())).collect();
        // kube-scheduler takes pods one at a time; a pass here places a batch, so that a burst
        // of thousands of pending pods (a scale test's) costs a batch times the nodes' pods per
        // tick rather than every pending pod times them.
        let mut pending = Vec::new();
        for (namespace, name) in queue {
            if pending.len() == PODS_PER_PASS {
                break;
            }
            let Some(pod) = self.pods.get(&namespace, &name).cloned() else { continue };
            if self.prefilter_volumes(&pod) {
                pending.push(pod);
            }
        }
        if pending.is_empty() {
            return;
        }
        let decisions = self.decide(&pending);
        let mut placed = Vec::new();
        for (pod, placement) in pending.into_iter().zip(decisions) {
            if self.stopping() {
                return;
            }
            match placement {
                Placement::Node(node) if !self.waits_for_volumes(&pod, &node) => placed.push((pod, node)),
                Placement::Node(_) => {}
                Placement::Unschedulable(message) => self.mark_unschedulable(&pod, &message),
            }
        }
        let client = self.shared.client.clone();
        let bound = map_concurrently(&placed, CONCURRENT_BINDINGS, |(pod, node)| post_binding(&client, pod, node));
        for ((pod, node), result) in placed.iter().zip(bound) {
            self.count_binding(pod, node, result);
        }
    }

    /// Places the pending pods one after the other, each counting on the nodes the ones
    /// placed before it.
    fn decide(&self, pending: &[Pod]) -> Vec<Placement> {
        let alive = self.alive_nodes();
        let mut loads: HashMap<&str, Load> = HashMap::new();
        // An assumption the watch already confirmed is counted once, from the watch.
        let confirmed: HashSet<&str> = self
            .pods
            .values()
            .filter(|p| !p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default().is_empty())
            .map(uid_of)
            .collect();
        let assumed = self.assumed.iter().filter(|(uid, _)| !confirmed.contains(uid.as_str())).map(|(_, (p, _))| p);
        for pod in self.pods.values().chain(assumed) {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
            if !node.is_empty() && !is_terminal(apimachinery::pod::phase(pod)) {
                loads.entry(node).or_default().add(pod);
            }
        }
        let mut candidates: Vec<Candidate<'_>> = self
            .nodes
            .values()
            .map(|node| {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                Candidate::new(node, alive.contains(name), loads.remove(name).unwrap_or_default())
            })
            .collect();
        let mut decisions = Vec::with_capacity(pending.len());
        for pod in pending {
            match plugins::choose(pod, &candidates, self.options.strict_not_ready_taint) {
                Ok(i) => {
                    candidates[i].load.add(pod);
                    decisions.push(Placement::Node(candidates[i].node.metadata.name.clone().unwrap_or_default()));
                }
                Err(plugins::FitError(message)) => decisions.push(Placement::Unschedulable(message)),
            }
        }
        decisions
    }

    /// VolumeBinding's PreFilter: a pod with a missing claim or an unbound Immediate claim is
    /// unschedulable; one whose delayed claim already has a selected node waits for its volumes
    /// on that node. Whether the pod goes on to placement.
    fn prefilter_volumes(&mut self, pod: &Pod) -> bool {
        match self.pod_claims(pod) {
            Err(reason) => {
                let nodes = self.nodes.values().count();
                let message = format!(
                    "0/{nodes} nodes are available: {reason}. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
                );
                self.mark_unschedulable(pod, &message);
                false
            }
            Ok(delayed) => {
                let selected =
                    delayed.iter().find_map(|c| c.metadata.annotations.as_ref()?.get(SELECTED_NODE).cloned());
                match selected {
                    Some(node) => {
                        self.volume_waits.insert(uid_of(pod).to_string(), node);
                        false
                    }
                    None => true,
                }
            }
        }
    }

    /// Binds the pod, or first hands its unbound delayed claims to the node
    /// (`volume.kubernetes.io/selected-node`, VolumeBinding's PreBind) and waits for them.
    fn waits_for_volumes(&mut self, pod: &Pod, node: &str) -> bool {
        let delayed = self.pod_claims(pod).unwrap_or_default();
        if delayed.is_empty() {
            return false;
        }
        for claim in &delayed {
            let (namespace, name) =
                (claim.metadata.namespace.as_deref().unwrap_or(""), claim.metadata.name.as_deref().unwrap_or(""));
            let patch = json!({"metadata": {"annotations": {SELECTED_NODE: node}}});
            let api = Api::<PersistentVolumeClaim>::namespaced(&self.shared.client, namespace);
            match api.patch(name, &Patch::Merge(patch), &PostParams::default()) {
                Ok(updated) => self.claims.observe(updated),
                Err(e) => {
                    log_error(&format!("scheduler: cannot select node {node} for claim {namespace}/{name}"), &e);
                    return true;
                }
            }
        }
        log::debug!("scheduler: pod {} waits for its volumes on {node}", uid_of(pod));
        self.volume_waits.insert(uid_of(pod).to_string(), node.to_string());
        true
    }

    /// Binds the pods waiting for volumes whose claims are all bound now; forgets those gone.
    fn bind_waiting_for_volumes(&mut self) {
        let waits: Vec<(String, String)> = self.volume_waits.iter().map(|(u, n)| (u.clone(), n.clone())).collect();
        for (uid, node) in waits {
            let pod = self.pods.values().find(|p| uid_of(p) == uid).cloned();
            match pod.filter(needs_scheduling) {
                None => {
                    self.volume_waits.remove(&uid);
                }
                Some(pod) => {
                    if self.pod_claims(&pod).is_ok_and(|delayed| delayed.is_empty()) {
                        self.volume_waits.remove(&uid);
                        let result = post_binding(&self.shared.client, &pod, &node);
                        self.count_binding(&pod, &node, result);
                    }
                }
            }
        }
    }

    /// After the pod's Binding was POSTed: the scheduler counts the pod on the node until the
    /// watch shows it bound, or backs off.
    fn count_binding(&mut self, pod: &Pod, node: &str, result: Result<(), Error>) {
        let (namespace, name) = namespace_and_name(pod);
        match result {
            Ok(()) => {
                log::debug!("scheduler: bound pod {namespace}/{name} to {node}");
                let mut bound = pod.clone();
                bound.spec.get_or_insert_default().node_name = Some(node.to_string());
                self.assumed.insert(uid_of(pod).to_string(), (bound, Instant::now()));
                self.bind_back_off.remove(uid_of(pod));
            }
            Err(e) => {
                let attempts = self.bind_back_off.get(uid_of(pod)).map_or(0, |(n, _)| *n) + 1;
                let wait = bind_back_off(attempts);
                self.bind_back_off.insert(uid_of(pod).to_string(), (attempts, Instant::now() + wait));
                log_error(
                    &format!("scheduler: cannot bind pod {namespace}/{name} to {node} (next try in {wait:?})"),
                    &e,
                )
            }
        }
    }

    /// Sets PodScheduled=False (reason Unschedulable) with the scheduler's message, if the pod
    /// does not say so already.
    fn mark_unschedulable(&mut self, pod: &Pod, message: &str) {
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        let current = conditions.iter().find(|c| c.type_ == "PodScheduled");
        if current.is_some_and(|c| {
            c.status == "False" && c.reason.as_deref() == Some("Unschedulable") && c.message.as_deref() == Some(message)
        }) {
            return;
        }
        let transition = match current {
            Some(c) if c.status == "False" => {
                c.last_transition_time.as_ref().map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            }
            _ => None,
        };
        let condition = json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
            "lastProbeTime": null, "lastTransitionTime": transition.unwrap_or_else(node::now)});
        let mut list: Vec<Value> = conditions
            .iter()
            .map(|c| {
                if c.type_ == "PodScheduled" { condition.clone() } else { serde_json::to_value(c).unwrap_or_default() }
            })
            .collect();
        if current.is_none() {
            list.push(condition);
        }
        let patch =
            json!({"metadata": {"resourceVersion": pod.metadata.resource_version}, "status": {"conditions": list}});
        let (namespace, name) = namespace_and_name(pod);
        match Api::<Pod>::namespaced(&self.shared.client, namespace).patch_status(
            name,
            &Patch::Merge(patch),
            &PostParams::default(),
        ) {
            Ok(updated) => {
                log::debug!("scheduler: pod {namespace}/{name} is unschedulable: {message}");
                self.pods.observe(updated);
            }
            Err(e) => log_error(&format!("scheduler: cannot update pod {namespace}/{name}"), &e),
        }
    }
}

/// POSTs the pod's Binding to `node`.
fn post_binding(client: &Client, pod: &Pod, node: &str) -> Result<(), Error> {
    let (namespace, name) = namespace_and_name(pod);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: pod.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    };
    let api = Api::<Pod>::namespaced(client, namespace);
    api.create_subresource::<_, Value>("binding", name, &binding, &PostParams::default()).map(|_| ())
}

/// A pending pod for the default scheduler: unbound, not being deleted, not gated.
fn needs_scheduling(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    spec.node_name.as_deref().unwrap_or_default().is_empty()
        && matches!(spec.scheduler_name.as_deref(), None | Some("") | Some("default-scheduler"))
        && spec.scheduling_gates.as_ref().is_none_or(|g| g.is_empty())
        && pod.metadata.deletion_timestamp.is_none()
        && !is_terminal(apimachinery::pod::phase(pod))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_bindings_back_off_as_kube_scheduler_does() {
        let waits: Vec<u64> = (1..=6).map(|n| bind_back_off(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        assert_eq!(bind_back_off(u32::MAX), BIND_BACK_OFF_MAX);
    }
}
