//! ServiceCIDRs and IPAddresses (`pkg/apis/networking/validation`): `spec.cidrs` holds one or
//! two valid CIDRs in canonical form, one per family, fixed once created except for a second
//! family added to a single one; an IPAddress is named by a canonical IP and has a parent.

use std::net::IpAddr;

use serde_json::Value;

use super::{FieldError, gojson, immutable, quote};
use crate::apimachinery::net::Cidr;

const CIDR_EXAMPLE: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
const IP_EXAMPLE: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

fn cidrs(object: &Value) -> Vec<String> {
    let list = object["spec"]["cidrs"].as_array().cloned().unwrap_or_default();
    list.iter().map(|c| c.as_str().unwrap_or_default().to_string()).collect()
}

/// Go's `%#v` of a `[]string`.
/// A `[]string` as a field error shows it (JSON).
fn go_strings(values: &[String]) -> String {
    super::string_list_value(Some(values))
}

/// `validation.IsValidCIDR`: parses, has no bits past the prefix, is written canonically.
fn valid_cidr(path: &str, value: &str) -> Vec<FieldError> {
    let Ok(parsed) = Cidr::parse(value) else { return vec![FieldError::invalid_str(path, value, CIDR_EXAMPLE)] };
    let (address, _) = value.split_once('/').unwrap_or_default();
    if address.parse::<IpAddr>().ok() != Some(parsed.address) {
        return vec![FieldError::invalid_str(path, value, "must not have bits set beyond the prefix length")];
    }
    let canonical = parsed.to_string();
    if canonical != value {
        return vec![FieldError::invalid_str(
            path,
            value,
            &format!("must be in canonical form ({})", quote(&canonical)),
        )];
    }
    Vec::new()
}

/// `validateServiceCIDRSpec`.
fn service_cidr_spec(list: &[String]) -> Vec<FieldError> {
    const PATH: &str = "spec.cidrs";
    if list.is_empty() {
        return vec![FieldError::required(PATH, "at least one CIDR required")];
    }
    if list.len() > 2 {
        let spec = serde_json::json!({"cidrs": list});
        let rendered = gojson::structure(&spec, gojson::SERVICE_CIDR_SPEC).json();
        return vec![FieldError::invalid(PATH, rendered, "may only hold up to 2 values")];
    }
    let mut causes: Vec<FieldError> =
        list.iter().enumerate().flat_map(|(i, c)| valid_cidr(&format!("{PATH}[{i}]"), c)).collect();
    let family = |c: &str| Cidr::parse(c).ok().map(|c| c.is_ipv6());
    if list.len() == 2 && family(&list[0]).is_some() && family(&list[0]) == family(&list[1]) {
        let detail = "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64";
        causes.push(FieldError::invalid(PATH, go_strings(list), detail));
    }
    causes
}

/// `ValidateServiceCIDR`'s spec rules.
pub(super) fn service_cidr(object: &Value) -> Vec<FieldError> {
    service_cidr_spec(&cidrs(object))
}

/// `ValidateServiceCIDRUpdate`: the CIDRs are fixed, but a single-stack one may gain its
/// other family.
pub(super) fn service_cidr_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (before, after) = (cidrs(old), cidrs(new));
    if before.len() == after.len() {
        let changed = before.iter().zip(&after).enumerate().filter(|(_, (a, b))| a != b);
        return changed.map(|(i, (_, b))| immutable(&format!("spec.cidrs[{i}]"), quote(b))).collect();
    }
    if before.len() == 1 && after.len() == 2 {
        let mut causes = Vec::new();
        if after[0] != before[0] {
            causes.push(immutable("spec.cidrs[0]", quote(&after[0])));
        }
        causes.extend(service_cidr_spec(&after));
        return causes;
    }
    vec![immutable("spec.cidrs", go_strings(&after))]
}

/// `ValidateIPAddress`: the name is a canonical IP, the parent reference is given.
pub(super) fn ip_address(object: &Value) -> Vec<FieldError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let mut causes = Vec::new();
    match name.parse::<IpAddr>() {
        Err(_) => causes.push(FieldError::invalid_str("metadata.name", name, IP_EXAMPLE)),
        Ok(ip) if ip.to_string() != name => {
            let detail = format!("must be in canonical form ({})", quote(&ip.to_string()));
            causes.push(FieldError::invalid_str("metadata.name", name, &detail));
        }
        Ok(_) => {}
    }
    let parent = &object["spec"]["parentRef"];
    if !parent.is_object() {
        causes.push(FieldError::required("spec.parentRef", ""));
        return causes;
    }
    for field in ["resource", "name"] {
        if parent[field].as_str().unwrap_or_default().is_empty() {
            causes.push(FieldError::required(&format!("spec.parentRef.{field}"), ""));
        }
    }
    causes
}

/// `ValidateIPAddressUpdate`: the parent reference is fixed.
pub(super) fn ip_address_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (before, after) = (&old["spec"]["parentRef"], &new["spec"]["parentRef"]);
    if before == after {
        Vec::new()
    } else {
        vec![FieldError::invalid_json("spec.parentRef", after, "field is immutable")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn details(causes: &[FieldError]) -> Vec<String> {
        causes.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn service_cidr_rules() {
        let with = |cidrs: Value| json!({"spec": {"cidrs": cidrs}});
        assert!(service_cidr(&with(json!(["10.0.0.0/24", "fd00::/108"]))).is_empty());
        assert_eq!(
            details(&service_cidr(&with(json!([])))),
            ["spec.cidrs: Required value: at least one CIDR required"]
        );
        let same_family = service_cidr(&with(json!(["10.0.0.0/24", "10.1.0.0/24"])));
        assert!(details(&same_family)[0].contains("may specify no more than one IP for each IP family"));
        assert!(details(&service_cidr(&with(json!(["10.0.0.1/24"]))))[0].contains("bits set beyond"));
        assert!(details(&service_cidr(&with(json!(["nonsense"]))))[0].contains("must be a valid CIDR value"));
        let old = with(json!(["10.0.0.0/24"]));
        assert!(service_cidr_update(&old, &with(json!(["10.0.0.0/24", "fd00::/108"]))).is_empty());
        assert!(details(&service_cidr_update(&old, &with(json!(["10.0.1.0/24"]))))[0].contains("field is immutable"));
    }

    #[test]
    fn ip_address_rules() {
        let parent = json!({"group": "", "resource": "services", "namespace": "default", "name": "web"});
        assert!(ip_address(&json!({"metadata": {"name": "10.0.0.5"}, "spec": {"parentRef": parent}})).is_empty());
        let missing = ip_address(&json!({"metadata": {"name": "10.0.0.5"}, "spec": {}}));
        assert_eq!(details(&missing), ["spec.parentRef: Required value"]);
        let bad = ip_address(&json!({"metadata": {"name": "2001:DB8::1"}, "spec": {"parentRef": parent}}));
        assert!(details(&bad)[0].contains("must be in canonical form"));
    }
}
