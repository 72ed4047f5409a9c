//! Job rules beyond counts and the template (`pkg/apis/batch/validation`, v1.36): indexed and
//! per-index limits, `managedBy`, the pod failure and success policies, the pod replacement
//! policy, what an update may change (`ValidateJobSpecUpdate`) and the status rules the Job
//! strategy applies (`ValidateJobUpdateStatus` with `getStatusValidationOptions`, JobManagedBy
//! GA since v1.35).

use serde_json::Value;

use super::meta::{int, nonnegative, text};
use super::{FieldError, gojson, immutable, quote, semantically_equal};
use crate::apimachinery::field::ErrorType;
use crate::apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name, regex_error};

/// `maxParallelismForIndexedJob` and `maxFailedIndexesForIndexedJob`.
const MAX_INDEXED: i64 = 100_000;
/// `completionsSoftLimit`, with the limits that apply above it with a per-index backoff limit.
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_ON_EXIT_CODES_VALUES: usize = 255;
const MAX_ON_POD_CONDITIONS_PATTERNS: usize = 20;
const MAX_MANAGED_BY_LENGTH: usize = 63;
const MAX_SUCCEEDED_INDEXES_LENGTH: usize = 64 * 1024;
const MAX_SUCCESS_POLICY_RULES: usize = 20;
/// `sets.List(supportedPodFailurePolicyActions)` and the other sorted sets.
const ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
const OPERATORS: &[&str] = &["In", "NotIn"];
const CONDITION_STATUSES: &[&str] = &["False", "True", "Unknown"];
const REPLACEMENT_POLICIES: &[&str] = &["Failed", "TerminatingOrFailed"];
/// `httpPathFmt`.
const HTTP_PATH_FMT: &str = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+";

/// `field.Invalid(path, field.OmitValueType{}, detail)`.
fn invalid_omitted(field: &str, detail: &str) -> FieldError {
    FieldError { error_type: ErrorType::Invalid, field: field.to_string(), value: None, detail: detail.to_string() }
}

/// `field.TooMany(path, actual, max)`.
fn too_many(field: &str, actual: usize, max: usize) -> FieldError {
    let detail = format!("must have at most {max} {}", if max == 1 { "item" } else { "items" });
    FieldError { error_type: ErrorType::TooMany, field: field.to_string(), value: Some(actual.to_string()), detail }
}

fn is_indexed(spec: &Value) -> bool {
    spec["completionMode"] == "Indexed"
}

/// `validateJobSpec` from `maxFailedIndexes`' requirement to the pod replacement policy (the
/// non-negative counts come before, the template after).
pub(super) fn spec_rules(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let at = |field: &str| format!("{path}.{field}");
    if !spec["maxFailedIndexes"].is_null() && spec["backoffLimitPerIndex"].is_null() {
        causes.push(FieldError::required(&at("backoffLimitPerIndex"), "when maxFailedIndexes is specified"));
    }
    if let Some(managed_by) = spec["managedBy"].as_str() {
        causes.extend(domain_prefixed_path(&at("managedBy"), managed_by));
        if managed_by.len() > MAX_MANAGED_BY_LENGTH {
            causes.push(FieldError::too_long(&at("managedBy"), MAX_MANAGED_BY_LENGTH));
        }
    }
    let completions = spec["completions"].as_i64();
    let parallelism = spec["parallelism"].as_i64();
    let max_failed = spec["maxFailedIndexes"].as_i64();
    let per_index = spec["backoffLimitPerIndex"].as_i64();
    match spec["completionMode"].as_str() {
        None | Some("NonIndexed") => {}
        Some("Indexed") => {
            let mode = "when completion mode is Indexed";
            if completions.is_none() {
                causes.push(FieldError::required(&at("completions"), mode));
            }
            if let Some(p) = parallelism.filter(|p| *p > MAX_INDEXED) {
                let detail = format!("must be less than or equal to {MAX_INDEXED} {mode}");
                causes.push(FieldError::invalid(&at("parallelism"), p.to_string(), &detail));
            }
            if let (Some(c), Some(m)) = (completions, max_failed)
                && m > c
            {
                causes.push(FieldError::invalid(
                    &at("maxFailedIndexes"),
                    m.to_string(),
                    "must be less than or equal to completions",
                ));
            }
            if let Some(m) = max_failed.filter(|m| *m > MAX_INDEXED) {
                let detail = format!("must be less than or equal to {MAX_INDEXED}");
                causes.push(FieldError::invalid(&at("maxFailedIndexes"), m.to_string(), &detail));
            }
            if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index.is_some() {
                let high = format!(
                    "when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                );
                if max_failed.is_none() {
                    let detail = format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}");
                    causes.push(FieldError::required(&at("maxFailedIndexes"), &detail));
                }
                if let Some(p) = parallelism.filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS) {
                    let detail =
                        format!("must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} {high}");
                    causes.push(FieldError::invalid(&at("parallelism"), p.to_string(), &detail));
                }
                if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS) {
                    let detail =
                        format!("must be less than or equal to {MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} {high}");
                    causes.push(FieldError::invalid(&at("maxFailedIndexes"), m.to_string(), &detail));
                }
            }
        }
        Some(other) => {
            causes.push(FieldError::not_supported(&at("completionMode"), other, &["NonIndexed", "Indexed"]));
        }
    }
    if matches!(spec["completionMode"].as_str(), None | Some("NonIndexed")) {
        let detail = "requires indexed completion mode";
        if let Some(b) = per_index {
            causes.push(FieldError::invalid(&at("backoffLimitPerIndex"), b.to_string(), detail));
        }
        if let Some(m) = max_failed {
            causes.push(FieldError::invalid(&at("maxFailedIndexes"), m.to_string(), detail));
        }
    }
    if !spec["podFailurePolicy"].is_null() {
        causes.extend(pod_failure_policy(spec, &at("podFailurePolicy")));
    }
    if !spec["successPolicy"].is_null() {
        if is_indexed(spec) {
            causes.extend(success_policy(spec, &at("successPolicy")));
        } else {
            let rendered = go_success_policy(&spec["successPolicy"]);
            causes.push(FieldError::invalid(&at("successPolicy"), rendered, "requires indexed completion mode"));
        }
    }
    if let Some(policy) = spec["podReplacementPolicy"].as_str() {
        let field = at("podReplacementPolicy");
        if !spec["podFailurePolicy"].is_null() {
            if policy != "Failed" {
                causes.push(FieldError::not_supported(&field, policy, &["Failed"]));
            }
        } else if !REPLACEMENT_POLICIES.contains(&policy) {
            causes.push(FieldError::not_supported(&field, policy, REPLACEMENT_POLICIES));
        }
    }
    causes
}

