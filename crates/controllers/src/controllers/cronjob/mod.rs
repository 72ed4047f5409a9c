//! The CronJob controller (`cronjob-controller`), after upstream v1.33's `pkg/controller/cronjob`
//! (`ControllerV2`): each CronJob creates a Job from its template at every time its schedule
//! names (robfig/cron semantics, see [`crate::apimachinery::cron`]), in `spec.timeZone` when set,
//! honouring `concurrencyPolicy`, `startingDeadlineSeconds` and `suspend`; it keeps
//! `status.active`, `lastScheduleTime` and `lastSuccessfulTime`, deletes finished Jobs beyond the
//! history limits, and requeues each CronJob for the exact moment of its next schedule.

mod schedule;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::apimachinery::cron::{load_location, parse_standard};
use crate::apimachinery::errors::BoxError;
use crate::apimachinery::strconv::quote;
use crate::client::{self, Api, Client, DeleteParams, PostParams, PropagationPolicy};
use crate::controllers::jobutil::{finished_condition, is_succeeded};
use crate::metrics::{HistogramVec, exponential_buckets, registered};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::controller_ref::{controller_of, controller_ref, resolve_controller_ref};
use crate::runtime::events::{EventRecorder, EventType, object_reference};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::WorkQueue;

use schedule::{next_schedule_time, next_schedule_time_duration};

/// `batchv1.CronJobScheduledTimestampAnnotation`.
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-cron-job-syncs`.
    pub workers: usize,
}

/// Why a CronJob's sync failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// A request failed: reading the CronJob or a Job, creating a Job, writing the status.
    #[error("{0}")]
    Api(#[from] client::Error),
    /// A running Job could not be deleted for `concurrencyPolicy: Replace`.
    #[error("could not replace job {namespace}/{name}")]
    ReplaceJob { namespace: String, name: String },
    /// The Job could not be made from the template (its `timeZone` does not load).
    #[error("{0}")]
    JobTemplate(#[source] BoxError),
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewControllerV2`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("cronjob");
    creation_skew().ensure(&[]);
    let controller = Arc::new(CronJobController {
        client: context.client.clone(),
        recorder: context.recorder.clone(),
        jobs: context.informers.informer::<Job>(),
        cron_jobs: context.informers.informer::<CronJob>(),
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.jobs.add_handler(move |event: &Event<Job>| handler.on_job_event(event));
    let handler = controller.clone();
    controller.cron_jobs.add_handler(move |event: &Event<CronJob>| handler.on_cron_job_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.process(key))
}

/// Upstream's `ControllerV2`.
struct CronJobController {
    client: Client,
    recorder: EventRecorder,
    jobs: Arc<Informer<Job>>,
    cron_jobs: Arc<Informer<CronJob>>,
    queue: WorkQueue<String>,
}

/// `cronjob_controller_job_creation_skew_duration_seconds`: from a Job's scheduled time to its
/// creation.
fn creation_skew() -> &'static HistogramVec {
    static METRIC: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    registered(&METRIC, || {
        HistogramVec::new(
            "cronjob_controller_job_creation_skew_duration_seconds",
            "[STABLE] Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
            &[],
            &exponential_buckets(1.0, 2.0, 10),
        )
    })
}

/// What `syncCronJob` leaves: when to look again, whether the status changed, and its error.
struct SyncOutcome {
    requeue_after: Option<Duration>,
    update_status: bool,
    error: Option<Error>,
}

impl CronJobController {
    // ---- informer handlers: they only enqueue -------------------------------------------

