//! The disruption-controller on both backends: PodDisruptionBudgets over a Deployment (numbers,
//! percentages rounded up, `maxUnavailable`), over bare pods with evictions through the Eviction
//! API (allowed, then 429; `disruptedPods` recorded and cleared, and an entry whose pod was not
//! deleted expiring), over a StatefulSet, over a custom resource's `/scale` (real server only),
//! budgets without pods or controllers (Events, `SyncFailed`), and the reset of a stale
//! `DisruptionTarget` condition. The controller runs with short timeouts (its `Config`):
//! `disruptedPods` entries expire after 8 s, `DisruptionTarget` conditions after 3 s.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcm::app::controllers::named;
use kcm::app::flags::Options;
use kcm::client::{Api, Patch, PostParams};
use kcm::controllers::disruption;
use kcm::runtime::controller::{Controller, ControllerContext};
use serde_json::{Value, json};

use crate::harness;

use harness::widgets::{self, Widget};
use harness::{Backend, Cluster, eventually, from};

const DELETION_TIMEOUT: Duration = Duration::from_secs(8);
const STALE_TIMEOUT: Duration = Duration::from_secs(3);

/// The controller with short timeouts.
fn fast_disruption(
    context: &ControllerContext<'_>,
    _: &Options,
) -> Result<Controller, kcm::apimachinery::errors::BoxError> {
    Ok(disruption::new(
        context,
        disruption::Config { deletion_timeout: DELETION_TIMEOUT, stale_pod_disruption_timeout: STALE_TIMEOUT },
    ))
}

fn controllers(others: &[&str]) -> Vec<kcm::app::controllers::ControllerDescriptor> {
    let mut all = vec![named("disruption-controller").started_by(fast_disruption)];
    all.extend(others.iter().map(|name| named(name)));
    all
}

fn budget(name: &str, app: &str, spec: Value) -> PodDisruptionBudget {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn pod(name: &str, app: &str, owner: Option<Value>) -> Pod {
    from(json!({"metadata": {"name": name, "labels": {"app": app}, "ownerReferences": owner.map(|o| vec![o])},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}))
}

/// (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed) once observed.
type Counts = (i32, i32, i32, i32);

/// This module's helpers on the harness's `Cluster` (a trait: the modules share one binary).
trait ClusterExt {
    fn pdbs(&self) -> Api<PodDisruptionBudget>;
    fn pods(&self) -> Api<Pod>;
    fn wait_counts(&self, name: &str, counts: Counts) -> PodDisruptionBudget;
    fn wait_condition(&self, name: &str, status: &str, reason: &str, message: &str) -> PodDisruptionBudget;
    fn wait_event(&self, name: &str, reason: &str, message: &str);
    fn wait_pods_ready(&self, app: &str, count: usize);
    fn evict(&self, name: &str) -> Result<Value, kcm::client::Error>;
}

impl ClusterExt for Cluster {
    fn pdbs(&self) -> Api<PodDisruptionBudget> {
        self.api()
    }

    fn pods(&self) -> Api<Pod> {
        self.api()
    }

    /// Waits for the budget's status to show `counts` for its current generation, with the
    /// `DisruptionAllowed` condition that goes with them.
    fn wait_counts(&self, name: &str, counts: Counts) -> PodDisruptionBudget {
        eventually(&format!("{name}: {counts:?}"), || {
            let pdb = self.pdbs().get(name).ok()?;
            let status = pdb.status.clone()?;
            let seen =
                (status.expected_pods, status.desired_healthy, status.current_healthy, status.disruptions_allowed);
            let seen = (seen.0.unwrap_or(0), seen.1.unwrap_or(0), seen.2.unwrap_or(0), seen.3.unwrap_or(0));
            let condition = status.conditions.iter().flatten().find(|c| c.type_ == "DisruptionAllowed")?;
            let reason = if counts.3 > 0 { ("True", "SufficientPods") } else { ("False", "InsufficientPods") };
            (seen == counts
                && status.observed_generation == pdb.metadata.generation
                && (condition.status.as_str(), condition.reason.as_str()) == reason
                && condition.observed_generation == pdb.metadata.generation)
                .then_some(pdb)
        })
    }

    fn wait_condition(&self, name: &str, status: &str, reason: &str, message: &str) -> PodDisruptionBudget {
        eventually(&format!("{name}: {status} {reason} {message}"), || {
            let pdb = self.pdbs().get(name).ok()?;
            let conditions = pdb.status.as_ref()?.conditions.clone()?;
            let found = conditions.iter().any(|c| {
                c.type_ == "DisruptionAllowed" && c.status == status && c.reason == reason && c.message == message
            });
            found.then_some(pdb)
        })
    }

    fn wait_event(&self, name: &str, reason: &str, message: &str) {
        eventually(&format!("{reason} on {name}: {message}"), || {
            self.event_messages("default", name, reason).iter().any(|m| m == message).then_some(())
        });
    }

    fn wait_pods_ready(&self, app: &str, count: usize) {
        eventually(&format!("{count} ready pods app={app}"), || {
            let params = kcm::client::ListParams { label_selector: Some(format!("app={app}")), ..Default::default() };
            let pods = self.pods().list(&params).ok()?.items;
            let ready = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && kcm::apimachinery::pod::is_pod_ready(p));
            (ready.count() == count && pods.len() == count).then_some(())
        });
    }

    fn evict(&self, name: &str) -> Result<Value, kcm::client::Error> {
        let eviction =
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
        self.pods().create_subresource("eviction", name, &eviction, &PostParams::default())
    }
}

