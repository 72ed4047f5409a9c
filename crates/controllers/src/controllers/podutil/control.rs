//! Upstream's `controller.RealPodControl` (`CreatePods`, `CreatePodsWithGenerateName`,
//! `DeletePod`) and `GetPodFromTemplate` (`pkg/controller/controller_utils.go`), which the
//! ReplicaSet, DaemonSet and Job controllers create and delete their pods through: the pod built
//! from the template, the `SuccessfulCreate` / `FailedCreate` and `SuccessfulDelete` /
//! `FailedDelete` Events, and `OnWrite` (the pod recorded for the stale-cache check). What a
//! caller does around a write (expectations, its own log lines, how its errors read) stays
//! with the caller.

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};

use crate::client::{self, Api, Client, DeleteParams, PostParams};
use crate::runtime::consistency::ControllerConsistency;
use crate::runtime::controller_ref::controller_ref;
use crate::runtime::events::{EventRecorder, EventType};

/// `SuccessfulCreatePodReason`.
pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
/// `FailedCreatePodReason`.
pub const FAILED_CREATE: &str = "FailedCreate";
/// `SuccessfulDeletePodReason`.
pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
/// `FailedDeletePodReason`.
pub const FAILED_DELETE: &str = "FailedDelete";

/// Why [`PodControl::create`] created no pod.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The template has no labels, so that the pod could never be found again.
    #[error("unable to create pods, no labels")]
    NoLabels,
    /// The creation failed (recorded as `FailedCreate`).
    #[error("{0}")]
    Api(#[source] client::Error),
}

/// `GetPodFromTemplate`: a pod of `owner`'s namespace from `template` (its labels, annotations,
/// finalizers and spec), controlled by `owner`, named `<owner>-<random>` or, with
/// `generate_name` (`CreatePodsWithGenerateName`), by that prefix.
pub fn pod_from_template<O: Resource + Metadata<Ty = ObjectMeta>>(
    template: PodTemplateSpec,
    owner: &O,
    generate_name: Option<String>,
) -> Pod {
    let template_meta = template.metadata.unwrap_or_default();
    let owner_meta = owner.metadata();
    let generate_name = generate_name.unwrap_or_else(|| format!("{}-", owner_meta.name.as_deref().unwrap_or("")));
    let metadata = ObjectMeta {
        generate_name: Some(generate_name),
        namespace: owner_meta.namespace.clone(),
        labels: template_meta.labels,
        annotations: template_meta.annotations,
        finalizers: template_meta.finalizers,
        owner_references: Some(vec![controller_ref(owner)]),
        ..ObjectMeta::default()
    };
    Pod { metadata, spec: template.spec, status: None }
}

/// `RealPodControl`: the controller's client, its Event recorder and its `OnWrite`.
pub struct PodControl<'a> {
    /// Creates and deletes the pods.
    pub client: &'a Client,
    /// Records the Events on the controlling object.
    pub recorder: &'a EventRecorder,
    /// `OnWrite`: each pod created is recorded for its controller.
    pub consistency: &'a ControllerConsistency,
}

