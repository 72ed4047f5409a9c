//! resource.k8s.io/v1, Dynamic Resource Allocation (`pkg/apis/resource/validation`, v1.36):
//! ResourceClaims and their templates, DeviceClasses and ResourceSlices, as far as the
//! resourceclaim, device-taint-eviction and resourcequota controllers rely on them: request
//! names and shapes, the immutable claim spec, the status invariants (`reservedFor` needs an
//! allocation, the allocation never changes once made), slice pools and node selection.
//!
//! Not checked: CEL selector expressions are not compiled, device attributes, capacities and
//! counters are not looked into, node selectors are taken as given.

use serde_json::Value;

use super::meta::{annotations, dns_label, labels};
use super::{FieldError, gojson, immutable, quote};
use crate::apimachinery::validation::{is_dns1123_subdomain, is_qualified_name, is_valid_label_value};

/// `AllocationResultsMaxSize`, also `DeviceRequestsMaxSize`.
const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;
/// `DeviceConstraintsMaxSize` and `DeviceConfigMaxSize`.
const DEVICE_CONSTRAINTS_MAX_SIZE: usize = 32;
const DEVICE_CONFIG_MAX_SIZE: usize = 32;
/// `DeviceSelectorsMaxSize`.
const DEVICE_SELECTORS_MAX_SIZE: usize = 32;
/// `FirstAvailableDeviceRequestMaxSize`.
const FIRST_AVAILABLE_MAX_SIZE: usize = 8;
/// `ResourceClaimReservedForMaxSize`.
const RESERVED_FOR_MAX_SIZE: usize = 256;
/// `ResourceSliceMaxDevices`, and with taints, counters or list attributes
/// (`ResourceSliceMaxDevicesWithAdvancedFeatures`).
const SLICE_MAX_DEVICES: usize = 128;
const SLICE_MAX_DEVICES_ADVANCED: usize = 64;
/// `DeviceTaintsMaxLength`.
const DEVICE_TAINTS_MAX_LENGTH: usize = 16;
/// `CELSelectorExpressionMaxLength` and `OpaqueParametersMaxLength`.
const CEL_EXPRESSION_MAX_LENGTH: usize = 10 * 1024;
const OPAQUE_PARAMETERS_MAX_LENGTH: usize = 10 * 1024;
/// `PoolNameMaxLength` (a DNS subdomain's).
const POOL_NAME_MAX_LENGTH: usize = 253;
/// The allocation modes of a request.
const ALLOCATION_MODES: &[&str] = &["All", "ExactCount"];
/// `validDeviceTaintEffects` (sorted, as `sets.List` gives them).
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "None"];
/// `validDeviceTolerationOperators`.
const TOLERATION_OPERATORS: &[&str] = &["Equal", "Exists"];
/// The one message a reference to a missing request gets.
const REQUEST_REF: &str =
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";

/// The array at `value[key]`, empty when absent.
fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key].as_array().map_or(&[], Vec::as_slice)
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_default()
}

/// `field.TooMany`, the check that short-circuits `validateSlice` and `validateSet`.
fn too_many(items: &[Value], max: usize, path: &str) -> Option<FieldError> {
    (items.len() > max).then(|| FieldError::too_many(path, items.len(), max))
}

/// `validateSet`'s uniqueness part: a `Duplicate` for each repeated key, at its index.
fn duplicates(keys: &[String], path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        if keys[..i].contains(key) {
            causes.push(FieldError::duplicate(&format!("{path}[{i}]"), quote(key)));
        }
    }
    causes
}

/// `ValidateDNS1123Subdomain`.
fn dns_subdomain(value: &str, path: &str) -> Vec<FieldError> {
    is_dns1123_subdomain(value).iter().map(|m| FieldError::invalid(path, quote(value), m)).collect()
}

