//! Pods and pod templates (`pkg/apis/core/validation`: `ValidatePodCreate`,
//! `ValidatePodTemplateSpec`, `ValidatePodSpec`, `validateContainers`): the rules controllers
//! depend on — containers, names, images, ports, resources, restart and DNS policies.

use std::collections::HashSet;

use serde_json::Value;

use super::meta::{annotations, dns_label, int, labels, sorted_entries, text};
use super::{FieldError, items, quote};
use crate::quantity::Quantity;

pub(super) const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
/// `supportedPortProtocols`, sorted as `sets.List` returns them.
pub(super) const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// `ValidatePod` (+ `ValidatePodCreate`'s container checks on create).
pub(super) fn pod(object: &Value, create: bool) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes = pod_spec(spec, "spec");
    if create {
        if !items(spec, "ephemeralContainers").is_empty() {
            causes.push(FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create"));
        }
        for (i, container) in items(spec, "containers").iter().enumerate() {
            let image = text(container, "image");
            if image.len() != image.trim().len() {
                let field = format!("spec.containers[{i}].image");
                causes.push(FieldError::invalid(&field, quote(image), "must not have leading or trailing whitespace"));
            }
        }
    }
    causes
}

/// `ValidatePodTemplateSpec` at `path` (e.g. `spec.template`).
pub(super) fn template(template: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = labels(&template["metadata"]["labels"], &format!("{path}.labels"));
    causes.extend(annotations(&template["metadata"]["annotations"], &format!("{path}.annotations")));
    causes.extend(pod_spec(&template["spec"], &format!("{path}.spec")));
    if !items(&template["spec"], "ephemeralContainers").is_empty() {
        let field = format!("{path}.spec.ephemeralContainers");
        causes.push(FieldError::forbidden(&field, "ephemeral containers not allowed in pod template"));
    }
    causes
}

/// `ValidatePodSpec`, in upstream's order, for the fields covered here.
fn pod_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = containers(spec, path);
    causes.extend(init_containers(spec, path));
    causes.extend(policy(spec, "restartPolicy", path, RESTART_POLICIES));
    causes.extend(policy(spec, "dnsPolicy", path, DNS_POLICIES));
    causes.extend(labels(&spec["nodeSelector"], &format!("{path}.nodeSelector")));
    if let Some(deadline) = spec["activeDeadlineSeconds"].as_i64()
        && !(1..=i64::from(i32::MAX)).contains(&deadline)
    {
        let field = format!("{path}.activeDeadlineSeconds");
        causes.push(FieldError::invalid(&field, deadline.to_string(), "must be between 1 and 2147483647, inclusive"));
    }
    for field in ["hostname", "subdomain"] {
        let value = text(spec, field);
        if !value.is_empty() {
            causes.extend(dns_label(value, &format!("{path}.{field}")));
        }
    }
    causes
}

/// A policy field with a fixed set of values (`validateRestartPolicy`, `validateDNSPolicy`,
/// `validatePullPolicy`): required, and one of `supported`.
fn policy(object: &Value, field: &str, path: &str, supported: &[&str]) -> Option<FieldError> {
    let value = text(object, field);
    let field = format!("{path}.{field}");
    if value.is_empty() {
        Some(FieldError::required(&field, ""))
    } else if !supported.contains(&value) {
        Some(FieldError::not_supported(&field, value, supported))
    } else {
        None
    }
}

/// `validateContainers`: at least one, each valid, names unique.
fn containers(spec: &Value, path: &str) -> Vec<FieldError> {
    let list = items(spec, "containers");
    let path = format!("{path}.containers");
    if list.is_empty() {
        return vec![FieldError::required(&path, "")];
    }
    let mut names = HashSet::new();
    let mut causes = Vec::new();
    for (i, container) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        causes.extend(container_common(container, &at));
        let name = text(container, "name");
        if !names.insert(name) {
            causes.push(FieldError::duplicate(&format!("{at}.name"), quote(name)));
        }
    }
    causes
}

/// `validateInitContainers`: names unique among init and regular containers.
fn init_containers(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut names: HashSet<&str> = items(spec, "containers").iter().map(|c| text(c, "name")).collect();
    let mut causes = Vec::new();
    for (i, container) in items(spec, "initContainers").iter().enumerate() {
        let at = format!("{path}.initContainers[{i}]");
        causes.extend(container_common(container, &at));
        let name = text(container, "name");
        if names.contains(name) {
            causes.push(FieldError::duplicate(&format!("{at}.name"), quote(name)));
        } else if !name.is_empty() {
            names.insert(name);
        }
    }
    causes
}

/// `validateContainerCommon`: name, image, ports, pull policy, resources.
fn container_common(container: &Value, at: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let name = text(container, "name");
    if name.is_empty() {
        causes.push(FieldError::required(&format!("{at}.name"), ""));
    } else {
        causes.extend(dns_label(name, &format!("{at}.name")));
    }
    if text(container, "image").is_empty() {
        causes.push(FieldError::required(&format!("{at}.image"), ""));
    }
    causes.extend(container_ports(container, at));
    causes.extend(policy(container, "imagePullPolicy", at, PULL_POLICIES));
    causes.extend(resources(&container["resources"], &format!("{at}.resources")));
    causes
}

