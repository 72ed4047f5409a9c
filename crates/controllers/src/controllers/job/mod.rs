//! The Job controller (`job-controller`), after upstream v1.36's `pkg/controller/job`.
//!
//! A sync (`syncJob`) claims the Job's pods (adopting orphans with the tracking finalizer),
//! counts the pods that finished since the last sync, decides whether the Job failed (pod
//! failure policy, backoff limits, deadline, failed indexes) or succeeded (completions, success
//! policy), creates or deletes pods to match parallelism (`pods`), and tracks finished pods
//! through `status.uncountedTerminatedPods` before removing their finalizers (`tracking`), so
//! that no pod is counted twice or lost. Terminal conditions are set in two steps, as with
//! upstream's default feature gates (`JobManagedBy`, `JobPodReplacementPolicy`):
//! `FailureTarget`/`SuccessCriteriaMet` first, `Failed`/`Complete` once no pod is left
//! terminating.
//!
//! Once a sync has written a terminal condition, later syncs of the Job are skipped until the
//! informer brings the finished Job (`finishedJobExpectations`).
//!
//! Under the `StaleControllerConsistencyJob` gate (Beta, on in v1.36) a Job is not synced until
//! the pod and Job informers have seen the controller's last writes for it (pod creations,
//! adoptions and finalizer removals, status updates; see `runtime::consistency`).
//!
//! Pods deleted without their finalizer removed, or whose Job is gone or finished, are handled
//! by a second queue (`job_orphan_pod`) that removes the finalizer.

mod backoff;
mod handlers;
mod indexes;
mod metrics;
mod pods;
mod policy;
mod tracking;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use parking_lot::Mutex;

use crate::apimachinery::clock::{RealClock, whole_seconds};
use crate::apimachinery::errors::BoxError;
use crate::apimachinery::labels::Selector;
use crate::apimachinery::pod::{is_pod_active, is_pod_ready, phase};
use crate::apimachinery::schema::GroupResource;
use crate::client::{Api, Client, Patch, PostParams};
use crate::controllers::jobutil::is_finished;
use crate::runtime::consistency::{ControllerConsistency, LastSyncRvGetter, pods_resource};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::controller_ref::{
    ControllerRefManager, claim_candidate, controller_ref, recheck_deletion_timestamp,
};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::expectations::Expectations;
use crate::runtime::informer::{Event, Informer};
use crate::runtime::slow_start::WriteThreads;
use crate::runtime::workqueue::{ItemExponentialFailureRateLimiter, WorkQueue};

use backoff::{BackoffRecord, BackoffStore};
use indexes::{Intervals, completion_index, index_failure_count, valid_index};
use metrics::metrics;
use policy::{match_pod_failure_policy, match_success_policy};

