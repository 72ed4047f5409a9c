//! The pure parts of upstream's `pkg/controller/deployment/util/deployment_util.go` (and the
//! ReplicaSet sort orders of `pkg/controller/controller_utils.go`): annotations, revisions,
//! maxSurge/maxUnavailable, proportions, new/old ReplicaSet selection and condition helpers.

use std::sync::Arc;

use super::Error;
use crate::apimachinery::clock::whole_seconds;
use crate::apimachinery::intstr::scaled_value;
use std::cmp::Ordering;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetCondition};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

/// `RevisionAnnotation`: the rollout sequence number of a ReplicaSet (and its Deployment).
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// `RevisionHistoryAnnotation`: the older revisions a ReplicaSet served.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// `DesiredReplicasAnnotation`: the Deployment's replicas when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `MaxReplicasAnnotation`: replicas + maxSurge when the ReplicaSet was last scaled.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// `apps.DeprecatedRollbackTo`: the round-tripped `spec.rollbackTo` of extensions/v1beta1.
pub const DEPRECATED_ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// `v1.LastAppliedConfigAnnotation`.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
pub use crate::apimachinery::labels::POD_TEMPLATE_HASH;

/// `maxRevHistoryLengthInChars` of sync.go.
pub const MAX_REV_HISTORY_LENGTH: usize = 2000;

/// `apps.DeploymentProgressing`: the condition type of the rollout's progress.
pub const PROGRESSING: &str = "Progressing";
/// `apps.DeploymentAvailable`: the condition type of minimum availability.
pub const AVAILABLE: &str = "Available";
/// `apps.DeploymentReplicaFailure`: the condition type of a ReplicaSet failing to create or
/// delete pods.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// `ReplicaSetUpdatedReason`: a ReplicaSet of the Deployment was updated by the rollout.
pub const REPLICA_SET_UPDATED: &str = "ReplicaSetUpdated";
/// `FailedRSCreateReason`: the new ReplicaSet could not be created.
pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
/// `NewReplicaSetReason`: the new ReplicaSet was created.
pub const NEW_REPLICA_SET: &str = "NewReplicaSetCreated";
/// `FoundNewRSReason`: an existing ReplicaSet was taken as the new one.
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// `NewRSAvailableReason`: the new ReplicaSet is available, the rollout is complete.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// `TimedOutReason`: no progress within `spec.progressDeadlineSeconds`.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// `PausedDeployReason`: paused, so no progress is estimated.
pub const PAUSED: &str = "DeploymentPaused";
/// `ResumedDeployReason`: resumed, so that the pause does not count against the deadline.
pub const RESUMED: &str = "DeploymentResumed";
/// `MinimumReplicasAvailable`: at least the replicas the strategy requires are available.
pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
/// `MinimumReplicasUnavailable`: fewer replicas available than the strategy requires.
pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
/// `RollbackRevisionNotFound`: the Event reason of a rollback to a revision that does not exist.
pub const ROLLBACK_REVISION_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
/// `RollbackTemplateUnchanged`: the Event reason of a rollback to the current template.
pub const ROLLBACK_TEMPLATE_UNCHANGED: &str = "DeploymentRollbackTemplateUnchanged";
/// `RollbackDone`: the Event reason of a completed rollback.
pub const ROLLBACK_DONE: &str = "DeploymentRollback";

/// `spec.replicas` (the API server defaults it to 1).
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// A ReplicaSet's `spec.replicas` (defaulted to 1 by the API server).
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Sets a ReplicaSet's `spec.replicas`.
pub fn set_rs_replicas(rs: &mut ReplicaSet, value: i32) {
    rs.spec.get_or_insert_with(Default::default).replicas = Some(value);
}

fn rs_status(rs: &ReplicaSet) -> (i32, i32, i32) {
    let s = rs.status.as_ref();
    (
        s.map_or(0, |s| s.replicas),
        s.and_then(|s| s.ready_replicas).unwrap_or(0),
        s.and_then(|s| s.available_replicas).unwrap_or(0),
    )
}

/// A ReplicaSet's `status.availableReplicas` (0 when unset).
pub fn rs_available(rs: &ReplicaSet) -> i32 {
    rs_status(rs).2
}

