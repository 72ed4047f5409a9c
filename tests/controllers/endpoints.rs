//! The endpoints, EndpointSlice and EndpointSlice mirroring controllers on both backends:
//! pods of a ReplicaSet run on simulated nodes and the Endpoints and EndpointSlices of their
//! Service follow them becoming ready, not ready and fewer; custom Endpoints of a selector-less
//! Service are mirrored into slices; many pods spread over several slices.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, PodCondition, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm::app::controllers::ControllerDescriptor;
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, ListParams, Patch, PostParams};
use kcm::sandbox::nodes::NodeOptions;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, Namespaced, eventually, from};

const READY_GATE: &str = "example.com/in-rotation";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// A sandbox running `controllers`, with two simulated nodes in zones a and b if `with_nodes`.
fn start(backend: Backend, controllers: &[ControllerDescriptor], with_nodes: bool) -> Cluster {
    let harness = harness::with(controllers)
        .on(backend)
        .node_options(NodeOptions { zones: vec!["zone-a".into(), "zone-b".into()], ..harness::fast_nodes() });
    if with_nodes { harness.start() } else { harness.without_nodes().start() }
}

/// The IPs of a list of Endpoints addresses, sorted.
fn ips(list: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>) -> Vec<String> {
    let mut ips: Vec<String> = list.iter().flatten().map(|a| a.ip.clone()).collect();
    ips.sort();
    ips
}

/// Ready and not-ready addresses of all subsets.
fn addresses(endpoints: &Endpoints) -> (Vec<String>, Vec<String>) {
    let subsets = endpoints.subsets.iter().flatten();
    let mut ready: Vec<String> = subsets.clone().flat_map(|s| ips(&s.addresses)).collect();
    let mut not_ready: Vec<String> = subsets.flat_map(|s| ips(&s.not_ready_addresses)).collect();
    ready.sort();
    not_ready.sort();
    (ready, not_ready)
}

/// Endpoint address → ready condition, over slices.
fn slice_endpoints(slices: &[EndpointSlice]) -> BTreeMap<String, Option<bool>> {
    (slices.iter().flat_map(|s| s.endpoints.iter()))
        .map(|e| (e.addresses.join(","), e.conditions.as_ref().and_then(|c| c.ready)))
        .collect()
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn create<K: Namespaced>(&self, value: Value) -> K;
    fn slices(&self, service: &str, manager: &str) -> Vec<EndpointSlice>;
    fn endpoints(&self, name: &str) -> Option<Endpoints>;
    fn running_pods(&self, app: &str) -> Vec<Pod>;
    fn set_gate(&self, name: &str, ready: bool);
}

impl ClusterExt for Cluster {
    fn create<K: Namespaced>(&self, value: Value) -> K {
        self.api::<K>().create(&from(value), &PostParams::default()).expect("created")
    }

    /// The slices of a Service managed by `manager`.
    fn slices(&self, service: &str, manager: &str) -> Vec<EndpointSlice> {
        let selector = format!("{SERVICE_NAME}={service},{MANAGED_BY}={manager}");
        let params = ListParams { label_selector: Some(selector), ..ListParams::default() };
        self.api::<EndpointSlice>().list(&params).expect("slices").items
    }

    fn endpoints(&self, name: &str) -> Option<Endpoints> {
        self.api::<Endpoints>().get_opt(name).expect("endpoints")
    }

    /// The running pods of `app` (with an IP, not being deleted), by name.
    fn running_pods(&self, app: &str) -> Vec<Pod> {
        let params = ListParams { label_selector: Some(format!("app={app}")), ..ListParams::default() };
        let pods = self.api::<Pod>().list(&params).expect("pods").items;
        pods.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
            .collect()
    }

