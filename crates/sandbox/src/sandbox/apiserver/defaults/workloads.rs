//! Workloads with pod templates: ReplicationController and PodTemplate (`pkg/apis/core/v1`),
//! the `apps/v1` controllers (`pkg/apis/apps/v1/defaults.go`) and Jobs and CronJobs
//! (`pkg/apis/batch/v1/defaults.go`, plus the Job and DaemonSet registry strategies' create-time
//! fields).

use serde_json::Value;

use super::fields::{
    Field, Lit::Bool, Lit::Int, Lit::Object, Lit::Str, child, entry, entry_at, fill, is_empty, items, ptr, set, str_at,
    val,
};
use super::pod;

/// `spec.template` of a workload, when present.
fn template(spec: &mut Value) {
    if let Some(template) = child(spec, "template") {
        pod::template(template);
    }
}

/// ReplicationController: `SetDefaults_ReplicationController` (selector and labels from the
/// template's labels when empty, one replica) and the template's pod spec.
pub(super) fn replication_controller(object: &mut Value) {
    let labels = object
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|l| !l.is_empty()))
        .cloned();
    let Some(spec) = entry(object, "spec") else { return };
    if let Some(labels) = &labels
        && is_empty(spec, "selector")
    {
        set(spec, "selector", labels.clone());
    }
    fill(spec, &[ptr("replicas", Int(1))]);
    template(spec);
    if let Some(labels) = labels
        && let Some(metadata) = entry(object, "metadata")
        && is_empty(metadata, "labels")
    {
        set(metadata, "labels", labels);
    }
}

/// PodTemplate: `SetObjectDefaults_PodTemplate`.
pub(super) fn pod_template(object: &mut Value) {
    if let Some(template) = child(object, "template") {
        pod::template(template);
    }
}

/// `SetDefaults_Deployment`.
const DEPLOYMENT: &[Field] =
    &[ptr("replicas", Int(1)), ptr("revisionHistoryLimit", Int(10)), ptr("progressDeadlineSeconds", Int(600))];

/// Deployment: one replica, a 25%/25% rolling update, 10 old ReplicaSets, a 600s deadline.
pub(super) fn deployment(object: &mut Value) {
    let Some(spec) = entry(object, "spec") else { return };
    fill(spec, DEPLOYMENT);
    rolling_update(spec, "strategy", &[ptr("maxUnavailable", Str("25%")), ptr("maxSurge", Str("25%"))]);
    template(spec);
}

/// ReplicaSet: `SetDefaults_ReplicaSet`.
pub(super) fn replica_set(object: &mut Value) {
    let Some(spec) = entry(object, "spec") else { return };
    fill(spec, &[ptr("replicas", Int(1))]);
    template(spec);
}

/// The annotation apps/v1 carries a DaemonSet's internal `spec.templateGeneration` in.
pub(super) const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// DaemonSet: `SetDefaults_DaemonSet` (a rolling update of one pod at a time without surge,
/// 10 revisions) and the strategy's create-time template generation of 1.
pub(super) fn daemon_set(object: &mut Value) {
    if let Some(annotations) = entry_at(object, &["metadata", "annotations"]) {
        let generation = annotations.get(TEMPLATE_GENERATION).and_then(Value::as_str).map(str::parse::<i64>);
        if matches!(generation, None | Some(Ok(..1))) {
            set(annotations, TEMPLATE_GENERATION, Value::from("1"));
        }
    }
    let Some(spec) = entry(object, "spec") else { return };
    rolling_update(spec, "updateStrategy", &[ptr("maxUnavailable", Int(1)), ptr("maxSurge", Int(0))]);
    fill(spec, &[ptr("revisionHistoryLimit", Int(10))]);
    template(spec);
}

