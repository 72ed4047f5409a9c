//! Services (`ValidateService` in `pkg/apis/core/validation`): ports, selector, type, session
//! affinity and where `clusterIP: None` may appear.

use std::collections::HashSet;

use serde_json::Value;

use super::meta::{dns_label, int, labels, text};
use super::pod::{port_name_errors, port_number, protocol};
use super::{FieldError, items, quote};
use crate::apimachinery::validation::is_dns1123_subdomain;

/// `supportedServiceType`, sorted.
const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const SESSION_AFFINITIES: &[&str] = &["ClientIP", "None"];

/// `ValidateService`, for the fields covered here, in upstream's order.
pub(super) fn service(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let kind = text(spec, "type");
    let first_ip = spec["clusterIPs"][0].as_str().unwrap_or_else(|| text(spec, "clusterIP"));
    let headless = first_ip == "None";
    let ports = items(spec, "ports");
    let mut causes = Vec::new();
    if ports.is_empty() && !headless && kind != "ExternalName" {
        causes.push(FieldError::required("spec.ports", ""));
    }
    match kind {
        "NodePort" | "LoadBalancer" if headless => causes.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            quote(first_ip),
            &format!("may not be set to 'None' for {kind} services"),
        )),
        "ExternalName" => causes.extend(external_name(spec)),
        _ => {}
    }
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        causes.extend(service_port(port, ports.len() > 1, &mut names, &format!("spec.ports[{i}]")));
    }
    causes.extend(labels(&spec["selector"], "spec.selector"));
    match text(spec, "sessionAffinity") {
        "" => causes.push(FieldError::required("spec.sessionAffinity", "")),
        affinity if !SESSION_AFFINITIES.contains(&affinity) => {
            causes.push(FieldError::not_supported("spec.sessionAffinity", affinity, SESSION_AFFINITIES))
        }
        _ => {}
    }
    match kind {
        "" => causes.push(FieldError::required("spec.type", "")),
        kind if !SERVICE_TYPES.contains(&kind) => {
            causes.push(FieldError::not_supported("spec.type", kind, SERVICE_TYPES))
        }
        _ => {}
    }
    if kind == "ClusterIP" {
        for (i, port) in ports.iter().enumerate() {
            if int(port, "nodePort") != 0 {
                let field = format!("spec.ports[{i}].nodePort");
                causes.push(FieldError::forbidden(&field, "may not be used when `type` is 'ClusterIP'"));
            }
        }
    }
    causes.extend(duplicate_ports(ports));
    causes
}

/// An ExternalName service has no cluster IPs and a DNS name (a trailing dot allowed).
fn external_name(spec: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if !items(spec, "clusterIPs").is_empty() {
        causes.push(FieldError::forbidden("spec.clusterIPs", "may not be set for ExternalName services"));
    }
    let name = text(spec, "externalName");
    let cname = name.strip_suffix('.').unwrap_or(name);
    if cname.is_empty() {
        causes.push(FieldError::required("spec.externalName", ""));
    } else {
        causes.extend(
            is_dns1123_subdomain(cname).iter().map(|m| FieldError::invalid("spec.externalName", quote(cname), m)),
        );
    }
    causes
}

/// `validateServicePort`: names (required when there are several), port, protocol, target.
fn service_port<'a>(port: &'a Value, name_required: bool, names: &mut HashSet<&'a str>, at: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let name = text(port, "name");
    let name_field = format!("{at}.name");
    if name_required && name.is_empty() {
        causes.push(FieldError::required(&name_field, ""));
    } else if !name.is_empty() {
        causes.extend(dns_label(name, &name_field));
        if !names.insert(name) {
            causes.push(FieldError::duplicate(&name_field, quote(name)));
        }
    }
    causes.extend(port_number(int(port, "port"), &format!("{at}.port")));
    causes.extend(protocol(port, at));
    let target_field = format!("{at}.targetPort");
    match &port["targetPort"] {
        Value::String(target) => {
            causes.extend(port_name_errors(target).iter().map(|m| FieldError::invalid(&target_field, quote(target), m)))
        }
        other => causes.extend(port_number(other.as_i64().unwrap_or(0), &target_field)),
    }
    causes
}

/// No two ports with the same protocol and number.
fn duplicate_ports(ports: &[Value]) -> Vec<FieldError> {
    let mut seen = HashSet::new();
    let mut causes = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let (protocol, number) = (text(port, "protocol"), int(port, "port"));
        if !seen.insert((protocol, number)) {
            // The key compared, an internal `core.ServicePort` with the protocol and number, as
            // a field error shows it (JSON, Go's field names).
            let rendered = format!(
                "{{\"Name\":\"\",\"Protocol\":{},\"AppProtocol\":null,\"Port\":{number},\"TargetPort\":0,\"NodePort\":0}}",
                quote(protocol)
            );
            causes.push(FieldError::duplicate(&format!("spec.ports[{i}]"), rendered));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(object: &Value) -> Vec<String> {
        service(object).iter().map(|c| format!("{}: {}", c.field, c.body())).collect()
    }

    #[test]
    fn ports_need_names_when_several_and_valid_numbers() {
        let svc = json!({"spec": {"type": "ClusterIP", "sessionAffinity": "None", "ports": [
            {"port": 80, "protocol": "TCP", "targetPort": 80},
            {"port": 70000, "protocol": "HTTP", "targetPort": "web_port", "name": "b"}]}});
        assert_eq!(
            lines(&svc),
            [
                "spec.ports[0].name: Required value",
                "spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "spec.ports[1].targetPort: Invalid value: \"web_port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ]
        );
    }

    #[test]
    fn headless_only_for_cluster_ip_and_types_are_known() {
        let svc = json!({"spec": {"type": "NodePort", "clusterIP": "None", "sessionAffinity": "None",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}, {"port": 80, "protocol": "TCP", "targetPort": 81}]}});
        let found = lines(&svc);
        assert_eq!(
            found[0],
            "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"
        );
        assert_eq!(
            found.last().unwrap(),
            "spec.ports[1]: Duplicate value: {\"Name\":\"\",\"Protocol\":\"TCP\",\"AppProtocol\":null,\"Port\":80,\"TargetPort\":0,\"NodePort\":0}"
        );
        let unknown = json!({"spec": {"type": "Public", "sessionAffinity": "None", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}});
        assert_eq!(
            lines(&unknown),
            [
                "spec.type: Unsupported value: \"Public\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
            ]
        );
    }
}