    /// Sets the readiness gate condition of a pod, as the component owning the gate would.
    fn set_gate(&self, name: &str, ready: bool) {
        for _ in 0..20 {
            let mut pod = self.api::<Pod>().get(name).expect("pod");
            let status = pod.status.get_or_insert_with(Default::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            conditions.retain(|c| c.type_ != READY_GATE);
            conditions.push(PodCondition {
                type_: READY_GATE.into(),
                status: if ready { "True" } else { "False" }.into(),
                ..PodCondition::default()
            });
            match self.api::<Pod>().replace_status(name, &pod, &PostParams::default()) {
                Ok(_) => return,
                Err(e) if e.is_conflict() => continue,
                Err(e) => panic!("setting the gate of {name}: {e}"),
            }
        }
        panic!("the pod {name} kept changing");
    }
}

fn pod_ips(pods: &[Pod]) -> Vec<String> {
    let mut ips: Vec<String> = pods.iter().filter_map(|p| p.status.as_ref()?.pod_ip.clone()).collect();
    ips.sort();
    ips
}

on_both_backends!(endpoints_and_slices_follow_the_pods_of_a_replica_set);
fn endpoints_and_slices_follow_the_pods_of_a_replica_set(backend: Backend) {
    let cluster = start(
        backend,
        &[named("replicaset-controller"), named("endpoints-controller"), named("endpointslice-controller")],
        true,
    );
    let service: Service = cluster.create(json!({
        "metadata": {"name": "web", "labels": {"team": "a"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    }));
    cluster.create::<Service>(json!({
        "metadata": {"name": "web-headless"},
        "spec": {"selector": {"app": "web"}, "clusterIP": "None"}
    }));
    cluster.create::<ReplicaSet>(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "readinessGates": [{"conditionType": READY_GATE}],
                    "containers": [{"name": "app", "image": "nginx:1.27",
                        "ports": [{"name": "http", "containerPort": 8080}]}]
                }
            }
        }
    }));

    // Running but held back by the readiness gate: not-ready addresses, ready=false.
    let pods = eventually("3 running pods", || Some(cluster.running_pods("web")).filter(|p| p.len() == 3));
    let all_ips = pod_ips(&pods);
    let endpoints = eventually("3 not-ready addresses", || {
        cluster.endpoints("web").filter(|e| addresses(e) == (vec![], all_ips.clone()))
    });
    let subset = &endpoints.subsets.as_ref().expect("subsets")[0];
    let port = &subset.ports.as_ref().expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port, port.protocol.as_deref()), (Some("http"), 8080, Some("TCP")));
    let address = &subset.not_ready_addresses.as_ref().expect("addresses")[0];
    let target = address.target_ref.as_ref().expect("a target");
    assert_eq!(target.kind.as_deref(), Some("Pod"));
    assert!(address.node_name.as_deref().is_some_and(|n| n.starts_with("node-")));
    let labels = endpoints.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert_eq!(labels.get("endpoints.kubernetes.io/managed-by").map(String::as_str), Some("endpoint-controller"));
    assert!(!labels.contains_key("service.kubernetes.io/headless"));
    let all_unready: BTreeMap<String, Option<bool>> = all_ips.iter().map(|ip| (ip.clone(), Some(false))).collect();
    let slices = eventually("a slice with 3 unready endpoints", || {
        let slices = cluster.slices("web", "endpointslice-controller.k8s.io");
        (slice_endpoints(&slices) == all_unready).then_some(slices)
    });
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    assert_eq!(slice.address_type, "IPv4");
    assert!(slice.metadata.name.as_deref().is_some_and(|n| n.starts_with("web-")));
    assert_eq!(slice.metadata.labels.as_ref().and_then(|l| l.get("team")).map(String::as_str), Some("a"));
    let owner = &slice.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!((owner.kind.as_str(), owner.api_version.as_str()), ("Service", "v1"));
    assert_eq!((owner.uid.as_str(), owner.controller), (service.metadata.uid.as_deref().unwrap_or(""), Some(true)));
    let port = &slice.ports.as_ref().expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port, port.protocol.as_deref()), (Some("http"), Some(8080), Some("TCP")));
    let endpoint = &slice.endpoints[0];
    let conditions = endpoint.conditions.clone().unwrap_or_default();
    assert_eq!((conditions.serving, conditions.terminating), (Some(false), Some(false)));
    assert!(endpoint.zone.as_deref().is_some_and(|z| z.starts_with("zone-")), "{endpoint:?}");
    assert!(endpoint.node_name.is_some() && endpoint.target_ref.is_some());

    // The headless Service: its label, no ports.
    let headless =
        eventually("headless endpoints", || cluster.endpoints("web-headless").filter(|e| addresses(e).1.len() == 3));
    let labels = headless.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("service.kubernetes.io/headless").map(String::as_str), Some(""));
    assert!(headless.subsets.as_ref().expect("subsets")[0].ports.as_ref().is_none_or(Vec::is_empty));
    let headless_slices = eventually("headless slices", || {
        Some(cluster.slices("web-headless", "endpointslice-controller.k8s.io"))
            .filter(|s| slice_endpoints(s).len() == 3)
    });
    let labels = headless_slices[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("service.kubernetes.io/headless").map(String::as_str), Some(""));

    // The gates open: every address is ready. Transition times have one-second precision: a
    // pause makes the Ready transitions newer than the ones the controllers saw before, so
    // that they count as the trigger of the change.
    std::thread::sleep(Duration::from_millis(1100));
    for pod in &pods {
        cluster.set_gate(pod.metadata.name.as_deref().unwrap_or(""), true);
    }
    eventually("3 ready addresses", || cluster.endpoints("web").filter(|e| addresses(e) == (all_ips.clone(), vec![])));
    let all_ready: BTreeMap<String, Option<bool>> = all_ips.iter().map(|ip| (ip.clone(), Some(true))).collect();
    let slices = eventually("3 ready endpoints", || {
        Some(cluster.slices("web", "endpointslice-controller.k8s.io")).filter(|s| slice_endpoints(s) == all_ready)
    });
    // The latest Ready transition is the change that triggered this version. (Not checked on
    // the Endpoints: as upstream, a retry after a stale cache clears it there.)
    let annotations = slices[0].metadata.annotations.clone().unwrap_or_default();
    let trigger = annotations.get("endpoints.kubernetes.io/last-change-trigger-time").expect("a trigger time");
    assert!(trigger.parse::<jiff::Timestamp>().is_ok(), "{trigger}");

    // One pod goes out of rotation.
    let out = &pods[0];
    let out_ip = out.status.as_ref().and_then(|s| s.pod_ip.clone()).expect("an IP");
    cluster.set_gate(out.metadata.name.as_deref().unwrap_or(""), false);
    let rest: Vec<String> = all_ips.iter().filter(|ip| **ip != out_ip).cloned().collect();
    eventually("one not-ready address", || {
        cluster.endpoints("web").filter(|e| addresses(e) == (rest.clone(), vec![out_ip.clone()]))
    });
    let mut expected = all_ready.clone();
    expected.insert(out_ip.clone(), Some(false));
    let slices = eventually("one unready endpoint", || {
        Some(cluster.slices("web", "endpointslice-controller.k8s.io")).filter(|s| slice_endpoints(s) == expected)
    });
    assert_eq!(slices.len(), 1, "updated in place, not recreated");

    // Scaled down to one: the others leave both.
    let patch = Patch::Merge(json!({"spec": {"replicas": 1}}));
    cluster.api::<ReplicaSet>().patch("web", &patch, &PostParams::default()).expect("scaled");
    let left = eventually("one pod left", || {
        let pods = cluster.api::<Pod>().list(&ListParams::default()).expect("pods").items;
        Some(pods).filter(|p| p.len() == 1)
    });
    let left_ip = pod_ips(&left);
    eventually("one address", || {
        cluster.endpoints("web").filter(|e| {
            let (ready, not_ready) = addresses(e);
            ready.into_iter().chain(not_ready).collect::<Vec<_>>() == left_ip
        })
    });
    eventually("one endpoint", || {
        let slices = cluster.slices("web", "endpointslice-controller.k8s.io");
        (slice_endpoints(&slices).into_keys().collect::<Vec<_>>() == left_ip).then_some(())
    });

    // The last pod is deleted while its kubelet is down, so it stays terminating (and Ready):
    // it leaves the Endpoints; its slice endpoint is terminating, not ready, serving if Ready.
    let last = &left[0];
    let node = last.spec.as_ref().and_then(|s| s.node_name.clone()).expect("a node");
    assert!(cluster.nodes.as_ref().expect("nodes").stop_heartbeat(&node));
    let conditions = last.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let serving = conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
    let last_name = last.metadata.name.as_deref().unwrap_or("");
    cluster.api::<Pod>().delete(last_name, &DeleteParams::default()).expect("deleted");
    eventually("no address left", || cluster.endpoints("web").filter(|e| addresses(e) == (vec![], vec![])));
    eventually("a terminating endpoint", || {
        let slices = cluster.slices("web", "endpointslice-controller.k8s.io");
        let endpoint = slices.iter().flat_map(|s| &s.endpoints).next()?.clone();
        let c = endpoint.conditions.unwrap_or_default();
        (endpoint.addresses == left_ip
            && c.ready == Some(false)
            && c.serving == Some(serving)
            && c.terminating == Some(true))
        .then_some(())
    });

    // The Service goes: so do its Endpoints (its slices are the garbage collector's).
    cluster.api::<Service>().delete("web", &DeleteParams::default()).expect("deleted");
    eventually("the Endpoints deleted", || cluster.endpoints("web").is_none().then_some(()));
}