/// A ReplicaSet's uid (empty when unset).
pub fn rs_uid(rs: &ReplicaSet) -> &str {
    rs.metadata.uid.as_deref().unwrap_or("")
}

/// A ReplicaSet's name (empty when unset).
pub fn rs_name(rs: &ReplicaSet) -> &str {
    rs.metadata.name.as_deref().unwrap_or("")
}

/// A copy of the Deployment's pod template (`spec.template`).
pub fn template(d: &Deployment) -> PodTemplateSpec {
    d.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default()
}

/// `spec.minReadySeconds` (0 when unset).
pub fn min_ready_seconds(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

/// `spec.paused` (false when unset).
pub fn paused(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
}

/// `spec.strategy.type` (defaulted to RollingUpdate by the API server).
pub fn strategy_type(d: &Deployment) -> &str {
    d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate")
}

/// `IsRollingUpdate`.
pub fn is_rolling_update(d: &Deployment) -> bool {
    strategy_type(d) == "RollingUpdate"
}

/// `HasProgressDeadline`: set and not MaxInt32.
pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).filter(|s| *s != i32::MAX)
}

/// `HasRevisionHistoryLimit`: set and not MaxInt32.
pub fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.revision_history_limit).filter(|s| *s != i32::MAX)
}

/// `ResolveFenceposts`: maxSurge rounds up, maxUnavailable down; both zero → maxUnavailable 1.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), Error> {
    let zero = IntOrString::Int(0);
    let scaled = |value: Option<&IntOrString>, round_up| {
        scaled_value(value.unwrap_or(&zero), desired, round_up).map_err(|e| Error::ScaledValue(e.into()))
    };
    let surge = scaled(max_surge, true)?;
    let mut unavailable = scaled(max_unavailable, false)?;
    if surge == 0 && unavailable == 0 {
        // Rounding may bring both to zero; surge might be blocked by quota, so allow one down.
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let rolling = d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.rolling_update.as_ref());
    let surge = rolling.and_then(|r| r.max_surge.as_ref());
    let unavailable = rolling.and_then(|r| r.max_unavailable.as_ref());
    // Validation refuses bad values; treat them as zero as upstream ignores the error.
    resolve_fenceposts(surge, unavailable, replicas(d)).unwrap_or((0, 0))
}

/// `MaxUnavailable`: 0 unless rolling, at most `replicas`.
pub fn max_unavailable(d: &Deployment) -> i32 {
    if !is_rolling_update(d) || replicas(d) == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas(d))
}

/// `MaxSurge`: 0 unless rolling.
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    fenceposts(d).0
}

/// `NewDeploymentCondition`, with times at whole seconds as the API stores them.
pub fn new_condition(type_: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> DeploymentCondition {
    let now = Time(whole_seconds(now));
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}

/// `GetDeploymentCondition`.
pub fn get_condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.iter().flatten().find(|c| c.type_ == type_)
}

/// `SetDeploymentCondition`: same status and reason → no change; same status → the old
/// lastTransitionTime is kept; the condition goes last.
pub fn set_condition(status: &mut DeploymentStatus, mut condition: DeploymentCondition) {
    if let Some(current) = get_condition(status, &condition.type_) {
        if current.status == condition.status && current.reason == condition.reason {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_condition(status, &condition.type_.clone());
    status.conditions.get_or_insert_with(Vec::new).push(condition);
}

/// `RemoveDeploymentCondition`.
pub fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

/// `ReplicaSetToDeploymentCondition`.
pub fn rs_to_deployment_condition(c: &ReplicaSetCondition) -> DeploymentCondition {
    DeploymentCondition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        last_transition_time: c.last_transition_time.clone(),
        last_update_time: c.last_transition_time.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
    }
}

fn annotation<'a>(annotations: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// `SetDeploymentRevision`: whether the Deployment's revision annotation changed.
pub fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let annotations = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if annotations.get(REVISION).map(String::as_str) == Some(revision) {
        return false;
    }
    annotations.insert(REVISION.into(), revision.into());
    true
}