/// Core's `ValidateCSIDriverName`, which driver names reuse: required, at most 63 characters,
/// a DNS subdomain once lower-cased.
fn driver_name(name: &str, path: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut causes = Vec::new();
    if name.len() > 63 {
        causes.push(FieldError::too_long(path, 63));
    }
    causes.extend(is_dns1123_subdomain(&name.to_lowercase()).iter().map(|m| FieldError::invalid_str(path, name, m)));
    causes
}

/// `validatePoolName`: required, at most 253 characters, each `/`-separated part a DNS subdomain.
fn pool_name(name: &str, path: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut causes = Vec::new();
    if name.len() > POOL_NAME_MAX_LENGTH {
        causes.push(FieldError::too_long(path, POOL_NAME_MAX_LENGTH));
    }
    for part in name.split('/') {
        causes.extend(dns_subdomain(part, path));
    }
    causes
}

/// `metav1validation.ValidateLabelName`: a qualified name.
fn label_name(name: &str, path: &str) -> Vec<FieldError> {
    is_qualified_name(name).iter().map(|m| FieldError::invalid_str(path, name, m)).collect()
}

fn label_value(value: &str, path: &str) -> Vec<FieldError> {
    is_valid_label_value(value).iter().map(|m| FieldError::invalid_str(path, value, m)).collect()
}

// --- ResourceClaim and ResourceClaimTemplate -------------------------------------------------

/// The names a claim's requests define: each request, with its subrequests' names.
struct RequestNames(Vec<(String, Vec<String>)>);

impl RequestNames {
    /// `gatherRequestNames`.
    fn of(devices: &Value) -> RequestNames {
        RequestNames(
            list(devices, "requests")
                .iter()
                .map(|r| {
                    let subs = list(r, "firstAvailable").iter().map(|s| text(s, "name").to_string()).collect();
                    (text(r, "name").to_string(), subs)
                })
                .collect(),
        )
    }

    /// `requestNames.Has`: `request` or `request/subrequest`.
    fn has(&self, reference: &str) -> bool {
        let segments: Vec<&str> = reference.split('/').collect();
        match segments.as_slice() {
            [request] => self.0.iter().any(|(name, _)| name == request),
            [request, sub] => self.0.iter().any(|(name, subs)| name == request && subs.iter().any(|s| s == sub)),
            _ => false,
        }
    }
}

/// `ValidateResourceClaim`'s spec part (`validateResourceClaimSpec`), also a template's.
pub(super) fn claim_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let devices = &spec["devices"];
    let path = format!("{path}.devices");
    let names = RequestNames::of(devices);
    let mut causes = Vec::new();
    let requests = list(devices, "requests");
    let requests_path = format!("{path}.requests");
    match too_many(requests, ALLOCATION_RESULTS_MAX_SIZE, &requests_path) {
        Some(cause) => causes.push(cause),
        None => {
            for (i, request) in requests.iter().enumerate() {
                causes.extend(device_request(request, &format!("{requests_path}[{i}]")));
            }
            let keys: Vec<String> = requests.iter().map(|r| text(r, "name").to_string()).collect();
            causes.extend(duplicates(&keys, &requests_path));
        }
    }
    let constraints = list(devices, "constraints");
    let constraints_path = format!("{path}.constraints");
    match too_many(constraints, DEVICE_CONSTRAINTS_MAX_SIZE, &constraints_path) {
        Some(cause) => causes.push(cause),
        None => {
            for (i, constraint) in constraints.iter().enumerate() {
                causes.extend(device_constraint(constraint, &format!("{constraints_path}[{i}]"), &names));
            }
        }
    }
    let config = list(devices, "config");
    let config_path = format!("{path}.config");
    match too_many(config, DEVICE_CONFIG_MAX_SIZE, &config_path) {
        Some(cause) => causes.push(cause),
        None => {
            for (i, entry) in config.iter().enumerate() {
                let entry_path = format!("{config_path}[{i}]");
                causes.extend(request_refs(entry, &entry_path, &names));
                causes.extend(device_configuration(entry, &entry_path));
            }
        }
    }
    causes
}

