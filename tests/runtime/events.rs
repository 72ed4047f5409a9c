//! The event recorder against both backends: Events as upstream's `tools/record` writes them
//! (and kube-apiserver's validation accepts), repeats patched, similar events aggregated, spam
//! dropped, and recording that never blocks while the API server is down.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm::client::{Api, Client, ClientOptions, DeleteParams, ListParams};
use kcm::runtime::events::{EventRecorder, EventType, RecorderOptions, object_reference};

use crate::harness;

use harness::{Backend, TestServer};

/// Generous bound for the sink thread to catch up on a loaded machine.
const FLUSH: Duration = Duration::from_secs(120);

fn server(backend: Backend) -> (TestServer, Client) {
    let server = TestServer::start(backend).expect("the API server starts");
    let client_options = ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(10) };
    let client = Client::new(server.admin_config(), client_options).expect("client");
    (server, client)
}

fn recorder(client: &Client, retry_interval: Duration) -> EventRecorder {
    let options = RecorderOptions { retry_interval, ..RecorderOptions::default() };
    EventRecorder::with_options(client.clone(), "test-controller", options)
}

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("5".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// The Events in `default` about the object `name`.
fn events_about(client: &Client, name: &str) -> Vec<Event> {
    let (events, _) = Api::<Event>::namespaced(client, "default").list_all(&ListParams::default()).expect("list");
    events.into_iter().filter(|e| e.involved_object.name.as_deref() == Some(name)).collect()
}

on_both_backends!(one_event_creates_an_event_with_every_field);
fn one_event_creates_an_event_with_every_field(backend: Backend) {
    let (_server, client) = server(backend);
    let recorder = recorder(&client, Duration::from_millis(100));
    let web = pod("web-1");
    recorder.event_for(&web, EventType::Warning, "FailedCreate", "quota exceeded");
    assert!(recorder.flush(FLUSH));

    let events = events_about(&client, "web-1");
    let [event] = &events[..] else { panic!("one Event expected: {events:?}") };
    let name = event.metadata.name.as_deref().unwrap();
    let suffix = name.strip_prefix("web-1.").expect("named after the object");
    assert!(u64::from_str_radix(suffix, 16).is_ok(), "hex nanoseconds: {name}");
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(event.involved_object, object_reference(&web));
    assert_eq!(event.reason.as_deref(), Some("FailedCreate"));
    assert_eq!(event.message.as_deref(), Some("quota exceeded"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.count, Some(1));
    assert!(event.first_timestamp.is_some());
    assert_eq!(event.first_timestamp, event.last_timestamp);
    let source = event.source.as_ref().expect("source");
    assert_eq!(source.component.as_deref(), Some("test-controller"));
    assert_eq!(source.host, None);
    assert_eq!(event.reporting_component.as_deref(), Some("test-controller"));
    assert_eq!(event.reporting_instance.as_deref().unwrap_or_default(), "");
    recorder.shutdown();
}

on_both_backends!(events_about_cluster_scoped_objects_go_to_default);
/// kube-apiserver requires an Event's namespace to be its object's, or `default` for a
/// cluster-scoped object (`legacyValidateEvent`).
fn events_about_cluster_scoped_objects_go_to_default(backend: Backend) {
    let (_server, client) = server(backend);
    let recorder = recorder(&client, Duration::from_millis(100));
    let node = Node {
        metadata: ObjectMeta { name: Some("node-9".into()), uid: Some("uid-node-9".into()), ..ObjectMeta::default() },
        ..Node::default()
    };
    recorder.event_for(&node, EventType::Normal, "RegisteredNode", "Node node-9 event: Registered Node");
    let mut system = pod("system-1");
    system.metadata.namespace = Some("kube-system".into());
    recorder.event_for(&system, EventType::Normal, "Started", "in kube-system");
    assert!(recorder.flush(FLUSH));

    let events = events_about(&client, "node-9");
    let [event] = &events[..] else { panic!("one Event expected in default: {events:?}") };
    assert_eq!(event.involved_object.namespace, None);
    assert_eq!(event.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(event.count, Some(1));
    let (in_system, _) =
        Api::<Event>::namespaced(&client, "kube-system").list_all(&ListParams::default()).expect("list");
    let about: Vec<&Event> =
        in_system.iter().filter(|e| e.involved_object.name.as_deref() == Some("system-1")).collect();
    let [event] = &about[..] else { panic!("one Event expected in kube-system: {in_system:?}") };
    assert_eq!(event.involved_object.namespace.as_deref(), Some("kube-system"));

    // Anything else is refused, which is why the recorder must choose so.
    for (namespace, involved) in [("default", Some("kube-system")), ("kube-system", None)] {
        let mut stray = (*event).clone();
        stray.metadata = ObjectMeta { name: Some(format!("stray-{namespace}")), ..ObjectMeta::default() };
        stray.involved_object.namespace = involved.map(str::to_string);
        let refused = Api::<Event>::namespaced(&client, namespace).create(&stray, &Default::default());
        assert!(refused.as_ref().is_err_and(|e| e.is_invalid()), "{namespace}/{involved:?}: {refused:?}");
    }
    recorder.shutdown();
}

on_both_backends!(repeats_patch_the_event_and_a_deleted_one_is_recreated);
fn repeats_patch_the_event_and_a_deleted_one_is_recreated(backend: Backend) {
    let (_server, client) = server(backend);
    let recorder = recorder(&client, Duration::from_millis(100));
    let web = pod("web-2");
    for _ in 0..2 {
        recorder.event_for(&web, EventType::Normal, "Pulled", "image pulled");
    }
    assert!(recorder.flush(FLUSH));
    let events = events_about(&client, "web-2");
    let [event] = &events[..] else { panic!("one Event expected: {events:?}") };
    assert_eq!(event.count, Some(2));
    let (first, last) = (event.first_timestamp.as_ref().unwrap(), event.last_timestamp.as_ref().unwrap());
    assert!(last.0 >= first.0);

    // The Event expired: the next repeat's patch finds nothing and the Event is created again.
    let name = event.metadata.name.clone().unwrap();
    Api::<Event>::namespaced(&client, "default").delete(&name, &DeleteParams::default()).expect("delete");
    recorder.event_for(&web, EventType::Normal, "Pulled", "image pulled");
    assert!(recorder.flush(FLUSH));
    let events = events_about(&client, "web-2");
    let [event] = &events[..] else { panic!("one Event expected: {events:?}") };
    assert_eq!(event.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(event.count, Some(3));
    recorder.shutdown();
}

on_both_backends!(similar_events_are_aggregated);
fn similar_events_are_aggregated(backend: Backend) {
    let (_server, client) = server(backend);
    let recorder = recorder(&client, Duration::from_millis(100));
    let web = pod("web-3");
    for i in 0..12 {
        recorder.event_for(&web, EventType::Warning, "BackOff", &format!("restart {i}"));
    }
    assert!(recorder.flush(FLUSH));
    let events = events_about(&client, "web-3");
    let combined: Vec<&Event> = events
        .iter()
        .filter(|e| e.message.as_deref().unwrap_or_default().starts_with("(combined from similar events): "))
        .collect();
    let [aggregate] = &combined[..] else { panic!("one aggregate Event expected: {events:?}") };
    // The 10th, 11th and 12th distinct messages went into it; the first nine stand alone.
    assert_eq!(aggregate.count, Some(3));
    assert_eq!(aggregate.message.as_deref(), Some("(combined from similar events): restart 11"));
    assert_eq!(aggregate.reason.as_deref(), Some("BackOff"));
    assert_eq!(events.len(), 10);
    recorder.shutdown();
}

on_both_backends!(the_spam_filter_drops_events_beyond_the_burst);
fn the_spam_filter_drops_events_beyond_the_burst(backend: Backend) {
    let (_server, client) = server(backend);
    let recorder = recorder(&client, Duration::from_millis(100));
    let web = pod("web-4");
    // Distinct reasons: neither counted as repeats nor aggregated, so each would be an Event.
    for i in 0..40 {
        recorder.event_for(&web, EventType::Normal, &format!("Reason{i}"), "same message");
    }
    assert!(recorder.flush(FLUSH));
    assert_eq!(events_about(&client, "web-4").len(), 25);
    recorder.shutdown();
}

on_both_backends!(recording_never_blocks_while_the_api_server_is_down);
fn recording_never_blocks_while_the_api_server_is_down(backend: Backend) {
    let (mut server, client) = server(backend);
    // Twelve tries at two seconds outlast the outage, so no queued event is given up.
    let recorder = recorder(&client, Duration::from_secs(2));
    recorder.event_for(&pod("up"), EventType::Normal, "Started", "before the outage");
    assert!(recorder.flush(FLUSH));

    // Down: the sandbox stops listening; kube-apiserver stops (etcd keeps the data).
    match &mut server {
        TestServer::Sandbox(sandbox) => sandbox.pause(),
        TestServer::Real(plane) => {
            plane.apiserver().stop(Duration::from_secs(5));
        }
    }
    let started = Instant::now();
    for i in 0..2000 {
        recorder.event_for(&pod(&format!("down-{i}")), EventType::Normal, "Started", "during the outage");
    }
    assert!(started.elapsed() < Duration::from_secs(30), "recording blocked for {:?}", started.elapsed());
    assert!(!recorder.flush(Duration::from_millis(50)), "nothing can be written while the server is down");

    match &mut server {
        TestServer::Sandbox(sandbox) => sandbox.resume().expect("resume"),
        TestServer::Real(plane) => plane.restart_apiserver().expect("kube-apiserver starts again"),
    }
    assert!(recorder.flush(FLUSH), "queued events are written once the server is back");
    let (events, _) = Api::<Event>::namespaced(&client, "default").list_all(&ListParams::default()).expect("list");
    let down: Vec<&str> = events
        .iter()
        .filter_map(|e| e.involved_object.name.as_deref())
        .filter(|name| name.starts_with("down-"))
        .collect();
    // The queue holds 1000 events; the rest were dropped.
    assert!((1000..2000).contains(&down.len()), "{} events written", down.len());
    assert!(down.contains(&"down-0"));
    recorder.shutdown();
}
