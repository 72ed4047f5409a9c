//! Upstream's `pkg/controller/job/util`, which the job, cronjob and ttl-after-finished
//! controllers share: whether a Job has finished, and how.

use k8s_openapi::api::batch::v1::{Job, JobCondition};

/// `FinishedCondition`: the first `Complete` or `Failed` condition that is True.
pub fn finished_condition(job: &Job) -> Option<&JobCondition> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

/// `IsJobFinished`.
pub fn is_finished(job: &Job) -> bool {
    finished_condition(job).is_some()
}

/// `IsJobSucceeded`: `Complete` is True.
pub fn is_succeeded(job: &Job) -> bool {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| c.type_ == "Complete" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(conditions: serde_json::Value) -> Job {
        serde_json::from_value(json!({"status": {"conditions": conditions}})).expect("a job")
    }

    #[test]
    fn the_first_true_terminal_condition_tells() {
        let complete =
            job(json!([{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]));
        assert_eq!(finished_condition(&complete).map(|c| c.type_.as_str()), Some("Complete"));
        assert!(is_finished(&complete) && is_succeeded(&complete));
        let failed = job(json!([{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]));
        assert_eq!(finished_condition(&failed).map(|c| c.type_.as_str()), Some("Failed"));
        assert!(is_finished(&failed) && !is_succeeded(&failed));
        for running in
            [json!([{"type": "Suspended", "status": "True"}]), json!([{"type": "Complete", "status": "False"}])]
        {
            let running = job(running);
            assert!(!is_finished(&running) && !is_succeeded(&running));
        }
    }
}
