//! Pod helpers several controllers share: `pkg/util/pod.PatchPodStatus` (a strategic merge
//! patch of the status with the pod's UID as a precondition), `controller.RealPodControl` and
//! `GetPodFromTemplate` (`control`: pods created from a template and deleted, with their
//! Events), the deletion rankings (`ranking`), when pods become available (`availability`), and
//! `controller.ComputeHash` of a pod template (`template_hash`: the Deployment's
//! `pod-template-hash`, the DaemonSet's revision hash). (`UpdatePodCondition` and the other
//! pure pod helpers are in [`crate::apimachinery::pod`].)

pub mod availability;
pub mod control;
pub mod ranking;
pub mod template_hash;
#[cfg(test)]
pub mod testing;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{Map, Value, json};

use crate::client::{self, Api, Client, Patch, PostParams};

/// Why [`patch_pod_status`] failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The patch request failed: the API error as it reads.
    #[error("{0}")]
    Api(#[from] client::Error),
    /// The patch could not be built (it reads as the client's refused request did).
    #[error("invalid request: {0}")]
    Patch(#[from] StatusPatchError),
}

/// Why [`status_patch`] could not build a patch.
#[derive(Debug, thiserror::Error)]
pub enum StatusPatchError {
    /// A status did not encode as JSON.
    #[error("cannot encode a pod status: {0}")]
    Encode(#[source] serde_json::Error),
    /// A list other than `conditions` differs: its patch is not supported.
    #[error("a patch of status.{field} is not supported")]
    UnsupportedList {
        /// The status field.
        field: String,
    },
}

/// `PatchPodStatus`: patches the pod's status from `old` to `new` with a strategic merge patch
/// carrying the pod's UID (so a pod recreated under the same name is not touched). `Ok(None)`
/// when there is nothing to change.
pub fn patch_pod_status(client: &Client, pod: &Pod, new: &PodStatus) -> Result<Option<Pod>, Error> {
    let old = pod.status.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let Some(patch) = status_patch(&uid, &old, new)? else {
        return Ok(None);
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api = Api::<Pod>::namespaced(client, namespace);
    Ok(api.patch_status(name, &Patch::Strategic(patch), &PostParams::default()).map(Some)?)
}

/// The two-way strategic merge patch between two pod statuses (client-go's
/// `CreateTwoWayMergePatch` for what controllers change: scalar fields, objects and the
/// `conditions` list, merged by `type`), wrapped with the UID precondition. Other lists must
/// not differ.
pub fn status_patch(uid: &str, old: &PodStatus, new: &PodStatus) -> Result<Option<Value>, StatusPatchError> {
    let to_map = |status: &PodStatus| match crate::apimachinery::json::to_value(status) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Ok(Map::new()),
        Err(e) => Err(StatusPatchError::Encode(e)),
    };
    let (old, new) = (to_map(old)?, to_map(new)?);
    let mut diff = Map::new();
    for key in old.keys().chain(new.keys().filter(|k| !old.contains_key(*k))) {
        let (before, after) = (old.get(key), new.get(key));
        if before == after {
            continue;
        }
        if key == "conditions" {
            let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
            merge_keyed_list_diff(&mut diff, key, &list(before), &list(after), "type");
        } else if before.is_some_and(Value::is_array) || after.is_some_and(Value::is_array) {
            return Err(StatusPatchError::UnsupportedList { field: key.clone() });
        } else {
            diff.insert(key.clone(), value_diff(before, after));
        }
    }
    if diff.is_empty() {
        return Ok(None);
    }
    Ok(Some(json!({"metadata": {"uid": uid}, "status": diff})))
}

/// The patch of one field: the new value, objects member by member, `null` for removals.
fn value_diff(before: Option<&Value>, after: Option<&Value>) -> Value {
    match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => Value::Object(object_diff(b, a)),
        (_, Some(after)) => after.clone(),
        (_, None) => Value::Null,
    }
}

fn object_diff(before: &Map<String, Value>, after: &Map<String, Value>) -> Map<String, Value> {
    let mut diff = Map::new();
    for (key, value) in after {
        if before.get(key) != Some(value) {
            diff.insert(key.clone(), value_diff(before.get(key), Some(value)));
        }
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        diff.insert(key.clone(), Value::Null);
    }
    diff
}

/// A list merged by `merge_key`: `$setElementOrder/<field>` with the new order, then the
/// added and changed elements (changed ones as their difference plus the key) and
/// `$patch: delete` for removed ones, by key.
fn merge_keyed_list_diff(
    diff: &mut Map<String, Value>,
    field: &str,
    before: &[Value],
    after: &[Value],
    merge_key: &str,
) {
    let key_of = |v: &Value| v.get(merge_key).cloned().unwrap_or(Value::Null);
    let find = |list: &[Value], key: &Value| list.iter().find(|v| key_of(v) == *key).cloned();
    let mut entries: Vec<(String, Value)> = Vec::new();
    for item in after {
        let key = key_of(item);
        match find(before, &key) {
            None => entries.push((key.to_string(), item.clone())),
            Some(old) if old != *item => {
                let (Value::Object(o), Value::Object(n)) = (&old, item) else {
                    entries.push((key.to_string(), item.clone()));
                    continue;
                };
                let mut changed = object_diff(o, n);
                changed.insert(merge_key.to_string(), key.clone());
                entries.push((key.to_string(), Value::Object(changed)));
            }
            Some(_) => {}
        }
    }
    for item in before.iter().filter(|v| find(after, &key_of(v)).is_none()) {
        let key = key_of(item);
        entries.push((key.to_string(), json!({merge_key: key, "$patch": "delete"})));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let order: Vec<Value> = after.iter().map(|v| json!({merge_key: key_of(v)})).collect();
    diff.insert(format!("$setElementOrder/{field}"), Value::Array(order));
    diff.insert(field.to_string(), Value::Array(entries.into_iter().map(|(_, v)| v).collect()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::pod::fixtures::{at, condition};
    use crate::apimachinery::pod::update_pod_condition;

    #[test]
    fn the_status_patch_has_the_uid_the_phase_and_the_new_condition() {
        let old = PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![condition("Ready", "True", "r"), condition("PodScheduled", "True", "s")]),
            ..PodStatus::default()
        };
        let mut new = old.clone();
        new.phase = Some("Failed".into());
        update_pod_condition(&mut new, condition("DisruptionTarget", "True", "DeletionByPodGC"), at(5));
        new.conditions.as_mut().unwrap()[0].reason = Some("changed".into());
        let patch = status_patch("u-1", &old, &new).unwrap().unwrap();
        assert_eq!(
            patch,
            json!({
                "metadata": {"uid": "u-1"},
                "status": {
                    "phase": "Failed",
                    "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"}, {"type": "DisruptionTarget"}],
                    "conditions": [
                        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC", "lastTransitionTime": "1970-01-01T00:00:05Z"},
                        {"type": "Ready", "reason": "changed"},
                    ],
                },
            })
        );
        assert!(matches!(status_patch("u-1", &old, &old), Ok(None)));
    }

    #[test]
    fn removed_fields_and_conditions_are_deleted() {
        let old = PodStatus {
            reason: Some("Evicted".into()),
            conditions: Some(vec![condition("Ready", "True", "r")]),
            ..PodStatus::default()
        };
        let new = PodStatus::default();
        let patch = status_patch("u", &old, &new).unwrap().unwrap();
        assert_eq!(patch["status"]["reason"], Value::Null);
        assert_eq!(patch["status"]["conditions"], json!([{"type": "Ready", "$patch": "delete"}]));
        let with_ips = PodStatus { pod_ips: Some(vec![Default::default()]), ..PodStatus::default() };
        assert!(status_patch("u", &new, &with_ips).is_err(), "other lists are not diffed");
    }
}
