//! Workload specs and statuses: `pkg/apis/apps/validation` (Deployment, ReplicaSet,
//! StatefulSet, DaemonSet) and the ReplicationController rules of `pkg/apis/core/validation`.

use serde_json::Value;

use super::meta::{annotations, int, label_selector, labels, nonnegative, text};
use super::{FieldError, gojson, label_selector_value, pod, quote, string_map_value};
use crate::apimachinery::labels::Selector;
use crate::sandbox::storage::resources::ResourceType;

const SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";
const PERCENT_MESSAGE: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// `ValidateDeploymentSpec`.
pub(super) fn deployment(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes: Vec<FieldError> = nonnegative(spec, "replicas", "spec").into_iter().collect();
    let (selector_causes, selector) = required_selector(spec, "deployment");
    causes.extend(selector_causes);
    if let Some(selector) = selector {
        causes.extend(replica_set_template(&spec["template"], &selector, "ReplicaSet"));
    }
    causes.extend(deployment_strategy(&spec["strategy"]));
    causes.extend(nonnegative(spec, "minReadySeconds", "spec"));
    causes.extend(nonnegative(spec, "revisionHistoryLimit", "spec"));
    if let Some(deadline) = spec["progressDeadlineSeconds"].as_i64() {
        causes.extend(FieldError::nonnegative("spec.progressDeadlineSeconds", deadline));
        if deadline <= int(spec, "minReadySeconds") {
            let field = "spec.progressDeadlineSeconds";
            causes.push(FieldError::invalid(field, deadline.to_string(), "must be greater than minReadySeconds"));
        }
    }
    causes
}

/// `ValidateReplicaSetSpec` (its empty-selector message names deployments upstream too).
pub(super) fn replica_set(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes: Vec<FieldError> = nonnegative(spec, "replicas", "spec").into_iter().collect();
    causes.extend(nonnegative(spec, "minReadySeconds", "spec"));
    let (selector_causes, selector) = required_selector(spec, "deployment");
    causes.extend(selector_causes);
    if let Some(selector) = selector {
        causes.extend(replica_set_template(&spec["template"], &selector, "ReplicaSet"));
    }
    causes
}

/// `ValidateReplicationControllerSpec`: a non-empty selector map matching the template.
pub(super) fn replication_controller(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes: Vec<FieldError> = nonnegative(spec, "minReadySeconds", "spec").into_iter().collect();
    let selector = spec["selector"].as_object().map(Selector::from_set).unwrap_or_else(Selector::everything);
    if selector.is_empty() {
        causes.push(FieldError::required("spec.selector", ""));
    }
    causes.extend(nonnegative(spec, "replicas", "spec"));
    if spec["template"].is_null() {
        causes.push(FieldError::required("spec.template", ""));
    } else {
        causes.extend(replica_set_template(&spec["template"], &selector, "ReplicationController"));
    }
    causes
}

