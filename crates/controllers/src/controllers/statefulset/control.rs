//! Upstream's `stateful_set_control.go` (`defaultStatefulSetControl`) and
//! `stateful_set_status_updater.go`: one sync of a set against its pods — revisions, creating,
//! replacing and condemning pods in ordinal order, the rolling update, the status and the
//! revision history's truncation.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};

use super::revisions::{UpdateRevision, choose_update_revision, set_matches_latest_existing_revision};
use super::utils::{
    allows_burst, complete_rolling_update, end_ordinal, in_ordinal_range, inconsistent_status, is_created, is_finished,
    is_pending, is_running_and_available, is_running_and_ready, is_terminating, is_unavailable, name_of, namespace_of,
    new_versioned_pod, ordinal, replicas, revision_of, spec, start_ordinal,
};
use super::{Error, StatefulSetController, sets_resource};
use crate::apimachinery::errors::Aggregate;
use crate::apimachinery::labels::Selector;
use crate::client::{Api, PostParams};
use crate::controllers::history;
use crate::runtime::controller_ref::controller_ref;

/// `MaxBatchSize` of `slowStartBatch`.
const MAX_BATCH_SIZE: usize = 500;

/// The most threads one slow-start batch runs on.
const BATCH_THREADS: usize = 16;

/// `retry.DefaultRetry`'s delays: 10 ms, five attempts.
const STATUS_RETRIES: usize = 5;

/// `newRevision`: the set's template as a revision (its patch, labels, annotations).
pub fn new_revision(set: &StatefulSet, revision: i64, collision_count: Option<i32>) -> ControllerRevision {
    let template = &spec(set).template;
    let mut cr = history::new_revision(
        &set.metadata,
        controller_ref(set),
        template.metadata.as_ref().and_then(|m| m.labels.as_ref()),
        history::template_patch(template),
        revision,
        collision_count,
    );
    if let Some(annotations) = &set.metadata.annotations {
        cr.metadata.annotations.get_or_insert_with(Default::default).extend(annotations.clone());
    }
    cr
}

/// `ApplyRevision`: the set with the revision's template (the patch replaces `spec.template`).
pub fn apply_revision(set: &StatefulSet, revision: &ControllerRevision) -> Result<StatefulSet, Error> {
    let mut clone = set.clone();
    let data = revision.data.as_ref().map(|d| &d.0);
    if let Some(template) = data.and_then(|d| d.get("spec")).and_then(|s| s.get("template")) {
        let mut template = template.clone();
        if let Some(object) = template.as_object_mut() {
            object.remove("$patch");
        }
        let template: PodTemplateSpec = crate::apimachinery::json::from_value(&template)?;
        clone.spec.get_or_insert_with(Default::default).template = template;
    }
    Ok(clone)
}

/// Counts of one pass over the pods (`computeReplicaStatus`), availability as of `now`.
fn update_status(
    status: &mut StatefulSetStatus,
    min_ready: i32,
    current: &str,
    update: &str,
    now: Timestamp,
    pods: &[&Pod],
) {
    let (mut replicas, mut ready, mut available, mut current_count, mut updated) = (0, 0, 0, 0, 0);
    for pod in pods {
        if is_created(pod) {
            replicas += 1;
        }
        if is_running_and_ready(pod) {
            ready += 1;
            if is_running_and_available(pod, min_ready, now) {
                available += 1;
            }
        }
        if is_created(pod) && !is_terminating(pod) {
            let revision = revision_of(pod);
            if revision == current {
                current_count += 1;
            }
            if revision == update {
                updated += 1;
            }
        }
    }
    status.replicas = replicas;
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.current_replicas = Some(current_count);
    status.updated_replicas = Some(updated);
}

/// Runs `f` over every index: in order, stopping at the first that says so (monotonic), or in
/// slow-start batches (`slowStartBatch`, Parallel). Returns (exit, error).
fn run_for_all(
    count: usize,
    monotonic: bool,
    f: &(dyn Fn(usize) -> (bool, Result<(), Error>) + Sync),
) -> (bool, Option<Error>) {
    if monotonic {
        for i in 0..count {
            let (exit, result) = f(i);
            if exit || result.is_err() {
                return (true, result.err());
            }
        }
        return (false, None);
    }
    let mut next = 0;
    let mut batch = count.min(1);
    while batch > 0 {
        if let Err(errors) = Aggregate::from_errors(run_batch(next..next + batch, f)) {
            return (true, Some(errors.into()));
        }
        next += batch;
        batch = (2 * batch).min(count - next).min(MAX_BATCH_SIZE);
    }
    (false, None)
}