/// `IsDomainPrefixedPath`.
fn domain_prefixed_path(field: &str, value: &str) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let Some((host, path)) = value.split_once('/').filter(|(h, p)| !h.is_empty() && !p.is_empty()) else {
        return vec![FieldError::invalid_str(field, value, "must be a domain-prefixed path (such as \"acme.io/foo\")")];
    };
    let mut causes: Vec<FieldError> =
        is_dns1123_subdomain(host).iter().map(|e| FieldError::invalid_str(field, host, e)).collect();
    let path_ok = path.chars().all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c));
    if !path_ok {
        causes.push(FieldError::invalid_str(field, path, &regex_error("Invalid path", HTTP_PATH_FMT, &[])));
    }
    causes
}

/// `validatePodFailurePolicy`.
fn pod_failure_policy(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let rules_path = format!("{path}.rules");
    let rules = spec["podFailurePolicy"]["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
    if rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        causes.push(too_many(&rules_path, rules.len(), MAX_POD_FAILURE_POLICY_RULES));
    }
    let template = &spec["template"]["spec"];
    let names: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| template[*list].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    for (i, rule) in rules.iter().enumerate() {
        let rule_path = format!("{rules_path}[{i}]");
        let action_path = format!("{rule_path}.action");
        match text(rule, "action") {
            "" => {
                causes.push(FieldError::required(&action_path, &format!("valid values: {}", go_quoted_list(ACTIONS))))
            }
            "FailIndex" if spec["backoffLimitPerIndex"].is_null() => {
                let detail = "requires the backoffLimitPerIndex to be set";
                causes.push(FieldError::invalid_str(&action_path, "FailIndex", detail));
            }
            "FailIndex" => {}
            action if !ACTIONS.contains(&action) => {
                causes.push(FieldError::not_supported(&action_path, action, ACTIONS))
            }
            _ => {}
        }
        let on_exit_codes = &rule["onExitCodes"];
        let conditions = rule["onPodConditions"].as_array().map(Vec::as_slice).unwrap_or_default();
        if !on_exit_codes.is_null() {
            causes.extend(on_exit_codes_rule(on_exit_codes, &format!("{rule_path}.onExitCodes"), &names));
        }
        if !conditions.is_empty() {
            causes.extend(on_pod_conditions(conditions, &format!("{rule_path}.onPodConditions")));
        }
        if !on_exit_codes.is_null() && !conditions.is_empty() {
            let detail = "specifying both OnExitCodes and OnPodConditions is not supported";
            causes.push(invalid_omitted(&rule_path, detail));
        }
        if on_exit_codes.is_null() && conditions.is_empty() {
            causes.push(invalid_omitted(&rule_path, "specifying one of OnExitCodes and OnPodConditions is required"));
        }
    }
    causes
}

/// `validatePodFailurePolicyRuleOnPodConditions`.
fn on_pod_conditions(patterns: &[Value], path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if patterns.len() > MAX_ON_POD_CONDITIONS_PATTERNS {
        causes.push(too_many(path, patterns.len(), MAX_ON_POD_CONDITIONS_PATTERNS));
    }
    for (j, pattern) in patterns.iter().enumerate() {
        let type_path = format!("{path}[{j}].type");
        let kind = text(pattern, "type");
        causes.extend(is_qualified_name(kind).iter().map(|e| FieldError::invalid_str(&type_path, kind, e)));
        let status_path = format!("{path}[{j}].status");
        match text(pattern, "status") {
            "" => causes.push(FieldError::required(
                &status_path,
                &format!("valid values: {}", go_quoted_list(CONDITION_STATUSES)),
            )),
            status if !CONDITION_STATUSES.contains(&status) => {
                causes.push(FieldError::not_supported(&status_path, status, CONDITION_STATUSES))
            }
            _ => {}
        }
    }
    causes
}