/// `validateContainerPorts`.
fn container_ports(container: &Value, at: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let mut names = HashSet::new();
    for (i, port) in items(container, "ports").iter().enumerate() {
        let at = format!("{at}.ports[{i}]");
        let name = text(port, "name");
        if !name.is_empty() {
            let errors = port_name_errors(name);
            if !errors.is_empty() {
                causes.extend(errors.iter().map(|m| FieldError::invalid(&format!("{at}.name"), quote(name), m)));
            } else if !names.insert(name) {
                causes.push(FieldError::duplicate(&format!("{at}.name"), quote(name)));
            }
        }
        match int(port, "containerPort") {
            0 => causes.push(FieldError::required(&format!("{at}.containerPort"), "")),
            number => causes.extend(port_number(number, &format!("{at}.containerPort"))),
        }
        let host_port = int(port, "hostPort");
        if host_port != 0 {
            causes.extend(port_number(host_port, &format!("{at}.hostPort")));
        }
        causes.extend(protocol(port, &at));
    }
    causes
}

/// The protocol of a container or service port: required, one of [`PROTOCOLS`].
pub(super) fn protocol(port: &Value, at: &str) -> Option<FieldError> {
    policy(port, "protocol", at, PROTOCOLS)
}

/// `validation.IsValidPortNum` as a cause.
pub(super) fn port_number(number: i64, field: &str) -> Option<FieldError> {
    (!(1..=65535).contains(&number)).then(|| FieldError::invalid(field, number.to_string(), PORT_RANGE))
}

/// `validation.IsValidPortName` (an IANA service name).
pub(super) fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if name.len() > 15 {
        errors.push("must be no more than 15 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        errors.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errors.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("must not begin or end with a hyphen");
    }
    errors
}

/// `ValidateResourceRequirements`: quantities not negative; a request at most its limit, and
/// equal to it for resources that cannot be overcommitted (extended resources, hugepages).
fn resources(requirements: &Value, path: &str) -> Vec<FieldError> {
    let (limits_path, requests_path) = (format!("{path}.limits"), format!("{path}.requests"));
    let quantity = |value: &Value| Quantity::from_json(value);
    let mut causes = Vec::new();
    for (name, value) in sorted_entries(&requirements["limits"]) {
        causes.extend(negative_quantity(quantity(value), &format!("{limits_path}[{name}]")));
    }
    for (name, value) in sorted_entries(&requirements["requests"]) {
        let Some(request) = quantity(value) else { continue };
        causes.extend(negative_quantity(Some(request), &format!("{requests_path}[{name}]")));
        match requirements["limits"].get(name.as_str()).and_then(quantity) {
            Some(limit) if request != limit && !overcommit_allowed(name) => causes.push(FieldError::invalid(
                &requests_path,
                quote(&request.to_string()),
                &format!("must be equal to {name} limit of {limit}"),
            )),
            Some(limit) if request > limit => causes.push(FieldError::invalid(
                &requests_path,
                quote(&request.to_string()),
                &format!("must be less than or equal to {name} limit of {limit}"),
            )),
            Some(_) => {}
            None if !overcommit_allowed(name) => {
                causes.push(FieldError::required(&limits_path, "Limit must be set for non overcommitable resources"))
            }
            None => {}
        }
    }
    causes
}

fn negative_quantity(quantity: Option<Quantity>, field: &str) -> Option<FieldError> {
    let quantity = quantity.filter(Quantity::is_negative)?;
    Some(FieldError::invalid(field, quote(&quantity.to_string()), "must be greater than or equal to 0"))
}

/// `helper.IsOvercommitAllowed`: native resources other than hugepages.
fn overcommit_allowed(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    native && !name.starts_with("hugepages-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bodies(causes: &[FieldError]) -> Vec<String> {
        causes.iter().map(|c| format!("{}: {}", c.field, c.body())).collect()
    }

    #[test]
    fn containers_need_unique_valid_names_and_images() {
        let spec = json!({"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "containers": [
            {"name": "web", "image": "nginx", "imagePullPolicy": "Always"},
            {"name": "web", "imagePullPolicy": "Always"},
            {"name": "Bad_Name", "image": "x", "imagePullPolicy": "Sometimes"}]});
        assert_eq!(
            bodies(&pod_spec(&spec, "spec")),
            [
                "spec.containers[1].image: Required value",
                "spec.containers[1].name: Duplicate value: \"web\"",
                "spec.containers[2].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.containers[2].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
            ]
        );
        assert_eq!(
            bodies(&pod_spec(&json!({"restartPolicy": "Always", "dnsPolicy": "Default"}), "spec")),
            ["spec.containers: Required value"]
        );
    }

    #[test]
    fn ports_and_resources_are_checked() {
        let spec = json!({"restartPolicy": "Sometimes", "dnsPolicy": "ClusterFirst", "containers": [
            {"name": "c", "image": "x", "imagePullPolicy": "Never",
             "ports": [{"containerPort": 70000, "protocol": "TCP"}, {"containerPort": 80, "protocol": "HTTP", "name": "HTTP"}],
             "resources": {"limits": {"cpu": "1", "example.com/gpu": "1"}, "requests": {"cpu": "1500m", "example.com/gpu": "2"}}}]});
        assert_eq!(
            bodies(&pod_spec(&spec, "spec")),
            [
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.containers[0].ports[1].name: Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.containers[0].ports[1].name: Invalid value: \"HTTP\": must contain at least one letter (a-z)",
                "spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "spec.containers[0].resources.requests: Invalid value: \"1500m\": must be less than or equal to cpu limit of 1",
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be equal to example.com/gpu limit of 1",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ]
        );
    }
}