/// `batch.kubernetes.io/job-tracking`: held on every pod until it is counted in the status.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// `spec.managedBy` of Jobs this controller manages.
const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";
/// `syncJobBatchPeriod`: pod events and status updates are synced in batches this far apart.
const SYNC_BATCH_PERIOD: Duration = Duration::from_secs(1);
/// `MaxUncountedPods`: at most this many pods in `status.uncountedTerminatedPods` (~20 KB).
const MAX_UNCOUNTED_PODS: usize = 500;
/// `MaxPodCreateDeletePerSync`.
const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-job-syncs`.
    pub workers: usize,
    /// The `JobManagedBy` feature gate (beta, on).
    pub managed_by: bool,
    /// The `JobPodReplacementPolicy` feature gate (GA and locked on in v1.36).
    pub pod_replacement_policy: bool,
    /// The `MutableSchedulingDirectivesForSuspendedJobs` feature gate (beta, on in v1.36).
    pub mutable_scheduling_directives: bool,
    /// The `StaleControllerConsistencyJob` feature gate (beta, on in v1.36): skip the sync of a
    /// Job while its informers have not seen the controller's last writes for it.
    pub stale_controller_consistency: bool,
}

/// The `jobs` of `batch`.
fn jobs_resource() -> GroupResource {
    GroupResource::new("batch", "jobs")
}

/// `NewController`'s choice of store: over the pod and Job informers when the gate is on.
fn consistency(context: &ControllerContext<'_>, config: &Config) -> ControllerConsistency {
    let pods: Arc<dyn LastSyncRvGetter> = context.informers.informer::<Pod>();
    let jobs: Arc<dyn LastSyncRvGetter> = context.informers.informer::<Job>();
    let informers = [(pods_resource(), pods), (jobs_resource(), jobs)];
    ControllerConsistency::new(config.stale_controller_consistency, informers, metrics().stale_sync_skips.clone())
}

/// The feature gates that change what the controller does (the other Job gates are GA in
/// v1.36).
#[derive(Debug, Clone, Copy)]
struct Gates {
    managed_by: bool,
    pod_replacement_policy: bool,
    /// A newly suspended Job's `status.startTime` is cleared.
    mutable_scheduling_directives: bool,
}

impl Gates {
    /// `delayTerminalCondition`: `FailureTarget`/`SuccessCriteriaMet` before `Failed`/`Complete`.
    fn delay_terminal_condition(self) -> bool {
        self.managed_by || self.pod_replacement_policy
    }

    /// `onlyReplaceFailedPods`: `podReplacementPolicy: Failed`, implied by a pod failure policy.
    fn only_replace_failed(self, job: &Job) -> bool {
        (self.pod_replacement_policy && spec(job).pod_replacement_policy.as_deref() == Some("Failed"))
            || spec(job).pod_failure_policy.is_some()
    }

    /// `managedByExternalController`.
    fn managed_by_external(self, job: &Job) -> Option<&str> {
        let name = spec(job).managed_by.as_deref().filter(|name| *name != JOB_CONTROLLER_NAME);
        name.filter(|_| self.managed_by)
    }
}

/// Why a sync failed for a reason of the controller's own. API errors reach the queue as
/// `SyncError`s of their kind; these through `SyncError::of`, which finds an API error inside.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Job's selector is invalid.
    #[error("couldn't convert Job selector: {0}")]
    Selector(#[source] BoxError),
    /// The selector of an orphan-pod queue item does not parse.
    #[error("invalid label selector: {0}")]
    OrphanSelector(#[source] BoxError),
    /// Adopting or releasing pods failed.
    #[error("{0}")]
    Claim(#[source] BoxError),
    /// The pod template has no labels, so the Job could not find its pods.
    #[error("unable to create pods, no labels")]
    NoLabels,
}

impl From<Error> for SyncError {
    fn from(error: Error) -> SyncError {
        SyncError::of(error)
    }
}

/// `NewController` + `Run`: the Job and orphan-pod queues, `workers` workers each.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = api_backoff_queue("job");
    let orphans = api_backoff_queue("job_orphan_pod");
    let controller = Arc::new(JobController {
        client: context.client.clone(),
        jobs: context.informers.informer::<Job>(),
        pods: context.informers.informer::<Pod>(),
        queue: queue.clone(),
        orphans: orphans.clone(),
        recorder: context.recorder.clone(),
        expectations: Expectations::default(),
        write_threads: WriteThreads::default(),
        finalizer_expectations: FinalizerExpectations::default(),
        backoff: BackoffStore::default(),
        finished: FinishedJobExpectations::default(),
        gates: Gates {
            managed_by: config.managed_by,
            pod_replacement_policy: config.pod_replacement_policy,
            mutable_scheduling_directives: config.mutable_scheduling_directives,
        },
        consistency: consistency(context, &config),
    });
    metrics();
    let handler = controller.clone();
    controller.jobs.add_handler(move |event: &Event<Job>| handler.on_job_event(event));
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    let orphan_worker = controller.clone();
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.sync_job(key)).with_queue(
        &orphans,
        config.workers,
        move |key: &OrphanKey| orphan_worker.sync_orphan_pod(key),
    )
}

/// A queue retried from 1 s doubling to 1 min (`DefaultJobApiBackOff`, `MaxJobApiBackOff`).
fn api_backoff_queue<T: crate::runtime::workqueue::QueueItem>(name: &str) -> WorkQueue<T> {
    let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(60));
    WorkQueue::with_parts(name, Box::new(limiter), Arc::new(RealClock))
}

/// An item of the orphan-pod queue (`orphanPodKey`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OrphanKey {
    /// One pod.
    Pod { namespace: String, name: String },
    /// The pods of a Job gone or finished, by its selector.
    Selector { namespace: String, selector: String },
}

/// `uidTrackingExpectations`: pods whose finalizer removal this controller awaits, by Job key.
#[derive(Debug, Default)]
struct FinalizerExpectations(Mutex<HashMap<String, HashSet<String>>>);

impl FinalizerExpectations {
    fn expected(&self, key: &str) -> HashSet<String> {
        self.0.lock().get(key).cloned().unwrap_or_default()
    }

    fn expect_removed(&self, key: &str, uids: impl IntoIterator<Item = String>) {
        self.0.lock().entry(key.to_string()).or_default().extend(uids);
    }

    fn observed(&self, key: &str, uid: &str) {
        if let Some(set) = self.0.lock().get_mut(key) {
            set.remove(uid);
        }
    }

    fn delete(&self, key: &str) {
        self.0.lock().remove(key);
    }
}

/// `finishedJobExpectations`: the UIDs of Jobs this controller marked finished (Complete or
/// Failed written) whose finished state the informer has not brought yet. Such a Job is not
/// synced: a sync from the stale cached Job would start its work again.
#[derive(Debug, Default)]
struct FinishedJobExpectations(Mutex<HashSet<String>>);

impl FinishedJobExpectations {
    fn expect(&self, uid: &str) {
        self.0.lock().insert(uid.to_string());
    }

    fn awaited(&self, uid: &str) -> bool {
        self.0.lock().contains(uid)
    }

    fn observed(&self, uid: &str) {
        self.0.lock().remove(uid);
    }
}

/// Upstream's Job `Controller`.
struct JobController {
    client: Client,
    jobs: Arc<Informer<Job>>,
    pods: Arc<Informer<Pod>>,
    queue: WorkQueue<String>,
    orphans: WorkQueue<OrphanKey>,
    recorder: EventRecorder,
    /// Pod creations and deletions awaited.
    expectations: Expectations,
    /// The spare threads its workers' pod writes share.
    write_threads: WriteThreads,
    finalizer_expectations: FinalizerExpectations,
    backoff: BackoffStore,
    finished: FinishedJobExpectations,
    gates: Gates,
    /// The writes for each Job its informers must have seen before it is synced.
    consistency: ControllerConsistency,
}

/// `syncJobCtx`: what one sync learns and decides.
struct SyncCtx {
    key: String,
    job: Job,
    pods: Vec<Arc<Pod>>,
    active: Vec<Arc<Pod>>,
    /// The terminal (or interim) condition decided in this sync.
    finished: Option<JobCondition>,
    succeeded: i32,
    failed: i32,
    prev_succeeded_indexes: Intervals,
    succeeded_indexes: Intervals,
    failed_indexes: Option<Intervals>,
    backoff: BackoffRecord,
    expected_removals: HashSet<String>,
    uncounted_succeeded: HashSet<String>,
    uncounted_failed: HashSet<String>,
    /// Per index, the failed pod whose finalizer is kept until its replacement exists.
    delayed_deletion: HashMap<i32, Arc<Pod>>,
    terminating: i32,
    ready: i32,
    now: Timestamp,
    /// `onlyReplaceFailedPods`: a pod being deleted is not failed until its phase says so.
    only_failed: bool,
}

// --- Job spec helpers -------------------------------------------------------------------

fn spec(job: &Job) -> &k8s_openapi::api::batch::v1::JobSpec {
    static EMPTY: std::sync::OnceLock<k8s_openapi::api::batch::v1::JobSpec> = std::sync::OnceLock::new();
    job.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(Default::default))
}

fn is_indexed(job: &Job) -> bool {
    spec(job).completion_mode.as_deref() == Some("Indexed")
}

/// Completions of an Indexed Job (always set there; 0 if not).
fn completions(job: &Job) -> i32 {
    spec(job).completions.unwrap_or(0)
}

fn has_backoff_limit_per_index(job: &Job) -> bool {
    spec(job).backoff_limit_per_index.is_some()
}

fn suspended(job: &Job) -> bool {
    spec(job).suspend == Some(true)
}

fn completion_mode_label(job: &Job) -> &'static str {
    if is_indexed(job) { "Indexed" } else { "NonIndexed" }
}

fn condition<'j>(job: &'j Job, type_: &str) -> Option<&'j JobCondition> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

fn condition_true(job: &Job, type_: &str) -> bool {
    condition(job, type_).is_some_and(|c| c.status == "True")
}

fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata.finalizers.iter().flatten().any(|f| f == TRACKING_FINALIZER)
}

/// `isPodFailed`: Failed, or (unless only failed pods are replaced) being deleted unfinished.
fn is_pod_failed(pod: &Pod, only_failed: bool) -> bool {
    let phase = phase(pod);
    phase == "Failed" || (!only_failed && pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded")
}

/// `IsPodTerminating` of `CountTerminatingPods`.
fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !matches!(phase(pod), "Failed" | "Succeeded")
}

fn uid_of(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

/// Times as the API stores them: whole seconds.
fn seconds(now: Timestamp) -> Time {
    Time(whole_seconds(now))
}

/// `newCondition`; empty reason and message are left out, as Go's `omitempty` does.
fn new_condition(type_: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
    JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: text(reason),
        message: text(message),
        last_probe_time: Some(seconds(now)),
        last_transition_time: Some(seconds(now)),
    }
}

/// `ensureJobConditionStatus`: sets the condition of that type (a new one only when not
/// False); true if the list changed.
fn ensure_condition(job: &mut Job, type_: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> bool {
    let conditions = job.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let same = existing.status == status
            && existing.reason.as_deref().unwrap_or("") == reason
            && existing.message.as_deref().unwrap_or("") == message;
        if same {
            return false;
        }
        *existing = new_condition(type_, status, reason, message, now);
        return true;
    }
    if status != "False" {
        conditions.push(new_condition(type_, status, reason, message, now));
        return true;
    }
    false
}

impl JobController {
    /// `syncJob`, with its metrics.
    fn sync_job(&self, key: &str) -> SyncResult {
        let started = Instant::now();
        // Until the informers have seen our last writes for it, what they hold may make us
        // create pods or count them again; the error requeues the key rate-limited.
        self.consistency.ensure_ready(key)?;
        let Some(shared) = self.jobs.get_newest(key) else {
            log::debug!("Job has been deleted key={key}");
            self.expectations.delete(key);
            self.finalizer_expectations.delete(key);
            self.consistency.clear(key, "");
            self.backoff.remove(key);
            return Ok(());
        };
        if let Some(name) = self.gates.managed_by_external(&shared) {
            log::debug!(
                "Skip syncing the job as it is managed by an external controller key={key} controllerName={name}"
            );
            return Ok(());
        }
        let uid = shared.metadata.uid.as_deref().unwrap_or("");
        if is_finished(&shared) {
            self.backoff.remove(key);
            self.consistency.clear(key, uid);
            // The sync reads our own last write before the watch brings it; the expectation is
            // met only once the informer's copy is finished too.
            if self.jobs.store().get(key).is_some_and(|cached| is_finished(&cached)) {
                self.finished.observed(uid);
            }
            return Ok(());
        }
        if self.finished.awaited(uid) {
            log::debug!(
                "Skip syncing the job as its marked finished but the corresponding update event is not yet received uid={uid} key={key}"
            );
            return Ok(());
        }
        if let Some(mode) = spec(&shared).completion_mode.as_deref()
            && mode != "NonIndexed"
            && mode != "Indexed"
        {
            let message = "Skipped Job sync because completion mode is unknown";
            self.recorder.event_for(&*shared, EventType::Warning, "UnknownCompletionMode", message);
            return Ok(());
        }
        let mode = completion_mode_label(&shared);
        let mut action = "reconciling";
        let result = self.reconcile(key, (*shared).clone(), &mut action);
        let outcome = if result.is_ok() { "success" } else { "error" };
        let m = metrics();
        m.sync_duration.observe(&[mode, outcome, action], started.elapsed().as_secs_f64());
        m.syncs.inc(&[mode, outcome, action]);
        log::debug!("Finished syncing job key={key} elapsed={:?}", started.elapsed());
        result
    }

    /// The body of `syncJob` once the Job is known to be ours and unfinished.
    fn reconcile(&self, key: &str, mut job: Job, action: &mut &'static str) -> SyncResult {
        let now = Timestamp::now();
        let status = job.status.get_or_insert_with(Default::default);
        let uncounted = status.uncounted_terminated_pods.get_or_insert_with(Default::default).clone();
        // Expectations first: a pod created after this check is seen by the next sync.
        let satisfied = self.expectations.satisfied(key);
        // Also before the pods: a removal observed after this snapshot is already in the
        // cache the pods come from, so a stale pod never counts twice.
        let expected_removals = self.finalizer_expectations.expected(key);
        let pods = self.pods_for_job(&job)?;
        let active: Vec<Arc<Pod>> = pods.iter().filter(is_pod_active).cloned().collect();
        let mut ctx = SyncCtx {
            key: key.to_string(),
            ready: active.iter().filter(is_pod_ready).count() as i32,
            terminating: pods.iter().filter(|p| is_terminating(p)).count() as i32,
            active,
            pods,
            finished: None,
            succeeded: 0,
            failed: 0,
            prev_succeeded_indexes: Intervals::default(),
            succeeded_indexes: Intervals::default(),
            failed_indexes: None,
            backoff: BackoffRecord::default(),
            expected_removals,
            uncounted_succeeded: uncounted.succeeded.iter().flatten().cloned().collect(),
            uncounted_failed: uncounted.failed.iter().flatten().cloned().collect(),
            delayed_deletion: HashMap::new(),
            only_failed: self.gates.only_replace_failed(&job),
            job,
            now,
        };
        let mut active = ctx.active.len() as i32;
        let (new_succeeded, new_failed) = new_finished_pods(&ctx);
        let status = ctx.job.status.clone().unwrap_or_default();
        let not_ignored = new_failed
            .iter()
            .filter(|p| match_pod_failure_policy(spec(&ctx.job).pod_failure_policy.as_ref(), p).counts)
            .count();
        ctx.succeeded =
            status.succeeded.unwrap_or(0) + new_succeeded.len() as i32 + ctx.uncounted_succeeded.len() as i32;
        ctx.failed = status.failed.unwrap_or(0) + not_ignored as i32 + ctx.uncounted_failed.len() as i32;
        if status.start_time.is_none() && !suspended(&ctx.job) {
            ctx.job.status.get_or_insert_with(Default::default).start_time = Some(seconds(now));
        }
        ctx.backoff = self.backoff.next_record(key, &new_succeeded, &new_failed);

        self.decide_failure(&mut ctx);
        if is_indexed(&ctx.job) {
            self.decide_indexes(&mut ctx);
        }

        let mut manage_error = None;
        let mut suspend_changed = false;
        if ctx.finished.is_some() {
            let (deleted_ready, deleted, error) = self.delete_active_pods(&ctx.job, &ctx.active);
            if deleted != active || !satisfied {
                // Pods left, or not yet in the cache: not finished yet.
                ctx.finished = None;
            }
            active -= deleted;
            ctx.terminating += deleted;
            ctx.ready -= deleted_ready;
            manage_error = error;
        } else {
            let mut managed = false;
            if satisfied && ctx.job.metadata.deletion_timestamp.is_none() {
                let (now_active, done, error) = self.manage_job(&mut ctx);
                active = now_active;
                *action = done;
                manage_error = error;
                managed = true;
            }
            let complete = match spec(&ctx.job).completions {
                None => ctx.succeeded > 0 && active == 0,
                Some(wanted) => ctx.succeeded >= wanted && active == 0,
            };
            if complete {
                let message = "Reached expected number of succeeded pods";
                let type_ = if self.gates.delay_terminal_condition() { "SuccessCriteriaMet" } else { "Complete" };
                ctx.finished = Some(new_condition(type_, "True", "CompletionsReached", message, now));
            } else if managed {
                suspend_changed = self.update_suspended_condition(&mut ctx.job, now);
            }
        }

        // `status.terminating` is the `JobPodReplacementPolicy` gate's field.
        let terminating = self.gates.pod_replacement_policy.then_some(ctx.terminating);
        let status = ctx.job.status.get_or_insert_with(Default::default);
        let needs_update = suspend_changed
            || Some(active) != status.active.or(Some(0))
            || Some(ctx.ready) != status.ready
            || terminating != status.terminating;
        status.active = Some(active);
        status.ready = Some(ctx.ready);
        status.terminating = terminating;
        self.track_status_and_remove_finalizers(&mut ctx, needs_update).map_err(|e| e.context("tracking status"))?;
        manage_error.map_or(Ok(()), Err)
    }

    /// Failure scenarios: an earlier interim condition, the pod failure policy, the backoff
    /// limit, the active deadline.
    fn decide_failure(&self, ctx: &mut SyncCtx) {
        let job = &ctx.job;
        let now = ctx.now;
        ctx.finished = condition(job, "SuccessCriteriaMet").filter(|c| c.status == "True").cloned();
        if ctx.finished.is_none() {
            if let Some(target) = condition(job, "FailureTarget").filter(|c| c.status == "True") {
                ctx.finished = Some(failed_for_target(target, now));
            } else if let Some(message) = fail_job_message(job, &ctx.pods, ctx.only_failed) {
                ctx.finished = Some(new_condition("FailureTarget", "True", "PodFailurePolicy", &message, now));
            }
        }
        if ctx.finished.is_some() {
            return;
        }
        let backoff_limit = spec(job).backoff_limit.unwrap_or(6);
        if ctx.failed > backoff_limit || past_backoff_limit_on_failure(job, &ctx.pods) {
            let message = "Job has reached the specified backoff limit";
            ctx.finished = Some(self.failure_condition("BackoffLimitExceeded", message, now));
        } else if past_active_deadline(job, now) {
            let message = "Job was active longer than specified deadline";
            ctx.finished = Some(self.failure_condition("DeadlineExceeded", message, now));
        } else if let Some(deadline) = spec(job).active_deadline_seconds
            && !suspended(job)
        {
            let started = job.status.as_ref().and_then(|s| s.start_time.as_ref()).map_or(now, |t| t.0);
            let left = Duration::from_secs(deadline.max(0) as u64).saturating_sub(since(started, now));
            log::debug!(
                "Job has activeDeadlineSeconds configuration. Will sync this job again key={} nextSyncIn={left:?}",
                ctx.key
            );
            self.queue.add_after(ctx.key.clone(), left);
        }
    }

    /// Indexed Jobs: succeeded and failed indexes, `maxFailedIndexes`, the success policy.
    fn decide_indexes(&self, ctx: &mut SyncCtx) {
        let job = &ctx.job;
        let completions = completions(job);
        let status = job.status.clone().unwrap_or_default();
        ctx.prev_succeeded_indexes = Intervals::parse(status.completed_indexes.as_deref().unwrap_or(""), completions);
        let newly_succeeded = ctx.pods.iter().filter(|p| phase(p) == "Succeeded" && has_tracking_finalizer(p));
        ctx.succeeded_indexes =
            ctx.prev_succeeded_indexes.with_indexes(newly_succeeded.filter_map(|p| valid_index(p, completions)));
        ctx.succeeded = ctx.succeeded_indexes.total();
        if has_backoff_limit_per_index(job) {
            let previous = Intervals::parse(status.failed_indexes.as_deref().unwrap_or(""), completions);
            let newly_failed =
                ctx.pods.iter().filter(|p| has_tracking_finalizer(p) && is_index_failed(job, p, ctx.only_failed));
            let failed = previous.with_indexes(newly_failed.filter_map(|p| valid_index(p, completions)));
            if ctx.finished.is_none() {
                let max_failed = spec(job).max_failed_indexes;
                if max_failed.is_some_and(|max| failed.total() > max) {
                    let message = "Job has exceeded the specified maximal number of failed indexes";
                    ctx.finished = Some(self.failure_condition("MaxFailedIndexesExceeded", message, ctx.now));
                } else if failed.total() > 0 && failed.total() + ctx.succeeded_indexes.total() >= completions {
                    let message = "Job has failed indexes";
                    ctx.finished = Some(self.failure_condition("FailedIndexes", message, ctx.now));
                }
            }
            ctx.failed_indexes = Some(failed);
            ctx.delayed_deletion = pods_with_delayed_deletion(ctx);
        }
        if ctx.finished.is_none()
            && let Some(message) =
                match_success_policy(spec(&ctx.job).success_policy.as_ref(), completions, &ctx.succeeded_indexes)
        {
            ctx.finished = Some(new_condition("SuccessCriteriaMet", "True", "SuccessPolicy", &message, ctx.now));
        }
    }

    /// `newFailureCondition`: `FailureTarget` first when terminal conditions are delayed.
    fn failure_condition(&self, reason: &str, message: &str, now: Timestamp) -> JobCondition {
        let type_ = if self.gates.delay_terminal_condition() { "FailureTarget" } else { "Failed" };
        new_condition(type_, "True", reason, message, now)
    }

    /// The `Suspended` condition after `manageJob`, with its Event; true if it changed.
    fn update_suspended_condition(&self, job: &mut Job, now: Timestamp) -> bool {
        let Some((reason, message)) = set_suspended_condition(job, self.gates, now) else { return false };
        self.recorder.event_for(job, EventType::Normal, reason, message);
        true
    }

    /// `getPodsForJob`: the pods the Job owns after claiming; adopted pods count as carrying
    /// the tracking finalizer (the adoption added it).
    fn pods_for_job(&self, job: &Job) -> Result<Vec<Arc<Pod>>, SyncError> {
        let selector = job_selector(job).map_err(Error::Selector)?;
        let namespace = job.metadata.namespace.as_deref().unwrap_or("");
        let owner_uid = job.metadata.uid.as_ref();
        let candidates =
            self.pods.store().list_namespace_where(namespace, |m| claim_candidate(owner_uid, &selector, m));
        let can_adopt = || recheck_deletion_timestamp::<Job>(&self.client, &job.metadata, "Job ");
        // Adoptions are pod writes (`RealPodControl.PatchPod` calls `OnWrite`).
        let on_write = |pod: &ObjectMeta| self.consistency.pod_written(pod);
        let manager = ControllerRefManager {
            client: &self.client,
            owner: &job.metadata,
            owner_ref: controller_ref(job),
            selector: &selector,
            can_adopt: &can_adopt,
            finalizers: &[TRACKING_FINALIZER],
            on_write: Some(&on_write),
        };
        let claimed = manager.claim::<Pod, _>(candidates).map_err(|e| Error::Claim(e.into()))?;
        Ok(claimed
            .into_iter()
            .map(|pod| {
                let owned = pod.metadata.owner_references.iter().flatten().any(|r| Some(&r.uid) == owner_uid);
                if owned || has_tracking_finalizer(&pod) {
                    return pod;
                }
                let mut adopted = (*pod).clone();
                adopted.metadata.finalizers.get_or_insert_with(Vec::new).push(TRACKING_FINALIZER.into());
                Arc::new(adopted)
            })
            .collect())
    }

    /// `PatchPod` with `removeTrackingFinalizerPatch`; the patched pod is recorded for the Job
    /// that controls it (`OnWrite`).
    fn remove_finalizer(&self, pod: &Pod) -> Result<(), crate::client::Error> {
        let patch = serde_json::json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}});
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let patched = Api::<Pod>::namespaced(&self.client, namespace).patch(
            name,
            &Patch::Strategic(patch),
            &PostParams::default(),
        )?;
        self.consistency.pod_written(&patched.metadata);
        Ok(())
    }
}

/// The `Suspended` condition as `spec.suspend` says, and the Event to record (reason, message)
/// when it changed. A resumed Job starts its clock again (`activeDeadlineSeconds` counts
/// continuous activity); a newly suspended one loses its start time under
/// `MutableSchedulingDirectivesForSuspendedJobs` (v1.36), as its scheduling directives may now
/// change before it resumes.
fn set_suspended_condition(job: &mut Job, gates: Gates, now: Timestamp) -> Option<(&'static str, &'static str)> {
    if suspended(job) {
        if !ensure_condition(job, "Suspended", "True", "JobSuspended", "Job suspended", now) {
            return None;
        }
        if gates.mutable_scheduling_directives {
            job.status.get_or_insert_with(Default::default).start_time = None;
        }
        return Some(("Suspended", "Job suspended"));
    }
    if !ensure_condition(job, "Suspended", "False", "JobResumed", "Job resumed", now) {
        return None;
    }
    job.status.get_or_insert_with(Default::default).start_time = Some(seconds(now));
    Some(("Resumed", "Job resumed"))
}

/// The Job's `spec.selector` as a selector; an empty one selects nothing.
fn job_selector(job: &Job) -> Result<Selector, BoxError> {
    match spec(job).selector.as_ref() {
        Some(selector) => Selector::from_label_selector(selector).map_err(Into::into),
        None => Ok(Selector::nothing()),
    }
}

fn since(then: Timestamp, now: Timestamp) -> Duration {
    let elapsed = now.duration_since(then);
    if elapsed.is_negative() { Duration::ZERO } else { elapsed.unsigned_abs() }
}

/// `newFailedConditionForFailureTarget`.
fn failed_for_target(target: &JobCondition, now: Timestamp) -> JobCondition {
    let reason = target.reason.as_deref().unwrap_or("");
    new_condition("Failed", "True", reason, target.message.as_deref().unwrap_or(""), now)
}

/// `getFailJobMessage`: the message of the first failed pod a `FailJob` rule matches.
fn fail_job_message(job: &Job, pods: &[Arc<Pod>], only_failed: bool) -> Option<String> {
    let policy = spec(job).pod_failure_policy.as_ref()?;
    pods.iter()
        .filter(|p| is_pod_failed(p, only_failed))
        .find_map(|p| match_pod_failure_policy(Some(policy), p).fail_job)
}

/// `pastBackoffLimitOnFailure`: with `restartPolicy: OnFailure`, container restarts of
/// running and pending pods count as failures.
fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<Pod>]) -> bool {
    let restart_policy = spec(job).template.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
    if restart_policy != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| s.init_container_statuses.iter().flatten().chain(s.container_statuses.iter().flatten()))
        .map(|c| c.restart_count)
        .sum();
    let limit = spec(job).backoff_limit.unwrap_or(6);
    if limit == 0 { restarts > 0 } else { restarts >= limit }
}

/// `pastActiveDeadline`; never while suspended.
fn past_active_deadline(job: &Job, now: Timestamp) -> bool {
    let Some(deadline) = spec(job).active_deadline_seconds else { return false };
    let Some(started) = job.status.as_ref().and_then(|s| s.start_time.as_ref()) else { return false };
    !suspended(job) && since(started.0, now) >= Duration::from_secs(deadline.max(0) as u64)
}

/// `getValidPodsWithFilter`: pods still to count (finalizer held, not counted or being
/// uncounted, a valid index for Indexed Jobs) that `keep` accepts.
fn countable_pods<'c>(
    ctx: &'c SyncCtx,
    uncounted: Option<&'c HashSet<String>>,
    keep: impl Fn(&Pod) -> bool + 'c,
) -> impl Iterator<Item = &'c Arc<Pod>> + 'c {
    let indexed = is_indexed(&ctx.job);
    let completions = completions(&ctx.job);
    ctx.pods.iter().filter(move |p| {
        let uid = uid_of(p);
        has_tracking_finalizer(p)
            && !uncounted.is_some_and(|u| u.contains(uid))
            && !ctx.expected_removals.contains(uid)
            && (!indexed || valid_index(p, completions).is_some())
            && keep(p)
    })
}

/// `getNewFinishedPods`: succeeded and failed pods not yet in the status.
fn new_finished_pods(ctx: &SyncCtx) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let succeeded = countable_pods(ctx, Some(&ctx.uncounted_succeeded), |p| phase(p) == "Succeeded").cloned().collect();
    let failed =
        countable_pods(ctx, Some(&ctx.uncounted_failed), |p| is_pod_failed(p, ctx.only_failed)).cloned().collect();
    (succeeded, failed)
}

/// `isIndexFailed`: FailIndex matched, or the counted failures reached `backoffLimitPerIndex`.
fn is_index_failed(job: &Job, pod: &Pod, only_failed: bool) -> bool {
    if !is_pod_failed(pod, only_failed) {
        return false;
    }
    let matched = match_pod_failure_policy(spec(job).pod_failure_policy.as_ref(), pod);
    if matched.action == Some("FailIndex") {
        return true;
    }
    matched.counts && index_failure_count(pod) >= spec(job).backoff_limit_per_index.unwrap_or(0)
}

/// `getPodsWithDelayedDeletionPerIndex`: per index neither succeeded, failed nor active, its
/// latest failed pod, kept until the replacement carries its failure count.
fn pods_with_delayed_deletion(ctx: &SyncCtx) -> HashMap<i32, Arc<Pod>> {
    let active = indexes::indexes_of(&ctx.active);
    let failed_indexes = ctx.failed_indexes.clone().unwrap_or_default();
    let mut result: HashMap<i32, Arc<Pod>> = HashMap::new();
    for pod in countable_pods(ctx, None, |p| is_pod_failed(p, ctx.only_failed)) {
        let Some(index) = completion_index(pod) else { continue };
        if ctx.succeeded_indexes.has(index) || failed_indexes.has(index) || active.contains(&index) {
            continue;
        }
        let replace = match result.get(&index) {
            Some(last) => {
                indexes::index_absolute_failure_count(last) <= indexes::index_absolute_failure_count(pod)
                    && backoff::finished_time(pod) >= backoff::finished_time(last)
            }
            None => true,
        };
        if replace {
            result.insert(index, pod.clone());
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(spec: serde_json::Value) -> Job {
        serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "ns"}, "spec": spec})).expect("a job")
    }

    fn pod(phase: &str, deleting: bool, restarts: i32) -> Arc<Pod> {
        let mut pod = json!({"metadata": {"name": "p"}, "status": {"phase": phase, "containerStatuses": [
            {"name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": restarts}]}});
        if deleting {
            pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(pod).expect("a pod"))
    }

    const ALL_ON: Gates = Gates { managed_by: true, pod_replacement_policy: true, mutable_scheduling_directives: true };
    const ALL_OFF: Gates =
        Gates { managed_by: false, pod_replacement_policy: false, mutable_scheduling_directives: false };

    #[test]
    fn the_gates_decide_replacement_and_external_management() {
        let failed_only = job(json!({"podReplacementPolicy": "Failed", "managedBy": "example.com/queue"}));
        assert!(ALL_ON.only_replace_failed(&failed_only));
        assert!(!ALL_OFF.only_replace_failed(&failed_only), "the field is ignored without its gate");
        assert!(ALL_OFF.only_replace_failed(&job(json!({"podFailurePolicy": {"rules": []}}))));
        assert_eq!(ALL_ON.managed_by_external(&failed_only), Some("example.com/queue"));
        assert_eq!(ALL_OFF.managed_by_external(&failed_only), None);
        assert_eq!(ALL_ON.managed_by_external(&job(json!({"managedBy": JOB_CONTROLLER_NAME}))), None);
        assert!(ALL_ON.delay_terminal_condition() && !ALL_OFF.delay_terminal_condition());
    }

    #[test]
    fn deleted_pods_fail_unless_only_failed_pods_count() {
        assert!(is_pod_failed(&pod("Failed", false, 0), true));
        assert!(is_pod_failed(&pod("Running", true, 0), false));
        assert!(!is_pod_failed(&pod("Running", true, 0), true));
        assert!(!is_pod_failed(&pod("Succeeded", true, 0), false));
    }

    #[test]
    fn restarts_count_only_with_on_failure() {
        let on_failure = job(json!({"backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure"}}}));
        assert!(!past_backoff_limit_on_failure(&on_failure, &[pod("Running", false, 1)]));
        assert!(past_backoff_limit_on_failure(&on_failure, &[pod("Running", false, 1), pod("Pending", false, 1)]));
        assert!(!past_backoff_limit_on_failure(&on_failure, &[pod("Failed", false, 5)]), "finished pods do not count");
        let never = job(json!({"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never"}}}));
        assert!(!past_backoff_limit_on_failure(&never, &[pod("Running", false, 3)]));
    }

    #[test]
    fn conditions_are_set_once_and_false_ones_only_replace() {
        let now: Timestamp = "2026-01-01T00:00:00.7Z".parse().expect("a time");
        let mut j = job(json!({}));
        assert!(!ensure_condition(&mut j, "Suspended", "False", "JobResumed", "Job resumed", now));
        assert!(ensure_condition(&mut j, "Suspended", "True", "JobSuspended", "Job suspended", now));
        assert!(!ensure_condition(&mut j, "Suspended", "True", "JobSuspended", "Job suspended", now));
        assert!(ensure_condition(&mut j, "Suspended", "False", "JobResumed", "Job resumed", now));
        let condition = condition(&j, "Suspended").expect("the condition");
        assert_eq!(
            condition.last_transition_time.as_ref().map(|t| t.0.to_string()).as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        assert_eq!(new_condition("Complete", "True", "", "", now).reason, None, "empty reasons are left out");
    }

    fn start_time(job: &Job) -> Option<Timestamp> {
        job.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0)
    }

    #[test]
    fn suspending_clears_the_start_time_under_its_gate() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().expect("a time");
        let started = json!({"startTime": "2026-01-01T00:00:00Z"});
        let running = |suspend: bool| {
            let mut j = job(json!({"suspend": suspend}));
            j.status = Some(serde_json::from_value(started.clone()).expect("a status"));
            j
        };
        let mut j = running(true);
        assert_eq!(set_suspended_condition(&mut j, ALL_ON, now), Some(("Suspended", "Job suspended")));
        assert_eq!(start_time(&j), None, "cleared when the Suspended condition is added");
        let mut kept = running(true);
        assert_eq!(set_suspended_condition(&mut kept, ALL_OFF, now), Some(("Suspended", "Job suspended")));
        assert!(start_time(&kept).is_some(), "kept without the gate");
        // Already suspended: nothing changes, whatever the start time.
        j.status.as_mut().expect("a status").start_time = Some(Time(now));
        assert_eq!(set_suspended_condition(&mut j, ALL_ON, now), None);
        assert_eq!(start_time(&j), Some(now));
        // Resumed: the clock starts again.
        j.spec.as_mut().expect("a spec").suspend = Some(false);
        let later: Timestamp = "2026-01-01T00:02:00.5Z".parse().expect("a time");
        assert_eq!(set_suspended_condition(&mut j, ALL_ON, later), Some(("Resumed", "Job resumed")));
        assert_eq!(start_time(&j), Some("2026-01-01T00:02:00Z".parse().expect("a time")));
        assert_eq!(set_suspended_condition(&mut running(false), ALL_ON, now), None, "never suspended");
    }

    #[test]
    fn finished_expectations_are_per_job_until_observed() {
        let finished = FinishedJobExpectations::default();
        assert!(!finished.awaited("a"));
        finished.expect("a");
        assert!(finished.awaited("a") && !finished.awaited("b"));
        finished.observed("b");
        assert!(finished.awaited("a"));
        finished.observed("a");
        assert!(!finished.awaited("a"));
    }
}
