//! The resourceclaim-controller on the real kube-apiserver only, for now: the sandbox does not
//! serve `resource.k8s.io/v1` yet. Without nodes, so that pods stay where a test puts them: a
//! pod's template claim is created with upstream's generated name, annotation and owner, and
//! named in the pod status by the controller's apply; a missing template is reported on the
//! pod until it appears; a deleted pod's claim goes (by the garbage collector); a scheduled pod
//! reserves its allocated claim, and when it finishes the claim is unreserved, deallocated,
//! released by its finalizer and deleted by the controller.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kcm::app::controllers::named;
use kcm::client::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, eventually_seen, from};

const POD_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

fn start(backend: Backend) -> Cluster {
    let controllers = [named("resourceclaim-controller"), named("garbage-collector-controller")];
    harness::with(&controllers)
        .on(backend)
        .without_nodes()
        // The v1.33 gate table has DRA off; v1.36's has it GA and locked on.
        .flags(&["--feature-gates=DynamicResourceAllocation=true"])
        .start()
}

fn devices_spec() -> Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}})
}

fn create_template(cluster: &Cluster, name: &str) -> ResourceClaimTemplate {
    let template: ResourceClaimTemplate = from(json!({"metadata": {"name": name}, "spec": {
        "metadata": {"labels": {"app": "web"}, "annotations": {"purpose": "test"}},
        "spec": devices_spec()}}));
    cluster.api::<ResourceClaimTemplate>().create(&template, &PostParams::default()).expect("template created")
}

/// A pod with one claim `claim` from `template`, on `node` if given (no kubelet runs it).
fn create_pod(cluster: &Cluster, name: &str, claim: &str, template: &str, node: Option<&str>) -> Pod {
    let pod: Pod = from(json!({"metadata": {"name": name}, "spec": {"nodeName": node,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "resourceClaims": [{"name": claim, "resourceClaimTemplateName": template}]}}));
    cluster.api::<Pod>().create(&pod, &PostParams::default()).expect("pod created")
}

/// The claim the pod status names for its claim `claim`.
fn claim_name_in_status(cluster: &Cluster, pod: &str, claim: &str) -> Option<String> {
    let pod = cluster.api::<Pod>().get(pod).expect("pod read");
    let statuses = pod.status?.resource_claim_statuses?;
    statuses.into_iter().find(|s| s.name == claim)?.resource_claim_name
}

fn claim(cluster: &Cluster, name: &str) -> Option<ResourceClaim> {
    cluster.api::<ResourceClaim>().get_opt(name).expect("claim read")
}

fn creates_total() -> f64 {
    harness::metric_sample("resourceclaim_controller_creates_total{admin_access=\"false\",status=\"success\"}")
        .unwrap_or(0.0)
}

/// Checks the claim generated from `template` for `pod`'s claim `pod_claim` as upstream makes it.
fn assert_generated(
    claim: &ResourceClaim,
    template: &ResourceClaimTemplate,
    pod: &Pod,
    pod_claim: &str,
    generate_name: &str,
) {
    let meta = &claim.metadata;
    assert_eq!(meta.generate_name.as_deref(), Some(generate_name));
    let name = meta.name.as_deref().expect("a name");
    assert_eq!(name.len(), generate_name.len() + 5, "the API server's 5 random characters: {name}");
    assert!(name.starts_with(generate_name));
    let owners = serde_json::to_value(&meta.owner_references).expect("json");
    let expected = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid,
        "controller": true}]);
    assert_eq!(owners, expected, "controlled by the pod, without blockOwnerDeletion");
    let annotations = meta.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get(POD_CLAIM_ANNOTATION).map(String::as_str), Some(pod_claim));
    assert_eq!(annotations.get("purpose").map(String::as_str), Some("test"));
    assert_eq!(meta.labels, Some([("app".to_string(), "web".to_string())].into()));
    // The template's spec as the API server stored it (with its defaults).
    assert_eq!(claim.spec, template.spec.spec);
}

