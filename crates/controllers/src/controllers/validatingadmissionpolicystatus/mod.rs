//! The ValidatingAdmissionPolicy status controller, after upstream v1.33's
//! `pkg/controller/validatingadmissionpolicystatus`: each policy whose `metadata.generation`
//! is ahead of `status.observedGeneration` is type-checked ([`typecheck`]) and its
//! `status.observedGeneration` and `status.typeChecking.expressionWarnings` are written with
//! a forced server-side apply on the status subresource (field manager
//! `validatingadmissionpolicy-status`).

pub mod typecheck;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{ExpressionWarning, ValidatingAdmissionPolicy};
use serde_json::{Value, json};

use crate::client::discovery::{Discovery, server_resources};
use crate::client::{Api, Client, Patch, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

use typecheck::{Gvk, SchemaSource};

/// `ControllerName`: the queue name and the field manager.
const CONTROLLER_NAME: &str = "validatingadmissionpolicy-status";

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-validating-admission-policy-status-syncs`.
    pub workers: usize,
}

/// `NewController`: policies are queued on add and update, by name.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new(CONTROLLER_NAME);
    let controller = Arc::new(PolicyStatus {
        client: context.client.clone(),
        policies: context.informers.informer::<ValidatingAdmissionPolicy>(),
    });
    let enqueue = queue.clone();
    controller.policies.add_handler(move |event: &Event<ValidatingAdmissionPolicy>| match event {
        Event::Added(policy) | Event::Updated { new: policy, .. } => {
            enqueue.add(policy.metadata.name.clone().unwrap_or_default())
        }
        Event::Deleted { .. } => {}
    });
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.reconcile(key))
}

struct PolicyStatus {
    client: Client,
    policies: Arc<Informer<ValidatingAdmissionPolicy>>,
}

impl PolicyStatus {
    /// `reconcile`: policies already checked at their generation are left alone.
    fn reconcile(&self, name: &str) -> SyncResult {
        let Some(policy) = self.policies.get_newest(name) else { return Ok(()) };
        let generation = policy.metadata.generation.unwrap_or_default();
        let observed = policy.status.as_ref().and_then(|s| s.observed_generation).unwrap_or_default();
        if generation <= observed {
            return Ok(());
        }
        let mut source = ServerSource { client: &self.client, discovery: None, documents: HashMap::new() };
        let warnings = typecheck::check(&mut source, &policy);
        let params =
            PostParams { field_manager: Some(CONTROLLER_NAME.to_string()), force: true, ..PostParams::default() };
        let had_warnings = policy
            .status
            .as_ref()
            .and_then(|s| s.type_checking.as_ref())
            .is_some_and(|t| t.expression_warnings.as_ref().is_some_and(|w| !w.is_empty()));
        let patch = Patch::Apply(status_apply(name, generation, &warnings, had_warnings));
        let written = Api::<ValidatingAdmissionPolicy>::cluster(&self.client).patch_status(name, &patch, &params);
        written.map(|p| drop(self.policies.mutation(p))).map_err(SyncError::from)
    }
}

/// The apply configuration of the status: observedGeneration and the warnings, as upstream's
/// (an empty `typeChecking` when there are none). One exception: when warnings the status
/// had are gone, kube-apiserver drops them (and the then empty `typeChecking`) because the
/// manager stopped applying them, but the sandbox keeps fields a manager stops sending; then
/// `typeChecking: null` is sent, which removes it on both servers, as upstream's apply does.
fn status_apply(name: &str, generation: i64, warnings: &[ExpressionWarning], had_warnings: bool) -> Value {
    let warnings: Vec<Value> =
        warnings.iter().map(|w| json!({"fieldRef": w.field_ref, "warning": w.warning})).collect();
    let type_checking = match (warnings.is_empty(), had_warnings) {
        (true, true) => Value::Null,
        (true, false) => json!({}),
        (false, _) => json!({"expressionWarnings": warnings}),
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "status": {"observedGeneration": generation, "typeChecking": type_checking},
    })
}

/// Kinds from discovery and schemas from `/openapi/v3`, each read at most once per policy.
struct ServerSource<'a> {
    client: &'a Client,
    discovery: Option<Option<Discovery>>,
    documents: HashMap<(String, String), Option<Value>>,
}

impl SchemaSource for ServerSource<'_> {
    fn kinds_for(&mut self, group: &str, version: &str, resource: &str) -> Vec<Gvk> {
        let client = self.client;
        let discovery = self.discovery.get_or_insert_with(|| {
            server_resources(client).map_err(|e| log::warn!("discovery for policy type checking: {e}")).ok()
        });
        let Some(discovery) = discovery else { return Vec::new() };
        let matches = discovery.all.iter().filter(|r| r.group == group && r.version == version && r.plural == resource);
        let mut kinds: Vec<Gvk> =
            matches.map(|r| Gvk { group: r.group.clone(), version: r.version.clone(), kind: r.kind.clone() }).collect();
        kinds.dedup();
        kinds
    }

    fn document(&mut self, group: &str, version: &str) -> Option<Value> {
        let key = (group.to_string(), version.to_string());
        let client = self.client;
        self.documents
            .entry(key)
            .or_insert_with(|| {
                let path = if group.is_empty() {
                    format!("/openapi/v3/api/{version}")
                } else {
                    format!("/openapi/v3/apis/{group}/{version}")
                };
                client.get_json(&path).map_err(|e| log::debug!("schema of {path}: {e}")).ok()
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_apply_configuration() {
        let warning = ExpressionWarning { field_ref: "spec.validations[0].expression".into(), warning: "w".into() };
        let apply = status_apply("p", 3, &[warning], false);
        assert_eq!(apply["status"]["observedGeneration"], 3);
        assert_eq!(
            apply["status"]["typeChecking"]["expressionWarnings"][0]["fieldRef"],
            "spec.validations[0].expression"
        );
        assert_eq!(status_apply("p", 1, &[], false)["status"]["typeChecking"], json!({}));
        assert_eq!(status_apply("p", 2, &[], true)["status"]["typeChecking"], Value::Null);
    }
}