/// `validatePodFailurePolicyRuleOnExitCodes`.
fn on_exit_codes_rule(requirement: &Value, path: &str, container_names: &[&str]) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let operator_path = format!("{path}.operator");
    let operator = text(requirement, "operator");
    match operator {
        "" => {
            causes.push(FieldError::required(&operator_path, &format!("valid values: {}", go_quoted_list(OPERATORS))))
        }
        op if !OPERATORS.contains(&op) => causes.push(FieldError::not_supported(&operator_path, op, OPERATORS)),
        _ => {}
    }
    if let Some(name) = requirement["containerName"].as_str()
        && !container_names.contains(&name)
    {
        let detail = "must be one of the container or initContainer names in the pod template";
        causes.push(FieldError::invalid_str(&format!("{path}.containerName"), name, detail));
    }
    let values_path = format!("{path}.values");
    let values: Vec<i64> = requirement["values"].as_array().into_iter().flatten().filter_map(Value::as_i64).collect();
    let rendered = go_int32_slice(&requirement["values"]);
    if values.is_empty() {
        causes.push(FieldError::invalid(&values_path, rendered.clone(), "at least one value is required"));
    } else if values.len() > MAX_ON_EXIT_CODES_VALUES {
        causes.push(too_many(&values_path, values.len(), MAX_ON_EXIT_CODES_VALUES));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (j, value) in values.iter().enumerate() {
        let value_path = format!("{values_path}[{j}]");
        if operator == "In" && *value == 0 {
            causes.push(FieldError::invalid(&value_path, "0".into(), "must not be 0 for the In operator"));
        }
        if !seen.insert(*value) {
            causes.push(FieldError::duplicate(&value_path, value.to_string()));
        }
    }
    if values.windows(2).any(|w| w[0] > w[1]) {
        causes.push(FieldError::invalid(&values_path, rendered, "must be ordered"));
    }
    causes
}

/// `validateSuccessPolicy` (Indexed Jobs).
fn success_policy(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let rules_path = format!("{path}.rules");
    let rules = spec["successPolicy"]["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
    if rules.is_empty() {
        let detail = "at least one rules must be specified when the successPolicy is specified";
        causes.push(FieldError::required(&rules_path, detail));
    }
    if rules.len() > MAX_SUCCESS_POLICY_RULES {
        causes.push(too_many(&rules_path, rules.len(), MAX_SUCCESS_POLICY_RULES));
    }
    let completions = int(spec, "completions");
    for (i, rule) in rules.iter().enumerate() {
        let rule_path = format!("{rules_path}[{i}]");
        let (indexes, count) = (rule["succeededIndexes"].as_str(), rule["succeededCount"].as_i64());
        if indexes.is_none() && count.is_none() {
            let detail = "at least one of succeededCount or succeededIndexes must be specified";
            causes.push(FieldError::required(&rule_path, detail));
        }
        let mut total = 0;
        if let Some(indexes) = indexes {
            let field = format!("{rule_path}.succeededIndexes");
            if indexes.len() > MAX_SUCCEEDED_INDEXES_LENGTH {
                causes.push(FieldError::too_long(&field, MAX_SUCCEEDED_INDEXES_LENGTH));
            }
            match indexes_format(indexes, completions) {
                Ok(n) => total = n,
                Err(e) => causes.push(FieldError::invalid_str(
                    &field,
                    indexes,
                    &format!("error parsing succeededIndexes: {e}"),
                )),
            }
        }
        if let Some(count) = count {
            let field = format!("{rule_path}.succeededCount");
            causes.extend(FieldError::nonnegative(&field, count));
            if count > completions {
                let detail =
                    format!("must be less than or equal to {completions} (the number of specified completions)");
                causes.push(FieldError::invalid(&field, count.to_string(), &detail));
            }
            if indexes.is_some() && count > total {
                let detail = format!(
                    "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
                );
                causes.push(FieldError::invalid(&field, count.to_string(), &detail));
            }
        }
    }
    causes
}

/// Why a list of indexes (`completedIndexes`, `failedIndexes`, a success policy's
/// `succeededIndexes`) does not parse, in `validateIndexesFormat`'s words.
#[derive(Debug, thiserror::Error)]
pub(super) enum IndexesError {
    /// An interval not after the previous one, or `x-y` with `x >= y`.
    #[error("non-increasing order, previous: {previous}, current: {current}")]
    NonIncreasing {
        /// The previous interval's end, or `x`.
        previous: i64,
        /// The interval's start, or `y`.
        current: i64,
    },
    /// `a-b-c`.
    #[error(
        "the fragment {} violates the requirement that an index interval can have at most two parts separated by '-'",
        quote(.0)
    )]
    TooManyParts(String),
    /// A limit that is not an integer.
    #[error("cannot convert string to integer for index: {}", quote(.0))]
    NotAnInteger(String),
    /// A limit not below `completions`.
    #[error("too large index: {}", quote(.0))]
    TooLarge(String),
}

/// `validateIndexesFormat`: `1,3-5,7`, increasing, each below `completions`; the number of
/// indexes.
pub(super) fn indexes_format(indexes: &str, completions: i64) -> Result<i64, IndexesError> {
    if indexes.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in indexes.split(',') {
        let (x, y) = index_interval(interval, completions)?;
        if let Some(last) = last
            && last >= x
        {
            return Err(IndexesError::NonIncreasing { previous: last, current: x });
        }
        total += y - x + 1;
        last = Some(y);
    }
    Ok(total)
}