    /// `addJob`, `updateJob`, `deleteJob`: the CronJob a Job's controller reference names.
    fn on_job_event(&self, event: &Event<Job>) {
        match event {
            Event::Added(job) => {
                // A Job already being deleted counts as a deletion (`addJob` calls `deleteJob`).
                self.enqueue_controller_of(job);
            }
            Event::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let (old_ref, new_ref) = (controller_of(&old.metadata), controller_of(&new.metadata));
                if old_ref != new_ref
                    && let Some(old_ref) = old_ref
                    && let Some(cron_job) =
                        resolve_controller_ref(&self.cron_jobs, namespace_of(&old.metadata), old_ref)
                {
                    self.queue.add(object_key(&cron_job.metadata));
                }
                self.enqueue_controller_of(new);
            }
            Event::Deleted { object, .. } => self.enqueue_controller_of(object),
        }
    }

    fn enqueue_controller_of(&self, job: &Job) {
        if let Some(reference) = controller_of(&job.metadata)
            && let Some(cron_job) = resolve_controller_ref(&self.cron_jobs, namespace_of(&job.metadata), reference)
        {
            self.queue.add(object_key(&cron_job.metadata));
        }
    }

    /// Added and deleted CronJobs are synced at once; `updateCronJob` for the rest.
    fn on_cron_job_event(&self, event: &Event<CronJob>) {
        match event {
            Event::Added(cron_job) | Event::Deleted { object: cron_job, .. } => {
                self.queue.add(object_key(&cron_job.metadata));
            }
            Event::Updated { old, new } => self.update_cron_job(old, new),
        }
    }

    /// `updateCronJob`: a changed schedule or zone requeues for its next time; any other
    /// change syncs now.
    fn update_cron_job(&self, old: &CronJob, new: &CronJob) {
        let key = object_key(&new.metadata);
        if old.spec.schedule == new.spec.schedule && old.spec.time_zone == new.spec.time_zone {
            self.queue.add(key);
            return;
        }
        match parse_standard(&format_schedule(new, None)) {
            Ok(schedule) => {
                let delay = next_schedule_time_duration(new, Timestamp::now(), &schedule);
                self.queue.add_after(key, delay);
            }
            Err(error) => {
                let text = schedule_text(new);
                log::info!("Unparseable schedule for cronjob cronjob={key} schedule={text:?} err={error}");
                let message = format!("unparseable schedule for cronjob: {text}");
                self.recorder.event_for(new, EventType::Warning, "UnParseableCronJobSchedule", &message);
            }
        }
    }

    // ---- the sync ------------------------------------------------------------------------

    /// `processNextWorkItem` around `sync`: requeued for the next schedule, or with backoff on
    /// an error.
    fn process(&self, key: &str) -> SyncResult {
        match self.sync(key)? {
            Some(delay) => {
                log::debug!("Re-queuing cronjob cronjob={key} requeueAfter={delay:?}");
                self.queue.add_after(key.to_string(), delay);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// `sync`: clean up finished Jobs beyond the limits, reconcile, write the status once.
    fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(cached) = self.cron_jobs.get_newest(key) else {
            log::debug!("CronJob not found, may be it is deleted cronjob={key}");
            return Ok(None);
        };
        let jobs = self.jobs_to_be_reconciled(&cached);
        let mut cron_job = (*cached).clone();
        let cleaned_up = self.cleanup_finished_jobs(&mut cron_job, &jobs);
        let outcome = self.sync_cron_job(&mut cron_job, &jobs);
        if let Some(error) = &outcome.error {
            log::info!("Error reconciling cronjob cronjob={key} err={error}");
        }
        if cleaned_up || outcome.update_status {
            let (namespace, name) = split_key(key);
            let api = Api::<CronJob>::namespaced(&self.client, namespace);
            let written = api.replace_status(name, &cron_job, &PostParams::default()).map_err(|e| {
                log::info!(
                    "Unable to update status for cronjob cronjob={key} resourceVersion={} err={e}",
                    cached.metadata.resource_version.as_deref().unwrap_or_default()
                );
                Error::from(e)
            })?;
            self.cron_jobs.mutation(written);
        }
        match (outcome.requeue_after, outcome.error) {
            (Some(delay), _) => Ok(Some(delay)),
            (None, Some(error)) => Err(error),
            (None, None) => Ok(None),
        }
    }

    /// `getJobsToBeReconciled`: the namespace's Jobs whose controller reference names the
    /// CronJob (by name, as upstream).
    fn jobs_to_be_reconciled(&self, cron_job: &CronJob) -> Vec<Arc<Job>> {
        let name = cron_job.metadata.name.as_deref().unwrap_or_default();
        let mut jobs = self.jobs.store().list_namespace(namespace_of(&cron_job.metadata));
        jobs.retain(|job| controller_of(&job.metadata).is_some_and(|r| r.name == name));
        jobs
    }

    /// `syncCronJob`. Where upstream switches to a freshly read CronJob (a Job not in the
    /// cached active list but in the fresh one), the rest of the sync works on that copy while
    /// the status written stays the caller's, as upstream's pointer reassignment does.
    fn sync_cron_job(&self, caller: &mut CronJob, jobs: &[Arc<Job>]) -> SyncOutcome {
        let now = Timestamp::now();
        let mut update_status = false;
        let mut fresh: Option<CronJob> = None;
        macro_rules! outcome {
            ($requeue:expr, $error:expr) => {
                return SyncOutcome { requeue_after: $requeue, update_status, error: $error }
            };
        }
        for job in jobs {
            let cron_job: &mut CronJob = match fresh.as_mut() {
                Some(c) => c,
                None => &mut *caller,
            };
            let uid = job.metadata.uid.as_deref().unwrap_or_default();
            let found = in_active_list(cron_job, uid);
            let finished = finished_condition(job).map(|c| c.type_.as_str());
            if !found && finished.is_none() {
                let (namespace, name) = (namespace_of(&cron_job.metadata), name_of(&cron_job.metadata));
                let read = match Api::<CronJob>::namespaced(&self.client, namespace).get(name) {
                    Ok(read) => read,
                    Err(e) => outcome!(None, Some(Error::from(e))),
                };
                if in_active_list(&read, uid) {
                    fresh = Some(read);
                    continue;
                }
                let message =
                    format!("Saw a job that the controller did not create or forgot: {}", name_of(&job.metadata));
                self.recorder.event_for(cron_job, EventType::Warning, "UnexpectedJob", &message);
            } else if let Some(condition) = finished {
                if found {
                    delete_from_active_list(cron_job, uid);
                    let message = format!("Saw completed job: {}, condition: {condition}", name_of(&job.metadata));
                    self.recorder.event_for(cron_job, EventType::Normal, "SawCompletedJob", &message);
                    update_status = true;
                }
                if is_succeeded(job) {
                    let completion = job.status.as_ref().and_then(|s| s.completion_time.clone());
                    let status = cron_job.status.get_or_insert_with(Default::default);
                    if status.last_successful_time.is_none() {
                        status.last_successful_time = completion.clone();
                        update_status = true;
                    }
                    if let (Some(completed), Some(last)) = (&completion, &status.last_successful_time)
                        && completed.0 > last.0
                    {
                        status.last_successful_time = completion;
                        update_status = true;
                    }
                }
            }
        }
        let cron_job: &mut CronJob = match fresh.as_mut() {
            Some(c) => c,
            None => &mut *caller,
        };
        let key = object_key(&cron_job.metadata);

        // Active Jobs that no longer exist leave the list.
        let children: Vec<&str> = jobs.iter().filter_map(|j| j.metadata.uid.as_deref()).collect();
        for reference in active(cron_job) {
            if reference.uid.as_deref().is_some_and(|uid| children.contains(&uid)) {
                continue;
            }
            let namespace = reference.namespace.as_deref().unwrap_or_default();
            let name = reference.name.as_deref().unwrap_or_default();
            // Read from the server: a slow watch must not make a Job look missing.
            match Api::<Job>::namespaced(&self.client, namespace).get_opt(name) {
                Ok(None) => {
                    let message = format!("Active job went missing: {name}");
                    self.recorder.event_for(cron_job, EventType::Normal, "MissingJob", &message);
                    delete_from_active_list(cron_job, reference.uid.as_deref().unwrap_or_default());
                    update_status = true;
                }
                Ok(Some(_)) => {}
                Err(e) => outcome!(None, Some(Error::from(e))),
            }
        }

        if cron_job.metadata.deletion_timestamp.is_some() {
            outcome!(None, None);
        }
        let spec = cron_job.spec.clone();
        if let Some(zone) = &spec.time_zone
            && let Err(error) = load_location(zone)
        {
            log::debug!("Not starting job because timeZone is invalid cronjob={key} timeZone={zone} err={error}");
            let message = format!("invalid timeZone: {}: {error}", quote(zone));
            self.recorder.event_for(cron_job, EventType::Warning, "UnknownTimeZone", &message);
            outcome!(None, None);
        }
        if spec.suspend == Some(true) {
            log::debug!("Not starting job because the cron is suspended cronjob={key}");
            outcome!(None, None);
        }
        let schedule = match parse_standard(&format_schedule(cron_job, Some(&self.recorder))) {
            Ok(schedule) => schedule,
            Err(error) => {
                log::info!("Unparseable schedule cronjob={key} schedule={:?} err={error}", spec.schedule);
                let message = format!("unparseable schedule: {} : {error}", quote(&spec.schedule));
                self.recorder.event_for(cron_job, EventType::Warning, "UnparseableSchedule", &message);
                outcome!(None, None);
            }
        };
        let scheduled = match next_schedule_time(cron_job, now, &schedule, &self.recorder) {
            Ok(scheduled) => scheduled,
            Err(error) => {
                log::info!("Invalid schedule cronjob={key} schedule={:?} err={error}", spec.schedule);
                let message = format!("invalid schedule: {} : {error}", spec.schedule);
                self.recorder.event_for(cron_job, EventType::Warning, "InvalidSchedule", &message);
                outcome!(None, None);
            }
        };
        let Some(scheduled) = scheduled else {
            log::debug!("No unmet start times cronjob={key}");
            outcome!(Some(next_schedule_time_duration(cron_job, now, &schedule)), None);
        };

        let too_late = spec.starting_deadline_seconds.is_some_and(|deadline| {
            scheduled.checked_add(jiff::SignedDuration::from_secs(deadline)).is_ok_and(|last| last < now)
        });
        if too_late {
            log::debug!("Missed starting window cronjob={key}");
            let message =
                format!("Missed scheduled time to start a job: {}", scheduled.strftime("%a, %d %b %Y %H:%M:%S +0000"));
            self.recorder.event_for(cron_job, EventType::Warning, "MissSchedule", &message);
            outcome!(Some(next_schedule_time_duration(cron_job, now, &schedule)), None);
        }
        let job_name = job_name(cron_job, scheduled);
        let last_schedule = cron_job.status.as_ref().and_then(|s| s.last_schedule_time.as_ref()).map(|t| t.0);
        if active(cron_job)
            .iter()
            .any(|r| r.name.as_deref() == Some(&job_name) && r.namespace == cron_job.metadata.namespace)
            || last_schedule == Some(scheduled)
        {
            log::debug!(
                "Not starting job because the scheduled time is already processed cronjob={key} schedule={scheduled}"
            );
            outcome!(Some(next_schedule_time_duration(cron_job, now, &schedule)), None);
        }
        if spec.concurrency_policy.as_deref() == Some("Forbid") && !active(cron_job).is_empty() {
            log::debug!(
                "Not starting job because prior execution is still running and concurrency policy is Forbid cronjob={key}"
            );
            let message = "Not starting job because prior execution is running and concurrency policy is Forbid";
            self.recorder.event_for(cron_job, EventType::Normal, "JobAlreadyActive", message);
            outcome!(Some(next_schedule_time_duration(cron_job, now, &schedule)), None);
        }
        if spec.concurrency_policy.as_deref() == Some("Replace") {
            for reference in active(cron_job) {
                let namespace = reference.namespace.as_deref().unwrap_or_default();
                let name = reference.name.as_deref().unwrap_or_default();
                log::debug!("Deleting job that was still running at next scheduled start time job={namespace}/{name}");
                let job = match Api::<Job>::namespaced(&self.client, namespace).get(name) {
                    Ok(job) => job,
                    Err(e) => {
                        let message = format!("Get job: {}", e.message());
                        self.recorder.event_for(cron_job, EventType::Warning, "FailedGet", &message);
                        outcome!(None, Some(Error::from(e)));
                    }
                };
                if !self.delete_job(cron_job, &job) {
                    let (namespace, name) = (namespace.to_string(), name.to_string());
                    outcome!(None, Some(Error::ReplaceJob { namespace, name }));
                }
                update_status = true;
            }
        }

        let request = match job_from_template(cron_job, scheduled) {
            Ok(request) => request,
            Err(error) => {
                log::error!("Unable to make Job from template cronjob={key}: {error}");
                outcome!(None, Some(error));
            }
        };
        let namespace = namespace_of(&cron_job.metadata).to_string();
        let jobs_api = Api::<Job>::namespaced(&self.client, &namespace);
        let (created, already_existed) = match jobs_api.create(&request, &PostParams::default()) {
            Ok(created) => (created, false),
            Err(e) if e.has_status_cause("NamespaceTerminating") => outcome!(None, Some(Error::from(e))),
            Err(e) if e.is_already_exists() => {
                // Created before (the status update may have failed), or by someone else.
                let existing = match jobs_api.get(&job_name) {
                    Ok(existing) => existing,
                    Err(e) => outcome!(None, Some(Error::from(e))),
                };
                let ours =
                    controller_of(&existing.metadata).is_some_and(|r| Some(&r.uid) == cron_job.metadata.uid.as_ref());
                if !ours || in_active_list(cron_job, existing.metadata.uid.as_deref().unwrap_or_default()) {
                    outcome!(None, None);
                }
                (existing, true)
            }
            Err(e) => {
                let message = format!("Error creating job: {}", e.message());
                self.recorder.event_for(cron_job, EventType::Warning, "FailedCreate", &message);
                outcome!(None, Some(Error::from(e)));
            }
        };
        if already_existed {
            log::info!("Job already exists cronjob={key} job={namespace}/{job_name}");
        } else {
            if let Some(created_at) = &created.metadata.creation_timestamp {
                let skew = scheduled.duration_until(created_at.0).as_secs_f64();
                creation_skew().observe(&[], skew);
            }
            log::debug!("Created Job job={namespace}/{} cronjob={key}", name_of(&created.metadata));
            let message = format!("Created job {}", name_of(&created.metadata));
            self.recorder.event_for(cron_job, EventType::Normal, "SuccessfulCreate", &message);
        }
        let status = cron_job.status.get_or_insert_with(Default::default);
        status.active.get_or_insert_with(Vec::new).push(object_reference(&created));
        status.last_schedule_time = Some(Time(scheduled));
        update_status = true;
        outcome!(Some(next_schedule_time_duration(cron_job, now, &schedule)), None)
    }

    /// `cleanupFinishedJobs`: finished Jobs beyond `successfulJobsHistoryLimit` and
    /// `failedJobsHistoryLimit`, oldest first.
    fn cleanup_finished_jobs(&self, cron_job: &mut CronJob, jobs: &[Arc<Job>]) -> bool {
        let spec = cron_job.spec.clone();
        if spec.failed_jobs_history_limit.is_none() && spec.successful_jobs_history_limit.is_none() {
            return false;
        }
        let (mut succeeded, mut failed) = (Vec::new(), Vec::new());
        for job in jobs {
            match finished_condition(job).map(|c| c.type_.as_str()) {
                Some("Complete") => succeeded.push(job.clone()),
                Some("Failed") => failed.push(job.clone()),
                _ => {}
            }
        }
        let mut update_status = false;
        if let Some(limit) = spec.successful_jobs_history_limit {
            update_status |= self.remove_oldest_jobs(cron_job, succeeded, limit);
        }
        if let Some(limit) = spec.failed_jobs_history_limit {
            update_status |= self.remove_oldest_jobs(cron_job, failed, limit);
        }
        update_status
    }

    /// `removeOldestJobs`.
    fn remove_oldest_jobs(&self, cron_job: &mut CronJob, mut jobs: Vec<Arc<Job>>, limit: i32) -> bool {
        let excess = jobs.len() as i64 - i64::from(limit);
        if excess <= 0 {
            return false;
        }
        let key = object_key(&cron_job.metadata);
        log::debug!("Cleaning up jobs from CronJob list deletejobnum={excess} jobnum={} cronjob={key}", jobs.len());
        jobs.sort_by(|a, b| by_start_time(a, b));
        let mut update_status = false;
        for job in jobs.iter().take(excess as usize) {
            log::debug!("Removing job from CronJob list job={} cronjob={key}", name_of(&job.metadata));
            update_status |= self.delete_job(cron_job, job);
        }
        update_status
    }

    /// `deleteJob`: the Job (background propagation) and its entry in the active list.
    fn delete_job(&self, cron_job: &mut CronJob, job: &Job) -> bool {
        let (namespace, name) = (namespace_of(&job.metadata), name_of(&job.metadata));
        let params =
            DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() };
        if let Err(e) = Api::<Job>::namespaced(&self.client, namespace).delete(name, &params) {
            let message = format!("Deleted job: {}", e.message());
            self.recorder.event_for(cron_job, EventType::Warning, "FailedDelete", &message);
            log::error!(
                "Error deleting job from cronjob job={namespace}/{name} cronjob={}: {e}",
                object_key(&cron_job.metadata)
            );
            return false;
        }
        delete_from_active_list(cron_job, job.metadata.uid.as_deref().unwrap_or_default());
        self.recorder.event_for(cron_job, EventType::Normal, "SuccessfulDelete", &format!("Deleted job {name}"));
        true
    }
}

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn schedule_text(cron_job: &CronJob) -> String {
    cron_job.spec.schedule.clone()
}

