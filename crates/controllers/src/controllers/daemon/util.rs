//! The pure part of the DaemonSet controller, after upstream's `pkg/controller/daemon/util`
//! (`AddOrUpdateDaemonPodTolerations`, `CreatePodTemplate`, `SurgeCount`, `UnavailableCount`,
//! `IsPodUpdated`, `ReplaceDaemonSetPodNodeNameNodeAffinity`, `GetTargetNodeName`),
//! `NodeShouldRunDaemonPod` with its `predicates`, and the node-affinity matching of
//! `k8s.io/component-helpers/scheduling/corev1/nodeaffinity` (`GetRequiredNodeAffinity(pod).Match`).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
    PodTemplateSpec, Taint, Toleration,
};

use super::Error;
use crate::apimachinery::intstr::scaled_value;
use crate::apimachinery::nodeaffinity::matches_required_node_affinity;
use crate::controllers::history::CONTROLLER_REVISION_HASH_LABEL;
use crate::controllers::nodeutil::{
    NO_EXECUTE, NO_SCHEDULE, TAINT_DISK_PRESSURE, TAINT_MEMORY_PRESSURE, TAINT_NETWORK_UNAVAILABLE, TAINT_NOT_READY,
    TAINT_PID_PRESSURE, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE, node_taints, tolerates,
};

/// `extensions.DaemonSetTemplateGenerationKey`: the label of pods made from a DaemonSet whose
/// deprecated `deprecated.daemonset.template.generation` annotation is set.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// `apps.DeprecatedTemplateGeneration`.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// The DaemonSet's spec (an empty one when unset).
pub fn spec(ds: &DaemonSet) -> &DaemonSetSpec {
    static EMPTY: std::sync::OnceLock<DaemonSetSpec> = std::sync::OnceLock::new();
    ds.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
}

/// `spec.template.spec` (an empty one when unset).
pub fn template_spec(ds: &DaemonSet) -> &PodSpec {
    static EMPTY: std::sync::OnceLock<PodSpec> = std::sync::OnceLock::new();
    spec(ds).template.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
}

/// `spec.minReadySeconds`.
pub fn min_ready_seconds(ds: &DaemonSet) -> i32 {
    spec(ds).min_ready_seconds.unwrap_or(0)
}

/// `spec.updateStrategy.type`, `RollingUpdate` when unset (the API server's default).
pub fn strategy_type(ds: &DaemonSet) -> &str {
    spec(ds).update_strategy.as_ref().and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate")
}

/// `GetTemplateGeneration`: the deprecated annotation, `Err` when it does not parse.
pub fn template_generation(ds: &DaemonSet) -> Result<Option<i64>, Error> {
    let Some(value) = ds.metadata.annotations.as_ref().and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION)) else {
        return Ok(None);
    };
    value.parse().map(Some).map_err(|source| Error::TemplateGeneration { value: value.clone(), source })
}

/// `AddOrUpdateTolerationInPodSpec`: replaces a toleration with the same key, operator, value
/// and effect, or appends it.
fn add_or_update_toleration(spec: &mut PodSpec, toleration: Toleration) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let same = |t: &Toleration| {
        t.key == toleration.key
            && t.operator == toleration.operator
            && t.value.as_deref().unwrap_or("") == toleration.value.as_deref().unwrap_or("")
            && t.effect == toleration.effect
    };
    match tolerations.iter_mut().find(|t| same(t)) {
        Some(existing) => *existing = toleration,
        None => tolerations.push(toleration),
    }
}

/// `AddOrUpdateDaemonPodTolerations`: daemon pods tolerate the node conditions' taints.
pub fn add_daemon_pod_tolerations(spec: &mut PodSpec) {
    let exists = |key: &str, effect: &str| Toleration {
        key: Some(key.to_string()),
        operator: Some("Exists".into()),
        effect: Some(effect.to_string()),
        ..Toleration::default()
    };
    add_or_update_toleration(spec, exists(TAINT_NOT_READY, NO_EXECUTE));
    add_or_update_toleration(spec, exists(TAINT_UNREACHABLE, NO_EXECUTE));
    add_or_update_toleration(spec, exists(TAINT_DISK_PRESSURE, NO_SCHEDULE));
    add_or_update_toleration(spec, exists(TAINT_MEMORY_PRESSURE, NO_SCHEDULE));
    add_or_update_toleration(spec, exists(TAINT_PID_PRESSURE, NO_SCHEDULE));
    add_or_update_toleration(spec, exists(TAINT_UNSCHEDULABLE, NO_SCHEDULE));
    if spec.host_network == Some(true) {
        add_or_update_toleration(spec, exists(TAINT_NETWORK_UNAVAILABLE, NO_SCHEDULE));
    }
}

/// `CreatePodTemplate`: the template with the daemon tolerations, the generation label (when
/// the deprecated annotation is set) and the `controller-revision-hash` label.
pub fn create_pod_template(template: &PodTemplateSpec, generation: Option<i64>, hash: &str) -> PodTemplateSpec {
    let mut template = template.clone();
    add_daemon_pod_tolerations(template.spec.get_or_insert_with(Default::default));
    let labels = template.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(BTreeMap::new);
    if let Some(generation) = generation {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), generation.to_string());
    }
    if !hash.is_empty() {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.to_string());
    }
    template
}