/// `validateDeviceRequest`: a DNS-label name and exactly one of `exactly` and `firstAvailable`.
fn device_request(request: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = dns_label(text(request, "name"), &format!("{path}.name"));
    let first_available = list(request, "firstAvailable");
    let exactly = &request["exactly"];
    match (exactly.is_object(), !first_available.is_empty()) {
        (false, false) => {
            causes.push(FieldError::required(path, "exactly one of `exactly` or `firstAvailable` is required"));
        }
        (true, true) => causes.push(FieldError::invalid(
            path,
            "null".into(),
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )),
        (false, true) => {
            let sub_path = format!("{path}.firstAvailable");
            match too_many(first_available, FIRST_AVAILABLE_MAX_SIZE, &sub_path) {
                Some(cause) => causes.push(cause),
                None => {
                    for (i, sub) in first_available.iter().enumerate() {
                        let item = format!("{sub_path}[{i}]");
                        causes.extend(dns_label(text(sub, "name"), &format!("{item}.name")));
                        causes.extend(exact_request(sub, &item));
                    }
                    let keys: Vec<String> = first_available.iter().map(|s| text(s, "name").to_string()).collect();
                    causes.extend(duplicates(&keys, &sub_path));
                }
            }
        }
        (true, false) => causes.extend(exact_request(exactly, &format!("{path}.exactly"))),
    }
    causes
}

/// `validateExactDeviceRequest` (and the same checks of a subrequest): a device class, the
/// selectors, the allocation mode and count, the tolerations.
fn exact_request(request: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let class = text(request, "deviceClassName");
    let class_path = format!("{path}.deviceClassName");
    if class.is_empty() {
        causes.push(FieldError::required(&class_path, ""));
    } else {
        causes.extend(dns_subdomain(class, &class_path));
    }
    causes.extend(selectors(list(request, "selectors"), &format!("{path}.selectors")));
    let count = request["count"].as_i64().unwrap_or(0);
    let count_path = format!("{path}.count");
    match text(request, "allocationMode") {
        "All" if count != 0 => causes.push(FieldError::invalid(
            &count_path,
            count.to_string(),
            "must not be specified when allocationMode is 'All'",
        )),
        "ExactCount" if count <= 0 => {
            causes.push(FieldError::invalid(&count_path, count.to_string(), "must be greater than zero"))
        }
        "All" | "ExactCount" => {}
        mode => causes.push(FieldError::not_supported(&format!("{path}.allocationMode"), mode, ALLOCATION_MODES)),
    }
    for (i, toleration) in list(request, "tolerations").iter().enumerate() {
        causes.extend(device_toleration(toleration, &format!("{path}.tolerations[{i}]")));
    }
    causes
}

/// `validateSelectorSlice`: each selector has a CEL expression, not too long. The expression
/// itself is not compiled here.
fn selectors(selectors: &[Value], path: &str) -> Vec<FieldError> {
    if let Some(cause) = too_many(selectors, DEVICE_SELECTORS_MAX_SIZE, path) {
        return vec![cause];
    }
    let mut causes = Vec::new();
    for (i, selector) in selectors.iter().enumerate() {
        let cel_path = format!("{path}[{i}].cel");
        if !selector["cel"].is_object() {
            causes.push(FieldError::required(&cel_path, ""));
        } else if text(&selector["cel"], "expression").len() > CEL_EXPRESSION_MAX_LENGTH {
            causes.push(FieldError::too_long(&format!("{cel_path}.expression"), CEL_EXPRESSION_MAX_LENGTH));
        }
    }
    causes
}