/// Changes a budget's spec (its generation goes up).
fn set_spec(cluster: &Cluster, name: &str, spec: Value) {
    let patch = Patch::Merge(json!({"spec": spec}));
    cluster.pdbs().patch(name, &patch, &PostParams::default()).expect("budget patched");
}

on_both_backends!(a_budget_over_a_deployment_follows_its_spec);
fn a_budget_over_a_deployment_follows_its_spec(backend: Backend) {
    let cluster = harness::with(&controllers(&["deployment-controller", "replicaset-controller"])).on(backend).start();
    cluster.api::<Deployment>().create(&harness::nginx_deployment("web", 4), &PostParams::default()).expect("created");
    cluster.wait_pods_ready("web", 4);
    cluster.pdbs().create(&budget("web", "web", json!({"minAvailable": 2})), &PostParams::default()).expect("created");
    // A number counts the pods.
    let pdb = cluster.wait_counts("web", (4, 2, 4, 2));
    assert_eq!(pdb.status.as_ref().and_then(|s| s.disrupted_pods.clone()), None);
    // A percentage counts the Deployment's replicas: 60% of 4 is 2.4, rounded up.
    set_spec(&cluster, "web", json!({"minAvailable": "60%"}));
    cluster.wait_counts("web", (4, 3, 4, 1));
    set_spec(&cluster, "web", json!({"minAvailable": null, "maxUnavailable": 1}));
    cluster.wait_counts("web", (4, 3, 4, 1));
    // 30% of 4 unavailable is 1.2, rounded up to 2.
    set_spec(&cluster, "web", json!({"maxUnavailable": "30%"}));
    cluster.wait_counts("web", (4, 2, 4, 2));
    // The Deployment's scale, not its pods, is what is expected.
    let scale = Patch::Merge(json!({"spec": {"replicas": 6}}));
    cluster.api::<Deployment>().patch("web", &scale, &PostParams::default()).expect("scaled");
    cluster.wait_pods_ready("web", 6);
    cluster.wait_counts("web", (6, 4, 6, 2));
}

