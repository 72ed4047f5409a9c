//! Scripted pods: annotations that tell the simulated kubelets how long a run-to-completion pod's
//! containers run and how each run ends (see the module doc of `nodes` and docs/sandbox.md).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::program::Program;

/// How long the containers run before they exit, in decimal seconds.
pub const RUN_SECONDS: &str = "kcm-sandbox.dev/run-seconds";
/// How the runs end, in the order the kubelets start them: `0`, `1`, `evicted`, … (the last
/// entry repeats).
pub const EXIT_CODES: &str = "kcm-sandbox.dev/exit-codes";
/// `EXIT_CODES` for the pod with completion index `<i>` (the suffix).
pub const EXIT_CODES_INDEX_PREFIX: &str = "kcm-sandbox.dev/exit-codes-index-";
/// The Job controller's completion index annotation (`batch.kubernetes.io/job-completion-index`).
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The largest exit code a process can report.
const MAX_EXIT_CODE: i32 = 255;

/// How one run of a pod's containers ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The containers exit with this code.
    Code(i32),
    /// The kubelet's eviction manager evicts the pod (memory pressure).
    Evicted,
}

/// A pod's script: how long each run takes and how the runs end.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// How long each run of the containers lasts.
    pub run_time: Duration,
    /// Never empty; the last entry repeats.
    pub exits: Vec<Exit>,
    /// Whose runs are counted: the owning Job's uid (else the pod's), and the completion index.
    pub key: (String, Option<i64>),
}

impl Script {
    /// The script of `pod`: its annotations over the defaults (`default_run_time`, exit 0). An
    /// invalid annotation makes the whole pod unscripted; the error names it.
    pub fn of(pod: &Pod, default_run_time: Duration) -> (Script, Option<AnnotationError>) {
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let index = annotations.get(COMPLETION_INDEX).and_then(|i| i.parse::<i64>().ok()).filter(|i| *i >= 0);
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.kind == "Job" && o.api_version == "batch/v1")
            .max_by_key(|o| o.controller == Some(true))
            .map(|o| o.uid.clone());
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let key = (owner.unwrap_or_else(|| pod_uid.clone()), index);
        let default = Script { run_time: default_run_time, exits: vec![Exit::Code(0)], key: key.clone() };
        let annotated =
            annotations.keys().any(|k| k == RUN_SECONDS || k == EXIT_CODES || k.starts_with(EXIT_CODES_INDEX_PREFIX));
        if !annotated && let Some(program) = super::program::of(pod) {
            return (Script::of_program(program, default, pod_uid), None);
        }
        let mut script = default.clone();
        if let Some(value) = annotations.get(RUN_SECONDS) {
            match parse_seconds(value) {
                Ok(run_time) => script.run_time = run_time,
                Err(source) => {
                    let error = AnnotationError { annotation: RUN_SECONDS.to_string(), value: value.clone(), source };
                    return (default, Some(error));
                }
            }
        }
        let indexed = index.map(|i| format!("{EXIT_CODES_INDEX_PREFIX}{i}"));
        let chosen = indexed.and_then(|k| annotations.get(&k).map(|v| (k, v))).or_else(|| {
            let key = EXIT_CODES.to_string();
            annotations.get(EXIT_CODES).map(|v| (key, v))
        });
        if let Some((annotation, value)) = chosen {
            match parse_exits(value) {
                Ok(exits) => script.exits = exits,
                Err(source) => {
                    let error = AnnotationError { annotation, value: value.clone(), source };
                    return (default, Some(error));
                }
            }
        }
        (script, None)
    }

    /// The script of a recognised program (see the `program` module): a program that runs
    /// forever never ends its run.
    fn of_program(program: Program, default: Script, pod_uid: String) -> Script {
        match program {
            Program::Forever => Script { run_time: Duration::MAX, ..default },
            Program::Exits { run_time, codes, per_pod } => Script {
                run_time: run_time.unwrap_or(default.run_time),
                exits: codes.into_iter().map(Exit::Code).collect(),
                key: if per_pod { (pod_uid, default.key.1) } else { default.key },
            },
        }
    }

    /// The end of run `n` (from 0): the n-th entry, the last one repeating.
    pub fn exit(&self, n: usize) -> Exit {
        self.exits.get(n).or(self.exits.last()).copied().unwrap_or(Exit::Code(0))
    }
}

/// Why a script annotation does not parse.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// Not a decimal number.
    #[error("not a number of seconds (decimal, e.g. \"0.5\" or \"20\")")]
    NotSeconds,
    /// A number too large for a duration.
    #[error("not a duration: {0}")]
    NotDuration(#[source] std::time::TryFromFloatSecsError),
    /// An entry of an exit script that is neither an exit code nor `evicted`.
    #[error("entry {0:?} is neither an exit code (0-255) nor \"evicted\"")]
    NotAnExit(String),
}

/// An invalid script annotation on a pod, which then runs unscripted.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation}={value:?}: {source}")]
pub struct AnnotationError {
    /// The annotation.
    pub annotation: String,
    /// Its value.
    pub value: String,
    /// Why it does not parse.
    #[source]
    pub source: ScriptError,
}