/// One slow-start batch: every index run, on at most [`BATCH_THREADS`] threads (upstream runs
/// a goroutine each; most calls are quick checks of pods that need nothing). The errors.
fn run_batch(indexes: std::ops::Range<usize>, f: &(dyn Fn(usize) -> (bool, Result<(), Error>) + Sync)) -> Vec<Error> {
    if indexes.len() == 1 {
        return f(indexes.start).1.err().into_iter().collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(indexes.start);
    let errors = parking_lot::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..indexes.len().min(BATCH_THREADS) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= indexes.end {
                        break;
                    }
                    if let Err(e) = f(i).1 {
                        errors.lock().push(e);
                    }
                }
            });
        }
    });
    errors.into_inner()
}

impl StatefulSetController {
    /// `UpdateStatefulSet`: revisions, the update, the status, then the history truncated.
    /// Availability is judged as of `now`, the sync's one point in time.
    pub(super) fn update_stateful_set(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        now: Timestamp,
    ) -> Result<StatefulSetStatus, Error> {
        let mut revisions = self.list_revisions(set)?;
        history::sort_revisions(&mut revisions);
        let (current, update, result) = self.perform_update(set, pods, &revisions, now);
        let truncated = self.truncate_history(set, pods, &revisions, current.as_ref(), update.as_ref());
        // As upstream, a failed update and a failed truncation are reported together
        // (`utilerrors.NewAggregate`: one alone reads as itself, both as `[a, b]`), each kept
        // whole for its kind; the placeholder status is never returned with an error.
        let mut errors = Vec::new();
        let status = result.unwrap_or_else(|e| {
            errors.push(e);
            StatefulSetStatus::default()
        });
        errors.extend(truncated.err());
        Aggregate::from_errors(errors)?;
        Ok(status)
    }

    /// `ListRevisions`: the revisions the set's selector matches.
    pub(super) fn list_revisions(&self, set: &StatefulSet) -> Result<Vec<Arc<ControllerRevision>>, Error> {
        let selector = Selector::from_label_selector(&spec(set).selector).map_err(|e| Error::Selector(e.into()))?;
        Ok(self.history.list(&set.metadata, &selector))
    }

    #[allow(clippy::type_complexity)]
    fn perform_update(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        revisions: &[Arc<ControllerRevision>],
        now: Timestamp,
    ) -> (Option<ControllerRevision>, Option<ControllerRevision>, Result<StatefulSetStatus, Error>) {
        let (current, update, collision_count) = match self.revisions(set, revisions) {
            Ok(found) => found,
            Err(e) => return (None, None, Err(e)),
        };
        let (mut status, error) = match self.update_pods(set, &current, &update, collision_count, pods, now) {
            Ok(updated) => updated,
            Err(e) => return (Some(current), Some(update), Err(e)),
        };
        let status_error = self.update_status(set, &mut status).err();
        let result = match (error, status_error) {
            (Some(e), Some(status_error)) => {
                log::error!("Could not update status statefulSet={}: {status_error}", key(set));
                Err(e)
            }
            (Some(e), None) | (None, Some(e)) => Err(e),
            (None, None) => {
                log::debug!(
                    "StatefulSet revisions statefulSet={} currentRevision={} updateRevision={}",
                    key(set),
                    status.current_revision.as_deref().unwrap_or(""),
                    status.update_revision.as_deref().unwrap_or("")
                );
                Ok(status)
            }
        };
        (Some(current), Some(update), result)
    }

    /// `truncateHistory`: revisions no pod, nor the current or update revision, uses are
    /// deleted, oldest first, beyond `revisionHistoryLimit`.
    fn truncate_history(
        &self,
        set: &StatefulSet,
        pods: &[Arc<Pod>],
        revisions: &[Arc<ControllerRevision>],
        current: Option<&ControllerRevision>,
        update: Option<&ControllerRevision>,
    ) -> Result<(), Error> {
        let mut live: HashSet<&str> = pods.iter().map(|p| revision_of(p)).collect();
        live.extend(current.iter().chain(update.iter()).map(|r| name_of(&r.metadata)));
        let old: Vec<&Arc<ControllerRevision>> =
            revisions.iter().filter(|r| !live.contains(name_of(&r.metadata))).collect();
        let limit = spec(set).revision_history_limit.unwrap_or(10);
        if limit < 0 || old.len() <= limit as usize {
            return Ok(());
        }
        for revision in &old[..old.len() - limit as usize] {
            self.history.delete(revision)?;
        }
        Ok(())
    }