/// `Revision`: the revision annotation (0 when missing); an unparsable one is an error.
pub fn revision(rs: &ReplicaSet) -> Result<i64, Error> {
    match annotation(&rs.metadata.annotations, REVISION) {
        None => Ok(0),
        Some(v) => v.parse().map_err(|_| Error::InvalidRevision(v.to_string())),
    }
}

/// `MaxRevision`: the highest revision; unparsable ones are skipped.
pub fn max_revision<'a>(rss: impl IntoIterator<Item = &'a Arc<ReplicaSet>>) -> i64 {
    rss.into_iter().filter_map(|rs| revision(rs).ok()).max().unwrap_or(0).max(0)
}

/// `LastRevision`: the second highest revision.
pub fn last_revision<'a>(rss: impl IntoIterator<Item = &'a Arc<ReplicaSet>>) -> i64 {
    let (mut max, mut second) = (0, 0);
    for v in rss.into_iter().filter_map(|rs| revision(rs).ok()) {
        if v >= max {
            second = max;
            max = v;
        } else if v > second {
            second = v;
        }
    }
    second
}

/// `annotationsToSkip`.
fn skip_copy_annotation(key: &str) -> bool {
    matches!(key, LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | DEPRECATED_ROLLBACK_TO)
}

/// `copyDeploymentAnnotationsToReplicaSet`.
fn copy_deployment_annotations(d: &Deployment, target: &mut BTreeMap<String, String>) -> bool {
    let mut changed = false;
    for (key, value) in d.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(key) || target.get(key) == Some(value) {
            continue;
        }
        target.insert(key.clone(), value.clone());
        changed = true;
    }
    changed
}

/// `SetDeploymentAnnotationsTo`: on rollback the Deployment takes the ReplicaSet's annotations
/// (those that are copied), keeping its own skipped ones.
pub fn set_deployment_annotations_to(d: &mut Deployment, rs: &ReplicaSet) {
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| skip_copy_annotation(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in rs.metadata.annotations.iter().flatten() {
        if !skip_copy_annotation(key) {
            annotations.insert(key.clone(), value.clone());
        }
    }
    d.metadata.annotations = Some(annotations);
}

/// `SetNewReplicaSetAnnotations`: copies the Deployment's annotations, raises the revision to
/// `new_revision` (keeping the old one in revision-history, within `history_limit` characters)
/// and, for a ReplicaSet about to be created, the replica annotations. Whether anything changed.
/// Only the ReplicaSet's annotations are read and written: a caller holding a shared
/// ReplicaSet copies them alone, and the ReplicaSet only if they change.
pub fn set_new_rs_annotations(
    d: &Deployment,
    annotations: &mut BTreeMap<String, String>,
    new_revision: &str,
    exists: bool,
    history_limit: usize,
) -> bool {
    let mut changed = copy_deployment_annotations(d, annotations);
    let old_revision = annotations.get(REVISION).cloned();
    let old_int = match old_revision.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(v) => v,
            Err(e) => {
                log::info!("updating replica set revision: old revision {v:?} is not an int: {e}");
                return false;
            }
        },
    };
    let Ok(new_int) = new_revision.parse::<i64>() else {
        log::info!("updating replica set revision: new revision {new_revision:?} is not an int");
        return false;
    };
    if old_int < new_int {
        annotations.insert(REVISION.into(), new_revision.into());
        changed = true;
    }
    if let Some(old) = old_revision.filter(|_| old_int < new_int) {
        let history = annotations.get(REVISION_HISTORY).cloned().unwrap_or_default();
        if history.is_empty() {
            annotations.insert(REVISION_HISTORY.into(), old);
        } else {
            let entries: Vec<&str> = history.split(',').collect();
            let mut total = history.len() + old.len() + 1;
            let mut start = 0;
            while total > history_limit && start < entries.len() {
                total -= entries[start].len() + 1;
                start += 1;
            }
            if total <= history_limit {
                let mut kept: Vec<&str> = entries[start..].to_vec();
                kept.push(&old);
                annotations.insert(REVISION_HISTORY.into(), kept.join(","));
            } else {
                log::info!("not appending revision: revision history length limit {history_limit} reached");
            }
        }
    }
    if !exists && set_replicas_annotations(annotations, replicas(d), replicas(d) + max_surge(d)) {
        changed = true;
    }
    changed
}