/// Decimal seconds, `0.5` or `20`: finite and not negative.
pub fn parse_seconds(value: &str) -> Result<Duration, ScriptError> {
    let text = value.trim();
    let valid = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let seconds: f64 = text.parse().ok().filter(|_| valid).ok_or(ScriptError::NotSeconds)?;
    Duration::try_from_secs_f64(seconds).map_err(ScriptError::NotDuration)
}

/// A comma-separated script: exit codes (0–255) and `evicted`.
pub fn parse_exits(value: &str) -> Result<Vec<Exit>, ScriptError> {
    value
        .split(',')
        .map(|entry| {
            let entry = entry.trim();
            if entry == "evicted" {
                return Ok(Exit::Evicted);
            }
            entry
                .parse::<i32>()
                .ok()
                .filter(|c| (0..=MAX_EXIT_CODE).contains(c))
                .map(Exit::Code)
                .ok_or_else(|| ScriptError::NotAnExit(entry.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"uid": "pod-uid", "annotations": annotations,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": true}]},
            "spec": {"containers": []}}))
        .expect("a Pod")
    }

    #[test]
    fn scripts_parse() {
        assert_eq!(parse_exits("1,1,0"), Ok(vec![Exit::Code(1), Exit::Code(1), Exit::Code(0)]));
        assert_eq!(parse_exits("evicted, 0"), Ok(vec![Exit::Evicted, Exit::Code(0)]));
        assert_eq!(parse_exits("42"), Ok(vec![Exit::Code(42)]));
        for bad in ["", "1,,0", "-1", "256", "x", "Evicted", "1.5"] {
            assert!(parse_exits(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("20"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        for bad in ["", "-1", "1s", "NaN", "inf", "1e3", "1e400"] {
            assert!(parse_seconds(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn annotations_make_the_script() {
        let default = Duration::from_secs(3);
        let (script, error) = Script::of(&pod(json!({})), default);
        assert_eq!((script.run_time, script.exits.clone(), error), (default, vec![Exit::Code(0)], None));
        assert_eq!(script.key, ("job-uid".to_string(), None));

        let p = pod(json!({RUN_SECONDS: "0.25", EXIT_CODES: "1,evicted,0"}));
        let (script, error) = Script::of(&p, default);
        assert_eq!(error, None);
        assert_eq!(script.run_time, Duration::from_millis(250));
        assert_eq!(
            (0..5).map(|n| script.exit(n)).collect::<Vec<_>>(),
            [Exit::Code(1), Exit::Evicted, Exit::Code(0), Exit::Code(0), Exit::Code(0)]
        );

        // The per-index override wins for its index only.
        let annotations = json!({EXIT_CODES: "0", "kcm-sandbox.dev/exit-codes-index-2": "3", COMPLETION_INDEX: "2"});
        let (script, _) = Script::of(&pod(annotations.clone()), default);
        assert_eq!((script.exits.clone(), script.key.1), (vec![Exit::Code(3)], Some(2)));
        let mut other = annotations;
        other[COMPLETION_INDEX] = json!("1");
        let (script, _) = Script::of(&pod(other), default);
        assert_eq!((script.exits.clone(), script.key.1), (vec![Exit::Code(0)], Some(1)));
    }

    #[test]
    fn invalid_annotations_leave_the_pod_unscripted() {
        let default = Duration::from_secs(3);
        let (script, error) = Script::of(&pod(json!({RUN_SECONDS: "2", EXIT_CODES: "1,boom"})), default);
        assert_eq!((script.run_time, script.exits), (default, vec![Exit::Code(0)]));
        let error = error.expect("an error").to_string();
        assert!(error.contains(EXIT_CODES) && error.contains("boom"), "{error}");
        let (_, error) = Script::of(&pod(json!({RUN_SECONDS: "soon"})), default);
        assert!(error.expect("an error").to_string().contains(RUN_SECONDS));
    }

    #[test]
    fn unannotated_pods_run_their_program() {
        let mut p: Pod = serde_json::from_value(json!({"metadata": {"uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1"}]}}))
        .expect("a Pod");
        assert_eq!(Script::of(&p, Duration::ZERO).0.run_time, Duration::MAX);
        p.spec.as_mut().expect("a spec").containers[0].command = Some(vec!["sh".into(), "-c".into(), "exit 2".into()]);
        let (script, _) = Script::of(&p, Duration::from_secs(3));
        assert_eq!((script.run_time, script.exits), (Duration::from_secs(3), vec![Exit::Code(2)]));
        // Annotations win over the program.
        p.metadata.annotations = Some([(EXIT_CODES.to_string(), "0".to_string())].into());
        assert_eq!(Script::of(&p, Duration::ZERO).0.exits, vec![Exit::Code(0)]);
    }

    #[test]
    fn pods_without_a_job_count_on_their_own() {
        let p: Pod =
            serde_json::from_value(json!({"metadata": {"uid": "u1"}, "spec": {"containers": []}})).expect("a Pod");
        assert_eq!(Script::of(&p, Duration::ZERO).0.key, ("u1".to_string(), None));
    }
}