on_both_backends!(custom_endpoints_of_selectorless_services_are_mirrored);
fn custom_endpoints_of_selectorless_services_are_mirrored(backend: Backend) {
    let cluster = start(
        backend,
        &[
            named("endpoints-controller"),
            named("endpointslice-controller"),
            named("endpointslice-mirroring-controller"),
        ],
        false,
    );
    for name in ["db", "skipped"] {
        cluster.create::<Service>(json!({
            "metadata": {"name": name},
            "spec": {"ports": [{"name": "sql", "port": 5432}]}
        }));
    }
    cluster.create::<Endpoints>(json!({
        "metadata": {"name": "skipped", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": "10.9.0.1"}], "ports": [{"name": "sql", "port": 5432}]}]
    }));
    cluster.create::<Endpoints>(json!({
        "metadata": {"name": "db", "labels": {"tier": "data"}},
        "subsets": [{"addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}], "notReadyAddresses": [{"ip": "10.1.0.3"}],
            "ports": [{"name": "sql", "port": 5432}]}]
    }));
    let mirror = "endpointslicemirroring-controller.k8s.io";
    let expected: BTreeMap<String, Option<bool>> = [("10.1.0.1", true), ("10.1.0.2", true), ("10.1.0.3", false)]
        .into_iter()
        .map(|(ip, ready)| (ip.to_string(), Some(ready)))
        .collect();
    let slices = eventually("the mirrored slice", || {
        Some(cluster.slices("db", mirror)).filter(|s| slice_endpoints(s) == expected)
    });
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    assert_eq!(slice.metadata.labels.as_ref().and_then(|l| l.get("tier")).map(String::as_str), Some("data"));
    let owner = &slice.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Endpoints", "db"));
    let port = &slice.ports.as_ref().expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("sql"), Some(5432)));
    // The skip-mirror label is honoured, and the other controllers leave selector-less
    // Services alone.
    assert!(cluster.slices("skipped", mirror).is_empty());
    assert!(cluster.slices("db", "endpointslice-controller.k8s.io").is_empty());
    let db = cluster.endpoints("db").expect("the Endpoints stay");
    assert_eq!(addresses(&db), (vec!["10.1.0.1".into(), "10.1.0.2".into()], vec!["10.1.0.3".into()]));

    // A change is mirrored into the same slice.
    let patch = Patch::Merge(json!({"subsets": [{"addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.4"}],
        "ports": [{"name": "sql", "port": 5432}]}]}));
    cluster.api::<Endpoints>().patch("db", &patch, &PostParams::default()).expect("patched");
    let changed: BTreeMap<String, Option<bool>> =
        [("10.1.0.1".to_string(), Some(true)), ("10.1.0.4".to_string(), Some(true))].into();
    let slices = eventually("the change mirrored", || {
        Some(cluster.slices("db", mirror)).filter(|s| slice_endpoints(s) == changed)
    });
    assert_eq!(slices[0].metadata.name, slice.metadata.name);

    // Without the skip-mirror label, the other Endpoints are mirrored too.
    let unskip = Patch::Merge(json!({"metadata": {"labels": {"endpointslice.kubernetes.io/skip-mirror": null}}}));
    cluster.api::<Endpoints>().patch("skipped", &unskip, &PostParams::default()).expect("patched");
    eventually("the unskipped Endpoints mirrored", || {
        Some(cluster.slices("skipped", mirror)).filter(|s| slice_endpoints(s).len() == 1)
    });

    // Endpoints gone: their slices go.
    cluster.api::<Endpoints>().delete("db", &DeleteParams::default()).expect("deleted");
    eventually("the mirrored slice deleted", || cluster.slices("db", mirror).is_empty().then_some(()));
}