    /// `getStatefulSetRevisions`: the current and update revisions (the update revision
    /// created, an equal older one renumbered, or the latest one kept when it still derives the
    /// same revision) and the collision count.
    fn revisions(
        &self,
        set: &StatefulSet,
        revisions: &[Arc<ControllerRevision>],
    ) -> Result<(ControllerRevision, ControllerRevision, i32), Error> {
        let mut collision_count = set.status.as_ref().and_then(|s| s.collision_count).unwrap_or(0);
        let candidate = new_revision(set, history::next_revision(revisions), Some(collision_count));
        let matches_latest = |latest: &ControllerRevision| {
            let enabled = self.semantic_revision_comparison;
            set_matches_latest_existing_revision(enabled, set, &candidate, latest, &self.revision_equality)
        };
        let update = match choose_update_revision(revisions, &candidate, matches_latest) {
            UpdateRevision::Latest(latest) => (**latest).clone(),
            UpdateRevision::Renumber(found) => self.history.update_revision_number(found, candidate.revision)?,
            UpdateRevision::Create => self.history.create(&set.metadata, &candidate, &mut collision_count)?,
        };
        let current_name = set.status.as_ref().and_then(|s| s.current_revision.as_deref()).unwrap_or("");
        let current = revisions
            .iter()
            .find(|r| name_of(&r.metadata) == current_name)
            .map_or_else(|| update.clone(), |r| (**r).clone());
        Ok((current, update, collision_count))
    }