/// `ValidateStatefulSetSpec` (upstream checks a StatefulSet template's labels and annotations,
/// not its pod spec).
pub(super) fn stateful_set(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    match text(spec, "podManagementPolicy") {
        "" => causes.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => causes.push(FieldError::invalid(
            "spec.podManagementPolicy",
            quote(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    causes.extend(stateful_set_strategy(&spec["updateStrategy"]));
    if let Some(policy) = spec["persistentVolumeClaimRetentionPolicy"].as_object() {
        for field in ["whenDeleted", "whenScaled"] {
            let value = policy.get(field).and_then(Value::as_str).unwrap_or_default();
            if !matches!(value, "Retain" | "Delete") {
                let path = format!("spec.persistentVolumeClaimRetentionPolicy.{field}");
                causes.push(FieldError::not_supported(&path, value, &["Retain", "Delete"]));
            }
        }
    }
    causes.extend(nonnegative(spec, "replicas", "spec"));
    causes.extend(nonnegative(spec, "minReadySeconds", "spec"));
    if let Some(start) = spec["ordinals"]["start"].as_i64() {
        causes.extend(FieldError::nonnegative("spec.ordinals.start", start));
    }
    let (selector_causes, selector) = required_selector(spec, "statefulset");
    causes.extend(selector_causes);
    if let Some(selector) = selector {
        let template = &spec["template"];
        causes.extend(template_labels_match(template, &selector, "spec.template"));
        causes.extend(labels(&template["metadata"]["labels"], "spec.template.labels"));
        causes.extend(annotations(&template["metadata"]["annotations"], "spec.template.annotations"));
    }
    causes.extend(always_restarts(&spec["template"], "spec.template", "StatefulSet"));
    causes
}

/// `ValidateDaemonSetSpec`: the selector may be absent (then it matches no template).
pub(super) fn daemon_set(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let template = &spec["template"];
    let mut causes = label_selector(&spec["selector"], "spec.selector");
    if let Ok(selector) = Selector::from_label_selector_object(&spec["selector"])
        && !selector.matches(template["metadata"]["labels"].as_object().unwrap_or(&Default::default()))
    {
        let field = "spec.template.metadata.labels";
        causes.push(FieldError::invalid(field, string_map_value(&template["metadata"]["labels"]), SELECTOR_MISMATCH));
    }
    if spec["selector"].is_object() && selector_is_empty(&spec["selector"]) {
        let rendered = label_selector_value(&spec["selector"]);
        causes.push(FieldError::invalid("spec.selector", rendered, "empty selector is invalid for daemonset"));
    }
    causes.extend(pod::template(template, "spec.template"));
    causes.extend(always_restarts(template, "spec.template", "DaemonSet"));
    causes.extend(nonnegative(spec, "minReadySeconds", "spec"));
    causes.extend(nonnegative(spec, "templateGeneration", "spec"));
    causes.extend(daemon_set_strategy(&spec["updateStrategy"]));
    causes.extend(nonnegative(spec, "revisionHistoryLimit", "spec"));
    causes
}

/// `ValidateControllerRevisionCreate` / `…Update`: a revision number ≥ 0 and, on a create,
/// data that is a JSON object; on an update the data may not change.
pub(super) fn controller_revision(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut causes: Vec<FieldError> =
        object["revision"].as_i64().and_then(|v| FieldError::nonnegative("revision", v)).into_iter().collect();
    let data = &object["data"];
    match old {
        None if data.is_null() => causes.push(FieldError::required("data", "data is mandatory")),
        None if !data.is_object() => causes.push(FieldError::required("data", "data must be a valid JSON object")),
        None => {}
        Some(old) if old["data"] != *data => {
            causes.push(super::immutable("data", go_raw_extension(data)));
        }
        Some(_) => {}
    }
    causes
}

/// The `runtime.RawExtension` holding `data`, as a field error shows it: its raw JSON.
fn go_raw_extension(data: &Value) -> String {
    data.to_string()
}

/// The selector rules of Deployments, ReplicaSets and StatefulSets: required, valid, not
/// empty; returns the parsed selector when it converts (`LabelSelectorAsSelector`).
fn required_selector(spec: &Value, kind: &str) -> (Vec<FieldError>, Option<Selector>) {
    let selector = &spec["selector"];
    let mut causes = Vec::new();
    if selector.is_null() {
        causes.push(FieldError::required("spec.selector", ""));
    } else {
        causes.extend(label_selector(selector, "spec.selector"));
        if selector_is_empty(selector) {
            let detail = format!("empty selector is invalid for {kind}");
            causes.push(FieldError::invalid("spec.selector", label_selector_value(selector), &detail));
        }
    }
    match Selector::from_label_selector_object(selector) {
        Ok(parsed) => (causes, Some(parsed)),
        Err(_) => {
            let detail = if kind == "statefulset" { "" } else { "invalid label selector" };
            causes.push(FieldError::invalid("spec.selector", label_selector_value(selector), detail));
            (causes, None)
        }
    }
}

fn selector_is_empty(selector: &Value) -> bool {
    let count = |field: &str| selector[field].as_object().map_or(0, |m| m.len());
    count("matchLabels") + selector["matchExpressions"].as_array().map_or(0, Vec::len) == 0
}

/// `ValidatePodTemplateSpecForReplicaSet` / `ValidatePodTemplateSpecForRC`.
fn replica_set_template(template: &Value, selector: &Selector, kind: &str) -> Vec<FieldError> {
    let mut causes: Vec<FieldError> = template_labels_match(template, selector, "spec.template").into_iter().collect();
    causes.extend(pod::template(template, "spec.template"));
    causes.extend(always_restarts(template, "spec.template", kind));
    causes
}

/// A non-empty selector must select the template's labels.
fn template_labels_match(template: &Value, selector: &Selector, path: &str) -> Option<FieldError> {
    let template_labels = &template["metadata"]["labels"];
    let empty = Default::default();
    let matches = selector.matches(template_labels.as_object().unwrap_or(&empty));
    (!selector.is_empty() && !matches).then(|| {
        FieldError::invalid(&format!("{path}.metadata.labels"), string_map_value(template_labels), SELECTOR_MISMATCH)
    })
}

/// Controllers' pods restart always and have no active deadline.
fn always_restarts(template: &Value, path: &str, kind: &str) -> Vec<FieldError> {
    let spec = &template["spec"];
    let mut causes = Vec::new();
    let policy = text(spec, "restartPolicy");
    if policy != "Always" {
        causes.push(FieldError::not_supported(&format!("{path}.spec.restartPolicy"), policy, &["Always"]));
    }
    if !spec["activeDeadlineSeconds"].is_null() {
        let detail = format!("activeDeadlineSeconds in {kind} is not Supported");
        causes.push(FieldError::forbidden(&format!("{path}.spec.activeDeadlineSeconds"), &detail));
    }
    causes
}

/// `ValidateDeploymentStrategy`.
fn deployment_strategy(strategy: &Value) -> Vec<FieldError> {
    let rolling = &strategy["rollingUpdate"];
    match text(strategy, "type") {
        "Recreate" if !rolling.is_null() => vec![FieldError::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        )],
        "Recreate" => Vec::new(),
        "RollingUpdate" if rolling.is_null() => {
            vec![FieldError::required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil")]
        }
        "RollingUpdate" => rolling_update_deployment(rolling, "spec.strategy.rollingUpdate"),
        _ => {
            let rendered = gojson::structure(strategy, gojson::DEPLOYMENT_STRATEGY).json();
            vec![FieldError::not_supported_rendered("spec.strategy", rendered, &["Recreate", "RollingUpdate"])]
        }
    }
}

/// `ValidateRollingUpdateDeployment`.
fn rolling_update_deployment(rolling: &Value, path: &str) -> Vec<FieldError> {
    let (unavailable, surge) = (&rolling["maxUnavailable"], &rolling["maxSurge"]);
    let (unavailable_path, surge_path) = (format!("{path}.maxUnavailable"), format!("{path}.maxSurge"));
    let mut causes = positive_int_or_percent(unavailable, &unavailable_path);
    causes.extend(positive_int_or_percent(surge, &surge_path));
    if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
        let detail = "may not be 0 when `maxSurge` is 0";
        causes.push(FieldError::invalid(&unavailable_path, go_int_or_string(unavailable), detail));
    }
    causes.extend(not_more_than_100_percent(unavailable, &unavailable_path));
    causes
}

/// `ValidateDaemonSetUpdateStrategy` and `ValidateRollingUpdateDaemonSet`.
fn daemon_set_strategy(strategy: &Value) -> Vec<FieldError> {
    let path = "spec.updateStrategy";
    let rolling = &strategy["rollingUpdate"];
    match text(strategy, "type") {
        "OnDelete" => Vec::new(),
        "RollingUpdate" if rolling.is_null() => vec![FieldError::required(&format!("{path}.rollingUpdate"), "")],
        "RollingUpdate" => {
            let (unavailable, surge) = (&rolling["maxUnavailable"], &rolling["maxSurge"]);
            let unavailable_path = format!("{path}.rollingUpdate.maxUnavailable");
            let surge_path = format!("{path}.rollingUpdate.maxSurge");
            let mut causes = positive_int_or_percent(unavailable, &unavailable_path);
            causes.extend(positive_int_or_percent(surge, &surge_path));
            causes.extend(not_more_than_100_percent(unavailable, &unavailable_path));
            causes.extend(not_more_than_100_percent(surge, &surge_path));
            match (int_or_percent_value(unavailable) != 0, int_or_percent_value(surge) != 0) {
                (true, true) => causes.push(FieldError::invalid(
                    &surge_path,
                    go_int_or_string(surge),
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => {
                    causes.push(FieldError::required(&unavailable_path, "cannot be 0 when maxSurge is 0"))
                }
                _ => {}
            }
            causes
        }
        _ => {
            let rendered = gojson::structure(strategy, gojson::DAEMON_SET_UPDATE_STRATEGY).json();
            vec![FieldError::not_supported_rendered(path, rendered, &["RollingUpdate", "OnDelete"])]
        }
    }
}

/// The StatefulSet update strategy rules of `ValidateStatefulSetSpec`.
fn stateful_set_strategy(strategy: &Value) -> Vec<FieldError> {
    let path = "spec.updateStrategy";
    let rolling = &strategy["rollingUpdate"];
    match text(strategy, "type") {
        "" => vec![FieldError::required(path, "")],
        "OnDelete" if !rolling.is_null() => vec![FieldError::invalid(
            &format!("{path}.rollingUpdate"),
            gojson::structure(rolling, gojson::ROLLING_UPDATE_STATEFUL_SET).json(),
            "only allowed for updateStrategy 'RollingUpdate'",
        )],
        "OnDelete" => Vec::new(),
        "RollingUpdate" if rolling.is_null() => Vec::new(),
        "RollingUpdate" => {
            let mut causes: Vec<FieldError> =
                nonnegative(rolling, "partition", &format!("{path}.rollingUpdate")).into_iter().collect();
            let unavailable = &rolling["maxUnavailable"];
            if !unavailable.is_null() {
                let field = format!("{path}.rollingUpdate.maxUnavailable");
                causes.extend(positive_int_or_percent(unavailable, &field));
                if int_or_percent_value(unavailable) == 0 {
                    causes.push(FieldError::invalid(&field, go_int_or_string(unavailable), "cannot be 0"));
                }
                causes.extend(not_more_than_100_percent(unavailable, &field));
            }
            causes
        }
        _ => {
            let rendered = gojson::structure(strategy, gojson::STATEFUL_SET_UPDATE_STRATEGY).json();
            vec![FieldError::invalid(path, rendered, "must be 'RollingUpdate' or 'OnDelete'")]
        }
    }
}

/// `ValidatePositiveIntOrPercent`.
fn positive_int_or_percent(value: &Value, field: &str) -> Vec<FieldError> {
    match value {
        Value::String(text) if !is_percent(text) => {
            vec![FieldError::invalid(field, go_int_or_string(value), PERCENT_MESSAGE)]
        }
        Value::Number(n) => n.as_i64().and_then(|n| FieldError::nonnegative(field, n)).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// `IsNotMoreThan100Percent`.
fn not_more_than_100_percent(value: &Value, field: &str) -> Option<FieldError> {
    let percent = value.as_str().filter(|t| is_percent(t))?;
    let number: i64 = percent.trim_end_matches('%').parse().unwrap_or(i64::MAX);
    (number > 100).then(|| FieldError::invalid(field, go_int_or_string(value), "must not be greater than 100%"))
}

/// `getIntOrPercentValue`: a percentage's number, an integer, or a string's `Atoi` (0 if none).
fn int_or_percent_value(value: &Value) -> i64 {
    match value {
        Value::String(text) if is_percent(text) => text.trim_end_matches('%').parse().unwrap_or(i64::MAX),
        Value::String(text) => text.parse().unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    }
}

/// Matches `^[0-9]+%$` (`validation.IsValidPercent`).
fn is_percent(text: &str) -> bool {
    text.strip_suffix('%').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// An `intstr.IntOrString` as a field error shows it: its JSON, the string or the number.
fn go_int_or_string(value: &Value) -> String {
    match value {
        Value::String(text) => quote(text),
        other => other.as_i64().unwrap_or(0).to_string(),
    }
}

/// The status rules of `ValidateXStatusUpdate` for the workload kinds.
pub(super) fn status_causes(resource: &ResourceType, old: &Value, new: &Value) -> Vec<FieldError> {
    let (status, old_status) = (&new["status"], &old["status"]);
    let mut causes = match (resource.group, resource.plural) {
        ("apps", "deployments") => {
            let fields = ["observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas"];
            let mut causes = nonnegative_fields(status, &fields);
            causes.extend(nonnegative_fields(status, &["unavailableReplicas", "collisionCount"]));
            causes.extend(not_above(status, "updatedReplicas", "replicas", "status.replicas"));
            causes.extend(not_above(status, "readyReplicas", "replicas", "status.replicas"));
            causes.extend(not_above(status, "availableReplicas", "replicas", "status.replicas"));
            causes.extend(not_above(status, "availableReplicas", "readyReplicas", "readyReplicas"));
            causes
        }
        ("apps", "replicasets") | ("", "replicationcontrollers") => {
            let fields =
                ["replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"];
            let mut causes = nonnegative_fields(status, &fields);
            causes.extend(not_above(status, "fullyLabeledReplicas", "replicas", "status.replicas"));
            causes.extend(not_above(status, "readyReplicas", "replicas", "status.replicas"));
            causes.extend(not_above(status, "availableReplicas", "replicas", "status.replicas"));
            causes.extend(not_above(status, "availableReplicas", "readyReplicas", "readyReplicas"));
            causes
        }
        ("apps", "statefulsets") => {
            let fields = ["replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"];
            let mut causes = nonnegative_fields(status, &fields);
            causes.extend(nonnegative_fields(status, &["observedGeneration", "collisionCount"]));
            for field in ["readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"] {
                causes.extend(not_above(status, field, "replicas", "status.replicas"));
            }
            causes.extend(not_above(status, "availableReplicas", "readyReplicas", "status.readyReplicas"));
            causes
        }
        ("apps", "daemonsets") => nonnegative_fields(
            status,
            &[
                "currentNumberScheduled",
                "numberMisscheduled",
                "desiredNumberScheduled",
                "numberReady",
                "observedGeneration",
                "updatedNumberScheduled",
                "numberAvailable",
                "numberUnavailable",
                "collisionCount",
            ],
        ),
        _ => return Vec::new(),
    };
    if resource.group == "apps"
        && resource.plural != "replicasets"
        && let Some(before) = old_status["collisionCount"].as_i64()
        && status["collisionCount"].as_i64().is_none_or(|now| now < before)
    {
        let now = status["collisionCount"].as_i64().unwrap_or(0);
        causes.push(FieldError::invalid("status.collisionCount", now.to_string(), "cannot be decremented"));
    }
    causes
}

fn nonnegative_fields(status: &Value, fields: &[&str]) -> Vec<FieldError> {
    fields.iter().filter_map(|field| nonnegative(status, field, "status")).collect()
}

/// `status.<field>` may not exceed `status.<limit>` (`shown`: the limit as the message names it).
fn not_above(status: &Value, field: &str, limit: &str, shown: &str) -> Option<FieldError> {
    let value = int(status, field);
    (value > int(status, limit)).then(|| {
        FieldError::invalid(&format!("status.{field}"), value.to_string(), &format!("cannot be greater than {shown}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment_with(spec: Value) -> Value {
        let mut object = json!({"spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Always",
                "dnsPolicy": "ClusterFirst", "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always"}]}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}});
        for (k, v) in spec.as_object().unwrap() {
            object["spec"][k] = v.clone();
        }
        object
    }

    fn lines(causes: &[FieldError]) -> Vec<String> {
        causes.iter().map(|c| format!("{}: {}", c.field, c.body())).collect()
    }

    #[test]
    fn a_valid_deployment_passes() {
        assert!(deployment(&deployment_with(json!({}))).is_empty());
    }

    #[test]
    fn deployment_rules() {
        let object = deployment_with(json!({"replicas": -1, "minReadySeconds": 700,
            "template": {"metadata": {"labels": {"a": "x"}}, "spec": {"restartPolicy": "Always",
                "dnsPolicy": "ClusterFirst", "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always"}]}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "150%"}}}));
        assert_eq!(
            lines(&deployment(&object)),
            [
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.metadata.labels: Invalid value: {\"a\":\"x\"}: `selector` does not match template `labels`",
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%",
                "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds",
            ]
        );
        let zero = deployment_with(
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}}),
        );
        assert_eq!(
            lines(&deployment(&zero)),
            ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0"]
        );
        let recreate = deployment_with(json!({"strategy": {"type": "Recreate", "rollingUpdate": {}}}));
        assert_eq!(
            lines(&deployment(&recreate)),
            ["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]
        );
        let no_selector = deployment_with(json!({"selector": null}));
        assert_eq!(
            lines(&deployment(&no_selector)),
            [
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: {\"a\":\"b\"}: `selector` does not match template `labels`",
            ]
        );
        let empty = deployment_with(json!({"selector": {}}));
        assert_eq!(
            lines(&deployment(&empty)),
            ["spec.selector: Invalid value: {}: empty selector is invalid for deployment"]
        );
    }

    #[test]
    fn unknown_strategies_show_the_internal_strategy_as_json() {
        // As kube-apiserver v1.36.2 answers these.
        let foo = json!({"type": "Foo", "rollingUpdate": {"maxSurge": 1}});
        assert_eq!(
            lines(&deployment_strategy(&foo)),
            [
                "spec.strategy: Unsupported value: {\"Type\":\"Foo\",\"RollingUpdate\":{\"MaxUnavailable\":0,\"MaxSurge\":1}}: supported values: \"Recreate\", \"RollingUpdate\""
            ]
        );
        assert_eq!(
            lines(&daemon_set_strategy(&json!({"type": "Foo"}))),
            [
                "spec.updateStrategy: Unsupported value: {\"Type\":\"Foo\",\"RollingUpdate\":null}: supported values: \"RollingUpdate\", \"OnDelete\""
            ]
        );
        assert_eq!(
            lines(&stateful_set_strategy(&json!({"type": "Foo"}))),
            [
                "spec.updateStrategy: Invalid value: {\"Type\":\"Foo\",\"RollingUpdate\":null}: must be 'RollingUpdate' or 'OnDelete'"
            ]
        );
        assert_eq!(
            lines(&stateful_set_strategy(&json!({"type": "OnDelete", "rollingUpdate": {"partition": 2}}))),
            [
                "spec.updateStrategy.rollingUpdate: Invalid value: {\"Partition\":2,\"MaxUnavailable\":null}: only allowed for updateStrategy 'RollingUpdate'"
            ]
        );
    }

    #[test]
    fn replication_controllers_need_a_selector_and_always_restart() {
        let rc = json!({"spec": {"replicas": 1, "selector": {},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "OnFailure",
                "dnsPolicy": "ClusterFirst", "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always"}]}}}});
        assert_eq!(
            lines(&replication_controller(&rc)),
            [
                "spec.selector: Required value",
                "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
            ]
        );
    }

    #[test]
    fn statuses_stay_consistent() {
        let rs = crate::sandbox::storage::resources::find("apps", "v1", "replicasets").unwrap();
        let old = json!({"status": {"replicas": 1}});
        let new = json!({"status": {"replicas": 1, "readyReplicas": 2, "availableReplicas": -1}});
        assert_eq!(
            lines(&status_causes(rs, &old, &new)),
            [
                "status.availableReplicas: Invalid value: -1: must be greater than or equal to 0",
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
            ]
        );
        let deployments = crate::sandbox::storage::resources::find("apps", "v1", "deployments").unwrap();
        let old = json!({"status": {"collisionCount": 2}});
        let new = json!({"status": {"collisionCount": 1}});
        assert_eq!(
            lines(&status_causes(deployments, &old, &new)),
            ["status.collisionCount: Invalid value: 1: cannot be decremented"]
        );
    }
}
