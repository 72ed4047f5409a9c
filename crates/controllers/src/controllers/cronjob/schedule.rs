//! When a CronJob runs next (upstream's `utils.go`): the most recent unmet schedule time, how
//! many were missed, and how long until the next one.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::CronJob;

use crate::apimachinery::cron::Schedule;
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::object_key;

/// `nextScheduleDelta`: requeues come this long after the schedule (clock skew).
const NEXT_SCHEDULE_DELTA: SignedDuration = SignedDuration::from_millis(100);

/// More missed start times than this get `TooManyMissedTimes`.
const MANY_MISSED: i64 = 100;

/// Why a schedule has no next time to run at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ScheduleError {
    /// The schedule is valid grammar but names no time (`59 23 31 2 *`).
    #[error("time difference between two schedules is less than 1 second")]
    TooClose,
}

/// `missedSchedulesType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Missed {
    None,
    Few,
    Many,
}

/// What `mostRecentScheduleTime` finds.
#[derive(Debug, PartialEq)]
pub(super) struct MostRecent {
    /// The last schedule time, or the creation time (or the starting deadline, when later).
    pub earliest: Timestamp,
    /// The most recent time a Job should have been created, if any is not after now.
    pub most_recent: Option<Timestamp>,
    pub missed: Missed,
    /// The schedule is valid grammar but names no time (`59 23 31 2 *`).
    pub error: Option<ScheduleError>,
}

/// Go's zero `time.Time`, for a CronJob without a creation time.
fn go_zero_time() -> Timestamp {
    Timestamp::from_second(-62_135_596_800).expect("0001-01-01 is in range")
}

/// `mostRecentScheduleTime`.
pub(super) fn most_recent_schedule_time(
    cron_job: &CronJob,
    now: Timestamp,
    schedule: &Schedule,
    include_starting_deadline: bool,
) -> MostRecent {
    let status = cron_job.status.as_ref();
    let mut earliest = match status.and_then(|s| s.last_schedule_time.as_ref()) {
        Some(last) => last.0,
        None => cron_job.metadata.creation_timestamp.as_ref().map_or_else(go_zero_time, |t| t.0),
    };
    if include_starting_deadline
        && let Some(deadline) = cron_job.spec.starting_deadline_seconds
        && let Ok(scheduling_deadline) = now.checked_sub(SignedDuration::from_secs(deadline))
        && scheduling_deadline > earliest
    {
        earliest = scheduling_deadline;
    }
    let none = |missed, error: Option<ScheduleError>| MostRecent { earliest, most_recent: None, missed, error };
    let t1 = schedule.next(earliest);
    let t2 = t1.and_then(|t| schedule.next(t));
    if t1.is_some_and(|t1| now < t1) {
        return none(Missed::None, None);
    }
    if t2.is_some_and(|t2| now < t2) {
        return MostRecent { earliest, most_recent: t1, missed: Missed::None, error: None };
    }
    let (Some(t1), Some(t2)) = (t1, t2) else {
        return none(Missed::None, Some(ScheduleError::TooClose));
    };
    let between = t2.duration_since(t1).as_secs_f64().round() as i64;
    if between < 1 {
        return none(Missed::None, Some(ScheduleError::TooClose));
    }
    let elapsed = now.duration_since(t1).as_secs();
    let missed_count = elapsed / between + 1;
    let potential_earliest =
        t1.checked_add(SignedDuration::from_secs((missed_count - 1 - 1).saturating_mul(between))).unwrap_or(t1);
    let mut most_recent = None;
    let mut t = schedule.next(potential_earliest);
    while let Some(at) = t.filter(|at| *at <= now) {
        most_recent = Some(at);
        t = schedule.next(at);
    }
    let missed = if missed_count > MANY_MISSED {
        Missed::Many
    } else if missed_count > 0 {
        Missed::Few
    } else {
        Missed::None
    };
    MostRecent { earliest, most_recent, missed, error: None }
}

/// `nextScheduleTimeDuration`: how long until the schedule after the most recent one (or after
/// now, when some were missed), plus 100 ms.
pub(super) fn next_schedule_time_duration(cron_job: &CronJob, now: Timestamp, schedule: &Schedule) -> Duration {
    let found = most_recent_schedule_time(cron_job, now, schedule, false);
    let base = match (&found.error, found.most_recent) {
        (Some(_), _) => now,
        (None, Some(most_recent)) => most_recent,
        (None, None) if found.missed == Missed::None => found.earliest,
        (None, None) => now,
    };
    // Go's zero time (no next time) makes the duration negative: requeued at once.
    match schedule.next(base) {
        Some(next) => {
            let until = now.duration_until(next) + NEXT_SCHEDULE_DELTA;
            if until.is_negative() { Duration::ZERO } else { until.unsigned_abs() }
        }
        None => Duration::ZERO,
    }
}

/// `nextScheduleTime`: the most recent unmet schedule time not after now (with the starting
/// deadline), recording `TooManyMissedTimes` when more than 100 were missed.
pub(super) fn next_schedule_time(
    cron_job: &CronJob,
    now: Timestamp,
    schedule: &Schedule,
    recorder: &EventRecorder,
) -> Result<Option<Timestamp>, ScheduleError> {
    let found = most_recent_schedule_time(cron_job, now, schedule, true);
    let Some(most_recent) = found.most_recent.filter(|t| *t <= now) else {
        return found.error.map_or(Ok(None), Err);
    };
    if found.missed == Missed::Many {
        let message = "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew";
        recorder.event_for(cron_job, EventType::Warning, "TooManyMissedTimes", message);
        log::info!("too many missed times cronjob={}", object_key(&cron_job.metadata));
    }
    Ok(Some(most_recent))
}
