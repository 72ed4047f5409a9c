//! Upstream's `progress.go`: the Progressing condition against `progressDeadlineSeconds`,
//! ReplicaFailure conditions taken over from the ReplicaSets, and the requeue of a Deployment
//! that may time out.

use std::sync::Arc;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};

use super::sync::{calculate_status, normalized};
use super::util::{self, PROGRESSING};
use super::{DeploymentController, DeploymentResult, name};

/// The status `syncRolloutStatus` writes: `calculateStatus` (with `terminatingReplicas` when
/// `terminating_replicas`) plus the Progressing condition (when there is a deadline) and the
/// ReplicaFailure condition.
pub(super) fn rollout_status(
    all: &[Arc<ReplicaSet>],
    new_rs: Option<&Arc<ReplicaSet>>,
    d: &Deployment,
    terminating_replicas: bool,
    now: Timestamp,
) -> DeploymentStatus {
    let mut status = calculate_status(all, new_rs, d, terminating_replicas, now);
    if util::progress_deadline(d).is_none() {
        util::remove_condition(&mut status, PROGRESSING);
    }
    let current = d.status.as_ref().and_then(|s| util::get_condition(s, PROGRESSING)).cloned();
    // A finished rollout being resynced: no progress to estimate.
    let complete = status.replicas == status.updated_replicas
        && current.as_ref().is_some_and(|c| c.reason.as_deref() == Some(util::NEW_RS_AVAILABLE));
    if util::progress_deadline(d).is_some() && !complete {
        let rs_name = new_rs.map(|rs| util::rs_name(rs));
        let subject = |deployment: String| match rs_name {
            Some(rs) => format!("ReplicaSet {rs:?}"),
            None => deployment,
        };
        let deployment = format!("Deployment {:?}", name(d));
        if util::deployment_complete(d, &status) {
            let message = format!("{} has successfully progressed.", subject(deployment));
            let condition = util::new_condition(PROGRESSING, "True", util::NEW_RS_AVAILABLE, &message, now);
            util::set_condition(&mut status, condition);
        } else if util::deployment_progressing(d, &status) {
            let message = format!("{} is progressing.", subject(deployment));
            let mut condition = util::new_condition(PROGRESSING, "True", util::REPLICA_SET_UPDATED, &message, now);
            // Progress refreshes lastUpdateTime even with the same reason; the transition time
            // stays while the status stays True.
            if let Some(current) = &current {
                if current.status == "True" {
                    condition.last_transition_time = current.last_transition_time.clone();
                }
                util::remove_condition(&mut status, PROGRESSING);
            }
            util::set_condition(&mut status, condition);
        } else if util::deployment_timed_out(d, &status, now) {
            let message = format!("{} has timed out progressing.", subject(deployment));
            let condition = util::new_condition(PROGRESSING, "False", util::TIMED_OUT, &message, now);
            util::set_condition(&mut status, condition);
        }
    }
    match replica_failures(all, new_rs).into_iter().next() {
        Some(failure) => util::set_condition(&mut status, failure),
        None => util::remove_condition(&mut status, util::REPLICA_FAILURE),
    }
    status
}

/// `getReplicaFailures`: the new ReplicaSet's ReplicaFailure conditions, else the others'.
fn replica_failures(all: &[Arc<ReplicaSet>], new_rs: Option<&Arc<ReplicaSet>>) -> Vec<DeploymentCondition> {
    let failures = |rs: &Arc<ReplicaSet>| -> Vec<DeploymentCondition> {
        let conditions = rs.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == util::REPLICA_FAILURE)
            .map(util::rs_to_deployment_condition)
            .collect()
    };
    let from_new: Vec<DeploymentCondition> = new_rs.map(failures).unwrap_or_default();
    if !from_new.is_empty() {
        return from_new;
    }
    all.iter().flat_map(failures).collect()
}

/// What `requeueStuckDeployment` decides.
#[derive(Debug, PartialEq)]
pub(super) enum Requeue {
    /// No progress estimate needed.
    Never,
    /// The deadline is (almost) here: check now, rate limited.
    Now,
    /// Check again after this long (the time left plus a second of slack).
    After(Duration),
}

/// `requeueStuckDeployment`: when to look again at a Deployment that made no progress.
pub(super) fn requeue_stuck(d: &Deployment, new_status: &DeploymentStatus, now: Timestamp) -> Requeue {
    let current = d.status.as_ref().and_then(|s| util::get_condition(s, PROGRESSING));
    let (Some(deadline), Some(current)) = (util::progress_deadline(d), current) else { return Requeue::Never };
    if util::deployment_complete(d, new_status) || current.reason.as_deref() == Some(util::TIMED_OUT) {
        return Requeue::Never;
    }
    let last_update = current.last_update_time.as_ref().map_or(now, |t| t.0);
    let due = last_update.as_millisecond() + i64::from(deadline) * 1000;
    let after_ms = due - now.as_millisecond();
    if after_ms < 1000 {
        return Requeue::Now;
    }
    Requeue::After(Duration::from_millis(after_ms as u64) + Duration::from_secs(1))
}

impl DeploymentController {
    /// `syncRolloutStatus`: writes the rollout status when it changed, else requeues a
    /// Deployment that may be stuck so that its deadline is checked in time.
    pub(super) fn sync_rollout_status(
        &self,
        all: &[Arc<ReplicaSet>],
        new_rs: Option<&Arc<ReplicaSet>>,
        d: &mut Deployment,
    ) -> DeploymentResult {
        let now = Timestamp::now();
        let status = rollout_status(all, new_rs, d, self.terminating_replicas, now);
        if normalized(&d.status.clone().unwrap_or_default()) == normalized(&status) {
            match requeue_stuck(d, &status, now) {
                Requeue::Never => {}
                Requeue::Now => self.queue.add_rate_limited(Self::key(d)),
                Requeue::After(delay) => self.queue.add_after(Self::key(d), delay),
            }
            return Ok(());
        }
        d.status = Some(status);
        self.update_status(d)?;
        Ok(())
    }
}
