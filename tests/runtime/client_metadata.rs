//! Discovery, the metadata client and metadata informers against both backends: the sandbox
//! serves `PartialObjectMetadata(List)` as kube-apiserver does when asked through `Accept`,
//! down to the `"items": null` of an empty list.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kcm::client::discovery::{self, ApiResource};
use kcm::client::metadata::{MetadataApi, PartialObjectMetadata};
use kcm::client::{
    Api, Client, ClientOptions, DeleteParams, Deleted, ListParams, Patch, PostParams, WatchEvent, WatchParams,
};
use kcm::runtime::informer::{Event, SharedInformerFactory};
use parking_lot::Mutex;
use serde_json::json;

use crate::harness;

use harness::{Backend, TestServer};

const DEADLINE: Duration = Duration::from_secs(60);

fn server(backend: Backend) -> (TestServer, Client) {
    let server = TestServer::start(backend).expect("the API server starts");
    let client = Client::new(server.admin_config(), ClientOptions::default()).expect("a client");
    (server, client)
}

fn create_config_map(client: &Client, name: &str) -> ConfigMap {
    let object: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "x"}}, "data": {"k": "v"}}))
            .expect("a config map");
    Api::<ConfigMap>::namespaced(client, "default").create(&object, &PostParams::default()).expect("created")
}

fn config_maps(discovered: &discovery::Discovery) -> ApiResource {
    discovered.resource_for("v1", "ConfigMap").cloned().expect("configmaps are discovered")
}

on_both_backends!(discovery_finds_resources_with_verbs_and_scope);
fn discovery_finds_resources_with_verbs_and_scope(backend: Backend) {
    let (_server, client) = server(backend);
    let discovered = discovery::server_resources(&client).expect("discovery");
    assert!(!discovered.is_partial(), "{:?}", discovered.failed);
    let preferred = discovered.preferred();
    let find = |group: &str, plural: &str| preferred.iter().find(|r| r.group == group && r.plural == plural).cloned();
    let pods = find("", "pods").expect("pods");
    assert!(pods.namespaced && pods.supports_all(&["list", "watch", "delete"]));
    assert_eq!(pods.kind, "Pod");
    let nodes = find("", "nodes").expect("nodes");
    assert!(!nodes.namespaced);
    assert_eq!(find("apps", "replicasets").map(|r| r.api_version()).as_deref(), Some("apps/v1"));
    assert!(preferred.iter().all(|r| !r.plural.contains('/')), "no subresources");
}

on_both_backends!(metadata_client_gets_lists_watches_patches_and_deletes);
fn metadata_client_gets_lists_watches_patches_and_deletes(backend: Backend) {
    let (_server, client) = server(backend);
    let resource = config_maps(&discovery::server_resources(&client).expect("discovery"));
    let api = MetadataApi::new(&client, &resource, Some("default"));
    let created = create_config_map(&client, "one");

    let got = api.get("one").expect("get");
    assert_eq!((got.kind.as_str(), got.api_version.as_str()), ("PartialObjectMetadata", "meta.k8s.io/v1"));
    assert_eq!(got.metadata.uid, created.metadata.uid);
    // managedFields are left out of a metadata GET (kube-apiserver sends them; the sandbox
    // keeps none).
    assert_eq!(got.metadata.managed_fields, None);
    if backend == Backend::Real {
        let full = Api::<ConfigMap>::namespaced(&client, "default").get("one").expect("get");
        assert!(full.metadata.managed_fields.is_some_and(|m| !m.is_empty()), "the server sends managedFields");
    }

    let list = api.list(&ListParams::default()).expect("list");
    assert!(list.items.iter().any(|o| o.metadata.name.as_deref() == Some("one") && o.kind == "PartialObjectMetadata"));
    assert!(list.metadata.resource_version.is_some());

    let params = WatchParams { resource_version: list.metadata.resource_version.clone(), ..WatchParams::default() };
    let watch = api.watch_channel(&params, 16).expect("watch");
    let patch = Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}}));
    let patched = api.patch("one", &patch, &PostParams::default()).expect("patch");
    assert_eq!(patched.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str), Some("y"));
    match watch.recv_timeout(DEADLINE) {
        Ok(Some(Ok(WatchEvent::Modified(object)))) => {
            assert_eq!(object.kind, "PartialObjectMetadata");
            assert_eq!(object.metadata.name.as_deref(), Some("one"));
        }
        other => panic!("expected a MODIFIED event, got {other:?}"),
    }
    match api.delete("one", &DeleteParams::default()).expect("delete") {
        Deleted::Gone(status) => assert_eq!(status.status.as_deref(), Some("Success")),
        Deleted::Object(object) => panic!("config maps answer a Status, got {object:?}"),
    }
    assert!(api.get("one").expect_err("gone").is_not_found());

    // The full object is still what a plain client gets.
    create_config_map(&client, "two");
    let full = Api::<ConfigMap>::namespaced(&client, "default").get("two").expect("get");
    assert_eq!(full.data.as_ref().and_then(|d| d.get("k")).map(String::as_str), Some("v"));
}

