//! Discovery, the metadata client and metadata informers against the sandbox, which serves
//! `PartialObjectMetadata(List)` as kube-apiserver does when asked through `Accept`.
#![cfg(feature = "sandbox")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kcm::client::discovery::{self, ApiResource};
use kcm::client::metadata::{MetadataApi, PartialObjectMetadata};
use kcm::client::{
    Api, Client, ClientOptions, DeleteParams, Deleted, ListParams, Patch, PostParams, WatchEvent, WatchParams,
};
use kcm::runtime::informer::{Event, SharedInformerFactory};
use kcm::sandbox::server::{Sandbox, SandboxOptions};
use parking_lot::Mutex;
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(60);

fn sandbox() -> (Sandbox, Client) {
    let listen = "127.0.0.1:0".parse().expect("an address");
    let sandbox = Sandbox::start(SandboxOptions { listen, ..SandboxOptions::default() }).expect("the sandbox starts");
    let client = Client::new(sandbox.admin_config(), ClientOptions::default()).expect("a client");
    (sandbox, client)
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

#[test]
fn discovery_finds_resources_with_verbs_and_scope() {
    let (_sandbox, client) = sandbox();
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

#[test]
fn metadata_client_gets_lists_watches_patches_and_deletes() {
    let (_sandbox, client) = sandbox();
    let resource = config_maps(&discovery::server_resources(&client).expect("discovery"));
    let api = MetadataApi::new(&client, &resource, Some("default"));
    let created = create_config_map(&client, "one");

    let got = api.get("one").expect("get");
    assert_eq!((got.kind.as_str(), got.api_version.as_str()), ("PartialObjectMetadata", "meta.k8s.io/v1"));
    assert_eq!(got.metadata.uid, created.metadata.uid);

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

#[test]
fn metadata_informers_sync_and_deliver_changes() {
    let (_sandbox, client) = sandbox();
    let resource = config_maps(&discovery::server_resources(&client).expect("discovery"));
    create_config_map(&client, "before");
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.metadata_informer(&resource);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    informer.add_handler(move |event: &Event<PartialObjectMetadata>| {
        // The sandbox's own objects (kube-system's token-tracking ConfigMap) are not this test's.
        if event.object().metadata.namespace.as_deref() != Some("default") {
            return;
        }
        let name = event.object().metadata.name.clone().unwrap_or_default();
        if name != "before" && name != "after" {
            return; // the sandbox's own config maps
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