    /// `updateStatefulSet`: replicas created, recreated or fixed in ordinal order, condemned
    /// pods deleted from the highest ordinal, then the rolling update. Returns the status
    /// computed and the error of the update (an error alone if the revisions could not be
    /// applied).
    fn update_pods(
        &self,
        set: &StatefulSet,
        current: &ControllerRevision,
        update: &ControllerRevision,
        collision_count: i32,
        pods: &[Arc<Pod>],
        now: Timestamp,
    ) -> Result<(StatefulSetStatus, Option<Error>), Error> {
        let (current_set, update_set) = (apply_revision(set, current)?, apply_revision(set, update)?);
        let (current_name, update_name) = (name_of(&current.metadata), name_of(&update.metadata));
        let min_ready = spec(set).min_ready_seconds.unwrap_or(0);
        let mut status = StatefulSetStatus {
            observed_generation: set.metadata.generation,
            current_revision: Some(current_name.to_string()),
            update_revision: Some(update_name.to_string()),
            collision_count: Some(collision_count),
            ..StatefulSetStatus::default()
        };
        let all: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
        update_status(&mut status, min_ready, current_name, update_name, now, &all);

        let start = start_ordinal(set);
        let count = usize::try_from(replicas(set)).unwrap_or(0);
        let mut slots: Vec<Option<Pod>> = vec![None; count];
        let mut condemned: Vec<Pod> = Vec::new();
        for pod in pods {
            if in_ordinal_range(pod, set) {
                slots[(ordinal(pod) - start) as usize] = Some((**pod).clone());
            } else if ordinal(pod) >= 0 {
                condemned.push((**pod).clone());
            }
        }
        let replicas: Vec<Pod> = slots
            .into_iter()
            .enumerate()
            .map(|(i, pod)| {
                pod.unwrap_or_else(|| {
                    new_versioned_pod(&current_set, &update_set, current_name, update_name, start + i as i64)
                })
            })
            .collect();
        debug_assert_eq!(end_ordinal(set) - start + 1, replicas.len() as i64);
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));

        let unavailable: Vec<&Pod> =
            replicas.iter().chain(condemned.iter().rev()).filter(|p| is_unavailable(p, min_ready, now)).collect();
        let first_unavailable = unavailable.first().map(|p| name_of(&p.metadata).to_string());
        if let Some(first) = &first_unavailable {
            log::debug!(
                "StatefulSet has unavailable Pods statefulSet={} unavailableReplicas={} pod={first}",
                key(set),
                unavailable.len()
            );
        }
        if set.metadata.deletion_timestamp.is_some() {
            return Ok((status, None));
        }
        let monotonic = !allows_burst(set);
        let recount = |status: &mut StatefulSetStatus| {
            let everything: Vec<&Pod> = replicas.iter().chain(condemned.iter()).collect();
            update_status(status, min_ready, current_name, update_name, now, &everything);
        };

        let process_replica = |i: usize| self.process_replica(set, &update_set, monotonic, &replicas[i], now);
        let (exit, error) = run_for_all(replicas.len(), monotonic, &process_replica);
        if exit || error.is_some() {
            recount(&mut status);
            return Ok((status, error));
        }

        let fix_claims = |i: usize| {
            let pod = &condemned[i];
            if !self.pod_control.claims_match_retention_policy(&update_set, pod)
                && let Err(e) = self.pod_control.update_claims_for_retention_policy(&update_set, pod)
            {
                return (true, Err(e));
            }
            (false, Ok(()))
        };
        let (exit, error) = run_for_all(condemned.len(), monotonic, &fix_claims);
        if exit || error.is_some() {
            recount(&mut status);
            return Ok((status, error));
        }

        let process_condemned =
            |i: usize| self.process_condemned(set, first_unavailable.as_deref(), monotonic, &condemned[i], now);
        let (exit, error) = run_for_all(condemned.len(), monotonic, &process_condemned);
        if exit || error.is_some() {
            recount(&mut status);
            return Ok((status, error));
        }
        recount(&mut status);

        let strategy = spec(set).update_strategy.as_ref();
        if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
            return Ok((status, None));
        }
        // The RollingUpdate strategy (MaxUnavailableStatefulSet, Beta, is off by default in
        // v1.36 and not ported): from the highest ordinal down to the partition, one pod at a
        // time, each replaced pod waited for until it is available.
        let partition = strategy.and_then(|s| s.rolling_update.as_ref()).and_then(|r| r.partition).unwrap_or(0);
        let update_min = usize::try_from(partition).unwrap_or(0);
        for target in (update_min..replicas.len()).rev() {
            let pod = &replicas[target];
            if revision_of(pod) != update_name && !is_terminating(pod) {
                log::info!(
                    "Pod of StatefulSet is terminating for update statefulSet={} pod={}",
                    key(set),
                    name_of(&pod.metadata)
                );
                if let Err(e) = self.pod_control.delete_pod(set, pod) {
                    return Ok((status, Some(e)));
                }
                status.current_replicas = Some(status.current_replicas.unwrap_or(0) - 1);
                return Ok((status, None));
            }
            if is_unavailable(pod, min_ready, now) {
                log::debug!(
                    "StatefulSet is waiting for Pod to update statefulSet={} pod={}",
                    key(set),
                    name_of(&pod.metadata)
                );
                return Ok((status, None));
            }
        }
        Ok((status, None))
    }

    /// `processReplica`: (exit, error) for the replica at one ordinal.
    fn process_replica(
        &self,
        set: &StatefulSet,
        update_set: &StatefulSet,
        monotonic: bool,
        pod: &Pod,
        now: Timestamp,
    ) -> (bool, Result<(), Error>) {
        let control = &self.pod_control;
        let pod_key = || format!("{}/{}", namespace_of(&set.metadata), name_of(&pod.metadata));
        // Failed or succeeded pods are deleted; the next sync creates their replacement.
        if is_finished(pod) {
            if pod.metadata.deletion_timestamp.is_none()
                && let Err(e) = control.delete_pod(set, pod)
            {
                return (true, Err(e));
            }
            return (true, Ok(()));
        }
        if !is_created(pod) {
            if control.pod_claim_is_stale(set, pod) {
                return (true, Ok(()));
            }
            if let Err(e) = control.create_pod(set, pod) {
                return (true, Err(e));
            }
            if monotonic {
                return (true, Ok(()));
            }
        }
        if is_pending(pod) {
            log::debug!(
                "StatefulSet is triggering PVC creation for pending Pod statefulSet={} pod={}",
                key(set),
                pod_key()
            );
            if let Err(e) = control.create_missing_claims(set, pod) {
                return (true, Err(e));
            }
        }
        if is_terminating(pod) && monotonic {
            log::debug!("StatefulSet is waiting for Pod to Terminate statefulSet={} pod={}", key(set), pod_key());
            return (true, Ok(()));
        }
        if !is_running_and_ready(pod) && monotonic {
            log::debug!(
                "StatefulSet is waiting for Pod to be Running and Ready statefulSet={} pod={}",
                key(set),
                pod_key()
            );
            return (true, Ok(()));
        }
        if !is_running_and_available(pod, spec(set).min_ready_seconds.unwrap_or(0), now) && monotonic {
            log::debug!("StatefulSet is waiting for Pod to be Available statefulSet={} pod={}", key(set), pod_key());
            return (true, Ok(()));
        }
        let retention_match = control.claims_match_retention_policy(update_set, pod);
        if super::utils::identity_matches(set, pod) && super::utils::storage_matches(set, pod) && retention_match {
            return (false, Ok(()));
        }
        if let Err(e) = control.update_pod(update_set, pod) {
            return (true, Err(e));
        }
        (false, Ok(()))
    }

    /// `processCondemned`: a pod beyond the replicas, deleted once the ones before it are
    /// available (monotonic); the first unavailable pod is deleted without waiting.
    fn process_condemned(
        &self,
        set: &StatefulSet,
        first_unavailable: Option<&str>,
        monotonic: bool,
        pod: &Pod,
        now: Timestamp,
    ) -> (bool, Result<(), Error>) {
        let name = name_of(&pod.metadata);
        if is_terminating(pod) {
            if monotonic {
                log::debug!(
                    "StatefulSet is waiting for Pod to Terminate prior to scale down statefulSet={} pod={name}",
                    key(set)
                );
                return (true, Ok(()));
            }
            return (false, Ok(()));
        }
        let is_first_unavailable = first_unavailable == Some(name);
        if !is_running_and_ready(pod) && monotonic && !is_first_unavailable {
            log::debug!(
                "StatefulSet is waiting for Pod to be Running and Ready prior to scale down statefulSet={}",
                key(set)
            );
            return (true, Ok(()));
        }
        let min_ready = spec(set).min_ready_seconds.unwrap_or(0);
        if !is_running_and_available(pod, min_ready, now) && monotonic && !is_first_unavailable {
            log::debug!("StatefulSet is waiting for Pod to be Available prior to scale down statefulSet={}", key(set));
            return (true, Ok(()));
        }
        log::info!("Pod of StatefulSet is terminating for scale down statefulSet={} pod={name}", key(set));
        (true, self.pod_control.delete_pod(set, pod))
    }

    /// `updateStatefulSetStatus` with the status updater: written when it differs, retried on
    /// conflict against the cached set.
    fn update_status(&self, set: &StatefulSet, status: &mut StatefulSetStatus) -> Result<(), Error> {
        complete_rolling_update(set, status);
        if !inconsistent_status(set, status) {
            return Ok(());
        }
        let api = Api::<StatefulSet>::namespaced(&self.client, namespace_of(&set.metadata));
        let mut set = set.clone();
        let mut attempt = 0;
        loop {
            set.status = Some(status.clone());
            match api.replace_status(name_of(&set.metadata), &set, &PostParams::default()) {
                Ok(updated) => {
                    self.consistency.wrote(&updated.metadata, &sets_resource());
                    self.sets.mutation(updated);
                    log::debug!(
                        "Updated status statefulSet={} replicas={} readyReplicas={} currentReplicas={} updatedReplicas={}",
                        key(&set),
                        status.replicas,
                        status.ready_replicas.unwrap_or(0),
                        status.current_replicas.unwrap_or(0),
                        status.updated_replicas.unwrap_or(0)
                    );
                    return Ok(());
                }
                Err(e) => {
                    attempt += 1;
                    if !e.is_conflict() || attempt >= STATUS_RETRIES {
                        return Err(e.into());
                    }
                    if let Some(fresh) = self.sets.get_newest(&key(&set)) {
                        set = (*fresh).clone();
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

fn key(set: &StatefulSet) -> String {
    format!("{}/{}", namespace_of(&set.metadata), name_of(&set.metadata))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_batches_stop_at_the_first_failing_batch() {
        let seen = std::sync::Mutex::new(Vec::new());
        let f = |i: usize| {
            seen.lock().unwrap().push(i);
            (false, if i == 4 { Err(Error::Selector("boom".into())) } else { Ok(()) })
        };
        let (exit, error) = run_for_all(10, false, &f);
        assert!(exit);
        assert_eq!(error.map(|e| e.to_string()).as_deref(), Some("boom"));
        // Batches 1, 2, 4: indexes 0..7 ran, 7.. did not.
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, (0..7).collect::<Vec<_>>());
        let stop_at_2 = |i: usize| (i == 2, Ok(()));
        assert!(matches!(run_for_all(5, true, &stop_at_2), (true, None)));
    }

    #[test]
    fn a_revision_applies_its_template() {
        let set: StatefulSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {"selector": {}, "serviceName": "s", "template": {"metadata": {"labels": {"v": "1"}}}}
        }))
        .unwrap();
        let revision = new_revision(&set, 1, Some(0));
        let mut changed = set.clone();
        changed.spec.as_mut().unwrap().template.metadata.as_mut().unwrap().labels =
            Some([("v".to_string(), "2".to_string())].into());
        let restored = apply_revision(&changed, &revision).unwrap();
        assert_eq!(restored.spec.unwrap().template, set.spec.unwrap().template);
        assert!(name_of(&revision.metadata).starts_with("web-"));
    }
}