#[test]
fn pods_get_claims_from_their_templates_which_go_with_them() {
    harness::run_on(Backend::Real, |backend| {
        let cluster = start(backend);
        let template = create_template(&cluster, "gpu-template");
        let before = creates_total();
        let web = create_pod(&cluster, "web", "gpu", "gpu-template", None);
        let name = eventually("the pod status names its claim", || claim_name_in_status(&cluster, "web", "gpu"));
        let created = claim(&cluster, &name).expect("the named claim exists");
        assert_generated(&created, &template, &web, "gpu", "web-gpu-");
        assert!(creates_total() >= before + 1.0, "the create is counted");
        let pod = cluster.api::<Pod>().get("web").expect("pod read");
        let managers = pod.metadata.managed_fields.unwrap_or_default();
        assert!(
            managers.iter().any(|m| m.manager.as_deref() == Some("ResourceClaimController")
                && m.operation.as_deref() == Some("Apply")
                && m.subresource.as_deref() == Some("status")),
            "the status is applied by ResourceClaimController: {managers:?}"
        );

        // Long names are both cut, in proportion: 60 + 24 + 2 = 86 characters, so
        // 60 * 57 / 86 = 39 and 24 * 57 / 86 = 15, joined without a trailing hyphen.
        let (long_pod, long_claim) = ("p".repeat(60), format!("accelerator-{}", "c".repeat(12)));
        let long = create_pod(&cluster, &long_pod, &long_claim, "gpu-template", None);
        let name = eventually("the long pod's claim", || claim_name_in_status(&cluster, &long_pod, &long_claim));
        let generate_name = format!("{}-{}", "p".repeat(39), &long_claim[..15]);
        let long_claim_object = claim(&cluster, &name).expect("the claim");
        assert_generated(&long_claim_object, &template, &long, &long_claim, &generate_name);

        // A missing template is reported on the pod until it exists.
        create_pod(&cluster, "early", "gpu", "later", None);
        let expected = "PodResourceClaim gpu: resource claim template \"later\": \
                        resourceclaimtemplate.resource.k8s.io \"later\" not found";
        eventually_seen("the FailedResourceClaimCreation Event", || {
            let messages = cluster.event_messages("default", "early", "FailedResourceClaimCreation");
            if messages.iter().any(|m| m == expected) { Ok(()) } else { Err(format!("{messages:?}")) }
        });
        create_template(&cluster, "later");
        eventually("the claim from the late template", || claim_name_in_status(&cluster, "early", "gpu"));

        // The pod's deletion takes its claim (the garbage collector's work: the controller
        // leaves claims of pods it no longer knows to it).
        cluster.api::<Pod>().delete("web", &DeleteParams::default()).expect("pod deleted");
        let web_claim = created.metadata.name.clone().expect("a name");
        eventually("the deleted pod's claim gone", || claim(&cluster, &web_claim).is_none().then_some(()));
    });
}

#[test]
fn a_scheduled_pod_reserves_its_claim_which_is_released_and_deleted_when_it_finishes() {
    harness::run_on(Backend::Real, |backend| {
        let cluster = start(backend);
        create_template(&cluster, "gpu-template");
        let pod = create_pod(&cluster, "job", "gpu", "gpu-template", Some("node-x"));
        let name = eventually("the pod status names its claim", || claim_name_in_status(&cluster, "job", "gpu"));

        // As the scheduler would: the finalizer, then the allocation.
        let claims = cluster.api::<ResourceClaim>();
        let mut protected = claim(&cluster, &name).expect("the claim");
        protected.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
        let protected = claims.replace(&name, &protected, &PostParams::default()).expect("finalizer added");
        let mut allocated = protected;
        allocated.status = Some(from(json!({"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-x", "device": "gpu-0"}]}}})));
        claims.replace_status(&name, &allocated, &PostParams::default()).expect("allocated");

        let reserved = eventually_seen("the claim reserved for the pod", || {
            let claim = claim(&cluster, &name).expect("the claim");
            let reserved = claim.status.and_then(|s| s.reserved_for).unwrap_or_default();
            if reserved.is_empty() { Err("no reservation".into()) } else { Ok(reserved) }
        });
        let expected = json!([{"resource": "pods", "name": "job", "uid": pod.metadata.uid}]);
        assert_eq!(serde_json::to_value(&reserved).expect("json"), expected);

        // The pod finishes: unreserved, deallocated, unprotected and deleted, the pod still there.
        let mut finished = cluster.api::<Pod>().get("job").expect("pod read");
        finished.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
        cluster.api::<Pod>().replace_status("job", &finished, &PostParams::default()).expect("pod finished");
        eventually("the finished pod's claim gone", || claim(&cluster, &name).is_none().then_some(()));
        assert!(cluster.api::<Pod>().get_opt("job").expect("pod read").is_some(), "the controller deleted the claim");
    });
}
