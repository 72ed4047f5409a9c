//! Upstream's `rollback.go`: the deprecated `deprecated.deployment.rollback.to` annotation
//! (extensions/v1beta1's `spec.rollbackTo`, round-tripped). The Deployment takes the template
//! and annotations of the ReplicaSet of that revision (0: the previous one); the old ReplicaSet
//! then becomes the new one on the next sync and gets the next revision number.
//! (`kubectl rollout undo` on apps/v1 patches the template itself; no annotation is involved.)

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::util::{self, DEPRECATED_ROLLBACK_TO};
use super::{DeploymentController, DeploymentResult, name, namespace};
use crate::client::{Api, PostParams};
use crate::runtime::events::EventType;

/// `getRollbackTo`: the revision asked for, if the annotation holds a number.
pub(super) fn rollback_to(d: &Deployment) -> Option<i64> {
    let value = d.metadata.annotations.as_ref()?.get(DEPRECATED_ROLLBACK_TO)?;
    if value.is_empty() {
        return None;
    }
    value.parse().ok()
}

impl DeploymentController {
    /// `rollback`.
    pub(super) fn rollback(&self, d: &mut Deployment, mut rs_list: Vec<Arc<ReplicaSet>>) -> DeploymentResult {
        let (new_rs, old) = self.all_replica_sets_and_sync_revision(d, &mut rs_list, true)?;
        let all: Vec<Arc<ReplicaSet>> = old.into_iter().chain(new_rs).collect();
        let mut revision = rollback_to(d).unwrap_or(0);
        if revision == 0 {
            revision = util::last_revision(&all);
            if revision == 0 {
                self.rollback_warning(d, util::ROLLBACK_REVISION_NOT_FOUND, "Unable to find last revision.");
                return self.update_deployment_and_clear_rollback_to(d);
            }
        }
        for rs in &all {
            match util::revision(rs) {
                Ok(v) if v == revision => {
                    let performed = self.rollback_to_template(d, rs);
                    if matches!(performed, Ok(true)) {
                        let message = format!("Rolled back deployment {:?} to revision {revision}", name(d));
                        self.recorder.event_for(d, EventType::Normal, util::ROLLBACK_DONE, &message);
                    }
                    return performed.map(|_| ());
                }
                Ok(_) => {}
                Err(e) => log::debug!("Unable to extract revision from replica set {}: {e}", util::rs_name(rs)),
            }
        }
        self.rollback_warning(d, util::ROLLBACK_REVISION_NOT_FOUND, "Unable to find the revision to rollback to.");
        self.update_deployment_and_clear_rollback_to(d)
    }

    /// `rollbackToTemplate`: whether the template was changed.
    fn rollback_to_template(&self, d: &mut Deployment, rs: &ReplicaSet) -> DeploymentResult<bool> {
        let template = rs.spec.as_ref().and_then(|s| s.template.clone()).unwrap_or_default();
        let performed = if !util::equal_ignore_hash(&util::template(d), &template) {
            util::set_from_replica_set_template(d, &template);
            // The annotations go back too, or the current ones would be copied to the old RS.
            util::set_deployment_annotations_to(d, rs);
            true
        } else {
            let message =
                format!("The rollback revision contains the same template as current deployment {:?}", name(d));
            self.rollback_warning(d, util::ROLLBACK_TEMPLATE_UNCHANGED, &message);
            false
        };
        self.update_deployment_and_clear_rollback_to(d)?;
        Ok(performed)
    }

    fn rollback_warning(&self, d: &Deployment, reason: &str, message: &str) {
        self.recorder.event_for(d, EventType::Warning, reason, message);
    }

    /// `updateDeploymentAndClearRollbackTo`.
    fn update_deployment_and_clear_rollback_to(&self, d: &mut Deployment) -> DeploymentResult {
        if let Some(annotations) = d.metadata.annotations.as_mut() {
            annotations.remove(DEPRECATED_ROLLBACK_TO);
        }
        let written =
            Api::<Deployment>::namespaced(&self.client, namespace(d)).replace(name(d), d, &PostParams::default())?;
        *d = (*self.deployments.mutation(written)).clone();
        Ok(())
    }
}