on_both_backends!(metadata_informers_sync_and_deliver_changes);
fn metadata_informers_sync_and_deliver_changes(backend: Backend) {
    let (_server, client) = server(backend);
    let resource = config_maps(&discovery::server_resources(&client).expect("discovery"));
    create_config_map(&client, "before");
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.metadata_informer(&resource);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    informer.add_handler(move |event: &Event<PartialObjectMetadata>| {
        // The API server's own objects (kube-system's ConfigMaps) are not this test's.
        if event.object().metadata.namespace.as_deref() != Some("default") {
            return;
        }
        let name = event.object().metadata.name.clone().unwrap_or_default();
        if name != "before" && name != "after" {
            return; // the API server's own config maps
        }
        let kind = match event {
            Event::Added(_) => "added",
            Event::Updated { .. } => "updated",
            Event::Deleted { .. } => "deleted",
        };
        sink.lock().push(format!("{kind} {name}"));
    });
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));
    assert!(informer.store().get("default/before").is_some_and(|o| o.kind == "PartialObjectMetadata"));
    assert_eq!(
        informer.store().list().iter().filter(|o| o.metadata.namespace.as_deref() == Some("default")).count(),
        1
    );
    create_config_map(&client, "after");
    Api::<ConfigMap>::namespaced(&client, "default").delete("before", &DeleteParams::default()).expect("deleted");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let events = seen.lock().clone();
        if events == ["added before", "added after", "deleted before"] {
            break;
        }
        assert!(Instant::now() < deadline, "events so far: {events:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(informer.store().get("default/after").is_some_and(|o| o.kind == "PartialObjectMetadata"));
    factory.shutdown();
}

/// Metadata informers sync with a watch-list too, as client-go's do: its initial events and
/// the bookmark that ends them come as `PartialObjectMetadata`.
// Sandbox only: it switches the server's WatchList gate on and counts requests in its audit log.
#[test]
fn metadata_informers_sync_with_a_watch_list() {
    let listen = "127.0.0.1:0".parse().expect("an address");
    let options = kcm_sandbox::sandbox::server::SandboxOptions { listen, watch_list: true, ..Default::default() };
    let sandbox = kcm_sandbox::sandbox::server::Sandbox::start(options).expect("the sandbox starts");
    let client = Client::new(sandbox.admin_config(), ClientOptions::default()).expect("a client");
    let resource = config_maps(&discovery::server_resources(&client).expect("discovery"));
    create_config_map(&client, "before");
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.metadata_informer(&resource);
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));
    assert!(informer.store().get("default/before").is_some_and(|o| o.kind == "PartialObjectMetadata"));
    assert!(!informer.store().last_store_sync_resource_version().is_empty());
    create_config_map(&client, "after");
    let deadline = Instant::now() + DEADLINE;
    while informer.store().get("default/after").is_none() {
        assert!(Instant::now() < deadline, "the informer never saw the new ConfigMap");
        std::thread::sleep(Duration::from_millis(50));
    }
    let entries = sandbox.audit().entries();
    let config_maps = |verb: &str| entries.iter().filter(|e| e.resource == "configmaps" && e.verb == verb).count();
    assert_eq!(config_maps("list"), 0, "synced without a list");
    assert_eq!(config_maps("watch"), 1, "one watch-list, which carried on as the watch");
    factory.shutdown();
}

