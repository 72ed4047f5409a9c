use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointSubset, Pod, Service};
use serde_json::{Value, json};

use super::*;
use crate::controllers::testutil::merge_json;

fn pod(name: &str, ip: &str, ready: bool, extra: Value) -> Arc<Pod> {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "nginx",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    });
    merge_json(&mut value, extra);
    Arc::new(serde_json::from_value(value).expect("a pod"))
}

fn service(spec: Value) -> Service {
    serde_json::from_value(
        json!({"metadata": {"name": "web", "namespace": "ns", "labels": {"team": "a"}}, "spec": spec}),
    )
    .expect("a service")
}

fn ips(list: &Option<Vec<EndpointAddress>>) -> Vec<&str> {
    list.iter().flatten().map(|a| a.ip.as_str()).collect()
}

#[test]
fn ready_and_unready_pods_with_named_ports() {
    let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4"],
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                  {"name": "alt", "port": 81, "targetPort": 9000, "protocol": "TCP"}]}));
    let pods = [
        pod("b", "10.0.0.2", true, json!({})),
        pod("a", "10.0.0.1", false, json!({})),
        pod("done", "10.0.0.3", true, json!({"status": {"phase": "Succeeded"}})),
    ];
    let subsets = desired_subsets(&svc, &pods);
    assert_eq!(subsets.len(), 1);
    let subset = &subsets[0];
    assert_eq!(ips(&subset.addresses), ["10.0.0.2"]);
    assert_eq!(ips(&subset.not_ready_addresses), ["10.0.0.1"]);
    let ports: Vec<(Option<&str>, i32)> = subset.ports.iter().flatten().map(|p| (p.name.as_deref(), p.port)).collect();
    assert_eq!(ports, [(Some("alt"), 9000), (Some("http"), 8080)]);
    let address = &subset.addresses.as_ref().unwrap()[0];
    assert_eq!(address.node_name.as_deref(), Some("node-a"));
    let target = address.target_ref.as_ref().unwrap();
    assert_eq!(
        (target.kind.as_deref(), target.name.as_deref(), target.uid.as_deref()),
        (Some("Pod"), Some("b"), Some("uid-b"))
    );
}

#[test]
fn publish_not_ready_and_terminating_pods() {
    let spec = json!({"selector": {"app": "web"}, "clusterIP": "None", "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]});
    let deleting = json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}});
    let pods = [pod("a", "10.0.0.1", false, json!({})), pod("b", "10.0.0.2", true, deleting)];
    let subsets = desired_subsets(&service(spec.clone()), &pods);
    assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.0.0.1"]);
    assert!(subsets[0].addresses.is_none(), "a terminating pod is left out");
    let mut publish = spec;
    publish["publishNotReadyAddresses"] = true.into();
    let subsets = desired_subsets(&service(publish), &pods);
    assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1", "10.0.0.2"]);
}

#[test]
fn headless_services_without_ports_and_hostnames() {
    let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "None"}));
    let named = json!({"spec": {"hostname": "w0", "subdomain": "web"}});
    let subsets = desired_subsets(&svc, &[pod("a", "10.0.0.1", true, named)]);
    assert_eq!(subsets.len(), 1);
    assert!(subsets[0].ports.is_none());
    assert_eq!(subsets[0].addresses.as_ref().unwrap()[0].hostname.as_deref(), Some("w0"));
    // A Service with a cluster IP and no ports gets no addresses.
    let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.10"}));
    assert!(desired_subsets(&svc, &[pod("a", "10.0.0.1", true, json!({}))]).is_empty());
}