/// A copy of `status.active`.
fn active(cron_job: &CronJob) -> Vec<ObjectReference> {
    cron_job.status.as_ref().and_then(|s| s.active.clone()).unwrap_or_default()
}

/// `inActiveList`: by uid.
fn in_active_list(cron_job: &CronJob, uid: &str) -> bool {
    active(cron_job).iter().any(|r| r.uid.as_deref() == Some(uid))
}

/// `deleteFromActiveList`.
fn delete_from_active_list(cron_job: &mut CronJob, uid: &str) {
    if let Some(status) = cron_job.status.as_mut() {
        let left: Vec<ObjectReference> =
            status.active.take().unwrap_or_default().into_iter().filter(|r| r.uid.as_deref() != Some(uid)).collect();
        status.active = (!left.is_empty()).then_some(left);
    }
}

/// `byJobStartTime`: started Jobs first, oldest first, then by name.
fn by_start_time(a: &Job, b: &Job) -> std::cmp::Ordering {
    let start = |j: &Job| j.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    match (start(a), start(b)) {
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (x, y) if x == y => name_of(&a.metadata).cmp(name_of(&b.metadata)),
        (x, y) => x.cmp(&y),
    }
}

/// `getJobName`: the CronJob's name and the scheduled time in minutes since the epoch.
fn job_name(cron_job: &CronJob, scheduled: Timestamp) -> String {
    format!("{}-{}", name_of(&cron_job.metadata), scheduled.as_second() / 60)
}

