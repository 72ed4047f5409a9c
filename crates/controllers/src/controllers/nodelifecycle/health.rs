//! Judging a node's health from its Ready condition heartbeat and its Lease, after upstream's
//! `tryUpdateNodeHealth` and `nodeHealthData`: the controller remembers when *it* saw each
//! heartbeat change (the probe timestamp, on its own clock) rather than trusting the times the
//! kubelet wrote, and past the grace period marks the kubelet's conditions Unknown.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::controllers::nodeutil::node_condition;

/// The namespace of the nodes' Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The conditions set to Unknown when the kubelet stops posting; NetworkUnavailable is left
/// alone, as it is managed on the control plane level.
const KUBELET_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// `nodeHealthData`: what the controller last saw of a node, and when (its own clock).
#[derive(Debug, Clone)]
pub struct NodeHealth {
    /// `probeTimestamp`: when the node last showed it is alive (a new heartbeat or Lease renewal).
    pub probe_timestamp: Timestamp,
    /// `readyTransitionTimestamp`: when the controller saw the Ready condition last transition.
    pub ready_transition_timestamp: Timestamp,
    /// The node status last seen.
    pub status: Option<NodeStatus>,
    /// The node's Lease as last seen renewed.
    pub lease: Option<Lease>,
}

impl NodeHealth {
    fn fresh(status: Option<NodeStatus>, now: Timestamp) -> NodeHealth {
        NodeHealth { probe_timestamp: now, ready_transition_timestamp: now, status, lease: None }
    }
}

/// The outcome of [`judge`].
#[derive(Debug)]
pub struct Judgement {
    /// What to remember of the node, unless the status write below succeeds.
    pub health: NodeHealth,
    /// The grace period applied: `startup` for a node that never posted Ready, else `monitor`.
    pub grace_period: Duration,
    /// The Ready condition as the node had it (a made-up Unknown one if it never posted).
    pub observed_ready: NodeCondition,
    /// The Ready condition after this judgement.
    pub current_ready: Option<NodeCondition>,
    /// The node's status was changed (conditions marked Unknown) and must be written.
    pub write_status: bool,
}

/// The grace periods of the judgement.
#[derive(Debug, Clone, Copy)]
pub struct GracePeriods {
    /// `--node-startup-grace-period`: for a node whose kubelet never posted a Ready condition.
    pub startup: Duration,
    /// `--node-monitor-grace-period`.
    pub monitor: Duration,
}

/// `tryUpdateNodeHealth` without the write: updates `saved` with what `node` and its `lease`
/// show at `now`, and, past the grace period since the last probe, marks the kubelet's
/// conditions of `node` Unknown.
pub fn judge(
    node: &mut Node,
    saved: Option<NodeHealth>,
    lease: Option<&Lease>,
    now: Timestamp,
    grace: GracePeriods,
) -> Judgement {
    let created = node.metadata.creation_timestamp.clone().map_or(Timestamp::UNIX_EPOCH, |t| t.0);
    let current_ready = node_condition(node.status.as_ref(), "Ready").cloned();
    // Whether the remembered status is the node's own (upstream keeps a pointer to it, so
    // the Unknown marking below shows in it too).
    let mut tracks_node = false;
    let (observed_ready, grace_period, mut health) = match &current_ready {
        None => {
            let observed = NodeCondition {
                type_: "Ready".into(),
                status: "Unknown".into(),
                last_heartbeat_time: Some(Time(created)),
                last_transition_time: Some(Time(created)),
                ..NodeCondition::default()
            };
            tracks_node = true;
            let health = match saved {
                Some(saved) => NodeHealth { status: node.status.clone(), ..saved },
                None => NodeHealth {
                    probe_timestamp: created,
                    ready_transition_timestamp: created,
                    status: node.status.clone(),
                    lease: None,
                },
            };
            (observed, grace.startup, Some(health))
        }
        Some(ready) => (ready.clone(), grace.monitor, saved),
    };
    let saved_ready = health.as_ref().and_then(|h| node_condition(h.status.as_ref(), "Ready").cloned());
    // The remembered Lease (if any) and its renewal time (if set).
    let saved_lease_renewal = health.as_ref().and_then(|h| h.lease.as_ref()).map(|l| renew_time(Some(l)));
    let mut health = match (health.take(), &saved_ready, &current_ready) {
        (None, _, _) => {
            log::info!("missing timestamp for Node {}; assuming now as a timestamp", name_of(node));
            tracks_node = true;
            NodeHealth::fresh(node.status.clone(), now)
        }
        (Some(_), None, Some(_)) => {
            log::debug!("creating timestamp entry for newly observed Node {}", name_of(node));
            tracks_node = true;
            NodeHealth::fresh(node.status.clone(), now)
        }
        (Some(_), Some(_), None) => {
            log::error!("ReadyCondition was removed from Status of Node {}", name_of(node));
            tracks_node = true;
            NodeHealth::fresh(node.status.clone(), now)
        }
        (Some(health), Some(saved), Some(current)) if saved.last_heartbeat_time != current.last_heartbeat_time => {
            let transition = if saved.last_transition_time != current.last_transition_time {
                log::debug!("ReadyCondition for Node {} transitioned", name_of(node));
                now
            } else {
                health.ready_transition_timestamp
            };
            tracks_node = true;
            NodeHealth { ready_transition_timestamp: transition, ..NodeHealth::fresh(node.status.clone(), now) }
        }
        (Some(health), _, _) => health,
    };
    // A renewed Lease always counts as a probe, even from a kubelet that never posted status.
    if let Some(observed) = lease {
        let renewed = match &saved_lease_renewal {
            None => true,
            Some(saved) => matches!((saved, renew_time(Some(observed))), (Some(a), Some(b)) if *a < b),
        };
        if renewed {
            health.lease = Some(observed.clone());
            health.probe_timestamp = now;
        }
    }
    let mut current_ready = current_ready;
    let mut write_status = false;
    if now > after(health.probe_timestamp, grace_period) {
        mark_unknown(node, created, now, health.probe_timestamp);
        current_ready = node_condition(node.status.as_ref(), "Ready").cloned();
        write_status = current_ready.as_ref() != Some(&observed_ready);
    }
    if tracks_node {
        health.status = node.status.clone();
    }
    Judgement { health, grace_period, observed_ready, current_ready, write_status }
}

