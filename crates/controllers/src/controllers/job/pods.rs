//! `manageJob`: creating pods (slow start, with completion indexes and the tracking
//! finalizer) and deleting them (too many, suspended, or the Job finished), with upstream's
//! `RealPodControl` Events.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec};

use super::indexes::{
    COMPLETION_INDEX, COMPLETION_INDEX_ENV, INDEX_FAILURE_COUNT, INDEX_IGNORED_FAILURE_COUNT, Intervals,
    duplicated_index_pods, first_pending_indexes, generate_name_with_index, indexes_of, new_index_failure_counts,
};
use super::policy::match_pod_failure_policy;
use super::{
    JobController, MAX_POD_CREATE_DELETE_PER_SYNC, SYNC_BATCH_PERIOD, SyncCtx, TRACKING_FINALIZER, backoff,
    completions, has_backoff_limit_per_index, has_tracking_finalizer, is_indexed, is_terminating, metrics, spec,
    suspended,
};
use crate::apimachinery::pod::is_pod_ready;
use crate::controllers::podutil::control::{CreateError, PodControl, pod_from_template};
use crate::controllers::podutil::ranking::{active_pods_order, pod_key};
use crate::runtime::controller::SyncError;
use crate::runtime::slow_start::slow_start_batch;

/// What `manageJob` did: active pods afterwards, the metrics' action, the first error.
type Managed = (i32, &'static str, Option<SyncError>);

impl JobController {
    /// `manageJob`: pods deleted when suspended or above what is wanted, else created up to
    /// parallelism (or the remaining completions), once the failure backoff allows.
    pub(super) fn manage_job(&self, ctx: &mut SyncCtx) -> Managed {
        let job = ctx.job.clone();
        let key = ctx.key.clone();
        let mut active = ctx.active.len() as i32;
        if suspended(&job) {
            log::debug!("Deleting all active pods in suspended job job={key} active={active}");
            let doomed = pods_for_removal(&job, &ctx.active, ctx.active.len());
            return self.delete_for_manage(ctx, &doomed);
        }
        let parallelism = spec(&job).parallelism.unwrap_or(1);
        let wanted = match spec(&job).completions {
            None if ctx.succeeded > 0 => active,
            None => parallelism,
            Some(completions) => (completions - ctx.succeeded).min(parallelism).max(0),
        };
        let excess = (active - wanted).max(0) as usize;
        let mut doomed = pods_for_removal(&job, &ctx.active, excess);
        doomed.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
        if !doomed.is_empty() {
            log::debug!("Too many pods running for job job={key} deleted={} target={wanted}", doomed.len());
            return self.delete_for_manage(ctx, &doomed);
        }
        let terminating = if ctx.only_failed { ctx.terminating } else { 0 };
        let missing = wanted - terminating - active;
        if missing <= 0 {
            return (active, "tracking", None);
        }
        if !has_backoff_limit_per_index(&job) {
            let remaining = ctx.backoff.remaining(ctx.now);
            if !remaining.is_zero() {
                self.queue.add_after(key, remaining.max(SYNC_BATCH_PERIOD));
                return (0, "pods_created", None);
            }
        }
        let mut count = (missing as usize).min(MAX_POD_CREATE_DELETE_PER_SYNC);
        let mut indexes = Vec::new();
        if is_indexed(&job) {
            indexes = first_pending_indexes(&busy_indexes(ctx), count, completions(&job));
            if has_backoff_limit_per_index(&job) {
                let (now, wait) = indexes_to_create_now(ctx, &indexes);
                if !wait.is_zero() {
                    self.queue.add_after(key, wait.max(SYNC_BATCH_PERIOD));
                    return (0, "pods_created", None);
                }
                indexes = now;
            }
            count = indexes.len();
        }
        self.expectations.expect_creations(&key, count);
        log::debug!("Too few pods running key={key} need={wanted} creating={count}");
        let template = creation_template(&job);
        let next = AtomicUsize::new(0);
        let (created, error) = slow_start_batch(count, &self.write_threads, || {
            let index = indexes.get(next.fetch_add(1, Ordering::SeqCst)).copied();
            self.create_pod(&job, ctx, &template, index)
        });
        for _ in created..count {
            // Never created: the informer will not see these.
            self.expectations.creation_observed(&key);
        }
        active += created as i32;
        record_creations(&job, ctx, self.gates.pod_replacement_policy, (created, count - created));
        (active, "pods_created", error)
    }

    /// Deletes pods for `manageJob` (expectations set first) and updates the counts.
    fn delete_for_manage(&self, ctx: &mut SyncCtx, doomed: &[Arc<Pod>]) -> Managed {
        self.expectations.expect_deletions(&ctx.key, doomed.iter().map(|p| pod_key(p)).collect());
        let (removed_ready, removed, error) = self.delete_job_pods(&ctx.job, &ctx.key, doomed);
        ctx.terminating += removed;
        ctx.ready -= removed_ready;
        (ctx.active.len() as i32 - removed, "pods_deleted", error)
    }

    /// `CreatePodsWithGenerateName` for one pod (with its completion index, if any).
    fn create_pod(
        &self,
        job: &Job,
        ctx: &SyncCtx,
        template: &PodTemplateSpec,
        index: Option<i32>,
    ) -> Result<(), SyncError> {
        let name = job.metadata.name.as_deref().unwrap_or("");
        let mut template = template.clone();
        let mut generate_name = None;
        if let Some(index) = index {
            let meta = template.metadata.get_or_insert_with(Default::default);
            meta.annotations.get_or_insert_with(BTreeMap::new).insert(COMPLETION_INDEX.into(), index.to_string());
            meta.labels.get_or_insert_with(BTreeMap::new).insert(COMPLETION_INDEX.into(), index.to_string());
            template.spec.get_or_insert_with(Default::default).hostname = Some(format!("{name}-{index}"));
            generate_name = Some(generate_name_with_index(name, index));
            if has_backoff_limit_per_index(job) {
                let replaced = ctx.delayed_deletion.get(&index).map(|p| &**p);
                let counted =
                    replaced.is_none_or(|p| match_pod_failure_policy(spec(job).pod_failure_policy.as_ref(), p).counts);
                let (failures, ignored) = new_index_failure_counts(replaced, counted);
                let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
                annotations.insert(INDEX_FAILURE_COUNT.into(), failures.to_string());
                if ignored > 0 {
                    annotations.insert(INDEX_IGNORED_FAILURE_COUNT.into(), ignored.to_string());
                }
            }
        }
        let pod = pod_from_template(template, job, generate_name);
        self.pod_control().create(job, &pod).map_err(|e| match e {
            CreateError::NoLabels => super::Error::NoLabels.into(),
            CreateError::Api(e) => SyncError::from(e),
        })
    }

    /// `RealPodControl.DeletePod`, with its Events; Ok(false) when the pod was gone.
    fn delete_pod(&self, job: &Job, pod: &Pod) -> Result<bool, crate::client::Error> {
        let name = pod.metadata.name.as_deref().unwrap_or("");
        self.pod_control().delete(job, job.metadata.namespace.as_deref().unwrap_or(""), name)
    }

    /// `jm.podControl`.
    fn pod_control(&self) -> PodControl<'_> {
        PodControl { client: &self.client, recorder: &self.recorder, consistency: &self.consistency }
    }

    /// `deleteJobPods`: finalizer removed, then the pod deleted, all concurrently. Returns
    /// (ready pods deleted, pods deleted, first error).
    fn delete_job_pods(&self, job: &Job, key: &str, pods: &[Arc<Pod>]) -> (i32, i32, Option<SyncError>) {
        let outcomes = self.write_threads.map(pods, |pod| {
            let failed = |e: crate::client::Error, context: &str| {
                self.expectations.deletion_observed(key, &pod_key(pod));
                (!e.is_not_found()).then(|| SyncError::from(e).context(context))
            };
            if has_tracking_finalizer(pod)
                && let Err(e) = self.remove_finalizer(pod)
            {
                // Upstream counts no readiness for a pod it could not release.
                return Deletion { error: failed(e, "removing completion finalizer"), ready: false };
            }
            let error = match self.delete_pod(job, pod) {
                Ok(true) => None,
                Ok(false) => {
                    self.expectations.deletion_observed(key, &pod_key(pod));
                    None
                }
                Err(e) => failed(e, "unable to delete pods"),
            };
            Deletion { error, ready: is_pod_ready(pod) }
        });
        Deletion::sum(outcomes)
    }

    /// `deleteActivePods`: the Job finished; pods keep their finalizers until counted.
    pub(super) fn delete_active_pods(&self, job: &Job, pods: &[Arc<Pod>]) -> (i32, i32, Option<SyncError>) {
        let outcomes = self.write_threads.map(pods, |pod| Deletion {
            error: self.delete_pod(job, pod).err().map(SyncError::from),
            ready: is_pod_ready(pod),
        });
        Deletion::sum(outcomes)
    }
}