#[test]
fn the_service_ip_family_picks_the_pod_ip() {
    let dual = json!({"status": {"podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}});
    let svc = service(json!({"selector": {}, "clusterIP": "fd00:96::1", "ipFamilies": ["IPv6"],
        "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]}));
    let subsets =
        desired_subsets(&svc, &[pod("a", "10.0.0.1", true, dual.clone()), pod("b", "10.0.0.2", true, json!({}))]);
    assert_eq!(ips(&subsets[0].addresses), ["fd00::1"], "an IPv4-only pod has no address for an IPv6 Service");

    // Without ipFamilies (v1.36 infers them): the ClusterIP's family, else the pod IP's.
    let ports = json!([{"port": 80, "targetPort": 80, "protocol": "TCP"}]);
    let by_cluster_ip = service(json!({"selector": {}, "clusterIP": "fd00:96::1", "ports": ports}));
    let subsets = desired_subsets(&by_cluster_ip, &[pod("a", "10.0.0.1", true, dual.clone())]);
    assert_eq!(ips(&subsets[0].addresses), ["fd00::1"]);
    let headless = service(json!({"selector": {}, "clusterIP": "None", "ports": ports}));
    let subsets = desired_subsets(&headless, &[pod("a", "10.0.0.1", true, dual)]);
    assert_eq!(ips(&subsets[0].addresses), ["10.0.0.1"], "the pod IP's family");
}

fn addresses(count: usize, prefix: &str) -> Vec<EndpointAddress> {
    (0..count)
        .map(|i| EndpointAddress { ip: format!("{prefix}.{}.{}", i / 250, i % 250), ..Default::default() })
        .collect()
}

#[test]
fn over_capacity_truncates_not_ready_first_then_ready_in_proportion() {
    let mut small = vec![EndpointSubset { addresses: Some(addresses(10, "10.0")), ..Default::default() }];
    assert!(!truncate_endpoints(&mut small));
    let mut subsets = vec![
        EndpointSubset {
            addresses: Some(addresses(600, "10.1")),
            not_ready_addresses: Some(addresses(300, "10.2")),
            ports: None,
        },
        EndpointSubset {
            addresses: Some(addresses(200, "10.3")),
            not_ready_addresses: Some(addresses(100, "10.4")),
            ports: None,
        },
    ];
    assert!(truncate_endpoints(&mut subsets));
    let counts: Vec<(usize, usize)> = subsets
        .iter()
        .map(|s| (s.addresses.as_ref().unwrap().len(), s.not_ready_addresses.as_ref().unwrap().len()))
        .collect();
    assert_eq!(counts, [(600, 150), (200, 50)]);
    let mut ready_only = vec![
        EndpointSubset {
            addresses: Some(addresses(900, "10.5")),
            not_ready_addresses: Some(addresses(5, "10.6")),
            ports: None,
        },
        EndpointSubset { addresses: Some(addresses(300, "10.7")), ..Default::default() },
    ];
    assert!(truncate_endpoints(&mut ready_only));
    let counts: Vec<(usize, usize)> = ready_only
        .iter()
        .map(|s| (s.addresses.as_ref().unwrap().len(), s.not_ready_addresses.as_ref().map_or(0, Vec::len)))
        .collect();
    assert_eq!(counts, [(750, 0), (250, 0)]);
}

#[test]
fn desired_endpoints_carry_labels_and_annotations() {
    let headless = service(json!({"selector": {"app": "web"}, "clusterIP": "None"}));
    let current = Endpoints::default();
    let time: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let desired = desired_endpoints(&current, Vec::new(), &headless, Some(time));
    let labels = desired.metadata.labels.clone().unwrap();
    assert_eq!(labels.get(LABEL_HEADLESS).map(String::as_str), Some(""));
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert_eq!(labels.get(LABEL_MANAGED_BY).map(String::as_str), Some("endpoint-controller"));
    let annotations = desired.metadata.annotations.clone().unwrap();
    assert_eq!(annotations.get(ANNOTATION_TRIGGER_TIME).map(String::as_str), Some("2025-01-01T00:00:00Z"));
    assert!(up_to_date(&desired, &[], &headless), "the headless label does not count as a difference");
    let again = desired_endpoints(&desired, Vec::new(), &service(json!({"clusterIP": "10.96.0.1"})), None);
    assert!(!again.metadata.labels.unwrap().contains_key(LABEL_HEADLESS));
    assert!(!again.metadata.annotations.unwrap().contains_key(ANNOTATION_TRIGGER_TIME));
}

#[test]
fn written_endpoints_read_back_as_up_to_date() {
    let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4"],
        "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}));
    let pods = [pod("a", "10.0.0.1", true, json!({})), pod("b", "10.0.0.2", false, json!({}))];
    let subsets = desired_subsets(&svc, &pods);
    let written = desired_endpoints(&Endpoints::default(), subsets.clone(), &svc, None);
    // As the API server stores it: empty strings of plain fields left out, versions added.
    let mut stored = serde_json::to_value(&written).expect("json");
    stored["metadata"]["resourceVersion"] = "12".into();
    stored["subsets"][0]["addresses"][0]["targetRef"]["resourceVersion"] = "99".into();
    let stored: Endpoints = serde_json::from_value(stored).expect("endpoints");
    assert!(stored.subsets.as_ref().unwrap()[0].ports.as_ref().unwrap()[0].name.is_none());
    assert!(up_to_date(&stored, &subsets, &svc));
    let fewer = desired_subsets(&svc, &pods[..1]);
    assert!(!up_to_date(&stored, &fewer, &svc));
    let mut relabelled = svc.clone();
    relabelled.metadata.labels = None;
    assert!(!up_to_date(&stored, &subsets, &relabelled));
    // Subsets stored in another order (an older repacking's) count as the same once repacked.
    let mut reordered = stored.clone();
    let subset = &mut reordered.subsets.as_mut().unwrap()[0];
    let (ready, not_ready) = (subset.addresses.take(), subset.not_ready_addresses.take());
    let ports = subset.ports.clone();
    reordered.subsets = Some(vec![
        EndpointSubset { addresses: None, not_ready_addresses: not_ready, ports: ports.clone() },
        EndpointSubset { addresses: ready, not_ready_addresses: None, ports },
    ]);
    assert_ne!(reordered.subsets.as_deref().unwrap(), subsets.as_slice());
    assert!(up_to_date(&reordered, &subsets, &svc), "equal after RepackSubsets");
    // Endpoints written before v1.33, without the managed-by label, are rewritten.
    let mut unlabelled = stored.clone();
    unlabelled.metadata.labels.as_mut().unwrap().remove(LABEL_MANAGED_BY);
    assert!(!up_to_date(&unlabelled, &subsets, &svc));
}

/// A controller over informers that watch nothing: the tests feed them.
fn controller() -> Arc<EndpointsController> {
    let informers =
        crate::runtime::informer::SharedInformerFactory::new(crate::client::unreachable_client(), Duration::ZERO);
    let controller = Arc::new(EndpointsController {
        client: crate::client::unreachable_client(),
        services: informers.informer(),
        pods: informers.informer(),
        endpoints: informers.informer(),
        queue: WorkQueue::new("endpoint-test"),
        recorder: EventRecorder::new(crate::client::unreachable_client(), "endpoint-controller"),
        batch_period: Duration::ZERO,
        trigger_times: util::TriggerTimeTracker::default(),
        stale: Mutex::new(HashMap::new()),
        waiting_for_cache: Mutex::new(HashSet::new()),
    });
    let handler = controller.clone();
    controller.endpoints.add_handler(move |event: &Event<Endpoints>| handler.on_endpoints_event(event));
    controller
}

fn endpoints(version: &str) -> Endpoints {
    serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns", "resourceVersion": version}}))
        .expect("endpoints")
}

/// kubernetes/kubernetes#126578: a sync that fails on a stale cache is queued again when the
/// cache catches up, whatever its retry count, and not before.
#[test]
fn a_sync_waiting_for_the_cache_is_queued_again_when_it_catches_up() {
    let controller = controller();
    controller.services.apply_for_test(service(json!({"selector": {"app": "web"}})));
    controller.endpoints.apply_for_test(endpoints("5"));
    controller.stale.lock().insert("ns/web".into(), "5".into());
    let error =
        controller.sync_service("ns/web").expect_err("the cache holds the version our write replaced").to_string();
    assert!(error.contains("endpoints informer cache is out of date"), "{error}");
    assert_eq!(controller.queue.len(), 0, "nothing to requeue while the cache is behind");
    controller.endpoints.apply_for_test(endpoints("5"));
    assert_eq!(controller.queue.len(), 0, "the same version again is no catching up");
    controller.endpoints.apply_for_test(endpoints("7"));
    assert_eq!(controller.queue.len(), 1, "queued once the cache moved past the stale version");
    controller.endpoints.apply_for_test(endpoints("8"));
    assert_eq!(controller.queue.len(), 1, "once");
    assert!(controller.waiting_for_cache.lock().is_empty());
}

/// The cache may catch up between the sync's read and its parking: the sync queues itself.
#[test]
fn a_cache_that_caught_up_during_the_sync_requeues_at_once() {
    let controller = controller();
    controller.endpoints.apply_for_test(endpoints("7"));
    controller.stale.lock().insert("ns/web".into(), "5".into());
    controller.waiting_for_cache.lock().insert("ns/web".into());
    controller.requeue_if_cache_caught_up("ns/web");
    assert_eq!(controller.queue.len(), 1);
}

use crate::controllers::testutil::conflict;

/// A conflicting write of the Endpoints reaches the queue as a conflict (it was a plain
/// failure), with Go's text of the error.
#[test]
fn a_conflicting_write_reaches_the_queue_as_a_conflict() {
    let error = SyncError::from(Error::Write(conflict()));
    assert_eq!(error, SyncError::Conflict("the object has been modified".into()));
}