on_both_backends!(evictions_follow_the_budget);
fn evictions_follow_the_budget(backend: Backend) {
    let cluster = harness::with(&controllers(&[])).on(backend).start();
    for name in ["a", "b", "c"] {
        cluster.pods().create(&pod(name, "db", None), &PostParams::default()).expect("pod created");
    }
    cluster.wait_pods_ready("db", 3);
    cluster.pdbs().create(&budget("db", "db", json!({"minAvailable": 2})), &PostParams::default()).expect("created");
    cluster.wait_counts("db", (3, 2, 3, 1));

    cluster.evict("a").expect("one eviction is allowed");
    let refused = cluster.evict("b").expect_err("the budget allows no more");
    assert!(refused.is_too_many_requests(), "429: {refused}");
    // The pod is gone, its entry in disruptedPods with it.
    eventually("a gone", || cluster.pods().get_opt("a").ok()?.is_none().then_some(()));
    let pdb = cluster.wait_counts("db", (2, 2, 2, 0));
    assert_eq!(pdb.status.and_then(|s| s.disrupted_pods), None, "cleared once the pod was deleted");

    // An entry whose pod is never deleted keeps it out of the count until it runs out.
    let disrupted_at = Timestamp::now();
    loop {
        let mut pdb = cluster.pdbs().get("db").expect("the budget");
        let status = pdb.status.as_mut().expect("a status");
        status.disrupted_pods = Some([("b".to_string(), Time(disrupted_at))].into());
        match cluster.pdbs().replace_status("db", &pdb, &PostParams::default()) {
            Ok(_) => break,
            Err(e) if e.is_conflict() => continue,
            Err(e) => panic!("status written: {e}"),
        }
    }
    let pdb = cluster.wait_counts("db", (2, 2, 1, 0));
    let kept = pdb.status.and_then(|s| s.disrupted_pods).unwrap_or_default();
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["b"], "kept while it has not run out");
    let pdb = eventually("the entry expired", || {
        let pdb = cluster.pdbs().get("db").ok()?;
        pdb.status.as_ref()?.disrupted_pods.is_none().then_some(pdb)
    });
    assert!(Timestamp::now().duration_since(disrupted_at).as_secs_f64() >= 7.0, "not before its timeout");
    assert_eq!(pdb.status.as_ref().map(|s| (s.current_healthy, s.disruptions_allowed)), Some((Some(2), Some(0))));
    // Upstream's message names the budget's namespace twice.
    cluster.wait_event("b", "NotDeleted", "Pod was expected by PDB default/default to be deleted but it wasn't");
}

on_both_backends!(budgets_without_pods_or_controllers_say_why);
fn budgets_without_pods_or_controllers_say_why(backend: Backend) {
    let cluster = harness::with(&controllers(&[])).on(backend).without_nodes().start();
    let missing_rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost",
        "uid": "6f0c4b8e-8a43-4d3e-9e0b-2b9ad4d2e6a1", "controller": true});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "name": "once",
        "uid": "0b7a9d8c-1f0e-4b5a-9c3d-6e2f1a0b9c8d", "controller": true});
    for (name, app, owner) in
        [("orphaned", "ghost", Some(missing_rs)), ("batch", "job", Some(job)), ("bare", "bare", None)]
    {
        cluster.pods().create(&pod(name, app, owner), &PostParams::default()).expect("pod created");
    }
    for (name, app, spec) in [
        ("empty", "none", json!({"minAvailable": 1})),
        ("ghost", "ghost", json!({"maxUnavailable": 1})),
        ("job", "job", json!({"maxUnavailable": 1})),
        ("bare", "bare", json!({"minAvailable": "50%"})),
    ] {
        cluster.pdbs().create(&budget(name, app, spec), &PostParams::default()).expect("created");
    }

    cluster.wait_counts("empty", (0, 1, 0, 0));
    cluster.wait_event("empty", "NoPods", "No matching pods found");

    let no_controller = "found no controllers for pod \"orphaned\"";
    let pdb = cluster.wait_condition("ghost", "False", "SyncFailed", no_controller);
    assert_eq!(pdb.status.map(|s| s.disruptions_allowed), Some(Some(0)));
    cluster.wait_event(
        "ghost",
        "CalculateExpectedPodCountFailed",
        &format!("Failed to calculate the number of expected pods: {no_controller}"),
    );

    let no_scale = "jobs.batch does not implement the scale subresource";
    cluster.wait_condition("job", "False", "SyncFailed", no_scale);
    cluster.wait_event(
        "job",
        "CalculateExpectedPodCountFailed",
        &format!("Failed to calculate the number of expected pods: {no_scale}"),
    );

    // A pod without a controller counts for nothing in a percentage.
    cluster.wait_counts("bare", (0, 0, 0, 0));
    cluster.wait_event(
        "bare",
        "UnmanagedPods",
        "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: bare,},\
         MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the status of the PDB \
         cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \
         \".spec.minAvailable\" field of the PDB to an integer value.",
    );
}