/// `SetReplicasAnnotations`: whether anything changed.
pub fn set_replicas_annotations(annotations: &mut BTreeMap<String, String>, desired: i32, max: i32) -> bool {
    let mut updated = false;
    for (key, value) in [(DESIRED_REPLICAS, desired.to_string()), (MAX_REPLICAS, max.to_string())] {
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.into(), value);
            updated = true;
        }
    }
    updated
}

/// `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    let annotations = &rs.metadata.annotations;
    annotation(annotations, DESIRED_REPLICAS) != Some(&desired.to_string())
        || annotation(annotations, MAX_REPLICAS) != Some(&max.to_string())
}

/// `getIntFromAnnotation`.
pub fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    annotation(&rs.metadata.annotations, key)?.parse().ok()
}

/// `IsSaturated`: the new ReplicaSet runs all replicas, available, for the current size.
pub fn is_saturated(d: &Deployment, rs: Option<&Arc<ReplicaSet>>) -> bool {
    let Some(rs) = rs else { return false };
    let Some(desired) = int_annotation(rs, DESIRED_REPLICAS) else { return false };
    rs_replicas(rs) == replicas(d) && desired == replicas(d) && rs_available(rs) == replicas(d)
}

/// `getReplicaSetFraction`: the change of size proportional to the Deployment's.
fn replica_set_fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    if replicas(d) == 0 {
        return -rs_replicas(rs);
    }
    let max_replicas = replicas(d) + max_surge(d);
    let mut before = int_annotation(rs, MAX_REPLICAS).unwrap_or(0);
    if before == 0 {
        // The annotation was edited away: fall back to the Deployment's current size.
        before = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        if before == 0 {
            return 0;
        }
    }
    let size = f64::from(rs_replicas(rs).wrapping_mul(max_replicas)) / f64::from(before);
    // integer.RoundToInt32: half away from zero.
    size.round() as i32 - rs_replicas(rs)
}

/// `GetReplicaSetProportion`: how many replicas to add to (or remove from) `rs`.
pub fn replica_set_proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = replica_set_fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 { fraction.min(allowed) } else { fraction.max(allowed) }
}

/// Removes null fields, empty lists and empty label/annotation/selector maps: Go's semantic
/// equality treats nil and empty maps and slices alike.
fn semantic(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, semantic(v)))
                .filter(|(k, v)| match v {
                    Value::Array(a) => !a.is_empty(),
                    Value::Object(o) => {
                        !(o.is_empty() && matches!(k.as_str(), "labels" | "annotations" | "nodeSelector"))
                    }
                    _ => true,
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(semantic).collect()),
        other => other,
    }
}

/// `EqualIgnoreHash`: the templates are semantically equal once their pod-template-hash labels
/// are removed.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    // Equal fields are semantically equal: the JSON comparison, which also equates nil and
    // empty and compares quantities by value, is only needed when they differ, and not when a
    // field it compares exactly differs (a rollout's new image or annotation, against every old
    // ReplicaSet). Neither of the first two copies a template: this runs for every ReplicaSet
    // of a Deployment on every sync.
    if equal_but_hash(a, b) {
        return true;
    }
    if differ_in_strings(a, b) {
        return false;
    }
    let semantic_json = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.remove(POD_TEMPLATE_HASH);
        }
        semantic(crate::apimachinery::json::to_value(&t).unwrap_or(Value::Null))
    };
    semantic_json(a) == semantic_json(b)
}

/// The labels of a template but its pod-template-hash, in order.
fn labels_but_hash(t: &PodTemplateSpec) -> impl Iterator<Item = (&String, &String)> {
    let labels = t.metadata.as_ref().and_then(|m| m.labels.as_ref());
    labels.into_iter().flatten().filter(|(key, _)| key.as_str() != POD_TEMPLATE_HASH)
}