/// `parseIndexInterval`.
fn index_interval(interval: &str, completions: i64) -> Result<(i64, i64), IndexesError> {
    let limits: Vec<&str> = interval.split('-').collect();
    if limits.len() > 2 {
        return Err(IndexesError::TooManyParts(interval.to_string()));
    }
    let parse = |text: &str| go_atoi(text).ok_or_else(|| IndexesError::NotAnInteger(text.to_string()));
    let x = parse(limits[0])?;
    if x >= completions {
        return Err(IndexesError::TooLarge(limits[0].to_string()));
    }
    if limits.len() == 1 {
        return Ok((x, x));
    }
    let y = parse(limits[1])?;
    if y >= completions {
        return Err(IndexesError::TooLarge(limits[1].to_string()));
    }
    if x >= y {
        return Err(IndexesError::NonIncreasing { previous: x, current: y });
    }
    Ok((x, y))
}

/// Go's `strconv.Atoi` (an optional sign, then decimal digits).
fn go_atoi(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `fmt.Sprintf("%q", []string{…})`: `["a" "b"]`.
fn go_quoted_list(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| quote(v)).collect();
    format!("[{}]", quoted.join(" "))
}

/// A `[]int32` as a field error shows it (JSON; `null` when nil).
fn go_int32_slice(values: &Value) -> String {
    gojson::untyped(values).json()
}

/// A `batch.SuccessPolicy` as a field error shows it.
fn go_success_policy(policy: &Value) -> String {
    gojson::structure(policy, gojson::SUCCESS_POLICY).json()
}

/// The `ValidateJob` check that an Indexed Job's last pod hostname is a DNS label.
pub(super) fn indexed_hostname(object: &Value) -> Option<FieldError> {
    let spec = &object["spec"];
    let completions = spec["completions"].as_i64().filter(|c| *c > 0 && is_indexed(spec))?;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let hostname = format!("{name}-{}", completions - 1);
    if is_dns1123_label(&hostname).is_empty() {
        return None;
    }
    let detail = format!("will not able to create pod with invalid DNS label: {hostname}");
    Some(FieldError::invalid_str("metadata.name", name, &detail))
}

/// `ValidateJobSpecUpdate` after its `ValidateJobSpec`: completions (Indexed Jobs may scale
/// completions with parallelism), the selector, the template (a suspended Job that never
/// started may change its scheduling directives), and the fields fixed at creation.
pub(super) fn spec_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (before, after) = (&old["spec"], &new["spec"]);
    let mut causes = Vec::new();
    let number = |v: &Value| v.as_i64().map_or_else(|| "null".to_string(), |n| n.to_string());
    if !is_indexed(after) {
        if !semantically_equal(&before["completions"], &after["completions"]) {
            causes.push(immutable("spec.completions", number(&after["completions"])));
        }
    } else if let Some(completions) = after["completions"].as_i64()
        && before["completions"].as_i64() != Some(completions)
        && after["parallelism"].as_i64() != Some(completions)
    {
        let detail = "can only be modified in tandem with spec.parallelism";
        causes.push(FieldError::invalid("spec.completions", completions.to_string(), detail));
    }
    if !semantically_equal(&before["selector"], &after["selector"]) {
        causes.push(immutable("spec.selector", super::label_selector_value(&after["selector"])));
    }
    causes.extend(template_update(old, new));
    let string = |v: &Value| v.as_str().map_or_else(|| "null".into(), quote);
    if !semantically_equal(&before["completionMode"], &after["completionMode"]) {
        causes.push(immutable("spec.completionMode", string(&after["completionMode"])));
    }
    if !semantically_equal(&before["podFailurePolicy"], &after["podFailurePolicy"]) {
        let rendered = match &after["podFailurePolicy"] {
            Value::Null => "null".to_string(),
            policy => gojson::structure(policy, gojson::POD_FAILURE_POLICY).json(),
        };
        causes.push(immutable("spec.podFailurePolicy", rendered));
    }
    if before["backoffLimitPerIndex"] != after["backoffLimitPerIndex"] {
        causes.push(immutable("spec.backoffLimitPerIndex", number(&after["backoffLimitPerIndex"])));
    }
    if before["managedBy"] != after["managedBy"] {
        causes.push(immutable("spec.managedBy", string(&after["managedBy"])));
    }
    if !semantically_equal(&before["successPolicy"], &after["successPolicy"]) {
        let rendered =
            if after["successPolicy"].is_null() { "null".into() } else { go_success_policy(&after["successPolicy"]) };
        causes.push(immutable("spec.successPolicy", rendered));
    }
    causes
}

