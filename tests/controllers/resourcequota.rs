//! The resource quota controller on both backends with simulated nodes: `status.used`
//! matches a hand count after creates and deletes of pods, services, configmaps, secrets,
//! claims per storage class, deployments and resource claims per device class; scopes select
//! pods; a terminal pod stops counting; `status.hard` follows `spec.hard`. On the real server
//! (the sandbox serves no CustomResourceDefinitions), a custom resource defined after the
//! controller started is discovered and counted (`count/widgets.example.com`), and its deletion
//! replenishes the quota.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, ResourceQuota, Secret, Service};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, Patch, PostParams};
use kcm::quantity::Quantity;
use kcm_sandbox::sandbox::nodes::NodeOptions;
use serde_json::{Value, json};

use crate::harness;

use harness::widgets::{self, Widget};
use harness::{Backend, Cluster, Namespaced, create, from};

/// A sandbox with two simulated nodes, namespaces `namespaces` (with their default
/// ServiceAccount), what `prepare` creates, then the quota controller running.
fn start(backend: Backend, namespaces: &[&str], prepare: impl FnOnce(&Client)) -> Cluster {
    harness::with(&[named("resourcequota-controller")])
        .on(backend)
        .names(&["resourcequota-controller"])
        .without_default_account()
        .namespaces(namespaces)
        .node_options(NodeOptions { job_pod_run_time: Duration::from_secs(1), ..harness::fast_nodes() })
        .start_with(|client, _| prepare(client))
}

fn quantities(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, Quantity> {
    let entries = list.into_iter().flatten();
    entries.map(|(name, q)| (name.clone(), Quantity::parse(&q.0).expect("a quantity"))).collect()
}

fn expected(entries: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    entries.iter().map(|(name, q)| (name.to_string(), Quantity::parse(q).expect("a quantity"))).collect()
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn quota(&self, namespace: &str, name: &str) -> ResourceQuota;
    fn usage_is(&self, namespace: &str, name: &str, want: &BTreeMap<String, Quantity>)
    -> Result<ResourceQuota, String>;
    fn wait_for_usage(&self, namespace: &str, name: &str, used: &[(&str, &str)]) -> ResourceQuota;
    fn wait_for_usage_nudging(&self, namespace: &str, name: &str, used: &[(&str, &str)], key: &str) -> ResourceQuota;
    fn delete<K: Namespaced>(&self, namespace: &str, name: &str);
}

impl ClusterExt for Cluster {
    fn quota(&self, namespace: &str, name: &str) -> ResourceQuota {
        Api::<ResourceQuota>::namespaced(&self.client, namespace).get(name).expect("the quota")
    }

    /// The quota, if its `status.used` equals `want` (by value) and `status.hard` its
    /// `spec.hard`; else what it has instead.
    fn usage_is(
        &self,
        namespace: &str,
        name: &str,
        want: &BTreeMap<String, Quantity>,
    ) -> Result<ResourceQuota, String> {
        let quota = self.quota(namespace, name);
        let status = quota.status.as_ref();
        let (hard, seen) =
            (quantities(status.and_then(|s| s.hard.as_ref())), quantities(status.and_then(|s| s.used.as_ref())));
        let spec_hard = quantities(quota.spec.as_ref().and_then(|s| s.hard.as_ref()));
        if &seen == want && hard == spec_hard {
            return Ok(quota);
        }
        let text = |list: &BTreeMap<String, Quantity>| {
            list.iter().map(|(name, q)| format!("{name}={q}")).collect::<Vec<_>>().join(",")
        };
        Err(format!("used {}, hard {}", text(&seen), text(&hard)))
    }

    /// Waits until the quota's `status.used` equals `used` (by value) and `status.hard` its
    /// `spec.hard`; returns the quota.
    fn wait_for_usage(&self, namespace: &str, name: &str, used: &[(&str, &str)]) -> ResourceQuota {
        let want = expected(used);
        harness::eventually_seen(&format!("usage of {namespace}/{name}"), || self.usage_is(namespace, name, &want))
    }

    /// [`wait_for_usage`] for a usage that no event is sure to recount: every 10 s without it,
    /// `spec.hard[key]` goes up by one, a change of the quota's spec that makes the controller
    /// recount, as upstream's e2e `updateResourceQuotaUntilUsageAppears` does.
    fn wait_for_usage_nudging(&self, namespace: &str, name: &str, used: &[(&str, &str)], key: &str) -> ResourceQuota {
        let want = expected(used);
        let mut nudged = Instant::now();
        harness::eventually_seen(&format!("usage of {namespace}/{name}"), || {
            let usage = self.usage_is(namespace, name, &want);
            if usage.is_err() && nudged.elapsed() >= Duration::from_secs(10) {
                let hard = self.quota(namespace, name).spec.and_then(|s| s.hard).unwrap_or_default();
                let limit: i64 = hard.get(key).and_then(|q| q.0.parse().ok()).expect("a whole-number limit");
                let patch = json!({"spec": {"hard": {key: (limit + 1).to_string()}}});
                Api::<ResourceQuota>::namespaced(&self.client, namespace)
                    .patch(name, &Patch::Merge(patch), &PostParams::default())
                    .expect("the quota's limit raised");
                nudged = Instant::now();
            }
            usage
        })
    }

    fn delete<K: Namespaced>(&self, namespace: &str, name: &str) {
        Api::<K>::namespaced(&self.client, namespace).delete(name, &DeleteParams::default()).expect("deleted");
    }
}

fn pod(name: &str, requests: Value, limits: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
        "resources": {"requests": requests, "limits": limits}}]}})
}

