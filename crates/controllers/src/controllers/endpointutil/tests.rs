use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::*;

pub(crate) fn pod(value: Value) -> Pod {
    serde_json::from_value(value).expect("a pod")
}

fn service(value: Value) -> Service {
    serde_json::from_value(value).expect("a service")
}

fn web_pod() -> Pod {
    pod(json!({
        "metadata": {"name": "web-1", "namespace": "ns", "uid": "u1", "labels": {"app": "web"}, "resourceVersion": "1"},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "app", "image": "nginx", "ports": [
                {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"name": "dns", "containerPort": 5353, "protocol": "UDP"}]}],
            "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                "ports": [{"name": "admin", "containerPort": 9901, "protocol": "TCP"}]},
                {"name": "setup", "image": "busybox", "ports": [{"name": "setup", "containerPort": 1, "protocol": "TCP"}]}]
        },
        "status": {"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:10Z"}]}
    }))
}

fn service_port(target: Value, protocol: &str) -> k8s_openapi::api::core::v1::ServicePort {
    serde_json::from_value(json!({"port": 80, "targetPort": target, "protocol": protocol})).expect("a port")
}

#[test]
fn ports_resolve_by_number_or_by_name_and_protocol() {
    let pod = web_pod();
    assert_eq!(find_port(&pod, &service_port(json!(8443), "TCP")), Ok(8443));
    assert_eq!(find_port(&pod, &service_port(json!("http"), "TCP")), Ok(8080));
    assert_eq!(find_port(&pod, &service_port(json!("dns"), "UDP")), Ok(5353));
    assert_eq!(find_port(&pod, &service_port(json!("admin"), "TCP")), Ok(9901), "sidecar ports count");
    assert!(find_port(&pod, &service_port(json!("dns"), "TCP")).is_err(), "the protocol must match");
    assert!(find_port(&pod, &service_port(json!("setup"), "TCP")).is_err(), "plain init containers do not count");
    assert_eq!(
        find_port(&pod, &service_port(json!("nope"), "TCP")).map_err(|e| e.to_string()),
        Err("no suitable port for manifest: u1".into())
    );
}

#[test]
fn terminal_ipless_and_deleted_pods_are_left_out() {
    let ready = web_pod();
    assert!(should_pod_be_in_endpoints(&ready, false));
    let mut done = ready.clone();
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(!should_pod_be_in_endpoints(&done, true));
    let mut pending = ready.clone();
    pending.status.as_mut().unwrap().pod_ip = None;
    pending.status.as_mut().unwrap().pod_ips = None;
    assert!(!should_pod_be_in_endpoints(&pending, true));
    let mut deleting = ready.clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2025-01-01T00:00:00Z".parse().unwrap()));
    assert!(!should_pod_be_in_endpoints(&deleting, false));
    assert!(should_pod_be_in_endpoints(&deleting, true));
}

#[test]
fn hostname_needs_the_service_as_subdomain() {
    let mut pod = web_pod();
    let svc = service(json!({"metadata": {"name": "web", "namespace": "ns"}}));
    assert_eq!(hostname_for(&pod, &svc), None);
    pod.spec.as_mut().unwrap().hostname = Some("w1".into());
    assert_eq!(hostname_for(&pod, &svc), None);
    pod.spec.as_mut().unwrap().subdomain = Some("web".into());
    assert_eq!(hostname_for(&pod, &svc), Some("w1".into()));
}

#[test]
fn pod_changes_map_to_the_services_they_concern() {
    let mut store: Vec<Arc<Service>> = Vec::new();
    for (name, selector) in [("web", json!({"app": "web"})), ("api", json!({"app": "api"})), ("all", json!({}))] {
        let svc = service(json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"selector": selector}}));
        store.push(Arc::new(svc));
    }
    store.push(Arc::new(service(json!({"metadata": {"name": "manual", "namespace": "ns"}, "spec": {}}))));
    let elsewhere = json!({"metadata": {"name": "web", "namespace": "other"}, "spec": {"selector": {}}});
    store.push(Arc::new(service(elsewhere)));
    let old = web_pod();
    assert_eq!(pod_service_memberships(&store, &old).into_iter().collect::<Vec<_>>(), ["ns/all", "ns/web"]);
    // A resync, and a change that cannot alter endpoints, concern nobody.
    assert!(services_to_update_on_pod_change(&store, &old, &old).is_empty());
    let mut annotated = old.clone();
    annotated.metadata.resource_version = Some("2".into());
    annotated.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
    assert!(services_to_update_on_pod_change(&store, &old, &annotated).is_empty());
    // Readiness concerns the selecting Services.
    let mut unready = annotated.clone();
    unready.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
    assert_eq!(services_to_update_on_pod_change(&store, &old, &unready).len(), 2);
    // A label change alone concerns the Services that started or stopped selecting the pod.
    let mut relabelled = annotated.clone();
    relabelled.metadata.labels = Some([("app".to_string(), "api".to_string())].into());
    let changed: Vec<String> = services_to_update_on_pod_change(&store, &old, &relabelled).into_iter().collect();
    assert_eq!(changed, ["ns/api", "ns/web"]);
    // With the endpoint changing too, all of them.
    relabelled.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
    assert_eq!(services_to_update_on_pod_change(&store, &old, &relabelled).len(), 3);
}