/// `validatePodTemplateUpdate` with `AllowMutableSchedulingDirectives`: the old template with
/// the new one's node affinity, node selector, tolerations, labels, annotations and scheduling
/// gates.
/// `validatePodTemplateUpdate` with MutableSchedulingDirectivesForSuspendedJobs and
/// MutablePodResourcesForSuspendedJobs (Beta, on in v1.36): a Job suspended with no active
/// pods, which never started or is marked Suspended (`shouldAllowMutablePodTemplate`), may
/// change its scheduling directives and its containers' resources; any other template change
/// is refused, on `spec.template.spec` for such a Job. The internal pod spec or template the
/// message shows is elided.
fn template_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (before, after) = (&old["spec"], &new["spec"]);
    let suspended = before["suspend"].as_bool().unwrap_or(false);
    let mutable = suspended
        && (old["status"]["startTime"].is_null() || condition_true(old, "Suspended"))
        && old["status"]["active"].as_i64().unwrap_or(0) == 0;
    let old_template = if mutable {
        scheduling_directives_from(&before["template"], &after["template"])
    } else {
        before["template"].clone()
    };
    if !mutable {
        if semantically_equal(&old_template, &after["template"]) {
            return Vec::new();
        }
        return vec![immutable("spec.template", "core.PodTemplateSpec{...}".into())];
    }
    // `validatePodResourceUpdatesOnly`: the containers' resources (same name, same place) are
    // taken from the new spec; the template's metadata is not compared.
    let mut old_spec = old_template["spec"].clone();
    for list in ["containers", "initContainers"] {
        let new_containers = after["template"]["spec"][list].as_array();
        let Some(old_containers) = old_spec[list].as_array_mut() else { continue };
        let Some(new_containers) = new_containers.filter(|n| n.len() == old_containers.len()) else { continue };
        for (container, updated) in old_containers.iter_mut().zip(new_containers) {
            if container["name"] == updated["name"] {
                container["resources"] = updated["resources"].clone();
            }
        }
    }
    if semantically_equal(&old_spec, &after["template"]["spec"]) {
        return Vec::new();
    }
    vec![immutable("spec.template.spec", "core.PodSpec{...}".into())]
}

fn scheduling_directives_from(old: &Value, new: &Value) -> Value {
    let mut template = old.clone();
    let (old_affinity, new_affinity) = (&old["spec"]["affinity"], &new["spec"]["affinity"]);
    match (old_affinity.is_null(), new_affinity.is_null()) {
        (false, true) => {
            let mut affinity = old_affinity.clone();
            if let Some(map) = affinity.as_object_mut() {
                map.remove("nodeAffinity");
            }
            let empty = affinity.as_object().is_none_or(|m| m.values().all(Value::is_null));
            template["spec"]["affinity"] = if empty { Value::Null } else { affinity };
        }
        (true, false) => {
            template["spec"]["affinity"] = serde_json::json!({"nodeAffinity": new_affinity["nodeAffinity"]});
        }
        (false, false) => template["spec"]["affinity"]["nodeAffinity"] = new_affinity["nodeAffinity"].clone(),
        (true, true) => {}
    }
    for field in ["nodeSelector", "tolerations", "schedulingGates"] {
        template["spec"][field] = new["spec"][field].clone();
    }
    for field in ["labels", "annotations"] {
        template["metadata"][field] = new["metadata"][field].clone();
    }
    template
}

