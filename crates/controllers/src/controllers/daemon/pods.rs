//! `syncNodes` and the pod control (`CreatePods`, `DeletePod`): the creations and deletions a
//! sync decided, with their expectations, slow-start batches and Events.

use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::util::{create_pod_template, replace_node_name_affinity, spec, template_generation};
use super::{BURST_REPLICAS, DaemonSetsController, Error, name_of, namespace_of};
use crate::client::{Api, DeleteParams, PostParams};
use crate::runtime::controller_ref::controller_ref;
use crate::runtime::events::EventType;
use crate::runtime::informer::object_key;
use crate::runtime::slow_start::slow_start_batch;

impl DaemonSetsController {
    /// `syncNodes`: deletes `to_delete` and creates a pod on each node of `needing`, at most
    /// [`BURST_REPLICAS`] of each, creations in slow-start batches; expectations set first.
    pub(super) fn sync_nodes(
        &self,
        ds: &DaemonSet,
        to_delete: &[String],
        needing: &[String],
        hash: &str,
    ) -> Result<(), Error> {
        let key = object_key(&ds.metadata);
        let namespace = namespace_of(&ds.metadata);
        let create_count = needing.len().min(BURST_REPLICAS);
        let delete_count = to_delete.len().min(BURST_REPLICAS);
        let doomed = &to_delete[..delete_count];
        self.expectations.expect(&key, create_count, doomed.iter().map(|name| format!("{namespace}/{name}")).collect());
        log::debug!(
            "Nodes needing daemon pods for daemon set, creating daemonset={key} needCount={needing:?} createCount={create_count}"
        );
        let generation = template_generation(ds).ok().flatten();
        let template = create_pod_template(&spec(ds).template, generation, hash);
        let next = AtomicUsize::new(0);
        let (created, create_error) = slow_start_batch(create_count, &self.write_threads, || {
            let node = &needing[next.fetch_add(1, Ordering::SeqCst)];
            self.create_pod(ds, &template, node).inspect_err(|_| {
                log::info!("Failed creation, decrementing expectations for daemon set daemonset={key}");
                self.expectations.creation_observed(&key);
            })
        });
        let attempted = next.load(Ordering::SeqCst);
        let skipped = create_count - attempted;
        if skipped > 0 {
            log::info!(
                "Slow-start failure. Skipping creation pods, decrementing expectations for daemon set skippedPods={skipped} daemonset={key}"
            );
            for _ in 0..skipped {
                self.expectations.creation_observed(&key);
            }
        }
        log::debug!("created {created} of {create_count} daemon pods daemonset={key}");
        log::debug!(
            "Pods to delete for daemon set, deleting daemonset={key} toDeleteCount={to_delete:?} deleteCount={delete_count}"
        );
        let deletions = self.write_threads.map(doomed, |name| self.delete_pod(ds, &key, name));
        let delete_errors: Vec<Error> = deletions.into_iter().filter_map(Result::err).collect();
        match create_error.into_iter().chain(delete_errors).next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `CreatePods` of one daemon pod for `node` (`GetPodFromTemplate` with the node affinity
    /// replaced), recording `SuccessfulCreate` or `FailedCreate`. A terminating namespace is
    /// no error.
    pub(super) fn create_pod(
        &self,
        ds: &DaemonSet,
        template: &k8s_openapi::api::core::v1::PodTemplateSpec,
        node: &str,
    ) -> Result<(), Error> {
        let mut template = template.clone();
        let pod_spec = template.spec.get_or_insert_with(Default::default);
        pod_spec.affinity = Some(replace_node_name_affinity(pod_spec.affinity.take(), node));
        let meta = template.metadata.unwrap_or_default();
        let pod = Pod {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", name_of(&ds.metadata))),
                namespace: ds.metadata.namespace.clone(),
                labels: meta.labels,
                annotations: meta.annotations,
                finalizers: meta.finalizers,
                owner_references: Some(vec![controller_ref(ds)]),
                ..ObjectMeta::default()
            },
            spec: template.spec,
            status: None,
        };
        if pod.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Err(Error::NoLabels);
        }
        match Api::<Pod>::namespaced(&self.client, namespace_of(&ds.metadata)).create(&pod, &PostParams::default()) {
            Ok(created) => {
                self.consistency.pod_written(&created.metadata);
                let message = format!("Created pod: {}", name_of(&created.metadata));
                self.recorder.event_for(ds, EventType::Normal, "SuccessfulCreate", &message);
                Ok(())
            }
            Err(e) if e.has_status_cause("NamespaceTerminating") => Ok(()),
            Err(e) => {
                let message = format!("Error creating: {}", e.message());
                self.recorder.event_for(ds, EventType::Warning, "FailedCreate", &message);
                Err(Error::Api(e))
            }
        }
    }

    /// `DeletePod`, recording `SuccessfulDelete` or `FailedDelete`; a failure (or a pod gone)
    /// lowers the expectations, and only a failure is an error.
    pub(super) fn delete_pod(&self, ds: &DaemonSet, key: &str, name: &str) -> Result<(), Error> {
        let namespace = namespace_of(&ds.metadata);
        match Api::<Pod>::namespaced(&self.client, namespace).delete(name, &DeleteParams::default()) {
            Ok(_) => {
                self.recorder.event_for(ds, EventType::Normal, "SuccessfulDelete", &format!("Deleted pod: {name}"));
                Ok(())
            }
            Err(e) => {
                self.expectations.deletion_observed(key, &format!("{namespace}/{name}"));
                if e.is_not_found() {
                    return Ok(());
                }
                log::info!("Failed deletion, decremented expectations for daemon set daemonset={key}");
                let message = format!("Error deleting: {}", e.message());
                self.recorder.event_for(ds, EventType::Warning, "FailedDelete", &message);
                Err(Error::Api(e))
            }
        }
    }
}