#[test]
fn trigger_time_is_the_creation_first_then_the_earliest_new_transition() {
    let tracker = TriggerTimeTracker::default();
    let svc =
        service(json!({"metadata": {"name": "web", "namespace": "ns", "creationTimestamp": "2025-01-01T00:00:00Z"}}));
    let first = Arc::new(web_pod());
    let created: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    assert_eq!(tracker.compute(&svc, std::slice::from_ref(&first)), Some(created));
    assert_eq!(tracker.compute(&svc, std::slice::from_ref(&first)), None, "nothing new");
    let mut later = web_pod();
    later.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2025-01-01T00:01:00Z".parse().unwrap()));
    let mut other = web_pod();
    other.metadata.name = Some("web-2".into());
    other.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2025-01-01T00:00:30Z".parse().unwrap()));
    let time = tracker.compute(&svc, &[Arc::new(later), Arc::new(other)]);
    assert_eq!(time, Some("2025-01-01T00:00:30Z".parse().unwrap()));
    assert_eq!(format_trigger_time(time.unwrap()), "2025-01-01T00:00:30Z");
    tracker.delete_service("ns", "web");
    assert_eq!(tracker.compute(&svc, &[]), Some(created), "a forgotten Service starts over");
}

fn slice(uid: &str, generation: i64) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            generation: Some(generation),
            labels: Some([(LABEL_SERVICE_NAME.to_string(), "web".to_string())].into()),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: Some(Vec::new()),
        ports: None,
    }
}

#[test]
fn slice_tracker_spots_stale_caches_and_own_writes() {
    let tracker = EndpointSliceTracker::default();
    let svc = service(json!({"metadata": {"name": "web", "namespace": "ns"}}));
    assert!(!tracker.stale_slices(&svc, &[]));
    assert!(tracker.should_sync(&slice("a", 1)));
    tracker.update(&slice("a", 2));
    assert!(!tracker.has(&slice("b", 1)));
    assert!(tracker.has(&slice("a", 1)));
    assert!(!tracker.should_sync(&slice("a", 2)), "our own write");
    assert!(tracker.should_sync(&slice("a", 3)), "someone else's");
    assert!(tracker.stale_slices(&svc, &[Arc::new(slice("a", 1))]), "older than written");
    assert!(tracker.stale_slices(&svc, &[]), "a created slice is missing");
    assert!(!tracker.stale_slices(&svc, &[Arc::new(slice("a", 2))]));
    tracker.expect_deletion(&slice("a", 2));
    assert!(tracker.stale_slices(&svc, &[Arc::new(slice("a", 2))]), "a deleted slice is still there");
    assert!(!tracker.stale_slices(&svc, &[]));
    assert!(tracker.handle_deletion(&slice("a", 2)), "an expected deletion");
    tracker.update(&slice("c", 1));
    assert!(!tracker.handle_deletion(&slice("c", 1)), "an unexpected deletion");
    tracker.update(&slice("d", 1));
    tracker.delete_service("ns", "web");
    assert!(!tracker.has(&slice("d", 1)));
}

fn endpoint(ip: &str, name: &str, ready: bool) -> Endpoint {
    Endpoint {
        addresses: vec![ip.into()],
        conditions: Some(EndpointConditions { ready: Some(ready), ..EndpointConditions::default() }),
        target_ref: Some(k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("Pod".into()),
            name: Some(name.into()),
            resource_version: Some("7".into()),
            ..Default::default()
        }),
        ..Endpoint::default()
    }
}

#[test]
fn endpoint_sets_match_by_identity_and_compare_the_rest() {
    let mut set = EndpointSet::default();
    set.insert(endpoint("10.0.0.2", "b", true));
    set.insert(endpoint("10.0.0.1", "a", true));
    set.insert(endpoint("10.0.0.1", "a", false));
    assert_eq!(set.len(), 2);
    let found = set.get(&endpoint("10.0.0.1", "a", true)).cloned().expect("found by identity");
    assert!(!endpoints_equal_beyond_hash(&found, &endpoint("10.0.0.1", "a", true)));
    let mut other_version = endpoint("10.0.0.1", "a", false);
    other_version.target_ref.as_mut().unwrap().resource_version = Some("9".into());
    assert!(endpoints_equal_beyond_hash(&found, &other_version), "the resourceVersion does not count");
    assert_eq!(set.pop().map(|e| e.addresses), Some(vec!["10.0.0.1".to_string()]));
    assert!(set.remove(&endpoint("10.0.0.2", "b", true)).is_some());
    assert!(set.is_empty());
}

#[test]
fn ips_parse_sloppily_and_port_keys_ignore_order() {
    assert_eq!(parse_ip_sloppy("010.000.000.001").map(|ip| ip.to_string()), Some("10.0.0.1".into()));
    assert!(parse_ip_sloppy("10.0.0").is_none());
    assert!(is_ipv6("fd00::1"));
    assert!(!is_ipv6("10.0.0.1"));
    let port = |n: i32| k8s_openapi::api::discovery::v1::EndpointPort { port: Some(n), ..Default::default() };
    assert_eq!(port_map_key(&[port(1), port(2)]), port_map_key(&[port(2), port(1)]));
    assert_ne!(port_map_key(&[port(1)]), port_map_key(&[port(2)]));
}

#[test]
fn endpoints_selector_skips_external_name_and_selectorless_services() {
    let selector = json!({"app": "web"});
    let cluster_ip = service(json!({"metadata": {"name": "web"}, "spec": {"selector": selector}}));
    let external =
        service(json!({"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "selector": selector}}));
    let manual = service(json!({"metadata": {"name": "manual"}, "spec": {}}));
    let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into_iter().collect();
    assert!(endpoints_selector(&cluster_ip).expect("a selector").matches(Some(&labels)));
    assert!(endpoints_selector(&external).is_none());
    assert!(endpoints_selector(&manual).is_none());
}