/// `validateDeviceToleration`.
fn device_toleration(toleration: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let key = text(toleration, "key");
    if !key.is_empty() {
        causes.extend(label_name(key, &format!("{path}.key")));
    }
    let value = text(toleration, "value");
    match text(toleration, "operator") {
        "Exists" if !value.is_empty() => {
            causes.push(FieldError::invalid_str(&format!("{path}.value"), value, "must be empty for operator `Exists`"))
        }
        "Exists" => {}
        "Equal" => causes.extend(label_value(value, &format!("{path}.value"))),
        "" => causes.push(FieldError::required(&format!("{path}.operator"), "")),
        operator => causes.push(FieldError::not_supported(&format!("{path}.operator"), operator, TOLERATION_OPERATORS)),
    }
    let effect = text(toleration, "effect");
    if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
        causes.push(FieldError::not_supported(&format!("{path}.effect"), effect, TAINT_EFFECTS));
    }
    causes
}

/// `validateDeviceConstraint` with DRAConsumableCapacity on (v1.36): the requests it names,
/// and one of `matchAttribute` and `distinctAttribute`.
fn device_constraint(constraint: &Value, path: &str, names: &RequestNames) -> Vec<FieldError> {
    let mut causes = request_refs(constraint, path, names);
    if constraint["matchAttribute"].is_null() && constraint["distinctAttribute"].is_null() {
        let detail =
            "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set";
        causes.push(FieldError::required(path, detail));
    }
    causes
}

/// The `requests` of a constraint or a configuration (`validateRequestNameRef` in a set).
fn request_refs(owner: &Value, path: &str, names: &RequestNames) -> Vec<FieldError> {
    let refs = list(owner, "requests");
    let path = format!("{path}.requests");
    if let Some(cause) = too_many(refs, ALLOCATION_RESULTS_MAX_SIZE, &path) {
        return vec![cause];
    }
    let mut causes = Vec::new();
    for (i, reference) in refs.iter().enumerate() {
        causes.extend(request_ref(reference.as_str().unwrap_or_default(), &format!("{path}[{i}]"), names));
    }
    let keys: Vec<String> = refs.iter().map(|r| r.as_str().unwrap_or_default().to_string()).collect();
    causes.extend(duplicates(&keys, &path));
    causes
}

/// `validateRequestNameRef`: `request` or `request/subrequest`, naming one the claim has.
fn request_ref(reference: &str, path: &str, names: &RequestNames) -> Vec<FieldError> {
    let segments: Vec<&str> = reference.split('/').collect();
    if segments.len() > 2 {
        return vec![FieldError::invalid_str(path, reference, REQUEST_REF)];
    }
    let mut causes: Vec<FieldError> = segments.iter().flat_map(|segment| dns_label(segment, path)).collect();
    if !names.has(reference) {
        causes.push(FieldError::invalid_str(path, reference, REQUEST_REF));
    }
    causes
}

/// `validateDeviceConfiguration`: an opaque configuration for a driver, its parameters a JSON
/// object of at most 10 KiB.
fn device_configuration(config: &Value, path: &str) -> Vec<FieldError> {
    let opaque = &config["opaque"];
    let path = format!("{path}.opaque");
    if !opaque.is_object() {
        return vec![FieldError::required(&path, "")];
    }
    let mut causes = driver_name(text(opaque, "driver"), &format!("{path}.driver"));
    let parameters_path = format!("{path}.parameters");
    match &opaque["parameters"] {
        Value::Null => causes.push(FieldError::required(&parameters_path, "")),
        Value::Object(_) if opaque["parameters"].to_string().len() > OPAQUE_PARAMETERS_MAX_LENGTH => {
            causes.push(FieldError::too_long(&parameters_path, OPAQUE_PARAMETERS_MAX_LENGTH))
        }
        Value::Object(_) => {}
        _ => causes.push(FieldError::invalid(
            &parameters_path,
            "\"<value omitted>\"".into(),
            "must be a valid JSON object",
        )),
    }
    causes
}

