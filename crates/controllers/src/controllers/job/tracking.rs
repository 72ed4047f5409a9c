//! Counting finished pods exactly once (`trackJobStatusAndRemoveFinalizers`): a finished pod's
//! UID goes into `status.uncountedTerminatedPods` (written first), then its tracking finalizer
//! is removed, then the UID moves into the `succeeded`/`failed` counters. Terminal conditions
//! are written once nothing is left uncounted or terminating.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;

use super::indexes::{Intervals, completion_index, valid_index};
use super::{
    JobController, MAX_UNCOUNTED_PODS, SyncCtx, completion_mode_label, completions, condition_true, ensure_condition,
    failed_for_target, has_backoff_limit_per_index, has_tracking_finalizer, is_indexed, is_pod_failed, jobs_resource,
    metrics, new_condition, spec, uid_of,
};
use crate::apimachinery::pod::phase;
use crate::client::{Api, PostParams};
use crate::controllers::job::policy::match_pod_failure_policy;
use crate::runtime::controller::SyncError;
use crate::runtime::events::EventType;

impl JobController {
    /// `trackJobStatusAndRemoveFinalizers`.
    pub(super) fn track_status_and_remove_finalizers(
        &self,
        ctx: &mut SyncCtx,
        mut needs_flush: bool,
    ) -> Result<(), SyncError> {
        let indexed = is_indexed(&ctx.job);
        let completions = completions(&ctx.job);
        if indexed {
            ctx.pods.sort_by_key(|p| completion_index(p).unwrap_or(-1));
        }
        let mut with_finalizer: HashSet<String> = ctx
            .pods
            .iter()
            .filter(|p| has_tracking_finalizer(p) && !ctx.expected_removals.contains(uid_of(p)))
            .map(|p| uid_of(p).to_string())
            .collect();
        let mut old_counters = ctx.job.status.clone().unwrap_or_default();
        if clean_uncounted(status_mut(&mut ctx.job), &with_finalizer) {
            needs_flush = true;
        }
        let mut policy_actions: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut to_remove: Vec<Arc<Pod>> = Vec::new();
        let mut new_succeeded_indexes = Vec::new();
        let mut reached_max = false;
        let policy = spec(&ctx.job).pod_failure_policy.clone();
        let finishing_unsuccessfully = ctx.finished.as_ref().is_some_and(|c| !is_success_criteria_met(c));
        for pod in ctx.pods.clone() {
            let uid = uid_of(&pod).to_string();
            if !has_tracking_finalizer(&pod) || ctx.expected_removals.contains(&uid) {
                continue;
            }
            let failed = is_pod_failed(&pod, ctx.only_failed);
            if !can_remove_finalizer(ctx, &pod, failed) {
                continue;
            }
            to_remove.push(pod.clone());
            let uncounted = uncounted_mut(&mut ctx.job);
            if phase(&pod) == "Succeeded" && !ctx.uncounted_failed.contains(&uid) {
                if indexed {
                    if let Some(index) = valid_index(&pod, completions)
                        && !ctx.prev_succeeded_indexes.has(index)
                    {
                        new_succeeded_indexes.push(index);
                        needs_flush = true;
                    }
                } else if !ctx.uncounted_succeeded.contains(&uid) {
                    needs_flush = true;
                    uncounted.succeeded.get_or_insert_with(Vec::new).push(uid);
                }
            } else if (failed || finishing_unsuccessfully)
                && !ctx.uncounted_failed.contains(&uid)
                && (!indexed || valid_index(&pod, completions).is_some())
            {
                let matched = match_pod_failure_policy(policy.as_ref(), &pod);
                if let Some(action) = matched.action {
                    *policy_actions.entry(action).or_default() += 1;
                }
                if matched.counts {
                    needs_flush = true;
                    uncounted.failed.get_or_insert_with(Vec::new).push(uid);
                }
            }
            let uncounted = uncounted_mut(&mut ctx.job);
            let pending = new_succeeded_indexes.len()
                + uncounted.succeeded.as_ref().map_or(0, Vec::len)
                + uncounted.failed.as_ref().map_or(0, Vec::len);
            if pending >= MAX_UNCOUNTED_PODS {
                // The status updates and pod events bring the Job back for the rest.
                reached_max = true;
                break;
            }
        }
        if indexed {
            ctx.succeeded_indexes = ctx.succeeded_indexes.with_indexes(new_succeeded_indexes);
            let text = ctx.succeeded_indexes.to_string();
            let total = ctx.succeeded_indexes.total();
            let failed_text = ctx.failed_indexes.as_ref().map(Intervals::to_string);
            let status = status_mut(&mut ctx.job);
            if status.completed_indexes.as_deref().unwrap_or("") != text {
                needs_flush = true;
            }
            status.succeeded = Some(total);
            status.completed_indexes = Some(text);
            if status.failed_indexes != failed_text {
                status.failed_indexes = failed_text;
                needs_flush = true;
            }
        }
        needs_flush |= self.record_interim_condition(ctx);
        let (flush_pending, removal_error) = self.flush_and_remove_finalizers(
            ctx,
            &to_remove,
            &mut with_finalizer,
            &mut old_counters,
            &policy_actions,
            needs_flush,
        )?;
        needs_flush = flush_pending;
        if let Some(error) = removal_error {
            return Err(error);
        }
        let finished = !reached_max && self.enact_job_finished(ctx);
        if finished || needs_flush {
            ctx.job = self.update_status(&ctx.job).map_err(|e| e.context("removing uncounted pods from status"))?;
            if finished && let Some(condition) = ctx.finished.clone() {
                self.record_job_finished(&ctx.job, &condition);
            }
            if finished {
                // Until the informer brings the finished Job, its syncs are skipped.
                self.finished.expect(ctx.job.metadata.uid.as_deref().unwrap_or(""));
            }
            record_pods_finished(&ctx.job, &old_counters);
        }
        Ok(())
    }