/// Whether the templates are equal, field for field, once their pod-template-hash labels are
/// removed (`==` on the templates with the label removed, without removing it).
fn equal_but_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let metadata_equal = match (&a.metadata, &b.metadata) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            // Every field but the labels, named so that a field added to ObjectMeta is not
            // left out of the comparison.
            let ObjectMeta {
                annotations,
                creation_timestamp,
                deletion_grace_period_seconds,
                deletion_timestamp,
                finalizers,
                generate_name,
                generation,
                labels,
                managed_fields,
                name,
                namespace,
                owner_references,
                resource_version,
                self_link,
                uid,
            } = x;
            *annotations == y.annotations
                && *creation_timestamp == y.creation_timestamp
                && *deletion_grace_period_seconds == y.deletion_grace_period_seconds
                && *deletion_timestamp == y.deletion_timestamp
                && *finalizers == y.finalizers
                && *generate_name == y.generate_name
                && *generation == y.generation
                && labels.is_some() == y.labels.is_some()
                && *managed_fields == y.managed_fields
                && *name == y.name
                && *namespace == y.namespace
                && *owner_references == y.owner_references
                && *resource_version == y.resource_version
                && *self_link == y.self_link
                && *uid == y.uid
        }
        _ => false,
    };
    metadata_equal && labels_but_hash(a).eq(labels_but_hash(b)) && a.spec == b.spec
}

/// Whether two templates differ in a field that semantic equality compares as it is: the
/// labels but the pod-template-hash and the annotations (a missing map is an empty one), the
/// containers' names and images. Templates that do are not semantically equal; templates that
/// do not may still differ elsewhere (a missing image and an empty one included), which the
/// JSON comparison tells.
fn differ_in_strings(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    fn annotations(t: &PodTemplateSpec) -> Option<&BTreeMap<String, String>> {
        t.metadata.as_ref().and_then(|m| m.annotations.as_ref()).filter(|m| !m.is_empty())
    }
    fn containers(t: &PodTemplateSpec) -> impl Iterator<Item = (&str, &str)> {
        let containers = t.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
        containers.iter().map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or("")))
    }
    !labels_but_hash(a).eq(labels_but_hash(b)) || annotations(a) != annotations(b) || !containers(a).eq(containers(b))
}

fn creation(rs: &ReplicaSet) -> Option<Timestamp> {
    rs.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
pub fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    creation(a).cmp(&creation(b)).then_with(|| rs_name(a).cmp(rs_name(b)))
}

/// `ReplicaSetsBySizeOlder`: largest first, older first among equals.
pub fn by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    rs_replicas(b).cmp(&rs_replicas(a)).then_with(|| by_creation(a, b))
}

/// `ReplicaSetsBySizeNewer`: largest first, newer first among equals.
pub fn by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    rs_replicas(b).cmp(&rs_replicas(a)).then_with(|| by_creation(b, a))
}

/// `ReplicaSetsByRevision`: lowest revision first; unparsable or equal ones by creation.
pub fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    match (revision(a), revision(b)) {
        (Ok(x), Ok(y)) if x != y => x.cmp(&y),
        _ => by_creation(a, b),
    }
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the Deployment's (sorts
/// `rss` by creation, as upstream does).
pub fn find_new_replica_set(d: &Deployment, rss: &mut [Arc<ReplicaSet>]) -> Option<Arc<ReplicaSet>> {
    rss.sort_by(|a, b| by_creation(a, b));
    let no_template = PodTemplateSpec::default();
    let wanted = d.spec.as_ref().map_or(&no_template, |s| &s.template);
    rss.iter()
        .find(|rs| rs.spec.as_ref().and_then(|s| s.template.as_ref()).is_some_and(|t| equal_ignore_hash(t, wanted)))
        .cloned()
}

/// `FindOldReplicaSets`: every ReplicaSet but the new one.
pub fn find_old_replica_sets(d: &Deployment, rss: &mut [Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
    let new_uid = find_new_replica_set(d, rss).map(|rs| rs_uid(&rs).to_string());
    rss.iter().filter(|rs| new_uid.as_deref() != Some(rs_uid(rs))).cloned().collect()
}

/// `FilterActiveReplicaSets`: those with `spec.replicas > 0`.
pub fn active(rss: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
    rss.iter().filter(|rs| rs_replicas(rs) > 0).cloned().collect()
}

/// `GetReplicaCountForReplicaSets`: the sum of `spec.replicas`.
pub fn spec_replicas_sum(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|rs| rs_replicas(rs)).sum()
}

/// `GetActualReplicaCountForReplicaSets`: the sum of `status.replicas`.
pub fn actual_replicas_sum(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|rs| rs_status(rs).0).sum()
}