fn condition_true(job: &Value, kind: &str) -> bool {
    job["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == kind && c["status"] == "True")
}

fn finished(job: &Value) -> bool {
    condition_true(job, "Complete") || condition_true(job, "Failed")
}

/// A `*metav1.Time` as a field error shows it: its JSON, `"2030-01-01T00:00:00Z"` (`null`
/// when nil).
fn go_time(value: &Value) -> String {
    match value.as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
        Some(time) => quote(&time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        None => "null".into(),
    }
}

fn timestamp(value: &Value) -> Option<jiff::Timestamp> {
    value.as_str().and_then(|t| t.parse().ok())
}

/// A `*batch.UncountedTerminatedPods` as a field error shows it.
fn go_uncounted(value: &Value) -> String {
    gojson::structure(value, gojson::UNCOUNTED_TERMINATED_PODS).json()
}

/// `ValidateJobStatusUpdate` with the options `getStatusValidationOptions` gives when
/// JobManagedBy is GA (v1.35): most rules apply only when the fields they look at change.
pub(super) fn status_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (status, old_status, spec) = (&new["status"], &old["status"], &new["spec"]);
    let changed = |field: &str| status[field] != old_status[field];
    let flipped = |kind: &str| condition_true(old, kind) != condition_true(new, kind);
    let finished_changed = finished(old) != finished(new);
    let (complete_changed, failed_changed) = (flipped("Complete"), flipped("Failed"));
    let (failure_target_changed, criteria_changed) = (flipped("FailureTarget"), flipped("SuccessCriteriaMet"));
    let completed_indexes_changed = text(status, "completedIndexes") != text(old_status, "completedIndexes");
    let failed_indexes_changed = changed("failedIndexes");
    let active_changed = int(status, "active") != int(old_status, "active");
    let (start_changed, completion_changed) = (changed("startTime"), changed("completionTime"));
    let uncounted_changed =
        !semantically_equal(&status["uncountedTerminatedPods"], &old_status["uncountedTerminatedPods"]);
    let suspended_with_zero = spec["suspend"] == true && spec["completions"] == 0;
    let indexed = is_indexed(spec);
    let complete = condition_true(new, "Complete");
    let failed = condition_true(new, "Failed");
    let failure_target = condition_true(new, "FailureTarget");
    let criteria_met = condition_true(new, "SuccessCriteriaMet");
    let is_finished = finished(new);

    let mut causes = Vec::new();
    // validateJobStatus
    for field in ["active", "succeeded", "failed", "ready", "terminating"] {
        causes.extend(nonnegative(status, field, "status"));
    }
    let uncounted = &status["uncountedTerminatedPods"];
    let mut seen = std::collections::BTreeSet::new();
    for list in ["succeeded", "failed"] {
        for (i, uid) in uncounted[list].as_array().into_iter().flatten().enumerate() {
            let field = format!("status.uncountedTerminatedPods.{list}[{i}]");
            let uid = uid.as_str().unwrap_or_default();
            if uid.is_empty() {
                causes.push(FieldError::invalid_str(&field, uid, "must not be empty"));
            } else if !seen.insert(uid) {
                causes.push(FieldError::duplicate(&field, quote(uid)));
            }
        }
    }
    let conditions = "status.conditions";
    if (complete_changed || failed_changed) && complete && failed {
        causes.push(invalid_omitted(conditions, "cannot set Complete=True and Failed=true conditions"));
    }
    if (complete_changed || failure_target_changed) && complete && failure_target {
        causes.push(invalid_omitted(conditions, "cannot set Complete=True and FailureTarget=true conditions"));
    }
    let completion_time = &status["completionTime"];
    if (complete_changed || completion_changed) && !completion_time.is_null() && !complete {
        let detail = "cannot set completionTime when there is no Complete=True condition";
        causes.push(FieldError::invalid("status.completionTime", go_time(completion_time), detail));
    }
    if (complete_changed || completion_changed) && completion_time.is_null() && complete {
        causes.push(FieldError::required("status.completionTime", "completionTime is required for Complete jobs"));
    }
    if (start_changed || completion_changed)
        && let (Some(start), Some(end)) = (timestamp(&status["startTime"]), timestamp(completion_time))
        && end < start
    {
        let detail = "must be equal to or after `startTime`";
        causes.push(FieldError::invalid("status.completionTime", go_time(completion_time), detail));
    }
    if (failed_changed || failed_indexes_changed) && failed && !failure_target {
        let detail = "cannot set Failed=True condition without the FailureTarget=true condition";
        causes.push(invalid_omitted(conditions, detail));
    }
    if (complete_changed || criteria_changed) && complete && !criteria_met {
        let detail = "cannot set Complete=True condition without the SuccessCriteriaMet=true condition";
        causes.push(invalid_omitted(conditions, detail));
    }
    if (finished_changed || active_changed) && int(status, "active") > 0 && is_finished {
        let active = int(status, "active").to_string();
        causes.push(FieldError::invalid("status.active", active, "active>0 is invalid for finished job"));
    }
    if (finished_changed || start_changed) && !suspended_with_zero && status["startTime"].is_null() && is_finished {
        causes.push(FieldError::required("status.startTime", "startTime is required for finished job"));
    }
    let uncounted_count =
        ["succeeded", "failed"].iter().map(|l| uncounted[*l].as_array().map_or(0, Vec::len)).sum::<usize>();
    if (finished_changed || uncounted_changed) && is_finished && uncounted_count > 0 {
        let detail = "must be empty for finished job";
        causes.push(FieldError::invalid("status.uncountedTerminatedPods", go_uncounted(uncounted), detail));
    }
    let completions = spec["completions"].as_i64();
    let completed_indexes = text(status, "completedIndexes");
    if completed_indexes_changed
        && let Some(completions) = completions
        && let Err(e) = indexes_format(completed_indexes, completions)
    {
        let detail = format!("error parsing completedIndexes: {e}");
        causes.push(FieldError::invalid_str("status.completedIndexes", completed_indexes, &detail));
    }
    let failed_indexes = status["failedIndexes"].as_str();
    if failed_indexes_changed
        && let (Some(completions), Some(failed_indexes)) = (completions, failed_indexes)
        && !spec["backoffLimitPerIndex"].is_null()
        && let Err(e) = indexes_format(failed_indexes, completions)
    {
        let detail = format!("error parsing failedIndexes: {e}");
        causes.push(FieldError::invalid_str("status.failedIndexes", failed_indexes, &detail));
    }
    if completed_indexes_changed && !completed_indexes.is_empty() && !indexed {
        let detail = "cannot set non-empty completedIndexes when non-indexed completion mode";
        causes.push(FieldError::invalid_str("status.completedIndexes", completed_indexes, detail));
    }
    if failed_indexes_changed
        && spec["backoffLimitPerIndex"].is_null()
        && let Some(failed_indexes) = failed_indexes
    {
        let detail = "cannot set non-null failedIndexes when backoffLimitPerIndex is null";
        causes.push(FieldError::invalid_str("status.failedIndexes", failed_indexes, detail));
    }
    if (failed_indexes_changed || completed_indexes_changed)
        && let (Some(completions), Some(failed_indexes)) = (completions, failed_indexes)
        && let Some(at) = overlap(completed_indexes, failed_indexes, completions)
    {
        let detail = format!("failedIndexes and completedIndexes overlap at index: {at}");
        causes.push(FieldError::invalid_str("status.failedIndexes", failed_indexes, &detail));
    }
    if (finished_changed || changed("terminating")) && int(status, "terminating") > 0 && is_finished {
        let terminating = int(status, "terminating").to_string();
        causes.push(FieldError::invalid(
            "status.terminating",
            terminating,
            "terminating>0 is invalid for finished job",
        ));
    }
    if (changed("ready") || active_changed)
        && let Some(ready) = status["ready"].as_i64()
        && ready > int(status, "active")
    {
        causes.push(FieldError::invalid("status.ready", ready.to_string(), "cannot set more ready pods than active"));
    }
    if criteria_met && failed {
        causes.push(invalid_omitted(conditions, "cannot set SuccessCriteriaMet=True and Failed=true conditions"));
    }
    if criteria_met && failure_target {
        let detail = "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions";
        causes.push(invalid_omitted(conditions, detail));
    }
    if !spec["successPolicy"].is_null() && !criteria_met && complete {
        let detail = "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True";
        causes.push(invalid_omitted(conditions, detail));
    }
    // ValidateJobStatusUpdate
    for kind in ["Failed", "Complete", "FailureTarget"] {
        if condition_true(old, kind) && !condition_true(new, kind) {
            causes.push(invalid_omitted(conditions, &format!("cannot disable the terminal {kind}=True condition")));
        }
    }
    if int(status, "failed") < int(old_status, "failed") {
        let detail = "cannot decrease the failed counter";
        causes.push(FieldError::invalid("status.failed", int(status, "failed").to_string(), detail));
    }
    let reject_decreasing_succeeded = !indexed || spec["completions"] != spec["parallelism"];
    if reject_decreasing_succeeded && int(status, "succeeded") < int(old_status, "succeeded") {
        let detail = "cannot decrease the succeeded counter";
        causes.push(FieldError::invalid("status.succeeded", int(status, "succeeded").to_string(), detail));
    }
    if !completion_time.is_null() && !old_status["completionTime"].is_null() && completion_changed {
        let detail = "field is immutable";
        causes.push(FieldError::invalid("status.completionTime", go_time(completion_time), detail));
    }
    if start_changed && !old_status["startTime"].is_null() && spec["suspend"] != true {
        let detail = "field is immutable for unsuspended job once set";
        causes.push(FieldError::invalid("status.startTime", go_time(&status["startTime"]), detail));
    }
    if condition_true(old, "SuccessCriteriaMet") && !criteria_met {
        causes.push(invalid_omitted(conditions, "cannot disable the SuccessCriteriaMet=True condition"));
    }
    if condition_true(old, "Complete") && !condition_true(old, "SuccessCriteriaMet") && criteria_met {
        let detail = "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions";
        causes.push(invalid_omitted(conditions, detail));
    }
    causes
}