/// One pod's deletion: the error (none when deleted or gone), whether it counts as ready.
struct Deletion {
    error: Option<SyncError>,
    ready: bool,
}

impl Deletion {
    /// (ready pods counted, pods deleted, first error).
    fn sum(outcomes: Vec<Deletion>) -> (i32, i32, Option<SyncError>) {
        let ready = outcomes.iter().filter(|d| d.ready).count() as i32;
        let deleted = outcomes.iter().filter(|d| d.error.is_none()).count() as i32;
        (ready, deleted, outcomes.into_iter().find_map(|d| d.error))
    }
}

/// `activePodsForRemoval`: duplicate and out-of-range indexes first, then the lowest-ranked
/// pods (`ActivePods`) until at least `at_least` are chosen.
fn pods_for_removal(job: &Job, pods: &[Arc<Pod>], at_least: usize) -> Vec<Arc<Pod>> {
    let (mut remove, mut left) =
        if is_indexed(job) { duplicated_index_pods(pods, completions(job)) } else { (Vec::new(), pods.to_vec()) };
    if remove.len() < at_least {
        left.sort_by(|a, b| active_pods_order(a, b));
        let more = (at_least - remove.len()).min(left.len());
        remove.extend(left.drain(..more));
    }
    remove
}

/// The indexes not to start again: succeeded, active, failed and (when only failed pods are
/// replaced) terminating ones.
fn busy_indexes(ctx: &SyncCtx) -> Intervals {
    let mut busy = ctx.succeeded_indexes.with_indexes(indexes_of(&ctx.active));
    if ctx.only_failed {
        busy = busy.with_indexes(indexes_of(ctx.pods.iter().filter(|p| is_terminating(p))));
    }
    if let Some(failed) = &ctx.failed_indexes {
        busy = busy.merge(failed);
    }
    busy
}