fn service(name: &str, service_type: &str, ports: &[i32]) -> Value {
    let ports: Vec<Value> = ports.iter().map(|p| json!({"name": format!("p{p}"), "port": p})).collect();
    json!({"metadata": {"name": name}, "spec": {"type": service_type, "selector": {"app": name}, "ports": ports}})
}

fn claim(name: &str, class: Option<&str>, storage: &str) -> Value {
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}});
    if let Some(class) = class {
        spec["storageClassName"] = json!(class);
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

const COUNTED: &[(&str, &str)] = &[
    ("pods", "10"),
    ("count/pods", "10"),
    ("requests.cpu", "10"),
    ("requests.memory", "10Gi"),
    ("limits.cpu", "10"),
    ("limits.memory", "20Gi"),
    ("services", "10"),
    ("services.nodeports", "10"),
    ("services.loadbalancers", "5"),
    ("configmaps", "10"),
    ("secrets", "10"),
    ("persistentvolumeclaims", "10"),
    ("requests.storage", "100Gi"),
    ("gold.storageclass.storage.k8s.io/requests.storage", "10Gi"),
    ("gold.storageclass.storage.k8s.io/persistentvolumeclaims", "5"),
    ("count/deployments.apps", "5"),
];

on_both_backends!(usage_matches_a_hand_count_after_creates_and_deletes);
fn usage_matches_a_hand_count_after_creates_and_deletes(backend: Backend) {
    // Everything exists before the controller starts, so that the usage checked is the
    // controller's own count from its caches (objects created later are charged by admission,
    // and a recount may run before the controller's caches have them, as upstream).
    let cluster = start(backend, &["counts"], |client| {
        let hard: BTreeMap<&str, &str> = COUNTED.iter().copied().collect();
        create::<ResourceQuota>(client, "counts", json!({"metadata": {"name": "objects"}, "spec": {"hard": hard}}));
        let a = pod("a", json!({"cpu": "100m", "memory": "1.5Gi"}), json!({"cpu": "1", "memory": "2Gi"}));
        create::<Pod>(client, "counts", a);
        let b = pod("b", json!({"cpu": "0.9", "memory": "512Mi"}), json!({"cpu": "2", "memory": "2e9"}));
        create::<Pod>(client, "counts", b);
        create::<Service>(client, "counts", service("cluster-ip", "ClusterIP", &[80]));
        create::<Service>(client, "counts", service("node-port", "NodePort", &[80, 443]));
        create::<Service>(client, "counts", service("balancer", "LoadBalancer", &[8080]));
        create::<ConfigMap>(client, "counts", json!({"metadata": {"name": "one"}, "data": {"k": "v"}}));
        create::<ConfigMap>(client, "counts", json!({"metadata": {"name": "two"}}));
        create::<Secret>(client, "counts", json!({"metadata": {"name": "token"}, "stringData": {"k": "v"}}));
        create::<PersistentVolumeClaim>(client, "counts", claim("gold-big", Some("gold"), "1.5Gi"));
        create::<PersistentVolumeClaim>(client, "counts", claim("gold-small", Some("gold"), "2e3"));
        create::<PersistentVolumeClaim>(client, "counts", claim("silver", Some("silver"), "1Gi"));
        create::<Deployment>(
            client,
            "counts",
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 0,
            "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}),
        );
    });
    let client = &cluster.client;

    // 100m + 0.9 = 1; 1.5Gi + 512Mi = 2Gi; 2Gi + 2e9; 1.5Gi + 2e3 (+ 1Gi).
    let counted = vec![
        ("pods", "2"),
        ("count/pods", "2"),
        ("requests.cpu", "1"),
        ("requests.memory", "2Gi"),
        ("limits.cpu", "3"),
        ("limits.memory", "4147483648"),
        ("services", "3"),
        ("services.nodeports", "3"),
        ("services.loadbalancers", "1"),
        ("configmaps", "2"),
        ("secrets", "1"),
        ("persistentvolumeclaims", "3"),
        ("requests.storage", "2684356560"),
        ("gold.storageclass.storage.k8s.io/requests.storage", "1610614736"),
        ("gold.storageclass.storage.k8s.io/persistentvolumeclaims", "2"),
        ("count/deployments.apps", "1"),
    ];
    let quota = cluster.wait_for_usage("counts", "objects", &counted);
    let used = quota.status.and_then(|s| s.used).expect("usage");
    assert_eq!(used["requests.cpu"].0, "1", "exact sums in canonical form");
    assert_eq!(used["requests.memory"].0, "2Gi");

    // A NodePort Service turned ClusterIP frees its node ports: the type change alone makes the
    // controller recount (nothing else changed meanwhile).
    let ports = json!([{"name": "p80", "port": 80}, {"name": "p443", "port": 443}]);
    let to_cluster_ip = json!({"spec": {"type": "ClusterIP", "ports": ports, "externalTrafficPolicy": null}});
    let services = Api::<Service>::namespaced(client, "counts");
    services.patch("node-port", &Patch::Merge(to_cluster_ip), &PostParams::default()).expect("retyped");
    let mut after_retype: Vec<(&str, &str)> = counted.clone();
    for (name, value) in after_retype.iter_mut() {
        if *name == "services.nodeports" {
            *value = "1";
        }
    }
    cluster.wait_for_usage("counts", "objects", &after_retype);

    cluster.delete::<Pod>("counts", "b");
    cluster.delete::<ConfigMap>("counts", "two");
    cluster.delete::<Secret>("counts", "token");
    cluster.delete::<Deployment>("counts", "web");
    cluster.delete::<PersistentVolumeClaim>("counts", "gold-small");
    // Stand in for the pvc-protection controller: the claim is not in use.
    let claims = Api::<PersistentVolumeClaim>::namespaced(client, "counts");
    claims
        .patch("gold-small", &Patch::Merge(json!({"metadata": {"finalizers": null}})), &PostParams::default())
        .expect("unprotected");

    cluster.wait_for_usage(
        "counts",
        "objects",
        &[
            ("pods", "1"),
            ("count/pods", "1"),
            ("requests.cpu", "100m"),
            ("requests.memory", "1.5Gi"),
            ("limits.cpu", "1"),
            ("limits.memory", "2Gi"),
            ("services", "3"),
            ("services.nodeports", "1"),
            ("services.loadbalancers", "1"),
            ("configmaps", "1"),
            ("secrets", "0"),
            ("persistentvolumeclaims", "2"),
            ("requests.storage", "2.5Gi"),
            ("gold.storageclass.storage.k8s.io/requests.storage", "1.5Gi"),
            ("gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1"),
            ("count/deployments.apps", "0"),
        ],
    );
}

on_both_backends!(scopes_select_pods_and_terminal_pods_stop_counting);
fn scopes_select_pods_and_terminal_pods_stop_counting(backend: Backend) {
    let cluster = start(backend, &["scopes"], |client| {
        let high: PriorityClass = from(json!({"metadata": {"name": "high"}, "value": 1000}));
        Api::<PriorityClass>::cluster(client).create(&high, &PostParams::default()).expect("priority class");
        let quota = |name: &str, spec: Value| {
            let mut spec = spec;
            spec["hard"] = json!({"pods": "10", "count/pods": "10"});
            create::<ResourceQuota>(client, "scopes", json!({"metadata": {"name": name}, "spec": spec}));
        };
        quota("best-effort", json!({"scopes": ["BestEffort"]}));
        quota("not-best-effort", json!({"scopes": ["NotBestEffort"]}));
        quota("terminating", json!({"scopes": ["Terminating"]}));
        quota("not-terminating", json!({"scopes": ["NotTerminating"]}));
        quota(
            "high",
            json!({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
        );
        quota(
            "not-high",
            json!({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}}),
        );
    });
    let client = &cluster.client;
    create::<Pod>(client, "scopes", pod("plain", json!({}), json!({})));
    let mut sized = pod("sized", json!({"cpu": "100m"}), json!({}));
    sized["spec"]["priorityClassName"] = json!("high");
    create::<Pod>(client, "scopes", sized);
    // Runs to completion: terminating (an active deadline), and soon Succeeded.
    let mut job = pod("job", json!({"memory": "1Mi"}), json!({}));
    job["spec"]["restartPolicy"] = json!("Never");
    job["spec"]["activeDeadlineSeconds"] = json!(600);
    create::<Pod>(client, "scopes", job);

    let pods = Api::<Pod>::namespaced(client, "scopes");
    harness::eventually_seen("the job pod to succeed", || {
        let phase = pods.get("job").expect("pod").status.and_then(|s| s.phase).unwrap_or_default();
        if phase == "Succeeded" { Ok(()) } else { Err(phase) }
    });
    // `pods` counts only pods that are not terminal; `count/pods` counts every pod.
    cluster.wait_for_usage("scopes", "best-effort", &[("pods", "1"), ("count/pods", "1")]);
    cluster.wait_for_usage("scopes", "not-best-effort", &[("pods", "1"), ("count/pods", "2")]);
    cluster.wait_for_usage("scopes", "terminating", &[("pods", "0"), ("count/pods", "1")]);
    cluster.wait_for_usage("scopes", "not-terminating", &[("pods", "2"), ("count/pods", "2")]);
    cluster.wait_for_usage("scopes", "high", &[("pods", "1"), ("count/pods", "1")]);
    cluster.wait_for_usage("scopes", "not-high", &[("pods", "1"), ("count/pods", "2")]);

    cluster.delete::<Pod>("scopes", "sized");
    cluster.wait_for_usage("scopes", "high", &[("pods", "0"), ("count/pods", "0")]);
    cluster.wait_for_usage("scopes", "not-best-effort", &[("pods", "0"), ("count/pods", "1")]);
}

on_both_backends!(status_hard_follows_spec_hard);
fn status_hard_follows_spec_hard(backend: Backend) {
    let cluster = start(backend, &["edits"], |client| {
        create::<ResourceQuota>(
            client,
            "edits",
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"configmaps": "5"}}}),
        );
        create::<ConfigMap>(client, "edits", json!({"metadata": {"name": "one"}}));
        create::<Secret>(client, "edits", json!({"metadata": {"name": "s1"}}));
        create::<Secret>(client, "edits", json!({"metadata": {"name": "s2"}}));
    });
    cluster.wait_for_usage("edits", "q", &[("configmaps", "1")]);
    let quotas = Api::<ResourceQuota>::namespaced(&cluster.client, "edits");
    let patch = Patch::Merge(json!({"spec": {"hard": {"configmaps": null, "secrets": "2e3", "count/secrets": "3"}}}));
    quotas.patch("q", &patch, &PostParams::default()).expect("patched");
    let quota = cluster.wait_for_usage("edits", "q", &[("secrets", "2"), ("count/secrets", "2")]);
    let hard = quota.status.and_then(|s| s.hard).expect("hard");
    assert_eq!(hard["secrets"].0, "2e3");
}