/// `validateFailedIndexesNotOverlapCompleted`: the first index in both lists (unparsable
/// intervals skipped).
fn overlap(completed: &str, failed: &str, completions: i64) -> Option<i64> {
    if completed.is_empty() || failed.is_empty() {
        return None;
    }
    let parse = |list: &str| -> Vec<(i64, i64)> {
        list.split(',').filter_map(|interval| index_interval(interval, completions).ok()).collect()
    };
    let (completed, failed) = (parse(completed), parse(failed));
    let (mut c, mut f) = (0, 0);
    while c < completed.len() && f < failed.len() {
        let ((cx, cy), (fx, fy)) = (completed[c], failed[f]);
        if cx <= fy && fx <= cy {
            return Some(cx.max(fx));
        }
        if cx <= fx {
            c += 1;
        } else {
            f += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The parser, its error as the text of the field error's detail.
    fn indexes_format(indexes: &str, completions: i64) -> Result<i64, String> {
        super::indexes_format(indexes, completions).map_err(|e| e.to_string())
    }

    fn lines(causes: &[FieldError]) -> Vec<String> {
        causes.iter().map(|c| c.to_string()).collect()
    }

    fn indexed_spec(extra: Value) -> Value {
        let mut spec = json!({"completions": 4, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 6,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "i"}]}}});
        for (k, v) in extra.as_object().expect("an object") {
            spec[k] = v.clone();
        }
        spec
    }

    #[test]
    fn index_lists_parse_as_upstream() {
        assert_eq!(indexes_format("", 3), Ok(0));
        assert_eq!(indexes_format("0,2-4,6", 7), Ok(5));
        assert_eq!(indexes_format("1-1", 3), Err("non-increasing order, previous: 1, current: 1".into()));
        assert_eq!(indexes_format("2,1", 3), Err("non-increasing order, previous: 2, current: 1".into()));
        assert_eq!(indexes_format("3", 3), Err("too large index: \"3\"".into()));
        assert_eq!(indexes_format("a", 3), Err("cannot convert string to integer for index: \"a\"".into()));
        assert!(indexes_format("1-2-3", 9).is_err_and(|e| e.contains("at most two parts")));
        assert_eq!(overlap("0-2,5", "3,5", 6), Some(5));
        assert_eq!(overlap("0-2", "3-4", 6), None);
    }

    #[test]
    fn pod_failure_policy_rules() {
        let spec = indexed_spec(json!({"podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3, 0, 3], "containerName": "x"}},
            {"action": "Restart", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}]},
            {"action": "Ignore"},
        ]}, "podReplacementPolicy": "TerminatingOrFailed"}));
        assert_eq!(
            lines(&spec_rules(&spec, "spec")),
            [
                "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set",
                "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"x\": must be one of the container or initContainer names in the pod template",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [3,0,3]: must be ordered",
                "spec.podFailurePolicy.rules[1].action: Unsupported value: \"Restart\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "spec.podFailurePolicy.rules[2]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
            ]
        );
    }

    #[test]
    fn success_policy_and_per_index_limits() {
        let spec =
            indexed_spec(json!({"successPolicy": {"rules": [{"succeededIndexes": "0-5", "succeededCount": 5}, {}]},
            "maxFailedIndexes": 5, "managedBy": "kubernetes.io/job-controller"}));
        assert_eq!(
            lines(&spec_rules(&spec, "spec")),
            [
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                "spec.maxFailedIndexes: Invalid value: 5: must be less than or equal to completions",
                "spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"0-5\": error parsing succeededIndexes: too large index: \"5\"",
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 5: must be less than or equal to 4 (the number of specified completions)",
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 5: must be less than or equal to 0 (the number of indexes in the specified succeededIndexes field)",
                "spec.successPolicy.rules[1]: Required value: at least one of succeededCount or succeededIndexes must be specified",
            ]
        );
        let non_indexed = json!({"completionMode": "NonIndexed", "backoffLimitPerIndex": 1, "managedBy": "nodomain",
            "successPolicy": {"rules": []}});
        assert_eq!(
            lines(&spec_rules(&non_indexed, "spec")),
            [
                "spec.managedBy: Invalid value: \"nodomain\": must be a domain-prefixed path (such as \"acme.io/foo\")",
                "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
                "spec.successPolicy: Invalid value: {\"Rules\":[]}: requires indexed completion mode",
            ]
        );
    }

    #[test]
    fn status_updates_follow_the_job_strategy() {
        let old = json!({"spec": {"completions": 1, "parallelism": 1, "completionMode": "NonIndexed"},
            "status": {"active": 1, "succeeded": 0, "startTime": "2030-01-01T00:00:00Z",
                "uncountedTerminatedPods": {"succeeded": ["a"]}}});
        let mut new = old.clone();
        new["status"] = json!({"active": 1, "succeeded": 1, "ready": 2, "startTime": "2030-01-01T00:00:00Z",
            "completionTime": "2029-01-01T00:00:00Z", "completedIndexes": "0",
            "uncountedTerminatedPods": {"succeeded": ["a", "a"]},
            "conditions": [{"type": "Complete", "status": "True"}]});
        assert_eq!(
            lines(&status_update(&old, &new)),
            [
                "status.uncountedTerminatedPods.succeeded[1]: Duplicate value: \"a\"",
                "status.completionTime: Invalid value: \"2029-01-01T00:00:00Z\": must be equal to or after `startTime`",
                "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
                "status.active: Invalid value: 1: active>0 is invalid for finished job",
                "status.uncountedTerminatedPods: Invalid value: {\"Succeeded\":[\"a\",\"a\"],\"Failed\":null}: must be empty for finished job",
                "status.completedIndexes: Invalid value: \"0\": cannot set non-empty completedIndexes when non-indexed completion mode",
                "status.ready: Invalid value: 2: cannot set more ready pods than active",
            ]
        );
        // What the job controller writes on success passes.
        let mut done = old.clone();
        done["status"] = json!({"active": 0, "succeeded": 1, "ready": 0, "terminating": 0,
            "startTime": "2030-01-01T00:00:00Z", "completionTime": "2030-01-01T00:00:10Z",
            "uncountedTerminatedPods": {},
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]});
        assert_eq!(lines(&status_update(&old, &done)), Vec::<String>::new());
        // And the terminal conditions stay.
        let mut undone = done.clone();
        undone["status"]["conditions"] = json!([]);
        undone["status"]["completionTime"] = Value::Null;
        assert_eq!(
            lines(&status_update(&done, &undone)),
            [
                "status.conditions: Invalid value: cannot disable the terminal Complete=True condition",
                "status.conditions: Invalid value: cannot disable the SuccessCriteriaMet=True condition",
            ]
        );
    }

    #[test]
    fn updates_keep_fixed_fields() {
        let old = json!({"spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "suspend": true,
            "template": {"spec": {"affinity": {"podAffinity": {"x": 1}}, "containers": []}}}, "status": {}});
        let mut new = old.clone();
        new["spec"]["completions"] = json!(3);
        new["spec"]["parallelism"] = json!(3);
        new["spec"]["template"]["spec"]["affinity"]["nodeAffinity"] = json!({"y": 1});
        new["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        assert_eq!(lines(&spec_update(&old, &new)), Vec::<String>::new());
        // A suspended Job that never started may change its containers' resources too.
        let mut resized = old.clone();
        resized["spec"]["template"]["spec"]["containers"] = json!([{"name": "c", "resources": {}}]);
        let mut bigger = resized.clone();
        bigger["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "2"}});
        assert_eq!(lines(&spec_update(&resized, &bigger)), Vec::<String>::new());
        // Not when it runs: any template change is refused on the template.
        let mut running = resized.clone();
        running["status"]["active"] = json!(1);
        assert_eq!(
            lines(&spec_update(&running, &bigger)),
            ["spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"]
        );
        new["spec"]["completions"] = json!(4);
        new["spec"]["template"]["spec"]["affinity"]["podAffinity"] = json!({"x": 2});
        new["spec"]["managedBy"] = json!("example.com/mine");
        assert_eq!(
            lines(&spec_update(&old, &new)),
            [
                "spec.completions: Invalid value: 4: can only be modified in tandem with spec.parallelism",
                "spec.template.spec: Invalid value: core.PodSpec{...}: field is immutable",
                "spec.managedBy: Invalid value: \"example.com/mine\": field is immutable",
            ]
        );
    }
}