/// `getPodCreationInfoForIndependentIndexes`: the indexes whose backoff has passed, or else
/// the shortest wait.
fn indexes_to_create_now(ctx: &SyncCtx, indexes: &[i32]) -> (Vec<i32>, Duration) {
    let mut now = Vec::new();
    let mut shortest: Option<Duration> = None;
    for index in indexes {
        let wait = backoff::remaining_for_index(ctx.now, ctx.delayed_deletion.get(index).map(|p| &**p));
        if wait.is_zero() {
            now.push(*index);
        } else if shortest.is_none_or(|s| wait < s) {
            shortest = Some(wait);
        }
    }
    if now.is_empty() { (now, shortest.unwrap_or_default()) } else { (now, Duration::ZERO) }
}

/// The template pods are made from: the completion index variable (Indexed Jobs) and the
/// tracking finalizer.
fn creation_template(job: &Job) -> PodTemplateSpec {
    let mut template = spec(job).template.clone();
    if is_indexed(job) {
        let pod_spec = template.spec.get_or_insert_with(Default::default);
        pod_spec.init_containers.iter_mut().flatten().for_each(add_completion_index_env);
        pod_spec.containers.iter_mut().for_each(add_completion_index_env);
    }
    let finalizers = template.metadata.get_or_insert_with(Default::default).finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.into());
    }
    template
}

/// `addCompletionIndexEnvVariable`: from the index label (`PodIndexLabel`).
fn add_completion_index_env(container: &mut Container) {
    let env = container.env.get_or_insert_with(Vec::new);
    if env.iter().any(|v| v.name == COMPLETION_INDEX_ENV) {
        return;
    }
    env.push(EnvVar {
        name: COMPLETION_INDEX_ENV.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.labels['{COMPLETION_INDEX}']"),
            }),
            ..EnvVarSource::default()
        }),
    });
}

/// `recordJobPodsCreationTotal`: the reason is always `new` without `JobPodReplacementPolicy`.
fn record_creations(job: &Job, ctx: &SyncCtx, replacement_gate: bool, (succeeded, failed): (usize, usize)) {
    let policy = spec(job).pod_replacement_policy.as_deref().unwrap_or("TerminatingOrFailed");
    let reason = if !replacement_gate {
        "new"
    } else if policy == "Failed" && ctx.failed > 0 {
        "recreate_failed"
    } else if ctx.failed > 0 || ctx.terminating > 0 {
        "recreate_terminating_or_failed"
    } else {
        "new"
    };
    let m = metrics();
    if succeeded > 0 {
        m.pods_creation.add(&[reason, "succeeded"], succeeded as f64);
    }
    if failed > 0 {
        m.pods_creation.add(&[reason, "failed"], failed as f64);
    }
}