on_both_backends!(resource_claims_count_their_devices_per_class);
/// DynamicResourceAllocation is GA in v1.36: quota counts claims and the devices they may get per
/// device class (`exactly` counts its count, `All` the worst case of 32, `firstAvailable` the most
/// of its subrequests per class), and a deleted claim stops counting.
fn resource_claims_count_their_devices_per_class(backend: Backend) {
    let hard = json!({"count/resourceclaims.resource.k8s.io": "10", "gpu.deviceclass.resource.k8s.io/devices": "100",
        "fpga.deviceclass.resource.k8s.io/devices": "100"});
    let cluster = start(backend, &["dra"], |client| {
        create::<ResourceQuota>(client, "dra", json!({"metadata": {"name": "q"}, "spec": {"hard": hard}}));
    });
    cluster.wait_for_usage(
        "dra",
        "q",
        &[
            ("count/resourceclaims.resource.k8s.io", "0"),
            ("gpu.deviceclass.resource.k8s.io/devices", "0"),
            ("fpga.deviceclass.resource.k8s.io/devices", "0"),
        ],
    );
    // `All` takes no count (kube-apiserver refuses one).
    let request = |name: &str, class: &str, mode: &str| {
        let mut exactly = json!({"deviceClassName": class, "allocationMode": mode});
        if mode == "ExactCount" {
            exactly["count"] = json!(2);
        }
        json!({"name": name, "exactly": exactly})
    };
    create::<ResourceClaim>(
        &cluster.client,
        "dra",
        json!({"metadata": {"name": "two"}, "spec": {"devices": {"requests": [request("a", "gpu", "ExactCount")]}}}),
    );
    let first_available = json!({"name": "b", "firstAvailable": [
        {"name": "big", "deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 3},
        {"name": "small", "deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 1}]});
    create::<ResourceClaim>(
        &cluster.client,
        "dra",
        json!({"metadata": {"name": "many"}, "spec": {"devices": {"requests": [request("a", "gpu", "All"), first_available]}}}),
    );
    // kube-apiserver's admission charged both creates; a recount of ours started before the
    // claims reached its cache (the retry of a conflicting start-up write) may undercount them,
    // in upstream's controller too, and creates do not trigger a recount. A claim deleted after
    // them does, from a cache that has them (one watch, in order): that recount is ours. It
    // writes only if it differs from the quota in the controller's cache, which may not have
    // admission's charge for the probe yet (another watch): then the recount equals the cached
    // usage and is not written, as upstream's, and the nudges make it recount again.
    create::<ResourceClaim>(
        &cluster.client,
        "dra",
        json!({"metadata": {"name": "probe"}, "spec": {"devices": {"requests": [request("a", "gpu", "ExactCount")]}}}),
    );
    cluster.delete::<ResourceClaim>("dra", "probe");
    cluster.wait_for_usage_nudging(
        "dra",
        "q",
        &[
            ("count/resourceclaims.resource.k8s.io", "2"),
            ("gpu.deviceclass.resource.k8s.io/devices", "34"),
            ("fpga.deviceclass.resource.k8s.io/devices", "3"),
        ],
        "count/resourceclaims.resource.k8s.io",
    );
    cluster.delete::<ResourceClaim>("dra", "many");
    cluster.wait_for_usage(
        "dra",
        "q",
        &[
            ("count/resourceclaims.resource.k8s.io", "1"),
            ("gpu.deviceclass.resource.k8s.io/devices", "2"),
            ("fpga.deviceclass.resource.k8s.io/devices", "0"),
        ],
    );
}

/// Real server only: the sandbox serves no CustomResourceDefinitions.
mod custom_resources_are_discovered_and_counted {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, super::custom_resources_are_discovered_and_counted);
    }
}

const WIDGETS: &str = "count/widgets.example.com";

/// As upstream's e2e spec "should create a ResourceQuota and capture the life of a custom
/// resource": the definition comes after the controller started, so only its discovery resync
/// (every 30 s) finds it; the quota is updated until its usage appears, as the spec does.
fn custom_resources_are_discovered_and_counted(backend: Backend) {
    let cluster = start(backend, &["widgets"], |_| {});
    widgets::define(&cluster);

    create::<ResourceQuota>(
        &cluster.client,
        "widgets",
        json!({"metadata": {"name": "q"}, "spec": {"hard": {WIDGETS: "2"}}}),
    );
    // `updateResourceQuotaUntilUsageAppears`: a new `spec.hard` every 2 s makes the controller
    // sync the quota again; once its monitor of widgets exists, the usage is there.
    let quotas = Api::<ResourceQuota>::namespaced(&cluster.client, "widgets");
    let (mut limit, mut patched) = (2, std::time::Instant::now());
    harness::eventually("usage of widgets in widgets/q", || {
        let quota = quotas.get("q").ok()?;
        if quota.status.as_ref()?.used.as_ref().is_some_and(|used| used.contains_key(WIDGETS)) {
            return Some(());
        }
        if patched.elapsed() >= Duration::from_secs(2) {
            limit += 1;
            let patch = Patch::Merge(json!({"spec": {"hard": {WIDGETS: limit.to_string()}}}));
            quotas.patch("q", &patch, &PostParams::default()).expect("quota updated");
            patched = std::time::Instant::now();
        }
        None
    });
    cluster.wait_for_usage("widgets", "q", &[(WIDGETS, "0")]);

    // Admission charges the widget (it refuses widgets while the quota has no usage of them).
    let widgets = Api::<Widget>::namespaced(&cluster.client, "widgets");
    widgets.create(&widgets::widget("w", Value::Null), &PostParams::default()).expect("widget created");
    cluster.wait_for_usage("widgets", "q", &[(WIDGETS, "1")]);
    // Its deletion is replenished by the controller's monitor of widgets; the recount is not
    // written while the controller's cached quota still lacks admission's charge (the recount
    // equals it), as upstream's, hence the nudges.
    widgets.delete("w", &DeleteParams::default()).expect("widget deleted");
    cluster.wait_for_usage_nudging("widgets", "q", &[(WIDGETS, "0")], WIDGETS);
}