/// `ValidateResourceClaimUpdate`: the spec never changes.
pub(super) fn claim_update(old: &Value, new: &Value) -> Vec<FieldError> {
    if old["spec"] == new["spec"] {
        return Vec::new();
    }
    vec![immutable("spec", gojson::structure(&new["spec"], gojson::RESOURCE_CLAIM_SPEC).json())]
}

/// `ValidateResourceClaimTemplate`: the template's metadata (labels and annotations only) and
/// its claim spec.
pub(super) fn claim_template(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes = labels(&spec["metadata"]["labels"], "spec.metadata.labels");
    causes.extend(annotations(&spec["metadata"]["annotations"], "spec.metadata.annotations"));
    causes.extend(claim_spec(&spec["spec"], "spec.spec"));
    causes
}

/// `ValidateResourceClaimTemplateUpdate`: the spec never changes (and is not validated again).
pub(super) fn claim_template_update(old: &Value, new: &Value) -> Vec<FieldError> {
    if old["spec"] == new["spec"] {
        return Vec::new();
    }
    vec![immutable("spec", gojson::structure(&new["spec"], gojson::RESOURCE_CLAIM_TEMPLATE_SPEC).json())]
}

/// `ValidateResourceClaimStatusUpdate` (`validateResourceClaimStatusUpdate`): the consumers
/// each named once by uid, only while allocated and not added while the claim is being
/// deleted; an allocation, once made, never changes.
pub(super) fn claim_status_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let status = &new["status"];
    let old_status = &old["status"];
    let mut causes = Vec::new();
    let reserved = list(status, "reservedFor");
    match too_many(reserved, RESERVED_FOR_MAX_SIZE, "status.reservedFor") {
        Some(cause) => causes.push(cause),
        None => {
            for (i, consumer) in reserved.iter().enumerate() {
                for field in ["resource", "name", "uid"] {
                    if text(consumer, field).is_empty() {
                        causes.push(FieldError::required(&format!("status.reservedFor[{i}].{field}"), ""));
                    }
                }
            }
            let uids: Vec<String> = reserved.iter().map(|c| text(c, "uid").to_string()).collect();
            causes.extend(duplicates(&uids, "status.reservedFor"));
        }
    }
    let allocation = &status["allocation"];
    if !reserved.is_empty() {
        if allocation.is_null() {
            causes
                .push(FieldError::forbidden("status.reservedFor", "may not be specified when `allocated` is not set"));
        } else if !new["metadata"]["deletionTimestamp"].is_null()
            && reserved.iter().any(|c| !list(old_status, "reservedFor").contains(c))
        {
            let detail = "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set";
            causes.push(FieldError::forbidden("status.reservedFor", detail));
        }
    }
    let old_allocation = &old_status["allocation"];
    if !old_allocation.is_null() && !allocation.is_null() {
        if old_allocation != allocation {
            causes
                .push(immutable("status.allocation", gojson::structure(allocation, gojson::ALLOCATION_RESULT).json()));
        }
    } else if !allocation.is_null() {
        causes.extend(allocation_result(allocation, &RequestNames::of(&new["spec"]["devices"])));
    }
    causes
}

/// `validateAllocationResult` of a new allocation: each result names a request, a driver, a
/// pool and a device; each configuration its source.
fn allocation_result(allocation: &Value, names: &RequestNames) -> Vec<FieldError> {
    let devices = &allocation["devices"];
    let mut causes = Vec::new();
    let results = list(devices, "results");
    let path = "status.allocation.devices.results";
    match too_many(results, ALLOCATION_RESULTS_MAX_SIZE, path) {
        Some(cause) => causes.push(cause),
        None => {
            for (i, result) in results.iter().enumerate() {
                let item = format!("{path}[{i}]");
                causes.extend(request_ref(text(result, "request"), &format!("{item}.request"), names));
                causes.extend(driver_name(text(result, "driver"), &format!("{item}.driver")));
                causes.extend(pool_name(text(result, "pool"), &format!("{item}.pool")));
                causes.extend(dns_label(text(result, "device"), &format!("{item}.device")));
            }
        }
    }
    let config = list(devices, "config");
    let path = "status.allocation.devices.config";
    match too_many(config, 2 * DEVICE_CONFIG_MAX_SIZE, path) {
        Some(cause) => causes.push(cause),
        None => {
            for (i, entry) in config.iter().enumerate() {
                let item = format!("{path}[{i}]");
                match text(entry, "source") {
                    "" => causes.push(FieldError::required(&format!("{item}.source"), "")),
                    "FromClaim" | "FromClass" => {}
                    source => causes.push(FieldError::not_supported(
                        &format!("{item}.source"),
                        source,
                        &["FromClaim", "FromClass"],
                    )),
                }
                causes.extend(request_refs(entry, &item, names));
                causes.extend(device_configuration(entry, &item));
            }
        }
    }
    causes
}

