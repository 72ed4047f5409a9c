//! The namespace controller on both backends with simulated nodes, beside the ReplicaSet and
//! Deployment controllers: a deleted namespace is Terminating, its pods are deleted first and
//! alone (OrderedNamespaceDeletion), then the rest; what finalizers hold is reported in the
//! conditions, and the namespace goes once they are released;
//! a group whose discovery fails is reported, and the namespace finishes once it recovers.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, NamespaceCondition, Pod, Secret, ServiceAccount};
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, ListParams, Patch, PostParams};
use kcm::controllers::namespace::conditions::{
    CONDITION_TYPES, CONTENT_REMAINING, DISCOVERY_FAILURE, FINALIZERS_REMAINING,
};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, Namespaced, TestServer, create, from};

/// Generous: the machine may be loaded (the controller waits 5 s before its first pass).
const DEADLINE: Duration = Duration::from_secs(90);
const BLOCK: &str = "example.com/block";

fn create_namespace(client: &Client, name: &str) {
    let namespace: Namespace = from(json!({"metadata": {"name": name}}));
    Api::<Namespace>::cluster(client).create(&namespace, &PostParams::default()).expect("namespace");
    // Pod admission needs the namespace's default ServiceAccount.
    create::<ServiceAccount>(client, name, json!({"metadata": {"name": "default"}}));
}

fn pod_template(app: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "app", "image": "nginx:1.27"}]},
    })
}

/// A sandbox with two simulated nodes; `prepare` runs before the controllers start.
fn start_with(backend: Backend, prepare: impl FnOnce(&Client, &TestServer)) -> Cluster {
    harness::with(&[named("namespace-controller"), named("replicaset-controller"), named("deployment-controller")])
        .on(backend)
        .without_default_account()
        .deadline(DEADLINE)
        .start_with(prepare)
}

fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    harness::eventually_within(DEADLINE, what, check)
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn namespaces(&self) -> Api<Namespace>;
    fn conditions(&self, name: &str) -> Vec<NamespaceCondition>;
    fn names<K>(&self, namespace: &str) -> Vec<String>
    where
        K: Namespaced
            + k8s_openapi::ListableResource
            + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>;
    fn running_pods(&self, namespace: &str) -> usize;
    fn release_pod(&self, namespace: &str);
    fn release_config_map(&self, namespace: &str);
}

impl ClusterExt for Cluster {
    fn namespaces(&self) -> Api<Namespace> {
        Api::cluster(&self.client)
    }

    fn conditions(&self, name: &str) -> Vec<NamespaceCondition> {
        let namespace = self.namespaces().get(name).expect("the namespace");
        namespace.status.and_then(|s| s.conditions).unwrap_or_default()
    }

    fn names<K>(&self, namespace: &str) -> Vec<String>
    where
        K: Namespaced
            + k8s_openapi::ListableResource
            + k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    {
        let items = Api::<K>::namespaced(&self.client, namespace).list(&ListParams::default()).expect("a list").items;
        let mut names: Vec<String> = items.iter().filter_map(|o| o.metadata().name.clone()).collect();
        names.sort();
        names
    }

    fn running_pods(&self, namespace: &str) -> usize {
        let pods = Api::<Pod>::namespaced(&self.client, namespace).list(&ListParams::default()).expect("pods").items;
        pods.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")).count()
    }

    fn release_pod(&self, namespace: &str) {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        Api::<Pod>::namespaced(&self.client, namespace)
            .patch("held", &patch, &PostParams::default())
            .expect("released");
    }

    fn release_config_map(&self, namespace: &str) {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let config_maps = Api::<ConfigMap>::namespaced(&self.client, namespace);
        config_maps.patch("blocked", &patch, &PostParams::default()).expect("released");
    }
}

fn summary(condition: &NamespaceCondition) -> (&str, &str, &str) {
    (condition.status.as_str(), condition.reason.as_deref().unwrap_or(""), condition.message.as_deref().unwrap_or(""))
}

fn find<'a>(conditions: &'a [NamespaceCondition], type_: &str) -> Option<&'a NamespaceCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