/// Sets the kubelet's conditions Unknown: `NodeStatusNeverUpdated` for the ones it never
/// posted, `NodeStatusUnknown` for the others (their transition time now, heartbeat kept).
fn mark_unknown(node: &mut Node, created: Timestamp, now: Timestamp, probed: Timestamp) {
    let name = name_of(node).to_string();
    let conditions = node.status.get_or_insert_with(NodeStatus::default).conditions.get_or_insert_with(Vec::new);
    for kind in KUBELET_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == kind) {
            None => {
                log::debug!("condition {kind} of node {name} was never updated by kubelet");
                conditions.push(NodeCondition {
                    type_: kind.into(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusNeverUpdated".into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: Some(Time(created)),
                    last_transition_time: Some(Time(now)),
                });
            }
            Some(condition) => {
                log::debug!("node {name} hasn't been updated for {}s ({kind})", now.duration_since(probed).as_secs());
                if condition.status != "Unknown" {
                    condition.status = "Unknown".into();
                    condition.reason = Some("NodeStatusUnknown".into());
                    condition.message = Some("Kubelet stopped posting node status.".into());
                    condition.last_transition_time = Some(Time(now));
                }
            }
        }
    }
}

fn renew_time(lease: Option<&Lease>) -> Option<Timestamp> {
    lease?.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

/// `t + period`, saturating.
pub fn after(t: Timestamp, period: Duration) -> Timestamp {
    let period = SignedDuration::try_from(period).unwrap_or(SignedDuration::MAX);
    t.checked_add(period).unwrap_or(Timestamp::MAX)
}

fn name_of(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use serde_json::{Value, json};

    const GRACE: GracePeriods = GracePeriods { startup: Duration::from_secs(60), monitor: Duration::from_secs(50) };

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("a time")
    }

    fn text(t: Timestamp) -> String {
        t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    /// A node created at 0 with a Ready condition `ready` (heartbeat at `beat`), or none.
    fn node(ready: Option<(&str, i64)>) -> Node {
        let mut value = json!({"metadata": {"name": "n1", "creationTimestamp": text(at(0))}, "status": {}});
        if let Some((status, beat)) = ready {
            let condition = |kind: &str, s: &str| {
                json!({"type": kind, "status": s, "reason": "Kubelet", "lastHeartbeatTime": text(at(beat)),
                    "lastTransitionTime": text(at(0))})
            };
            value["status"]["conditions"] = Value::Array(vec![
                condition("MemoryPressure", "False"),
                condition("Ready", status),
                condition("NetworkUnavailable", "False"),
            ]);
        }
        serde_json::from_value(value).expect("a Node")
    }

    fn lease(renewed: i64) -> Lease {
        let mut lease = Lease::default();
        lease.spec.get_or_insert_default().renew_time = Some(MicroTime(at(renewed)));
        lease
    }

    fn condition<'a>(node: &'a Node, kind: &str) -> &'a NodeCondition {
        node_condition(node.status.as_ref(), kind).expect("the condition")
    }

    #[test]
    fn a_healthy_node_is_left_alone_while_its_heartbeat_changes() {
        let mut n = node(Some(("True", 0)));
        let first = judge(&mut n, None, None, at(10), GRACE);
        assert!(!first.write_status);
        assert_eq!(first.health.probe_timestamp, at(10), "first seen: probed now");
        // 45 s later the heartbeat moved: probed again.
        let mut n = node(Some(("True", 40)));
        let second = judge(&mut n, Some(first.health), None, at(55), GRACE);
        assert_eq!(second.health.probe_timestamp, at(55));
        // No heartbeat for 50 s after that is still within the grace period…
        let mut n = node(Some(("True", 40)));
        let third = judge(&mut n, Some(second.health), None, at(105), GRACE);
        assert!(!third.write_status);
        // …but not a second later.
        let mut n = node(Some(("True", 40)));
        let fourth = judge(&mut n, Some(third.health), None, at(106), GRACE);
        assert!(fourth.write_status);
        assert_eq!(fourth.observed_ready.status, "True");
        let ready = condition(&n, "Ready");
        assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("Unknown", Some("NodeStatusUnknown")));
        assert_eq!(ready.message.as_deref(), Some("Kubelet stopped posting node status."));
        assert_eq!(ready.last_transition_time, Some(Time(at(106))));
        assert_eq!(ready.last_heartbeat_time, Some(Time(at(40))), "the heartbeat is kept");
        assert_eq!(condition(&n, "MemoryPressure").status, "Unknown");
        assert_eq!(condition(&n, "DiskPressure").reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(condition(&n, "PIDPressure").message.as_deref(), Some("Kubelet never posted node status."));
        assert_eq!(condition(&n, "NetworkUnavailable").status, "False", "not the kubelet's");
        assert_eq!(fourth.current_ready.map(|c| c.status), Some("Unknown".into()));
    }

    #[test]
    fn lease_renewals_keep_a_silent_node_healthy() {
        let mut n = node(Some(("True", 0)));
        let mut health = judge(&mut n, None, Some(&lease(0)), at(0), GRACE).health;
        for t in (10..=200).step_by(10) {
            let mut n = node(Some(("True", 0)));
            let judgement = judge(&mut n, Some(health), Some(&lease(t)), at(t), GRACE);
            assert!(!judgement.write_status, "at {t}");
            health = judgement.health;
        }
        // The lease stops being renewed: Unknown once the grace period passed.
        let mut n = node(Some(("True", 0)));
        let judgement = judge(&mut n, Some(health.clone()), Some(&lease(200)), at(250), GRACE);
        assert!(!judgement.write_status);
        let judgement = judge(&mut n, Some(health), Some(&lease(200)), at(251), GRACE);
        assert!(judgement.write_status);
    }

    #[test]
    fn a_node_that_never_posted_gets_the_startup_grace_period_from_its_creation() {
        let mut n = node(None);
        let judgement = judge(&mut n, None, None, at(60), GRACE);
        assert!(!judgement.write_status);
        assert_eq!(judgement.grace_period, GRACE.startup);
        let mut n = node(None);
        let judgement = judge(&mut n, Some(judgement.health), None, at(61), GRACE);
        assert!(judgement.write_status);
        let ready = condition(&n, "Ready");
        assert_eq!(ready.reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(ready.last_heartbeat_time, Some(Time(at(0))));
        assert_eq!(judgement.observed_ready.status, "Unknown");
        assert_eq!(judgement.health.status, n.status, "the remembered status is the marked one");
    }

    #[test]
    fn an_unknown_node_is_not_written_again() {
        let mut n = node(Some(("Unknown", 0)));
        let health = NodeHealth::fresh(n.status.clone(), at(0));
        let judgement = judge(&mut n, Some(health), None, at(500), GRACE);
        assert!(!judgement.write_status, "already Unknown");
    }

    #[test]
    fn a_ready_transition_moves_the_transition_timestamp() {
        let mut n = node(Some(("True", 0)));
        let health = judge(&mut n, None, None, at(0), GRACE).health;
        let mut n = node(Some(("False", 10)));
        let conditions = n.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions");
        conditions[1].last_transition_time = Some(Time(at(10)));
        let judgement = judge(&mut n, Some(health), None, at(12), GRACE);
        assert_eq!(judgement.health.ready_transition_timestamp, at(12));
        assert_eq!(judgement.current_ready.map(|c| c.status), Some("False".into()));
    }
}