// --- DeviceClass -------------------------------------------------------------------------------

/// `ValidateDeviceClass` (and its update, which checks the same): selectors, configuration,
/// an extended resource name.
pub(super) fn device_class(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes = selectors(list(spec, "selectors"), "spec.selectors");
    let config = list(spec, "config");
    match too_many(config, DEVICE_CONFIG_MAX_SIZE, "spec.config") {
        Some(cause) => causes.push(cause),
        None => {
            for (i, entry) in config.iter().enumerate() {
                causes.extend(device_configuration(entry, &format!("spec.config[{i}]")));
            }
        }
    }
    if let Some(name) = spec["extendedResourceName"].as_str()
        && !is_extended_resource_name(name)
    {
        causes.push(FieldError::invalid_str(
            "spec.extendedResourceName",
            name,
            "must be a valid extended resource name",
        ));
    }
    causes
}

/// `helper.IsExtendedResourceName`: outside `kubernetes.io/` (and `requests.`), a qualified
/// name with a prefix, and still one after `requests.`.
fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    if native || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}")).is_empty()
}

// --- ResourceSlice -----------------------------------------------------------------------------

/// The node-selection fields of a slice, as `validateResourceSliceSpec` names them.
const NODE_SELECTION: &str =
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";

/// `ValidateResourceSlice` (`validateResourceSliceSpec` without an old spec).
pub(super) fn resource_slice(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes = driver_name(text(spec, "driver"), "spec.driver");
    let pool = &spec["pool"];
    causes.extend(pool_name(text(pool, "name"), "spec.pool.name"));
    let count = pool["resourceSliceCount"].as_i64().unwrap_or(0);
    if count <= 0 {
        causes.push(FieldError::invalid(
            "spec.pool.resourceSliceCount",
            count.to_string(),
            "must be greater than zero",
        ));
    }
    let generation = pool["generation"].as_i64().unwrap_or(0);
    if generation < 0 {
        let detail = "must be greater than or equal to zero";
        causes.push(FieldError::invalid("spec.pool.generation", generation.to_string(), detail));
    }
    causes.extend(node_selection(spec));
    if !spec["sharedCounters"].is_null() && !spec["devices"].is_null() {
        causes.push(FieldError::invalid("spec", quote(""), "only one of `sharedCounters` or `devices` is allowed"));
    }
    let devices = list(spec, "devices");
    let advanced = devices.iter().any(|d| !list(d, "taints").is_empty() || !list(d, "consumesCounters").is_empty());
    let max = if advanced { SLICE_MAX_DEVICES_ADVANCED } else { SLICE_MAX_DEVICES };
    match too_many(devices, max, "spec.devices") {
        Some(cause) => causes.push(cause),
        None => {
            for (i, device) in devices.iter().enumerate() {
                causes.extend(device_of_slice(device, &format!("spec.devices[{i}]"), spec));
            }
            let names: Vec<String> = devices.iter().map(|d| text(d, "name").to_string()).collect();
            causes.extend(duplicates(&names, "spec.devices"));
        }
    }
    causes
}