/// What `daemonSetStrategy.PrepareForUpdate` does to the template generation: an update keeps
/// the stored one and bumps it when the pod template changed.
pub(super) fn daemon_set_update(old: &Value, object: &mut Value) {
    let stored = old
        .pointer(&format!("/metadata/annotations/{TEMPLATE_GENERATION}"))
        .and_then(Value::as_str)
        .and_then(|g| g.parse::<i64>().ok())
        .unwrap_or(1);
    let changed = old.pointer("/spec/template") != object.pointer("/spec/template");
    let generation = if changed { stored + 1 } else { stored };
    if let Some(annotations) = entry_at(object, &["metadata", "annotations"]) {
        set(annotations, TEMPLATE_GENERATION, Value::from(generation.to_string()));
    }
}

/// A `RollingUpdate`-by-default strategy (`strategy` of Deployments, `updateStrategy` of
/// DaemonSets): the type defaults to `RollingUpdate`, whose parameters get `defaults`.
fn rolling_update(spec: &mut Value, key: &str, defaults: &[Field]) {
    let Some(strategy) = entry(spec, key) else { return };
    fill(strategy, &[val("type", Str("RollingUpdate"))]);
    if str_at(strategy, "type") == "RollingUpdate"
        && let Some(parameters) = entry(strategy, "rollingUpdate")
    {
        fill(parameters, defaults);
    }
}

/// `SetDefaults_StatefulSet` (the `StatefulSetAutoDeletePVC` retention policy is GA;
/// `maxUnavailable` is behind `MaxUnavailableStatefulSet`, Beta and off in v1.36).
const STATEFUL_SET: &[Field] =
    &[val("podManagementPolicy", Str("OrderedReady")), ptr("replicas", Int(1)), ptr("revisionHistoryLimit", Int(10))];

/// StatefulSet: policies, a rolling update from partition 0 (created only when the type was
/// unset), PVC retention `Retain`/`Retain`, the template and the claim templates.
pub(super) fn stateful_set(object: &mut Value) {
    let Some(spec) = entry(object, "spec") else { return };
    fill(spec, STATEFUL_SET);
    if let Some(strategy) = entry(spec, "updateStrategy") {
        if is_empty(strategy, "type") {
            set(strategy, "type", Value::from("RollingUpdate"));
            fill(strategy, &[ptr("rollingUpdate", Object)]);
        }
        if str_at(strategy, "type") == "RollingUpdate"
            && let Some(parameters) = child(strategy, "rollingUpdate")
        {
            fill(parameters, &[ptr("partition", Int(0))]);
        }
    }
    if let Some(retention) = entry(spec, "persistentVolumeClaimRetentionPolicy") {
        fill(retention, &[val("whenDeleted", Str("Retain")), val("whenScaled", Str("Retain"))]);
    }
    template(spec);
    for claim in items(spec, "volumeClaimTemplates") {
        // `Convert_apps_StatefulSetSpec_To_v1_StatefulSetSpec` sets the claims' type meta.
        set(claim, "apiVersion", Value::from("v1"));
        set(claim, "kind", Value::from("PersistentVolumeClaim"));
        pod::embedded_metadata(claim);
        pod::claim(claim);
    }
}

/// The labels the Job strategy adds to a Job's pod template: (label, from `name` or `uid`).
const JOB_LABELS: [(&str, JobLabel); 4] = [
    ("job-name", JobLabel::Name),
    ("batch.kubernetes.io/job-name", JobLabel::Name),
    ("controller-uid", JobLabel::Uid),
    ("batch.kubernetes.io/controller-uid", JobLabel::Uid),
];

/// The label the generated Job selector matches.
const JOB_SELECTOR_LABEL: &str = "batch.kubernetes.io/controller-uid";

#[derive(Debug, Clone, Copy)]
enum JobLabel {
    Name,
    Uid,
}

/// Job: `SetDefaults_Job`, the template, and the strategy's selector generation
/// (`generateSelectorIfNeeded`), which runs after defaulting. A Job without labels ends up with
/// all of its template's, generated ones included: either defaulting made the two label maps
/// one shared Go map before generation, or (no template labels yet) kube-apiserver's defaulting
/// of the Job it reads back from storage copies them.
pub(super) fn job(object: &mut Value) {
    let shared = copy_template_labels(object, false);
    let Some(spec) = entry(object, "spec") else { return };
    job_spec(spec);
    template(spec);
    generate_selector(object);
    copy_template_labels(object, shared);
}