on_both_backends!(metadata_lists_of_several_kinds_and_an_empty_one);
/// An empty metadata-only list (kube-apiserver answers `"items": null`), lists of several
/// kinds (core and named groups, namespaced and cluster-scoped, all namespaces), and a metadata
/// informer whose first list is empty.
fn metadata_lists_of_several_kinds_and_an_empty_one(backend: Backend) {
    let (_server, client) = server(backend);
    let discovered = discovery::server_resources(&client).expect("discovery");
    let post = PostParams::default();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "quiet"}})).expect("a namespace");
    Api::<Namespace>::cluster(&client).create(&namespace, &post).expect("namespace created");

    // Nothing runs that would put a ConfigMap (kube-root-ca.crt) into a new namespace.
    let config_maps = config_maps(&discovered);
    let empty =
        MetadataApi::new(&client, &config_maps, Some("quiet")).list(&ListParams::default()).expect("empty list");
    assert!(empty.items.is_empty(), "{empty:?}");
    assert!(empty.metadata.resource_version.is_some(), "an empty list still has a resourceVersion");

    create_config_map(&client, "cm");
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}})).unwrap();
    Api::<Secret>::namespaced(&client, "default").create(&secret, &post).expect("secret created");
    let deployment: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .unwrap();
    Api::<Deployment>::namespaced(&client, "default").create(&deployment, &post).expect("deployment created");

    let names_of = |api_version: &str, kind: &str, namespace: Option<&str>| {
        let resource = discovered.resource_for(api_version, kind).cloned().unwrap_or_else(|| panic!("{kind}"));
        let list = MetadataApi::new(&client, &resource, namespace).list(&ListParams::default()).expect(kind);
        assert!(list.items.iter().all(|o| o.kind == "PartialObjectMetadata" && o.api_version == "meta.k8s.io/v1"));
        list.items.into_iter().map(|o| o.metadata.name.unwrap_or_default()).collect::<Vec<_>>()
    };
    assert_eq!(names_of("v1", "ConfigMap", Some("default")), ["cm"]);
    assert_eq!(names_of("v1", "Secret", Some("default")), ["s"]);
    assert_eq!(names_of("apps/v1", "Deployment", Some("default")), ["d"]);
    assert_eq!(names_of("apps/v1", "Deployment", None), ["d"], "across namespaces");
    assert!(names_of("v1", "Namespace", None).iter().any(|n| n == "quiet"), "cluster-scoped");
    assert!(names_of("v1", "ConfigMap", None).iter().any(|n| n == "cm"), "across namespaces");
    // A kind nothing was created of: empty across the whole cluster.
    assert!(names_of("batch/v1", "CronJob", None).is_empty());

    // A metadata informer syncs on an empty first list and then follows the namespace.
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let cron_jobs = discovered.resource_for("batch/v1", "CronJob").cloned().expect("cronjobs are discovered");
    let informer = factory.metadata_informer(&cron_jobs);
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE), "synced on an empty list");
    assert!(informer.store().list().is_empty());
    let cron_job: k8s_openapi::api::batch::v1::CronJob = serde_json::from_value(json!({
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}))
    .unwrap();
    Api::<k8s_openapi::api::batch::v1::CronJob>::namespaced(&client, "quiet")
        .create(&cron_job, &post)
        .expect("cronjob");
    let deadline = Instant::now() + DEADLINE;
    while informer.store().get("quiet/nightly").is_none() {
        assert!(Instant::now() < deadline, "the informer never saw the CronJob");
        std::thread::sleep(Duration::from_millis(50));
    }
    factory.shutdown();
}