/// `formatSchedule`: a schedule with `TZ` in it is taken as it is (with upstream's
/// `UnsupportedSchedule` warning when `recorder` is given); otherwise a valid `timeZone`
/// becomes a `TZ=` prefix.
fn format_schedule(cron_job: &CronJob, recorder: Option<&EventRecorder>) -> String {
    let schedule = schedule_text(cron_job);
    if schedule.contains("TZ") {
        if let Some(recorder) = recorder {
            let message = format!(
                "CRON_TZ or TZ used in schedule {} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                quote(&schedule)
            );
            recorder.event_for(cron_job, EventType::Warning, "UnsupportedSchedule", &message);
        }
        return schedule;
    }
    match cron_job.spec.time_zone.as_deref() {
        Some(zone) if load_location(zone).is_ok() => format!("TZ={zone} {schedule}"),
        _ => schedule,
    }
}

/// `getJobFromTemplate2`: the template's labels and annotations (with the scheduled time, in
/// the CronJob's zone, as RFC 3339: the `CronJobsScheduledAnnotation` gate is GA and locked on
/// in v1.33), the CronJob as controller, the template's spec.
fn job_from_template(cron_job: &CronJob, scheduled: Timestamp) -> Result<Job, Error> {
    let template = cron_job.spec.job_template.clone();
    let template_meta = template.metadata.unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    let zone = load_location(cron_job.spec.time_zone.as_deref().unwrap_or_default())
        .map_err(|e| Error::JobTemplate(e.into()))?;
    annotations.insert(SCHEDULED_TIMESTAMP_ANNOTATION.to_string(), rfc3339_in(scheduled, &zone));
    let labels = template_meta.labels.unwrap_or_default();
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name(cron_job, scheduled)),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![controller_ref(cron_job)]),
            ..ObjectMeta::default()
        },
        spec: Some(template.spec.unwrap_or_default()),
        status: None,
    })
}

/// Go's `t.In(zone).Format(time.RFC3339)`: `Z` for a zero offset, else `±hh:mm`.
fn rfc3339_in(t: Timestamp, zone: &jiff::tz::TimeZone) -> String {
    let zoned = t.to_zoned(zone.clone());
    let offset = zoned.offset().seconds();
    let suffix = if offset == 0 {
        "Z".to_string()
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        format!("{sign}{:02}:{:02}", offset.abs() / 3600, offset.abs() % 3600 / 60)
    };
    format!("{}{suffix}", zoned.strftime("%Y-%m-%dT%H:%M:%S"))
}

/// The schedule of a CronJob as [`Schedule`], for the tests of both modules.
#[cfg(test)]
fn parsed(cron_job: &CronJob) -> crate::apimachinery::cron::Schedule {
    parse_standard(&format_schedule(cron_job, None)).expect("a schedule")
}

#[cfg(test)]
mod tests;
