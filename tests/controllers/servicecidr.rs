//! The service-cidr-controller on both backends: a new ServiceCIDR gets the finalizer and
//! `Ready=True`; one deleted with no IP in it goes (after upstream's 10 s grace period); one
//! whose range holds a Service's IP that no other ServiceCIDR covers stays, `Ready=False`
//! (`Terminating`), until the Service is deleted or another ServiceCIDR covers the IP. A Ready
//! condition that holds is not applied again, so its `lastTransitionTime` stays.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{IPAddress, ServiceCIDR};
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, Patch, PostParams};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, eventually, eventually_within, from};

const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
const TERMINATING: &str =
    "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";
/// The 10 s grace period before a finalizer goes, plus the controller's and the server's time.
const GONE_WITHIN: Duration = Duration::from_secs(40);

fn start(backend: Backend) -> Cluster {
    harness::with(&[named("service-cidr-controller")]).on(backend).without_nodes().start()
}

fn cidrs(cluster: &Cluster) -> Api<ServiceCIDR> {
    Api::cluster(&cluster.client)
}

fn create_cidr(cluster: &Cluster, name: &str, cidr: &str) {
    let object: ServiceCIDR = from(json!({"metadata": {"name": name}, "spec": {"cidrs": [cidr]}}));
    cidrs(cluster).create(&object, &PostParams::default()).expect("ServiceCIDR created");
}

fn cidr(cluster: &Cluster, name: &str) -> Option<ServiceCIDR> {
    cidrs(cluster).get_opt(name).expect("ServiceCIDR read")
}

/// The Ready condition's status and reason.
fn ready(cidr: &ServiceCIDR) -> Option<(String, String, String)> {
    let conditions = cidr.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    Some((ready.status.clone(), ready.reason.clone(), ready.message.clone()))
}

fn has_finalizer(cidr: &ServiceCIDR) -> bool {
    cidr.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

fn wait_ready(cluster: &Cluster, name: &str) -> ServiceCIDR {
    eventually("the finalizer and Ready=True", || {
        cidr(cluster, name).filter(|c| {
            has_finalizer(c)
                && ready(c).is_some_and(|(status, _, message)| {
                    status == "True" && message == "Kubernetes Service CIDR is ready"
                })
        })
    })
}

fn delete_cidr(cluster: &Cluster, name: &str) {
    cidrs(cluster).delete(name, &DeleteParams::default()).expect("ServiceCIDR deleted");
}

fn wait_gone(cluster: &Cluster, name: &str) {
    eventually_within(GONE_WITHIN, "the ServiceCIDR gone", || cidr(cluster, name).is_none().then_some(()));
}

fn wait_terminating(cluster: &Cluster, name: &str) {
    eventually("Ready=False, Terminating", || {
        cidr(cluster, name).filter(|c| {
            c.metadata.deletion_timestamp.is_some()
                && has_finalizer(c)
                && ready(c).is_some_and(|(s, r, m)| s == "False" && r == "Terminating" && m == TERMINATING)
        })
    });
}

fn create_service(cluster: &Cluster, name: &str, ip: &str) {
    let service: Service =
        from(json!({"metadata": {"name": name}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}));
    cluster.api::<Service>().create(&service, &PostParams::default()).expect("Service created");
    let addresses = Api::<IPAddress>::cluster(&cluster.client);
    let address = eventually("the IPAddress", || addresses.get_opt(ip).expect("IPAddress read"));
    let parent = address.spec.parent_ref;
    assert_eq!((parent.resource.as_str(), parent.name.as_str()), ("services", name));
}

on_both_backends!(a_new_service_cidr_gets_its_finalizer_and_ready_condition);
fn a_new_service_cidr_gets_its_finalizer_and_ready_condition(backend: Backend) {
    let cluster = start(backend);
    create_cidr(&cluster, "extra", "10.200.0.0/24");
    wait_ready(&cluster, "extra");
    // The default one, made by the API server, gets the same from the controller.
    wait_ready(&cluster, "kubernetes");
}

on_both_backends!(an_empty_service_cidr_goes_when_deleted);
fn an_empty_service_cidr_goes_when_deleted(backend: Backend) {
    let cluster = start(backend);
    create_cidr(&cluster, "empty", "10.201.0.0/24");
    wait_ready(&cluster, "empty");
    delete_cidr(&cluster, "empty");
    wait_gone(&cluster, "empty");
}

on_both_backends!(a_service_cidr_holding_a_service_ip_stays_until_the_service_goes);
fn a_service_cidr_holding_a_service_ip_stays_until_the_service_goes(backend: Backend) {
    let cluster = start(backend);
    create_cidr(&cluster, "used", "10.202.0.0/24");
    wait_ready(&cluster, "used");
    create_service(&cluster, "web", "10.202.0.10");
    delete_cidr(&cluster, "used");
    wait_terminating(&cluster, "used");
    let now = DeleteParams::default();
    cluster.api::<Service>().delete("web", &now).expect("Service deleted");
    wait_gone(&cluster, "used");
}

on_both_backends!(a_service_cidr_holding_a_service_ip_goes_once_another_covers_it);
fn a_service_cidr_holding_a_service_ip_goes_once_another_covers_it(backend: Backend) {
    let cluster = start(backend);
    create_cidr(&cluster, "narrow", "10.203.0.0/24");
    wait_ready(&cluster, "narrow");
    create_service(&cluster, "db", "10.203.0.20");
    delete_cidr(&cluster, "narrow");
    wait_terminating(&cluster, "narrow");
    create_cidr(&cluster, "wide", "10.203.0.0/16");
    wait_gone(&cluster, "narrow");
    let service = cluster.api::<Service>().get("db").expect("the Service stays");
    assert_eq!(service.spec.and_then(|s| s.cluster_ip).as_deref(), Some("10.203.0.20"));
}

on_both_backends!(an_unchanged_ready_condition_keeps_its_transition_time);
/// v1.36 applies the Ready condition only when it changes (v1.33 applied it, with a new
/// `lastTransitionTime`, on every sync).
fn an_unchanged_ready_condition_keeps_its_transition_time(backend: Backend) {
    let cluster = start(backend);
    create_cidr(&cluster, "steady", "10.204.0.0/24");
    let since = |c: &ServiceCIDR| {
        let conditions = c.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions");
        conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.last_transition_time.0).expect("Ready")
    };
    let first = since(&wait_ready(&cluster, "steady"));
    // Times have whole seconds: a new one would differ from now on.
    eventually("two seconds past the transition", || {
        (jiff::Timestamp::now().duration_since(first).as_secs() >= 2).then_some(())
    });
    // Two syncs, each seen done when it puts back the finalizer taken away: the second starts
    // once the first (and its condition apply, if any) is over.
    for round in ["first", "second"] {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        cidrs(&cluster).patch("steady", &patch, &PostParams::default()).expect("finalizer removed");
        eventually(&format!("the finalizer back ({round} sync)"), || cidr(&cluster, "steady").filter(has_finalizer));
    }
    assert_eq!(since(&cidr(&cluster, "steady").expect("the ServiceCIDR")), first);
}