/// Exactly one way to say which nodes the slice's devices are on.
fn node_selection(spec: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let mut set = Vec::new();
    if let Some(node) = spec["nodeName"].as_str() {
        if node.is_empty() {
            causes.push(FieldError::invalid_str(
                "spec.nodeName",
                node,
                "must be either unset or set to a non-empty string",
            ));
        } else {
            set.push("`nodeName`");
            causes.extend(dns_subdomain(node, "spec.nodeName"));
        }
    }
    if spec["nodeSelector"].is_object() {
        set.push("`nodeSelector`");
        let terms = list(&spec["nodeSelector"], "nodeSelectorTerms");
        if terms.len() != 1 {
            let detail = "must have exactly one node selector term";
            let rendered = gojson::list(&spec["nodeSelector"]["nodeSelectorTerms"], gojson::NODE_SELECTOR_TERM).json();
            causes.push(FieldError::invalid("spec.nodeSelector.nodeSelectorTerms", rendered, detail));
        }
    }
    for flag in ["allNodes", "perDeviceNodeSelection"] {
        match spec[flag].as_bool() {
            Some(true) => set.push(if flag == "allNodes" { "`allNodes`" } else { "`perDeviceNodeSelection`" }),
            Some(false) => causes.push(FieldError::invalid(
                &format!("spec.{flag}"),
                "false".into(),
                "must be either unset or set to true",
            )),
            None => {}
        }
    }
    match set.len() {
        0 => causes.push(FieldError::required("spec", NODE_SELECTION)),
        1 => {}
        _ => {
            let detail = format!("{NODE_SELECTION}, but multiple fields are set");
            causes.push(FieldError::invalid("spec", quote(&format!("{{{}}}", set.join(", "))), &detail));
        }
    }
    causes
}

/// `validateDevice`, for what the controllers read: a DNS-label name, the taints, and node
/// selection per device only with `perDeviceNodeSelection`.
fn device_of_slice(device: &Value, path: &str, spec: &Value) -> Vec<FieldError> {
    let mut causes = dns_label(text(device, "name"), &format!("{path}.name"));
    let taints = list(device, "taints");
    let taints_path = format!("{path}.taints");
    match too_many(taints, DEVICE_TAINTS_MAX_LENGTH, &taints_path) {
        Some(cause) => causes.push(cause),
        None => {
            for (i, taint) in taints.iter().enumerate() {
                causes.extend(device_taint(taint, &format!("{taints_path}[{i}]")));
            }
        }
    }
    let per_device = spec["perDeviceNodeSelection"].as_bool() == Some(true);
    let selects = ["nodeName", "nodeSelector", "allNodes"].iter().any(|f| !device[*f].is_null());
    if !per_device && selects {
        let detail = "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
        causes.push(FieldError::invalid(path, "null".into(), detail));
    }
    causes
}

/// `validateDeviceTaint`: a label-name key, a label value, a known effect.
fn device_taint(taint: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = label_name(text(taint, "key"), &format!("{path}.key"));
    let value = text(taint, "value");
    if !value.is_empty() {
        causes.extend(label_value(value, &format!("{path}.value")));
    }
    match text(taint, "effect") {
        "" => causes.push(FieldError::required(&format!("{path}.effect"), "")),
        effect if !TAINT_EFFECTS.contains(&effect) => {
            causes.push(FieldError::not_supported(&format!("{path}.effect"), effect, TAINT_EFFECTS))
        }
        _ => {}
    }
    causes
}