on_both_backends!(a_deleted_namespace_is_emptied_waits_for_finalizers_and_goes);
fn a_deleted_namespace_is_emptied_waits_for_finalizers_and_goes(backend: Backend) {
    let cluster = start_with(backend, |client, _| {
        create_namespace(client, "team");
        create::<ReplicaSet>(
            client,
            "team",
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": pod_template("web")}}),
        );
        create::<Deployment>(
            client,
            "team",
            json!({"metadata": {"name": "api"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
                "template": pod_template("api")}}),
        );
        create::<ConfigMap>(client, "team", json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}));
        create::<ConfigMap>(client, "team", json!({"metadata": {"name": "blocked", "finalizers": [BLOCK]}}));
        create::<Secret>(client, "team", json!({"metadata": {"name": "password"}, "stringData": {"p": "x"}}));
        let mut held = pod_template("held");
        held["metadata"] = json!({"name": "held", "finalizers": [BLOCK]});
        create::<Pod>(client, "team", held);
    });
    eventually("the four pods running", || (cluster.running_pods("team") == 4).then_some(()));

    cluster.namespaces().delete("team", &DeleteParams::default()).expect("deleted");
    let terminating = cluster.namespaces().get("team").expect("still there");
    assert_eq!(terminating.status.and_then(|s| s.phase).as_deref(), Some("Terminating"));
    // Nothing new may be created in it.
    let refused = Api::<ConfigMap>::namespaced(&cluster.client, "team")
        .create(&from(json!({"metadata": {"name": "late"}})), &PostParams::default())
        .expect_err("refused");
    assert!(refused.has_status_cause("NamespaceTerminating"), "{refused}");

    // OrderedNamespaceDeletion (on in v1.33): pods first; nothing else goes while one remains.
    eventually("every pod but the held one gone", || (cluster.names::<Pod>("team") == ["held"]).then_some(()));
    eventually("a deletion pass to set the conditions", || (cluster.conditions("team").len() == 5).then_some(()));
    assert_eq!(cluster.names::<ConfigMap>("team"), ["blocked", "settings"]);
    assert_eq!(cluster.names::<Secret>("team"), ["password"]);
    assert_eq!(cluster.names::<ReplicaSet>("team").len(), 2, "web and the Deployment's");
    cluster.release_pod("team");

    // Then everything else, but for what a finalizer holds.
    let conditions = eventually("only finalized content remaining", || {
        let conditions = cluster.conditions("team");
        let remaining = summary(find(&conditions, CONTENT_REMAINING)?).2.to_string();
        (remaining == "Some resources are remaining: configmaps. has 1 resource instances").then_some(conditions)
    });
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, CONDITION_TYPES, "conditions in upstream's order");
    assert_eq!(
        summary(find(&conditions, CONTENT_REMAINING).unwrap()),
        ("True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances")
    );
    assert_eq!(
        summary(find(&conditions, FINALIZERS_REMAINING).unwrap()),
        (
            "True",
            "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: example.com/block in 1 resource instances"
        )
    );
    assert_eq!(
        summary(find(&conditions, DISCOVERY_FAILURE).unwrap()),
        ("False", "ResourcesDiscovered", "All resources successfully discovered")
    );
    assert_eq!(cluster.names::<ConfigMap>("team"), ["blocked"]);
    assert!(cluster.names::<Pod>("team").is_empty());
    assert!(cluster.names::<Secret>("team").is_empty());
    assert!(cluster.names::<ServiceAccount>("team").is_empty());
    assert!(cluster.names::<ReplicaSet>("team").is_empty());
    assert!(cluster.names::<Deployment>("team").is_empty());
    let namespace = cluster.namespaces().get("team").expect("held by its content");
    assert_eq!(namespace.spec.and_then(|s| s.finalizers), Some(vec!["kubernetes".to_string()]));

    cluster.release_config_map("team");
    eventually("the namespace gone", || cluster.namespaces().get_opt("team").expect("a get").is_none().then_some(()));
}

/// kube-aggregator's APIService, which k8s-openapi lacks: enough to register one.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
struct ApiService(Value);

impl k8s_openapi::Resource for ApiService {
    const API_VERSION: &'static str = "apiregistration.k8s.io/v1";
    const GROUP: &'static str = "apiregistration.k8s.io";
    const KIND: &'static str = "APIService";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "apiservices";
    type Scope = k8s_openapi::ClusterResourceScope;
}

/// Makes a group version's discovery fail with 503, or recover: on the sandbox through its
/// faults; on kube-apiserver as in a real cluster, with an APIService whose Service is missing
/// (its group is listed, its document answered with 503).
fn set_unavailable(client: &Client, server: &TestServer, group_version: &str, unavailable: bool) {
    if let Some(sandbox) = server.sandbox() {
        sandbox.faults().set_api_unavailable(group_version, unavailable);
        return;
    }
    let (group, version) = group_version.split_once('/').expect("group/version");
    let name = format!("{version}.{group}");
    let services = Api::<ApiService>::cluster(client);
    if unavailable {
        let service = ApiService(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 15,
                "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "missing"}},
        }));
        services.create(&service, &PostParams::default()).expect("APIService created");
    } else {
        services.delete(&name, &DeleteParams::default()).expect("APIService deleted");
    }
}

on_both_backends!(a_failing_group_discovery_is_reported_and_the_namespace_finishes_once_it_recovers);
fn a_failing_group_discovery_is_reported_and_the_namespace_finishes_once_it_recovers(backend: Backend) {
    // A group of its own on the real server: kube-apiserver's own groups cannot fail.
    let group_version = match backend {
        Backend::Sandbox => "batch/v1",
        Backend::Real => "example.com/v1",
    };
    let cluster = start_with(backend, |client, server| {
        create_namespace(client, "flaky");
        create::<ConfigMap>(client, "flaky", json!({"metadata": {"name": "settings"}}));
        set_unavailable(client, server, group_version, true);
    });
    cluster.namespaces().delete("flaky", &DeleteParams::default()).expect("deleted");
    let failure = eventually("the discovery failure", || {
        let conditions = cluster.conditions("flaky");
        find(&conditions, DISCOVERY_FAILURE).filter(|c| c.status == "True").cloned()
    });
    // Aggregated discovery, as client-go reads it, marks the unreachable group version Stale.
    let message = format!(
        "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: \
         {group_version}: stale GroupVersion discovery: {group_version}"
    );
    assert_eq!(summary(&failure), ("True", "DiscoveryFailed", message.as_str()));
    // What was discovered is still emptied, but the namespace is not finalized meanwhile.
    eventually("the configmap deleted", || cluster.names::<ConfigMap>("flaky").is_empty().then_some(()));
    assert!(cluster.namespaces().get_opt("flaky").expect("a get").is_some());

    set_unavailable(&cluster.client, &cluster.server, group_version, false);
    eventually("the namespace gone", || cluster.namespaces().get_opt("flaky").expect("a get").is_none().then_some(()));
}