/// `GetReadyReplicaCountForReplicaSets`.
pub fn ready_replicas_sum(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|rs| rs_status(rs).1).sum()
}

/// `GetAvailableReplicaCountForReplicaSets`.
pub fn available_replicas_sum(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|rs| rs_status(rs).2).sum()
}

/// `GetTerminatingReplicaCountForReplicaSets`: the sum of the ReplicaSets'
/// `status.terminatingReplicas`. One never synced by its controller (no observedGeneration, no
/// count) does not count; if any other has no count, the sum is unknown (`None`).
pub fn terminating_replicas_sum(rss: &[Arc<ReplicaSet>]) -> Option<i32> {
    let mut sum = 0;
    for status in rss.iter().map(|rs| rs.status.as_ref()) {
        let observed = status.and_then(|s| s.observed_generation).unwrap_or(0);
        match status.and_then(|s| s.terminating_replicas) {
            Some(terminating) => sum += terminating,
            None if observed == 0 => {}
            None => return None,
        }
    }
    Some(sum)
}

/// `FindActiveOrLatest`: the only active ReplicaSet, or the newest when none is active; None
/// when several are active (they are scaled proportionally). Sorts `old` newest first.
pub fn find_active_or_latest(new: Option<&Arc<ReplicaSet>>, old: &mut [Arc<ReplicaSet>]) -> Option<Arc<ReplicaSet>> {
    if new.is_none() && old.is_empty() {
        return None;
    }
    old.sort_by(|a, b| by_creation(b, a));
    let mut all: Vec<Arc<ReplicaSet>> = old.to_vec();
    all.extend(new.cloned());
    let live = active(&all);
    match live.len() {
        0 => new.cloned().or_else(|| old.first().cloned()),
        1 => live.into_iter().next(),
        _ => None,
    }
}

/// `NewRSNewReplicas`: the size of the new ReplicaSet this step may reach.
pub fn new_rs_new_replicas(d: &Deployment, all: &[Arc<ReplicaSet>], new_rs: &Arc<ReplicaSet>) -> Result<i32, Error> {
    match strategy_type(d) {
        "RollingUpdate" => {
            let rolling = d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.rolling_update.as_ref());
            let zero = IntOrString::Int(0);
            let surge = scaled_value(rolling.and_then(|r| r.max_surge.as_ref()).unwrap_or(&zero), replicas(d), true)
                .map_err(|e| Error::ScaledValue(e.into()))?;
            let current = spec_replicas_sum(all);
            let max_total = replicas(d) + surge;
            if current >= max_total {
                return Ok(rs_replicas(new_rs));
            }
            let scale_up = (max_total - current).min(replicas(d) - rs_replicas(new_rs));
            Ok(rs_replicas(new_rs) + scale_up)
        }
        "Recreate" => Ok(replicas(d)),
        other => Err(Error::UnsupportedStrategy(other.to_string())),
    }
}

fn status_of(d: &Deployment) -> DeploymentStatus {
    d.status.clone().unwrap_or_default()
}

fn n(value: Option<i32>) -> i32 {
    value.unwrap_or(0)
}

/// `DeploymentComplete`: every replica updated and available, the generation observed.
pub fn deployment_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let want = replicas(d);
    n(status.updated_replicas) == want
        && n(status.replicas) == want
        && n(status.available_replicas) == want
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, fewer old, more ready or more available replicas.
pub fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = status_of(d);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// `DeploymentTimedOut`: no progress reported for progressDeadlineSeconds.
pub fn deployment_timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = progress_deadline(d) else { return false };
    let Some(condition) = get_condition(status, PROGRESSING) else { return false };
    match condition.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => {
            let from = condition.last_update_time.as_ref().map_or(0, |t| t.0.as_millisecond());
            from + i64::from(deadline) * 1000 < now.as_millisecond()
        }
    }
}

/// `SetFromReplicaSetTemplate`: the Deployment takes the template, without the hash label.
pub fn set_from_replica_set_template(d: &mut Deployment, template: &PodTemplateSpec) {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    d.spec.get_or_insert_with(Default::default).template = template;
}

#[cfg(test)]
mod tests;