/// `SetDefaults_Job` on a Job's spec.
fn job_spec(spec: &mut Value) {
    if is_empty(spec, "completions") && is_empty(spec, "parallelism") {
        set(spec, "completions", Value::from(1));
    }
    fill(spec, &[ptr("parallelism", Int(1))]);
    // With a per-index limit the overall limit is effectively unlimited (math.MaxInt32).
    let backoff_limit = if is_empty(spec, "backoffLimitPerIndex") { 6 } else { i64::from(i32::MAX) };
    fill(spec, &[ptr("backoffLimit", Int(backoff_limit)), ptr("completionMode", Str("NonIndexed"))]);
    fill(spec, &[ptr("suspend", Bool(false))]);
    pod_failure_policy(spec);
    let replacement = if is_empty(spec, "podFailurePolicy") { "TerminatingOrFailed" } else { "Failed" };
    fill(spec, &[ptr("podReplacementPolicy", Str(replacement)), ptr("manualSelector", Bool(false))]);
}

/// `SetDefaults_PodFailurePolicyOnPodConditionsPattern`: condition patterns match `True`.
fn pod_failure_policy(spec: &mut Value) {
    if let Some(policy) = child(spec, "podFailurePolicy") {
        for pattern in items(policy, "rules").flat_map(|rule| items(rule, "onPodConditions")) {
            fill(pattern, &[val("status", Str("True"))]);
        }
    }
}

/// `labels := obj.Spec.Template.Labels; if labels != nil && len(obj.Labels) == 0 {…}`, or
/// unconditionally when `shared` (the maps are one); whether the labels were copied.
fn copy_template_labels(object: &mut Value, shared: bool) -> bool {
    let Some(labels) = object.pointer("/spec/template/metadata/labels").filter(|l| l.is_object()).cloned() else {
        return false;
    };
    match entry(object, "metadata") {
        Some(metadata) if shared || is_empty(metadata, "labels") => {
            set(metadata, "labels", labels);
            true
        }
        _ => false,
    }
}

/// `generateSelector`: unless `manualSelector` is true, label the template with the Job's name
/// and uid and select on the uid. Needs the uid, which the API layer assigns before defaulting.
fn generate_selector(object: &mut Value) {
    if object.pointer("/spec/manualSelector") == Some(&Value::Bool(true)) {
        return;
    }
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    if uid.is_empty() {
        return;
    }
    if let Some(labels) = entry_at(object, &["spec", "template", "metadata", "labels"]).and_then(Value::as_object_mut) {
        for (label, from) in JOB_LABELS {
            let value = match from {
                JobLabel::Name => &name,
                JobLabel::Uid => &uid,
            };
            labels.entry(label).or_insert_with(|| Value::from(value.as_str()));
        }
    }
    if let Some(match_labels) = entry_at(object, &["spec", "selector", "matchLabels"]).and_then(Value::as_object_mut) {
        match_labels.entry(JOB_SELECTOR_LABEL).or_insert_with(|| Value::from(uid.as_str()));
    }
}

/// `SetDefaults_CronJob`.
const CRON_JOB: &[Field] = &[
    val("concurrencyPolicy", Str("Allow")),
    ptr("suspend", Bool(false)),
    ptr("successfulJobsHistoryLimit", Int(3)),
    ptr("failedJobsHistoryLimit", Int(1)),
];

/// CronJob: `SetDefaults_CronJob` and its job template. `SetDefaults_Job` is defined on Jobs,
/// not job specs, so the job template gets no completions, backoff limit and the like.
pub(super) fn cron_job(object: &mut Value) {
    let Some(spec) = entry(object, "spec") else { return };
    fill(spec, CRON_JOB);
    if let Some(job_template) = child(spec, "jobTemplate") {
        pod::embedded_metadata(job_template);
        if let Some(job_spec) = entry(job_template, "spec") {
            pod_failure_policy(job_spec);
            if let Some(template) = entry(job_spec, "template") {
                pod::template(template);
            }
        }
    }
}
