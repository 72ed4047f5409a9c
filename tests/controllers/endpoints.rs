//! The endpoints, EndpointSlice and EndpointSlice mirroring controllers on both backends:
//! pods of a ReplicaSet run on simulated nodes and the Endpoints and EndpointSlices of their
//! Service follow them becoming ready, not ready and fewer; custom Endpoints of a selector-less
//! Service are mirrored into slices; many pods spread over several slices; the
//! `trafficDistribution` values give zone hints (`PreferSameZone`) and node hints too
//! (`PreferSameNode`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, PodCondition, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm::app::controllers::ControllerDescriptor;
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, ListParams, Patch, PostParams};
use kcm_sandbox::sandbox::nodes::NodeOptions;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, Namespaced, eventually, from};

const READY_GATE: &str = "example.com/in-rotation";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The managed-by value of the EndpointSlice controller's slices.
const SLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";

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
    (slices.iter().flat_map(|s| s.endpoints.iter().flatten()))
        .map(|e| (e.addresses.join(","), e.conditions.as_ref().and_then(|c| c.ready)))
        .collect()
}

/// Slices in one screen: name, size and the first endpoints as `address(ready/serving/terminating)`.
fn describe(slices: &[EndpointSlice]) -> String {
    let flag = |value: Option<bool>| match value {
        Some(true) => "t",
        Some(false) => "f",
        None => "-",
    };
    let described: Vec<String> = slices
        .iter()
        .map(|slice| {
            let shown: Vec<String> = (slice.endpoints.iter().flatten().take(5))
                .map(|e| {
                    let c = e.conditions.clone().unwrap_or_default();
                    format!("{}({}/{}/{})", e.addresses.join(","), flag(c.ready), flag(c.serving), flag(c.terminating))
                })
                .collect();
            let more = if slice.endpoints.as_ref().map_or(0, Vec::len) > shown.len() { ", …" } else { "" };
            let name = slice.metadata.name.as_deref().unwrap_or("?");
            format!("{name} ({} endpoints): {}{more}", slice.endpoints.as_ref().map_or(0, Vec::len), shown.join(", "))
        })
        .collect();
    format!("{} slices [{}]", slices.len(), described.join("; "))
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn create<K: Namespaced>(&self, value: Value) -> K;
    fn slices(&self, service: &str, manager: &str) -> Vec<EndpointSlice>;
    fn endpoints(&self, name: &str) -> Option<Endpoints>;
    fn endpoints_with(&self, name: &str, expected: (Vec<String>, Vec<String>)) -> Endpoints;
    fn slices_where(&self, service: &str, what: &str, check: impl Fn(&[EndpointSlice]) -> bool) -> Vec<EndpointSlice>;
    fn one_slice_with(&self, service: &str, expected: &BTreeMap<String, Option<bool>>) -> EndpointSlice;
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

    /// Waits until the Endpoints `name` have exactly these (ready, not ready) addresses.
    fn endpoints_with(&self, name: &str, expected: (Vec<String>, Vec<String>)) -> Endpoints {
        harness::eventually_seen(&format!("Endpoints {name} with (ready, not ready) addresses {expected:?}"), || {
            let endpoints = self.endpoints(name);
            let came = endpoints.as_ref().map(addresses);
            match endpoints {
                Some(endpoints) if came.as_ref() == Some(&expected) => Ok(endpoints),
                _ => Err(format!("{came:?}")),
            }
        })
    }

    /// Waits until the EndpointSlice controller's slices of `service` pass `check`.
    fn slices_where(&self, service: &str, what: &str, check: impl Fn(&[EndpointSlice]) -> bool) -> Vec<EndpointSlice> {
        harness::eventually_seen(what, || {
            let slices = self.slices(service, SLICE_CONTROLLER);
            if check(&slices) { Ok(slices) } else { Err(describe(&slices)) }
        })
    }

    /// Waits until `service` has one slice of the EndpointSlice controller, holding each address
    /// of `expected` once with its ready condition, and nothing else. Few endpoints always end
    /// in one slice (upstream fills an existing slice with what fits), but a single reading may
    /// catch the controller between two writes.
    fn one_slice_with(&self, service: &str, expected: &BTreeMap<String, Option<bool>>) -> EndpointSlice {
        let what = format!("one slice of {service} with the endpoints (address → ready) {expected:?}");
        let mut slices = self.slices_where(service, &what, |slices| {
            slices.len() == 1
                && slices[0].endpoints.as_ref().map_or(0, Vec::len) == expected.len()
                && slice_endpoints(slices) == *expected
        });
        slices.remove(0)
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
    let pods = harness::eventually_seen("3 running pods of web", || {
        let pods = cluster.running_pods("web");
        if pods.len() == 3 { Ok(pods) } else { Err(format!("{} running, with IPs {:?}", pods.len(), pod_ips(&pods))) }
    });
    let all_ips = pod_ips(&pods);
    let endpoints = cluster.endpoints_with("web", (vec![], all_ips.clone()));
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
    let slice = cluster.one_slice_with("web", &all_unready);
    assert_eq!(slice.address_type, "IPv4");
    assert!(slice.metadata.name.as_deref().is_some_and(|n| n.starts_with("web-")));
    assert_eq!(slice.metadata.labels.as_ref().and_then(|l| l.get("team")).map(String::as_str), Some("a"));
    let owner = &slice.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!((owner.kind.as_str(), owner.api_version.as_str()), ("Service", "v1"));
    assert_eq!((owner.uid.as_str(), owner.controller), (service.metadata.uid.as_deref().unwrap_or(""), Some(true)));
    let port = &slice.ports.as_ref().expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port, port.protocol.as_deref()), (Some("http"), Some(8080), Some("TCP")));
    let endpoint = &slice.endpoints.as_ref().expect("endpoints")[0];
    let conditions = endpoint.conditions.clone().unwrap_or_default();
    assert_eq!((conditions.serving, conditions.terminating), (Some(false), Some(false)));
    assert!(endpoint.zone.as_deref().is_some_and(|z| z.starts_with("zone-")), "{endpoint:?}");
    assert!(endpoint.node_name.is_some() && endpoint.target_ref.is_some());

    // The headless Service: its label, no ports.
    let headless = cluster.endpoints_with("web-headless", (vec![], all_ips.clone()));
    let labels = headless.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("service.kubernetes.io/headless").map(String::as_str), Some(""));
    assert!(headless.subsets.as_ref().expect("subsets")[0].ports.as_ref().is_none_or(Vec::is_empty));
    let headless_slice = cluster.one_slice_with("web-headless", &all_unready);
    let labels = headless_slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("service.kubernetes.io/headless").map(String::as_str), Some(""));

    // The gates open: every address is ready. Transition times have one-second precision: a
    // pause makes the Ready transitions newer than the ones the controllers saw before, so
    // that they count as the trigger of the change.
    std::thread::sleep(Duration::from_millis(1100));
    for pod in &pods {
        cluster.set_gate(pod.metadata.name.as_deref().unwrap_or(""), true);
    }
    cluster.endpoints_with("web", (all_ips.clone(), vec![]));
    let all_ready: BTreeMap<String, Option<bool>> = all_ips.iter().map(|ip| (ip.clone(), Some(true))).collect();
    let ready_slice = cluster.one_slice_with("web", &all_ready);
    assert_eq!(ready_slice.metadata.name, slice.metadata.name, "updated in place, not recreated");
    // The latest Ready transition is the change that triggered this version. (Not checked on
    // the Endpoints: as upstream, a retry after a stale cache clears it there.)
    let annotations = ready_slice.metadata.annotations.clone().unwrap_or_default();
    let trigger = annotations.get("endpoints.kubernetes.io/last-change-trigger-time");
    let trigger = trigger.unwrap_or_else(|| panic!("expected a trigger time; came the annotations {annotations:?}"));
    assert!(trigger.parse::<jiff::Timestamp>().is_ok(), "{trigger}");

    // One pod goes out of rotation.
    let out = &pods[0];
    let out_ip = out.status.as_ref().and_then(|s| s.pod_ip.clone()).expect("an IP");
    cluster.set_gate(out.metadata.name.as_deref().unwrap_or(""), false);
    let rest: Vec<String> = all_ips.iter().filter(|ip| **ip != out_ip).cloned().collect();
    cluster.endpoints_with("web", (rest, vec![out_ip.clone()]));
    let mut expected = all_ready.clone();
    expected.insert(out_ip.clone(), Some(false));
    let out_slice = cluster.one_slice_with("web", &expected);
    assert_eq!(out_slice.metadata.name, slice.metadata.name, "updated in place, not recreated");

    // Scaled down to one: the others leave both.
    let patch = Patch::Merge(json!({"spec": {"replicas": 1}}));
    cluster.api::<ReplicaSet>().patch("web", &patch, &PostParams::default()).expect("scaled");
    let left = harness::eventually_seen("one pod left", || {
        let pods = cluster.api::<Pod>().list(&ListParams::default()).expect("pods").items;
        let names: Vec<String> = pods.iter().filter_map(|p| p.metadata.name.clone()).collect();
        if pods.len() == 1 { Ok(pods) } else { Err(format!("the pods {names:?}")) }
    });
    let left_ip = pod_ips(&left);
    harness::eventually_seen(&format!("Endpoints web with the address {left_ip:?} only"), || {
        let came = cluster.endpoints("web").map(|e| addresses(&e));
        match &came {
            Some((ready, not_ready)) if ready.iter().chain(not_ready).eq(left_ip.iter()) => Ok(()),
            _ => Err(format!("(ready, not ready) = {came:?}")),
        }
    });
    cluster.slices_where("web", &format!("slices with the endpoint {left_ip:?} only"), |slices| {
        slices
            .iter()
            .flat_map(|s| s.endpoints.iter().flatten())
            .map(|e| e.addresses.join(","))
            .eq(left_ip.iter().cloned())
    });

    // The kubelet of the last pod stops, then the ReplicaSet is scaled to zero: the pod is
    // deleted and, with no kubelet to finish it, stays terminating (and as Ready as it was). It
    // leaves the Endpoints; its slice endpoint is terminating, not ready, serving if Ready.
    // Deleting the pod by hand instead would make the ReplicaSet start a replacement on the
    // live node, whose not-ready address may or may not come before the checks below do.
    let last_name = left[0].metadata.name.clone().expect("a name");
    let node = left[0].spec.as_ref().and_then(|s| s.node_name.clone()).expect("a node");
    assert!(cluster.nodes.as_ref().expect("nodes").stop_heartbeat(&node));
    // Read once the kubelet is stopped: no status write follows.
    let last = cluster.api::<Pod>().get(&last_name).expect("the last pod");
    let conditions = last.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let serving = conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
    let patch = Patch::Merge(json!({"spec": {"replicas": 0}}));
    cluster.api::<ReplicaSet>().patch("web", &patch, &PostParams::default()).expect("scaled");
    cluster.endpoints_with("web", (vec![], vec![]));
    let what = format!("the endpoint {left_ip:?} only, terminating, not ready, serving={serving}");
    cluster.slices_where("web", &what, |slices| {
        let endpoints: Vec<_> = slices.iter().flat_map(|s| s.endpoints.iter().flatten()).collect();
        let [endpoint] = endpoints.as_slice() else { return false };
        let c = endpoint.conditions.clone().unwrap_or_default();
        endpoint.addresses == left_ip && (c.ready, c.serving, c.terminating) == (Some(false), Some(serving), Some(true))
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
    // `--max-endpoints-per-slice`'s default.
    const MAX: usize = 100;
    let cluster = start(backend, &[named("endpoints-controller"), named("endpointslice-controller")], false);
    let node: Node = from(json!({"metadata": {"name": "node-x", "labels": {"topology.kubernetes.io/zone": "zone-x"}}}));
    Api::<Node>::cluster(&cluster.client).create(&node, &PostParams::default()).expect("node");
    cluster.create::<Service>(json!({
        "metadata": {"name": "big"},
        "spec": {"selector": {"app": "big"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }));
    // Pods bound to a node nobody runs, with the status a kubelet would write.
    let count = 250;
    let ip = |i: usize| format!("10.8.{}.{}", i / 200, i % 200 + 1);
    for i in 0..count {
        let name = format!("big-{i}");
        let pod: Pod = cluster.create(json!({
            "metadata": {"name": name, "labels": {"app": "big"}},
            "spec": {"nodeName": "node-x", "containers": [{"name": "app", "image": "nginx:1.27"}]}
        }));
        let address = ip(i);
        let mut status = pod.clone();
        status.status = Some(from(json!({
            "phase": "Running", "podIP": address, "podIPs": [{"ip": address}],
            "conditions": [{"type": "Ready", "status": "True"}]
        })));
        cluster.api::<Pod>().replace_status(&name, &status, &PostParams::default()).expect("status");
    }
    let expected: BTreeSet<String> = (0..count).map(ip).collect();
    let what = format!("each of the {count} pods once in the slices of big, ready, at most {MAX} a slice");
    let slices = harness::eventually_seen(&what, || {
        let slices = cluster.slices("big", SLICE_CONTROLLER);
        spread(&slices, &expected, MAX).map(|()| slices)
    });
    // How many slices hold them depends on how the pods were batched into syncs, which the
    // machine's speed decides: upstream's reconciler puts the endpoints new to a sync into an
    // existing slice only if they all fit there, else into a new slice (a sync of all 250
    // makes 100 + 100 + 50). So a slice is only started for endpoints that fit in no other
    // slice, and as endpoints are only added here, any two slices together hold more than
    // 100: one slice at most is half full or less, and 250 endpoints make 3 or 4 slices.
    let mut sizes: Vec<usize> = slices.iter().map(|s| s.endpoints.as_ref().map_or(0, Vec::len)).collect();
    sizes.sort_unstable();
    assert!(
        (3..=4).contains(&sizes.len()) && sizes[0] + sizes[1] > MAX,
        "expected 3 or 4 slices, no two holding {MAX} endpoints or fewer together; came slices of sizes {sizes:?}"
    );
    let zoneless: Vec<String> = (slices.iter().flat_map(|s| s.endpoints.iter().flatten()))
        .filter(|e| e.zone.as_deref() != Some("zone-x"))
        .map(|e| format!("{}: {:?}", e.addresses.join(","), e.zone))
        .collect();
    assert!(
        zoneless.is_empty(),
        "expected every endpoint in node-x's zone-x; came {} elsewhere, first {:?}",
        zoneless.len(),
        &zoneless[..zoneless.len().min(5)]
    );
    let all: Vec<String> = expected.iter().cloned().collect();
    let endpoints = harness::eventually_seen(&format!("Endpoints big with the {count} addresses, all ready"), || {
        let endpoints = cluster.endpoints("big");
        let (ready, not_ready) = endpoints.as_ref().map(addresses).unwrap_or_default();
        match endpoints {
            Some(endpoints) if ready == all && not_ready.is_empty() => Ok(endpoints),
            found => Err(format!(
                "{}{} ready addresses ({} of them expected), {} not ready",
                if found.is_none() { "no Endpoints; " } else { "" },
                ready.len(),
                ready.iter().filter(|a| expected.contains(*a)).count(),
                not_ready.len()
            )),
        }
    });
    let annotations = endpoints.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("endpoints.kubernetes.io/over-capacity"),
        "expected no over-capacity annotation at {count} addresses; came {annotations:?}"
    );
}

/// Whether `slices` hold each address of `expected` exactly once, ready, and nothing else, in
/// slices of at most `max` endpoints; if not, what they hold instead, in one screen.
fn spread(slices: &[EndpointSlice], expected: &BTreeSet<String>, max: usize) -> Result<(), String> {
    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for endpoint in slices.iter().flat_map(|s| s.endpoints.iter().flatten()) {
        *times.entry(endpoint.addresses.join(",")).or_default() += 1;
    }
    let missing: Vec<&String> = expected.iter().filter(|a| !times.contains_key(*a)).collect();
    let repeated: Vec<&String> = times.iter().filter(|(_, n)| **n > 1).map(|(a, _)| a).collect();
    let unexpected: Vec<&String> = times.keys().filter(|a| !expected.contains(*a)).collect();
    let not_ready: Vec<String> = (slices.iter().flat_map(|s| s.endpoints.iter().flatten()))
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(true))
        .map(|e| e.addresses.join(","))
        .collect();
    let sizes: Vec<usize> = slices.iter().map(|s| s.endpoints.as_ref().map_or(0, Vec::len)).collect();
    let oversized = sizes.iter().any(|n| *n > max);
    if missing.is_empty() && repeated.is_empty() && unexpected.is_empty() && not_ready.is_empty() && !oversized {
        return Ok(());
    }
    let first = |list: &[&String]| format!("{} {:?}", list.len(), list.iter().take(5).collect::<Vec<_>>());
    Err(format!(
        "slices of sizes {sizes:?}; missing {}; repeated {}; unexpected {}; not ready {} {:?}",
        first(&missing),
        first(&repeated),
        first(&unexpected),
        not_ready.len(),
        not_ready.iter().take(5).collect::<Vec<_>>()
    ))
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

/// An endpoint's zone hint, zone, node hint and node.
type Hinted = (Option<String>, Option<String>, Option<String>, Option<String>);

on_both_backends!(prefer_same_zone_and_node_give_their_hints);
/// PreferSameTrafficDistribution (GA since v1.35; v1.33 gave these values no hints):
/// `PreferSameZone` hints each ready endpoint's zone, `PreferSameNode` its zone and node.
fn prefer_same_zone_and_node_give_their_hints(backend: Backend) {
    let cluster = start(backend, &[named("replicaset-controller"), named("endpointslice-controller")], true);
    for (name, distribution) in [("same-zone", "PreferSameZone"), ("same-node", "PreferSameNode")] {
        cluster.create::<Service>(json!({"metadata": {"name": name}, "spec": {"selector": {"app": "hinted"},
            "trafficDistribution": distribution, "ports": [{"port": 80, "targetPort": 8080}]}}));
    }
    cluster.create::<ReplicaSet>(json!({"metadata": {"name": "hinted"}, "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "hinted"}},
        "template": {"metadata": {"labels": {"app": "hinted"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}));
    // (zone hint, node hint) of each endpoint, with its own zone and node, once all are ready.
    let hints = |service: &str| {
        let what = format!("two ready endpoints of {service} with hints");
        let slices = cluster.slices_where(service, &what, |slices| {
            let endpoints: Vec<_> = slices.iter().flat_map(|s| s.endpoints.iter().flatten()).collect();
            endpoints.len() == 2
                && endpoints
                    .iter()
                    .all(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true) && e.hints.is_some())
        });
        let first = |names: Option<Vec<String>>| names.and_then(|n| n.into_iter().next());
        let mut seen: Vec<Hinted> = (slices.iter())
            .flat_map(|s| s.endpoints.iter().flatten())
            .map(|e| {
                let hints = e.hints.as_ref();
                let zone =
                    first(hints.and_then(|h| h.for_zones.as_ref()).map(|z| z.iter().map(|z| z.name.clone()).collect()));
                let node =
                    first(hints.and_then(|h| h.for_nodes.as_ref()).map(|n| n.iter().map(|n| n.name.clone()).collect()));
                (zone, e.zone.clone(), node, e.node_name.clone())
            })
            .collect();
        seen.sort();
        seen
    };
    for (zone_hint, zone, node_hint, _) in hints("same-zone") {
        assert!(zone.is_some(), "the simulated nodes have zones");
        assert_eq!((zone_hint, node_hint), (zone, None), "PreferSameZone: the zone only");
    }
    for (zone_hint, zone, node_hint, node) in hints("same-node") {
        assert!(node.is_some());
        assert_eq!((zone_hint, node_hint), (zone, node), "PreferSameNode: the zone and the node");
    }
}
