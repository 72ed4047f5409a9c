//! The storageversion-garbage-collector-controller on the real server (the sandbox does not
//! serve `internal.apiserver.k8s.io/v1alpha1`), with the gates `APIServerIdentity` and
//! `StorageVersionAPI` on for both: a StorageVersion loses the entries of servers without an
//! identity Lease, and those of a server whose Lease is deleted, with its common encoding version
//! and condition computed again; one left without entries is deleted. The server's own entries
//! (its identity Lease is there) stay.

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::coordination::v1::Lease;
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, eventually_seen, from};

const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";

/// Real server only until the sandbox serves StorageVersions; then `on_both_backends!`.
mod entries_of_servers_without_an_identity_lease_go {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, super::entries_of_servers_without_an_identity_lease_go);
    }
}

fn start(backend: Backend) -> Cluster {
    harness::with(&[named("storageversion-garbage-collector-controller")])
        .on(backend)
        .without_nodes()
        .names(&["storageversion-garbage-collector-controller"])
        .apiserver_flags(&[
            "--feature-gates=APIServerIdentity=true,StorageVersionAPI=true",
            "--runtime-config=internal.apiserver.k8s.io/v1alpha1=true",
        ])
        .flags(&["--feature-gates=APIServerIdentity=true,StorageVersionAPI=true"])
        .start()
}

fn leases(cluster: &Cluster) -> Api<Lease> {
    Api::namespaced(&cluster.client, "kube-system")
}

fn storage_versions(cluster: &Cluster) -> Api<StorageVersion> {
    Api::cluster(&cluster.client)
}

/// The name of the running kube-apiserver's identity Lease: its `apiServerID`.
fn own_server_id(cluster: &Cluster) -> String {
    let selector =
        ListParams { label_selector: Some(format!("{IDENTITY_LABEL}=kube-apiserver")), ..Default::default() };
    eventually("the kube-apiserver's identity Lease", || {
        let list = leases(cluster).list(&selector).expect("leases listed");
        list.items.into_iter().next().and_then(|lease| lease.metadata.name)
    })
}

/// An identity Lease like a kube-apiserver's, for a server that is not running.
fn create_identity_lease(cluster: &Cluster, name: &str) {
    let lease: Lease = from(json!({"metadata": {"name": name, "labels": {IDENTITY_LABEL: "kube-apiserver"}},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 3600}}));
    leases(cluster).create(&lease, &PostParams::default()).expect("lease created");
}

fn entry(id: &str, encoding: &str) -> Value {
    json!({"apiServerID": id, "encodingVersion": encoding, "decodableVersions": ["example.com/v1", "example.com/v2"]})
}

/// A StorageVersion `name` with `entries` in its status (written after the create, which
/// clears the status) and `common`, the version they agree on if they do, as validation wants.
fn create_storage_version(cluster: &Cluster, name: &str, entries: Vec<Value>, common: Option<&str>) {
    let api = storage_versions(cluster);
    let created =
        api.create(&from(json!({"metadata": {"name": name}, "spec": {}})), &PostParams::default()).expect("created");
    let with_status: StorageVersion = from(json!({"metadata": created.metadata, "spec": {},
        "status": {"storageVersions": entries, "commonEncodingVersion": common}}));
    api.replace_status(name, &with_status, &PostParams::default()).expect("status written");
}

/// The ids of a StorageVersion's entries.
fn ids(storage_version: &StorageVersion) -> Vec<String> {
    let entries = storage_version.status.as_ref().and_then(|s| s.storage_versions.as_ref());
    entries.into_iter().flatten().map(|e| e.api_server_id.clone()).collect()
}

/// Waits for the StorageVersion's entries to be those of `expected`.
fn wait_for_ids(cluster: &Cluster, name: &str, expected: &[&str]) -> StorageVersion {
    eventually_seen(&format!("{name}'s entries to be {expected:?}"), || {
        let sv = storage_versions(cluster).get(name).map_err(|e| e.to_string())?;
        if ids(&sv) == expected { Ok(sv) } else { Err(format!("{:?}", ids(&sv))) }
    })
}

/// The `AllEncodingVersionsEqual` condition's status and reason.
fn all_equal(storage_version: &StorageVersion) -> (String, String) {
    let conditions = storage_version.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions");
    let c = conditions.iter().find(|c| c.type_ == "AllEncodingVersionsEqual").expect("AllEncodingVersionsEqual");
    (c.status.clone(), c.reason.clone())
}

fn entries_of_servers_without_an_identity_lease_go(backend: Backend) {
    let cluster = start(backend);
    let own = own_server_id(&cluster);
    create_identity_lease(&cluster, "apiserver-leaving");

    // An entry of a server that never had a Lease goes; the others stay, and disagree.
    create_storage_version(
        &cluster,
        "example.com.widgets",
        vec![
            entry(&own, "example.com/v1"),
            entry("apiserver-leaving", "example.com/v2"),
            entry("apiserver-unknown", "example.com/v1"),
        ],
        None,
    );
    let sv = wait_for_ids(&cluster, "example.com.widgets", &[own.as_str(), "apiserver-leaving"]);
    assert_eq!(sv.status.as_ref().unwrap().common_encoding_version, None);
    assert_eq!(all_equal(&sv), ("False".to_string(), "CommonEncodingVersionUnset".to_string()));

    // The leaving server's Lease goes: so do its entries, and the rest agree.
    leases(&cluster).delete("apiserver-leaving", &DeleteParams::default()).expect("lease deleted");
    let sv = wait_for_ids(&cluster, "example.com.widgets", &[own.as_str()]);
    assert_eq!(sv.status.as_ref().unwrap().common_encoding_version.as_deref(), Some("example.com/v1"));
    assert_eq!(all_equal(&sv), ("True".to_string(), "CommonEncodingVersionSet".to_string()));

    // A StorageVersion with only unknown servers' entries is deleted.
    create_storage_version(
        &cluster,
        "example.com.gadgets",
        vec![entry("apiserver-unknown", "example.com/v1")],
        Some("example.com/v1"),
    );
    eventually("the StorageVersion deleted", || {
        storage_versions(&cluster).get_opt("example.com.gadgets").expect("read").is_none().then_some(())
    });
    // The server's own StorageVersions (that of Leases, which it has written) are untouched.
    let leases_version = storage_versions(&cluster).get("coordination.k8s.io.leases").expect("read");
    assert_eq!(ids(&leases_version), [own]);
}
