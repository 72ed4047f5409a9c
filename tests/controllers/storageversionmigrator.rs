//! The storage-version-migrator-controller on the real server, with StorageVersionMigrator on in
//! both and the garbage collector (whose monitors it reads) beside it (the sandbox serves no
//! `storagemigration.k8s.io` nor CustomResourceDefinitions). A migration of a built-in resource
//! and one of a custom resource whose storage version changed both run to `Succeeded`; the
//! custom resource's definition then stores only its storage version.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kcm::app::controllers::named;
use kcm::client::discovery::server_resources;
use kcm::client::{Api, Client, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const GROUP: &str = "svm.example.com";
const CRD: &str = "gadgets.svm.example.com";

/// Real server only: the sandbox serves neither API.
mod migrations_of_built_in_and_custom_resources_succeed {
    #[test]
    fn real_server() {
        crate::harness::run_on(
            crate::harness::Backend::Real,
            super::migrations_of_built_in_and_custom_resources_succeed,
        );
    }
}

fn start(backend: Backend) -> Cluster {
    let gates = "--feature-gates=StorageVersionMigrator=true";
    harness::with(&[named("garbage-collector-controller"), named("storage-version-migrator-controller")])
        .on(backend)
        .without_nodes()
        .apiserver_flags(&[gates, "--runtime-config=storagemigration.k8s.io/v1beta1=true"])
        .flags(&[gates])
        .start_with(|client, _| {
            config_map(client, "before");
            gadgets_stored_in_v1_then_v2(client);
        })
}

fn config_map(client: &Client, name: &str) {
    let config_map: ConfigMap = from(json!({"metadata": {"name": name}, "data": {"a": "b"}}));
    Api::<ConfigMap>::namespaced(client, "default").create(&config_map, &PostParams::default()).expect("created");
}

fn version(name: &str, storage: bool) -> Value {
    json!({"name": name, "served": true, "storage": storage,
           "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
}

/// A definition whose objects were stored in v1 and are now stored in v2 (`storedVersions`
/// [v1, v2]), with one gadget, created before the controllers so that the garbage collector's
/// first discovery has it.
fn gadgets_stored_in_v1_then_v2(client: &Client) {
    let definitions = Api::<CustomResourceDefinition>::cluster(client);
    let definition: CustomResourceDefinition = from(json!({"metadata": {"name": CRD}, "spec": {"group": GROUP,
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
        "scope": "Namespaced", "versions": [version("v1", true), version("v2", false)]}}));
    definitions.create(&definition, &PostParams::default()).expect("CRD created");
    eventually("the CRD established", || {
        let conditions = definitions.get(CRD).ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    });
    // Served a moment after it is established; stored in v1, the storage version.
    eventually("the gadget created", || create_gadget(client, "g").ok());
    let mut updated = definitions.get(CRD).expect("CRD read");
    updated.spec.versions = vec![from(version("v1", false)), from(version("v2", true))];
    definitions.replace(CRD, &updated, &PostParams::default()).expect("storage moved to v2");
    eventually("both versions stored", || {
        let stored = definitions.get(CRD).ok()?.status?.stored_versions?;
        (stored == ["v1", "v2"]).then_some(())
    });
    eventually("v2 discovered", || {
        let discovered = server_resources(client).ok()?;
        discovered.all.iter().any(|r| r.group == GROUP && r.version == "v2" && r.plural == "gadgets").then_some(())
    });
}

fn create_gadget(client: &Client, name: &str) -> kcm::client::Result<Gadget> {
    let gadget: Gadget =
        from(json!({"apiVersion": format!("{GROUP}/v2"), "kind": "Gadget", "metadata": {"name": name}}));
    Api::<Gadget>::namespaced(client, "default").create(&gadget, &PostParams::default())
}

/// A namespaced custom resource without a schema of its own, in v2.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Gadget {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
}

impl k8s_openapi::Resource for Gadget {
    const API_VERSION: &'static str = "svm.example.com/v2";
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "Gadget";
    const VERSION: &'static str = "v2";
    const URL_PATH_SEGMENT: &'static str = "gadgets";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Gadget {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn migrations(cluster: &Cluster) -> Api<StorageVersionMigration> {
    Api::cluster(&cluster.client)
}

fn migrate(cluster: &Cluster, name: &str, group: &str, resource: &str) {
    let svm = from(json!({"metadata": {"name": name}, "spec": {"resource": {"group": group, "resource": resource}}}));
    migrations(cluster).create(&svm, &PostParams::default()).expect("migration created");
}

fn condition(svm: &StorageVersionMigration, type_: &str) -> Option<Condition> {
    svm.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_).cloned()
}

/// Waits for the migration's checkpoint, then writes an object of the resource: the garbage
/// collector's cache passes the checkpoint with that event instead of at the next bookmark.
fn nudge_after_checkpoint(cluster: &Cluster, name: &str, write: impl FnOnce()) {
    eventually("the resourceVersion recorded", || {
        let svm = migrations(cluster).get(name).ok()?;
        svm.status?.resource_version.filter(|rv| !rv.is_empty())
    });
    write();
}

/// Waits for `Succeeded` and for `Running` to turn `False` after it.
fn finished(cluster: &Cluster, name: &str) -> StorageVersionMigration {
    eventually("the migration finished", || {
        let svm = migrations(cluster).get(name).ok()?;
        let done = condition(&svm, "Running").is_some_and(|c| c.status == "False");
        done.then_some(svm)
    })
}

fn migrations_of_built_in_and_custom_resources_succeed(backend: Backend) {
    let cluster = start(backend);

    migrate(&cluster, "config-maps", "", "configmaps");
    nudge_after_checkpoint(&cluster, "config-maps", || config_map(&cluster.client, "after"));
    let done = finished(&cluster, "config-maps");
    let succeeded = condition(&done, "Succeeded").expect("Succeeded");
    assert_eq!((succeeded.status.as_str(), succeeded.reason.as_str()), ("True", "StorageVersionMigrationSucceeded"));
    assert_eq!(succeeded.message, "");
    let running = condition(&done, "Running").expect("Running");
    assert_eq!((running.reason.as_str(), running.message.as_str()), ("MigrationCompleted", "Migration completed"));
    assert!(condition(&done, "Failed").is_none());

    migrate(&cluster, "gadgets", GROUP, "gadgets");
    let definitions = Api::<CustomResourceDefinition>::cluster(&cluster.client);
    let migrating = |crd: &CustomResourceDefinition| {
        crd.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "StorageMigrating").cloned()
    };
    nudge_after_checkpoint(&cluster, "gadgets", || {
        let running = migrating(&definitions.get(CRD).expect("CRD read")).expect("StorageMigrating while running");
        assert_eq!(running.status, "True");
        assert_eq!(running.reason.as_deref(), Some("MigrationRunning"));
        assert_eq!(running.message.as_deref(), Some("Migration gadgets is running"));
        create_gadget(&cluster.client, "h").expect("gadget created");
    });
    let done = finished(&cluster, "gadgets");
    assert_eq!(condition(&done, "Succeeded").map(|c| c.status), Some("True".to_string()));
    let crd = definitions.get(CRD).expect("CRD read");
    let finished = migrating(&crd).expect("StorageMigrating after");
    assert_eq!((finished.status.as_str(), finished.reason.as_deref()), ("False", Some("MigrationSucceeded")));
    assert_eq!(
        finished.message.as_deref(),
        Some("The migration has succeeded and the stored versions have been updated")
    );
    assert_eq!(crd.status.and_then(|s| s.stored_versions), Some(vec!["v2".to_string()]));
}
