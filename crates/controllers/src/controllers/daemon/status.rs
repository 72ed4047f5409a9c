//! `updateDaemonSetStatus` and `storeDaemonSetStatus`: the status counted node by node and
//! written when it changed.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::Node;

use super::util::{creation_order, is_pod_updated, min_ready_seconds, node_should_run_daemon_pod, template_generation};
use super::{
    DaemonSetsController, Error, STATUS_UPDATE_RETRIES, daemon_sets_resource, name_of, namespace_of, node_name,
};
use crate::apimachinery::pod::{is_pod_available, is_pod_ready};
use crate::client::{Api, PostParams};
use crate::runtime::informer::object_key;

impl DaemonSetsController {
    /// `updateDaemonSetStatus`: counts per node, written when they changed; requeued after
    /// `minReadySeconds` while ready pods are not all available yet.
    pub(super) fn update_status(
        &self,
        ds: &DaemonSet,
        nodes: &[Arc<Node>],
        hash: &str,
        update_observed_generation: bool,
    ) -> Result<(), Error> {
        log::debug!("Updating daemon set status");
        let node_pods = self.nodes_to_daemon_pods(ds, false).map_err(|e| e.node_pod_mapping(ds))?;
        let now = Timestamp::now();
        let generation = template_generation(ds).ok().flatten();
        let mut counts = Counts::default();
        for node in nodes {
            let (should_run, _) = node_should_run_daemon_pod(node, ds);
            let pods = node_pods.get(node_name(node)).filter(|p| !p.is_empty());
            if !should_run {
                counts.misscheduled += i32::from(pods.is_some());
                continue;
            }
            counts.desired += 1;
            let Some(pods) = pods else { continue };
            counts.current += 1;
            let mut pods = pods.clone();
            pods.sort_by(|a, b| creation_order(a, b));
            let pod = &pods[0];
            if is_pod_ready(pod) {
                counts.ready += 1;
                if is_pod_available(pod, min_ready_seconds(ds), now) {
                    counts.available += 1;
                }
            }
            if is_pod_updated(pod, hash, generation) {
                counts.updated += 1;
            }
        }
        self.store_status(ds, &counts, update_observed_generation)
            .map_err(|source| Error::StoreStatus { key: object_key(&ds.metadata), source })?;
        let min_ready = min_ready_seconds(ds);
        if min_ready > 0 && counts.ready != counts.available {
            self.queue.add_after(object_key(&ds.metadata), Duration::from_secs(min_ready as u64));
        }
        Ok(())
    }

    /// `storeDaemonSetStatus`: one write, retried once on a fresh copy.
    fn store_status(
        &self,
        ds: &DaemonSet,
        counts: &Counts,
        update_observed_generation: bool,
    ) -> Result<(), crate::client::Error> {
        let status = ds.status.clone().unwrap_or_default();
        let generation = ds.metadata.generation.unwrap_or(0);
        if status.desired_number_scheduled == counts.desired
            && status.current_number_scheduled == counts.current
            && status.number_misscheduled == counts.misscheduled
            && status.number_ready == counts.ready
            && status.updated_number_scheduled.unwrap_or(0) == counts.updated
            && status.number_available.unwrap_or(0) == counts.available
            && status.number_unavailable.unwrap_or(0) == counts.desired - counts.available
            && status.observed_generation.unwrap_or(0) >= generation
        {
            return Ok(());
        }
        let api = Api::<DaemonSet>::namespaced(&self.client, namespace_of(&ds.metadata));
        let name = name_of(&ds.metadata);
        let mut to_update = ds.clone();
        let mut attempt = 0;
        loop {
            let status = to_update.status.get_or_insert_with(DaemonSetStatus::default);
            if update_observed_generation {
                status.observed_generation = Some(generation);
            }
            counts.write(status);
            let error = match api.replace_status(name, &to_update, &PostParams::default()) {
                Ok(written) => {
                    self.consistency.wrote(&written.metadata, &daemon_sets_resource());
                    self.daemon_sets.mutation(written);
                    return Ok(());
                }
                Err(e) => e,
            };
            if attempt >= STATUS_UPDATE_RETRIES {
                return Err(error);
            }
            attempt += 1;
            to_update = api.get(name)?;
        }
    }
}

/// The counts of `updateDaemonSetStatus`.
#[derive(Debug, Default)]
struct Counts {
    desired: i32,
    current: i32,
    misscheduled: i32,
    ready: i32,
    updated: i32,
    available: i32,
}

impl Counts {
    /// Go writes every counter; `omitempty` ones are absent when zero.
    fn write(&self, status: &mut DaemonSetStatus) {
        let optional = |n: i32| (n != 0).then_some(n);
        status.desired_number_scheduled = self.desired;
        status.current_number_scheduled = self.current;
        status.number_misscheduled = self.misscheduled;
        status.number_ready = self.ready;
        status.updated_number_scheduled = optional(self.updated);
        status.number_available = optional(self.available);
        status.number_unavailable = optional(self.desired - self.available);
    }
}