/// `SurgeCount`: `maxSurge` scaled to the nodes (rounded up); 0 unless rolling.
pub fn surge_count(ds: &DaemonSet, number_to_schedule: i32) -> Result<i32, Error> {
    if strategy_type(ds) != "RollingUpdate" {
        return Ok(0);
    }
    let rolling = spec(ds).update_strategy.as_ref().and_then(|s| s.rolling_update.as_ref());
    match rolling.and_then(|r| r.max_surge.as_ref()) {
        Some(value) => scaled_value(value, number_to_schedule, true).map_err(|e| Error::ScaledValue(e.into())),
        None => Ok(0),
    }
}

/// `UnavailableCount`: `maxUnavailable` scaled to the nodes (rounded up); 0 unless rolling.
pub fn unavailable_count(ds: &DaemonSet, number_to_schedule: i32) -> Result<i32, Error> {
    if strategy_type(ds) != "RollingUpdate" {
        return Ok(0);
    }
    let Some(rolling) = spec(ds).update_strategy.as_ref().and_then(|s| s.rolling_update.as_ref()) else {
        return Ok(0);
    };
    match rolling.max_unavailable.as_ref() {
        Some(value) => scaled_value(value, number_to_schedule, true).map_err(|e| Error::ScaledValue(e.into())),
        // A nil IntOrString scales to 0 (GetScaledValueFromIntOrPercent of nil).
        None => Ok(0),
    }
}

/// `AllowsSurge`.
pub fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1).is_ok_and(|n| n > 0)
}

/// `IsPodUpdated`: the pod carries the current hash, or the current template generation.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    let template_matches = generation.is_some_and(|g| label(TEMPLATE_GENERATION_LABEL) == Some(&g.to_string()));
    let hash_matches = !hash.is_empty() && label(CONTROLLER_REVISION_HASH_LABEL) == Some(hash);
    hash_matches || template_matches
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes the one term
/// `metadata.name In [node]`, so that the scheduler places the pod on that node.
pub fn replace_node_name_affinity(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(vec![node.to_string()]),
        }]),
        ..NodeSelectorTerm::default()
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity.node_affinity.get_or_insert_with(NodeAffinity::default);
    match node_affinity.required_during_scheduling_ignored_during_execution.as_mut() {
        Some(required) => required.node_selector_terms = vec![term],
        None => {
            node_affinity.required_during_scheduling_ignored_during_execution =
                Some(NodeSelector { node_selector_terms: vec![term] })
        }
    }
    affinity
}

/// `GetTargetNodeName`: the node a daemon pod is bound to, or meant for by its affinity.
pub fn target_node_name(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(node.to_string());
    }
    let required =
        spec.affinity.as_ref()?.node_affinity.as_ref()?.required_during_scheduling_ignored_during_execution.as_ref()?;
    for term in &required.node_selector_terms {
        for requirement in term.match_fields.iter().flatten() {
            if requirement.key == "metadata.name" && requirement.operator == "In" {
                return match requirement.values.as_deref() {
                    Some([value]) => Some(value.clone()),
                    _ => None,
                };
            }
        }
    }
    None
}

/// `NewPod`: the pod the DaemonSet would run on `node`, for the predicates.
fn new_pod_spec(ds: &DaemonSet, node: &str) -> PodSpec {
    let mut spec = template_spec(ds).clone();
    spec.node_name = Some(node.to_string());
    add_daemon_pod_tolerations(&mut spec);
    spec
}