on_both_backends!(a_budget_over_a_stateful_set);
fn a_budget_over_a_stateful_set(backend: Backend) {
    let cluster = harness::with(&controllers(&["statefulset-controller"])).on(backend).start();
    let set: StatefulSet = from(json!({"metadata": {"name": "db"}, "spec": {"replicas": 2, "serviceName": "db",
        "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}));
    cluster.api::<StatefulSet>().create(&set, &PostParams::default()).expect("created");
    cluster
        .pdbs()
        .create(&budget("db", "db", json!({"maxUnavailable": "50%"})), &PostParams::default())
        .expect("created");
    cluster.wait_pods_ready("db", 2);
    cluster.wait_counts("db", (2, 1, 2, 1));
    let scale = Patch::Merge(json!({"spec": {"replicas": 3}}));
    cluster.api::<StatefulSet>().patch("db", &scale, &PostParams::default()).expect("scaled");
    cluster.wait_pods_ready("db", 3);
    // 50% of 3 unavailable is 1.5, rounded up to 2.
    cluster.wait_counts("db", (3, 1, 3, 2));
}

on_both_backends!(a_stale_disruption_target_condition_is_reset);
fn a_stale_disruption_target_condition_is_reset(backend: Backend) {
    let cluster = harness::with(&controllers(&[])).on(backend).without_nodes().start();
    let marked = Instant::now();
    for (name, reason) in [("evicted", "EvictionByEvictionAPI"), ("by-kubelet", "TerminationByKubelet")] {
        let mut created = cluster.pods().create(&pod(name, "x", None), &PostParams::default()).expect("pod created");
        let condition = json!({"type": "DisruptionTarget", "status": "True", "reason": reason,
            "message": "Eviction API: evicting", "lastTransitionTime": Timestamp::now().to_string()});
        created
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(from(condition));
        cluster.pods().replace_status(name, &created, &PostParams::default()).expect("condition set");
    }
    let target = |name: &str| {
        let pod = cluster.pods().get(name).ok()?;
        pod.status?.conditions?.into_iter().find(|c| c.type_ == "DisruptionTarget")
    };
    let reset = eventually("the stale condition reset", || target("evicted").filter(|c| c.status == "False"));
    assert!(marked.elapsed() >= STALE_TIMEOUT - Duration::from_secs(1), "not before it was stale");
    assert_eq!((reset.reason, reset.message), (None, None));
    // v1.36: it observes the pod's generation (PodObservedGenerationTracking GA).
    let generation = cluster.pods().get("evicted").expect("the pod").metadata.generation.filter(|g| *g != 0);
    assert_eq!(reset.observed_generation, generation);
    // The kubelet's condition is never stale.
    assert_eq!(target("by-kubelet").map(|c| c.status), Some("True".to_string()));
}

on_both_backends!(a_custom_resources_scale_is_expected);
fn a_custom_resources_scale_is_expected(backend: Backend) {
    if backend == Backend::Sandbox {
        // The sandbox serves no CustomResourceDefinitions.
        return;
    }
    let cluster = harness::with(&controllers(&[])).on(backend).without_nodes().start();
    widgets::define(&cluster);
    let widget = widgets::widget("w", json!({"replicas": 3}));
    // Served a moment after it is established.
    let widgets = cluster.api::<Widget>();
    let widget = eventually("the widget created", || match widgets.create(&widget, &PostParams::default()) {
        Ok(created) => Some(created),
        Err(e) if e.is_not_found() => None,
        Err(e) => panic!("widget: {e}"),
    });
    let owner = json!({"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
        "uid": widget.metadata.uid, "controller": true});
    for name in ["w-0", "w-1"] {
        cluster.pods().create(&pod(name, "w", Some(owner.clone())), &PostParams::default()).expect("pod created");
    }
    cluster.pdbs().create(&budget("w", "w", json!({"minAvailable": "50%"})), &PostParams::default()).expect("created");
    // Three expected from the widget's scale (two pods exist, neither running: no nodes).
    cluster.wait_counts("w", (3, 2, 0, 0));
}