    /// The interim `FailureTarget` / `SuccessCriteriaMet` is written before any finalizer
    /// goes; the final `Failed` / `Complete` condition replaces it in `ctx.finished`.
    fn record_interim_condition(&self, ctx: &mut SyncCtx) -> bool {
        let Some(finished) = ctx.finished.clone() else { return false };
        let mut changed = false;
        if finished.type_ == "FailureTarget" {
            status_mut(&mut ctx.job).conditions.get_or_insert_with(Vec::new).push(finished.clone());
            ctx.finished = Some(failed_for_target(&finished, ctx.now));
            changed = true;
        } else if is_success_criteria_met(&finished) {
            if !condition_true(&ctx.job, "SuccessCriteriaMet") {
                status_mut(&mut ctx.job).conditions.get_or_insert_with(Vec::new).push(finished.clone());
                changed = true;
            }
            let reason = finished.reason.as_deref().unwrap_or("");
            let message = finished.message.as_deref().unwrap_or("");
            ctx.finished = Some(new_condition("Complete", "True", reason, message, ctx.now));
        }
        changed
    }

    /// `flushUncountedAndRemoveFinalizers`: writes the status (new uncounted UIDs, interim
    /// conditions), removes the finalizers, and moves the UIDs whose finalizer went into the
    /// counters. Returns whether a status write is still pending, and the removal error.
    fn flush_and_remove_finalizers(
        &self,
        ctx: &mut SyncCtx,
        to_remove: &[Arc<Pod>],
        with_finalizer: &mut HashSet<String>,
        old_counters: &mut JobStatus,
        policy_actions: &BTreeMap<&'static str, usize>,
        mut needs_flush: bool,
    ) -> Result<(bool, Option<SyncError>), SyncError> {
        if needs_flush {
            ctx.job = self.update_status(&ctx.job).map_err(|e| e.context("adding uncounted pods to status"))?;
            self.backoff.update(&ctx.key, ctx.backoff.clone());
            record_pods_finished(&ctx.job, old_counters);
            *old_counters = ctx.job.status.clone().unwrap_or_default();
            needs_flush = false;
        }
        for (action, count) in policy_actions {
            metrics().failures_handled_by_policy.add(&[action], *count as f64);
        }
        let mut removal_error = None;
        if !to_remove.is_empty() {
            let (removed, error) = self.remove_tracking_finalizers(&ctx.key, to_remove);
            for (pod, removed) in to_remove.iter().zip(removed) {
                if removed {
                    with_finalizer.remove(uid_of(pod));
                }
            }
            removal_error = error;
        }
        if clean_uncounted(status_mut(&mut ctx.job), with_finalizer) {
            needs_flush = true;
        }
        if removal_error.is_some() && needs_flush {
            ctx.job = self.update_status(&ctx.job).map_err(|e| e.context("removing uncounted pods from status"))?;
            needs_flush = false;
        }
        Ok((needs_flush, removal_error))
    }