/// `FindMatchingUntoleratedTaint`: whether a taint `filter` accepts is tolerated by none.
fn has_untolerated_taint(taints: &[Taint], tolerations: &[Toleration], filter: impl Fn(&Taint) -> bool) -> bool {
    taints.iter().filter(|t| filter(t)).any(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// `NodeShouldRunDaemonPod`: (should run, should continue running) of the DaemonSet on `node`.
pub fn node_should_run_daemon_pod(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    let name = node.metadata.name.as_deref().unwrap_or("");
    let wanted = template_spec(ds).node_name.as_deref().unwrap_or("");
    if !wanted.is_empty() && wanted != name {
        return (false, false);
    }
    let spec = new_pod_spec(ds, name);
    if !matches_required_node_affinity(&spec, node) {
        return (false, false);
    }
    let taints = node_taints(node);
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    if has_untolerated_taint(taints, tolerations, |t| t.effect == NO_EXECUTE || t.effect == NO_SCHEDULE) {
        // Scheduled daemon pods keep running unless a NoExecute taint is not tolerated.
        return (false, !has_untolerated_taint(taints, tolerations, |t| t.effect == NO_EXECUTE));
    }
    (true, true)
}

/// `podByCreationTimestampAndPhase`: scheduled pods first, then the oldest, then by name.
pub fn creation_order(a: &Pod, b: &Pod) -> Ordering {
    let scheduled = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    match (scheduled(a), scheduled(b)) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match created(a).cmp(&created(b)) {
        Ordering::Equal => a.metadata.name.cmp(&b.metadata.name),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ds(value: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({"metadata": {"name": "d", "namespace": "ns"}, "spec": value})).unwrap()
    }

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn daemon_pods_tolerate_node_conditions() {
        let mut spec = PodSpec::default();
        add_daemon_pod_tolerations(&mut spec);
        let keys: Vec<_> = spec.tolerations.iter().flatten().map(|t| t.key.clone().unwrap()).collect();
        assert_eq!(keys.len(), 6);
        assert!(keys.contains(&TAINT_UNSCHEDULABLE.to_string()) && !keys.contains(&TAINT_NETWORK_UNAVAILABLE.into()));
        let not_ready = &spec.tolerations.as_ref().unwrap()[0];
        assert_eq!((not_ready.effect.as_deref(), not_ready.toleration_seconds), (Some(NO_EXECUTE), None));
        // Idempotent, and host-network pods tolerate the network being unavailable.
        spec.host_network = Some(true);
        add_daemon_pod_tolerations(&mut spec);
        assert_eq!(spec.tolerations.as_ref().unwrap().len(), 7);
    }

    #[test]
    fn eligibility_follows_selector_affinity_and_taints() {
        let plain = ds(json!({"template": {"spec": {"containers": []}}}));
        let tainted =
            node(json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}));
        assert_eq!(node_should_run_daemon_pod(&tainted, &plain), (false, true));
        let evicting =
            node(json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}}));
        assert_eq!(node_should_run_daemon_pod(&evicting, &plain), (false, false));
        let tolerant = ds(json!({"template": {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}}));
        assert_eq!(node_should_run_daemon_pod(&tainted, &tolerant), (true, true));
        let cordoned = node(
            json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}]}}),
        );
        assert_eq!(node_should_run_daemon_pod(&cordoned, &plain), (true, true));
        let selecting = ds(json!({"template": {"spec": {"nodeSelector": {"role": "edge"}}}}));
        let edge = node(json!({"metadata": {"name": "n2", "labels": {"role": "edge"}}}));
        assert_eq!(node_should_run_daemon_pod(&edge, &selecting), (true, true));
        assert_eq!(node_should_run_daemon_pod(&node(json!({"metadata": {"name": "n3"}})), &selecting), (false, false));
        let affine = ds(
            json!({"template": {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["edge"]}]}]}}}}}}),
        );
        assert_eq!(node_should_run_daemon_pod(&edge, &affine), (false, false));
        let named = ds(json!({"template": {"spec": {"nodeName": "n3"}}}));
        assert_eq!(node_should_run_daemon_pod(&edge, &named), (false, false));
    }

    #[test]
    fn pods_are_pinned_to_their_node_by_affinity() {
        let affinity = replace_node_name_affinity(None, "n1");
        let pod =
            Pod { spec: Some(PodSpec { affinity: Some(affinity.clone()), ..PodSpec::default() }), ..Pod::default() };
        assert_eq!(target_node_name(&pod).as_deref(), Some("n1"));
        let moved = replace_node_name_affinity(Some(affinity), "n2");
        let terms = &moved.node_affinity.unwrap().required_during_scheduling_ignored_during_execution.unwrap();
        assert_eq!(terms.node_selector_terms.len(), 1);
        assert_eq!(terms.node_selector_terms[0].match_fields.as_ref().unwrap()[0].values, Some(vec!["n2".into()]));
    }

    #[test]
    fn surge_and_unavailable_scale_up() {
        let rolling = |surge: serde_json::Value, unavailable: serde_json::Value| {
            ds(
                json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}),
            )
        };
        let d = rolling(json!("10%"), json!(0));
        assert_eq!((surge_count(&d, 3).unwrap(), unavailable_count(&d, 3).unwrap()), (1, 0));
        assert!(allows_surge(&d));
        let d = rolling(json!(0), json!("50%"));
        assert_eq!((surge_count(&d, 3).unwrap(), unavailable_count(&d, 3).unwrap()), (0, 2));
        assert!(!allows_surge(&d));
        let on_delete = ds(json!({"updateStrategy": {"type": "OnDelete"}}));
        assert_eq!((surge_count(&on_delete, 3).unwrap(), unavailable_count(&on_delete, 3).unwrap()), (0, 0));
    }

    #[test]
    fn templates_carry_the_hash_and_updated_pods_are_recognised() {
        let template: PodTemplateSpec = serde_json::from_value(json!({"metadata": {"labels": {"app": "a"}}})).unwrap();
        let made = create_pod_template(&template, Some(3), "abc");
        let labels = made.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels.get(CONTROLLER_REVISION_HASH_LABEL).map(String::as_str), Some("abc"));
        assert_eq!(labels.get(TEMPLATE_GENERATION_LABEL).map(String::as_str), Some("3"));
        let pod = Pod { metadata: made.metadata.unwrap(), ..Pod::default() };
        assert!(is_pod_updated(&pod, "abc", None));
        assert!(is_pod_updated(&pod, "other", Some(3)));
        assert!(!is_pod_updated(&pod, "other", Some(4)));
        assert!(!is_pod_updated(&pod, "", None));
    }
}