impl PodControl<'_> {
    /// `createPods`: creates `pod` (see [`pod_from_template`]) in its namespace, recording
    /// `SuccessfulCreate` or `FailedCreate` on `owner`. A namespace being torn down refuses
    /// every creation the same way: that is no error, and no Event.
    pub fn create<O: Resource + Metadata<Ty = ObjectMeta>>(&self, owner: &O, pod: &Pod) -> Result<(), CreateError> {
        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Err(CreateError::NoLabels);
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        match Api::<Pod>::namespaced(self.client, namespace).create(pod, &PostParams::default()) {
            Ok(created) => {
                self.consistency.pod_written(&created.metadata);
                let message = format!("Created pod: {}", created.metadata.name.as_deref().unwrap_or(""));
                self.recorder.event_for(owner, EventType::Normal, SUCCESSFUL_CREATE, &message);
                Ok(())
            }
            Err(e) if e.has_status_cause("NamespaceTerminating") => Ok(()),
            Err(e) => {
                let message = format!("Error creating: {}", e.message());
                self.recorder.event_for(owner, EventType::Warning, FAILED_CREATE, &message);
                Err(CreateError::Api(e))
            }
        }
    }

    /// `DeletePod`: deletes the pod, recording `SuccessfulDelete` or `FailedDelete` on `owner`.
    /// `Ok(true)` when deleted, `Ok(false)` when it was gone already (no Event).
    pub fn delete<O: Resource + Metadata<Ty = ObjectMeta>>(
        &self,
        owner: &O,
        namespace: &str,
        name: &str,
    ) -> Result<bool, client::Error> {
        match Api::<Pod>::namespaced(self.client, namespace).delete(name, &DeleteParams::default()) {
            Ok(_) => {
                self.recorder.event_for(owner, EventType::Normal, SUCCESSFUL_DELETE, &format!("Deleted pod: {name}"));
                Ok(true)
            }
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => {
                let message = format!("Error deleting: {}", e.message());
                self.recorder.event_for(owner, EventType::Warning, FAILED_DELETE, &message);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::json;

    use super::*;
    use crate::controllers::podutil::testing::ErrorServer;
    use crate::runtime::consistency::stale_sync_skips;

    fn owner() -> ReplicaSet {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}})).expect("a set")
    }

    fn template(labels: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"name": "ignored", "labels": labels, "annotations": {"a": "1"}, "finalizers": ["f"]},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        }))
        .expect("a template")
    }

    /// The writes of `server`'s client, with a recorder and a no-op consistency store.
    fn control<T>(server: &ErrorServer, write: impl FnOnce(&PodControl<'_>) -> T) -> T {
        let recorder = EventRecorder::new(server.client.clone(), "test-controller");
        let skips = Arc::new(stale_sync_skips("test_pod_control_stale_sync_skips_total", "[ALPHA] Test."));
        let consistency = ControllerConsistency::new(false, [], skips);
        write(&PodControl { client: &server.client, recorder: &recorder, consistency: &consistency })
    }

    #[test]
    fn a_pod_from_a_template_is_controlled_by_its_owner_in_its_namespace() {
        let pod = pod_from_template(template(json!({"app": "web"})), &owner(), None);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
        assert_eq!(pod.metadata.name, None, "the template's name is not the pod's");
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(pod.metadata.labels, Some([("app".to_string(), "web".to_string())].into()));
        assert_eq!(pod.metadata.annotations, Some([("a".to_string(), "1".to_string())].into()));
        assert_eq!(pod.metadata.finalizers, Some(vec!["f".to_string()]));
        assert_eq!(pod.metadata.owner_references, Some(vec![controller_ref(&owner())]));
        assert_eq!(pod.spec.expect("the template's spec").containers[0].name, "c");
        let named = pod_from_template(template(json!({"app": "web"})), &owner(), Some("web-3-".into()));
        assert_eq!(named.metadata.generate_name.as_deref(), Some("web-3-"));
    }

    #[test]
    fn a_pod_without_labels_is_not_created() {
        let server = ErrorServer::conflict();
        let pod = pod_from_template(template(json!({})), &owner(), None);
        let error = control(&server, |c| c.create(&owner(), &pod)).unwrap_err();
        assert!(matches!(error, CreateError::NoLabels));
        assert_eq!(error.to_string(), "unable to create pods, no labels");
        assert_eq!(server.requests(), 0, "nothing was sent");
    }

    #[test]
    fn the_pod_is_created_in_its_namespace_as_built() {
        let pod = pod_from_template(template(json!({"app": "web"})), &owner(), None);
        let mut created = serde_json::to_value(&pod).expect("JSON");
        created["metadata"]["name"] = json!("web-x1");
        let server = ErrorServer::returning(created);
        control(&server, |c| c.create(&owner(), &pod)).expect("created");
        let received = server.received();
        let (line, body) = received.first().expect("the creation, before its Event");
        assert!(line.starts_with("POST /api/v1/namespaces/ns/pods "), "{line}");
        let sent: Pod = serde_json::from_str(body).expect("a pod");
        assert_eq!(sent, pod);
    }

    #[test]
    fn a_failed_creation_keeps_the_api_error_and_a_terminating_namespace_is_none() {
        let pod = pod_from_template(template(json!({"app": "web"})), &owner(), None);
        let server = ErrorServer::conflict();
        match control(&server, |c| c.create(&owner(), &pod)) {
            Err(CreateError::Api(e)) => assert!(e.is_conflict()),
            other => panic!("expected the API error, got {other:?}"),
        }
        let causes = json!({"causes": [{"reason": "NamespaceTerminating", "message": "ns is being terminated"}]});
        let server = ErrorServer::answering_with(403, "Forbidden", causes);
        assert!(control(&server, |c| c.create(&owner(), &pod)).is_ok());
    }

    #[test]
    fn a_pod_gone_already_is_no_deletion_and_no_error() {
        let server = ErrorServer::answering(404, "NotFound");
        assert!(!control(&server, |c| c.delete(&owner(), "ns", "web-1")).expect("no error"));
        let server = ErrorServer::conflict();
        let error = control(&server, |c| c.delete(&owner(), "ns", "web-1")).unwrap_err();
        assert!(error.is_conflict());
    }
}