    /// `removeTrackingFinalizerFromPods`, concurrently; a pod gone counts as done.
    fn remove_tracking_finalizers(&self, key: &str, pods: &[Arc<Pod>]) -> (Vec<bool>, Option<SyncError>) {
        self.finalizer_expectations.expect_removed(key, pods.iter().map(|p| uid_of(p).to_string()));
        let outcomes = self.write_threads.map(pods, |pod| match self.remove_finalizer(pod) {
            Ok(()) => (true, None),
            Err(e) => {
                self.finalizer_expectations.observed(key, uid_of(pod));
                if e.is_not_found() {
                    return (true, None);
                }
                log::error!("removing tracking finalizer: {e}");
                (false, Some(SyncError::from(e)))
            }
        });
        let removed = outcomes.iter().map(|(done, _)| *done).collect();
        (removed, outcomes.into_iter().find_map(|(_, error)| error))
    }

    /// `enactJobFinished`: the terminal condition, once nothing is uncounted or terminating.
    fn enact_job_finished(&self, ctx: &mut SyncCtx) -> bool {
        let Some(finished) = ctx.finished.clone() else { return false };
        let status = ctx.job.status.clone().unwrap_or_default();
        let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
        let pending = uncounted.succeeded.map_or(0, |v| v.len()) + uncounted.failed.map_or(0, |v| v.len());
        if pending > 0 {
            log::debug!(
                "Delaying marking the Job as finished, because there are still uncounted pod(s) job={} count={pending}",
                ctx.key
            );
            return false;
        }
        if self.gates.delay_terminal_condition() && ctx.terminating > 0 {
            log::debug!(
                "Delaying marking the Job as finished, because there are still terminating pod(s) job={} count={}",
                ctx.key,
                ctx.terminating
            );
            return false;
        }
        let reason = finished.reason.as_deref().unwrap_or("");
        let message = finished.message.as_deref().unwrap_or("");
        ensure_condition(&mut ctx.job, &finished.type_, &finished.status, reason, message, ctx.now);
        if finished.type_ == "Complete" {
            status_mut(&mut ctx.job).completion_time = finished.last_transition_time.clone();
        }
        true
    }

    /// `recordJobFinished`: the Event and `jobs_finished_total`.
    fn record_job_finished(&self, job: &Job, finished: &JobCondition) {
        let mode = completion_mode_label(job);
        let reason = finished.reason.as_deref().unwrap_or("");
        if finished.type_ == "Complete" {
            let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
            if spec(job).completions.is_some_and(|c| succeeded > c) {
                let message = "Too many succeeded pods running after completion count reached";
                self.recorder.event_for(job, EventType::Warning, "TooManySucceededPods", message);
            }
            self.recorder.event_for(job, EventType::Normal, "Completed", "Job completed");
            metrics().jobs_finished.inc(&[mode, "succeeded", reason]);
        } else {
            let message = finished.message.as_deref().unwrap_or("");
            self.recorder.event_for(job, EventType::Warning, reason, message);
            metrics().jobs_finished.inc(&[mode, "failed", reason]);
        }
    }

    /// `updateJobStatus`: a PUT of the status subresource; the written Job is what the next
    /// sync starts from until the watch brings it.
    fn update_status(&self, job: &Job) -> Result<Job, SyncError> {
        let namespace = job.metadata.namespace.as_deref().unwrap_or("");
        let name = job.metadata.name.as_deref().unwrap_or("");
        let updated = Api::<Job>::namespaced(&self.client, namespace)
            .replace_status(name, job, &PostParams::default())
            .map_err(SyncError::from)?;
        self.consistency.wrote(&updated.metadata, &jobs_resource());
        self.jobs.mutation(updated.clone());
        Ok(updated)
    }
}