on_both_backends!(many_endpoints_are_spread_over_slices);
fn many_endpoints_are_spread_over_slices(backend: Backend) {
    let cluster = start(backend, &[named("endpoints-controller"), named("endpointslice-controller")], false);
    let node: Node = from(json!({"metadata": {"name": "node-x", "labels": {"topology.kubernetes.io/zone": "zone-x"}}}));
    Api::<Node>::cluster(&cluster.client).create(&node, &PostParams::default()).expect("node");
    cluster.create::<Service>(json!({
        "metadata": {"name": "big"},
        "spec": {"selector": {"app": "big"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }));
    // Pods bound to a node nobody runs, with the status a kubelet would write.
    let count = 250;
    for i in 0..count {
        let name = format!("big-{i}");
        let pod: Pod = cluster.create(json!({
            "metadata": {"name": name, "labels": {"app": "big"}},
            "spec": {"nodeName": "node-x", "containers": [{"name": "app", "image": "nginx:1.27"}]}
        }));
        let ip = format!("10.8.{}.{}", i / 200, i % 200 + 1);
        let mut status = pod.clone();
        status.status = Some(from(json!({
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True"}]
        })));
        cluster.api::<Pod>().replace_status(&name, &status, &PostParams::default()).expect("status");
    }
    let slices = eventually("250 endpoints in slices", || {
        let slices = cluster.slices("big", "endpointslice-controller.k8s.io");
        (slice_endpoints(&slices).len() == count).then_some(slices)
    });
    let mut sizes: Vec<usize> = slices.iter().map(|s| s.endpoints.len()).collect();
    sizes.sort_unstable();
    assert!(sizes.iter().all(|s| *s <= 100), "{sizes:?}");
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    assert!(slices.iter().flat_map(|s| &s.endpoints).all(|e| e.zone.as_deref() == Some("zone-x")));
    let endpoints = eventually("250 addresses", || cluster.endpoints("big").filter(|e| addresses(e).0.len() == count));
    assert!(!endpoints.metadata.annotations.unwrap_or_default().contains_key("endpoints.kubernetes.io/over-capacity"));
}

on_both_backends!(endpoint_slices_get_a_new_generation_for_labels_and_endpoints_not_annotations);
fn endpoint_slices_get_a_new_generation_for_labels_and_endpoints_not_annotations(backend: Backend) {
    let cluster = start(backend, &[], false);
    let created: EndpointSlice = cluster.create(json!({
        "metadata": {"name": "manual"}, "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}]
    }));
    assert_eq!(created.metadata.generation, Some(1));
    let labelled = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    let labelled = cluster.api::<EndpointSlice>().patch("manual", &labelled, &PostParams::default()).expect("patched");
    assert_eq!(labelled.metadata.generation, Some(2), "labels count");
    let annotated = Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}}));
    let annotated =
        cluster.api::<EndpointSlice>().patch("manual", &annotated, &PostParams::default()).expect("patched");
    assert_eq!(annotated.metadata.generation, Some(2), "annotations do not");
    let moved = Patch::Merge(json!({"endpoints": [{"addresses": ["10.0.0.2"]}]}));
    let moved = cluster.api::<EndpointSlice>().patch("manual", &moved, &PostParams::default()).expect("patched");
    assert_eq!(moved.metadata.generation, Some(3));
}
