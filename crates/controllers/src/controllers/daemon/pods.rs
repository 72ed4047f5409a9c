//! `syncNodes` and the pod control (`CreatePods`, `DeletePod`): the creations and deletions a
//! sync decided, with their expectations, slow-start batches and Events.

use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::util::{create_pod_template, replace_node_name_affinity, spec, template_generation};
use super::{BURST_REPLICAS, DaemonSetsController, Error, namespace_of};
use crate::controllers::podutil::control::{CreateError, PodControl, pod_from_template};
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
    pub(super) fn create_pod(&self, ds: &DaemonSet, template: &PodTemplateSpec, node: &str) -> Result<(), Error> {
        let mut template = template.clone();
        let pod_spec = template.spec.get_or_insert_with(Default::default);
        pod_spec.affinity = Some(replace_node_name_affinity(pod_spec.affinity.take(), node));
        let pod = pod_from_template(template, ds, None);
        self.pod_control().create(ds, &pod).map_err(|e| match e {
            CreateError::NoLabels => Error::NoLabels,
            CreateError::Api(e) => Error::Api(e),
        })
    }

    /// `DeletePod`, recording `SuccessfulDelete` or `FailedDelete`; a failure (or a pod gone)
    /// lowers the expectations, and only a failure is an error.
    pub(super) fn delete_pod(&self, ds: &DaemonSet, key: &str, name: &str) -> Result<(), Error> {
        let namespace = namespace_of(&ds.metadata);
        let deleted = self.pod_control().delete(ds, namespace, name);
        if deleted.as_ref().is_ok_and(|deleted| *deleted) {
            return Ok(());
        }
        self.expectations.deletion_observed(key, &format!("{namespace}/{name}"));
        deleted.map(drop).map_err(|e| {
            log::info!("Failed deletion, decremented expectations for daemon set daemonset={key}");
            Error::Api(e)
        })
    }

    /// `dsc.podControl`.
    fn pod_control(&self) -> PodControl<'_> {
        PodControl { client: &self.client, recorder: &self.recorder, consistency: &self.consistency }
    }
}
