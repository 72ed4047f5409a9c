//! The delay before failed pods are replaced (`backoff_utils.go`): 10 s after the first failure
//! since the last success, doubling per failure up to 10 min; per Job, or per index with
//! `backoffLimitPerIndex`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;

use super::indexes::index_absolute_failure_count;

/// `DefaultJobPodFailureBackOff`.
pub const POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// `MaxJobPodFailureBackOff`.
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);

/// `backoffRecord`: failures since the last success, and when the last one happened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackoffRecord {
    pub failures_after_last_success: i32,
    pub last_failure: Option<Timestamp>,
}

impl BackoffRecord {
    /// `getRemainingTime`.
    pub fn remaining(&self, now: Timestamp) -> Duration {
        remaining_for_failures(now, self.failures_after_last_success, self.last_failure)
    }
}

/// `backoffStore`: the records of the Jobs, by key.
#[derive(Debug, Default)]
pub struct BackoffStore {
    records: Mutex<HashMap<String, BackoffRecord>>,
}

impl BackoffStore {
    /// `newBackoffRecord`: the record after these newly finished pods (not stored yet).
    pub fn next_record(&self, key: &str, succeeded: &[Arc<Pod>], failed: &[Arc<Pod>]) -> BackoffRecord {
        let mut record = self.records.lock().get(key).cloned().unwrap_or_default();
        let mut failed_times: Vec<Timestamp> = failed.iter().map(|p| finished_time(p)).collect();
        failed_times.sort();
        let last_success = succeeded.iter().map(|p| finished_time(p)).max();
        match last_success {
            None => {
                if let Some(last) = failed_times.last() {
                    record.failures_after_last_success += failed_times.len() as i32;
                    record.last_failure = Some(*last);
                }
            }
            Some(success) => {
                record = BackoffRecord::default();
                for failure in failed_times.iter().rev().take_while(|t| **t > success) {
                    record.last_failure.get_or_insert(*failure);
                    record.failures_after_last_success += 1;
                }
            }
        }
        record
    }

    /// `updateBackoffRecord`.
    pub fn update(&self, key: &str, record: BackoffRecord) {
        self.records.lock().insert(key.to_string(), record);
    }

    /// `removeBackoffRecord`.
    pub fn remove(&self, key: &str) {
        self.records.lock().remove(key);
    }
}

/// `getFinishedTime`: when the pod's containers finished, else when it became not ready,
/// else its deletion time less the grace period, else its creation.
pub fn finished_time(pod: &Pod) -> Timestamp {
    containers_finished(pod)
        .or_else(|| not_ready_since(pod))
        .or_else(|| {
            let deleted = pod.metadata.deletion_timestamp.as_ref()?.0;
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
            deleted.checked_sub(jiff::SignedDuration::from_secs(grace)).ok()
        })
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `getFinishTimeFromContainers`: the latest finish of the app containers and sidecars, if
/// all of them have terminated.
fn containers_finished(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    let sidecars: Vec<&str> = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let app = status.container_statuses.iter().flatten();
    let init = status.init_container_statuses.iter().flatten().filter(|c| sidecars.contains(&c.name.as_str()));
    let mut latest: Option<Timestamp> = None;
    for container in app.chain(init) {
        let finished = container.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref()?.0;
        latest = Some(latest.map_or(finished, |l| l.max(finished)));
    }
    latest
}

fn not_ready_since(pod: &Pod) -> Option<Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    (ready.status == "False").then_some(())?;
    ready.last_transition_time.as_ref().map(|t| t.0)
}

/// `getRemainingTimePerIndex`: the backoff of an index whose last pod failed.
pub fn remaining_for_index(now: Timestamp, last_failed: Option<&Pod>) -> Duration {
    let Some(pod) = last_failed else { return Duration::ZERO };
    remaining_for_failures(now, index_absolute_failure_count(pod) + 1, Some(finished_time(pod)))
}

/// `getRemainingTimeForFailuresCount`.
fn remaining_for_failures(now: Timestamp, failures: i32, last_failure: Option<Timestamp>) -> Duration {
    let Some(last) = last_failure.filter(|_| failures > 0) else { return Duration::ZERO };
    let mut backoff = POD_FAILURE_BACKOFF;
    for _ in 1..failures {
        backoff *= 2;
        if backoff >= MAX_POD_FAILURE_BACKOFF {
            backoff = MAX_POD_FAILURE_BACKOFF;
            break;
        }
    }
    let elapsed = now.duration_since(last);
    if elapsed.is_negative() {
        return backoff;
    }
    backoff.saturating_sub(elapsed.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(finished: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"containerStatuses": [{
                "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "finishedAt": finished}}}]}}))
            .expect("a pod"),
        )
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a time")
    }

    #[test]
    fn failures_double_the_delay_until_a_success() {
        let store = BackoffStore::default();
        let record = store.next_record("ns/j", &[], &[pod("2026-01-01T00:00:00Z"), pod("2026-01-01T00:00:05Z")]);
        assert_eq!(record.failures_after_last_success, 2);
        assert_eq!(record.remaining(at("2026-01-01T00:00:10Z")), Duration::from_secs(15));
        assert_eq!(record.remaining(at("2026-01-01T00:01:00Z")), Duration::ZERO);
        store.update("ns/j", record);
        let after_success = store.next_record("ns/j", &[pod("2026-01-01T00:00:20Z")], &[pod("2026-01-01T00:00:30Z")]);
        assert_eq!(after_success.failures_after_last_success, 1);
        assert_eq!(after_success.last_failure, Some(at("2026-01-01T00:00:30Z")));
        let many = BackoffRecord { failures_after_last_success: 12, last_failure: Some(at("2026-01-01T00:00:00Z")) };
        assert_eq!(many.remaining(at("2026-01-01T00:00:00Z")), MAX_POD_FAILURE_BACKOFF);
    }
}
