//! The TTL-after-finished controller (`ttl-after-finished-controller`), after upstream v1.33's
//! `pkg/controller/ttlafterfinished`: a Job with `spec.ttlSecondsAfterFinished` is deleted,
//! with foreground propagation (its pods first), that many seconds after its `Complete` or
//! `Failed` condition turned True. The cached Job decides when; a fresh GET confirms it just
//! before the delete (the TTL may have been changed since), and the delete carries the Job's
//! uid as a precondition, so a Job deleted and created again under the same name is left alone.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;

use crate::client::{Api, Client, DeleteParams, Preconditions, PropagationPolicy};
use crate::controllers::jobutil::{finished_condition, is_finished};
use crate::metrics::{HistogramVec, exponential_buckets, registered};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::WorkQueue;

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-ttl-after-finished-syncs`.
    pub workers: usize,
}

/// `ttlafterfinished.New`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("ttl_jobs_to_delete");
    deletion_duration().ensure(&[]);
    let controller = Arc::new(TtlAfterFinished {
        client: context.client.clone(),
        jobs: context.informers.informer::<Job>(),
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.jobs.add_handler(move |event: &Event<Job>| handler.on_job_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.process_job(key))
}

/// Upstream's TTL-after-finished `Controller`.
struct TtlAfterFinished {
    client: Client,
    jobs: Arc<Informer<Job>>,
    queue: WorkQueue<String>,
}

/// `ttl_after_finished_controller_job_deletion_duration_seconds`: from the moment a Job became
/// eligible for deletion to its delete.
fn deletion_duration() -> &'static HistogramVec {
    static METRIC: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    registered(&METRIC, || {
        HistogramVec::new(
            "ttl_after_finished_controller_job_deletion_duration_seconds",
            "[ALPHA] The time it took to delete the job since it became eligible for deletion",
            &[],
            &exponential_buckets(0.1, 2.0, 14),
        )
    })
}

/// `needsCleanup`: a TTL is set and the Job finished (`jobutil.IsJobFinished`).
fn needs_cleanup(job: &Job) -> bool {
    job.spec.as_ref().is_some_and(|s| s.ttl_seconds_after_finished.is_some()) && is_finished(job)
}

/// The True `Complete` or `Failed` condition's last transition (`jobFinishTime`); an error when
/// it has none.
fn finished_time(job: &Job) -> Option<Option<Timestamp>> {
    finished_condition(job).map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// What the TTL says of a Job now.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Not finished, no TTL, or being deleted: nothing to do.
    NotDue,
    /// Expires after this long.
    Later(Duration),
    /// Expired at this time.
    Expired(Timestamp),
}

/// Why a finished Job's expiry could not be told.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its finished condition has no time.
    #[error("unable to find the time when the Job {job} finished")]
    NoFinishTime {
        /// `namespace/name`.
        job: String,
    },
    /// Its finish time plus the TTL is beyond the clock's range.
    #[error("the expiry of Job {job}: {source}")]
    Expiry {
        /// `namespace/name`.
        job: String,
        /// Why.
        source: jiff::Error,
    },
}

/// `processTTL` without its requeue: the verdict for `job` at `now`.
fn verdict(job: &Job, now: Timestamp) -> Result<Verdict, Error> {
    if job.metadata.deletion_timestamp.is_some() || !needs_cleanup(job) {
        return Ok(Verdict::NotDue);
    }
    let name = object_key(&job.metadata);
    let finished = finished_time(job).flatten().ok_or_else(|| Error::NoFinishTime { job: name.clone() })?;
    if finished > now {
        log::info!(
            "Warning: Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred. job={name}"
        );
    }
    let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished).unwrap_or_default();
    let expire_at = finished
        .checked_add(jiff::SignedDuration::from_secs(i64::from(ttl)))
        .map_err(|source| Error::Expiry { job: name.clone(), source })?;
    let remaining = now.duration_until(expire_at);
    log::debug!(
        "Found Job finished job={name} finishTime={finished} remainingTTL={remaining:#} deadlineTTL={expire_at}"
    );
    if remaining.is_positive() { Ok(Verdict::Later(remaining.unsigned_abs())) } else { Ok(Verdict::Expired(expire_at)) }
}

impl TtlAfterFinished {
    /// `addJob` / `updateJob`: deletions are not watched.
    fn on_job_event(&self, event: &Event<Job>) {
        let job = match event {
            Event::Added(job) | Event::Updated { new: job, .. } => job,
            Event::Deleted { .. } => return,
        };
        if job.metadata.deletion_timestamp.is_none() && needs_cleanup(job) {
            log::debug!("Add job to cleanup job={}", object_key(&job.metadata));
            self.queue.add(object_key(&job.metadata));
        }
    }

    /// `processTTL`: the verdict, with the key queued again for when it expires.
    fn process_ttl(&self, key: &str, job: &Job) -> Result<Option<Timestamp>, SyncError> {
        match verdict(job, Timestamp::now()).map_err(SyncError::of)? {
            Verdict::NotDue => Ok(None),
            Verdict::Later(remaining) => {
                self.queue.add_after(key.to_string(), remaining);
                Ok(None)
            }
            Verdict::Expired(at) => Ok(Some(at)),
        }
    }

    /// `processJob`: the cached Job, then a fresh one, must both have expired.
    fn process_job(&self, key: &str) -> SyncResult {
        let Some(job) = self.jobs.store().get(key) else { return Ok(()) };
        log::debug!("Checking if Job is ready for cleanup job={key}");
        if self.process_ttl(key, &job)?.is_none() {
            return Ok(());
        }
        let (namespace, name) = split_key(key);
        let api = Api::<Job>::namespaced(&self.client, namespace);
        let Some(fresh) = api.get_opt(name).map_err(SyncError::from)? else { return Ok(()) };
        let Some(expired_at) = self.process_ttl(key, &fresh)? else { return Ok(()) };
        let options = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions { uid: fresh.metadata.uid.clone(), ..Preconditions::default() }),
            ..DeleteParams::default()
        };
        log::debug!("Cleaning up Job job={key}");
        api.delete(name, &options).map_err(|e| SyncError::from(e).context(format!("error cleaning up Job {key}")))?;
        let waited = Timestamp::now().duration_since(expired_at);
        deletion_duration().observe(&[], waited.as_secs_f64());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ttl: Option<i32>, conditions: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "pi", "namespace": "default", "uid": "u1"},
            "spec": {"ttlSecondsAfterFinished": ttl, "template": {}},
            "status": {"conditions": conditions}
        }))
        .expect("a job")
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    #[test]
    fn only_finished_jobs_with_a_ttl_are_cleaned_up() {
        let complete = json!([{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"}]);
        assert!(needs_cleanup(&job(Some(0), complete.clone())));
        assert!(!needs_cleanup(&job(None, complete)), "no TTL");
        let failed_false = json!([{"type": "Failed", "status": "False", "lastTransitionTime": "2026-11-26T10:00:00Z"}]);
        assert!(!needs_cleanup(&job(Some(10), failed_false)), "not finished");
        let suspended = json!([{"type": "Suspended", "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"}]);
        assert!(!needs_cleanup(&job(Some(10), suspended)));
        let failed = json!([{"type": "Failed", "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"}]);
        assert!(needs_cleanup(&job(Some(10), failed)));
    }

    #[test]
    fn the_ttl_runs_from_the_finished_condition() {
        let complete = json!([{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"}]);
        let pi = job(Some(100), complete);
        assert_eq!(verdict(&pi, at("2026-11-26T10:00:40Z")).ok(), Some(Verdict::Later(Duration::from_secs(60))));
        assert_eq!(verdict(&pi, at("2026-11-26T10:01:40Z")).ok(), Some(Verdict::Expired(at("2026-11-26T10:01:40Z"))));
        assert_eq!(verdict(&pi, at("2026-11-26T10:05:00Z")).ok(), Some(Verdict::Expired(at("2026-11-26T10:01:40Z"))));
        let mut deleting = pi.clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at("2026-11-26T10:02:00Z")));
        assert_eq!(verdict(&deleting, at("2026-11-26T10:05:00Z")).ok(), Some(Verdict::NotDue));
    }

    #[test]
    fn a_finished_condition_without_a_time_is_an_error() {
        let untimed = job(Some(0), json!([{"type": "Complete", "status": "True"}]));
        let error = verdict(&untimed, at("2026-11-26T10:00:00Z")).unwrap_err().to_string();
        assert_eq!(error, "unable to find the time when the Job default/pi finished");
    }
}