fn status_mut(job: &mut Job) -> &mut JobStatus {
    job.status.get_or_insert_with(Default::default)
}

fn uncounted_mut(job: &mut Job) -> &mut k8s_openapi::api::batch::v1::UncountedTerminatedPods {
    status_mut(job).uncounted_terminated_pods.get_or_insert_with(Default::default)
}

fn is_success_criteria_met(condition: &JobCondition) -> bool {
    condition.type_ == "SuccessCriteriaMet" && condition.status == "True"
}

/// `canRemoveFinalizer`: the Job is going or finishing, the pod succeeded, or it failed and
/// is not the failed pod an index keeps until its replacement exists.
fn can_remove_finalizer(ctx: &SyncCtx, pod: &Pod, failed: bool) -> bool {
    if ctx.job.metadata.deletion_timestamp.is_some() || ctx.finished.is_some() || phase(pod) == "Succeeded" {
        return true;
    }
    if !failed {
        return false;
    }
    if has_backoff_limit_per_index(&ctx.job)
        && let Some(index) = completion_index(pod)
        && ctx.delayed_deletion.get(&index).is_some_and(|kept| uid_of(kept) == uid_of(pod))
    {
        log::debug!("Delaying pod finalizer removal to await for pod recreation within the index pod={}", uid_of(pod));
        return false;
    }
    true
}

/// `cleanUncountedPodsWithoutFinalizers`: UIDs whose pods no longer hold the finalizer move
/// into the counters. True if the status changed.
fn clean_uncounted(status: &mut JobStatus, with_finalizer: &HashSet<String>) -> bool {
    let uncounted = status.uncounted_terminated_pods.get_or_insert_with(Default::default);
    let mut changed = false;
    let mut moved = |list: &mut Option<Vec<String>>| {
        let Some(uids) = list.as_mut() else { return 0 };
        let before = uids.len();
        uids.retain(|uid| with_finalizer.contains(uid));
        let gone = before - uids.len();
        if uids.is_empty() {
            *list = None;
        }
        changed |= gone > 0;
        gone as i32
    };
    let succeeded = moved(&mut uncounted.succeeded);
    let failed = moved(&mut uncounted.failed);
    if succeeded > 0 {
        status.succeeded = Some(status.succeeded.unwrap_or(0) + succeeded);
    }
    if failed > 0 {
        status.failed = Some(status.failed.unwrap_or(0) + failed);
    }
    changed
}

/// `recordJobPodFinished`: `job_pods_finished_total` and, for Indexed Jobs,
/// `job_finished_indexes_total`, from the change of the counters.
fn record_pods_finished(job: &Job, old: &JobStatus) {
    let mode = completion_mode_label(job);
    let status = job.status.clone().unwrap_or_default();
    let m = metrics();
    let succeeded = if is_indexed(job) {
        let completions = completions(job);
        let count = |s: &Option<String>| s.as_deref().map_or(0, |s| Intervals::parse(s, completions).total());
        let label = if has_backoff_limit_per_index(job) { "perIndex" } else { "global" };
        let diff = if status.completed_indexes != old.completed_indexes {
            count(&status.completed_indexes) - count(&old.completed_indexes)
        } else {
            0
        };
        m.finished_indexes.add(&["succeeded", label], f64::from(diff.max(0)));
        if has_backoff_limit_per_index(job) && status.failed_indexes != old.failed_indexes {
            let failed = count(&status.failed_indexes) - count(&old.failed_indexes);
            if failed > 0 {
                m.finished_indexes.add(&["failed", label], f64::from(failed));
            }
        }
        diff
    } else {
        status.succeeded.unwrap_or(0) - old.succeeded.unwrap_or(0)
    };
    m.pods_finished.add(&[mode, "succeeded"], f64::from(succeeded.max(0)));
    let failed = status.failed.unwrap_or(0) - old.failed.unwrap_or(0);
    m.pods_finished.add(&[mode, "failed"], f64::from(failed.max(0)));
}