/// `ValidateResourceSliceUpdate`: the pool's name, the driver and the node name stay.
pub(super) fn resource_slice_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let (old_spec, spec) = (&old["spec"], &new["spec"]);
    if old_spec["pool"]["name"] != spec["pool"]["name"] {
        causes.push(immutable("spec.pool.name", quote(text(&spec["pool"], "name"))));
    }
    if old_spec["driver"] != spec["driver"] {
        causes.push(immutable("spec.driver", quote(text(spec, "driver"))));
    }
    if old_spec["nodeName"] != spec["nodeName"] {
        let rendered = spec["nodeName"].as_str().map_or_else(|| "null".to_string(), quote);
        causes.push(immutable("spec.nodeName", rendered));
    }
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(causes: &[FieldError]) -> Vec<String> {
        causes.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn requests_need_one_shape_a_class_and_unique_names() {
        let spec = json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}},
            {"name": "gpu", "exactly": {"deviceClassName": "", "allocationMode": "All", "count": 2}},
            {"name": "Bad_Name"},
        ]}});
        assert_eq!(
            messages(&claim_spec(&spec, "spec")),
            [
                "spec.devices.requests[1].exactly.deviceClassName: Required value",
                "spec.devices.requests[1].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'",
                "spec.devices.requests[2].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.devices.requests[2]: Required value: exactly one of `exactly` or `firstAvailable` is required",
                "spec.devices.requests[1]: Duplicate value: \"gpu\"",
            ]
        );
    }

    #[test]
    fn constraints_and_config_name_existing_requests() {
        let spec = json!({"devices": {
            "requests": [{"name": "a", "firstAvailable": [{"name": "x", "deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}]}],
            "constraints": [{"requests": ["a/x", "b"], "matchAttribute": "example.com/numa"}],
            "config": [{"requests": ["a"], "opaque": {"driver": "d.example.com", "parameters": [1]}}],
        }});
        assert_eq!(
            messages(&claim_spec(&spec, "spec")),
            [
                format!("spec.devices.constraints[0].requests[1]: Invalid value: \"b\": {REQUEST_REF}"),
                "spec.devices.config[0].opaque.parameters: Invalid value: \"<value omitted>\": must be a valid JSON object"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn reservations_need_an_allocation_which_never_changes() {
        let claim = json!({"spec": {"devices": {"requests": [{"name": "gpu"}]}}, "status": {}});
        let mut reserved = claim.clone();
        reserved["status"]["reservedFor"] =
            json!([{"resource": "pods", "name": "p", "uid": "u"}, {"resource": "pods", "name": "q", "uid": "u"}]);
        assert_eq!(
            messages(&claim_status_update(&claim, &reserved)),
            [
                "status.reservedFor[1]: Duplicate value: \"u\"",
                "status.reservedFor: Forbidden: may not be specified when `allocated` is not set",
            ]
        );
        let mut allocated = claim.clone();
        allocated["status"]["allocation"] = json!({"devices": {"results": [
            {"request": "gpu", "driver": "d.example.com", "pool": "node-1", "device": "gpu-0"}]}});
        assert!(claim_status_update(&claim, &allocated).is_empty());
        let mut moved = allocated.clone();
        moved["status"]["allocation"]["devices"]["results"][0]["device"] = json!("gpu-1");
        assert_eq!(
            messages(&claim_status_update(&allocated, &moved)),
            [
                r#"status.allocation: Invalid value: {"Devices":{"Results":[{"Request":"gpu","Driver":"d.example.com","Pool":"node-1","Device":"gpu-1","AdminAccess":null,"Tolerations":null,"BindingConditions":null,"BindingFailureConditions":null,"ShareID":null,"ConsumedCapacity":null}],"Config":null},"NodeSelector":null,"AllocationTimestamp":null}: field is immutable"#
            ]
        );
    }

    #[test]
    fn slices_select_their_nodes_one_way() {
        let slice = json!({"spec": {"driver": "d.example.com", "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
            "nodeName": "n", "allNodes": true, "devices": [{"name": "d0", "taints": [{"key": "k", "effect": "Sometimes"}]}]}});
        assert_eq!(
            messages(&resource_slice(&slice)),
            [
                "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
                "spec.devices[0].taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoExecute\", \"NoSchedule\", \"None\"",
            ]
        );
    }
}
